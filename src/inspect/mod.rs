//! `inspect`: what is in one store, where its bytes go, and what each command would reclaim.
//!
//! [`inspect_store`] reads a store and its sessions directory without writing to either:
//! - the directory scan is maintenance's own (`maintenance::files::scan`: regular files
//!   directly in the directory), each file classified by `layout::classify` and split into
//!   live vs unreferenced with maintenance's referenced set; the categories add up to
//!   `disk_bytes`;
//! - entries are classified by `keys::classify`; transcripts are resolved by
//!   `store::entry_transcript`;
//! - each selected transcript is read once by [`scan`] (its index, counts and every entry's
//!   token figures from one parse per line), in parallel.
//!
//! Reclaimable figures come from the commands' own planning code, never from a second
//! estimate: the per-file planners of `strip-images`, `prune-noreply` and `compact` run
//! through the shared transcript job's prediction (`job::predict`, after the same target
//! checks, `job::check_target`, run once per file: the same refusals, plan and resolution as
//! `--enforce`, with only the lines a plan patches read again to size them), on the index
//! this pass built, only for files whose counts say the planner can find something.
//! `cleanup` is predicted by running `maintenance::run::apply` itself on a private scratch
//! mirror of the sessions directory (`fsutil::scratch`: hard links, removed afterwards), so
//! the figure is what `cleanup --enforce` frees, including the rewritten `sessions.json`.
//!
//! `single` reports one transcript without a store (`inspect --transcript FILE`).

pub mod database;
pub mod scan;
pub mod single;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use serde_json::Value;

use crate::json::Json;

use crate::fsutil::Confined;
use crate::fsutil::lock::{self, Holder};
use crate::keys::{self, SessionKind};
use crate::layout::{self, ArchiveReason, FileKind};
use crate::maintenance::predict;
use crate::maintenance::{files, run};
use crate::store;
use crate::transcript::Index;
use crate::transcript::estimate::TokenCounter;
use crate::transcript::job::{self, Planner, PlannerAt, Status};
use crate::transcript::tree::{self, Tree};
use crate::transcript::values::SnapshotBuf;
use scan::Counts;

/// File categories, in report order. Every regular file falls in exactly one.
pub const CATEGORIES: [&str; 14] = [
    "store",
    "transcripts",
    "topicTranscripts",
    "unreferencedTranscripts",
    "archivesDeleted",
    "archivesReset",
    "archivesBak",
    "storeBackups",
    "checkpoints",
    "trajectories",
    "staleTemps",
    "temps",
    "locks",
    "other",
];

/// A store temp counts as stale (removable by OpenClaw) from this age on.
const STALE_TEMP_MS: f64 = 5.0 * 60.0 * 1000.0;

/// Which sessions to report (and whose transcripts the transcript commands would touch).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// Only entries whose `updatedAt` is older than now minus this.
    pub older_than_ms: Option<i64>,
    /// Only sessions whose transcript is larger than this many bytes.
    pub larger_than: Option<u64>,
    pub kind: Option<SessionKind>,
    /// Only this session key (matched as every command matches `--session`).
    pub session: Option<keys::SessionSelector>,
}

/// The command code `inspect` runs to predict, handed in by the command layer.
pub struct Hooks<'a> {
    pub strip: &'a Planner<'a>,
    pub prune: &'a Planner<'a>,
    /// `prune-cache-ttl`'s planner.
    pub cache_ttl: &'a Planner<'a>,
    pub compact: &'a PlannerAt<'a>,
    /// `compact` leaves a transcript alone when its context is not above this.
    pub compact_min_tokens: u64,
    /// The counter the token figures are measured with (the estimator of `compact` and of the
    /// context estimates): each transcript's index is built measuring with it.
    pub counter: TokenCounter,
    /// The runtime's context estimate of a transcript, from its measured index.
    pub context_tokens: &'a (dyn Fn(&Index, &Tree) -> anyhow::Result<u64> + Sync),
    /// `cleanup` settings (mode forced to enforce), or `None` to skip that prediction.
    pub cleanup: Option<&'a run::Options>,
    /// The same for SQLite-era agents (`None` with `cleanup`).
    pub cleanup_db: Option<&'a crate::agentdb::cleanup::Options>,
    /// Told the bytes of transcripts a store will read, then the bytes of each one done.
    pub progress: &'a (dyn Fn(Tick) + Sync),
}

