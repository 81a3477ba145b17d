//! Which transcript files a transcript command works on.
//!
//! `--transcript FILE` is one file, confined to its own directory. `--store` / `--agent` /
//! `--all-agents` resolve stores exactly as `cleanup` does (`crate::targets`), load each store
//! (`crate::store::load`, which refuses an unparsable store), and take every live transcript
//! the store's entries reference (`store::entry_transcript`: OpenClaw's path resolution, kept
//! only inside the sessions dir), deduplicated. `--session KEY` narrows a store to one entry.
//! Entries whose transcript is missing, outside the sessions dir or not a primary `.jsonl`
//! transcript are reported as skipped with the reason; transcripts of an agent that moved to
//! SQLite are refused when its `sessions.json` is still there. An agent that only has its
//! database is returned as a [`Database`]: the commands edit its transcript rows (`compact
//! --successor` refuses it).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::problems::Problems;
use crate::cli::TranscriptTargetArgs;
use crate::exit::{Exit, UsageError};
use crate::transcript::job::{self, Outcome, Status};
use crate::{keys, layout, store, targets};

/// One transcript to process.
#[derive(Debug, Clone)]
pub struct Target {
    pub path: PathBuf,
    /// The store entry it belongs to, when it came from a store.
    pub session_key: Option<String>,
    /// The directory all writes are confined to.
    pub dir: PathBuf,
    /// The `sessions.json` the entry is in, when it came from a store.
    pub store: Option<PathBuf>,
}

/// An agent that keeps its transcripts in its database (SQLite era).
#[derive(Debug, Clone)]
pub struct Database {
    pub agent_id: String,
    pub db: PathBuf,
    /// The state dir whose locks and leases guard it.
    pub state_dir: PathBuf,
}

/// Targets, plus outcomes for entries that were skipped or refused while resolving.
#[derive(Debug, Default)]
pub struct Resolved {
    pub targets: Vec<Target>,
    pub skipped: Vec<(Outcome, Option<String>)>,
    /// SQLite-era agents, when the command edits transcript rows (see [`resolve_with_rows`]).
    pub databases: Vec<Database>,
    /// Whether `--session` matched an entry of a `sessions.json`.
    pub matched_session: bool,
}

/// Resolve the target flags. Stores that are missing or cannot be read, and a `--session` no
/// store has, are recorded in `problems`. The databases of SQLite-era agents are returned in
/// [`Resolved::databases`], and `--session` matching them is left to the caller (it reads
/// their session nodes).
pub fn resolve_with_rows(args: &TranscriptTargetArgs, problems: &mut Problems) -> Result<Resolved> {
    if let Some(file) = &args.transcript {
        if args.session.is_some() {
            return Err(UsageError(
                "--session needs a store target (--store, --agent or --all-agents), not --transcript"
                    .into(),
            )
            .into());
        }
        // A file named on the command line must exist (store entries whose transcript is
        // missing are reported as skipped instead).
        std::fs::symlink_metadata(file)
            .with_context(|| format!("cannot read --transcript {}", file.display()))?;
        let dir = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        return Ok(Resolved {
            targets: vec![Target {
                path: file.clone(),
                session_key: None,
                dir,
                store: None,
            }],
            ..Resolved::default()
        });
    }
    let (_, env, stores) = super::resolve_targets(&args.target, problems)?;
    let mut out = Resolved::default();
    let mut seen = Seen::default();
    let session = args.session.as_deref().map(keys::SessionSelector::new);
    let mut matched_session = false;
    for t in &stores {
        // A store that cannot be read (or does not exist) is a problem of its own; the
        // transcripts of the other stores are still processed.
        let db = crate::agentdb::for_store(&t.store_path);
        if crate::agentdb::exists(&db)
            && (crate::agentdb::is_database_path(&t.store_path) || !t.store_path.exists())
        {
            let db = std::path::absolute(&db).unwrap_or(db);
            out.databases.push(Database {
                agent_id: t.agent_id.clone(),
                state_dir: super::vacuum::state_dir_of(&db, &env),
                db,
            });
            continue;
        }
        if !t.store_path.exists() {
            continue;
        }
        match from_store(&t.store_path, session.as_ref(), &mut seen, &mut out) {
            Ok(matched) => matched_session |= matched,
            Err(e) => problems.error(&e),
        }
    }
    out.matched_session = matched_session;
    if let Some(sel) = &session
        && !matched_session
        && out.databases.is_empty()
    {
        problems.add(Exit::Error, unknown_session(sel));
    }
    Ok(out)
}

/// The error for a `--session` key no selected store has (every command words it alike).
pub fn unknown_session(sel: &keys::SessionSelector) -> String {
    format!("no session {:?} in the selected store(s)", sel.as_str())
}

/// A row of [`Resolved`] that a transcript path led to: a target, or a skipped row.
#[derive(Debug, Clone, Copy)]
enum Row {
    Target(usize),
    Skipped(usize),
}

/// The transcript paths that already have a row, found by the row's own path: a store of
/// hundreds of thousands of entries does not keep a second copy of every path.
#[derive(Default)]
struct Seen {
    rows: hashbrown::HashTable<Row>,
}

impl Seen {
    fn hash(path: &Path) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one(path)
    }

    fn path_of(out: &Resolved, row: Row) -> &Path {
        match row {
            Row::Target(i) => &out.targets[i].path,
            Row::Skipped(i) => &out.skipped[i].0.path,
        }
    }

    fn contains(&self, out: &Resolved, path: &Path) -> bool {
        self.rows
            .find(Self::hash(path), |&row| Self::path_of(out, row) == path)
            .is_some()
    }

    /// Remember the row just added for a path that [`Seen::contains`] did not have.
    fn add(&mut self, out: &Resolved, row: Row) {
        let hash = Self::hash(Self::path_of(out, row));
        self.rows
            .insert_unique(hash, row, |&r| Self::hash(Self::path_of(out, r)));
    }
}

