//! Writing the successor transcript (`--successor`): the old file stays untouched, the new one
//! gets a new session id, a header whose `parentSession` names the old file, and the entries
//! [`super::successor_plan::build`] chose, each read back from the old file one at a time, edited,
//! and written as `JSON.stringify` writes it.
//!
//! The file is written through `fsutil` (temp file, fsync, rename) with the old file's mode,
//! owner and group, and checked before the rename: header first, ids unique, every parent
//! present, the new compaction is the leaf, and the rebuilt context ends with the old
//! context's kept tail.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::successor_plan::{self, Rewrite};
use crate::fsutil::Confined;
use crate::jsjson;
use crate::transcript::tree::{self, ContextItem, Tree};
use crate::transcript::values::EntryReader;
use crate::transcript::{Index, IndexBuilder};

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotated {
    pub session_id: String,
    /// Absolute path of the new transcript.
    pub path: PathBuf,
    pub entries_written: usize,
    pub bytes_written: u64,
}

/// Write the successor of `old_path`. `index` holds the old file's entries with the new
/// compaction appended as entry `compaction.0` (its value is `compaction.1`, not in the file);
/// `rewrites` are the successor's lines in order ([`successor_plan::build`]); `kept_tail` are the
/// ids of the old context's entries from the cut on, which the successor's context must end
/// with (minus entries the rotation drops as repeated prompts). Each line is read back from
/// the old file, edited and written in turn, so memory holds one entry at a time.
#[allow(clippy::too_many_arguments)]
pub fn write_successor(
    confined: &Confined,
    old_path: &Path,
    old_cwd: &str,
    index: &Index,
    rewrites: &[Rewrite],
    compaction: (usize, &Value),
    kept_tail: &[String],
    now: &str,
) -> Result<Rotated> {
    let dir = old_path.parent().unwrap_or(Path::new("."));
    let session_id = crate::fsutil::random_uuid();
    let path = dir.join(successor_plan::file_name(now, &session_id));
    if std::fs::symlink_metadata(&path).is_ok() {
        bail!("{} already exists", path.display());
    }
    let parent_session = std::path::absolute(old_path)
        .with_context(|| format!("cannot resolve {}", old_path.display()))?;
    let cwd = if old_cwd.is_empty() {
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| "/".into())
    } else {
        old_cwd.to_owned()
    };
    let header = successor_plan::header(
        &session_id,
        now,
        &cwd,
        &parent_session.display().to_string(),
    );
    let compaction_id = compaction
        .1
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // The successor takes the old file's place in the store: it gets its mode, owner and
    // group (the gateway that reads it may not be the user compacting).
    let written = confined.replace_verified_like(
        &path,
        old_path,
        |w: &mut dyn Write| -> Result<(u64, Index)> {
            let mut reader = EntryReader::open(old_path)?;
            let mut builder = IndexBuilder::default();
            let mut bytes = 0u64;
            let mut put = |line: String| -> Result<()> {
                let line = line + "\n";
                w.write_all(line.as_bytes())?;
                builder.push_line(line.as_bytes());
                bytes += line.len() as u64;
                Ok(())
            };
            put(jsjson::to_string_compact(&header))?;
            for r in rewrites {
                let v = if r.original == compaction.0 {
                    compaction.1.clone()
                } else {
                    reader.read(index, r.original)?
                };
                put(jsjson::to_string_compact(&r.apply(v)))?;
            }
            Ok((bytes, builder.finish()))
        },
        |(_, index)| verify(index, &compaction_id, kept_tail),
    )?;
    Ok(Rotated {
        session_id,
        path: std::path::absolute(&path).unwrap_or(path),
        entries_written: rewrites.len(),
        bytes_written: written.0,
    })
}

