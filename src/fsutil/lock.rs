//! OpenClaw-compatible transcript write locks (`<realpath(dir)>/<file>.lock`).
//!
//! Format and rules follow OpenClaw 2026.7.1 (`session-write-lock` on top of fs-safe's
//! sidecar lock): the lock file is created with O_EXCL and holds
//! `JSON.stringify({pid, createdAt, maxHoldMs, starttime?}, null, 2) + "\n"`, where
//! `starttime` is field 22 of `/proc/<pid>/stat` (it detects a recycled pid).
//!
//! An existing lock is **stale** when its pid is missing, dead (or a zombie) or recycled, when
//! `createdAt` is invalid, when it is older than the stale limit (env
//! `OPENCLAW_SESSION_WRITE_LOCK_STALE_MS`, default 30 min), or when it is older than its own
//! `maxHoldMs`. Like the runtime we only *reclaim* (delete and retake) a stale lock whose
//! holder is gone: a live holder past its age limit is reported, not overridden, and a lock
//! without a readable pid or time is reclaimed only once the file itself is older than
//! min(stale limit, 30 s) (it may be a writer between create and write). A lock held by a live,
//! non-stale process means "skip this transcript" (exit code 4 for the run).
//!
//! Unlike the runtime we do not treat a live holder that is not an OpenClaw process as stale:
//! that holder may be another clawkeeper run. The converse matters: OpenClaw 2026.7.1 reads
//! the holder's `/proc/<pid>/cmdline` and treats a live holder that is not an OpenClaw process
//! (us) as stale (`non-openclaw-owner`) and takes the lock over. Our lock therefore keeps other
//! clawkeeper runs and well-behaved tools out, but not a busy gateway; the rewrite's size and
//! mtime re-check just before the rename is what protects a concurrent append.
//!
//! Our own lock is removed on drop only when the file still holds exactly what we wrote.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::{Map, Value};

use super::Confined;
use crate::isotime::{iso_now, parse_iso_ms};

/// Default stale limit of the runtime (`session.writeLock.staleMs`).
pub const DEFAULT_STALE_MS: u64 = 30 * 60 * 1000;
/// What we announce as our maximum hold time (the runtime's default).
pub const MAX_HOLD_MS: u64 = 5 * 60 * 1000;
/// Grace for a lock file without a readable payload.
const ORPHAN_PAYLOAD_GRACE_MS: u64 = 30_000;

/// A lock we hold. Dropping it removes the lock file if it is still ours.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
    raw: String,
    ino: u64,
    /// The directory it was created in (removed from there, whatever its path leads to now).
    confined: Confined,
}

impl SessionLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        let c = &self.confined;
        let ours = matches!(c.stat(&self.path), Ok(Some(st)) if st.is_file() && st.ino == self.ino)
            && c.open_read(&self.path).is_ok_and(|mut f| {
                let mut s = String::new();
                io::Read::read_to_string(&mut f, &mut s).is_ok() && s == self.raw
            });
        if ours {
            let _ = c.remove_file(&self.path);
        }
    }
}

/// Who holds a lock we could not take, and why we did not reclaim it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub lock_path: PathBuf,
    pub pid: Option<u32>,
    pub alive: bool,
    pub age_ms: Option<u64>,
    /// Stale reasons in the runtime's vocabulary (`dead-pid`, `too-old`, …); empty when the
    /// lock is live.
    pub stale_reasons: Vec<&'static str>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "locked by pid {pid}")?,
            None => write!(f, "locked by an unknown owner")?,
        }
        if let Some(age) = self.age_ms {
            write!(f, " for {}s", age / 1000)?;
        }
        if !self.stale_reasons.is_empty() {
            write!(
                f,
                " (stale: {}; not reclaimed while its holder may be alive)",
                self.stale_reasons.join(", ")
            )?;
        }
        write!(f, " ({})", self.lock_path.display())
    }
}

/// The outcome of trying to lock a transcript.
#[derive(Debug)]
pub enum Acquire {
    Locked(SessionLock),
    Busy(Holder),
}

/// The lock file path of a transcript inside `confined`.
pub fn lock_path(confined: &Confined, transcript: &Path) -> Result<PathBuf> {
    let target = confined.check(transcript)?;
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".lock");
    Ok(target.with_file_name(name))
}

