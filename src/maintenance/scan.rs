//! The scan of a sessions directory that the budget, the sweep and `inspect` share: its
//! regular files (`readSessionsDirFiles`) and its prompt blob files
//! (`readSessionPromptBlobFiles`), with sizes, mtimes and canonical paths.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::layout;
use crate::store::{Store, paths};

/// One regular file directly in the sessions directory.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub path: PathBuf,
    pub canonical: PathBuf,
    pub name: String,
    pub size: u64,
    pub mtime_ms: f64,
    /// The inode number, from the same `stat`.
    pub ino: u64,
}

/// `mtimeMs` as Node reports it (milliseconds with a fraction).
pub fn mtime_ms(meta: &std::fs::Metadata) -> f64 {
    meta.mtime() as f64 * 1000.0 + meta.mtime_nsec() as f64 / 1e6
}

/// `readSessionsDirFiles`: regular files (not symlinks) directly in `dir`, in the order Node's
/// `fs.readdir` lists them: by name, byte by byte (libuv sorts what the system lists). The
/// order matters: files with the same mtime are removed in it.
///
/// The names come from one listing; each is then stat-ed relative to the directory (no
/// lookup of the whole path per file), in two threads for a big directory. A name that the
/// listing shows as a plain file in a directory that is its own real path is its own
/// canonical path, so no canonicalisation is needed for it.
pub fn scan(dir: &Path) -> Vec<FileInfo> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    // The listing also tells `RealDir` which names are symlinks (unless an entry could not be
    // read), so that the directory is not listed twice.
    let mut special = Some(std::collections::HashSet::new());
    // And the lock files there, of any type (see `lock::lock_names_seen`).
    let mut locks = Some(std::collections::HashSet::new());
    for ent in rd {
        let Ok(ent) = ent else {
            special = None;
            locks = None;
            continue;
        };
        let name = ent.file_name();
        if let Some(locks) = &mut locks
            && name.as_encoded_bytes().ends_with(b".lock")
        {
            locks.insert(name.clone());
        }
        match ent.file_type() {
            Ok(ft) if ft.is_file() => names.push(name),
            Ok(ft) if !ft.is_symlink() => {}
            _ => {
                if let Some(special) = &mut special {
                    special.insert(name);
                }
            }
        }
    }
    names.sort();
    let Ok(handle) = std::fs::File::open(dir) else {
        return Vec::new();
    };
    let real = paths::RealDir::with_listing(dir, special);
    if let (Some(real), Some(locks)) = (&real, locks) {
        crate::fsutil::lock::remember_lock_names(real.path(), locks);
    }
    let stat_all = |names: &[std::ffi::OsString]| -> Vec<FileInfo> {
        names
            .iter()
            .filter_map(|name| stat_in(&handle, dir, real.as_ref(), name))
            .collect()
    };
    const PARALLEL_FROM: usize = 256;
    if names.len() < PARALLEL_FROM {
        return stat_all(&names);
    }
    let (first, second) = names.split_at(names.len() / 2);
    std::thread::scope(|sc| {
        let other = sc.spawn(|| stat_all(second));
        let mut out = stat_all(first);
        match other.join() {
            Ok(rest) => out.extend(rest),
            Err(_) => out.extend(stat_all(second)),
        }
        out
    })
}

/// One regular file of [`scan`]: `name` stat-ed (following a symlink, as `fs.stat` does)
/// relative to the open directory `handle` of `dir`.
fn stat_in(
    handle: &std::fs::File,
    dir: &Path,
    real: Option<&paths::RealDir>,
    name: &std::ffi::OsStr,
) -> Option<FileInfo> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let c = std::ffi::CString::new(name.as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `c` is a NUL-terminated name, `st` a buffer fstatat fills on success.
    let rc = unsafe { libc::fstatat(handle.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), 0) };
    if rc != 0 {
        return None;
    }
    // SAFETY: fstatat returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let path = dir.join(name);
    let canonical = name
        .to_str()
        .and_then(|n| real.and_then(|r| r.plain_child(n)))
        .unwrap_or_else(|| paths::canonical(&path));
    Some(FileInfo {
        canonical,
        name: name.to_string_lossy().into_owned(),
        size: st.st_size as u64,
        mtime_ms: st.st_mtime as f64 * 1000.0 + st.st_mtime_nsec as f64 / 1e6,
        ino: st.st_ino,
        path,
    })
}