/// Progress of the transcript pass, in bytes.
#[derive(Debug, Clone, Copy)]
pub enum Tick {
    /// This many more bytes of transcripts will be read.
    Planned(u64),
    /// This many bytes were read and analysed.
    Done(u64),
}

/// Count and bytes of one file category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStat {
    pub count: u64,
    pub bytes: u64,
}

/// Entries of one session kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct KindStat {
    pub entries: u64,
    pub oldest: Option<f64>,
    pub newest: Option<f64>,
}

/// What one transcript file holds and what the commands would do to it.
#[derive(Debug, Clone, Default)]
pub struct TranscriptFacts {
    pub counts: Counts,
    pub context_tokens: Option<u64>,
    pub dangling_parents: usize,
    pub orphan_tool_results: usize,
    /// Bytes the command would free (negative: the file would grow, e.g. a tiny image
    /// replaced by a longer placeholder).
    pub strip_bytes: i64,
    pub prune_bytes: i64,
    pub cache_ttl_bytes: i64,
    pub compact_tokens: u64,
    /// Why the file could not be read.
    pub error: Option<String>,
    /// The first line is not a session header (an empty file, too): damage the commands skip.
    pub no_header: bool,
}

/// One store entry. A store may have hundreds of thousands: a row holds what the report
/// shows of its entry and no more.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub key: Box<str>,
    pub session_id: Option<Box<str>>,
    /// The transcript (see [`StoreReport::transcript`]).
    pub transcript: TranscriptName,
    pub updated_at: Option<f64>,
    /// `None` when the transcript is missing (or the entry has none). Boxed: most rows of a
    /// large store have none, and cost only the pointer.
    pub facts: Option<Box<TranscriptFacts>>,
    pub kind: SessionKind,
    /// The entry has a session id whose transcript does not exist (damage; never set with
    /// `--larger-than`, which a missing transcript cannot pass).
    pub transcript_missing: bool,
}

/// How a row names its transcript, in its report's
/// [`transcripts_dir`](StoreReport::transcripts_dir) (a transcript is always inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TranscriptName {
    /// The entry has none: no session id, or a file outside the sessions directory.
    None,
    /// `<sessionId>.jsonl`, the name of most: held as this mark, for a store may have hundreds
    /// of thousands of them.
    OfSessionId,
    Other(Box<Path>),
}

impl SessionRow {
    /// The transcript's name in the report's transcripts directory.
    pub fn transcript_name(&self) -> Option<Cow<'_, Path>> {
        match &self.transcript {
            TranscriptName::None => None,
            TranscriptName::OfSessionId => {
                let id = self.session_id.as_deref()?;
                Some(Cow::Owned(PathBuf::from(format!("{id}.jsonl"))))
            }
            TranscriptName::Other(name) => Some(Cow::Borrowed(name)),
        }
    }
}

/// What each command would reclaim.
#[derive(Debug, Clone, Default)]
pub struct Reclaimable {
    /// Drop of `disk_bytes` under `cleanup --enforce` (`None`: not predicted).
    pub cleanup: Option<i64>,
    pub strip_images: i64,
    pub prune_noreply: i64,
    pub prune_cache_ttl: i64,
    pub compact_tokens: u64,
}

