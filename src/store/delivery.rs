//! Delivery-route canonicalisation of store entries (`normalizeSessionEntryDelivery` in
//! OpenClaw's `store-load.ts` with `delivery-context.shared.ts` and `channel-route.ts`).
//!
//! An entry's `route`, `deliveryContext` and legacy `channel`/`last*` fields are reconciled into
//! one canonical delivery context; when the entry's fields differ from it, `route`,
//! `deliveryContext`, `lastChannel`, `lastTo`, `lastAccountId` and `lastThreadId` are rewritten
//! (absent values removed, new keys appended in that order, as the object spread does).
//! Channel aliases are the bundled ones; plugin-registered aliases are not known offline.

use serde_json::{Map, Value};

use crate::js::js_trim;

type Obj = Map<String, Value>;

/// The bundled channel aliases (`CHAT_CHANNEL_ALIASES`).
const ALIASES: &[(&str, &str)] = &[
    ("lark", "feishu"),
    ("gchat", "googlechat"),
    ("google-chat", "googlechat"),
    ("imsg", "imessage"),
    ("internet-relay-chat", "irc"),
    ("teams", "msteams"),
    ("nc", "nextcloud-talk"),
    ("nc-talk", "nextcloud-talk"),
    ("twitch-chat", "twitch"),
    ("zl", "zalo"),
    ("zlu", "zalouser"),
];

/// The entry fields [`normalize_entry`] reads: an entry with none of them has no delivery
/// route, canonical or legacy.
pub const FIELDS: &[&str] = &[
    "route",
    "deliveryContext",
    "origin",
    "channel",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "lastThreadId",
];

const INTERNAL_NON_DELIVERY: &[&str] = &["heartbeat", "cron", "webhook", "voice", "sessions_send"];

/// `normalizeOptionalString` (the SQLite era's `normalizeText` too): a string that is not
/// blank, trimmed.
pub(crate) fn opt_str(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => {
            let t = js_trim(s);
            (!t.is_empty()).then(|| t.to_string())
        }
        _ => None,
    }
}

/// `normalizeMessageChannel`.
fn normalize_channel(raw: Option<&Value>) -> Option<String> {
    let n = opt_str(raw)?.to_lowercase();
    Some(
        ALIASES
            .iter()
            .find(|(a, _)| *a == n)
            .map_or(n, |(_, id)| id.to_string()),
    )
}

/// `normalizeOptionalThreadValue`.
fn thread_value(v: Option<&Value>) -> Option<Value> {
    match v? {
        Value::Number(n) => {
            let f = n.as_f64()?;
            f.is_finite().then(|| num(f.trunc()))
        }
        Value::String(_) => opt_str(v).map(Value::String),
        _ => None,
    }
}

fn num(f: f64) -> Value {
    let text = crate::jsjson::js_number(if f == 0.0 { 0.0 } else { f });
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// `normalizeOptionalAccountId`.
pub(crate) fn account_id(v: Option<&Value>) -> Option<String> {
    let Some(Value::String(s)) = v else {
        return None;
    };
    let t = js_trim(s);
    if t.is_empty() {
        return None;
    }
    let lower = t.to_lowercase();
    let b = t.as_bytes();
    let valid = b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-');
    let canonical = if valid {
        lower
    } else {
        let mut out = String::new();
        let mut bad = false;
        for c in lower.chars() {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                out.push(c);
                bad = false;
            } else if !bad {
                out.push('-');
                bad = true;
            }
        }
        out.trim_matches('-').chars().take(64).collect()
    };
    (!canonical.is_empty()
        && !["__proto__", "prototype", "constructor"].contains(&canonical.as_str()))
    .then_some(canonical)
}

/// Inputs of `normalizeChannelRouteRef` (raw values).
#[derive(Default)]
struct RouteIn {
    channel: Option<Value>,
    account_id: Option<Value>,
    to: Option<Value>,
    raw_to: Option<Value>,
    thread_id: Option<Value>,
    chat_type: Option<Value>,
    thread_kind: Option<Value>,
    thread_source: Option<Value>,
}

fn truthy(v: &Option<Value>) -> bool {
    v.as_ref().is_some_and(crate::config::js_truthy)
}

