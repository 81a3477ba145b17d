//! The entry-level maintenance steps, each mutating a store in place exactly as OpenClaw's
//! `store-maintenance.ts` and `cleanup-service.ts` do: `--fix-missing`, `--fix-dm-scope`,
//! model-run probe pruning, stale pruning and the entry cap. Each returns what it removed, in
//! removal order, so callers can archive transcripts and build the action table.

use std::path::Path;

use crate::json::Json;
use serde_json::Value;

use crate::keys;
use crate::store::{self, Store, paths};

/// A removed entry: its key and the entry as it was.
pub type Removed = Vec<(String, Json)>;

/// `pruneStaleEntries`: remove unpreserved entries with `updatedAt < now − max_age`.
pub fn prune_stale(s: &mut Store, max_age_ms: i64, preserve: &[String], now_ms: f64) -> Removed {
    let cutoff = now_ms - max_age_ms as f64;
    // The cheap age test first: the key is parsed only for entries old enough to go.
    let victims: Vec<usize> = (s.iter().enumerate())
        .filter(|(_, (_, e))| store::updated_at(e).is_some_and(|u| u < cutoff))
        .filter(|(_, (k, e))| !keys::should_preserve(k, Some(e), preserve))
        .map(|(at, _)| at)
        .collect();
    take(s, victims)
}

/// `pruneStaleModelRunEntries`: model-run probe keys older than `max_age` (preserve set only).
pub fn prune_model_runs(
    s: &mut Store,
    max_age_ms: i64,
    preserve: &[String],
    now_ms: f64,
) -> Removed {
    let cutoff = now_ms - max_age_ms as f64;
    let victims: Vec<usize> = (s.iter().enumerate())
        .filter(|(_, (k, _))| !preserve.iter().any(|p| p == *k) && keys::is_model_run_key(k))
        .filter(|(_, (_, e))| store::updated_at(e).is_some_and(|u| u < cutoff))
        .map(|(at, _)| at)
        .collect();
    take(s, victims)
}

/// `capEntryCount`: keep the newest `max − preserved` unpreserved entries (stable sort by
/// `updatedAt` descending, missing = −∞), remove the rest.
pub fn cap(s: &mut Store, max_entries: f64, preserve: &[String]) -> Removed {
    // At most `max` entries: the unpreserved ones fit in `max − preserved` whatever the
    // preserved count (no key needs parsing).
    if s.len() as f64 <= max_entries {
        return Vec::new();
    }
    let mut preserved = 0usize;
    let mut candidates: Vec<(usize, f64)> = Vec::new();
    for (at, (k, e)) in s.iter().enumerate() {
        if keys::should_preserve(k, Some(e), preserve) {
            preserved += 1;
        } else {
            candidates.push((at, store::updated_at(e).unwrap_or(f64::NEG_INFINITY)));
        }
    }
    let room = (max_entries - preserved as f64).max(0.0);
    let room = if max_entries.is_nan() { f64::NAN } else { room };
    if (candidates.len() as f64) <= room {
        return Vec::new();
    }
    candidates.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
    // `Array.prototype.slice(start)` truncates towards zero; NaN means 0.
    let start = if room.is_nan() {
        0
    } else {
        room.trunc() as usize
    };
    let victims: Vec<usize> = candidates
        .into_iter()
        .skip(start)
        .map(|(at, _)| at)
        .collect();
    take(s, victims)
}

/// `shouldRunModelRunPrune` with `force` (cleanup always forces): more entries than the cap.
pub fn should_prune_model_runs(count: usize, max_entries: f64) -> bool {
    count as f64 > max_entries
}

/// `retireMainScopeDirectSessionEntries`: with `dmScope == "main"`, remove per-peer direct-DM
/// keys of the target agent.
pub fn retire_dm_scope(
    s: &mut Store,
    dm_scope: &str,
    target_agent: &str,
    active_key: Option<&str>,
) -> Removed {
    if dm_scope != "main" {
        return Vec::new();
    }
    let victims: Vec<usize> = (s.keys().enumerate())
        .filter(|(_, k)| keys::is_stale_direct_key(k, target_agent, active_key))
        .map(|(at, _)| at)
        .collect();
    take(s, victims)
}

/// Result of `--fix-missing`.
#[derive(Debug, Default)]
pub struct FixMissing {
    pub removed: Removed,
    /// Keys whose `sessionFile` was repaired.
    pub repaired: Vec<Repair>,
}

/// One `sessionFile` repair: the key, the session id, the old and the new `sessionFile`, and
/// the entry as it was before the repair.
#[derive(Debug, Clone, PartialEq)]
pub struct Repair {
    pub key: String,
    pub session_id: String,
    pub previous: Option<String>,
    pub new: String,
    pub loaded: Json,
}