/// The names of the lock files directly in the confined directory, from one listing (`None`
/// when it cannot be listed). A transcript there whose `<name>.lock` is not among them was not
/// locked when the directory was listed: a check of thousands of transcripts lists the
/// directory once instead of looking up each lock.
pub fn lock_names(confined: &Confined) -> Option<std::collections::HashSet<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let listing = std::fs::read_dir(confined.root()).ok()?;
    let mut names = std::collections::HashSet::new();
    for entry in listing {
        let name = entry.ok()?.file_name();
        if name.as_bytes().ends_with(b".lock") {
            names.insert(name);
        }
    }
    Some(names)
}

/// The lock names of each directory (by its real path) as the last listing of it in this run
/// saw them (see [`remember_lock_names`]).
type SeenLocks = std::sync::Mutex<
    std::collections::HashMap<PathBuf, std::collections::HashSet<std::ffi::OsString>>,
>;

fn seen_locks() -> &'static SeenLocks {
    static SEEN: std::sync::OnceLock<SeenLocks> = std::sync::OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// Remember the names ending in `.lock` that a listing of the real directory `dir` made by the
/// caller saw (a plan scans its sessions directory anyway), for [`lock_names_seen`].
pub fn remember_lock_names(dir: &Path, names: std::collections::HashSet<std::ffi::OsString>) {
    let mut seen = seen_locks().lock().unwrap_or_else(|e| e.into_inner());
    seen.insert(dir.to_owned(), names);
}

/// [`lock_names`] as the last listing of the directory in this run saw them, or from a
/// listing of its own when there was none: for a preview, which answers for the moment of
/// its plan. An apply decides on a listing of its own ([`lock_names`]).
pub fn lock_names_seen(
    confined: &Confined,
) -> Option<std::collections::HashSet<std::ffi::OsString>> {
    let seen = seen_locks().lock().unwrap_or_else(|e| e.into_inner());
    match seen.get(confined.root()) {
        Some(names) => Some(names.clone()),
        None => {
            drop(seen);
            lock_names(confined)
        }
    }
}

/// How often a wait for a lock held by a live process looks again.
pub const RETRY: Duration = Duration::from_millis(100);

/// Take the transcript's write lock, waiting up to `wait` while a live process holds it.
pub fn acquire(confined: &Confined, transcript: &Path, wait: Option<Duration>) -> Result<Acquire> {
    let path = lock_path(confined, transcript)?;
    let deadline = wait.map(|w| Instant::now() + w);
    loop {
        match try_create(confined, &path)? {
            Some(lock) => return Ok(Acquire::Locked(lock)),
            None => {
                let holder = inspect(&path)?;
                match holder {
                    // Gone between create and inspect: try again.
                    None => continue,
                    Some((h, raw)) => {
                        if reclaimable(&path, &h) && remove_if_unchanged(confined, &path, &raw)? {
                            continue;
                        }
                        match deadline {
                            Some(d) if Instant::now() < d => std::thread::sleep(RETRY),
                            _ => return Ok(Acquire::Busy(h)),
                        }
                    }
                }
            }
        }
    }
}

/// Who holds the transcript's lock, when a live process holds it (a lock that [`acquire`]
/// would reclaim, or no lock at all, gives `None`). Nothing is created or removed.
pub fn live_holder(confined: &Confined, transcript: &Path) -> Result<Option<Holder>> {
    let path = lock_path(confined, transcript)?;
    Ok(inspect(&path)?
        .map(|(h, _)| h)
        .filter(|h| !reclaimable(&path, h)))
}

fn try_create(confined: &Confined, path: &Path) -> Result<Option<SessionLock>> {
    let mut file = match confined.create_new(path, 0o666) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", path.display())),
    };
    // Our own start time is read once per run, not once per lock.
    static OWN_START: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let pid = std::process::id();
    let mut payload = Map::new();
    payload.insert("pid".into(), Value::from(pid));
    payload.insert("createdAt".into(), Value::String(iso_now()));
    payload.insert("maxHoldMs".into(), Value::from(MAX_HOLD_MS));
    if let Some(st) = *OWN_START.get_or_init(|| process_start_time(pid)) {
        payload.insert("starttime".into(), Value::from(st));
    }
    let raw = format!(
        "{}\n",
        crate::jsjson::to_string_pretty(&Value::Object(payload))
    );
    // Not synced: a lock only matters while its holder lives, and after a power loss an empty
    // or torn lock counts as held only until it is old enough to reclaim, as OpenClaw's does.
    if let Err(e) = file.write_all(raw.as_bytes()) {
        let _ = confined.remove_file(path);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    let ino = match file.metadata() {
        Ok(m) => m.ino(),
        Err(e) => {
            let _ = confined.remove_file(path);
            return Err(e).with_context(|| format!("cannot stat {}", path.display()));
        }
    };
    let lock = SessionLock {
        path: path.to_owned(),
        raw,
        ino,
        confined: confined.clone(),
    };
    Ok(Some(lock))
}