fn verify(index: &Index, compaction_id: &str, kept_tail: &[String]) -> Result<()> {
    if index.header().is_none() || !index.unparsable.is_empty() {
        bail!("successor check failed: header or lines do not parse back");
    }
    let tree = Tree::build(index);
    if let Some(id) = tree.duplicate_ids.first() {
        bail!("successor check failed: duplicate id {id}");
    }
    if !tree.dangling.is_empty() {
        bail!("successor check failed: an entry names a missing parent");
    }
    if tree.leaf_id(index) != Some(compaction_id) {
        bail!("successor check failed: the new compaction is not the leaf");
    }
    let (ctx, _) = tree::active_context(index, &tree);
    let ids: Vec<&str> = ctx
        .iter()
        .filter_map(|c| match *c {
            ContextItem::Entry(i) => index.entries[i as usize].id.as_deref(),
            ContextItem::CompactionSummary(_) => None,
        })
        .collect();
    if !matches!(ctx.first(), Some(ContextItem::CompactionSummary(_))) {
        bail!("successor check failed: the context does not start with the summary");
    }
    let present: std::collections::HashSet<&str> = ids.iter().copied().collect();
    let expected: Vec<&str> = kept_tail
        .iter()
        .map(String::as_str)
        .filter(|id| present.contains(id))
        .collect();
    if ids.len() < expected.len() || ids[ids.len() - expected.len()..] != expected[..] {
        bail!("successor check failed: the kept messages are not the context's tail");
    }
    let first_tail = kept_tail.first().map(String::as_str);
    if first_tail.is_some_and(|f| !present.contains(f)) {
        bail!("successor check failed: the first kept message is missing");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::compact::testgen::PathBuilder;

    #[test]
    fn writes_a_successor_beside_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let confined = Confined::new(dir.path()).unwrap();
        let old = dir.path().join("old.jsonl");
        let mut b = PathBuilder::default();
        b.user("first");
        b.assistant_text("answer");
        let u = b.user("second");
        b.assistant_text("answer two");
        b.push(
            "compaction",
            json!({"summary":"S","firstKeptEntryId":u,"tokensBefore":9}),
        );
        let (compaction, kept) = b.entries.split_last().unwrap();
        let mut original =
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}"#.to_owned();
        for e in kept {
            original.push('\n');
            original.push_str(&jsjson::to_string_compact(e));
        }
        original.push('\n');
        std::fs::write(&old, &original).unwrap();
        let mut builder = IndexBuilder::resume(Index::from_path(&old, None).unwrap());
        builder.push_line(format!("{}\n", jsjson::to_string_compact(compaction)).as_bytes());
        let index = builder.finish();
        let tree = Tree::build(&index);
        let branch = tree.active_path();
        let rewrites = successor_plan::build(&index, &tree, &branch, &mut |p| {
            Ok(successor_plan::PathEntry::of(&b.entries[branch[p] - 1]))
        })
        .unwrap()
        .unwrap();
        let appended = (index.entries.len() - 1, compaction);
        let tail = vec![u.clone(), "e0004".to_owned()];
        let write = |tail: &[String], now: &str| {
            write_successor(
                &confined, &old, "/w", &index, &rewrites, appended, tail, now,
            )
        };
        let r = write(&tail, "2026-03-03T00:00:00.000Z").unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), original);
        let name = r.path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(
            name,
            format!("2026-03-03T00-00-00-000Z_{}.jsonl", r.session_id)
        );
        let text = std::fs::read_to_string(&r.path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0]["parentSession"],
            json!(std::path::absolute(&old).unwrap().display().to_string())
        );
        assert_eq!(lines[0]["cwd"], "/w");
        // the last summarised assistant stays, and the compaction now keeps from it
        assert_eq!(lines[1]["id"], "e0002");
        assert_eq!(lines.last().unwrap()["firstKeptEntryId"], "e0002");
        assert_eq!(r.entries_written, lines.len() - 1);
        // a tail that the successor does not end with is refused, and nothing is left behind
        let bad = vec!["e0001".to_owned()];
        assert!(write(&bad, "2026-03-03T00:00:01.000Z").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        // an old file that changed meanwhile is noticed
        std::fs::write(&old, original.replace("e0003", "e9999")).unwrap();
        assert!(write(&tail, "2026-03-03T00:00:02.000Z").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
