//! The conversation an entry write links to the entry's session, for an entry archived in
//! place: `writeSessionEntry` (2026.8.2 and 2026.9.x) derives the transport address of an
//! entry whose delivery is external (`conversationIdentityFromSessionEntry`), keeps the stored
//! identity of a conversation the session already has at that address
//! (`preserveSessionConversationIdentity`), upserts it (`upsertConversationIdentity`) before
//! the session's window, whose `primary_conversation_id` it becomes, and links it to the
//! session after the window (`linkSessionConversation`). Maintenance passes no route context.
//!
//! Even when nothing changes, these statements rewrite the rows, and so the pages the
//! release's transaction leaves in the WAL, which the disk budget measures.

use anyhow::Result;
use rusqlite::types::Value as Sql;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use serde_json::{Value, json};

use super::window::external;
use crate::js::{js_trim, utf16_len, utf16_prefix};
use crate::store::delivery::{account_id, opt_str as text};

/// A conversation's identity, as a row of `conversations` holds it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Identity {
    pub conversation_ref: String,
    channel: String,
    account_id: String,
    kind: &'static str,
    peer_id: String,
    delivery_target: String,
    parent: Option<String>,
    thread_id: Option<String>,
    native_channel_id: Option<String>,
    native_direct_user_id: Option<String>,
    label: Option<String>,
    /// `metadata_json` as the release writes it (`JSON.stringify` of the stored object).
    metadata: Option<String>,
}

/// What an entry write links: the identity, and whether it is the session's primary
/// conversation (a shared main session's direct peers are participants).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Link {
    pub identity: Identity,
    pub primary: bool,
}

impl Link {
    /// The window's `primary_conversation_id`.
    pub fn primary_ref(&self) -> Option<&str> {
        self.primary
            .then_some(self.identity.conversation_ref.as_str())
    }
}

/// `normalizeChatType`.
fn chat_type(v: Option<&Value>) -> Option<&'static str> {
    match text(v)?.to_lowercase().as_str() {
        "direct" | "dm" => Some("direct"),
        "group" => Some("group"),
        "channel" => Some("channel"),
        _ => None,
    }
}

/// `normalizeKind` (of the entry's `chatType`, a string or nothing).
fn kind(v: Option<&Value>) -> &'static str {
    match chat_type(v.filter(|v| v.is_string())) {
        Some(k @ ("channel" | "group")) => k,
        _ => "direct",
    }
}

/// `normalizeThreadId`: a finite number as JavaScript writes it, else a non-blank string.
fn thread_id(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .map(crate::jsjson::js_number),
        v => text(v),
    }
}

/// Member `k` of an object that may be absent.
fn field<'a>(v: Option<&'a Value>, k: &str) -> Option<&'a Value> {
    v.and_then(|v| v.get(k))
}

/// `normalizeOptionalAccountId(v) ?? "default"`.
fn account_or_default(v: Option<&Value>) -> String {
    account_id(v).unwrap_or_else(|| "default".to_owned())
}

/// `normalizeConversationPeerId`.
fn peer_id(channel: &str, value: &str) -> String {
    let mut normalized = js_trim(value);
    let prefix = format!("{}:", js_trim(channel).to_lowercase());
    if normalized.to_lowercase().starts_with(&prefix) {
        // `slice(prefix.length)`, where that length falls between two characters.
        let units = utf16_len(&prefix);
        let head = utf16_prefix(normalized, units as usize);
        if utf16_len(head) == units {
            normalized = js_trim(&normalized[head.len()..]);
        }
    }
    // `/^(user|channel|group|conversation|room|dm|thread):/i`
    for word in [
        "user",
        "channel",
        "group",
        "conversation",
        "room",
        "dm",
        "thread",
    ] {
        let b = normalized.as_bytes();
        if b.len() > word.len()
            && b[..word.len()].eq_ignore_ascii_case(word.as_bytes())
            && b[word.len()] == b':'
        {
            normalized = &normalized[word.len() + 1..];
            break;
        }
    }
    js_trim(normalized).to_owned()
}

/// `buildConversationRef`: `conv_` and 32 hex digits of the SHA-256 of the address as a JSON
/// array.
fn conversation_ref(
    channel: &str,
    account: &str,
    kind: &str,
    peer: &str,
    parent: Option<&str>,
    thread: Option<&str>,
) -> String {
    let mut text = String::from("[");
    let parts = [
        channel,
        account,
        kind,
        peer,
        parent.unwrap_or(""),
        thread.unwrap_or(""),
    ];
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        crate::jsjson::write_string(&mut text, part);
    }
    text.push(']');
    let hex = crate::store::blobs::sha256_hex(text.as_bytes());
    format!("conv_{}", &hex[..32])
}

