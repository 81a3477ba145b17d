//! What the transcript commands share: running a planner over the target transcripts in
//! parallel (targets come from `transcript_targets`), and the report (human table or `--json`)
//! with the exit code.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use super::transcript_targets;
use crate::cli::{ModeArgs, TranscriptTargetArgs};
use crate::exit::Exit;
use crate::fsutil::Confined;
use crate::progress::{self, Progress};
use crate::report::transcript_text::{self, status_name};
use crate::transcript::estimate::TokenCounter;
use crate::transcript::job::{self, Mode, Options, Outcome, Planner, PlannerAt, Status};

pub(crate) fn moved_to_sqlite(db: &Path) -> String {
    format!(
        "this agent has moved to SQLite ({} exists): its JSONL transcripts are no longer the \
         live copy and clawkeeper does not write them",
        db.display()
    )
}

/// Parse `--wait-lock` (`500ms`, `30s`, `2m`, `1h`; a bare number is seconds).
pub fn parse_wait(s: &str) -> Result<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .with_context(|| format!("invalid duration {s:?} for --wait-lock"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => bail!("invalid duration unit {other:?} for --wait-lock (use ms, s, m or h)"),
    };
    if !secs.is_finite() || secs < 0.0 {
        bail!("invalid duration {s:?} for --wait-lock");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// How a command labels its per-file count.
pub struct Labels {
    pub command: &'static str,
    /// JSON key of the count (`entriesRemoved`, `imagesReplaced`).
    pub count_key: &'static str,
    /// Table header of the count.
    pub count_header: &'static str,
}

/// The threads that rewrite files: four per core, at most 16 (each holds one file's index).
pub(crate) fn writer_pool() -> Result<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads((4 * cores).min(16))
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

/// [`run`] with a planner that reads the file itself, and whose index carries token figures
/// measured with `measure` when given.
pub fn run_at(
    targets: &TranscriptTargetArgs,
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    measure: Option<TokenCounter>,
    planner: &PlannerAt,
) -> Result<Exit> {
    let resolved = transcript_targets::resolve(targets)?;
    let opts = Options {
        mode: if mode.enforce {
            Mode::Enforce
        } else {
            Mode::Preview
        },
        wait_lock: mode.wait_lock.as_deref().map(parse_wait).transpose()?,
        measure,
    };
    // Progress in bytes of transcripts (see `crate::progress`).
    let size = |p: &Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
    let sizes: Vec<u64> = resolved.targets.iter().map(|t| size(&t.path)).collect();
    let total: u64 = sizes.iter().sum();
    let progress = Progress::bytes(
        total,
        labels.command,
        progress::wanted(mode.json, mode.quiet),
    );
    // The SQLite check and the confinement of each directory, resolved once per directory
    // rather than once per transcript (most targets share one sessions directory).
    let mut dirs: HashMap<&Path, (Option<PathBuf>, Result<Confined, String>)> = HashMap::new();
    for t in &resolved.targets {
        dirs.entry(t.dir.as_path()).or_insert_with(|| {
            (
                crate::targets::sqlite_marker_of_dir(&t.dir),
                Confined::new(&t.dir)
                    .map(Confined::deferring_dir_sync)
                    .map_err(|e| format!("{e:#}")),
            )
        });
    }
    let process = || -> Vec<(Outcome, Option<String>)> {
        resolved
            .targets
            .par_iter()
            .zip(&sizes)
            .map(|(t, bytes)| {
                let (sqlite, confined) = &dirs[t.dir.as_path()];
                let outcome = match (sqlite, confined) {
                    (Some(db), _) if opts.mode == Mode::Enforce => {
                        Outcome::new(&t.path, Status::Refused(moved_to_sqlite(db)))
                    }
                    (_, Ok(c)) => {
                        let mut o = job::run_file_at(c, &t.path, opts, planner);
                        o.notes.extend(sqlite.as_deref().map(moved_to_sqlite));
                        o
                    }
                    (_, Err(e)) => Outcome::new(&t.path, Status::Failed(e.clone())),
                };
                progress.inc(*bytes);
                (outcome, t.session_key.clone())
            })
            .collect()
    };
    // A rewrite waits on the disk (its fsync) as much as it computes: with more files in
    // flight than cores, one file's fsync overlaps another's work. Previews only compute.
    let mut results = match opts.mode {
        Mode::Enforce => writer_pool()?.install(process),
        Mode::Preview => process(),
    };
    progress.finish();
    // One directory fsync per directory makes every rename of the run durable before the
    // report says it happened.
    if opts.mode == Mode::Enforce {
        for (_, confined) in dirs.values() {
            if let Ok(c) = confined {
                c.sync()?;
            }
        }
    }
    results.extend(resolved.skipped);
    report(mode, labels, count, &results)
}

/// Print the report of a run (table, or `--json`) and return its exit code.
pub fn report(
    mode: &ModeArgs,
    labels: &Labels,
    count: fn(&Outcome) -> usize,
    results: &[(Outcome, Option<String>)],
) -> Result<Exit> {
    let mode_name = if mode.enforce {
        "enforce"
    } else if mode.dry_run {
        "dry-run"
    } else {
        "preview"
    };
    let mut stdout = std::io::stdout().lock();
    if mode.json {
        let doc = json_report(labels, mode_name, count, results);
        writeln!(stdout, "{}", crate::jsjson::to_string_pretty(&doc))?;
    } else {
        let rows: Vec<transcript_text::Row> = results
            .iter()
            .map(|(o, key)| (o, key.as_deref(), count(o)))
            .collect();
        let mut out = String::new();
        transcript_text::render(
            &mut out,
            labels.command,
            mode_name,
            labels.count_header,
            &rows,
        );
        if mode_name == "preview" && results.iter().any(|(o, _)| o.status == Status::WouldChange) {
            transcript_text::write_indented(
                &mut out,
                "",
                "Nothing was written. Run again with --enforce to apply (or --dry-run to preview quietly).",
            );
        }
        stdout.write_all(out.as_bytes())?;
    }
    stdout.flush()?;
    Ok(results
        .iter()
        .fold(Exit::Success, |acc, (o, _)| acc.worst(exit_of(&o.status))))
}

fn exit_of(s: &Status) -> Exit {
    match s {
        Status::Locked(_) => Exit::Locked,
        Status::Refused(_) => Exit::Refused,
        Status::Failed(_) => Exit::Error,
        _ => Exit::Success,
    }
}

fn json_report(
    labels: &Labels,
    mode: &str,
    count: fn(&Outcome) -> usize,
    results: &[(Outcome, Option<String>)],
) -> Value {
    let mut files = Vec::new();
    let mut totals = Map::new();
    let mut add = |k: &str, n: u64| {
        let cur = totals.get(k).and_then(Value::as_u64).unwrap_or(0);
        totals.insert(k.to_owned(), Value::from(cur + n));
    };
    add("transcripts", results.len() as u64);
    for (o, key) in results {
        let (status, reason) = status_name(&o.status);
        add(status, 1);
        add(labels.count_key, count(o) as u64);
        add("bytesBefore", o.bytes_before);
        add("bytesAfter", o.bytes_after);
        add("unparsableLines", o.unparsable_lines.len() as u64);
        let mut f = Map::new();
        f.insert("path".into(), json!(o.path.display().to_string()));
        f.insert(
            "sessionKey".into(),
            key.clone().map_or(Value::Null, Value::String),
        );
        f.insert("status".into(), json!(status));
        f.insert("reason".into(), reason.map_or(Value::Null, |r| json!(r)));
        f.insert(labels.count_key.into(), json!(count(o)));
        f.insert("bytesBefore".into(), json!(o.bytes_before));
        f.insert("bytesAfter".into(), json!(o.bytes_after));
        f.insert("unparsableLines".into(), json!(o.unparsable_lines));
        f.insert("notes".into(), json!(o.notes));
        if let Some(d) = &o.details {
            f.insert("details".into(), d.clone());
        }
        files.push(Value::Object(f));
    }
    let before = totals
        .get("bytesBefore")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let after = totals
        .get("bytesAfter")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    totals.insert("bytesFreed".into(), json!(before.saturating_sub(after)));
    let mut doc = Map::new();
    doc.insert("command".into(), json!(labels.command));
    doc.insert("mode".into(), json!(mode));
    doc.insert("transcripts".into(), Value::Array(files));
    doc.insert("totals".into(), Value::Object(totals));
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                &rows,
            );
            let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
            flat[flat.find("Total:").unwrap()..].trim_end().to_owned()
        };
        let mut a = Outcome::new(Path::new("a"), Status::Changed);
        a.entries_removed = 3;
        a.bytes_before = 4096;
        a.bytes_after = 1024;
        a.unparsable_lines = vec![2, 9];
        let mut b = Outcome::new(Path::new("b"), Status::Skipped("gone".into()));
        b.unparsable_lines = vec![1];
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

    #[test]
    fn wait_durations() {
        assert_eq!(parse_wait("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_wait("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_wait("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_wait("5").unwrap(), Duration::from_secs(5));
        assert!(parse_wait("soon").is_err());
        assert!(parse_wait("3d").is_err());
    }
}
