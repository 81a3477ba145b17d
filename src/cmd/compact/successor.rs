//! `compact --successor`: write a successor transcript instead of appending, as the runtime's
//! truncate-after-compaction does, and point the store entry at it.
//!
//! Per store entry, under the transcript's lock: index and check the file as the other
//! transcript commands do (files with unparsable lines are refused, since a successor could not
//! carry them), plan the compaction, write the successor beside the old file (checked before it
//! is renamed into place), then reload the store and set the entry's `sessionId`,
//! `sessionFile` and `compactionCount + 1`, still pointing at the old file when re-checked. If
//! the store cannot be updated, the successor is removed again. The old file is not touched;
//! `cleanup` reclaims it later.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use rayon::prelude::*;
use serde_json::{Value, json};

use super::{External, describe, details, use_external};
use crate::cli::{ModeArgs, TranscriptTargetArgs};
use crate::cmd::transcript_targets::{self, Target};
use crate::cmd::transcripts::{self, Labels};
use crate::compact::plan::{self, Settings};
use crate::compact::{context_of, rotate};
use crate::exit::Exit;
use crate::fsutil::Confined;
use crate::fsutil::lock::{self, Acquire};
use crate::progress::{self, Progress};
use crate::store;
use crate::transcript::job::{self, Outcome, Status};
use crate::transcript::tree::{self, ContextItem};
use crate::transcript::values;

/// Run-wide settings of a successor run.
pub(super) struct Run<'a> {
    pub settings: &'a Settings,
    pub external: Option<&'a External>,
    pub enforce: bool,
    pub wait_lock: Option<Duration>,
    pub now: &'a str,
}

pub(super) fn run(
    targets: &TranscriptTargetArgs,
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    run: &Run,
) -> Result<Exit> {
    let resolved = transcript_targets::resolve(targets)?;
    let size = |p: &std::path::Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
    let sizes: Vec<u64> = resolved.targets.iter().map(|t| size(&t.path)).collect();
    let progress = Progress::bytes(
        sizes.iter().sum(),
        labels.command,
        progress::wanted(mode.json, mode.quiet),
    );
    let mut results: Vec<(Outcome, Option<String>)> = resolved
        .targets
        .par_iter()
        .zip(&sizes)
        .map(|(t, bytes)| {
            let mut out = Outcome::new(&t.path, Status::Unchanged);
            if let Err(status) = one(t, run, &mut out) {
                out.status = status;
                out.bytes_after = out.bytes_before;
            }
            progress.inc(*bytes);
            (out, t.session_key.clone())
        })
        .collect();
    progress.finish();
    results.extend(resolved.skipped);
    transcripts::report(mode, labels, count, &results)
}