/// `readSessionPromptBlobFiles`: blob files and blob temps under
/// `skills-prompts/sha256/<hh>/` (real directories and regular files only), each directory
/// listed by name as Node lists it (see [`scan`]).
pub fn scan_blobs(dir: &Path) -> Vec<FileInfo> {
    let root = dir.join("skills-prompts").join("sha256");
    let Ok(prefixes) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let by_name = |rd: std::fs::ReadDir| {
        let mut v: Vec<std::fs::DirEntry> = rd.flatten().collect();
        v.sort_by_key(|e| e.file_name());
        v
    };
    let mut out = Vec::new();
    for p in by_name(prefixes) {
        let name = p.file_name().to_string_lossy().into_owned();
        let is_prefix = name.len() == 2
            && name
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
        if !is_prefix || !p.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(p.path()) else {
            continue;
        };
        for e in by_name(entries) {
            let n = e.file_name().to_string_lossy().into_owned();
            if !e.file_type().is_ok_and(|t| t.is_file())
                || !(blob_hash(&n).is_some() || is_blob_temp_name(&n))
            {
                continue;
            }
            let path = p.path().join(&n);
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            out.push(FileInfo {
                canonical: paths::canonical(&path),
                name: n,
                size: meta.len(),
                mtime_ms: mtime_ms(&meta),
                ino: meta.ino(),
                path,
            });
        }
    }
    out
}

/// The hash of a blob file name (`<64 hex>.txt`).
pub fn blob_hash(name: &str) -> Option<&str> {
    name.strip_suffix(".txt")
        .filter(|h| crate::store::blobs::is_sha256_hex(h))
}

/// `<64 hex>.txt.[<pid>.]<uuid>.tmp` (lowercase hex).
pub fn is_blob_temp_name(name: &str) -> bool {
    if name.len() <= 73 || !name.is_char_boundary(68) || blob_hash(&name[..68]).is_none() {
        return false;
    }
    let Some(body) = name[68..]
        .strip_prefix('.')
        .and_then(|r| r.strip_suffix(".tmp"))
    else {
        return false;
    };
    let uuid_ok = layout::is_lowercase_uuid_shape;
    uuid_ok(body)
        || body.split_once('.').is_some_and(|(pid, u)| {
            !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit()) && uuid_ok(u)
        })
}

/// `isPromptBlobArtifactRemovable`.
pub fn blob_removable(
    f: &FileInfo,
    refs: &HashMap<String, usize>,
    blob_cutoff: f64,
    temp_cutoff: f64,
) -> bool {
    if is_blob_temp_name(&f.name) {
        return f.mtime_ms <= temp_cutoff;
    }
    f.mtime_ms <= blob_cutoff && blob_hash(&f.name).is_some_and(|h| !refs.contains_key(h))
}

/// Blob reference counts of a projected store.
pub fn blob_refcounts(projected: &Store) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for e in projected.values() {
        if let Some(h) = crate::store::blobs::ref_hash(e) {
            *m.entry(h.to_string()).or_default() += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_by_name_as_node_lists_them_whatever_the_directory_order() {
        // Files with the same mtime are removed in listing order, so the listing must be
        // Node's (names sorted byte by byte), not the order the system keeps them in.
        for count in [5, 300] {
            let dir = tempfile::tempdir().unwrap();
            // Created in an order unlike the names' (reversed, interleaved), with names that
            // sort differently as bytes and as text in any locale.
            let mut names: Vec<String> = (0..count)
                .map(|i| format!("{}-{i:03}.jsonl", ["b", "A", "a", "_", "Z"][i % 5]))
                .collect();
            names.reverse();
            for n in &names {
                std::fs::write(dir.path().join(n), b"{}\n").unwrap();
            }
            let listed: Vec<String> = scan(dir.path()).into_iter().map(|f| f.name).collect();
            names.sort();
            assert_eq!(listed, names);
            // The prompt blobs too: prefixes and files by name.
            let blobs = dir.path().join("skills-prompts").join("sha256");
            for prefix in ["ff", "0a", "a0"] {
                std::fs::create_dir_all(blobs.join(prefix)).unwrap();
                for h in ["f", "1", "a"] {
                    let name = format!("{prefix}{}.txt", h.repeat(62));
                    std::fs::write(blobs.join(prefix).join(name), b"x").unwrap();
                }
            }
            let listed: Vec<String> = scan_blobs(dir.path()).into_iter().map(|f| f.name).collect();
            let mut sorted = listed.clone();
            sorted.sort();
            assert_eq!(listed.len(), 9);
            assert_eq!(listed, sorted);
        }
    }
}