/// `pruneMissingTranscriptEntries`: drop entries whose transcript is missing or has no message
/// record (≤ 4 KiB), repair stale generated `sessionFile` values, drop non-agent keys without a
/// session id.
pub fn fix_missing(s: &mut Store, sessions_dir: &Path) -> FixMissing {
    let mut out = FixMissing::default();
    let keys_now: Vec<String> = s.keys().cloned().collect();
    for key in keys_now {
        let entry = &s[&key];
        let Some(sid) = store::session_id(entry).map(str::to_string) else {
            if keys::parse_agent_key(&key).is_some() {
                continue;
            }
            let e = s.shift_remove(&key).expect("present");
            out.removed.push((key, e));
            continue;
        };
        let sf = store::session_file(entry).map(str::to_string);
        let canonical = paths::default_transcript_path(&sid, sessions_dir);
        let transcript = paths::transcript_path(&sid, sf.as_deref(), sessions_dir);
        if let Some(canonical) = canonical.filter(|c| {
            is_stale_generated(&sid, sf.as_deref())
                && Some(c) != transcript.as_ref()
                && exists_with_messages(c)
        }) {
            let new = canonical.to_string_lossy().into_owned();
            let loaded = entry.clone();
            if let Some(Json::Object(e)) = s.get_mut(&key) {
                e.insert("sessionFile", Json::from(new.as_str()));
            }
            out.repaired.push(Repair {
                key,
                session_id: sid,
                previous: sf,
                new,
                loaded,
            });
            continue;
        }
        if transcript.as_deref().is_some_and(exists_with_messages) {
            continue;
        }
        let e = s.shift_remove(&key).expect("present");
        out.removed.push((key, e));
    }
    out
}

/// `isStaleGeneratedBaseTranscript`.
fn is_stale_generated(session_id: &str, session_file: Option<&str>) -> bool {
    let Some(generated) = generated_transcript_session_id(session_file) else {
        return false;
    };
    if generated == session_id {
        return false;
    }
    let trimmed = crate::js::js_trim(session_file.unwrap_or(""));
    basename(trimmed) == format!("{generated}.jsonl")
}

fn basename(p: &str) -> &str {
    let p = p.trim_end_matches('/');
    p.rsplit('/').next().unwrap_or(p)
}

/// `extractGeneratedTranscriptSessionId`: the UUID a generated transcript name carries.
pub fn generated_transcript_session_id(session_file: Option<&str>) -> Option<String> {
    let trimmed = crate::js::js_trim(session_file?);
    if trimmed.is_empty() {
        return None;
    }
    let base = basename(trimmed);
    let without = base.strip_suffix(".jsonl")?;
    if let Some(i) = without.find("-topic-").filter(|i| *i > 0) {
        let id = &without[..i];
        return looks_generated(id).then(|| id.to_string());
    }
    if let Some(rest) = fork_suffix(without) {
        return looks_generated(rest).then(|| rest.to_string());
    }
    looks_generated(without).then(|| without.to_string())
}

/// `^(\d{4}-\d{2}-\d{2}T[\w-]+(?:Z|[+-]\d{2}(?:-\d{2})?)?)_(.+)$` → the part after `_`.
fn fork_suffix(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && b.get(10) == Some(&b'T'))
    {
        return None;
    }
    // `[\w-]+` is greedy but backtracks: the group ends at some `_` whose tail is non-empty.
    // The first `_` after the date that leaves a non-empty tail and a valid middle wins
    // (the greedy match takes the last such `_`).
    let mut best = None;
    for (i, c) in s.char_indices().skip(11) {
        if c == '_' && i + 1 < s.len() {
            let mid = &s[11..i];
            if !mid.is_empty()
                && mid
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'+')
            {
                best = Some(&s[i + 1..]);
            }
        }
        if !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '+') {
            break;
        }
    }
    best
}

fn looks_generated(v: &str) -> bool {
    let b = v.as_bytes();
    crate::layout::is_uuid_shape(v)
        && (b'1'..=b'8').contains(&b[14])
        && matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b')
}

fn is_message_role(v: Option<&Value>) -> bool {
    matches!(
        v.and_then(Value::as_str),
        Some("user" | "assistant" | "tool" | "toolResult" | "system")
    )
}

fn is_message_record(v: &Value) -> bool {
    let (Value::Object(_) | Value::Array(_)) = v else {
        return false;
    };
    let ty = v.get("type");
    if ty.and_then(Value::as_str) == Some("message") {
        return true;
    }
    if ty.is_some() {
        return false;
    }
    if let Some(m @ Value::Object(_)) = v.get("message")
        && is_message_role(m.get("role"))
    {
        return true;
    }
    is_message_role(v.get("role"))
}