/// Problems noticed along the way (entries whose transcript does not exist are marked on
/// their rows: [`SessionRow::transcript_missing`]).
#[derive(Debug, Clone, Default)]
pub struct Damage {
    /// Transcript → 1-based unparsable line numbers.
    pub unparsable_lines: Vec<(PathBuf, Vec<usize>)>,
    pub dangling_parents: Vec<(PathBuf, usize)>,
    pub orphan_tool_results: Vec<(PathBuf, usize)>,
    /// Lock files with their holder (live or stale).
    pub locks: Vec<Holder>,
    pub unreadable: Vec<(PathBuf, String)>,
    /// Transcripts whose first line is not a session header (empty ones too).
    pub no_header: Vec<PathBuf>,
}

impl Damage {
    /// Record what one transcript's facts show wrong, under `label` (its path, or the
    /// database and session id).
    pub fn add_transcript(&mut self, label: &Path, f: &TranscriptFacts) {
        let label = label.to_path_buf();
        if !f.counts.unparsable_lines.is_empty() {
            self.unparsable_lines
                .push((label.clone(), f.counts.unparsable_lines.clone()));
        }
        if f.dangling_parents > 0 {
            self.dangling_parents
                .push((label.clone(), f.dangling_parents));
        }
        if f.orphan_tool_results > 0 {
            self.orphan_tool_results
                .push((label.clone(), f.orphan_tool_results));
        }
        if let Some(e) = &f.error {
            self.unreadable.push((label.clone(), e.clone()));
        }
        if f.no_header {
            self.no_header.push(label);
        }
    }
}

/// The report of one store.
#[derive(Debug, Clone, Default)]
pub struct StoreReport {
    pub agent_id: String,
    pub store_path: PathBuf,
    /// The sessions directory, canonical, in which the rows name their transcripts (empty for
    /// a SQLite-era agent, whose transcripts are rows of its database).
    pub transcripts_dir: PathBuf,
    /// The SQLite database when the agent moved to SQLite.
    pub sqlite: Option<PathBuf>,
    pub entries: u64,
    pub disk_bytes: u64,
    pub files: Vec<(&'static str, FileStat)>,
    pub kinds: BTreeMap<SessionKind, KindStat>,
    pub store_bytes: u64,
    /// Per-entry field name → bytes it takes in `sessions.json`, largest first.
    pub store_fields: Vec<(String, u64)>,
    /// Sessions that pass the filters, in store order.
    pub sessions: Vec<SessionRow>,
    /// Whether `--session` names an entry of this store (false without `--session`).
    pub session_matched: bool,
    pub reclaimable: Reclaimable,
    pub damage: Damage,
    pub notes: Vec<String>,
    /// A SQLite-era agent's database facts (`None` for a `sessions.json` store).
    pub database: Option<database::DbFacts>,
}

impl StoreReport {
    /// The keys of the entries whose transcript does not exist, in store order.
    pub fn missing_transcripts(&self) -> impl Iterator<Item = &str> {
        (self.sessions.iter())
            .filter(|row| row.transcript_missing)
            .map(|row| &*row.key)
    }

    /// The path of `row`'s transcript.
    pub fn transcript(&self, row: &SessionRow) -> Option<PathBuf> {
        row.transcript_name()
            .map(|name| self.transcripts_dir.join(name))
    }

    /// Count one entry of `kind` last updated at `updated_at` in the per-kind figures.
    fn count_entry(&mut self, kind: SessionKind, updated_at: Option<f64>) {
        let k = self.kinds.entry(kind).or_default();
        k.entries += 1;
        if let Some(u) = updated_at {
            k.oldest = Some(k.oldest.map_or(u, |o| o.min(u)));
            k.newest = Some(k.newest.map_or(u, |n| n.max(u)));
        }
    }

