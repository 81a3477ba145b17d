//! What the transcript commands share: running a planner over the target transcripts in
//! parallel (targets come from `transcript_targets`), and the report (human table or `--json`)
//! with the exit code.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use super::problems::Problems;
use super::resolved::ResolvedDir;
use super::transcript_targets;
use crate::cli::{ModeArgs, TranscriptTargetArgs};
use crate::exit::Exit;
use crate::fsutil::Confined;
use crate::jsjson::Sink as _;
use crate::jsonout::{IoSink, Pretty};
use crate::progress::{self, Progress};
use crate::report::transcript_text::{self, Totals, status_name};
use crate::transcript::estimate::TokenCounter;
use crate::transcript::job::{
    self, Mode, Options, Outcome, Planner, PlannerAt, Staging, Status, Synced,
};

pub(crate) fn moved_to_sqlite(db: &Path) -> String {
    format!(
        "this agent has moved to SQLite ({} exists): its JSONL transcripts are no longer the \
         live copy and clawkeeper does not write them",
        db.display()
    )
}

/// How a command labels its per-file count.
pub struct Labels {
    pub command: &'static str,
    /// JSON key of the count (`entriesRemoved`, `imagesReplaced`).
    pub count_key: &'static str,
    /// Table header of the count.
    pub count_header: &'static str,
    /// A second count, reported beside the first in `--json` and on the total line.
    pub extra: Option<Extra>,
}

/// A second per-file count (`strip-images`: media references replaced).
pub struct Extra {
    /// JSON key (`mediaReferencesReplaced`).
    pub key: &'static str,
    /// What the total line says after the number.
    pub words: &'static str,
    pub count: fn(&Outcome) -> usize,
}

/// A file counts only what was written (or, previewing, would be).
fn done(o: &Outcome) -> bool {
    matches!(o.status, Status::Changed | Status::WouldChange)
}

/// The threads that rewrite `files` files: four per core, at most 16 (each holds one file's
/// index), and no more than there are files (each thread's allocator state is memory too).
pub(crate) fn writer_pool(files: usize) -> Result<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads((4 * cores).min(16).min(files.max(1)))
        .build()?)
}

/// Run a planner over the targets and report. Returns the run's exit code.
pub fn run(
    targets: &TranscriptTargetArgs,
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    planner: &Planner,
) -> Result<Exit> {
    run_at(targets, mode, labels, count, None, &|_, index, tree| {
        planner(index, tree)
    })
}

/// [`run`] with a planner that reads the transcript back itself (a file, or a session's rows),
/// and whose index carries token figures measured with `measure` when given. The transcripts
/// of SQLite-era agents (their rows) are planned with it too.
pub fn run_at(
    targets: &TranscriptTargetArgs,
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    measure: Option<TokenCounter>,
    planner: &PlannerAt,
) -> Result<Exit> {
    let mut problems = Problems::default();
    let resolved = transcript_targets::resolve_with_rows(targets, &mut problems)?;
    // Directories reached through a symlink are resolved once, here (see `resolved`).
    let resolved_dirs = super::resolved::of_targets(&resolved.targets);
    super::resolved::announce(&resolved_dirs, mode.enforce, mode.quiet);
    let opts = Options {
        mode: if mode.enforce {
            Mode::Enforce
        } else {
            Mode::Preview
        },
        wait_lock: mode.wait_lock,
        measure,
    };
    let files = run_files(&resolved.targets, mode, labels, opts, planner)?;
    for line in files.unsynced {
        problems.add(Exit::Error, line);
    }
    // The skipped entries (often most of a big store's) come after the files, without a
    // second copy of them: their list has room for every entry of the stores.
    let mut results = resolved.skipped;
    results.splice(0..0, files.outcomes);
    if !resolved.databases.is_empty() {
        let session = targets
            .session
            .as_deref()
            .map(crate::keys::SessionSelector::new);
        let (db_results, matched) = super::transcripts_db::run(
            &resolved.databases,
            session.as_ref(),
            opts,
            planner,
            &mut problems,
        );
        results.extend(db_results);
        if let Some(sel) = &session
            && !matched
            && !resolved.matched_session
        {
            problems.add(Exit::Error, transcript_targets::unknown_session(sel));
        }
    }
    report(mode, labels, count, &results, &resolved_dirs, problems)
}

