//! The row writer of [`super::transcripts`] on a database with the runtime's tables (schema 19
//! columns, the runtime's foreign keys): it refuses a connection that does not enforce foreign
//! keys, and with them on, a removed row's identity row goes with it by cascade.

use std::path::Path;

use rusqlite::Connection;

use super::transcripts::{self, RowColumns};
use crate::transcript::Index;
use crate::transcript::job::{PlanError, Planned, Status};
use crate::transcript::tree::Tree;
use crate::transcript::values::Transcript;

/// The runtime's tables a rewrite touches, with their foreign keys (`dist/` of 2026.8.x).
const SCHEMA: &str = "
CREATE TABLE session_nodes (
  session_key TEXT NOT NULL PRIMARY KEY,
  current_session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_windows (
  session_id TEXT NOT NULL PRIMARY KEY,
  session_key TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  transcript_updated_at INTEGER DEFAULT NULL,
  transcript_observed_at INTEGER DEFAULT NULL,
  FOREIGN KEY (session_key) REFERENCES session_nodes(session_key) ON DELETE CASCADE
) STRICT;
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES session_windows(session_id) ON DELETE CASCADE
) STRICT;
CREATE TABLE transcript_event_identities (
  session_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_type TEXT,
  parent_id TEXT,
  message_idempotency_key TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, event_id),
  FOREIGN KEY (session_id, seq) REFERENCES transcript_events(session_id, seq) ON DELETE CASCADE
) STRICT;
CREATE TABLE transcript_rewrite_watermarks (
  session_id TEXT NOT NULL PRIMARY KEY,
  generation TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  FOREIGN KEY (session_id) REFERENCES session_windows(session_id) ON DELETE CASCADE
) STRICT;
CREATE TABLE session_transcript_index_state (
  session_id TEXT NOT NULL PRIMARY KEY,
  indexed_seq INTEGER NOT NULL,
  leaf_event_id TEXT,
  needs_rebuild INTEGER NOT NULL DEFAULT 0,
  active_event_count INTEGER NOT NULL DEFAULT 0,
  active_message_count INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  FOREIGN KEY (session_id) REFERENCES session_windows(session_id) ON DELETE CASCADE
) STRICT;
";

/// The session's rows: a header, then `a` ← `b` (a silent reply) ← `c`.
const LINES: [&str; 4] = [
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/"}"#,
    r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"x"}}"#,
    r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"assistant","content":"NO_REPLY"}}"#,
    r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"y"}}"#,
];

/// A database holding session `s` (key `agent:main:main`) with [`LINES`] and their identities.
fn database() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let conn = Connection::open(dir.path().join(super::FILE_NAME)).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    conn.execute_batch(
        "INSERT INTO session_nodes VALUES ('agent:main:main', 's', '{}', 1);
         INSERT INTO session_windows (session_id, session_key, created_at, updated_at, \
         transcript_updated_at) VALUES ('s', 'agent:main:main', 1, 1, 1);
         INSERT INTO transcript_rewrite_watermarks VALUES ('s', 'g0', 1);",
    )
    .unwrap();
    for (seq, line) in LINES.iter().enumerate() {
        conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) \
             VALUES ('s', ?1, ?2, 1)",
            rusqlite::params![seq as i64, line],
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        conn.execute(
            "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, \
             parent_id, created_at) VALUES ('s', ?1, ?2, ?3, ?4, 1)",
            rusqlite::params![
                v["id"].as_str(),
                seq as i64,
                v["type"].as_str(),
                v["parentId"].as_str()
            ],
        )
        .unwrap();
    }
    (dir, conn)
}

fn remove_b(_: &dyn Transcript, index: &Index, tree: &Tree) -> Result<Planned, PlanError> {
    let mut p = Planned::default();
    p.edits.remove.insert(tree.find(index, "b").unwrap());
    Ok(p)
}

/// Every row of the tables a rewrite writes, as text.
fn rows(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT seq || ' ' || event_json FROM transcript_events ORDER BY seq",
        "SELECT event_id || ' ' || seq || ' ' || coalesce(parent_id, '-') \
         FROM transcript_event_identities ORDER BY event_id",
        "SELECT generation FROM transcript_rewrite_watermarks",
        "SELECT 'state ' || needs_rebuild FROM session_transcript_index_state",
        "SELECT 'window ' || coalesce(transcript_updated_at, '-') FROM session_windows",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let got = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        out.extend(got.map(Result::unwrap));
    }
    out
}

#[test]
fn the_row_writer_refuses_a_connection_without_foreign_keys() {
    let (_dir, conn) = database();
    let path = Path::new("openclaw-agent.sqlite#s");
    let (mut out, plan) = transcripts::plan(&conn, path, "s", None, &remove_b);
    assert_eq!(out.status, Status::WouldChange, "{out:?}");
    let plan = plan.expect("a plan");
    let cols = RowColumns::of(&conn).unwrap();
    let before = rows(&conn);

    // A connection opened elsewhere than `open_read_write` (foreign keys are off by default).
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    transcripts::write(&conn, cols, &plan, &mut out);
    match &out.status {
        Status::Failed(why) => assert!(
            why.contains("foreign keys are not enforced") && why.contains("nothing written"),
            "{why}"
        ),
        other => panic!("written without foreign keys: {other:?}"),
    }
    assert_eq!(rows(&conn), before, "nothing was written");
    assert!(conn.is_autocommit(), "no transaction left open");

    // With them on, the same plan writes, and `b`'s identity row goes with its event row.
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    transcripts::write(&conn, cols, &plan, &mut out);
    assert_eq!(out.status, Status::Changed, "{out:?}");
    let after = rows(&conn);
    assert!(!after.iter().any(|r| r.starts_with("2 ")), "{after:#?}");
    assert!(!after.iter().any(|r| r.starts_with("b ")), "{after:#?}");
    assert!(after.contains(&"c 3 a".to_string()), "{after:#?}");
    assert!(after.contains(&"state 1".to_string()), "{after:#?}");
    assert!(!after.contains(&"g0".to_string()), "the generation rotated");
}