    /// Add one transcript's reclaimable figures and damage, under `label` (its path, or the
    /// database and session id).
    fn add_transcript(&mut self, label: &Path, f: &TranscriptFacts) {
        self.reclaimable.strip_images += f.strip_bytes;
        self.reclaimable.prune_noreply += f.prune_bytes;
        self.reclaimable.prune_cache_ttl += f.cache_ttl_bytes;
        self.reclaimable.compact_tokens += f.compact_tokens;
        self.damage.add_transcript(label, f);
    }
}

/// Inspect one store.
pub fn inspect_store(
    agent_id: &str,
    store_path: &Path,
    filters: &Filters,
    hooks: &Hooks,
    now_ms: f64,
) -> Result<StoreReport> {
    let dir = run::sessions_dir_of(store_path);
    let sqlite = crate::targets::sqlite_marker(store_path);
    let mut cleanup_notes = Vec::new();
    let predict = |notes: &mut Vec<String>| {
        predict_cleanup(agent_id, store_path, &dir, hooks, sqlite.is_some(), notes)
    };
    let pass = || transcript_pass(agent_id, store_path, &dir, &sqlite, filters, hooks, now_ms);
    // A small store's cleanup is predicted beside the transcript pass (it is mostly system
    // calls on its scratch mirror, while the pass keeps the cores busy). A large one's runs
    // first: the store it loads and plans is gone before the pass loads its own (a store may
    // have hundreds of thousands of entries, and the two were held together when it ran beside
    // the transcript pass).
    let (cleanup, r) = if predicted_beside(store_path) {
        rayon::join(|| predict(&mut cleanup_notes), pass)
    } else {
        let cleanup = predict(&mut cleanup_notes);
        crate::memory::release_freed();
        (cleanup, pass())
    };
    let mut r = r?;
    let (cleanup, unreadable) = cleanup?;
    r.reclaimable.cleanup = cleanup;
    for (p, why) in unreadable {
        if !r.damage.unreadable.iter().any(|(q, _)| q == &p) {
            r.damage.unreadable.push((p, why));
        }
    }
    r.notes.append(&mut cleanup_notes);
    Ok(r)
}

/// A `sessions.json` up to this size has its cleanup predicted beside the transcript pass.
const PREDICTED_BESIDE_UP_TO: u64 = 4 << 20;

/// Whether the cleanup of the store at `store_path` is predicted beside the transcript pass
/// (a small store, or none at all).
fn predicted_beside(store_path: &Path) -> bool {
    std::fs::metadata(store_path).map_or(true, |m| m.len() <= PREDICTED_BESIDE_UP_TO)
}

/// The store's entries and every transcript they name, read and analysed: the report without
/// the cleanup prediction.
fn transcript_pass(
    agent_id: &str,
    store_path: &Path,
    dir: &Path,
    sqlite: &Option<PathBuf>,
    filters: &Filters,
    hooks: &Hooks,
    now_ms: f64,
) -> Result<StoreReport> {
    // Only the entries are read (the text kept for a later save is dropped at once).
    let store::Loaded { store, existed, .. } = store::load(store_path)?;
    let s = &store;
    let mut r = StoreReport {
        agent_id: agent_id.to_owned(),
        store_path: store_path.to_owned(),
        sqlite: sqlite.clone(),
        entries: s.len() as u64,
        transcripts_dir: store::paths::canonical(dir),
        ..StoreReport::default()
    };
    if let Some(db) = &r.sqlite {
        r.notes.push(format!(
            "this agent moved to SQLite ({}); this sessions.json is not the live store (cleanup cleans the database instead, and never writes this file)",
            db.display()
        ));
    }
    if !existed {
        r.notes
            .push(format!("{} does not exist", store_path.display()));
    }
    scan_dir(dir, store_path, s, now_ms, &mut r);
    r.store_fields = store_fields(s);
    // The rows take what the report needs of the entries, which go as they are read.
    let mut rows = session_rows(store, dir, &mut r);
    if let Some(sel) = &filters.session {
        r.session_matched = rows.iter().any(|row| sel.matches(&row.key));
    }
    rows.retain(|row| passes_before_scan(row, filters, now_ms));
    let (unique, of_row) = unique_transcripts(&mut rows, &r.transcripts_dir, filters);
    (hooks.progress)(Tick::Planned(unique.iter().map(|(_, n)| n).sum()));
    let confined = Confined::new(dir).ok();
    // In the order of `unique`.
    let facts: Vec<TranscriptFacts> = unique
        .par_iter()
        .map(|(p, n)| {
            let f = analyse(p, confined.as_ref(), hooks);
            (hooks.progress)(Tick::Done(*n));
            f
        })
        .collect();
    for (row, at) in rows.iter_mut().zip(of_row) {
        row.facts = at.map(|i| Box::new(facts[i].clone()));
    }
    let passes = |f: &TranscriptFacts| filters.larger_than.is_none_or(|min| f.counts.bytes > min);
    if filters.larger_than.is_some() {
        rows.retain(|row| row.facts.as_deref().is_some_and(passes));
    }
    // Each file once, in the order of the rows that name it (a transcript passes
    // `--larger-than` for all of its rows or for none).
    for ((path, _), f) in unique.iter().zip(&facts) {
        if passes(f) {
            r.add_transcript(path, f);
        }
    }
    r.sessions = rows;
    Ok(r)
}

/// Every entry with its transcript, taking the entries' keys and session ids (each entry's
/// memory goes as its row is made); counts entries per kind on the way.
///
/// The store is emptied from its last entry, giving back its room as it goes (the entries
/// were allocated in store order, so the memory at the end frees whole pages, handed back to
/// the system each time the store shrinks), so that a store of hundreds of thousands of
/// entries and all their rows are never held together; the rows are put back in store order
/// at the end.
fn session_rows(mut s: store::Store, dir: &Path, r: &mut StoreReport) -> Vec<SessionRow> {
    let mut rows = Vec::with_capacity(s.len());
    let real = store::paths::RealDir::new(dir);
    while let Some((key, entry)) = s.pop() {
        rows.push(session_row(key, entry, dir, real.as_ref(), r));
        if s.capacity() / 2 > s.len().max(1024) {
            s.shrink_to_fit();
            crate::memory::release_freed();
        }
    }
    rows.reverse();
    rows
}

/// The row of one entry, counted in the per-kind figures.
fn session_row(
    key: String,
    entry: Json,
    dir: &Path,
    real: Option<&store::paths::RealDir>,
    r: &mut StoreReport,
) -> SessionRow {
    let kind = keys::classify(&key, Some(&entry));
    let updated_at = store::updated_at(&entry);
    r.count_entry(kind, updated_at);
    // (Inside the canonical sessions directory, or not at all.)
    let transcript = files::entry_transcript_canonical(&entry, dir, real)
        .and_then(|p| Some(p.strip_prefix(&r.transcripts_dir).ok()?.to_path_buf()))
        .map_or(TranscriptName::None, |name| {
            let id = store::session_id(&entry).unwrap_or_default();
            let stem = name.as_os_str().as_bytes().strip_suffix(b".jsonl");
            match stem == Some(id.as_bytes()) {
                true => TranscriptName::OfSessionId,
                false => TranscriptName::Other(name.into_boxed_path()),
            }
        });
    let session_id = match entry {
        Json::Object(o) => match o.into_member("sessionId") {
            Some(Json::String(id)) if !id.is_empty() => Some(id),
            _ => None,
        },
        _ => None,
    };
    SessionRow {
        key: key.into_boxed_str(),
        session_id,
        kind,
        updated_at,
        transcript,
        facts: None,
        transcript_missing: false,
    }
}

/// Each transcript of `rows` once (its path in `dir`, the rows' transcripts directory), with
/// its size, and each row's place in that list (`None`: no transcript, or a missing one);
/// entries whose transcript is missing are marked as damage.
fn unique_transcripts(
    rows: &mut [SessionRow],
    dir: &Path,
    filters: &Filters,
) -> (Vec<(PathBuf, u64)>, Vec<Option<usize>>) {
    let mut unique: Vec<(PathBuf, u64)> = Vec::new();
    let mut listed: HashMap<PathBuf, usize> = HashMap::new();
    let mut of_row = Vec::with_capacity(rows.len());
    for row in rows {
        let path = row.transcript_name().map(|name| dir.join(name));
        let meta = path.as_ref().map(std::fs::metadata);
        let at = match (path, meta) {
            // (A transcript two entries share is listed once, and is not missing.)
            (Some(path), Some(Ok(m))) if m.is_file() => Some(match listed.get(&path) {
                Some(&at) => at,
                None => {
                    listed.insert(path.clone(), unique.len());
                    unique.push((path, m.len()));
                    unique.len() - 1
                }
            }),
            // A missing transcript has no size: it never passes `--larger-than`.
            _ if row.session_id.is_some() && filters.larger_than.is_none() => {
                row.transcript_missing = true;
                None
            }
            _ => None,
        };
        of_row.push(at);
    }
    (unique, of_row)
}

fn passes_before_scan(row: &SessionRow, f: &Filters, now_ms: f64) -> bool {
    if f.session.as_ref().is_some_and(|sel| !sel.matches(&row.key)) {
        return false;
    }
    if f.kind.is_some_and(|k| k != row.kind) {
        return false;
    }
    if let Some(age) = f.older_than_ms {
        // An entry without a usable updatedAt has no age: it never passes an age filter.
        return row.updated_at.is_some_and(|u| now_ms - u > age as f64);
    }
    true
}

fn category(kind: &FileKind, referenced: bool, age_ms: f64) -> &'static str {
    match kind {
        FileKind::Store => "store",
        FileKind::Transcript if referenced => "transcripts",
        FileKind::TopicTranscript if referenced => "topicTranscripts",
        FileKind::Transcript | FileKind::TopicTranscript => "unreferencedTranscripts",
        FileKind::Archive { reason, .. } => match reason {
            ArchiveReason::Deleted => "archivesDeleted",
            ArchiveReason::Reset => "archivesReset",
            ArchiveReason::Bak => "archivesBak",
        },
        FileKind::LegacyStoreBackup => "storeBackups",
        FileKind::Checkpoint => "checkpoints",
        FileKind::TrajectoryRuntime | FileKind::TrajectoryPointer => "trajectories",
        FileKind::StoreTemp if age_ms >= STALE_TEMP_MS => "staleTemps",
        FileKind::StoreTemp => "temps",
        FileKind::Lock => "locks",
        FileKind::Other => "other",
    }
}

