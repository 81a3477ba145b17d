//! The session window an entry write leaves, as 2026.9.6's `writeSessionEntry` writes it for
//! an entry archived in place: the window of the entry's `sessionId` (whichever key owns it)
//! gets the entry's projection (`bindSessionRoot`, `bindSessionWindowEntryProjection`), its
//! provenance merged with the stored one (`resolveSessionEntryProvenanceRow`), through the
//! `retainWindow` upsert, which keeps the window's owner and creation time.
//!
//! The window's `primary_conversation_id` is the conversation the write links
//! (`super::conversation`), if it is the session's primary one.

use anyhow::Result;
use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use serde_json::Value;

use crate::config::js_truthy;
use crate::js::js_trim;
// `normalizeText` is `normalizeOptionalString`.
use crate::store::delivery::opt_str as text;

/// `finiteSqliteNumber`; numbers are bound as the runtime's SQLite binding binds them, as
/// doubles (an integer column stores an integral one as an integer).
fn finite(v: Option<&Value>) -> Sql {
    v.and_then(Value::as_f64)
        .filter(|f| f.is_finite())
        .map_or(Sql::Null, Sql::Real)
}

fn opt(s: Option<String>) -> Sql {
    s.map_or(Sql::Null, Sql::Text)
}

fn opt_str(s: Option<&str>) -> Sql {
    opt(s.map(str::to_owned))
}

/// `normalizeSessionRowChatType`.
fn chat_type(e: &Value) -> Option<&str> {
    e.get("chatType")
        .and_then(Value::as_str)
        .filter(|c| matches!(*c, "direct" | "group" | "channel"))
}

/// `resolveSqliteSessionScope`.
pub(super) fn scope(e: &Value, key: &str) -> &'static str {
    let key = js_trim(key).to_lowercase();
    match chat_type(e) {
        Some("direct") if key == "main" || key.ends_with(":main") => "shared-main",
        Some("group") => "group",
        Some("channel") => "channel",
        _ => "conversation",
    }
}

/// `normalizeStatus`.
fn status(e: &Value) -> Option<&str> {
    match e.get("status").and_then(Value::as_str)? {
        "interrupted" => Some("failed"),
        s @ ("running" | "done" | "failed" | "killed" | "timeout") => Some(s),
        _ => None,
    }
}

/// The entry's `delivery` when it is external (`deliveryContextFromSession` and its kin).
pub(super) fn external(e: &Value) -> Option<&Value> {
    e.get("delivery")
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("external"))
}

/// `resolveSqliteSessionChannel`: the delivery context's channel, else its origin's provider.
fn channel(e: &Value) -> Option<String> {
    let d = external(e)?;
    let from_context = d.get("context").and_then(|c| c.get("channel"));
    match from_context.filter(|c| !c.is_null()) {
        Some(c) => text(Some(c)),
        None => text(d.get("origin").and_then(|o| o.get("provider"))),
    }
}

/// `bindSessionEntryProvenance`'s hook source.
fn hook_source(e: &Value) -> Option<&'static str> {
    match e.get("hookExternalContentSource").and_then(Value::as_str)? {
        "email" | "webhook" => Some("webhook"),
        "gmail" => Some("gmail"),
        _ => None,
    }
}

/// What an entry write reads of the window it writes.
struct Stored {
    provenance: Option<i64>,
    acp: Option<i64>,
    plugin: Option<String>,
    hook: Option<String>,
}

/// The columns the `retainWindow` upsert sets on a conflict, in its order: all it inserts
/// but the owner (`session_key`), `session_id` and `created_at`.
const RETAINED: [&str; 22] = [
    "previous_session_id",
    "reason",
    "session_scope",
    "transcript_observed_at",
    "session_entry_provenance",
    "acp_owned",
    "plugin_owner_id",
    "hook_external_content_source",
    "updated_at",
    "started_at",
    "ended_at",
    "status",
    "chat_type",
    "channel",
    "account_id",
    "primary_conversation_id",
    "model_provider",
    "model",
    "agent_harness_id",
    "parent_session_key",
    "spawned_by",
    "display_name",
];