/// Add the transcripts of one store. Returns whether `--session` matched an entry here.
fn from_store(
    store_path: &Path,
    session: Option<&keys::SessionSelector>,
    seen: &mut Seen,
    out: &mut Resolved,
) -> Result<bool> {
    // Only what leads to each transcript is kept of the entries, read one at a time.
    let entries = store::load_entry_files(store_path)?;
    let dir = store_path
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."));
    let sqlite = targets::sqlite_marker(store_path);
    let mut matched = false;
    // Room for a row per entry, so that a store of many entries is not copied as it grows.
    out.skipped.reserve(entries.len());
    // The entries are taken from the end of a reversed list, whose room is given back as it
    // empties: the rows fill while the entries go.
    let mut entries = entries;
    entries.reverse();
    while let Some(entry) = entries.pop() {
        if entries.capacity() > 2 * entries.len() + 4096 {
            entries.shrink_to_fit();
        }
        if session.is_some_and(|sel| !sel.matches(&entry.key)) {
            continue;
        }
        matched = true;
        let Some(id) = entry.session_id.as_deref() else {
            let status = Status::Skipped("the entry has no sessionId".into());
            out.skip(dir.join("?"), status, entry.key);
            continue;
        };
        let Some(path) = entry.transcript(&dir) else {
            let shown = entry.session_file.as_deref().unwrap_or(id);
            let status = Status::Skipped("its transcript is outside the sessions directory".into());
            out.skip(PathBuf::from(shown), status, entry.key);
            continue;
        };
        if seen.contains(out, &path) {
            continue;
        }
        let row = match transcript_status(&path, sqlite.as_deref()) {
            Some(status) => out.skip(path, status, entry.key),
            None => {
                let file_dir = path.parent().map(Path::to_owned).unwrap_or(dir.clone());
                out.targets.push(Target {
                    path,
                    session_key: Some(entry.key),
                    dir: file_dir,
                    store: Some(store_path.to_owned()),
                });
                Row::Target(out.targets.len() - 1)
            }
        };
        seen.add(out, row);
    }
    Ok(matched)
}

/// Why the transcript of a store entry is not a target (`None`: it is one): not a primary
/// transcript, an agent that moved to SQLite (`sqlite` is its database), or no file.
fn transcript_status(path: &Path, sqlite: Option<&Path>) -> Option<Status> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !layout::is_primary_transcript_name(&name) {
        return Some(Status::Skipped("not a live .jsonl transcript".into()));
    }
    if let Some(marker) = sqlite {
        return Some(Status::Refused(
            format!(
                "the agent has moved to SQLite ({} exists); its JSONL transcripts are not edited",
                marker.display()
            )
            .into(),
        ));
    }
    if std::fs::symlink_metadata(path).is_err() {
        return Some(Status::Skipped(job::NO_FILE.into()));
    }
    None
}

impl Resolved {
    /// Add a skipped row for the entry `key`.
    fn skip(&mut self, path: PathBuf, status: Status, key: String) -> Row {
        self.skipped.push((Outcome::new(path, status), Some(key)));
        Row::Skipped(self.skipped.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// Entries that lead to one transcript give it one row, the first entry's, whatever that
    /// row is (a target, a missing file, a name that is not a live transcript), within a
    /// store and across stores; the rows of entries that lead to no transcript all stay, in
    /// order.
    #[test]
    fn a_transcript_shared_by_entries_has_one_row_the_first_entrys() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("agents/main/sessions");
        fs::create_dir_all(&sessions).unwrap();
        fs::write(sessions.join("s1.jsonl"), "{}\n").unwrap();
        fs::write(sessions.join("s3.jsonl.bak"), "{}\n").unwrap();
        let first = sessions.join("sessions.json");
        fs::write(
            &first,
            r#"{"a": {"sessionId": "s1"}, "b": {"sessionId": "s2"}, "g": {},
                "c": {"sessionId": "s1"}, "d": {"sessionId": "s2"}, "h": {},
                "e": {"sessionId": "s3", "sessionFile": "s3.jsonl.bak"},
                "f": {"sessionId": "s4", "sessionFile": "s3.jsonl.bak"}}"#,
        )
        .unwrap();
        let second = sessions.join("other.json");
        fs::write(
            &second,
            r#"{"x": {"sessionId": "s1"}, "y": {"sessionId": "s2"}, "z": {"sessionId": "s5"}}"#,
        )
        .unwrap();
        let mut seen = Seen::default();
        let mut out = Resolved::default();
        for store in [&first, &second] {
            assert!(from_store(store, None, &mut seen, &mut out).unwrap());
        }
        let targets: Vec<_> = out
            .targets
            .iter()
            .map(|t| (t.session_key.clone().unwrap(), t.path.clone()))
            .collect();
        let canonical = |name: &str| store::paths::canonical(&sessions.join(name));
        assert_eq!(targets, [("a".to_owned(), canonical("s1.jsonl"))]);
        let skipped: Vec<_> = out
            .skipped
            .iter()
            .map(|(o, key)| (key.clone().unwrap(), format!("{:?}", o.status)))
            .collect();
        let keys: Vec<&str> = skipped.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "g", "h", "e", "z"], "{skipped:?}");
        assert!(out.skipped[0].0.status.is_no_file());
        assert!(out.skipped[4].0.status.is_no_file());
        assert!(skipped[3].1.contains("not a live"), "{skipped:?}");
    }
}