fn scan_dir(dir: &Path, store_path: &Path, s: &store::Store, now_ms: f64, r: &mut StoreReport) {
    let scanned = files::scan(dir);
    let on_disk: FxHashSet<&OsStr> = scanned.iter().map(|f| f.canonical.as_os_str()).collect();
    let referenced = match files::referenced_paths(s, dir, &on_disk) {
        Ok(set) => set,
        Err(e) => {
            r.notes.push(format!("{e:#}"));
            s.values()
                .flat_map(|e| files::entry_artifacts(e, dir))
                .map(|p| store::paths::canonical(&p).into_os_string())
                .filter(|p| on_disk.contains(p.as_os_str()))
                .collect()
        }
    };
    let basename = store_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stats: HashMap<&'static str, FileStat> = HashMap::new();
    for f in &scanned {
        let kind = layout::classify(&f.name, &basename);
        if kind == FileKind::Store {
            r.store_bytes = f.size;
        }
        if kind == FileKind::Lock {
            match lock::probe(&f.path) {
                Ok(Some(h)) => r.damage.locks.push(h),
                Ok(None) => {}
                Err(e) => r.notes.push(format!("{e:#}")),
            }
        }
        let cat = category(
            &kind,
            referenced.contains(f.canonical.as_os_str()),
            now_ms - f.mtime_ms,
        );
        let st = stats.entry(cat).or_default();
        st.count += 1;
        st.bytes += f.size;
        r.disk_bytes += f.size;
    }
    r.files = CATEGORIES
        .iter()
        .map(|c| (*c, stats.get(c).copied().unwrap_or_default()))
        .collect();
}

