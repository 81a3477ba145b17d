//! Transcript path resolution for store entries, as OpenClaw's `paths.ts` does it, and the
//! Node `path` helpers it relies on (`path.resolve`, `realpath` with fallback, containment).
//!
//! `transcript_path(session_id, session_file, sessions_dir)` is `resolveSessionFilePath`: a
//! `sessionFile` that resolves inside the sessions dir wins, else `<sessionId>.jsonl`.
//! `transcript_in_dir` is the containment-checked variant maintenance uses for deletions: it
//! returns `None` for anything whose real path is outside the sessions dir.

use std::path::{Component, Path, PathBuf};

use crate::js::js_trim;

/// `path.resolve(p)`: absolute against the cwd, `.`/`..` folded lexically, no symlinks read.
pub fn resolve(p: &Path) -> PathBuf {
    if is_plain_absolute(p) {
        return p.to_path_buf();
    }
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(p)
    };
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
            _ => {}
        }
    }
    out
}

/// An absolute path that `resolve` would return unchanged: no `.` or `..` component, no
/// doubled or trailing separator (the common case, checked without allocating).
fn is_plain_absolute(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let b = p.as_os_str().as_bytes();
    b.len() > 1
        && b[0] == b'/'
        && b[b.len() - 1] != b'/'
        && b[1..]
            .split(|&c| c == b'/')
            .all(|seg| !seg.is_empty() && seg != b"." && seg != b"..")
}

/// `canonicalizePathForComparison`: realpath when it exists, else the resolved path.
pub fn canonical(p: &Path) -> PathBuf {
    let r = resolve(p);
    real_or_self(&r)
}

/// `path.relative(base, p)` is non-empty, does not start with `..` and is not absolute:
/// `p` is strictly inside `base` (both already resolved).
pub fn is_strictly_inside(base: &Path, p: &Path) -> bool {
    match p.strip_prefix(base) {
        Ok(rel) => !rel.as_os_str().is_empty() && !rel.to_string_lossy().starts_with(".."),
        Err(_) => false,
    }
}

/// `^[a-z0-9][a-z0-9._-]{0,127}$` (case-insensitive) and `<id>.jsonl` is not a checkpoint name.
pub fn validate_session_id(session_id: &str) -> Option<&str> {
    let t = js_trim(session_id);
    let b = t.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    (ok && crate::layout::parse_checkpoint_stem(t).is_none()).then_some(t)
}

/// `isSafeSessionId`: what load-time normalisation accepts as a session id at all.
pub fn is_safe_session_id(value: &str) -> bool {
    let t = js_trim(value);
    // UTF-16 units never outnumber bytes: only long ids need counting.
    if t.is_empty()
        || (t.len() > 255 && t.encode_utf16().count() > 255)
        || t.contains('/')
        || t.contains('\\')
    {
        return false;
    }
    let b = t.as_bytes();
    b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'@' | b'-'))
}

/// `realpath(p)` when `p` exists, else `p` itself (how every caller here falls back).
///
/// Maintenance asks this for every entry's transcript and sidecars, several times each; a
/// plain `canonicalize` reads every component of the path (one `readlink` each, hundreds of
/// thousands on a big store). So the real path of a directory is looked up once per run and
/// remembered, and a directory that is its own real path is listed once: a name in it that
/// is not a symlink is its own real path (and a missing name falls back to itself anyway), so
/// only symlinks are resolved again. Directories are not renamed during a run, so remembered
/// answers stay right; a symlink that appears during the run may be taken for a plain name,
/// which only matters for comparisons: every write, rename and delete goes through
/// `fsutil::Confined`, which checks the file itself and never follows a symlink.
fn real_or_self(p: &Path) -> PathBuf {
    if let Some(hit) = known_dir(p) {
        return hit;
    }
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    };
    if let Some(symlinks) = symlinks_in_real_dir(parent)
        && !symlinks.contains(name)
    {
        return p.to_path_buf();
    }
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return p.to_path_buf();
    };
    let real = if meta.is_dir() {
        real_dir(p)
    } else if meta.file_type().is_symlink() {
        std::fs::canonicalize(p).ok()
    } else {
        real_dir(parent).map(|d| d.join(name))
    };
    real.unwrap_or_else(|| p.to_path_buf())
}

/// Caches keyed by the path's bytes (hashing a `Path` walks its components, which is most of
/// the cost of a lookup).
type Shared<T> = std::sync::Mutex<std::collections::HashMap<std::ffi::OsString, T>>;

