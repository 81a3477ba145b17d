//! What `cleanup --enforce` would remove, found by running the real apply ([`super::run::apply`])
//! on a private scratch mirror of the sessions directory (`fsutil::scratch`: hard links, or
//! sparse stand-ins that take no space), so that the prediction is the apply's own result and
//! not a second model of it. `inspect` reports the bytes it frees; `cleanup --max-delete`
//! bounds the files and bytes it removes.
//!
//! A store may name files by absolute path (`sessionFile`, checkpoint `sessionFile`s): in the
//! mirror's store those paths are moved into the mirror, so that they resolve as the real run
//! resolves them, and the store's own size is measured with the paths as they really are.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::run::{self, Options};
use super::scan;
use crate::fsutil::scratch::Scratch;

/// What an apply would do to one store's directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prediction {
    /// Store entries removed.
    pub entries_removed: u64,
    pub entries_before: u64,
    /// Files removed for good (an archive rename moves a file and is not counted).
    pub files_removed: u64,
    pub files_before: u64,
    /// Bytes of the files removed for good.
    pub bytes_removed: u64,
    /// Bytes of the files directly in the directory before and after (the store included;
    /// not the skill prompt blobs), as `inspect` measures a directory.
    pub disk_before: u64,
    pub disk_after: u64,
    /// Files the mirror could not read (damage: they are measured by size only).
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Run the apply of `opts` on a scratch mirror of `store_path`'s directory.
pub fn predict(agent_id: &str, store_path: &Path, opts: &Options) -> Result<Prediction> {
    let dir = run::sessions_dir_of(store_path);
    let name = store_path.file_name().unwrap_or_default();
    let scratch = Scratch::of_sessions_dir(&dir, agent_id, Some(name))?;
    let scratch_store = scratch.sessions_dir().join(name);
    let aliases = path_aliases(&dir, scratch.sessions_dir());
    let real_store_len = std::fs::symlink_metadata(store_path).map_or(0, |m| m.len());
    move_paths(&scratch_store, &aliases, false)?;
    let before = files_by_inode(scratch.sessions_dir());
    let mut apply_opts = opts.clone();
    apply_opts.flags.dry_run = false;
    let summary = run::apply(agent_id, &scratch_store, &apply_opts, None, None).map_err(|e| {
        let text = format!("{e:#}").replace(
            &scratch.sessions_dir().display().to_string(),
            &dir.display().to_string(),
        );
        anyhow::anyhow!(text)
    })?;
    let store_len_after = move_paths(&scratch_store, &aliases, true)?;
    let after = files_by_inode(scratch.sessions_dir());
    let store_ino = std::fs::symlink_metadata(&scratch_store)
        .map(|m| m.ino())
        .ok();
    let (mut files_removed, mut bytes_removed) = (0, 0);
    for (ino, (path, len)) in &before {
        if !after.contains_key(ino) && Some(*ino) != store_ino && path != &scratch_store {
            files_removed += 1;
            bytes_removed += len;
        }
    }
    // The store in the mirror holds mirror paths: count it with its real length.
    let top = scratch.sessions_dir();
    let sum = |m: &HashMap<u64, (PathBuf, u64)>, store: u64| -> u64 {
        m.values()
            .filter(|(p, _)| p != &scratch_store && p.parent() == Some(top))
            .map(|(_, len)| len)
            .sum::<u64>()
            + store
    };
    let store_existed = before.values().any(|(p, _)| p == &scratch_store);
    Ok(Prediction {
        entries_removed: summary.before_count.saturating_sub(summary.after_count),
        entries_before: summary.before_count,
        files_removed,
        files_before: before.len() as u64,
        bytes_removed,
        disk_before: sum(&before, if store_existed { real_store_len } else { 0 }),
        disk_after: sum(&after, store_len_after),
        unreadable: scratch.unreadable.clone(),
    })
}

/// The regular files of a sessions directory (and its skill prompt blobs) by inode.
fn files_by_inode(dir: &Path) -> HashMap<u64, (PathBuf, u64)> {
    scan::scan(dir)
        .into_iter()
        .chain(scan::scan_blobs(dir))
        .filter_map(|f| {
            let m = std::fs::symlink_metadata(&f.path).ok()?;
            Some((m.ino(), (f.path, m.len())))
        })
        .collect()
}

/// The real directory's spellings (as given and canonical) paired with the mirror's, as they
/// appear inside JSON strings.
fn path_aliases(real: &Path, mirror: &Path) -> Vec<(String, String)> {
    let quoted = |p: &Path| {
        let mut s = String::new();
        crate::jsjson::write_string(&mut s, &format!("{}/", p.display()));
        // Without the quotes: a prefix of the string's text.
        s[1..s.len() - 1].to_owned()
    };
    let mut out = vec![(quoted(real), quoted(mirror))];
    if let Ok(c) = std::fs::canonicalize(real)
        && c != real
    {
        out.push((quoted(&c), quoted(mirror)));
    }
    out
}

/// Rewrite the mirror's store so that absolute paths into the real directory point into the
/// mirror (or, `back`, the reverse, measuring the result without writing it). Returns the
/// length of the store text with the real paths (0 when there is no store).
fn move_paths(store: &Path, aliases: &[(String, String)], back: bool) -> Result<u64> {
    let text = match std::fs::read(store) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", store.display())),
    };
    let Ok(mut s) = String::from_utf8(text) else {
        return Ok(std::fs::symlink_metadata(store).map_or(0, |m| m.len()));
    };
    let mut changed = false;
    for (real, mirror) in aliases {
        let (from, to) = if back { (mirror, real) } else { (real, mirror) };
        let quoted_from = format!("\"{from}");
        if s.contains(&quoted_from) {
            s = s.replace(&quoted_from, &format!("\"{to}"));
            changed = true;
        }
    }
    if !changed {
        return Ok(s.len() as u64);
    }
    if back {
        return Ok(s.len() as u64);
    }
    // The mirror's store may be a hard link to the real one: never write into it, replace it.
    let temp = crate::fsutil::temp_path(store);
    std::fs::write(&temp, &s).with_context(|| format!("cannot write {}", temp.display()))?;
    std::fs::rename(&temp, store).with_context(|| format!("cannot replace {}", store.display()))?;
    Ok(s.len() as u64)
}