/// `resolvePairedOriginPeerId`: the origin's sender, when the origin is the same direct
/// route as the delivery context.
fn paired_origin_peer(
    origin: Option<&Value>,
    context: Option<&Value>,
    target: &str,
    kind: &str,
) -> Option<String> {
    if kind != "direct" {
        return None;
    }
    let from = text(field(origin, "from"))?;
    let same = text(field(origin, "to")).as_deref() == Some(target)
        && text(field(origin, "provider")).is_some_and(|p| {
            Some(p.to_lowercase()) == text(field(context, "channel")).map(|c| c.to_lowercase())
        })
        && chat_type(field(origin, "chatType")) == Some(kind)
        && account_or_default(field(origin, "accountId"))
            == account_or_default(field(context, "accountId"))
        && thread_id(field(origin, "threadId")) == thread_id(field(context, "threadId"));
    same.then_some(from)
}

/// `conversationIdentityFromSessionEntry` with no route context (`buildConversationIdentity`).
fn identity_of_entry(e: &Value) -> Option<Identity> {
    let delivery = external(e);
    let context = delivery.and_then(|d| d.get("context"));
    let origin = delivery.and_then(|d| d.get("origin"));
    let kind = kind(e.get("chatType"));
    let route_target = text(field(context, "to"));
    let delivery_target = match (&route_target, kind) {
        (Some(t), _) => Some(t.clone()),
        (None, "direct") => text(field(origin, "from")),
        _ => None,
    };
    let (channel, account, thread) = match route_target.is_some() {
        true => (
            text(field(context, "channel")),
            field(context, "accountId"),
            field(context, "threadId"),
        ),
        false => (
            text(field(origin, "provider")),
            field(origin, "accountId"),
            field(origin, "threadId"),
        ),
    };
    let paired = route_target
        .as_deref()
        .and_then(|t| paired_origin_peer(origin, context, t, kind));
    let channel = channel?.to_lowercase();
    let raw_peer = paired.or_else(|| delivery_target.clone())?;
    let peer = peer_id(&channel, &raw_peer);
    if peer.is_empty() {
        return None;
    }
    let delivery_target = delivery_target?;
    let account = account_or_default(account);
    let thread = thread_id(thread);
    let label_field = match e.get("displayName") {
        Some(v) if !v.is_null() => Some(v),
        _ => e.get("label"),
    };
    Some(Identity {
        conversation_ref: conversation_ref(
            &channel,
            &account,
            kind,
            &peer,
            None,
            thread.as_deref(),
        ),
        channel,
        account_id: account,
        kind,
        peer_id: peer,
        delivery_target,
        parent: None,
        thread_id: thread,
        native_channel_id: text(field(origin, "nativeChannelId")),
        native_direct_user_id: text(field(origin, "nativeDirectUserId")),
        label: text(label_field),
        metadata: None,
    })
}

/// `prepareSessionConversationForWrite` for the entry `e` of session `sid`, written with the
/// session scope `scope` (its window's): `None` when its delivery names no conversation.
pub(super) fn prepare(tx: &Connection, e: &Value, sid: &str, scope: &str) -> Result<Option<Link>> {
    let Some(derived) = identity_of_entry(e) else {
        return Ok(None);
    };
    let primary = !(scope == "shared-main" && derived.kind == "direct");
    let identity = preserved(tx, derived, sid)?;
    Ok(Some(Link { identity, primary }))
}