fn lock<T>(
    m: &'static Shared<T>,
) -> std::sync::MutexGuard<'static, std::collections::HashMap<std::ffi::OsString, T>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn dir_cache() -> &'static Shared<PathBuf> {
    static CACHE: std::sync::OnceLock<Shared<PathBuf>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn known_dir(dir: &Path) -> Option<PathBuf> {
    lock(dir_cache()).get(dir.as_os_str()).cloned()
}

/// `realpath` of a directory, remembered for the rest of the run.
fn real_dir(dir: &Path) -> Option<PathBuf> {
    if let Some(hit) = known_dir(dir) {
        return Some(hit);
    }
    let real = std::fs::canonicalize(dir).ok()?;
    lock(dir_cache()).insert(dir.as_os_str().to_owned(), real.clone());
    Some(real)
}

/// The names of the symlinks (and of entries of unknown type) in a directory.
type Special = std::sync::Arc<std::collections::HashSet<std::ffi::OsString>>;

/// The [`Special`] names of each real directory listed in this run.
fn listings() -> &'static Shared<Special> {
    static LISTINGS: std::sync::OnceLock<Shared<Special>> = std::sync::OnceLock::new();
    LISTINGS.get_or_init(Default::default)
}

/// The names of the symlinks (and of entries of unknown type) directly in `dir`, listed once
/// per run; `None` unless `dir` exists and is its own real path.
fn symlinks_in_real_dir(dir: &Path) -> Option<Special> {
    if let Some(hit) = lock(listings()).get(dir.as_os_str()) {
        return Some(hit.clone());
    }
    if real_dir(dir)? != dir {
        return None;
    }
    let mut special = std::collections::HashSet::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        if entry.file_type().map_or(true, |t| t.is_symlink()) {
            special.insert(entry.file_name());
        }
    }
    let special = std::sync::Arc::new(special);
    lock(listings()).insert(dir.as_os_str().to_owned(), special.clone());
    Some(special)
}

/// `resolvePathWithinSessionsDir`, restricted to what stays inside `sessions_dir`.
///
/// OpenClaw may also remap an absolute path under another `agents/<id>/sessions/` tree to a
/// sibling agent dir; such a result is outside this store's directory, which every caller in
/// clawkeeper treats the same way as "no file", so that branch returns `Outside`.
pub fn within_sessions_dir(sessions_dir: &Path, candidate: &str) -> Within {
    let trimmed = js_trim(candidate);
    if trimmed.is_empty() {
        return Within::Invalid;
    }
    let base = resolve(sessions_dir);
    let real_base = real_or_self(&base);
    let cand = Path::new(trimmed);
    if cand.is_absolute() {
        let real = real_or_self(cand);
        let real = resolve(&real);
        if is_strictly_inside(&real_base, &real) {
            return Within::Inside(real);
        }
        // Under some `agents/<id>/sessions/` tree: OpenClaw may resolve it elsewhere.
        if agent_sessions_parts(&real) {
            return Within::Outside(real);
        }
        return Within::Invalid;
    }
    // Relative: lexical join; a leading `..` is rejected.
    if trimmed.starts_with("..") {
        return Within::Invalid;
    }
    // OpenClaw does not re-check the joined path: `a/../../x` lands outside the directory.
    let joined = resolve(&real_base.join(trimmed));
    if is_strictly_inside(&real_base, &joined) {
        Within::Inside(joined)
    } else {
        Within::Outside(joined)
    }
}

fn agent_sessions_parts(p: &Path) -> bool {
    let parts: Vec<_> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    match parts.iter().rposition(|s| s == "sessions") {
        Some(i) => i >= 2 && parts[i - 2] == "agents",
        None => false,
    }
}

/// Where a `sessionFile` candidate lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Within {
    /// Inside the sessions dir (lexically, for relative values; by realpath for absolute ones).
    Inside(PathBuf),
    /// Accepted by OpenClaw but outside this sessions dir (another agent's tree).
    Outside(PathBuf),
    /// Rejected: OpenClaw falls back to `<sessionId>.jsonl`.
    Invalid,
}

/// `resolveSessionFilePath(sessionId, {sessionFile}, {sessionsDir})`. `None` when the session id
/// is invalid and no usable `sessionFile` exists (OpenClaw throws).
pub fn transcript_path(
    session_id: &str,
    session_file: Option<&str>,
    sessions_dir: &Path,
) -> Option<PathBuf> {
    if let Some(sf) = session_file {
        match within_sessions_dir(sessions_dir, sf) {
            Within::Inside(p) | Within::Outside(p) => return Some(p),
            Within::Invalid => {}
        }
    }
    default_transcript_path(session_id, sessions_dir)
}