/// `transcriptHasNoMessageRecords`: a regular file ≤ 4096 bytes with no message record.
fn has_no_message_records(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    if !meta.is_file() || meta.len() > 4096 {
        return false;
    }
    let Ok(raw) = std::fs::read(p) else {
        return false;
    };
    let text = String::from_utf8_lossy(&raw);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if crate::js::js_trim(line).is_empty() {
            continue;
        }
        let Ok(v) = crate::jsjson::parse(line.as_bytes()) else {
            return false;
        };
        if is_message_record(&v) {
            return false;
        }
    }
    true
}

/// `transcriptExistsWithMessages`.
pub fn exists_with_messages(p: &Path) -> bool {
    p.exists() && !has_no_message_records(p)
}

/// Remove the entries at places `victims` from the store (keeping the order of the rest) and
/// return them in the order given. One pass over the store, in place, so large removals stay
/// linear and need no second store: the taken entries leave in store order and are then put
/// in the order given by following the permutation's cycles (a store may lose hundreds of
/// thousands). The store's spare room is given back afterwards.
fn take(s: &mut Store, victims: Vec<usize>) -> Removed {
    if victims.is_empty() {
        return Vec::new();
    }
    // Each place's rank in the order given (the first, should a place be given twice).
    let mut rank = vec![u32::MAX; s.len()];
    let mut count = 0;
    for (i, &at) in victims.iter().enumerate() {
        if let Some(r) = rank.get_mut(at)
            && *r == u32::MAX
        {
            *r = i as u32;
            count += 1;
        }
    }
    drop(victims);
    // The ranks of the taken entries in store order, made dense (0..count) in the same order.
    let mut dest: Vec<u32> = rank.iter().copied().filter(|&r| r != u32::MAX).collect();
    let mut by_rank: Vec<u32> = (0..count as u32).collect();
    by_rank.sort_unstable_by_key(|&j| dest[j as usize]);
    for (dense, &j) in by_rank.iter().enumerate() {
        dest[j as usize] = dense as u32;
    }
    drop(by_rank);
    let mut place = 0;
    let mut out: Removed = Vec::with_capacity(count);
    out.extend(s.extract_if(.., |_, _| {
        let taken = rank[place] != u32::MAX;
        place += 1;
        taken
    }));
    drop(rank);
    s.shrink_to_fit();
    // `dest[i]`: where the entry now at `i` belongs.
    for i in 0..out.len() {
        while dest[i] as usize != i {
            let j = dest[i] as usize;
            out.swap(i, j);
            dest.swap(i, j);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store(v: Value) -> Store {
        let Value::Object(m) = v else { panic!() };
        crate::store::from_map(m)
    }

    #[test]
    fn stale_prune_keeps_protected_and_preserved() {
        let mut s = store(json!({
            "agent:main:a": {"updatedAt": 1},
            "agent:main:slack:channel:c": {"updatedAt": 1},
            "agent:main:b": {"updatedAt": 1},
            "agent:main:c": {},
            "agent:main:d": {"updatedAt": 5_000}
        }));
        let r = prune_stale(&mut s, 1000, &["agent:main:b".into()], 5_500.0);
        assert_eq!(
            r.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
            vec!["agent:main:a"]
        );
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn cap_is_stable_and_counts_preserved() {
        let mut s = store(json!({
            "a": {"updatedAt": 3}, "b": {"updatedAt": 5}, "c": {}, "d": {"updatedAt": 5},
            "agent:main:x:group:g": {"updatedAt": 0}
        }));
        let r = cap(&mut s, 3.0, &[]);
        assert_eq!(
            r.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
            vec!["a", "c"]
        );
        assert_eq!(
            s.keys().collect::<Vec<_>>(),
            vec!["b", "d", "agent:main:x:group:g"]
        );
        let mut s = store(json!({"a": {"updatedAt": 3}, "agent:main:x:group:g": {}}));
        assert_eq!(cap(&mut s, 1.0, &[]).len(), 1);
        let mut s = store(json!({"a": {"updatedAt": 3}}));
        assert_eq!(cap(&mut s, 1.0, &[]).len(), 0);
    }

    #[test]
    fn model_runs_and_dm_scope() {
        let k = "agent:main:explicit:model-run-0123abcd-0000-4000-8000-0123456789ab";
        let mut s = store(json!({k: {"updatedAt": 0}, "agent:main:direct:bob": {"updatedAt": 0}}));
        assert!(should_prune_model_runs(2, 1.0));
        assert_eq!(prune_model_runs(&mut s, 10, &[], 100.0).len(), 1);
        assert_eq!(retire_dm_scope(&mut s, "per-peer", "main", None).len(), 0);
        assert_eq!(retire_dm_scope(&mut s, "main", "main", None).len(), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn fix_missing_rules() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(
            d.join("ok.jsonl"),
            "{\"type\":\"session\"}\n{\"type\":\"message\"}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("empty.jsonl"),
            "{\"type\":\"session\",\"id\":\"empty\"}\n",
        )
        .unwrap();
        let uuid = "0123abcd-0000-4000-8000-0123456789ab";
        std::fs::write(d.join("real.jsonl"), "{\"role\":\"user\"}\n").unwrap();
        let mut s = store(json!({
            "agent:main:a": {"sessionId": "ok"},
            "agent:main:b": {"sessionId": "gone"},
            "agent:main:c": {"sessionId": "empty"},
            "agent:main:d": {},
            "plain": {},
            "agent:main:e": {"sessionId": "real", "sessionFile": format!("{uuid}.jsonl")}
        }));
        let r = fix_missing(&mut s, &d);
        let removed: Vec<_> = r.removed.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(removed, vec!["agent:main:b", "agent:main:c", "plain"]);
        assert_eq!(
            r.repaired
                .iter()
                .map(|r| (r.key.clone(), r.new.clone()))
                .collect::<Vec<_>>(),
            vec![(
                "agent:main:e".to_string(),
                d.join("real.jsonl").to_string_lossy().into_owned()
            )]
        );
    }

    #[test]
    fn generated_ids() {
        let u = "0123abcd-0000-4000-8000-0123456789ab";
        assert_eq!(
            generated_transcript_session_id(Some(&format!("/x/{u}.jsonl"))),
            Some(u.to_string())
        );
        assert_eq!(
            generated_transcript_session_id(Some(&format!("{u}-topic-9.jsonl"))),
            Some(u.to_string())
        );
        assert_eq!(
            generated_transcript_session_id(Some(&format!("2026-01-01T10-00-00Z_{u}.jsonl"))),
            Some(u.to_string())
        );
        assert_eq!(generated_transcript_session_id(Some("abc.jsonl")), None);
    }

    /// The victims come back in the order given, each once, and the rest keep their order;
    /// a victim the store does not have is skipped.
    #[test]
    fn take_returns_the_victims_in_the_order_given() {
        let mut s: Store = ["a", "b", "c", "d", "e"]
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), Json::from(i as i64)))
            .collect();
        // d, a place past the end, b, d again, a.
        let taken = take(&mut s, vec![3, 9, 1, 3, 0]);
        let keys: Vec<&str> = taken.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["d", "b", "a"]);
        assert_eq!(taken[0].1, json!(3));
        assert_eq!(s.keys().collect::<Vec<_>>(), ["c", "e"]);
        assert_eq!(
            s.get("e"),
            Some(&Json::from(4)),
            "kept entries keep their values"
        );
    }

    /// Against the plain definition, over many stores and victim lists (repeats, places past
    /// the end, every order): the taken entries in the order given, the rest in store order.
    #[test]
    fn take_matches_its_definition() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        for _ in 0..300 {
            let len = next(40);
            let s: Store = (0..len)
                .map(|i| (format!("k{i}"), Json::from(i as i64)))
                .collect();
            let victims: Vec<usize> = (0..next(60)).map(|_| next(len + 3)).collect();
            let mut expected_taken = Vec::new();
            for &v in &victims {
                if v < len && !expected_taken.contains(&v) {
                    expected_taken.push(v);
                }
            }
            let expected_kept: Vec<String> = (0..len)
                .filter(|i| !expected_taken.contains(i))
                .map(|i| format!("k{i}"))
                .collect();
            let mut got = s.clone();
            let taken = take(&mut got, victims.clone());
            let taken_keys: Vec<String> = taken.iter().map(|(k, _)| k.clone()).collect();
            let want: Vec<String> = expected_taken.iter().map(|i| format!("k{i}")).collect();
            assert_eq!(taken_keys, want, "victims {victims:?}");
            for (k, v) in &taken {
                assert_eq!(Some(v), s.get(k), "a taken entry keeps its value");
            }
            assert_eq!(got.keys().cloned().collect::<Vec<_>>(), expected_kept);
            for (k, v) in &got {
                assert_eq!(Some(v), s.get(k), "a kept entry keeps its value");
                assert_eq!(got.get(k), Some(v), "the kept store still finds its keys");
            }
        }
    }
}