/// Bytes each per-entry field takes in the `JSON.stringify(store, null, 2)` text.
fn store_fields(s: &store::Store) -> Vec<(String, u64)> {
    let mut by_field: HashMap<&str, u64> = HashMap::new();
    for entry in s.values() {
        let Json::Object(m) = entry else { continue };
        for (k, v) in m.iter() {
            // The member, its separator (",\n" or "\n") included.
            let n = crate::jsjson::pretty_member_len(k, v, 2) as u64 + 2;
            *by_field.entry(k).or_default() += n;
        }
    }
    let mut out: Vec<(String, u64)> = by_field
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Read one transcript once, then preview the commands whose planners can find work in it.
/// `confined`: the store's sessions directory, to which the commands confine their writes
/// (`None`: it cannot be confined, and no command would change the file).
fn analyse(path: &Path, confined: Option<&Confined>, hooks: &Hooks) -> TranscriptFacts {
    let mut f = TranscriptFacts::default();
    let mut buf = SnapshotBuf::take();
    let (index, counts, bytes) = match scan::scan_path(path, hooks.counter, &mut buf) {
        Ok(x) => x,
        Err(e) => {
            f.error = Some(format!("{e:#}"));
            return f;
        }
    };
    f.no_header = index.header().is_none();
    let tree = Tree::build(&index);
    f.dangling_parents = tree.dangling.len();
    let pairing = tree::pairing(
        &index,
        tree::context_iter(&index, &tree, &tree.active_path()),
    );
    f.orphan_tool_results = pairing.orphans;
    f.context_tokens = (hooks.context_tokens)(&index, &tree).ok();
    // The commands' target checks (a regular file, not a symlink, inside the directory), run
    // once for all of them: a file that fails them is one no command would change.
    if let Some(confined) = confined.filter(|c| job::check_target(c, path).is_ok()) {
        // An applied run takes the write lock: a stale lock is reclaimed (its bytes freed
        // too), a held one makes the command skip the file.
        let lock = lock::preview_acquire(confined, path);
        let freed = |o: job::Outcome| match (&o.status, &lock) {
            (Status::WouldChange, Ok(Ok(stale))) => {
                o.bytes_before as i64 - o.bytes_after as i64 + stale.unwrap_or(0) as i64
            }
            _ => 0,
        };
        // The commands' own checks and planners run on this pass's index; of the file only
        // the lines a plan patches are read again, to size them exactly as the rewrite
        // writes them.
        if counts.images > 0 || counts.media_references > 0 {
            f.strip_bytes = freed(job::predict(
                confined,
                path,
                bytes,
                &index,
                &tree,
                hooks.strip,
            ));
        }
        if counts.silent_replies > 0 {
            f.prune_bytes = freed(job::predict(
                confined,
                path,
                bytes,
                &index,
                &tree,
                hooks.prune,
            ));
        }
        // One readable marker can supersede nothing.
        if index.cache_ttl.len() > 1 {
            f.cache_ttl_bytes = freed(job::predict(
                confined,
                path,
                bytes,
                &index,
                &tree,
                hooks.cache_ttl,
            ));
        }
        if f.context_tokens
            .is_some_and(|t| t > hooks.compact_min_tokens)
        {
            f.compact_tokens = compact_saved(&job::predict_at(
                confined,
                path,
                bytes,
                &index,
                &tree,
                hooks.compact,
            ));
        }
    }
    f.counts = counts;
    f
}

/// The context tokens a predicted `compact` saves (its `tokensSaved`), 0 when it would not
/// change the transcript.
fn compact_saved(o: &job::Outcome) -> u64 {
    if o.status != Status::WouldChange {
        return 0;
    }
    o.details
        .as_ref()
        .and_then(|d| d.get("tokensSaved"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Files that could not be read, with the reason.
type Unreadable = Vec<(PathBuf, String)>;

/// Run `cleanup --enforce` on a scratch mirror and measure the drop of `disk_bytes`. Files
/// the mirror could not read are damage.
fn predict_cleanup(
    agent_id: &str,
    store_path: &Path,
    dir: &Path,
    hooks: &Hooks,
    sqlite: bool,
    notes: &mut Vec<String>,
) -> Result<(Option<i64>, Unreadable)> {
    let Some(opts) = hooks.cleanup else {
        return Ok((None, Vec::new()));
    };
    if sqlite {
        notes.push(
            "cleanup --enforce refuses this store (moved to SQLite): reclaims nothing".into(),
        );
        return Ok((Some(0), Vec::new()));
    }
    if !dir.is_dir() {
        return Ok((Some(0), Vec::new()));
    }
    match predict::predict(agent_id, store_path, opts) {
        Ok(p) => Ok((
            Some(p.disk_before as i64 - p.disk_after as i64),
            p.unreadable,
        )),
        Err(e) => {
            notes.push(format!("cleanup --enforce would stop: {e:#}"));
            Ok((Some(0), Vec::new()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A row names the transcript `store::entry_transcript` resolves, whether by the mark
    /// for `<sessionId>.jsonl` or by name, and the rows keep the store's order.
    #[test]
    fn rows_name_the_transcripts_their_entries_resolve_to() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let serde_json::Value::Object(m) = json!({
            "agent:main:a": {"sessionId": "plain-id"},
            "agent:main:b": {"sessionId": "b-id", "sessionFile": "custom.jsonl"},
            "agent:main:c": {"sessionId": "c-id", "sessionFile": d.join("sub/c-id.jsonl")},
            "agent:main:d": {"sessionId": "d-id", "sessionFile": "/elsewhere/d-id.jsonl"},
            "agent:main:e": {"updatedAt": 5},
            "agent:main:f": {"sessionId": "f-id", "sessionFile": d.join("f-id.jsonl")},
            "agent:main:g": "not an entry",
        }) else {
            unreachable!()
        };
        // More entries than the store keeps room for when it starts to give it back.
        let mut s = crate::store::from_map(m);
        for i in 0..3000 {
            s.insert(
                format!("agent:main:n{i}"),
                Json::from_value(json!({"sessionId": format!("n{i}")})),
            );
        }
        let expected: Vec<(String, Option<PathBuf>)> = (s.iter())
            .map(|(k, e)| (k.clone(), store::entry_transcript(e, &d)))
            .collect();
        let mut r = StoreReport {
            transcripts_dir: d.clone(),
            ..StoreReport::default()
        };
        let rows = session_rows(s, &d, &mut r);
        let got: Vec<(String, Option<PathBuf>)> = (rows.iter())
            .map(|row| (row.key.to_string(), r.transcript(row)))
            .collect();
        assert_eq!(got, expected);
        let marks: Vec<&TranscriptName> = rows.iter().take(7).map(|row| &row.transcript).collect();
        assert_eq!(
            marks,
            [
                &TranscriptName::OfSessionId,
                &TranscriptName::Other(Path::new("custom.jsonl").into()),
                &TranscriptName::Other(Path::new("sub/c-id.jsonl").into()),
                // A file outside the directory: OpenClaw falls back to `<sessionId>.jsonl`.
                &TranscriptName::OfSessionId,
                &TranscriptName::None,
                &TranscriptName::OfSessionId,
                &TranscriptName::None,
            ]
        );
        assert_eq!(r.kinds.values().map(|k| k.entries).sum::<u64>(), 3007);
    }
}