/// `resolveSessionTranscriptPathInDir(sessionId, sessionsDir)`: `<dir>/<id>.jsonl`.
pub fn default_transcript_path(session_id: &str, sessions_dir: &Path) -> Option<PathBuf> {
    let id = validate_session_id(session_id)?;
    let base = resolve(sessions_dir);
    let real_base = real_or_self(&base);
    Some(real_base.join(format!("{id}.jsonl")))
}

/// The entry's transcript, canonical, only when it is inside `sessions_dir`
/// (`resolveSessionTranscriptPathForEntry`).
pub fn transcript_in_dir(
    session_id: &str,
    session_file: Option<&str>,
    sessions_dir: &Path,
) -> Option<PathBuf> {
    if session_id.is_empty() {
        return None;
    }
    let p = transcript_path(session_id, session_file, sessions_dir)?;
    let dir = canonical(sessions_dir);
    let p = canonical(&p);
    is_strictly_inside(&dir, &p).then_some(p)
}

/// A sessions directory that is its own real path, with the names in it that are symlinks
/// (or of unknown type): a name not among them is its own canonical path there.
///
/// Lets callers that resolve the artifacts of thousands of entries skip the per-path cache
/// lookups of [`canonical`] for the common entry (a valid `sessionId`, no `sessionFile`).
pub struct RealDir {
    dir: PathBuf,
    symlinks: std::sync::Arc<std::collections::HashSet<std::ffi::OsString>>,
}

impl RealDir {
    /// `None` when `sessions_dir` does not exist or is not its own real path.
    pub fn new(sessions_dir: &Path) -> Option<RealDir> {
        let dir = resolve(sessions_dir);
        let symlinks = symlinks_in_real_dir(&dir)?;
        Some(RealDir { dir, symlinks })
    }

    /// [`RealDir::new`] with the names of `sessions_dir` that are symlinks or of unknown type
    /// taken from a listing the caller made (`None`: the listing failed part way, and the
    /// directory is listed again), so that a directory is listed once per run.
    pub fn with_listing(
        sessions_dir: &Path,
        special: Option<std::collections::HashSet<std::ffi::OsString>>,
    ) -> Option<RealDir> {
        let dir = resolve(sessions_dir);
        if let Some(special) = special
            && real_dir(&dir).is_some_and(|real| real == dir)
        {
            let mut known = lock(listings());
            known
                .entry(dir.as_os_str().to_owned())
                .or_insert_with(|| std::sync::Arc::new(special));
        }
        RealDir::new(sessions_dir)
    }

    /// The directory (resolved and real).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `canonical(dir/name)` for a plain file name, when it needs no lookup (the name is not
    /// a symlink here).
    pub fn plain_child(&self, name: &str) -> Option<PathBuf> {
        self.child_with_suffix(name, "")
    }

    /// [`plain_child`](Self::plain_child) of `<stem><suffix>`, built in one allocation.
    fn child_with_suffix(&self, stem: &str, suffix: &str) -> Option<PathBuf> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        if stem.is_empty() || stem.contains('/') || suffix.contains('/') {
            return None;
        }
        let dir = self.dir.as_os_str().as_bytes();
        let mut buf = Vec::with_capacity(dir.len() + 1 + stem.len() + suffix.len());
        buf.extend_from_slice(dir);
        if dir.last() != Some(&b'/') {
            buf.push(b'/');
        }
        let name_at = buf.len();
        buf.extend_from_slice(stem.as_bytes());
        buf.extend_from_slice(suffix.as_bytes());
        if self
            .symlinks
            .contains(std::ffi::OsStr::from_bytes(&buf[name_at..]))
        {
            return None;
        }
        Some(PathBuf::from(std::ffi::OsString::from_vec(buf)))
    }

    /// The canonical transcript of an entry with `session_id` and no `sessionFile` (what
    /// `transcript_in_dir` gives for it), when its name is not a symlink here.
    pub fn default_transcript(&self, session_id: &str) -> Option<PathBuf> {
        if session_id.is_empty() {
            return None;
        }
        self.child_with_suffix(validate_session_id(session_id)?, ".jsonl")
    }

    /// The canonical transcript, trajectory pointer and trajectory runtime paths of an entry
    /// with `session_id` and no `sessionFile` (what `transcript_in_dir` and [`canonical`]
    /// give for them), when none of the three names is a symlink here.
    pub fn default_artifacts(&self, session_id: &str) -> Option<[PathBuf; 3]> {
        if session_id.is_empty() {
            return None;
        }
        let id = validate_session_id(session_id)?;
        Some([
            self.child_with_suffix(id, ".jsonl")?,
            self.child_with_suffix(id, ".trajectory-path.json")?,
            self.child_with_suffix(id, ".trajectory.jsonl")?,
        ])
    }
}

