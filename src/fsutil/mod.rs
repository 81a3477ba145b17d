//! The only module that writes, renames or deletes files.
//!
//! Rules it enforces for every caller:
//! - writes are atomic: a temp file in the same directory, fsync, rename over the target, fsync
//!   the directory (per rename, or once per batch for a `deferring_dir_sync` confinement);
//!   a crash leaves either the old or the new file, never half of one;
//! - everything happens inside one confined directory (`Confined`), directly in it, never
//!   through a symlink, and only regular files are ever removed or replaced;
//! - the mode and owner of a replaced file are kept (new files get the mode the caller asks
//!   for; the store writer asks for OpenClaw's 0600 explicitly).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub mod lock;
pub mod scratch;
pub mod temps;

use anyhow::{Context, Result, bail};

/// A directory that all mutations are confined to (a store's sessions directory).
#[derive(Debug, Clone)]
pub struct Confined {
    root: PathBuf,
    /// Device and inode of the root when it was confined: a parent directory that is this very
    /// directory passes [`Confined::check`] with one `stat`, without resolving every component.
    id: Option<(u64, u64)>,
    /// Leave the directory fsync after a rename to the caller's [`Confined::sync`] (one per
    /// batch instead of one per file). A rename is atomic either way; until the directory is
    /// synced, a power loss may bring back the old file, never a partial one.
    defer_dir_sync: bool,
}

impl Confined {
    /// Confine mutations to `dir`. The directory itself must exist and not be a symlink.
    pub fn new(dir: &Path) -> Result<Confined> {
        let meta = fs::symlink_metadata(dir)
            .with_context(|| format!("cannot read directory {}", dir.display()))?;
        if meta.file_type().is_symlink() {
            // The directory may legitimately be reached through a symlinked parent; resolve it
            // once here, after which nothing below it is followed.
            let real = fs::canonicalize(dir)
                .with_context(|| format!("cannot resolve {}", dir.display()))?;
            return Ok(Confined::at(real));
        }
        if !meta.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        let root =
            fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
        Ok(Confined::at(root))
    }

