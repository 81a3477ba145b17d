//! `inspect --transcript FILE`: the report for one transcript without a store.
//!
//! The file is read by the same analysis as a store's transcripts (`super::analyse`: one scan,
//! then the planners of `strip-images`, `prune-noreply` and `compact` previewed through the
//! shared transcript job, exactly as those commands would run on `--transcript FILE`). There
//! is no store, so there is no cleanup figure, no session kind and no file categories; the
//! transcript's write lock, if any, is reported as the store report reports locks.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Hooks, Tick, TranscriptFacts};
use crate::fsutil::Confined;
use crate::fsutil::lock::{self, Holder};

/// The report of one transcript.
#[derive(Debug, Clone)]
pub struct TranscriptReport {
    pub path: PathBuf,
    /// The `id` of the session header, when the first line is one.
    pub session_id: Option<String>,
    pub facts: TranscriptFacts,
    /// The transcript's `<file>.lock`, when there is one (held or stale).
    pub lock: Option<Holder>,
}

/// Inspect one transcript. A file that is missing, not a regular file or unreadable is an
/// error naming it.
pub fn inspect_transcript(path: &Path, hooks: &Hooks) -> Result<TranscriptReport> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot read --transcript {}", path.display()))?;
    if !meta.file_type().is_file() {
        let what = crate::fsutil::describe_type(&meta);
        if meta.file_type().is_symlink() {
            bail!(
                "{} is a symlink, and clawkeeper never follows symlinks to transcripts",
                path.display()
            );
        }
        bail!("{} is not a regular file but {what}", path.display());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    (hooks.progress)(Tick::Planned(meta.len()));
    let facts = super::analyse(path, Confined::new(&dir).ok().as_ref(), hooks);
    (hooks.progress)(Tick::Done(meta.len()));
    if let Some(e) = &facts.error {
        bail!("{e}");
    }
    let lock = match Confined::new(&dir).and_then(|c| lock::lock_path(&c, path)) {
        Ok(p) => lock::probe(&p)?,
        Err(_) => None,
    };
    Ok(TranscriptReport {
        path: path.to_owned(),
        session_id: header_id(path),
        facts,
        lock,
    })
}

/// The `id` of the session header (a header longer than 64 KiB is not read).
fn header_id(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    BufReader::new(file.take(1 << 16))
        .read_line(&mut line)
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(line.trim_end()).ok()?;
    (v["type"] == "session")
        .then(|| v["id"].as_str().map(str::to_owned))
        .flatten()
}