fn one(t: &Target, run: &Run, out: &mut Outcome) -> Result<(), Status> {
    let (Some(store_path), Some(key)) = (&t.store, &t.session_key) else {
        return Err(Status::Refused("--successor needs a store entry".into()));
    };
    let confined = Confined::new(&t.dir).map_err(job::failed)?;
    job::check_target(&confined, &t.path)?;
    let _lock = if run.enforce {
        match lock::acquire(&confined, &t.path, run.wait_lock).map_err(job::failed)? {
            Acquire::Locked(l) => Some(l),
            Acquire::Busy(holder) => return Err(Status::Locked(holder.to_string())),
        }
    } else {
        None
    };
    let before = job::stamp(&t.path).map_err(|e| job::failed(e.into()))?;
    let (index, tree) = job::index_checked(&t.path, out)?;
    if !index.unparsable.is_empty() {
        return Err(Status::Refused(
            "lines that do not parse cannot be carried into a successor; compact in place instead"
                .into(),
        ));
    }
    let nodes: Vec<usize> = (0..index.entries.len())
        .filter(|&i| tree::is_node(&index.entries[i]))
        .collect();
    let mut all = values::read_entries(&t.path, &index, &nodes).map_err(job::failed)?;
    // Entries without a `parentId` hang below the previous indexed entry in the runtime; the
    // successor is written in another order, so give them that parent explicitly.
    for (v, &i) in all.iter_mut().zip(&nodes) {
        if v.get("parentId").is_none()
            && let (Some(obj), Some(p)) = (v.as_object_mut(), tree.parent(i))
        {
            let id = index.entries[p].id.as_deref().unwrap_or_default();
            obj.insert("parentId".into(), json!(id));
        }
    }
    let pos: HashMap<usize, usize> = nodes.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let active = tree.active_path();
    crate::compact::ensure_rooted(&index, &active)
        .map_err(|e| Status::Skipped(format!("{e:#}")))?;
    let path_values: Vec<Value> = active.iter().map(|i| all[pos[i]].clone()).collect();
    let context = context_of(&index, &tree, &active, &path_values);
    let taken = |id: &str| tree.by_id.contains_key(id);
    let mut c = match plan::plan(&path_values, &context, run.settings, &taken, run.now) {
        Ok(c) => c,
        Err(leave) => {
            out.notes = vec![format!("left alone: {leave}")];
            return Ok(());
        }
    };
    out.notes = describe(&index, &c);
    if let Some(ext) = run.external {
        out.notes
            .push(use_external(ext, &mut c, run.enforce, run.now));
    }
    out.details = Some(details(&c, &run.settings.estimator));
    if !run.enforce {
        out.status = Status::WouldChange;
        out.notes.push(format!(
            "would write a successor transcript and point {key} at it; the old file stays"
        ));
        return Ok(());
    }
    let kept_tail: Vec<String> = tree::context_of(&index, &tree, &active)
        .into_iter()
        .filter_map(|item| match item {
            ContextItem::Entry(i) => index.entries[i].id.as_deref().map(str::to_owned),
            ContextItem::CompactionSummary(_) => None,
        })
        .skip_while(|id| *id != c.cut.first_kept_id)
        .collect();
    let mut branch: Vec<usize> = active.iter().map(|i| pos[i]).collect();
    all.push(c.entry.to_value());
    branch.push(all.len() - 1);
    let header = crate::jsjson::parse(&index.header_raw).map_err(|e| job::failed(e.into()))?;
    let cwd = header.get("cwd").and_then(Value::as_str).unwrap_or("");
    let rotated =
        rotate::write_successor(&confined, &t.path, cwd, &all, &branch, &kept_tail, run.now)
            .map_err(|e| Status::Refused(format!("{e:#}")))?;
    let undo = |why: Status| {
        let _ = confined.remove_file(&rotated.path);
        why
    };
    if job::stamp(&t.path).map_err(|e| undo(job::failed(e.into())))? != before {
        return Err(undo(Status::Refused(
            "the transcript changed while the successor was written; nothing was changed".into(),
        )));
    }
    point_store_at(store_path, key, &t.path, &rotated).map_err(|e| undo(job::failed(e)))?;
    out.status = Status::Changed;
    out.bytes_after = rotated.bytes_written;
    out.notes.push(format!(
        "wrote successor {} ({} entries); {key} now points at it; the old file stays for cleanup",
        rotated.path.display(),
        rotated.entries_written
    ));
    if let Some(Value::Object(d)) = &mut out.details {
        d.insert("successorSessionId".into(), json!(rotated.session_id));
        d.insert(
            "successorFile".into(),
            json!(rotated.path.display().to_string()),
        );
    }
    Ok(())
}

/// Reload the store and switch `key` to the successor (it must still name `old`).
fn point_store_at(
    store_path: &Path,
    key: &str,
    old: &Path,
    rotated: &rotate::Rotated,
) -> Result<()> {
    let dir = store_path.parent().unwrap_or(Path::new("."));
    let confined = Confined::new(dir)?;
    let mut loaded = store::load(store_path)?;
    let entry = loaded
        .store
        .get_mut(key)
        .ok_or_else(|| anyhow!("{key} is no longer in {}", store_path.display()))?;
    let now_points_at = store::entry_transcript(entry, dir);
    if now_points_at.as_deref() != Some(&crate::store::paths::canonical(old)) {
        bail!(
            "{key} no longer points at {} in {}",
            old.display(),
            store_path.display()
        );
    }
    let obj = entry
        .as_object_mut()
        .with_context(|| format!("{key} in {} is not an object", store_path.display()))?;
    let count = obj
        .get("compactionCount")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    obj.insert("sessionId".into(), json!(rotated.session_id));
    obj.insert(
        "sessionFile".into(),
        json!(rotated.path.display().to_string()),
    );
    obj.insert(
        "compactionCount".into(),
        json!(if count.is_finite() && count >= 0.0 {
            count as u64 + 1
        } else {
            1
        }),
    );
    store::save(&confined, store_path, &loaded.store, None, loaded.stamp)?;
    Ok(())
}