/// The most files, and bytes of originals, that one batch of an `--enforce` run stages before
/// it makes them durable and puts them in place. Each staged file holds its lock, its
/// original and its temp file until the batch finishes: these bound how long a lock is held
/// and how many files are open at once.
const BATCH_FILES: usize = 128;
const BATCH_BYTES: u64 = 256 << 20;

/// The targets of each batch, in order: at most [`BATCH_FILES`] files, and at most
/// [`BATCH_BYTES`] unless one file alone is larger.
fn batches(sizes: &[u64]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && (i - start == BATCH_FILES || bytes + size > BATCH_BYTES) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// Run the job on every transcript file, in parallel, with progress in bytes (see
/// `crate::progress`); each outcome with its session key.
///
/// `--enforce` works in batches (see [`batches`]): every file of a batch is locked, rewritten
/// into a temp file and validated; then every temp is made durable; then each original is
/// checked once more and replaced; then each directory is synced once. A crash at any
/// moment leaves every file old or new, as a file-by-file run does, with one wait for the
/// disk per batch instead of one per file.
fn run_files(
    targets: &[transcript_targets::Target],
    mode: &ModeArgs,
    labels: &Labels,
    opts: Options,
    planner: &PlannerAt,
) -> Result<FileResults> {
    let size = |p: &Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
    let sizes: Vec<u64> = targets.iter().map(|t| size(&t.path)).collect();
    let total: u64 = sizes.iter().sum();
    let progress = Progress::bytes(
        total,
        labels.command,
        progress::wanted(mode.json, mode.quiet),
    );
    let dirs = dirs_of(targets);
    let stage = |t: &transcript_targets::Target, bytes: u64| -> Staging {
        let (sqlite, confined) = &dirs[t.dir.as_path()];
        let staging = match (sqlite, confined) {
            (Some(db), _) if opts.mode == Mode::Enforce => Staging::Done(Outcome::new(
                &t.path,
                Status::Refused(moved_to_sqlite(db).into()),
            )),
            (_, Ok(c)) => {
                let mut staging = job::stage_file_at(c, &t.path, opts, planner);
                if let Staging::Done(o) = &mut staging {
                    o.notes.extend(sqlite.as_deref().map(moved_to_sqlite));
                }
                staging
            }
            (_, Err(e)) => Staging::Done(Outcome::new(&t.path, Status::Failed(e.clone().into()))),
        };
        progress.inc(bytes);
        staging
    };
    let results = match opts.mode {
        Mode::Preview => FileResults {
            outcomes: targets
                .par_iter()
                .zip(&sizes)
                .map(|(t, bytes)| (stage(t, *bytes).finish_alone(), t.session_key.clone()))
                .collect(),
            unsynced: Vec::new(),
        },
        // A rewrite waits on the disk as much as it computes: with more files in flight than
        // cores, one file's writes overlap another's work.
        Mode::Enforce => {
            let pool = writer_pool(targets.len())?;
            let stage_batch = |range: std::ops::Range<usize>| -> Vec<Staging> {
                pool.install(|| {
                    targets[range.clone()]
                        .par_iter()
                        .zip(&sizes[range])
                        .map(|(t, bytes)| stage(t, *bytes))
                        .collect()
                })
            };
            // While one batch is made durable and put in place, the next one is staged: the
            // disk and the cores work at the same time, and at most two batches hold locks.
            std::thread::scope(|scope| {
                let mut done = FileResults::default();
                let mut committing: Option<std::thread::ScopedJoinHandle<_>> = None;
                for range in batches(&sizes) {
                    let staged = stage_batch(range.clone());
                    if let Some(previous) = committing.take() {
                        done.add(join(previous));
                    }
                    let (pool, dirs) = (&pool, &dirs);
                    committing = Some(scope.spawn(move || {
                        let batch = &targets[range];
                        let mut outcomes = pool.install(|| finish_batch(staged));
                        let unsynced = sync_dirs(dirs, batch, &mut outcomes);
                        let keys = batch.iter().map(|t| t.session_key.clone());
                        FileResults {
                            outcomes: outcomes.into_iter().zip(keys).collect(),
                            unsynced,
                        }
                    }));
                }
                if let Some(last) = committing {
                    done.add(join(last));
                }
                done
            })
        }
    };
    progress.finish();
    Ok(results)
}

/// What [`run_files`] gives: each outcome with its session key, and one line per directory
/// that could not be synced after files in it were replaced.
#[derive(Default)]
struct FileResults {
    outcomes: Vec<(Outcome, Option<String>)>,
    unsynced: Vec<String>,
}

impl FileResults {
    fn add(&mut self, batch: FileResults) {
        self.outcomes.extend(batch.outcomes);
        for line in batch.unsynced {
            if !self.unsynced.contains(&line) {
                self.unsynced.push(line);
            }
        }
    }
}

/// The result of a batch's commit thread (a panic there is re-raised here).
fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Make every staged temp of a batch durable (in parallel, on the writer threads), then put
/// each in place; the outcomes in the batch's order.
fn finish_batch(staged: Vec<Staging>) -> Vec<Outcome> {
    let synced: Vec<Synced> = staged.into_par_iter().map(Staging::make_durable).collect();
    synced.into_iter().map(Synced::finish).collect()
}

/// One directory fsync per directory where a batch replaced a file makes those renames
/// durable before the report says they happened. A directory that cannot be synced is a
/// problem of its own (one line each, returned), and each file replaced in it says so: its
/// new content is in place, but a power loss could bring back the old one. The other files
/// and directories are not affected.
fn sync_dirs(
    dirs: &HashMap<&Path, DirFacts>,
    batch: &[transcript_targets::Target],
    outcomes: &mut [Outcome],
) -> Vec<String> {
    let mut synced: HashMap<&Path, Option<String>> = HashMap::new();
    for (t, o) in batch.iter().zip(outcomes.iter_mut()) {
        if o.status != Status::Changed {
            continue;
        }
        let failed =
            synced
                .entry(t.dir.as_path())
                .or_insert_with(|| match &dirs[t.dir.as_path()] {
                    (_, Ok(c)) => c.sync().err().map(|e| {
                        format!(
                            "{e:#}: the files replaced in it could come back old after a power loss"
                        )
                    }),
                    (_, Err(_)) => None,
                });
        if failed.is_some() {
            o.notes.push(
                "replaced, but its directory could not be synced: a power loss could bring \
                 the old file back"
                    .to_owned(),
            );
        }
    }
    let mut lines: Vec<String> = synced.into_values().flatten().collect();
    lines.sort();
    lines
}

/// A transcripts directory's SQLite marker and confinement.
type DirFacts = (Option<PathBuf>, Result<Confined, String>);

/// The SQLite check and the confinement of each directory, resolved once per directory
/// rather than once per transcript (most targets share one sessions directory).
fn dirs_of(targets: &[transcript_targets::Target]) -> HashMap<&Path, DirFacts> {
    let mut dirs: HashMap<&Path, DirFacts> = HashMap::new();
    for t in targets {
        dirs.entry(t.dir.as_path()).or_insert_with(|| {
            (
                crate::targets::sqlite_marker_of_dir(&t.dir),
                Confined::new(&t.dir)
                    .map(Confined::deferring_dir_sync)
                    .map_err(|e| format!("{e:#}")),
            )
        });
    }
    dirs
}

/// Print the report of a run (table, or `--json`), then every problem on stderr (one line
/// per store or file), and return the run's exit code. A run that found nothing to work on
/// because of its problems (a store that does not exist, an unknown `--session`) prints only
/// the problems. Directories reached through a symlink (`resolved_dirs`) get a note line.
pub fn report(
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    results: &[(Outcome, Option<String>)],
    resolved_dirs: &[ResolvedDir],
    mut problems: Problems,
) -> Result<Exit> {
    if results.is_empty() && problems.exit() != Exit::Success {
        return Ok(problems.finish(Exit::Success));
    }
    let mode_name = if mode.enforce {
        "enforce"
    } else if mode.dry_run {
        "dry-run"
    } else {
        "preview"
    };
    let rows: Vec<transcript_text::Row> = results
        .iter()
        .map(|(o, key)| (o, key.as_deref(), if done(o) { count(o) } else { 0 }))
        .collect();
    let extra_total = labels.extra.as_ref().map(|x| {
        let n: usize = results
            .iter()
            .filter(|(o, _)| done(o))
            .map(|(o, _)| (x.count)(o))
            .sum();
        (n, x.words)
    });
    let mut stdout = std::io::stdout().lock();
    if mode.json {
        let mut sink = IoSink::new(&mut stdout);
        write_json_report(&mut sink, labels, mode_name, &rows, resolved_dirs);
        sink.push('\n');
        sink.finish()?;
    } else {
        let mut out = String::new();
        transcript_text::render(
            &mut out,
            labels.command,
            mode_name,
            labels.count_header,
            extra_total,
            &rows,
            mode.verbose,
        );
        if mode_name == "preview" && results.iter().any(|(o, _)| o.status == Status::WouldChange) {
            transcript_text::write_indented(
                &mut out,
                "",
                "Nothing was written. Run again with --enforce to apply (or --dry-run to preview quietly).",
            );
        }
        super::resolved::text(&mut out, resolved_dirs, mode.enforce);
        stdout.write_all(out.as_bytes())?;
    }
    stdout.flush()?;
    file_problems(results, &mut problems);
    Ok(problems.finish(Exit::Success))
}

/// One line per transcript that ended in a problem. A damaged one is a warning; a refused one
/// (unsafe to rewrite, a rewrite that failed validation, or one another writer changed
/// meanwhile) fails the run with exit 3, though the others were written: a run left to cron
/// must not end in success while a transcript it was asked to fix was left as it was.
fn file_problems(results: &[(Outcome, Option<String>)], problems: &mut Problems) {
    for (o, _) in results {
        let path = o.path.display();
        match &o.status {
            Status::Damaged(r) => problems.warn(format!("{path}: skipped, damaged: {r}")),
            Status::Refused(r) => problems.add(
                Exit::Refused,
                format!("{path}: refused, left as it is: {r}"),
            ),
            Status::Locked(r) => {
                problems.add(Exit::Locked, format!("{path}: skipped, in use: {r}"))
            }
            Status::Failed(r) => problems.add(Exit::Error, format!("{path}: failed: {r}")),
            _ => {}
        }
    }
}

/// The `--json` report, written to `out` row by row (a store of many entries has as many
/// rows; see `crate::jsonout`).
fn write_json_report<S: crate::jsjson::Sink>(
    out: &mut S,
    labels: &Labels,
    mode: &str,
    rows: &[transcript_text::Row],
    resolved_dirs: &[ResolvedDir],
) {
    let mut p = Pretty::new(out);
    p.begin_object();
    p.member("command", &json!(labels.command));
    p.member("mode", &json!(mode));
    p.key("transcripts");
    p.begin_array();
    for row in rows {
        p.value(&file_json(labels, row));
    }
    p.end();
    p.member("totals", &totals_json(labels, rows));
    p.member("resolvedDirs", &super::resolved::json(resolved_dirs));
    p.end();
}

fn totals_json(labels: &Labels, rows: &[transcript_text::Row]) -> Value {
    let t = Totals::of(rows);
    let mut totals = Map::new();
    totals.insert("transcripts".into(), json!(t.files));
    for (status, n) in &t.by_status {
        totals.insert((*status).into(), json!(n));
    }
    totals.insert(labels.count_key.into(), json!(t.count));
    if let Some(x) = &labels.extra {
        let n: usize = rows
            .iter()
            .filter(|(o, _, _)| done(o))
            .map(|(o, _, _)| (x.count)(o))
            .sum();
        totals.insert(x.key.into(), json!(n));
    }
    totals.insert("bytesBefore".into(), json!(t.bytes_before));
    totals.insert("bytesAfter".into(), json!(t.bytes_after));
    totals.insert("unparsableLines".into(), json!(t.unparsable_lines));
    totals.insert("bytesFreed".into(), json!(t.freed));
    totals.insert("bytesFreedLater".into(), json!(t.freed_later));
    Value::Object(totals)
}

fn file_json(labels: &Labels, (o, key, n): &transcript_text::Row) -> Value {
    let (status, reason) = status_name(&o.status);
    let mut f = Map::new();
    f.insert("path".into(), json!(o.path.display().to_string()));
    f.insert(
        "sessionKey".into(),
        key.map_or(Value::Null, |k| Value::String(k.to_owned())),
    );
    f.insert("status".into(), json!(status));
    f.insert("reason".into(), reason.map_or(Value::Null, |r| json!(r)));
    f.insert(labels.count_key.into(), json!(n));
    if let Some(x) = &labels.extra {
        let n = if done(o) { (x.count)(o) } else { 0 };
        f.insert(x.key.into(), json!(n));
    }
    f.insert("bytesBefore".into(), json!(o.bytes_before));
    f.insert("bytesAfter".into(), json!(o.bytes_after));
    f.insert("unparsableLines".into(), json!(o.unparsable_lines));
    f.insert("notes".into(), json!(o.notes));
    if let Some(d) = &o.details {
        f.insert("details".into(), (**d).clone());
    }
    Value::Object(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store of many entries whose transcripts are gone: one row each.
    fn skipped_rows(n: usize) -> Vec<(Outcome, Option<String>)> {
        (0..n)
            .map(|i| {
                let path = format!(
                    "/state/agents/main/sessions/{i:08x}-0000-4000-8000-000000000000.jsonl"
                );
                let o = Outcome::new(Path::new(&path), Status::Skipped(job::NO_FILE.into()));
                (o, Some(format!("agent:main:cron:{i:08x}:run:{i}")))
            })
            .collect()
    }

    #[test]
    fn the_json_report_is_written_row_by_row() {
        let labels = Labels {
            command: "strip-images",
            count_key: "imagesReplaced",
            count_header: "images",
            extra: Some(Extra {
                key: "mediaReferencesReplaced",
                words: "media references",
                count: |o| o.media_refs_replaced,
            }),
        };
        let results = skipped_rows(20_000);
        let rows: Vec<transcript_text::Row> =
            results.iter().map(|(o, k)| (o, k.as_deref(), 0)).collect();
        let ((), streamed) = crate::testalloc::peak_during(|| {
            let mut sink = IoSink::new(std::io::sink());
            write_json_report(&mut sink, &labels, "dry-run", &rows, &[]);
            sink.finish().unwrap();
        });
        // The text is the whole document's, as one `Value` would print it.
        let mut text = String::new();
        write_json_report(&mut text, &labels, "dry-run", &rows, &[]);
        let (doc, whole) = crate::testalloc::peak_during(|| {
            let files: Vec<Value> = rows.iter().map(|r| file_json(&labels, r)).collect();
            let mut doc = Map::new();
            doc.insert("command".into(), json!("strip-images"));
            doc.insert("mode".into(), json!("dry-run"));
            doc.insert("transcripts".into(), Value::Array(files));
            doc.insert("totals".into(), totals_json(&labels, &rows));
            doc.insert("resolvedDirs".into(), super::super::resolved::json(&[]));
            Value::Object(doc)
        });
        assert_eq!(text, crate::jsjson::to_string_pretty(&doc));
        // Building it whole takes about 1.5 KB a row; streamed, a row at a time.
        assert!(whole > 20_000 * 1000, "{whole}");
        assert!(streamed < 256 << 10, "{streamed} bytes held while writing");
    }

    #[test]
    fn the_total_line_counts_skipped_files_and_unparsable_lines() {
        let total = |results: &[(Outcome, Option<String>)]| {
            let rows: Vec<crate::report::transcript_text::Row> = results
                .iter()
                .map(|(o, k)| (o, k.as_deref(), o.entries_removed))
                .collect();
            let mut out = String::new();
            crate::report::transcript_text::render(
                &mut out,
                "prune-noreply",
                "dry run",
                "removed",
                None,
                &rows,
                true,
            );
            let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
            flat[flat.find("Total:").unwrap()..].trim_end().to_owned()
        };
        let mut a = Outcome::new(Path::new("a"), Status::Changed);
        a.entries_removed = 3;
        a.bytes_before = 4096;
        a.bytes_after = 1024;
        a.unparsable_lines = vec![2, 9].into();
        let mut b = Outcome::new(Path::new("b"), Status::Skipped("gone".into()));
        b.unparsable_lines = vec![1].into();
        let c = Outcome::new(Path::new("c"), Status::Locked("pid 1".into()));
        let results = vec![(a, None), (b, None), (c, None)];
        assert_eq!(
            total(&results),
            "Total: 3 transcripts, 1 skipped, 1 locked, 3 removed, 4 KiB → 1 KiB (3 KiB freed), 3 unparsable lines kept"
        );
        let one = vec![(Outcome::new(Path::new("d"), Status::Unchanged), None)];
        assert_eq!(
            total(&one),
            "Total: 1 transcript, 0 skipped, 0 removed, 0 B → 0 B (0 B freed), 0 unparsable lines kept"
        );
    }
}