/// Read and judge an existing lock file without touching it (for reports). `None` when it
/// does not exist.
pub fn probe(path: &Path) -> Result<Option<Holder>> {
    Ok(inspect(path)?.map(|(h, _)| h))
}

/// What taking a transcript's lock would meet, for previews: `Ok(None)` when there is no
/// lock, `Ok(Some(bytes))` when a stale lock of that size would be reclaimed (deleted), and
/// `Err(holder)` when the lock is held and the transcript would be skipped.
pub fn preview_acquire(
    confined: &Confined,
    transcript: &Path,
) -> Result<Result<Option<u64>, Holder>> {
    let path = lock_path(confined, transcript)?;
    let Some((h, raw)) = inspect(&path)? else {
        return Ok(Ok(None));
    };
    if reclaimable(&path, &h) {
        Ok(Ok(Some(raw.len() as u64)))
    } else {
        Ok(Err(h))
    }
}

/// Read and judge an existing lock. `None` when it vanished.
fn inspect(path: &Path) -> Result<Option<(Holder, Vec<u8>)>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
    };
    if !meta.is_file() {
        // Never follow or remove a symlinked or special lock: report it as held.
        return Ok(Some((
            Holder {
                lock_path: path.to_owned(),
                pid: None,
                alive: true,
                age_ms: None,
                stale_reasons: Vec::new(),
            },
            Vec::new(),
        )));
    }
    let raw = match fs::read(path) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let payload: Option<Value> = serde_json::from_slice(&raw).ok();
    let num = |k: &str| {
        payload
            .as_ref()
            .and_then(|p| p.get(k))
            .and_then(Value::as_u64)
    };
    let pid = num("pid")
        .filter(|&p| p > 0 && p <= u64::from(u32::MAX))
        .map(|p| p as u32);
    let alive = pid.is_some_and(pid_alive);
    let recycled = match (pid, num("starttime")) {
        (Some(p), Some(st)) if alive => process_start_time(p).is_some_and(|now| now != st),
        _ => false,
    };
    let created = payload
        .as_ref()
        .and_then(|p| p.get("createdAt"))
        .and_then(Value::as_str)
        .and_then(parse_iso_ms);
    let now = crate::js::now_ms() as u64;
    let age_ms = created.map(|c| now.saturating_sub(c));
    let mut reasons = Vec::new();
    match pid {
        None => reasons.push("missing-pid"),
        Some(_) if !alive => reasons.push("dead-pid"),
        Some(_) if recycled => reasons.push("recycled-pid"),
        Some(_) => {}
    }
    match age_ms {
        None => reasons.push("invalid-createdAt"),
        Some(a) if a > stale_ms() => reasons.push("too-old"),
        Some(_) => {}
    }
    if let (Some(max), Some(a)) = (num("maxHoldMs").filter(|&m| m > 0), age_ms)
        && a > max
    {
        reasons.push("hold-exceeded");
    }
    Ok(Some((
        Holder {
            lock_path: path.to_owned(),
            pid,
            alive,
            age_ms,
            stale_reasons: reasons,
        },
        raw,
    )))
}

/// Whether a stale lock may be deleted and retaken (the runtime's rule).
fn reclaimable(path: &Path, h: &Holder) -> bool {
    if h.stale_reasons.is_empty() {
        return false;
    }
    if h.stale_reasons
        .iter()
        .all(|r| matches!(*r, "too-old" | "hold-exceeded"))
    {
        return false;
    }
    if h.stale_reasons
        .iter()
        .all(|r| matches!(*r, "missing-pid" | "invalid-createdAt"))
    {
        let mtime_age = fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map_or(0, |d| d.as_millis() as u64);
        return mtime_age > stale_ms().min(ORPHAN_PAYLOAD_GRACE_MS);
    }
    true
}