    /// The confinement of the real directory `root`.
    fn at(root: PathBuf) -> Confined {
        let id = fs::symlink_metadata(&root)
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| (m.dev(), m.ino()));
        Confined {
            root,
            id,
            defer_dir_sync: false,
        }
    }

    /// This confinement, with the directory fsync after each rename left to [`Confined::sync`],
    /// which the caller must run before it reports the renames as done.
    pub fn deferring_dir_sync(mut self) -> Confined {
        self.defer_dir_sync = true;
        self
    }

    /// fsync the confined directory (makes deferred renames durable).
    pub fn sync(&self) -> Result<()> {
        sync_dir(&self.root)
    }

    fn sync_after_rename(&self) -> Result<()> {
        if self.defer_dir_sync {
            return Ok(());
        }
        sync_dir(&self.root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create (as needed) the relative directory `rel` under the root, never through a
    /// symlink, and return its confinement.
    pub fn create_dir_all(&self, rel: &Path) -> Result<Confined> {
        let mut dir = self.root.clone();
        for c in rel.components() {
            let std::path::Component::Normal(name) = c else {
                bail!(
                    "refusing to create {}: not a plain relative path",
                    rel.display()
                );
            };
            dir.push(name);
            match fs::symlink_metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => bail!("refusing to use {}: not a directory", dir.display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir(&dir)
                        .with_context(|| format!("cannot create directory {}", dir.display()))?;
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot stat {}", dir.display()));
                }
            }
        }
        Ok(Confined::at(dir))
    }

    /// The confinement for the directory holding `path`: this one when that is the root, else
    /// a confinement of a subdirectory whose real path is strictly inside the root.
    pub fn for_parent_of(&self, path: &Path) -> Result<Confined> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // The root's own (real) path needs no resolving; what is done in it is checked
        // against the root's device and inode anyway (see `check`).
        if parent == self.root {
            return Ok(self.clone());
        }
        let real = fs::canonicalize(parent)
            .with_context(|| format!("cannot resolve the directory of {}", path.display()))?;
        if real == self.root {
            return Ok(self.clone());
        }
        if real.starts_with(&self.root) && fs::metadata(&real).is_ok_and(|m| m.is_dir()) {
            return Ok(Confined::at(real));
        }
        bail!(
            "refusing to touch {}: it is outside {}",
            path.display(),
            self.root.display()
        )
    }

    /// The path of `name` directly inside the confined directory, if `path` names such a file:
    /// its parent must canonicalise to the root and its last component must be a plain name.
    pub fn check(&self, path: &Path) -> Result<PathBuf> {
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // The same directory (device and inode) as the root: no need to resolve the path.
        // Anything else is resolved and must come out as the root itself.
        let same_dir = |m: fs::Metadata| self.id == Some((m.dev(), m.ino()));
        if fs::metadata(parent).is_ok_and(same_dir) {
            return Ok(self.root.join(name));
        }
        let parent = fs::canonicalize(parent)
            .with_context(|| format!("cannot resolve the directory of {}", path.display()))?;
        if parent != self.root {
            bail!(
                "refusing to touch {}: it is outside {}",
                path.display(),
                self.root.display()
            );
        }
        Ok(self.root.join(name))
    }

    /// Append `bytes` to the regular file `path` (never through a symlink) only if its length is
    /// exactly `expected_len`; returns whether it appended. Used to carry over a transcript tail
    /// that a concurrent writer appended to the old file during the replace.
    pub fn append_if_len(&self, path: &Path, expected_len: u64, bytes: &[u8]) -> Result<bool> {
        let path = self.check(path)?;
        let mut file = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if !meta.is_file() || meta.len() != expected_len {
            return Ok(false);
        }
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot append to {}", path.display()))?;
        Ok(true)
    }

    /// Remove a regular file directly inside the root. Symlinks and anything that is not a
    /// regular file are refused. Returns the size of the removed file.
    pub fn remove_file(&self, path: &Path) -> Result<u64> {
        let path = self.check(path)?;
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if !meta.file_type().is_file() {
            bail!("refusing to remove {}: not a regular file", path.display());
        }
        fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        Ok(meta.len())
    }

    /// Rename a regular file to a new name in the same directory. The target must not exist.
    pub fn rename_new(&self, from: &Path, to: &Path) -> Result<()> {
        let from = self.check(from)?;
        let to = self.check(to)?;
        let meta = fs::symlink_metadata(&from)
            .with_context(|| format!("cannot stat {}", from.display()))?;
        if !meta.file_type().is_file() {
            bail!("refusing to rename {}: not a regular file", from.display());
        }
        if fs::symlink_metadata(&to).is_ok() {
            bail!(
                "refusing to rename {} over existing {}",
                from.display(),
                to.display()
            );
        }
        fs::rename(&from, &to)
            .with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))?;
        self.sync_after_rename()
    }

    /// Atomically replace (or create) `path` with what `fill` writes. An existing target must
    /// be a regular file (not a symlink); its mode is kept, else `new_mode` is used.
    pub fn write_atomic(
        &self,
        path: &Path,
        new_mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        self.replace(
            path,
            new_mode,
            true,
            |w| fill(w).map_err(anyhow::Error::from),
            |_| Ok(()),
        )
    }

    /// Like `write_atomic`, but the result always gets `mode` (OpenClaw writes its store with
    /// mode 0600 whatever the old file had). The owner is still kept.
    pub fn write_atomic_with_mode(
        &self,
        path: &Path,
        mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        self.replace(
            path,
            mode,
            false,
            |w| fill(w).map_err(anyhow::Error::from),
            |_| Ok(()),
        )
    }

    /// [`Confined::replace_verified`] where the result always gets `mode`.
    pub fn replace_verified_with_mode<T>(
        &self,
        path: &Path,
        mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
        verify: impl FnOnce(&T) -> Result<()>,
    ) -> Result<T> {
        self.replace(path, mode, false, fill, verify)
    }

    /// Like [`Confined::write_atomic`], but `fill` may return a value, and `verify` runs after
    /// the temp file is complete and synced and before the rename: when either fails, the temp
    /// file is removed and the target is left exactly as it was.
    pub fn replace_verified<T>(
        &self,
        path: &Path,
        new_mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
        verify: impl FnOnce(&T) -> Result<()>,
    ) -> Result<T> {
        self.replace(path, new_mode, true, fill, verify)
    }

    fn replace<T>(
        &self,
        path: &Path,
        new_mode: u32,
        keep_mode: bool,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
        verify: impl FnOnce(&T) -> Result<()>,
    ) -> Result<T> {
        let path = self.check(path)?;
        let (mode, owner) = match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => (
                if keep_mode {
                    m.mode() & 0o7777
                } else {
                    new_mode
                },
                Some((m.uid(), m.gid())),
            ),
            Ok(_) => bail!("refusing to replace {}: not a regular file", path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (new_mode, None),
            Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
        };
        let tmp = temp_path(&path);
        let result = (|| -> Result<T> {
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            let mut w = Buffered::new(&file);
            let value = fill(&mut w).with_context(|| format!("cannot write {}", tmp.display()))?;
            w.flush()
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            drop(w);
            // A replaced file keeps its owner and group (a root cron job must not hand the
            // gateway's transcripts to root); when that is impossible nothing is replaced.
            if let Some((uid, gid)) = owner {
                keep_owner(&file, uid, gid)
                    .with_context(|| format!("cannot keep the owner of {}", path.display()))?;
            }
            // create_new's mode is filtered by the umask; set it exactly (after chown, which
            // may clear set-id bits).
            file.set_permissions(fs::Permissions::from_mode(mode))
                .with_context(|| format!("cannot set the mode of {}", tmp.display()))?;
            file.sync_all()
                .with_context(|| format!("cannot sync {}", tmp.display()))?;
            verify(&value)?;
            fs::rename(&tmp, &path).with_context(|| {
                format!("cannot rename {} to {}", tmp.display(), path.display())
            })?;
            Ok(value)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        let value = result?;
        self.sync_after_rename()?;
        Ok(value)
    }
}

/// A buffered writer to a file whose 1 MiB buffer is the thread's own, reused from file to
/// file: a fresh megabyte per file would be mapped, faulted in and unmapped again for every
/// transcript of a run. Nothing is written on drop: callers flush.
struct Buffered<'f> {
    file: &'f File,
    buf: Vec<u8>,
}

