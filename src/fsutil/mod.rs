//! The only module that writes, renames or deletes files.
//!
//! Rules it enforces for every caller:
//! - writes are atomic: a temp file in the same directory, fsync, rename over the target, fsync
//!   the directory (per rename, or once per batch for a `deferring_dir_sync` confinement);
//!   a crash leaves either the old or the new file, never half of one;
//! - everything happens inside one confined directory (`Confined`), directly in it, never
//!   through a symlink, and only regular files are ever removed or replaced; the directory is
//!   resolved once and held open, and every operation goes through that handle (`openat`,
//!   `renameat`, `unlinkat`), so a symlink swapped in later cannot redirect a write;
//! - the mode and owner of a replaced file are kept (new files get the mode the caller asks
//!   for, or those of the file they succeed; the store writer asks for OpenClaw's 0600
//!   explicitly).

use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod lock;
pub mod scratch;
pub mod temps;

use anyhow::{Context, Result, bail};

/// A directory that all mutations are confined to (a store's sessions directory).
///
/// The directory is resolved once, when it is confined: its path may pass through symlinks
/// (a sessions directory or a whole state dir moved to another disk), and [`Confined::new`]
/// follows them to the real directory, opens it and keeps it open. From then on every write,
/// rename and delete happens through that open directory (`openat`, `renameat`, `unlinkat`,
/// never following a symlink), so a symlink swapped in afterwards cannot redirect anything to
/// another directory; a path whose directory no longer is the confined one is refused.
#[derive(Debug, Clone)]
pub struct Confined {
    /// The real path of the directory when it was confined (for checks and messages).
    root: PathBuf,
    /// The directory itself, held open.
    dir: Arc<OwnedFd>,
    /// Device and inode of the directory: a path's parent is the confined directory when it
    /// has these (one `stat`, without resolving every component).
    id: (u64, u64),
    /// Leave the directory fsync after a rename to the caller's [`Confined::sync`] (one per
    /// batch instead of one per file). A rename is atomic either way; until the directory is
    /// synced, a power loss may bring back the old file, never a partial one.
    defer_dir_sync: bool,
}

/// What `fstatat` says about a name in a confined directory (symlinks not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `st_mode & S_IFMT`.
    kind: libc::mode_t,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub len: u64,
    pub ino: u64,
    pub uid: u32,
    pub gid: u32,
    /// Modification time, in nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Stat {
    pub fn is_file(&self) -> bool {
        self.kind == libc::S_IFREG
    }

    /// The modification time (`None` when it is not representable).
    pub fn modified(&self) -> Option<std::time::SystemTime> {
        let ns = u64::try_from(self.mtime_ns).ok()?;
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_nanos(ns))
    }
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a file name with a NUL byte"))
}

fn fstat_ids(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let m = File::from(fd.try_clone()?).metadata()?;
    Ok((m.dev(), m.ino()))
}

