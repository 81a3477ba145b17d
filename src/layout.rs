//! What each file name in a sessions directory is, following OpenClaw's `artifacts.ts` rules.
//!
//! `classify(name, store_basename)` returns a `FileKind`: primary transcript, topic transcript,
//! archive (reason + timestamp), legacy store backup (`sessions.json.bak.<digits>`), compaction
//! checkpoint, trajectory runtime or pointer, store temp, lock, the store itself, or other. The
//! predicates OpenClaw uses (`is_archive_name`, `is_primary_transcript_name`, …) are exposed
//! one by one because maintenance combines them exactly as the reference does.

use crate::isotime::{civil_from_days, days_from_civil};

/// Why a file was archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArchiveReason {
    Deleted,
    Reset,
    Bak,
}

impl ArchiveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveReason::Deleted => "deleted",
            ArchiveReason::Reset => "reset",
            ArchiveReason::Bak => "bak",
        }
    }

    /// `.<reason>.`, what precedes the timestamp in an archive name.
    fn marker(self) -> &'static str {
        match self {
            ArchiveReason::Deleted => ".deleted.",
            ArchiveReason::Reset => ".reset.",
            ArchiveReason::Bak => ".bak.",
        }
    }
}

/// The kind of one file directly in a sessions directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// The store itself (`sessions.json`, or the `--store` basename).
    Store,
    /// `<sessionId>.jsonl`.
    Transcript,
    /// `<sessionId>-topic-<threadId>.jsonl`.
    TopicTranscript,
    /// `<name>.<reason>.<timestamp>`; `timestamp_ms` is the parsed UTC time.
    Archive {
        reason: ArchiveReason,
        timestamp_ms: Option<i64>,
    },
    /// `sessions.json.bak.<digits>` (old rotation backups).
    LegacyStoreBackup,
    /// `<sessionId>.checkpoint.<uuid>.jsonl`.
    Checkpoint,
    /// `<x>.trajectory.jsonl`.
    TrajectoryRuntime,
    /// `<x>.trajectory-path.json`.
    TrajectoryPointer,
    /// `<store>.[<pid>.]<uuid>.tmp` from atomic writes.
    StoreTemp,
    /// `*.lock`.
    Lock,
    Other,
}

/// `^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z$`.
fn is_archive_timestamp(raw: &str) -> bool {
    let b = raw.as_bytes();
    let shape = |pattern: &str| {
        pattern.len() == b.len()
            && pattern.bytes().zip(b).all(|(p, c)| match p {
                b'd' => c.is_ascii_digit(),
                other => other == *c,
            })
    };
    shape("dddd-dd-ddTdd-dd-ddZ") || shape("dddd-dd-ddTdd-dd-dd.dddZ")
}