/// `normalizeChannelRouteRef`.
fn route_ref(i: RouteIn) -> Option<Obj> {
    let channel = opt_str(i.channel.as_ref()).map(|s| s.to_lowercase());
    let account = account_id(i.account_id.as_ref());
    let to = opt_str(i.to.as_ref());
    let raw_to = opt_str(i.raw_to.as_ref());
    let thread = thread_value(i.thread_id.as_ref());
    if channel.is_none() && to.is_none() && account.is_none() && thread.is_none() {
        return None;
    }
    let mut r = Obj::new();
    if let Some(c) = channel {
        r.insert("channel".into(), Value::String(c));
    }
    if let Some(a) = account {
        r.insert("accountId".into(), Value::String(a));
    }
    if let Some(to) = to {
        let mut t = Obj::new();
        if let Some(raw) = raw_to.filter(|r| *r != to) {
            t.insert("rawTo".into(), Value::String(raw));
        }
        t.shift_insert(0, "to".into(), Value::String(to));
        if truthy(&i.chat_type) {
            t.insert("chatType".into(), i.chat_type.clone().expect("truthy"));
        }
        r.insert("target".into(), Value::Object(t));
    }
    if let Some(id) = thread {
        let mut t = Obj::new();
        t.insert("id".into(), id);
        if truthy(&i.thread_kind) {
            t.insert("kind".into(), i.thread_kind.clone().expect("truthy"));
        }
        if truthy(&i.thread_source) {
            t.insert("source".into(), i.thread_source.clone().expect("truthy"));
        }
        r.insert("thread".into(), Value::Object(t));
    }
    Some(r)
}

fn get<'a>(v: Option<&'a Value>, k: &str) -> Option<&'a Value> {
    match v? {
        Value::Object(o) => o.get(k),
        _ => None,
    }
}

fn getc(v: Option<&Value>, k: &str) -> Option<Value> {
    get(v, k).filter(|x| !x.is_null()).cloned()
}

/// A delivery context `{channel, to, accountId, threadId}` (absent fields omitted).
type Ctx = Obj;

/// `normalizeDeliveryContext` over raw fields.
fn delivery_context(
    channel: Option<Value>,
    to: Option<Value>,
    account: Option<Value>,
    thread: Option<Value>,
) -> Option<Ctx> {
    let channel = match &channel {
        Some(Value::String(s)) => Some(Value::String(
            normalize_channel(channel.as_ref()).unwrap_or_else(|| js_trim(s).to_string()),
        )),
        _ => None,
    };
    let route = route_ref(RouteIn {
        channel,
        to,
        account_id: account,
        thread_id: thread,
        ..Default::default()
    })?;
    let mut c = Ctx::new();
    if let Some(ch) = route.get("channel") {
        c.insert("channel".into(), ch.clone());
    }
    if let Some(to) = get(route.get("target"), "to") {
        c.insert("to".into(), to.clone());
    }
    if let Some(a) = route
        .get("accountId")
        .and_then(Value::as_str)
        .and_then(|a| account_id(Some(&Value::String(a.into()))))
    {
        c.insert("accountId".into(), Value::String(a));
    }
    if let Some(t) = get(route.get("thread"), "id") {
        c.insert("threadId".into(), t.clone());
    }
    Some(c)
}

fn ctx_of(v: Option<&Value>) -> Option<Ctx> {
    let v = v.filter(|v| crate::config::js_truthy(*v))?;
    delivery_context(
        getc(Some(v), "channel"),
        getc(Some(v), "to"),
        getc(Some(v), "accountId"),
        getc(Some(v), "threadId"),
    )
}

/// `normalizeDeliveryChannelRoute`.
fn channel_route(route: Option<&Value>) -> Option<Obj> {
    let r @ Value::Object(_) = route? else {
        return None;
    };
    let target = get(Some(r), "target");
    let thread = get(Some(r), "thread");
    route_ref(RouteIn {
        channel: getc(Some(r), "channel"),
        account_id: getc(Some(r), "accountId"),
        to: getc(target, "to"),
        raw_to: getc(target, "rawTo"),
        chat_type: getc(target, "chatType"),
        thread_id: getc(thread, "id"),
        thread_kind: getc(thread, "kind"),
        thread_source: getc(thread, "source"),
    })
}

fn ctx_from_route(route: Option<&Obj>) -> Option<Ctx> {
    let r = route.map(|r| Value::Object(r.clone()));
    let n = channel_route(r.as_ref()).map(Value::Object);
    let n = n.as_ref();
    delivery_context(
        getc(n, "channel"),
        getc(get(n, "target"), "to"),
        getc(n, "accountId"),
        getc(get(n, "thread"), "id"),
    )
}