/// Open the directory `name` in `dir` (`None`: the path `name` itself, following symlinks).
fn open_dir_at(dir: Option<&OwnedFd>, name: &OsStr) -> io::Result<OwnedFd> {
    let c = c_name(name)?;
    let base = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let fd = match dir {
        Some(d) => {
            cvt(unsafe { libc::openat(d.as_raw_fd(), c.as_ptr(), base | libc::O_NOFOLLOW) })?
        }
        None => cvt(unsafe { libc::open(c.as_ptr(), base) })?,
    };
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Confined {
    /// Confine mutations to `dir`, resolved once: symlinks on its path are followed to the
    /// real directory, which is held open from then on.
    pub fn new(dir: &Path) -> Result<Confined> {
        let meta = fs::metadata(dir)
            .with_context(|| format!("cannot read directory {}", dir.display()))?;
        if !meta.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        let fd = open_dir_at(None, dir.as_os_str())
            .with_context(|| format!("cannot open directory {}", dir.display()))?;
        let id = fstat_ids(&fd).with_context(|| format!("cannot stat {}", dir.display()))?;
        let root =
            fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
        // The path resolved to the directory that was opened (not to one swapped in between).
        if !fs::symlink_metadata(&root).is_ok_and(|m| (m.dev(), m.ino()) == id) {
            bail!(
                "refusing to use {}: it changed while it was being resolved",
                dir.display()
            );
        }
        Ok(Confined {
            root,
            dir: Arc::new(fd),
            id,
            defer_dir_sync: false,
        })
    }

    /// The confinement of the directory `fd`, whose real path is `root`.
    fn at(root: PathBuf, fd: OwnedFd) -> Result<Confined> {
        let id = fstat_ids(&fd).with_context(|| format!("cannot stat {}", root.display()))?;
        Ok(Confined {
            root,
            dir: Arc::new(fd),
            id,
            defer_dir_sync: false,
        })
    }

    /// This confinement, with the directory fsync after each rename left to [`Confined::sync`],
    /// which the caller must run before it reports the renames as done.
    pub fn deferring_dir_sync(mut self) -> Confined {
        self.defer_dir_sync = true;
        self
    }

    /// fsync the confined directory (makes deferred renames durable).
    pub fn sync(&self) -> Result<()> {
        test_hook::dir_sync_failure(&self.root)
            .and_then(|()| cvt(unsafe { libc::fsync(self.dir.as_raw_fd()) }).map(drop))
            .with_context(|| format!("cannot sync directory {}", self.root.display()))
    }

    fn sync_after_rename(&self) -> Result<()> {
        if self.defer_dir_sync {
            return Ok(());
        }
        self.sync()
    }

    /// The real path of the confined directory, as it was resolved.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `dir` (following symlinks) still leads to the confined directory itself.
    pub fn is_at(&self, dir: &Path) -> bool {
        fs::metadata(dir).is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// Create (as needed) the relative directory `rel` under the root, never through a
    /// symlink, and return its confinement.
    pub fn create_dir_all(&self, rel: &Path) -> Result<Confined> {
        let mut dir = self.root.clone();
        let mut fd = self
            .dir
            .try_clone()
            .context("cannot duplicate a directory handle")?;
        for c in rel.components() {
            let std::path::Component::Normal(name) = c else {
                bail!(
                    "refusing to create {}: not a plain relative path",
                    rel.display()
                );
            };
            dir.push(name);
            let cname = c_name(name)?;
            let made = cvt(unsafe { libc::mkdirat(fd.as_raw_fd(), cname.as_ptr(), 0o777) });
            if let Err(e) = made
                && e.kind() != io::ErrorKind::AlreadyExists
            {
                return Err(e)
                    .with_context(|| format!("cannot create directory {}", dir.display()));
            }
            fd = match open_dir_at(Some(&fd), name) {
                Ok(next) => next,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    bail!("refusing to use {}: not a directory", dir.display())
                }
                Err(e) => return Err(e).with_context(|| format!("cannot open {}", dir.display())),
            };
        }
        Confined::at(dir, fd)
    }

    /// The confinement for the directory holding `path`: this one when that is the root, else
    /// a confinement of a subdirectory whose real path is strictly inside the root (opened from
    /// the root down, never through a symlink).
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
        let outside = || {
            anyhow::anyhow!(
                "refusing to touch {}: it is outside {}",
                path.display(),
                self.root.display()
            )
        };
        let rel = real.strip_prefix(&self.root).map_err(|_| outside())?;
        let mut fd = self
            .dir
            .try_clone()
            .context("cannot duplicate a directory handle")?;
        for c in rel.components() {
            let std::path::Component::Normal(name) = c else {
                return Err(outside());
            };
            fd = open_dir_at(Some(&fd), name).map_err(|_| outside())?;
        }
        Confined::at(real, fd)
    }

    /// The path of `name` directly inside the confined directory, if `path` names such a file:
    /// its parent must be the confined directory itself (same device and inode; a path that
    /// resolves to the same place but now holds another directory is refused) and its last
    /// component must be a plain name.
    pub fn check(&self, path: &Path) -> Result<PathBuf> {
        Ok(self.root.join(self.name_in(path)?))
    }

    /// The plain name `path` has in the confined directory (see [`Confined::check`]).
    fn name_in(&self, path: &Path) -> Result<OsString> {
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if fs::metadata(parent).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            return Ok(name.to_owned());
        }
        let real = fs::canonicalize(parent)
            .with_context(|| format!("cannot resolve the directory of {}", path.display()))?;
        if real != self.root {
            bail!(
                "refusing to touch {}: it is outside {}",
                path.display(),
                self.root.display()
            );
        }
        bail!(
            "refusing to touch {}: {} is no longer the directory that was resolved at the start \
             (was it replaced?)",
            path.display(),
            self.root.display()
        )
    }

    /// `fstatat` of a name in the directory, never following a symlink; `None` when missing.
    fn stat_name(&self, name: &OsStr) -> io::Result<Option<Stat>> {
        let c = c_name(name)?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        match cvt(rc) {
            Ok(_) => Ok(Some(Stat {
                kind: st.st_mode & libc::S_IFMT,
                mode: st.st_mode & 0o7777,
                len: st.st_size as u64,
                ino: st.st_ino as u64,
                uid: st.st_uid,
                gid: st.st_gid,
                mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What `path` (checked as by [`Confined::check`]) is, without following a symlink;
    /// `None` when it does not exist.
    pub fn stat(&self, path: &Path) -> Result<Option<Stat>> {
        let name = self.name_in(path)?;
        self.stat_name(&name)
            .with_context(|| format!("cannot stat {}", path.display()))
    }

    /// `openat` of a name in the directory, never following a symlink.
    fn open_name(&self, name: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let c = c_name(name)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = cvt(unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                flags,
                mode as libc::c_uint,
            )
        })?;
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Open the regular file `path` directly inside the directory for reading (never through
    /// a symlink, and never blocking on a FIFO).
    pub fn open_read(&self, path: &Path) -> Result<File> {
        let name = self.name_in(path)?;
        let file = self
            .open_name(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if !meta.is_file() {
            bail!(
                "refusing to read {}: not a regular file but {}",
                path.display(),
                describe_type(&meta)
            );
        }
        Ok(file)
    }

    /// Create the new file `path` (it must not exist) with `mode`, for writing.
    pub fn create_new(&self, path: &Path, mode: u32) -> io::Result<File> {
        let name = self.name_in(path).map_err(io::Error::other)?;
        self.open_name(&name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)
    }

    fn unlink_name(&self, name: &OsStr) -> io::Result<()> {
        let c = c_name(name)?;
        cvt(unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
    }

    fn rename_names(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (f, t) = (c_name(from)?, c_name(to)?);
        let fd = self.dir.as_raw_fd();
        cvt(unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) }).map(drop)
    }

    /// Append `bytes` to the regular file `path` (never through a symlink) only if its length is
    /// exactly `expected_len`; returns whether it appended. Used to carry over a transcript tail
    /// that a concurrent writer appended to the old file during the replace.
    pub fn append_if_len(&self, path: &Path, expected_len: u64, bytes: &[u8]) -> Result<bool> {
        let name = self.name_in(path)?;
        let shown = self.root.join(&name);
        let mut file = self
            .open_name(&name, libc::O_WRONLY | libc::O_APPEND | libc::O_NONBLOCK, 0)
            .with_context(|| format!("cannot open {}", shown.display()))?;
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat {}", shown.display()))?;
        if !meta.is_file() || meta.len() != expected_len {
            return Ok(false);
        }
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot append to {}", shown.display()))?;
        Ok(true)
    }

    /// Remove a regular file directly inside the root. Symlinks and anything that is not a
    /// regular file are refused. Returns the size of the removed file.
    pub fn remove_file(&self, path: &Path) -> Result<u64> {
        let name = self.name_in(path)?;
        let shown = self.root.join(&name);
        let st = self
            .stat_name(&name)
            .with_context(|| format!("cannot stat {}", shown.display()))?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
            .with_context(|| format!("cannot stat {}", shown.display()))?;
        if !st.is_file() {
            bail!("refusing to remove {}: not a regular file", shown.display());
        }
        self.unlink_name(&name)
            .with_context(|| format!("cannot remove {}", shown.display()))?;
        Ok(st.len)
    }

    /// Rename a regular file to a new name in the same directory. The target must not exist.
    pub fn rename_new(&self, from: &Path, to: &Path) -> Result<()> {
        let from_name = self.name_in(from)?;
        let to_name = self.name_in(to)?;
        let (from, to) = (self.root.join(&from_name), self.root.join(&to_name));
        let st = self
            .stat_name(&from_name)
            .with_context(|| format!("cannot stat {}", from.display()))?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
            .with_context(|| format!("cannot stat {}", from.display()))?;
        if !st.is_file() {
            bail!("refusing to rename {}: not a regular file", from.display());
        }
        if !matches!(self.stat_name(&to_name), Ok(None)) {
            bail!(
                "refusing to rename {} over existing {}",
                from.display(),
                to.display()
            );
        }
        self.rename_names(&from_name, &to_name)
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
            Attrs::Keep(new_mode),
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
            Attrs::Fixed(mode),
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
        self.replace(path, Attrs::Fixed(mode), fill, verify)
    }

    /// [`Confined::replace_verified`] for a file that succeeds `like` (a regular file in the
    /// same directory, say the transcript a successor replaces in the store): the result gets
    /// `like`'s mode, owner and group, exactly as a rewrite of `like` itself would.
    pub fn replace_verified_like<T>(
        &self,
        path: &Path,
        like: &Path,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
        verify: impl FnOnce(&T) -> Result<()>,
    ) -> Result<T> {
        self.replace(path, Attrs::Like(like), fill, verify)
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
        self.replace(path, Attrs::Keep(new_mode), fill, verify)
    }

    /// The mode and owner the result of [`Confined::replace`] gets.
    fn attrs_for(
        &self,
        name: &OsStr,
        path: &Path,
        attrs: Attrs,
    ) -> Result<(u32, Option<(u32, u32)>)> {
        let existing = self
            .stat_name(name)
            .with_context(|| format!("cannot stat {}", path.display()))?;
        let owner = match existing {
            Some(st) if st.is_file() => Some((st.mode, st.uid, st.gid)),
            Some(_) => bail!("refusing to replace {}: not a regular file", path.display()),
            None => None,
        };
        Ok(match attrs {
            Attrs::Keep(new_mode) => match owner {
                Some((mode, uid, gid)) => (mode, Some((uid, gid))),
                None => (new_mode, None),
            },
            Attrs::Fixed(mode) => (mode, owner.map(|(_, uid, gid)| (uid, gid))),
            Attrs::Like(like) => {
                let like_name = self.name_in(like)?;
                match self
                    .stat_name(&like_name)
                    .with_context(|| format!("cannot stat {}", like.display()))?
                {
                    Some(st) if st.is_file() => (st.mode, Some((st.uid, st.gid))),
                    _ => bail!(
                        "cannot take the mode and owner of {}: not a regular file",
                        like.display()
                    ),
                }
            }
        })
    }

    fn replace<T>(
        &self,
        path: &Path,
        attrs: Attrs,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
        verify: impl FnOnce(&T) -> Result<()>,
    ) -> Result<T> {
        let (staged, value) = self.stage(path, attrs, fill)?;
        let durable = staged.make_durable()?;
        verify(&value)?;
        durable.commit()?;
        Ok(value)
    }

    /// The first half of [`Confined::replace_verified`]: write what `fill` writes into a temp
    /// file beside `path` (with `path`'s mode and owner, or `new_mode` for a new file), and
    /// stop there. Nothing is durable and nothing is in place yet: the caller makes a batch
    /// of such files durable together ([`Staged::make_durable`]), then puts each in place
    /// ([`Durable::commit`]) and syncs the directory once. A `Staged` dropped without a commit
    /// removes its temp file, so the target is left exactly as it was.
    pub fn stage_verified<T>(
        &self,
        path: &Path,
        new_mode: u32,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
    ) -> Result<(Staged, T)> {
        self.stage(path, Attrs::Keep(new_mode), fill)
    }

    fn stage<T>(
        &self,
        path: &Path,
        attrs: Attrs,
        fill: impl FnOnce(&mut dyn Write) -> Result<T>,
    ) -> Result<(Staged, T)> {
        let name = self.name_in(path)?;
        let path = self.root.join(&name);
        let (mode, owner) = self.attrs_for(&name, &path, attrs)?;
        let tmp = temp_path(&path);
        let tmp_name = tmp.file_name().unwrap_or_default().to_owned();
        let file = self
            .open_name(
                &tmp_name,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                mode,
            )
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        // From here on, dropping `staged` (an error below) removes the temp file.
        let staged = Staged {
            confined: self.clone(),
            file,
            tmp_name,
            name,
            path,
            done: false,
        };
        let mut w = Buffered::new(&staged.file);
        let value = fill(&mut w).with_context(|| format!("cannot write {}", tmp.display()))?;
        w.flush()
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        drop(w);
        // A replaced file keeps its owner and group, a successor gets its predecessor's (a
        // root cron job must not hand the gateway's transcripts to root); when that is
        // impossible nothing is written.
        if let Some((uid, gid)) = owner {
            keep_owner(&staged.file, uid, gid)
                .with_context(|| format!("cannot keep the owner of {}", staged.path.display()))?;
        }
        // create_new's mode is filtered by the umask; set it exactly (after chown, which
        // may clear set-id bits).
        staged
            .file
            .set_permissions(fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of {}", tmp.display()))?;
        Ok((staged, value))
    }
}

/// A complete temp file beside its target, not yet durable and not yet in place (see
/// [`Confined::stage_verified`]). Dropped before it is made durable, it removes the temp.
#[derive(Debug)]
pub struct Staged {
    confined: Confined,
    file: File,
    tmp_name: OsString,
    /// The target's name in the confined directory, and its full path (for messages).
    name: OsString,
    path: PathBuf,
    /// Renamed into place (nothing left to remove).
    done: bool,
}

impl Staged {
    /// fsync the temp file (data, size, mode and owner). Only a durable temp can be put in
    /// place ([`Durable::commit`]): every temp of a batch is made durable before any of them
    /// is renamed, so a crash at any moment leaves each target old or new. One `fsync` per
    /// file rather than one `syncfs`: its error is this file's, and a file whose write-back
    /// failed is never renamed (`syncfs` reports such errors only on recent kernels, and for
    /// the whole file system). On an error the temp is removed.
    pub fn make_durable(self) -> Result<Durable> {
        match self.file.sync_all() {
            Ok(()) => Ok(Durable(self)),
            Err(e) => Err(anyhow::Error::new(e)
                .context(format!("cannot sync {}", self.temp_path().display()))),
        }
    }

    fn temp_path(&self) -> PathBuf {
        self.confined.root.join(&self.tmp_name)
    }
}

/// A staged temp file that is durable, ready to be put in place. Dropped without
/// [`Durable::commit`], it removes the temp.
#[derive(Debug)]
pub struct Durable(Staged);

impl Durable {
    /// Rename the temp over the target, then fsync the directory, unless the confinement
    /// defers that to its caller ([`Confined::deferring_dir_sync`], one [`Confined::sync`] per
    /// batch).
    pub fn commit(mut self) -> Result<()> {
        let s = &mut self.0;
        s.confined
            .rename_names(&s.tmp_name, &s.name)
            .with_context(|| {
                format!(
                    "cannot rename {} to {}",
                    s.temp_path().display(),
                    s.path.display()
                )
            })?;
        s.done = true;
        s.confined.sync_after_rename()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.confined.unlink_name(&self.tmp_name);
        }
    }
}

/// What mode and owner [`Confined::replace`] gives its result.
#[derive(Clone, Copy)]
enum Attrs<'a> {
    /// An existing target's mode and owner; a new file gets this mode.
    Keep(u32),
    /// Always this mode; an existing target's owner.
    Fixed(u32),
    /// The mode and owner of this other regular file in the directory.
    Like(&'a Path),
}

/// A buffered writer to a file whose 256 KiB buffer is the thread's own, reused from file to
/// file: a fresh buffer per file would be allocated, faulted in and freed again for every
/// transcript of a run. (As large as the read buffer of `crate::transcript`: larger writes
/// are no faster, and every writer thread holds one.) Nothing is written on drop: callers
/// flush.
struct Buffered<'f> {
    file: &'f File,
    buf: Vec<u8>,
}

thread_local! {
    static WRITE_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl<'f> Buffered<'f> {
    const CAPACITY: usize = 256 << 10;

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

/// Where the existing directory `dir` really is, when a symlink on its path leads elsewhere
/// than the path itself says (its absolute form with `.` and `..` taken lexically): `None`
/// when it does not exist or when no symlink changes where it is.
pub fn resolved_elsewhere(dir: &Path) -> Option<PathBuf> {
    let real = fs::canonicalize(dir).ok()?;
    let absolute = std::path::absolute(dir).ok()?;
    let mut lexical = PathBuf::new();
    for c in absolute.components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    (real != lexical).then_some(real)
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

/// Append what `file` holds from its offset to `buf`, `limit` bytes at most: each read asks
/// for all the free space the buffer has (grown as needed, never past `limit`), so a buffer
/// reserved for the file's size takes it in one read and learns of its end with a second.
/// (`Read::read_to_end` through a `Take` starts at 8 KiB and doubles: seven reads for a
/// 500 kB transcript.)
pub fn read_up_to(file: &File, buf: &mut Vec<u8>, limit: u64) -> io::Result<()> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let start = buf.len();
    loop {
        let room = limit - (buf.len() - start);
        if room == 0 {
            return Ok(());
        }
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(8192).min(room));
        }
        let spare = buf.spare_capacity_mut();
        let want = spare.len().min(room);
        // SAFETY: `read` writes at most `want` bytes into the vector's spare capacity, and
        // exactly the count it returns are then taken as initialised.
        let n = unsafe { libc::read(file.as_raw_fd(), spare.as_mut_ptr().cast(), want) };
        match n {
            0 => return Ok(()),
            n if n > 0 => unsafe { buf.set_len(buf.len() + n as usize) },
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
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
    // getrandom(2) rather than opening /dev/urandom: no descriptor, one call (a preview of
    // `compact` names an entry per transcript).
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let filled = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if filled != b.len() as isize {
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

/// A hook for the tests of a failing disk: in debug builds, syncing the directory named by
/// `CLAWKEEPER_TEST_FAIL_DIR_SYNC` fails with `EIO`. Release builds have no hook.
mod test_hook {
    use std::io;
    use std::path::Path;

    #[cfg(debug_assertions)]
    pub fn dir_sync_failure(dir: &Path) -> io::Result<()> {
        match std::env::var_os("CLAWKEEPER_TEST_FAIL_DIR_SYNC") {
            Some(d)
                if std::fs::canonicalize(&d)
                    .is_ok_and(|d| std::fs::canonicalize(dir).is_ok_and(|dir| dir == d)) =>
            {
                Err(io::Error::from_raw_os_error(libc::EIO))
            }
            _ => Ok(()),
        }
    }

    #[cfg(not(debug_assertions))]
    pub fn dir_sync_failure(_dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod check_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn read_up_to_takes_the_file_to_its_end_or_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let text: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&path, &text).unwrap();
        // (capacity reserved, none, or too little; limit above, at and below the size)
        for reserve in [0, 10, text.len(), text.len() + 1] {
            for limit in [u64::MAX, text.len() as u64 + 1, text.len() as u64, 9_999, 0] {
                let mut buf = b"kept".to_vec();
                buf.reserve(reserve);
                read_up_to(&File::open(&path).unwrap(), &mut buf, limit).unwrap();
                let n = text.len().min(usize::try_from(limit).unwrap_or(usize::MAX));
                assert_eq!(&buf[..4], b"kept");
                assert_eq!(&buf[4..], &text[..n], "reserve {reserve}, limit {limit}");
            }
        }
        let empty = dir.path().join("empty");
        fs::write(&empty, b"").unwrap();
        let mut buf = Vec::new();
        read_up_to(&File::open(&empty).unwrap(), &mut buf, 10).unwrap();
        assert!(buf.is_empty());
        // A descriptor that cannot be read reports the error.
        let dir_fd = File::open(dir.path()).unwrap();
        assert!(read_up_to(&dir_fd, &mut buf, 10).is_err());
    }

    #[test]
    fn random_uuids_are_version_4_and_differ() {
        let a = random_uuid();
        let b = random_uuid();
        assert_ne!(a, b);
        for u in [a, b] {
            assert_eq!(u.len(), 36);
            assert_eq!(&u[14..15], "4");
            assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        }
    }

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
    fn a_file_written_like_another_gets_its_mode_and_owner() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let old = dir.path().join("old.jsonl");
        fs::write(&old, b"old").unwrap();
        let target = if unsafe { libc::geteuid() } == 0 {
            (65534, 65534)
        } else {
            let m = fs::metadata(&old).unwrap();
            (m.uid(), m.gid())
        };
        std::os::unix::fs::chown(&old, Some(target.0), Some(target.1)).unwrap();
        for (i, mode) in [0o640, 0o444, 0o600].into_iter().enumerate() {
            fs::set_permissions(&old, fs::Permissions::from_mode(mode)).unwrap();
            let new = dir.path().join(format!("new{i}.jsonl"));
            c.replace_verified_like(&new, &old, |w| Ok(w.write_all(b"new")?), |_| Ok(()))
                .unwrap();
            let m = fs::metadata(&new).unwrap();
            assert_eq!(m.mode() & 0o7777, mode);
            assert_eq!((m.uid(), m.gid()), target);
            assert_eq!(fs::read(&new).unwrap(), b"new");
        }
        // a missing or non-regular model is refused, and nothing is written
        let new = dir.path().join("new.jsonl");
        let missing = dir.path().join("missing.jsonl");
        assert!(
            c.replace_verified_like(&new, &missing, |w| Ok(w.write_all(b"x")?), |_| Ok(()))
                .is_err()
        );
        symlink(&old, dir.path().join("link.jsonl")).unwrap();
        let link = dir.path().join("link.jsonl");
        assert!(
            c.replace_verified_like(&new, &link, |w| Ok(w.write_all(b"x")?), |_| Ok(()))
                .is_err()
        );
        assert!(fs::symlink_metadata(&new).is_err());
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