/// `X.jsonl` → `X.trajectory-path.json` (other names get the suffix appended).
pub fn trajectory_pointer_path(transcript: &Path) -> PathBuf {
    sidecar(transcript, ".trajectory-path.json")
}

/// `X.jsonl` → `X.trajectory.jsonl` (the default runtime path; `OPENCLAW_TRAJECTORY_DIR` is
/// ignored by maintenance).
pub fn trajectory_runtime_path(transcript: &Path) -> PathBuf {
    sidecar(transcript, ".trajectory.jsonl")
}

fn sidecar(transcript: &Path, suffix: &str) -> PathBuf {
    let s = transcript.to_string_lossy();
    let stem = s.strip_suffix(".jsonl").unwrap_or(&s);
    PathBuf::from(format!("{stem}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_lexically() {
        assert_eq!(resolve(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
        assert_eq!(resolve(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(resolve(Path::new("/a/b")), PathBuf::from("/a/b"));
        assert_eq!(resolve(Path::new("/a//b/")), PathBuf::from("/a/b"));
        assert_eq!(resolve(Path::new("/a/./b")), PathBuf::from("/a/b"));
        assert_eq!(resolve(Path::new("/")), PathBuf::from("/"));
    }

    #[test]
    fn session_ids() {
        assert_eq!(validate_session_id(" abc-1.2_3 "), Some("abc-1.2_3"));
        assert_eq!(validate_session_id("-abc"), None);
        assert_eq!(validate_session_id("a:b"), None);
        assert!(is_safe_session_id("a:b@c"));
        assert!(!is_safe_session_id("a/b"));
        assert!(!is_safe_session_id(".."));
    }

    #[test]
    fn session_file_confinement() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            within_sessions_dir(&d, "x.jsonl"),
            Within::Inside(d.join("x.jsonl"))
        );
        assert_eq!(within_sessions_dir(&d, "../x.jsonl"), Within::Invalid);
        assert_eq!(
            within_sessions_dir(&d, "a/../../x.jsonl"),
            Within::Outside(d.parent().unwrap().join("x.jsonl"))
        );
        assert_eq!(within_sessions_dir(&d, "/etc/passwd"), Within::Invalid);
        let abs = d.join("y.jsonl");
        assert_eq!(
            within_sessions_dir(&d, abs.to_str().unwrap()),
            Within::Inside(abs)
        );
        assert_eq!(
            transcript_path("s1", Some("../evil"), &d),
            Some(d.join("s1.jsonl"))
        );
        assert_eq!(
            trajectory_pointer_path(Path::new("/d/a.jsonl")),
            PathBuf::from("/d/a.trajectory-path.json")
        );
        assert_eq!(
            trajectory_runtime_path(Path::new("/d/a.txt")),
            PathBuf::from("/d/a.txt.trajectory.jsonl")
        );
    }

    /// The scan's listing tells `RealDir` the same as its own listing: a symlink (to a file or
    /// to nothing) is not a plain child, a file is; a directory reached through a symlink has
    /// no `RealDir` either way.
    #[test]
    fn a_real_dir_from_the_scans_listing_is_the_real_dir_from_its_own() {
        use std::os::unix::fs::symlink;
        let guard = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(guard.path()).unwrap();
        let d = root.join("sessions");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("a.jsonl"), "{}\n").unwrap();
        symlink(d.join("a.jsonl"), d.join("b.jsonl")).unwrap();
        symlink(d.join("gone.jsonl"), d.join("c.jsonl")).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        symlink(&d, root.join("link")).unwrap();

        let scanned = crate::maintenance::files::scan(&d);
        let names: Vec<&str> = scanned.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a.jsonl"]);
        let real = RealDir::new(&d).unwrap();
        assert_eq!(real.plain_child("a.jsonl"), Some(d.join("a.jsonl")));
        assert_eq!(real.plain_child("sub"), Some(d.join("sub")));
        assert_eq!(real.plain_child("b.jsonl"), None);
        assert_eq!(real.plain_child("c.jsonl"), None);

        let _ = crate::maintenance::files::scan(&root.join("link"));
        assert!(RealDir::new(&root.join("link")).is_none());
    }
}