fn f(c: Option<&Ctx>, k: &str) -> Option<Value> {
    c.and_then(|c| c.get(k)).cloned()
}

/// `mergeDeliveryContext`.
fn merge(primary: Option<&Ctx>, fallback: Option<&Ctx>) -> Option<Ctx> {
    let p = primary.and_then(|p| ctx_of(Some(&Value::Object(p.clone()))));
    let fb = fallback.and_then(|x| ctx_of(Some(&Value::Object(x.clone()))));
    if p.is_none() && fb.is_none() {
        return None;
    }
    let (p, fb) = (p.as_ref(), fb.as_ref());
    let differ = |k: &str| matches!((f(p, k), f(fb, k)), (Some(a), Some(b)) if crate::config::js_truthy(&a) && crate::config::js_truthy(&b) && a != b);
    let accounts = differ("accountId");
    let conflict = differ("channel") || accounts;
    let pick = |k: &str, strict: bool| {
        if strict {
            f(p, k)
        } else {
            f(p, k).or_else(|| f(fb, k))
        }
    };
    delivery_context(
        pick("channel", accounts),
        pick("to", conflict),
        pick("accountId", conflict),
        pick("threadId", conflict),
    )
}

fn is_internal(c: Option<&Ctx>) -> bool {
    matches!(f(c, "channel"), Some(Value::String(ch)) if ch == "webchat" || INTERNAL_NON_DELIVERY.contains(&ch.as_str()))
}

fn has_external_target(c: Option<&Ctx>) -> bool {
    let raw = f(c, "channel");
    let Some(ch) = normalize_channel(raw.as_ref()) else {
        return false;
    };
    let deliverable = ch != "webchat" && raw.as_ref().and_then(Value::as_str) == Some(ch.as_str());
    !INTERNAL_NON_DELIVERY.contains(&ch.as_str())
        && deliverable
        && f(c, "to").is_some_and(|t| crate::config::js_truthy(&t))
}

fn external_over_internal(dc: Option<&Ctx>, internal: Option<&Ctx>) -> Option<Ctx> {
    delivery_context(
        f(dc, "channel"),
        f(dc, "to"),
        f(dc, "accountId").or_else(|| f(internal, "accountId")),
        f(dc, "threadId").or_else(|| f(internal, "threadId")),
    )
}

/// `mergeRouteMetadataWithDeliveryContext`.
fn route_with_context(route: Option<&Obj>, c: &Ctx) -> Option<Obj> {
    let Some(r) = route else {
        let n = ctx_of(Some(&Value::Object(c.clone())));
        let n = n.as_ref();
        return route_ref(RouteIn {
            channel: f(n, "channel"),
            to: f(n, "to"),
            account_id: f(n, "accountId"),
            thread_id: f(n, "threadId"),
            ..Default::default()
        });
    };
    let rv = Value::Object(r.clone());
    let (target, thread) = (get(Some(&rv), "target"), get(Some(&rv), "thread"));
    let or = |a: Option<Value>, k: &str| a.or_else(|| c.get(k).cloned());
    route_ref(RouteIn {
        channel: or(getc(Some(&rv), "channel"), "channel"),
        to: or(getc(target, "to"), "to"),
        raw_to: getc(target, "rawTo"),
        chat_type: getc(target, "chatType"),
        account_id: or(getc(Some(&rv), "accountId"), "accountId"),
        thread_id: or(getc(thread, "id"), "threadId"),
        thread_kind: getc(thread, "kind"),
        thread_source: getc(thread, "source"),
    })
}

fn same_route(a: Option<&Obj>, b: Option<&Obj>) -> bool {
    let g = |o: Option<&Obj>, path: &[&str]| -> Option<Value> {
        let mut v = Value::Object(o?.clone());
        for p in path {
            v = v.get(*p)?.clone();
        }
        Some(v)
    };
    [
        &["channel"][..],
        &["accountId"],
        &["target", "to"],
        &["target", "rawTo"],
        &["target", "chatType"],
        &["thread", "id"],
        &["thread", "kind"],
        &["thread", "source"],
    ]
    .iter()
    .all(|p| g(a, p) == g(b, p))
}