thread_local! {
    static WRITE_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl<'f> Buffered<'f> {
    const CAPACITY: usize = 1 << 20;

    fn new(file: &'f File) -> Buffered<'f> {
        let mut buf = WRITE_BUF.take();
        buf.clear();
        buf.reserve(Self::CAPACITY);
        Buffered { file, buf }
    }
}

impl Write for Buffered<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > Self::CAPACITY {
            self.flush()?;
        }
        if data.len() >= Self::CAPACITY {
            return self.file.write_all(data);
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

impl Drop for Buffered<'_> {
    fn drop(&mut self) {
        WRITE_BUF.set(std::mem::take(&mut self.buf));
    }
}

/// Give `file` the owner `uid:gid` unless it already has it.
fn keep_owner(file: &File, uid: u32, gid: u32) -> io::Result<()> {
    let m = file.metadata()?;
    if m.uid() == uid && m.gid() == gid {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(uid), Some(gid))
}

/// What kind of file this is, in words (for messages about files that are not regular).
pub fn describe_type(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "a regular file"
    }
}

/// A temp name beside `path` that OpenClaw's own sweep recognises as a store temp when `path`
/// is a store (`<name>.<pid>.<uuid>.tmp`), and that is unique per process and call.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name: OsString = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.{}.tmp", std::process::id(), random_uuid()));
    path.with_file_name(name)
}

/// A random version-4 UUID in its canonical text form.
pub fn random_uuid() -> String {
    let mut b = [0u8; 16];
    if File::open("/dev/urandom")
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        // Fall back to time and pid mixing; uniqueness per call is what matters here.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mix = t ^ (u128::from(std::process::id()) << 64);
        b = mix.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// fsync a directory so that a rename in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

#[cfg(test)]
mod check_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn write_atomic_creates_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let p = dir.path().join("a.json");
        c.write_atomic(&p, 0o600, |w| w.write_all(b"one")).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        c.write_atomic(&p, 0o600, |w| w.write_all(b"two")).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn replace_keeps_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let p = dir.path().join("t.jsonl");
        fs::write(&p, b"old").unwrap();
        // Only root can hand a file to someone else; elsewhere the owner is ours already.
        let target = if unsafe { libc::geteuid() } == 0 {
            (4242, 4243)
        } else {
            let m = fs::metadata(&p).unwrap();
            (m.uid(), m.gid())
        };
        std::os::unix::fs::chown(&p, Some(target.0), Some(target.1)).unwrap();
        c.replace_verified(&p, 0o600, |w| Ok(w.write_all(b"new")?), |_| Ok(()))
            .unwrap();
        let m = fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), target);
        assert_eq!(fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn failed_fill_leaves_the_old_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let p = dir.path().join("a.json");
        fs::write(&p, b"old").unwrap();
        let err = c.write_atomic(&p, 0o600, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn symlinks_and_outside_paths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let link = dir.path().join("link.jsonl");
        symlink(&victim, &link).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        assert!(c.remove_file(&link).is_err());
        assert!(c.write_atomic(&link, 0o600, |w| w.write_all(b"x")).is_err());
        assert!(c.remove_file(&victim).is_err());
        assert!(c.remove_file(&dir.path().join("..").join("x")).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn append_if_len_checks_length_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let p = dir.path().join("t.jsonl");
        fs::write(&p, b"ab").unwrap();
        assert!(!c.append_if_len(&p, 1, b"x").unwrap());
        assert!(c.append_if_len(&p, 2, b"cd").unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"abcd");
        let victim = outside.path().join("v");
        fs::write(&victim, b"v").unwrap();
        let link = dir.path().join("l.jsonl");
        symlink(&victim, &link).unwrap();
        assert!(c.append_if_len(&link, 1, b"x").is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"v");
    }

    #[test]
    fn subdirectories_inside_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        symlink(outside.path(), dir.path().join("escape")).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let sub = c.for_parent_of(&dir.path().join("sub/x")).unwrap();
        assert_eq!(
            sub.root(),
            fs::canonicalize(dir.path().join("sub")).unwrap()
        );
        assert!(c.for_parent_of(&dir.path().join("escape/x")).is_err());
        assert!(c.for_parent_of(&outside.path().join("x")).is_err());
    }

    #[test]
    fn rename_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, b"a").unwrap();
        fs::write(&b, b"b").unwrap();
        assert!(c.rename_new(&a, &b).is_err());
        assert_eq!(fs::read(&b).unwrap(), b"b");
        fs::remove_file(&b).unwrap();
        c.rename_new(&a, &b).unwrap();
        assert_eq!(fs::read(&b).unwrap(), b"a");
    }
}
