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
use std::io::Write;
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

/// The regular files of a sessions directory (and its skill prompt blobs) by inode, with
/// their sizes, from the scan's own `stat` (the mirror holds no symlinks).
fn files_by_inode(dir: &Path) -> HashMap<u64, (PathBuf, u64)> {
    scan::scan(dir)
        .into_iter()
        .chain(scan::scan_blobs(dir))
        .map(|f| (f.ino, (f.path, f.size)))
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
///
/// The text is read a line at a time, twice at most (a store may be tens of megabytes): once to
/// see whether it is UTF-8 and names a path to move at all, then to move them. A quoted path
/// never holds a raw line break, so replacing line by line is replacing in the whole text.
fn move_paths(store: &Path, aliases: &[(String, String)], back: bool) -> Result<u64> {
    let replacements: Vec<(String, String)> = (aliases.iter())
        .map(|(real, mirror)| {
            let (from, to) = if back { (mirror, real) } else { (real, mirror) };
            (format!("\"{from}"), format!("\"{to}"))
        })
        .collect();
    let open = || -> Result<Option<std::io::BufReader<std::fs::File>>> {
        match std::fs::File::open(store) {
            Ok(f) => Ok(Some(std::io::BufReader::with_capacity(1 << 16, f))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", store.display())),
        }
    };
    let Some(mut reader) = open()? else {
        return Ok(0);
    };
    let (mut len, mut utf8, mut found) = (0u64, true, false);
    each_line(&mut reader, store, |line| {
        len += line.len() as u64;
        utf8 &= std::str::from_utf8(line).is_ok();
        found |= (replacements.iter())
            .any(|(from, _)| memchr::memmem::find(line, from.as_bytes()).is_some());
        Ok(())
    })?;
    if !utf8 {
        return Ok(std::fs::symlink_metadata(store).map_or(0, |m| m.len()));
    }
    if !found {
        return Ok(len);
    }
    let Some(mut reader) = open()? else {
        return Ok(0);
    };
    // The mirror's store may be a hard link to the real one: never write into it, replace it.
    let temp = crate::fsutil::temp_path(store);
    let mut out = match back {
        true => None,
        false => Some(std::io::BufWriter::new(
            std::fs::File::create(&temp)
                .with_context(|| format!("cannot write {}", temp.display()))?,
        )),
    };
    let (mut moved_len, mut a, mut b) = (0u64, Vec::new(), Vec::new());
    each_line(&mut reader, store, |line| {
        a.clear();
        a.extend_from_slice(line);
        for (from, to) in &replacements {
            replace_all(&a, from.as_bytes(), to.as_bytes(), &mut b);
            std::mem::swap(&mut a, &mut b);
        }
        moved_len += a.len() as u64;
        if let Some(out) = &mut out {
            out.write_all(&a)
                .with_context(|| format!("cannot write {}", temp.display()))?;
        }
        Ok(())
    })?;
    if let Some(out) = out {
        out.into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", temp.display()))?;
        std::fs::rename(&temp, store)
            .with_context(|| format!("cannot replace {}", store.display()))?;
    }
    Ok(moved_len)
}

/// Call `f` on each line of `reader` (its line break included; the last line may have none).
fn each_line(
    reader: &mut impl std::io::BufRead,
    path: &Path,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (reader.read_until(b'\n', &mut line))
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            return Ok(());
        }
        f(&line)?;
    }
}

/// `text` with every occurrence of `from` (left to right, not overlapping) replaced by `to`,
/// into `out`.
fn replace_all(text: &[u8], from: &[u8], to: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut at = 0;
    for found in memchr::memmem::find_iter(text, from) {
        out.extend_from_slice(&text[at..found]);
        out.extend_from_slice(to);
        at = found + from.len();
    }
    out.extend_from_slice(&text[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: the whole text, each alias replaced in turn.
    fn moved_whole(text: &[u8], aliases: &[(String, String)], back: bool) -> (Vec<u8>, bool) {
        let Ok(mut s) = String::from_utf8(text.to_vec()) else {
            return (text.to_vec(), false);
        };
        let mut changed = false;
        for (real, mirror) in aliases {
            let (from, to) = if back { (mirror, real) } else { (real, mirror) };
            let from = format!("\"{from}");
            if s.contains(&from) {
                s = s.replace(&from, &format!("\"{to}"));
                changed = true;
            }
        }
        (s.into_bytes(), changed)
    }

    /// Line by line, the store is moved (and measured) exactly as the whole text would be: both
    /// ways, with one alias and two, on pretty and one-line stores, paths at line ends, a
    /// store naming nothing to move, one that is not UTF-8, and one without a final newline.
    #[test]
    fn moving_paths_a_line_at_a_time_is_moving_them_in_the_whole_text() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("sessions.json");
        let one = vec![("/real/s/".to_string(), "/mirror/m/".to_string())];
        let two = vec![
            ("/real/s/".to_string(), "/mirror/m/".to_string()),
            ("/canon/s/".to_string(), "/mirror/m/".to_string()),
        ];
        let texts: Vec<Vec<u8>> = vec![
            b"{\n  \"a\": {\n    \"sessionFile\": \"/real/s/x.jsonl\"\n  },\n  \"b\": {\"sessionFile\": \"/canon/s/y.jsonl\", \"z\": \"/real/s/\"}\n}".to_vec(),
            b"{\"a\":{\"sessionFile\":\"/real/s/x.jsonl\",\"c\":[\"/real/s/1\",\"/real/s/2\"]},\"b\":\"\\\"/real/s/\"}".to_vec(),
            b"{\n  \"a\": {\"sessionFile\": \"/mirror/m/x.jsonl\"},\n  \"b\": \"/mirror/m/\"\n}\n".to_vec(),
            b"{\n  \"a\": {\"sessionFile\": \"relative.jsonl\"}\n}\n".to_vec(),
            b"{\n  \"a\": {\"sessionFile\": \"/real/s/\xff.jsonl\"}\n}\n".to_vec(),
            b"\"/real/s/\"/real/s/\n\"/real/s/".to_vec(),
            Vec::new(),
        ];
        for text in &texts {
            for aliases in [&one, &two] {
                for back in [false, true] {
                    std::fs::write(&store, text).unwrap();
                    let (want, changed) = moved_whole(text, aliases, back);
                    let len = move_paths(&store, aliases, back).unwrap();
                    let ctx = format!(
                        "{} back={back} aliases={}",
                        String::from_utf8_lossy(text),
                        aliases.len()
                    );
                    assert_eq!(len, want.len() as u64, "{ctx}");
                    let on_disk = std::fs::read(&store).unwrap();
                    if back || !changed {
                        assert_eq!(&on_disk, text, "left as it was: {ctx}");
                    } else {
                        assert_eq!(on_disk, want, "{ctx}");
                    }
                    assert_eq!(
                        std::fs::read_dir(dir.path()).unwrap().count(),
                        1,
                        "no temp left: {ctx}"
                    );
                }
            }
        }
        std::fs::remove_file(&store).unwrap();
        assert_eq!(move_paths(&store, &one, false).unwrap(), 0);
    }
}