fn remove_if_unchanged(confined: &Confined, path: &Path, seen: &[u8]) -> Result<bool> {
    match fs::read(path) {
        Ok(now) if now == seen => {
            confined.remove_file(path)?;
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn stale_ms() -> u64 {
    std::env::var("OPENCLAW_SESSION_WRITE_LOCK_STALE_MS")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_STALE_MS)
}

/// A pid exists and is not a zombie. A pid we may not signal (EPERM) counts as alive.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(p, 0) };
    if rc != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    let zombie = fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|st| st.trim_start().starts_with('Z'))
    });
    !zombie
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_lock(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("s.jsonl.lock");
        fs::write(&p, body).unwrap();
        p
    }

    /// A plan's scan of the sessions directory remembers its lock files of every type, which
    /// a preview then uses instead of listing again; an apply's listing sees the directory as
    /// it is now.
    #[test]
    fn a_preview_sees_the_lock_files_its_plans_scan_listed() {
        let guard = tempfile::tempdir().unwrap();
        let d = fs::canonicalize(guard.path()).unwrap();
        fs::write(d.join("a.jsonl"), "").unwrap();
        fs::write(d.join("a.jsonl.lock"), "{}").unwrap();
        std::os::unix::fs::symlink(d.join("gone"), d.join("b.jsonl.lock")).unwrap();
        fs::create_dir(d.join("c.jsonl.lock")).unwrap();
        let c = Confined::new(&d).unwrap();
        let _ = crate::maintenance::files::scan(&d);
        let seen = lock_names_seen(&c).unwrap();
        assert_eq!(seen, lock_names(&c).unwrap());
        let mut names: Vec<_> = seen
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.jsonl.lock", "b.jsonl.lock", "c.jsonl.lock"]);

        fs::write(d.join("d.jsonl.lock"), "{}").unwrap();
        assert_eq!(lock_names_seen(&c).unwrap(), seen, "the plan's moment");
        assert!(
            lock_names(&c)
                .unwrap()
                .contains(std::ffi::OsStr::new("d.jsonl.lock"))
        );
    }

    #[test]
    fn live_locks_are_respected_and_dead_ones_reclaimed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let t = dir.path().join("s.jsonl");
        fs::write(&t, b"x").unwrap();
        // Held by this (live) process, fresh: busy.
        let live = format!(
            "{{\n  \"pid\": {},\n  \"createdAt\": \"{}\"\n}}\n",
            std::process::id(),
            iso_now()
        );
        let p = write_lock(dir.path(), &live);
        match acquire(&c, &t, None).unwrap() {
            Acquire::Busy(h) => {
                assert!(h.alive);
                assert!(h.stale_reasons.is_empty());
            }
            Acquire::Locked(_) => panic!("took a live lock"),
        }
        assert_eq!(fs::read_to_string(&p).unwrap(), live);
        // Live but too old: still not reclaimed.
        let old = format!(
            "{{\"pid\":{},\"createdAt\":\"2020-01-01T00:00:00.000Z\"}}",
            std::process::id()
        );
        write_lock(dir.path(), &old);
        assert!(matches!(acquire(&c, &t, None).unwrap(), Acquire::Busy(_)));
        // A dead pid: reclaimed, rewritten in the runtime's format, removed on drop.
        write_lock(
            dir.path(),
            &format!(
                "{{\"pid\":{},\"createdAt\":\"{}\"}}",
                u32::MAX - 7,
                iso_now()
            ),
        );
        let Acquire::Locked(lock) = acquire(&c, &t, None).unwrap() else {
            panic!("dead lock not reclaimed")
        };
        let text = fs::read_to_string(lock.path()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["pid"], Value::from(std::process::id()));
        assert!(parse_iso_ms(v["createdAt"].as_str().unwrap()).is_some());
        assert!(text.starts_with("{\n  \"pid\": ") && text.ends_with("}\n"));
        drop(lock);
        assert!(!p.exists());
    }

    #[test]
    fn a_lock_replaced_by_someone_else_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let t = dir.path().join("s.jsonl");
        let Acquire::Locked(lock) = acquire(&c, &t, None).unwrap() else {
            panic!()
        };
        fs::remove_file(lock.path()).unwrap();
        let p = write_lock(dir.path(), "{\"pid\":1}");
        drop(lock);
        assert_eq!(fs::read_to_string(p).unwrap(), "{\"pid\":1}");
    }

    #[test]
    fn symlinked_lock_is_never_touched() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("v");
        fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("s.jsonl.lock")).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let t = dir.path().join("s.jsonl");
        assert!(matches!(acquire(&c, &t, None).unwrap(), Acquire::Busy(_)));
        assert_eq!(fs::read_to_string(victim).unwrap(), "keep");
    }
}