/// `preserveSessionConversationIdentity`: the session's most recently seen primary or
/// participant conversation at the same address keeps its stored identity (its own peer and
/// reference), with the entry's kind and, when the entry has one, its label.
fn preserved(tx: &Connection, derived: Identity, sid: &str) -> Result<Identity> {
    let thread = match &derived.thread_id {
        Some(_) => "c.thread_id = ?6",
        None => "c.thread_id IS ?6",
    };
    let sql = format!(
        "SELECT c.conversation_id, c.channel, c.account_id, c.peer_id, c.delivery_target, \
         c.parent_conversation_id, c.thread_id, c.native_channel_id, c.native_direct_user_id, \
         c.label, c.metadata_json \
         FROM session_conversations AS sc \
         INNER JOIN conversations AS c ON c.conversation_id = sc.conversation_id \
         WHERE sc.session_id IN (?1) AND c.channel = ?2 AND c.account_id = ?3 AND c.kind = ?4 \
         AND c.delivery_target = ?5 AND sc.role IN ('primary', 'participant') AND {thread} \
         ORDER BY sc.last_seen_at DESC LIMIT 1"
    );
    type Row = (String, String, String, String, String, [Option<String>; 6]);
    let row: Option<Row> = tx
        .query_row(
            &sql,
            params_from_iter([
                Sql::Text(sid.to_owned()),
                Sql::Text(derived.channel.clone()),
                Sql::Text(derived.account_id.clone()),
                Sql::Text(derived.kind.to_owned()),
                Sql::Text(derived.delivery_target.clone()),
                derived.thread_id.clone().map_or(Sql::Null, Sql::Text),
            ]),
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    [
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                        r.get(10)?,
                    ],
                ))
            },
        )
        .optional()?;
    let Some((conversation_ref, channel, account, peer, target, rest)) = row else {
        return Ok(derived);
    };
    let [parent, thread, native_channel, native_user, label, metadata] =
        rest.map(|v| v.filter(|s| !s.is_empty()));
    Ok(Identity {
        conversation_ref,
        channel,
        account_id: account,
        kind: derived.kind,
        peer_id: peer,
        delivery_target: target,
        parent,
        thread_id: thread,
        native_channel_id: native_channel,
        native_direct_user_id: native_user,
        label: derived.label.or(label),
        metadata: metadata.and_then(|m| {
            serde_json::from_str::<Value>(&m)
                .ok()
                .filter(Value::is_object)
                .map(|v| crate::jsjson::to_string_compact(&v))
        }),
    })
}

/// `upsertConversationIdentity` at the entry's `updatedAt`.
pub(super) fn upsert(tx: &Connection, id: &Identity, updated_at: f64) -> Result<()> {
    let opt = |v: &Option<String>| v.clone().map_or(Sql::Null, Sql::Text);
    tx.execute(
        "INSERT INTO conversations (conversation_id, channel, account_id, kind, peer_id, \
         delivery_target, parent_conversation_id, thread_id, native_channel_id, \
         native_direct_user_id, label, metadata_json, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13) \
         ON CONFLICT (conversation_id) DO UPDATE SET channel = ?2, account_id = ?3, kind = ?4, \
         peer_id = ?5, delivery_target = ?6, parent_conversation_id = ?7, thread_id = ?8, \
         native_channel_id = ?9, native_direct_user_id = ?10, label = ?11, metadata_json = ?12, \
         updated_at = ?13",
        params_from_iter([
            Sql::Text(id.conversation_ref.clone()),
            Sql::Text(id.channel.clone()),
            Sql::Text(id.account_id.clone()),
            Sql::Text(id.kind.to_owned()),
            Sql::Text(id.peer_id.clone()),
            Sql::Text(id.delivery_target.clone()),
            opt(&id.parent),
            opt(&id.thread_id),
            opt(&id.native_channel_id),
            opt(&id.native_direct_user_id),
            opt(&id.label),
            opt(&id.metadata),
            Sql::Real(updated_at),
        ]),
    )?;
    Ok(())
}