/// Parse an archive timestamp (`2026-03-01T12-30-45.123Z`) into UTC milliseconds.
pub fn parse_archive_timestamp(raw: &str) -> Option<i64> {
    if !is_archive_timestamp(raw) {
        return None;
    }
    let n = |s: &str| s.parse::<i64>().ok();
    let (y, mo, d) = (n(&raw[0..4])?, n(&raw[5..7])?, n(&raw[8..10])?);
    let (h, mi, s) = (n(&raw[11..13])?, n(&raw[14..16])?, n(&raw[17..19])?);
    let ms = if raw.len() == 24 { n(&raw[20..23])? } else { 0 };
    // V8's Date.parse takes any day 1..=31 (Feb 30 rolls over into March) and 24:00:00 as
    // the next midnight; other out-of-range fields make it NaN.
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || mi > 59
        || s > 59
        || h > 24
        || (h == 24 && (mi, s, ms) != (0, 0, 0))
    {
        return None;
    }
    Some(((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms)
}

/// `Date.prototype.toISOString()` with every `:` replaced by `-` (the archive name stamp).
pub fn format_archive_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}-{:02}-{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// The timestamp after the last `.<reason>.` when it has the archive shape (`hasArchiveSuffix`).
pub fn archive_suffix(name: &str, reason: ArchiveReason) -> Option<&str> {
    // Every archive timestamp ends in `Z`: most names are rejected without a search.
    if !name.ends_with('Z') {
        return None;
    }
    let marker = reason.marker();
    let idx = name.rfind(marker)?;
    let raw = &name[idx + marker.len()..];
    is_archive_timestamp(raw).then_some(raw)
}

/// `parseSessionArchiveTimestamp(name, reason)`.
pub fn archive_timestamp(name: &str, reason: ArchiveReason) -> Option<i64> {
    archive_suffix(name, reason).and_then(parse_archive_timestamp)
}

pub fn is_legacy_store_backup(name: &str) -> bool {
    name.strip_prefix("sessions.json.bak.")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
}

/// `isSessionArchiveArtifactName`.
pub fn is_archive_name(name: &str) -> bool {
    is_legacy_store_backup(name)
        || [
            ArchiveReason::Deleted,
            ArchiveReason::Reset,
            ArchiveReason::Bak,
        ]
        .into_iter()
        .any(|r| archive_suffix(name, r).is_some())
}

/// `8-4-4-4-12` hex groups, either case (every UUID shape check of the program).
pub fn is_uuid_shape(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// [`is_uuid_shape`] in lower case only (`[0-9a-f]`).
pub fn is_lowercase_uuid_shape(s: &str) -> bool {
    is_uuid_shape(s) && !s.bytes().any(|c| c.is_ascii_uppercase())
}

/// `^(.+)\.checkpoint\.(<uuid v1-5, variant 89ab>)\.jsonl$` (case-insensitive).
pub fn parse_checkpoint_name(name: &str) -> Option<(&str, &str)> {
    parse_checkpoint_stem(name.strip_suffix(".jsonl")?)
}

/// [`parse_checkpoint_name`] of `<stem>.jsonl`.
pub fn parse_checkpoint_stem(stem: &str) -> Option<(&str, &str)> {
    if stem.len() < 36 + 12 || !stem.is_char_boundary(stem.len() - 36) {
        return None;
    }
    let (head, uuid) = stem.split_at(stem.len() - 36);
    let session = head.strip_suffix(".checkpoint.")?;
    if session.is_empty() || !is_uuid_shape(uuid) {
        return None;
    }
    let u = uuid.as_bytes();
    let version_ok = (b'1'..=b'5').contains(&u[14]);
    let variant_ok = matches!(u[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b');
    (version_ok && variant_ok).then_some((session, uuid))
}

pub fn is_checkpoint_name(name: &str) -> bool {
    parse_checkpoint_name(name).is_some()
}

pub fn is_trajectory_runtime_name(name: &str) -> bool {
    name.ends_with(".trajectory.jsonl")
}

pub fn is_trajectory_pointer_name(name: &str) -> bool {
    name.ends_with(".trajectory-path.json")
}

pub fn is_trajectory_name(name: &str) -> bool {
    is_trajectory_runtime_name(name) || is_trajectory_pointer_name(name)
}

/// `isPrimarySessionTranscriptFileName`: a `.jsonl` that is not the store, a trajectory, a
/// checkpoint or an archive (topic transcripts included).
pub fn is_primary_transcript_name(name: &str) -> bool {
    name != "sessions.json"
        && name.ends_with(".jsonl")
        && !is_trajectory_runtime_name(name)
        && !is_checkpoint_name(name)
        && !is_archive_name(name)
}

/// `^<store basename>\.(?:\d+\.)?<uuid>\.tmp$`, case-insensitive.
pub fn is_store_temp_name(name: &str, store_basename: &str) -> bool {
    if store_basename.is_empty() || name.len() < store_basename.len() + 1 {
        return false;
    }
    let (head, tail) = name.split_at(store_basename.len());
    if !head.eq_ignore_ascii_case(store_basename) {
        return false;
    }
    let Some(rest) = tail.strip_prefix('.') else {
        return false;
    };
    let Some(body) = rest.strip_suffix(".tmp").or_else(|| {
        rest.len()
            .checked_sub(4)
            .and_then(|i| rest[i..].eq_ignore_ascii_case(".tmp").then(|| &rest[..i]))
    }) else {
        return false;
    };
    if is_uuid_shape(body) {
        return true;
    }
    match body.split_once('.') {
        Some((pid, uuid)) => {
            !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) && is_uuid_shape(uuid)
        }
        None => false,
    }
}

/// Classify one file name of a sessions directory whose store file is `store_basename`.
pub fn classify(name: &str, store_basename: &str) -> FileKind {
    if name == store_basename {
        return FileKind::Store;
    }
    if is_legacy_store_backup(name) {
        return FileKind::LegacyStoreBackup;
    }
    for reason in [
        ArchiveReason::Deleted,
        ArchiveReason::Reset,
        ArchiveReason::Bak,
    ] {
        if let Some(raw) = archive_suffix(name, reason) {
            return FileKind::Archive {
                reason,
                timestamp_ms: parse_archive_timestamp(raw),
            };
        }
    }
    if is_store_temp_name(name, store_basename) {
        return FileKind::StoreTemp;
    }
    if is_checkpoint_name(name) {
        return FileKind::Checkpoint;
    }
    if is_trajectory_runtime_name(name) {
        return FileKind::TrajectoryRuntime;
    }
    if is_trajectory_pointer_name(name) {
        return FileKind::TrajectoryPointer;
    }
    if is_primary_transcript_name(name) {
        let stem = &name[..name.len() - 6];
        return if stem.find("-topic-").is_some_and(|i| i > 0) {
            FileKind::TopicTranscript
        } else {
            FileKind::Transcript
        };
    }
    if name.ends_with(".lock") {
        return FileKind::Lock;
    }
    FileKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names() {
        let ts = "2026-03-01T12-30-45.123Z";
        assert_eq!(parse_archive_timestamp(ts), Some(1_772_368_245_123));
        assert_eq!(format_archive_timestamp(1_772_368_245_123), ts);
        assert_eq!(
            parse_archive_timestamp("2026-03-01T12-30-45Z"),
            Some(1_772_368_245_000)
        );
        assert_eq!(
            parse_archive_timestamp("2026-02-30T10-00-00.000Z"),
            Some(1_772_445_600_000)
        );
        assert_eq!(parse_archive_timestamp("2026-02-32T10-00-00Z"), None);
        assert_eq!(parse_archive_timestamp("2026-13-01T10-00-00Z"), None);
        assert!(is_archive_name(&format!("abc.jsonl.deleted.{ts}")));
        assert!(is_archive_name(&format!("abc.jsonl.reset.{ts}")));
        assert!(is_archive_name(&format!("abc.jsonl.bak.{ts}")));
        assert!(is_archive_name("sessions.json.bak.1700000000000"));
        assert!(!is_archive_name(&format!("abc.jsonl.deleted.{ts}.zst")));
        assert!(!is_archive_name("abc.jsonl.bak"));
        assert_eq!(
            classify(&format!("a.jsonl.deleted.{ts}"), "sessions.json"),
            FileKind::Archive {
                reason: ArchiveReason::Deleted,
                timestamp_ms: Some(1_772_368_245_123)
            }
        );
        assert_eq!(format_archive_timestamp(0), "1970-01-01T00-00-00.000Z");
    }

    #[test]
    fn file_kinds() {
        let sb = "sessions.json";
        assert_eq!(classify("sessions.json", sb), FileKind::Store);
        assert_eq!(classify("abc.jsonl", sb), FileKind::Transcript);
        assert_eq!(
            classify("abc-topic-42.jsonl", sb),
            FileKind::TopicTranscript
        );
        assert_eq!(
            classify(
                "abc.checkpoint.0123abcd-0000-4000-8000-0123456789ab.jsonl",
                sb
            ),
            FileKind::Checkpoint
        );
        assert_eq!(
            classify(
                "abc.checkpoint.0123abcd-0000-7000-8000-0123456789ab.jsonl",
                sb
            ),
            FileKind::Transcript
        );
        assert_eq!(
            classify("abc.trajectory.jsonl", sb),
            FileKind::TrajectoryRuntime
        );
        assert_eq!(
            classify("abc.trajectory-path.json", sb),
            FileKind::TrajectoryPointer
        );
        assert_eq!(
            classify(
                "sessions.json.123.0123abcd-0000-4000-8000-0123456789ab.tmp",
                sb
            ),
            FileKind::StoreTemp
        );
        assert_eq!(
            classify("sessions.json.0123abcd-0000-4000-8000-0123456789ab.tmp", sb),
            FileKind::StoreTemp
        );
        assert_eq!(
            classify(
                "sessions.json.x.0123abcd-0000-4000-8000-0123456789ab.tmp",
                sb
            ),
            FileKind::Other
        );
        assert_eq!(classify("abc.jsonl.lock", sb), FileKind::Lock);
        assert_eq!(
            classify("sessions.json.bak.17", sb),
            FileKind::LegacyStoreBackup
        );
        assert_eq!(classify("notes.txt", sb), FileKind::Other);
        assert!(!is_primary_transcript_name("sessions.json"));
    }
}