/// Write the window of `e` (written under `key`, its `updatedAt` being `updated_at`) as the
/// runtime's entry write does, in the caller's transaction, with `conversation` as its primary
/// conversation. `present` are the columns of `session_windows`; the row sets those of them it
/// knows.
pub(super) fn write(
    tx: &Connection,
    present: &[String],
    key: &str,
    e: &Value,
    updated_at: f64,
    conversation: Option<&str>,
) -> Result<()> {
    let Some(sid) = e.get("sessionId").and_then(Value::as_str) else {
        return Ok(());
    };
    let stored = tx
        .query_row(
            "SELECT session_entry_provenance, acp_owned, plugin_owner_id, \
             hook_external_content_source FROM session_windows WHERE session_id = ?1",
            [sid],
            |r| {
                Ok(Stored {
                    provenance: r.get(0)?,
                    acp: r.get(1)?,
                    plugin: r.get(2)?,
                    hook: r.get(3)?,
                })
            },
        )
        .optional()?;
    // `bindSessionEntryProvenance`, then merged with the stored provenance: a window the
    // runtime did not create from an entry stays so (the entry keeps its session id).
    let mut provenance = 1i64;
    let mut acp = i64::from(e.get("acp").is_some_and(js_truthy));
    let mut plugin = text(e.get("pluginOwnerId"));
    let mut hook = hook_source(e).map(str::to_owned);
    match &stored {
        Some(w) if w.provenance == Some(0) => {
            provenance = 0;
            acp = 0;
            plugin = None;
            hook = None;
        }
        Some(w) if w.provenance == Some(1) => {
            if w.acp == Some(1) {
                acp = 1;
            }
            plugin = plugin.or_else(|| w.plugin.clone());
            hook = hook.or_else(|| w.hook.clone());
        }
        _ => {}
    }
    let display_name = ["displayName", "label", "subject", "groupId"]
        .iter()
        .find_map(|k| text(e.get(*k)));
    let created_at = ["sessionStartedAt", "startedAt", "updatedAt"]
        .iter()
        .filter_map(|k| e.get(*k).and_then(Value::as_f64))
        .find(|f| f.is_finite() && *f >= 0.0)
        .unwrap_or(updated_at);
    let row: Vec<(&str, Sql)> = vec![
        ("session_id", Sql::Text(sid.to_owned())),
        ("session_key", Sql::Text(key.to_owned())),
        ("reason", Sql::Null),
        ("created_at", Sql::Real(created_at)),
        ("updated_at", Sql::Real(updated_at)),
        ("session_entry_provenance", Sql::Integer(provenance)),
        ("acp_owned", Sql::Integer(acp)),
        ("plugin_owner_id", opt(plugin)),
        ("hook_external_content_source", opt(hook)),
        ("previous_session_id", opt(text(e.get("previousSessionId")))),
        ("session_scope", Sql::Text(scope(e, key).to_owned())),
        ("started_at", finite(e.get("startedAt"))),
        ("ended_at", finite(e.get("endedAt"))),
        ("status", opt_str(status(e))),
        ("chat_type", opt_str(chat_type(e))),
        ("channel", opt(channel(e))),
        (
            "account_id",
            opt(text(
                external(e).and_then(|d| d.get("context")?.get("accountId")),
            )),
        ),
        ("model_provider", opt(text(e.get("modelProvider")))),
        ("model", opt(text(e.get("model")))),
        ("agent_harness_id", opt(text(e.get("agentHarnessId")))),
        ("parent_session_key", opt(text(e.get("parentSessionKey")))),
        ("spawned_by", opt(text(e.get("spawnedBy")))),
        ("display_name", opt(display_name)),
        ("primary_conversation_id", opt_str(conversation)),
    ];
    let has = |c: &str| present.iter().any(|p| p == c);
    let row: Vec<(&str, Sql)> = row.into_iter().filter(|(c, _)| has(c)).collect();
    let mut columns: Vec<&str> = row.iter().map(|(c, _)| *c).collect();
    let mut values: Vec<String> = (1..=row.len()).map(|n| format!("?{n}")).collect();
    // The observed transcript time is the stored transcript's, else the entry's (`?1` is the
    // session id, first in the row).
    if has("transcript_observed_at") {
        let updated = row
            .iter()
            .position(|(c, _)| *c == "updated_at")
            .map_or("NULL".to_owned(), |n| format!("?{}", n + 1));
        columns.push("transcript_observed_at");
        values.push(if has("transcript_updated_at") {
            format!(
                "coalesce((SELECT transcript_updated_at FROM session_windows \
                 WHERE session_id = ?1), {updated})"
            )
        } else {
            updated
        });
    }
    let set: Vec<String> = RETAINED
        .iter()
        .filter(|c| columns.contains(c))
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    let sql = format!(
        "INSERT INTO session_windows ({}) VALUES ({}) ON CONFLICT(session_id) DO UPDATE SET {}",
        columns.join(", "),
        values.join(", "),
        set.join(", ")
    );
    tx.execute(&sql, params_from_iter(row.into_iter().map(|(_, v)| v)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_projection_normalizes_as_the_release_does() {
        let e = json!({"chatType": "direct"});
        assert_eq!(scope(&e, " Agent:Main:MAIN "), "shared-main");
        assert_eq!(scope(&e, "agent:main:telegram:direct:1"), "conversation");
        assert_eq!(scope(&json!({"chatType": "group"}), "main"), "group");
        assert_eq!(scope(&json!({"chatType": "Group"}), "main"), "conversation");
        assert_eq!(status(&json!({"status": "interrupted"})), Some("failed"));
        assert_eq!(status(&json!({"status": "paused"})), None);
        assert_eq!(text(Some(&json!("\u{feff} x \n"))), Some("x".into()));
        assert_eq!(text(Some(&json!("  "))), None);
        assert_eq!(text(Some(&json!(7))), None);
        assert!(matches!(finite(Some(&json!(1.5))), Sql::Real(f) if f == 1.5));
        assert!(matches!(finite(Some(&json!("1"))), Sql::Null));
    }

    #[test]
    fn the_channel_is_the_contexts_else_the_origins_of_an_external_delivery() {
        let ext = |d: Value| json!({"delivery": d});
        let both = ext(
            json!({"kind": "external", "context": {"channel": " slack "},
            "origin": {"provider": "telegram"}}),
        );
        assert_eq!(channel(&both).as_deref(), Some("slack"));
        let null = ext(json!({"kind": "external", "context": {"channel": null},
            "origin": {"provider": "telegram"}}));
        assert_eq!(channel(&null).as_deref(), Some("telegram"));
        // An empty channel is not absent: it is read, and normalizes to none.
        let empty = ext(json!({"kind": "external", "context": {"channel": ""},
            "origin": {"provider": "telegram"}}));
        assert_eq!(channel(&empty), None);
        let none = ext(json!({"kind": "none", "context": {"channel": "slack"}}));
        assert_eq!(channel(&none), None);
    }

    /// The database after `e` is archived in place under the key `archived`, over a stored
    /// window `s1` owned by `owner` with `stored_provenance`, a conversation `conv-1`, and,
    /// when `transcript_time`, a stored transcript time 7; the write links `conversation`.
    fn written(
        stored_provenance: i64,
        transcript_time: bool,
        e: Value,
        conversation: Option<&str>,
    ) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE session_windows (session_id TEXT PRIMARY KEY, session_key TEXT,
               reason TEXT, created_at INTEGER, updated_at INTEGER,
               session_entry_provenance INTEGER, acp_owned INTEGER, plugin_owner_id TEXT,
               hook_external_content_source TEXT, previous_session_id TEXT, session_scope TEXT,
               started_at INTEGER, ended_at INTEGER, status TEXT, chat_type TEXT, channel TEXT,
               account_id TEXT, model_provider TEXT, model TEXT, agent_harness_id TEXT,
               parent_session_key TEXT, spawned_by TEXT, display_name TEXT,
               primary_conversation_id TEXT, transcript_observed_at INTEGER{});",
            if transcript_time {
                ", transcript_updated_at INTEGER"
            } else {
                ""
            }
        ))
        .unwrap();
        conn.execute(
            "INSERT INTO session_windows (session_id, session_key, created_at, updated_at,
               session_entry_provenance, acp_owned, plugin_owner_id, display_name,
               primary_conversation_id)
             VALUES ('s1', 'owner', 5, 10, ?1, 1, 'stored-plugin', 'old', 'conv-1')",
            [stored_provenance],
        )
        .unwrap();
        if transcript_time {
            conn.execute("UPDATE session_windows SET transcript_updated_at = 7", [])
                .unwrap();
        }
        let present = crate::agentdb::cleanup::write::columns(&conn, "session_windows").unwrap();
        write(&conn, &present, "archived", &e, 99.0, conversation).unwrap();
        conn
    }

    fn column<T: rusqlite::types::FromSql>(conn: &Connection, c: &str) -> T {
        conn.query_row(
            &format!("SELECT {c} FROM session_windows WHERE session_id = 's1'"),
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn the_window_takes_the_entrys_projection_and_keeps_its_owner_and_provenance() {
        let e = json!({"sessionId": "s1", "label": " Archived ", "acp": false});
        // An entry-made window: the stored ACP ownership and plugin owner stay.
        let db = written(1, true, e.clone(), None);
        assert_eq!(column::<String>(&db, "session_key"), "owner");
        assert_eq!(column::<i64>(&db, "created_at"), 5);
        assert_eq!(column::<String>(&db, "display_name"), "Archived");
        assert_eq!(column::<i64>(&db, "updated_at"), 99);
        assert_eq!(column::<i64>(&db, "acp_owned"), 1);
        assert_eq!(
            column::<Option<String>>(&db, "plugin_owner_id").as_deref(),
            Some("stored-plugin")
        );
        // A window the runtime made otherwise keeps no provenance of the entry.
        let db = written(0, true, e, None);
        assert_eq!(column::<i64>(&db, "acp_owned"), 0);
        assert_eq!(column::<Option<String>>(&db, "plugin_owner_id"), None);
    }

    #[test]
    fn the_observed_transcript_time_is_the_stored_transcripts_else_the_entrys() {
        let e = json!({"sessionId": "s1"});
        assert_eq!(
            column::<i64>(&written(1, true, e.clone(), None), "transcript_observed_at"),
            7
        );
        assert_eq!(
            column::<i64>(&written(1, false, e, None), "transcript_observed_at"),
            99
        );
    }

    #[test]
    fn the_window_names_the_conversation_the_write_links() {
        // None linked (no external delivery, or not the primary one): the upsert clears it.
        let none = json!({"sessionId": "s1", "delivery": {"kind": "none"}});
        let db = written(1, true, none, None);
        assert_eq!(
            column::<Option<String>>(&db, "primary_conversation_id"),
            None
        );
        let external = json!({"sessionId": "s1", "delivery": {"kind": "external",
            "context": {"channel": "telegram", "accountId": " a1 "}}});
        let db = written(1, true, external, Some("conv-2"));
        assert_eq!(
            column::<Option<String>>(&db, "primary_conversation_id").as_deref(),
            Some("conv-2")
        );
        assert_eq!(column::<String>(&db, "channel"), "telegram");
        assert_eq!(column::<String>(&db, "account_id"), "a1");
    }
}