/// `linkSessionConversation` of session `sid` at the entry's `updatedAt` (the entry write of
/// an entry archived in place: its previous entry has the same session).
pub(super) fn link(tx: &Connection, sid: &str, link: &Link, updated_at: f64) -> Result<()> {
    let conv = &link.identity.conversation_ref;
    let role = if link.primary {
        "primary"
    } else {
        "participant"
    };
    let existing: Option<(f64, Option<String>)> = tx
        .query_row(
            "SELECT last_seen_at, route_context_json FROM session_conversations \
             WHERE session_id = ?1 AND conversation_id = ?2 ORDER BY last_seen_at DESC LIMIT 1",
            [sid, conv.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let route = existing.and_then(|(seen, json)| refresh_route(json.as_deref(), seen, updated_at));
    if link.primary {
        let mut stmt = tx.prepare(
            "SELECT conversation_id, first_seen_at, last_seen_at, route_context_json \
             FROM session_conversations \
             WHERE session_id = ?1 AND role = 'primary' AND conversation_id != ?2",
        )?;
        let stale: Vec<(String, Sql, f64, Option<String>)> = stmt
            .query_map([sid, conv.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        if !stale.is_empty() {
            for (other, first_seen, last_seen, json) in stale {
                tx.execute(
                    "INSERT INTO session_conversations (session_id, conversation_id, role, \
                     route_context_json, first_seen_at, last_seen_at) \
                     VALUES (?1, ?2, 'related', ?3, ?4, ?5) \
                     ON CONFLICT (session_id, conversation_id, role) DO UPDATE SET \
                     route_context_json = excluded.route_context_json, last_seen_at = ?5",
                    params_from_iter([
                        Sql::Text(sid.to_owned()),
                        Sql::Text(other),
                        refresh_route(json.as_deref(), last_seen, updated_at)
                            .map_or(Sql::Null, Sql::Text),
                        first_seen,
                        Sql::Real(updated_at),
                    ]),
                )?;
            }
            tx.execute(
                "DELETE FROM session_conversations \
                 WHERE session_id = ?1 AND role = 'primary' AND conversation_id != ?2",
                [sid, conv.as_str()],
            )?;
        }
    }
    tx.execute(
        "DELETE FROM session_conversations \
         WHERE session_id = ?1 AND conversation_id = ?2 AND role != ?3",
        [sid, conv.as_str(), role],
    )?;
    let route = route.map_or(Sql::Null, Sql::Text);
    tx.execute(
        "INSERT INTO session_conversations (session_id, conversation_id, role, \
         route_context_json, first_seen_at, last_seen_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
         ON CONFLICT (session_id, conversation_id, role) DO UPDATE SET \
         route_context_json = ?4, last_seen_at = ?5",
        params_from_iter([
            Sql::Text(sid.to_owned()),
            Sql::Text(conv.clone()),
            Sql::Text(role.to_owned()),
            route,
            Sql::Real(updated_at),
        ]),
    )?;
    Ok(())
}

/// `normalizeBoundedId`: a non-blank string of at most 512 UTF-16 units.
fn bounded_id(v: Option<&Value>) -> Option<String> {
    text(v).filter(|s| utf16_len(s) <= 512)
}

/// `parseConversationRouteContext`: the route facts in their canonical form, `None` when one
/// given is invalid or none is given.
fn route_context(v: &Value) -> Option<Value> {
    let m = v.as_object()?;
    let mut out = serde_json::Map::new();
    for k in ["peerId", "guildId", "teamId", "parentPeerId"] {
        match (m.get(k), bounded_id(m.get(k))) {
            (Some(_), None) => return None,
            (_, Some(id)) => {
                out.insert(k.to_owned(), Value::String(id));
            }
            (None, None) => {}
        }
    }
    if let Some(roles) = m.get("memberRoleIds") {
        let roles = roles.as_array().filter(|r| r.len() <= 256)?;
        let mut ids = roles
            .iter()
            .map(|r| bounded_id(Some(r)))
            .collect::<Option<Vec<String>>>()?;
        // `[...new Set(ids)].toSorted()`: by UTF-16 code units.
        ids.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        ids.dedup();
        if !ids.is_empty() {
            out.insert("memberRoleIds".to_owned(), json!(ids));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `refreshStoredConversationRouteContext`: a stored route context observed at `seen`,
/// written again as observed at `now` (under a new write id); `None` when there is none or it
/// does not read back.
fn refresh_route(stored: Option<&str>, seen: f64, now: f64) -> Option<String> {
    let stored = stored.filter(|s| !s.is_empty() && utf16_len(s) <= 140_000)?;
    let parsed: Value = serde_json::from_str(stored).ok()?;
    let m = parsed.as_object()?;
    let valid = m.get("version").and_then(Value::as_f64) == Some(1.0)
        && m.get("writeId")
            .and_then(Value::as_str)
            .is_some_and(|w| !w.is_empty())
        && m.get("observedAt").and_then(Value::as_f64) == Some(seen);
    if !valid {
        return None;
    }
    let context = match m.get("context") {
        Some(Value::Null) => Value::Null,
        Some(c) => route_context(c)?,
        // (`parsed.context !== null` for an absent one, which does not parse either)
        None => return None,
    };
    let out = json!({
        "version": 1,
        "writeId": crate::fsutil::random_uuid(),
        "observedAt": now,
        "context": context,
    });
    Some(crate::jsjson::to_string_compact(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(delivery: Value) -> Value {
        json!({"sessionId": "s1", "updatedAt": 5, "chatType": "direct", "delivery": delivery})
    }

    #[test]
    fn a_direct_route_names_its_peer_as_the_release_does() {
        let e = entry(json!({"kind": "external",
            "context": {"channel": " Telegram ", "to": "telegram:123", "accountId": " Ops "},
            "origin": {"provider": "telegram", "from": "telegram:123", "to": "telegram:bot"}}));
        let id = identity_of_entry(&e).unwrap();
        assert_eq!(id.channel, "telegram");
        assert_eq!(id.peer_id, "123");
        assert_eq!(id.delivery_target, "telegram:123");
        assert_eq!(id.account_id, "ops");
        assert_eq!(id.kind, "direct");
        // `JSON.stringify(["telegram","ops","direct","123","",""])`, hashed.
        let want = crate::store::blobs::sha256_hex(br#"["telegram","ops","direct","123","",""]"#);
        assert_eq!(id.conversation_ref, format!("conv_{}", &want[..32]));
    }

    #[test]
    fn the_paired_origin_sender_is_the_peer_of_its_own_route() {
        let e = entry(json!({"kind": "external",
            "context": {"channel": "signal", "to": "signal:+1", "threadId": 7},
            "origin": {"provider": "Signal", "from": "signal:user:+2", "to": "signal:+1",
                "chatType": "dm", "threadId": "7"}}));
        let id = identity_of_entry(&e).unwrap();
        assert_eq!(
            id.peer_id, "+2",
            "the origin's sender, its prefixes removed"
        );
        assert_eq!(id.thread_id.as_deref(), Some("7"));
        // Another account on either side: the route's target is the peer.
        let mut other = e.clone();
        other["delivery"]["origin"]["accountId"] = json!("work");
        assert_eq!(identity_of_entry(&other).unwrap().peer_id, "+1");
    }

    #[test]
    fn without_a_route_target_only_a_direct_origin_names_a_conversation() {
        let e = entry(json!({"kind": "external", "context": {"channel": "slack"},
            "origin": {"provider": "Slack", "from": "room:C9", "accountId": "a"}}));
        let id = identity_of_entry(&e).unwrap();
        assert_eq!((id.channel.as_str(), id.peer_id.as_str()), ("slack", "C9"));
        assert_eq!(id.delivery_target, "room:C9");
        let mut group = e.clone();
        group["chatType"] = json!("group");
        assert_eq!(identity_of_entry(&group), None);
        assert_eq!(identity_of_entry(&entry(json!({"kind": "none"}))), None);
        let blank = entry(json!({"kind": "external", "context": {"channel": "x", "to": "x: "}}));
        assert_eq!(
            identity_of_entry(&blank),
            None,
            "a peer that normalizes to nothing"
        );
    }

    #[test]
    fn the_label_is_the_display_name_when_there_is_one() {
        let mut e = entry(json!({"kind": "external", "context": {"channel": "c", "to": "c:1"}}));
        e["label"] = json!("L");
        assert_eq!(identity_of_entry(&e).unwrap().label.as_deref(), Some("L"));
        e["displayName"] = json!(" ");
        assert_eq!(
            identity_of_entry(&e).unwrap().label,
            None,
            "`??` stops at a blank name"
        );
        e["displayName"] = Value::Null;
        assert_eq!(identity_of_entry(&e).unwrap().label.as_deref(), Some("L"));
    }

    /// The two tables as the releases create them (STRICT: an update time must be integral).
    fn tables() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE conversations (conversation_id TEXT NOT NULL PRIMARY KEY,
               channel TEXT NOT NULL, account_id TEXT NOT NULL, kind TEXT NOT NULL
               CHECK (kind IN ('direct', 'group', 'channel')), peer_id TEXT NOT NULL,
               delivery_target TEXT NOT NULL, parent_conversation_id TEXT, thread_id TEXT,
               native_channel_id TEXT, native_direct_user_id TEXT, label TEXT,
               metadata_json TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)
               STRICT;
             CREATE TABLE session_conversations (session_id TEXT NOT NULL,
               conversation_id TEXT NOT NULL, role TEXT NOT NULL DEFAULT 'primary'
               CHECK (role IN ('primary', 'participant', 'related')), route_context_json TEXT,
               first_seen_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL,
               PRIMARY KEY (session_id, conversation_id, role)) STRICT;",
        )
        .unwrap();
        conn
    }

    #[test]
    fn a_write_keeps_the_stored_identity_and_moves_another_primary_aside() {
        let conn = tables();
        let e = |to: &str, name: &str| {
            let mut e = entry(json!({"kind": "external",
                "context": {"channel": "telegram", "to": to}}));
            e["displayName"] = json!(name);
            e
        };
        // First write: the conversation is created and linked as the primary one.
        let first = prepare(&conn, &e("telegram:1", "A"), "s1", "conversation")
            .unwrap()
            .unwrap();
        upsert(&conn, &first.identity, 10.0).unwrap();
        link(&conn, "s1", &first, 10.0).unwrap();
        // The stored peer differs from what the entry derives: the stored identity is kept.
        conn.execute("UPDATE conversations SET peer_id = 'stored'", [])
            .unwrap();
        let again = prepare(&conn, &e("telegram:1", "B"), "s1", "conversation")
            .unwrap()
            .unwrap();
        assert_eq!(
            again.identity.conversation_ref,
            first.identity.conversation_ref
        );
        assert_eq!(again.identity.peer_id, "stored");
        assert_eq!(again.identity.label.as_deref(), Some("B"));
        upsert(&conn, &again.identity, 20.0).unwrap();
        link(&conn, "s1", &again, 20.0).unwrap();
        let seen: (i64, i64) = conn
            .query_row(
                "SELECT first_seen_at, last_seen_at FROM session_conversations",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(seen, (10, 20));
        // Another address becomes the primary one; the old one is kept as related.
        let other = prepare(&conn, &e("telegram:2", "C"), "s1", "conversation")
            .unwrap()
            .unwrap();
        upsert(&conn, &other.identity, 30.0).unwrap();
        link(&conn, "s1", &other, 30.0).unwrap();
        let roles: Vec<(String, String)> = conn
            .prepare("SELECT conversation_id, role FROM session_conversations ORDER BY role")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            roles,
            vec![
                (
                    other.identity.conversation_ref.clone(),
                    "primary".to_owned()
                ),
                (
                    first.identity.conversation_ref.clone(),
                    "related".to_owned()
                ),
            ]
        );
        // A shared main session's direct peer is a participant, and names no window.
        let shared = prepare(&conn, &e("telegram:3", "D"), "s2", "shared-main")
            .unwrap()
            .unwrap();
        assert_eq!(shared.primary_ref(), None);
    }

    #[test]
    fn an_update_time_the_table_cannot_hold_is_an_error() {
        let conn = tables();
        let e = entry(json!({"kind": "external", "context": {"channel": "c", "to": "c:1"}}));
        let l = prepare(&conn, &e, "s1", "conversation").unwrap().unwrap();
        assert!(upsert(&conn, &l.identity, 1.5).is_err());
        let stored: i64 = conn
            .query_row("SELECT count(*) FROM conversations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stored, 0);
    }

    #[test]
    fn peer_ids_lose_the_channel_and_one_kind_prefix() {
        assert_eq!(peer_id("telegram", " Telegram:User:42 "), "42");
        assert_eq!(peer_id("telegram", "user:channel:42"), "channel:42");
        assert_eq!(peer_id("slack", "telegram:42"), "telegram:42");
        assert_eq!(peer_id("x", "dm:"), "");
        assert_eq!(peer_id("x", "ROOM: 7"), "7");
    }

    #[test]
    fn a_stored_route_context_is_refreshed_only_when_it_reads_back() {
        let stored = r#"{"version":1,"writeId":"w","observedAt":10,"context":{"teamId":" t ","peerId":"p","memberRoleIds":["b","a","b"]}}"#;
        let out: Value =
            serde_json::from_str(&refresh_route(Some(stored), 10.0, 20.0).unwrap()).unwrap();
        assert_eq!(out["observedAt"], json!(20));
        assert_eq!(
            out["context"],
            json!({"peerId": "p", "teamId": "t", "memberRoleIds": ["a", "b"]})
        );
        assert_ne!(out["writeId"], json!("w"));
        assert_eq!(
            refresh_route(Some(stored), 11.0, 20.0),
            None,
            "seen at another time"
        );
        let null = r#"{"version":1,"writeId":"w","observedAt":10,"context":null}"#;
        assert!(refresh_route(Some(null), 10.0, 20.0).is_some());
        let bad = r#"{"version":1,"writeId":"w","observedAt":10,"context":{"peerId":""}}"#;
        assert_eq!(refresh_route(Some(bad), 10.0, 20.0), None);
        assert_eq!(refresh_route(None, 10.0, 20.0), None);
    }
}
