//! Reading sessions and transcript rows out of an agent database, read-only: the session
//! nodes (`session_nodes`: key, current session id, the JSON-era entry in `entry_json`) and a
//! transcript's rows (`transcript_events`: one row per JSONL line of the JSON era, the event
//! as `JSON.stringify` writes it, since the import re-serialises each line; from schema 23 a
//! row may hold zstd-compressed bytes in `event_zstd` instead).
//! Rows stream through a [`Read`] so that a transcript is never held whole.

use std::io::Read;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

/// One row of `session_nodes`.
#[derive(Debug, Clone)]
pub struct SessionNode {
    pub key: String,
    pub session_id: String,
    /// `entry_json` parsed (`Value::Null` when it does not parse).
    pub entry: Value,
    /// Bytes of `entry_json`.
    pub entry_bytes: u64,
    /// `updated_at`, ms since the epoch.
    pub updated_at: i64,
    pub archived_at: Option<i64>,
    pub pinned_at: Option<i64>,
}

/// Visit every session node, in key order, one at a time: an entry can be hundreds of
/// kilobytes (a skills snapshot copied into every entry), so they are never all held.
pub fn for_each_session_node(conn: &Connection, mut f: impl FnMut(SessionNode)) -> Result<()> {
    let mut stmt = conn.prepare(
        "SELECT session_key, current_session_id, entry_json, updated_at, archived_at, pinned_at \
         FROM session_nodes ORDER BY session_key",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next().context("cannot read session_nodes")? {
        let json = r.get_ref(2)?.as_str().unwrap_or("");
        f(SessionNode {
            key: r.get(0)?,
            session_id: r.get(1)?,
            entry: crate::jsjson::parse(json.as_bytes()).unwrap_or(Value::Null),
            entry_bytes: json.len() as u64,
            updated_at: r.get(3)?,
            archived_at: r.get(4)?,
            pinned_at: r.get(5)?,
        });
    }
    Ok(())
}

/// Whether the database has a table `name`.
pub fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether `transcript_events` has the compressed-row columns (schema 23 and later).
pub fn has_compressed_rows(conn: &Connection) -> Result<bool> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('transcript_events') WHERE name = 'event_zstd'",
        [],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// Call `f` with a reader that yields the transcript of `session_id` as the JSON era's JSONL
/// (each row's event text and a newline, in `seq` order; compressed rows decompressed).
pub fn with_transcript<T>(
    conn: &Connection,
    session_id: &str,
    f: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
) -> Result<T> {
    let sql = if has_compressed_rows(conn)? {
        "SELECT event_json, event_zstd, event_utf8_bytes FROM transcript_events \
         WHERE session_id = ?1 ORDER BY seq"
    } else {
        "SELECT event_json, NULL, NULL FROM transcript_events WHERE session_id = ?1 ORDER BY seq"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query([session_id])?;
    let mut reader = RowLines {
        rows,
        buf: Vec::new(),
        pos: 0,
        zstd: None,
    };
    f(&mut reader).with_context(|| format!("cannot read the transcript rows of {session_id}"))
}

/// The row of `session_id` at `seq` as its JSONL line (its event text and a newline; a
/// compressed row decompressed): what [`with_transcript`] yields for that row.
pub fn row_line(conn: &Connection, session_id: &str, seq: i64) -> Result<Vec<u8>> {
    let sql = if has_compressed_rows(conn)? {
        "SELECT event_json, event_zstd, event_utf8_bytes FROM transcript_events \
         WHERE session_id = ?1 AND seq = ?2"
    } else {
        "SELECT event_json, NULL, NULL FROM transcript_events WHERE session_id = ?1 AND seq = ?2"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query(rusqlite::params![session_id, seq])?;
    let mut reader = RowLines {
        rows,
        buf: Vec::new(),
        pos: 0,
        zstd: None,
    };
    let mut line = Vec::new();
    reader
        .read_to_end(&mut line)
        .with_context(|| format!("cannot read row {seq} of {session_id}"))?;
    Ok(line)
}

/// A [`Read`] over query rows `(event_json, event_zstd, event_utf8_bytes)`, one line per row.
struct RowLines<'s> {
    rows: rusqlite::Rows<'s>,
    buf: Vec<u8>,
    pos: usize,
    /// One decompression context for every compressed row (creating one per row costs more
    /// than decompressing a small row).
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

impl RowLines<'_> {
    /// Load the next row into `buf`; false at the end.
    fn next_row(&mut self) -> std::io::Result<bool> {
        let to_io = |e: rusqlite::Error| std::io::Error::other(e);
        let Some(row) = self.rows.next().map_err(to_io)? else {
            return Ok(false);
        };
        self.buf.clear();
        self.pos = 0;
        match row.get_ref(0).map_err(to_io)? {
            rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                self.buf.extend_from_slice(t)
            }
            _ => {
                if let rusqlite::types::ValueRef::Blob(z) = row.get_ref(1).map_err(to_io)? {
                    // The row's uncompressed size is recorded beside it (at most 4 MiB, a
                    // CHECK of the table); a frame that says otherwise is an error.
                    let size: Option<i64> = row.get(2).map_err(to_io)?;
                    let size = size
                        .and_then(|n| usize::try_from(n).ok())
                        .unwrap_or(4 << 20);
                    if self.zstd.is_none() {
                        self.zstd = Some(zstd::bulk::Decompressor::new()?);
                    }
                    let d = self.zstd.as_mut().expect("set above");
                    self.buf.reserve(size + 1);
                    d.decompress_to_buffer(z, &mut self.buf)?;
                }
            }
        }
        self.buf.push(b'\n');
        Ok(true)
    }
}

impl Read for RowLines<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.buf.len() {
            if !self.next_row()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