/// JavaScript `===` between a raw entry field and a normalised value (objects never equal).
fn strict_eq(raw: Option<&Value>, norm: Option<&Value>) -> bool {
    match (raw, norm) {
        (None, None) => true,
        (Some(Value::Object(_) | Value::Array(_)), _) => false,
        (Some(Value::Number(a)), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// Canonicalise one entry's delivery fields in place. Returns whether it changed.
pub fn normalize_entry(e: &mut Obj) -> bool {
    let entry = Value::Object(e.clone());
    let ev = Some(&entry);
    let entry_route = channel_route(e.get("route"));
    let raw_dc = e.get("deliveryContext");
    let last_thread = getc(ev, "lastThreadId")
        .or_else(|| getc(raw_dc, "threadId"))
        .or_else(|| getc(e.get("origin"), "threadId"));
    let route_ctx = ctx_from_route(entry_route.as_ref());
    let legacy = delivery_context(
        getc(ev, "lastChannel").or_else(|| getc(ev, "channel")),
        getc(ev, "lastTo"),
        getc(ev, "lastAccountId"),
        last_thread,
    );
    let dc = ctx_of(raw_dc);
    let session_ctx = if is_internal(legacy.as_ref()) && has_external_target(dc.as_ref()) {
        external_over_internal(dc.as_ref(), legacy.as_ref())
    } else {
        merge(legacy.as_ref(), dc.as_ref())
    };
    let route_internal = merge(route_ctx.as_ref(), legacy.as_ref());
    let internal_fallback = is_internal(route_ctx.as_ref()) && has_external_target(dc.as_ref());
    let merged = if internal_fallback {
        external_over_internal(dc.as_ref(), route_internal.as_ref())
    } else {
        merge(route_ctx.as_ref(), session_ctx.as_ref())
    };
    let (route, delivery) = match &merged {
        None => (None, None),
        Some(m) => (
            route_with_context(
                if internal_fallback {
                    None
                } else {
                    entry_route.as_ref()
                },
                m,
            ),
            Some(m.clone()),
        ),
    };
    let m = merged.as_ref();
    let same_delivery = ["channel", "to", "accountId", "threadId"]
        .iter()
        .all(|k| strict_eq(get(raw_dc, k).filter(|v| !v.is_null()), f(m, k).as_ref()));
    let same_last = same_route(entry_route.as_ref(), route.as_ref())
        && [
            ("lastChannel", "channel"),
            ("lastTo", "to"),
            ("lastAccountId", "accountId"),
            ("lastThreadId", "threadId"),
        ]
        .iter()
        .all(|(ek, mk)| strict_eq(e.get(*ek), f(m, mk).as_ref()));
    if same_delivery && same_last {
        return false;
    }
    let set = |e: &mut Obj, k: &str, v: Option<Value>| match v {
        Some(v) => {
            e.insert(k.to_string(), v);
        }
        None => {
            e.shift_remove(k);
        }
    };
    set(e, "route", route.map(Value::Object));
    set(e, "deliveryContext", delivery.map(Value::Object));
    set(e, "lastChannel", f(m, "channel"));
    set(e, "lastTo", f(m, "to"));
    set(e, "lastAccountId", f(m, "accountId"));
    set(e, "lastThreadId", f(m, "threadId"));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: Value) -> Value {
        let Value::Object(mut m) = v else { panic!() };
        normalize_entry(&mut m);
        Value::Object(m)
    }

    #[test]
    fn legacy_channel_gains_route_and_context() {
        assert_eq!(
            norm(json!({"channel": "tg", "updatedAt": 1})),
            json!({"channel": "tg", "updatedAt": 1, "route": {"channel": "tg"}, "deliveryContext": {"channel": "tg"}, "lastChannel": "tg"})
        );
    }

    #[test]
    fn canonical_entries_are_unchanged() {
        let e = json!({"route": {"channel": "telegram", "target": {"to": "42"}}, "deliveryContext": {"channel": "telegram", "to": "42"}, "lastChannel": "telegram", "lastTo": "42"});
        assert_eq!(norm(e.clone()), e);
        let plain = json!({"sessionId": "s"});
        assert_eq!(norm(plain.clone()), plain);
    }

    #[test]
    fn aliases_and_accounts() {
        let out = norm(
            json!({"lastChannel": " Teams ", "lastTo": "x", "lastAccountId": "My Acct", "lastThreadId": 7.9}),
        );
        assert_eq!(
            out["deliveryContext"],
            json!({"channel": "msteams", "to": "x", "accountId": "my-acct", "threadId": 7})
        );
    }
}
