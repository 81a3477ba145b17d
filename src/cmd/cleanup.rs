//! `clawkeeper cleanup`: resolve targets and maintenance settings, preview every store, then
//! print the plan (`--dry-run`) or apply it, as `openclaw sessions cleanup` does.
//!
//! A target whose agent moved to SQLite (its database exists, or `--store` names a `.sqlite`)
//! goes to the database cleanup instead (`cleanup_db`, `agentdb::cleanup`); its sessions.json,
//! if one is left, is never written. Both kinds of target share one run, one report and one
//! exit code.
//!
//! Safety on top of the reference: unparsable stores are refused (exit 3), and `--max-delete`
//! refuses (exit 5) a plan that removes too many entries. All refusals happen before anything
//! is written.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::cleanup_db;
use super::problems::Problems;
use super::resolved;
use crate::agentdb::cleanup as dbc;
use crate::cli::CleanupArgs;
use crate::config::{Config, Env};
use crate::exit::{Exit, Refusal};
use crate::fsutil::Confined;
use crate::fsutil::lock;
use crate::jsjson::Sink as _;
use crate::jsonout::IoSink;
use crate::maintenance::before::Removal;
use crate::maintenance::files;
use crate::maintenance::log::{Level, LogLine};
use crate::maintenance::predict::{self, Prediction};
use crate::maintenance::run::{self, Options, Preview};
use crate::maintenance::summary::Summary;
use crate::progress::{self, Progress};
use crate::report::{cleanup_text, dbcleanup_text, text};
use crate::store;
use crate::targets::{self, Target};

pub fn run(args: &CleanupArgs) -> Result<Exit> {
    let mut run = Run::new(args)?;
    let previews = run.plan();
    run.plan_databases();
    if args.mode.dry_run {
        run.preview(previews)
    } else {
        run.apply(previews)
    }
}

/// One cleanup run over its target stores: the steps are [`Run::plan`], then
/// [`Run::preview`] or [`Run::apply`]; each records the problems of single stores and goes on
/// with the others.
struct Run<'a> {
    args: &'a CleanupArgs,
    cfg: Config,
    opts: Options,
    max_delete: Option<MaxDelete>,
    targets: Vec<Target>,
    /// Each target's sessions directory, resolved and held once (`None`: it does not exist).
    held: Vec<Option<Confined>>,
    resolved_dirs: Vec<resolved::ResolvedDir>,
    /// A `--json` word is somewhere on the command line (see [`Run::new`]).
    json_on_command_line: bool,
    progress: Progress,
    problems: Problems,
    env: crate::config::Env,
    /// Each target's agent database, when its agent moved to SQLite (the target then goes to
    /// the SQLite-era cleanup).
    dbs: Vec<Option<dbc::Target>>,
    db_opts: dbc::Options,
    /// The plans of the database targets, by target index.
    db_previews: Vec<(usize, dbc::Preview)>,
}

impl<'a> Run<'a> {
    fn new(args: &'a CleanupArgs) -> Result<Run<'a>> {
        let mut problems = Problems::default();
        let (cfg, env, targets) = super::resolve_targets(&args.target, &mut problems)?;
        let (opts, max_delete) = options(args, &cfg, &env)?;
        let db_opts = cleanup_db::options(&args.plan, args.mode.enforce, args.mode.dry_run, &cfg)?;
        let dbs: Vec<Option<dbc::Target>> = targets.iter().map(cleanup_db::db_target).collect();
        // Each sessions directory is resolved once, here: one reached through a symlink is
        // noted, and the apply works in (and only in) the directory it led to now.
        let dirs: Vec<std::path::PathBuf> = targets
            .iter()
            .map(|t| run::sessions_dir_of(&t.store_path))
            .collect();
        let resolved_dirs = resolved::collect(dirs.iter().map(|d| d.as_path()));
        let held = dirs
            .iter()
            .map(|d| d.is_dir().then(|| Confined::new(d).ok()).flatten())
            .collect();
        let run = Run {
            args,
            cfg,
            opts,
            max_delete,
            targets,
            held,
            resolved_dirs,
            // OpenClaw sends all console output to stderr whenever a `--json` word is on its
            // command line, even as the value of another option (`--active-key --json`), so
            // that stdout holds only JSON. The human report then goes to stderr too.
            json_on_command_line: std::env::args_os()
                .skip(1)
                .any(|a| a == "--json" || a.to_string_lossy().starts_with("--json=")),
            // A spinner on stderr while stores are planned and applied (terminal only, never
            // with --json or --quiet); the report is OpenClaw's text, on stdout afterwards.
            progress: Progress::spinner(
                "cleanup",
                progress::wanted(args.mode.json, args.mode.quiet),
            ),
            problems,
            env,
            dbs,
            db_opts,
            db_previews: Vec::new(),
        };
        for r in &run.resolved_dirs {
            run.note(r.note(!args.mode.dry_run));
        }
        Ok(run)
    }

    /// A note of clawkeeper's own on stderr, unless `--quiet`.
    fn note(&self, line: String) {
        if !self.args.mode.quiet {
            self.progress
                .suspend(|| eprintln!("clawkeeper: note: {line}"));
        }
    }

    /// Plan every store (by target index); a store that cannot be planned, or that
    /// `--enforce` refuses outright, is a problem of its own.
    fn plan(&mut self) -> Vec<(usize, Preview)> {
        let mut previews = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            if self.dbs[i].is_some() {
                continue;
            }
            if let Some(refusal) = refusal(t) {
                if !self.args.mode.dry_run {
                    self.problems.error(&refusal.into());
                    continue;
                }
                self.note(format!("{refusal}; --enforce would refuse this store"));
            }
            self.progress
                .message(&format!("planning {}", t.store_path.display()));
            match run::preview(&t.agent_id, &t.store_path, &self.opts) {
                Ok(p) => previews.push((i, p)),
                Err(e) => self.problems.error(&e),
            }
        }
        previews
    }

    /// Plan every database target (read-only).
    fn plan_databases(&mut self) {
        for (i, t) in self.targets.iter().enumerate() {
            let Some(db) = &self.dbs[i] else { continue };
            if cleanup_db::half_migrated(t) {
                self.note(format!(
                    "{} and {} both exist (a migration to SQLite that did not finish): the \
                     database is the live store and is the one cleaned; sessions.json is left \
                     as it is",
                    t.store_path.display(),
                    db.db.display()
                ));
            }
            self.progress
                .message(&format!("planning {}", db.db.display()));
            match dbc::preview(db, &self.db_opts) {
                Ok(p) => {
                    if let (true, Some(why)) = (self.args.mode.dry_run, p.schema.write_refusal()) {
                        self.note(format!(
                            "{}: {why}; --enforce would refuse this store",
                            db.db.display()
                        ));
                    }
                    self.db_previews.push((i, p))
                }
                Err(e) => self.problems.error(&e),
            }
        }
    }

    /// `--dry-run`: print the plans, and say what the apply would refuse or skip, so that a
    /// preview never promises more than the apply does.
    fn preview(mut self, previews: Vec<(usize, Preview)>) -> Result<Exit> {
        for (i, p) in &previews {
            let t = &self.targets[*i];
            match locked_transcript(t, p, lock::lock_names_seen) {
                Ok(Some(why)) => self.note(format!(
                    "{}: {why}; --enforce would skip this store while the lock is held",
                    t.store_path.display()
                )),
                Ok(None) => {}
                Err(e) => self.problems.error(&e),
            }
            if let Some(limit) = &self.max_delete {
                match predict::predict(&t.agent_id, &t.store_path, &self.opts) {
                    Ok(predicted) => {
                        if let Some(over) = limit.exceeded_by(&t.store_path, &predicted) {
                            self.note(format!("{over}; --enforce would refuse this store"));
                        }
                    }
                    Err(e) => self.problems.error(&e.context(format!(
                        "cannot check --max-delete for {}",
                        t.store_path.display()
                    ))),
                }
            }
        }
        self.progress.finish();
        if self.args.mode.json {
            let mut docs: Vec<(usize, serde_json::Value)> = previews
                .iter()
                .map(|(i, p)| {
                    (
                        *i,
                        with_resolved(p.summary.to_json(), &p.summary, &self.resolved_dirs),
                    )
                })
                .chain(
                    self.db_previews
                        .iter()
                        .map(|(i, p)| (*i, p.summary.to_json())),
                )
                .collect();
            docs.sort_by_key(|d| d.0);
            let out = json_doc(
                &self.opts.flags.mode,
                true,
                docs.into_iter().map(|d| d.1).collect(),
            );
            self.print(&out)?;
        } else {
            // Written as they are rendered: a plan of a large store is megabytes of text.
            self.print_plans(&previews)?;
        }
        // The plans (whole copies of every store) are freed here: `maintain` goes on to its
        // next step in the same process.
        drop(previews);
        Ok(self.problems.finish(Exit::Success))
    }

    /// `--enforce` (or the configured mode): apply every store that passes the lock and
    /// `--max-delete` checks, then print what was applied.
    fn apply(mut self, previews: Vec<(usize, Preview)>) -> Result<Exit> {
        let runnable = self.check_before_apply(previews)?;
        let mut applied = Vec::new();
        let console = ConsoleLog::new(&self.cfg, self.json_on_command_line);
        for (i, stamp) in &runnable {
            let t = &self.targets[*i];
            let dir = run::sessions_dir_of(&t.store_path);
            if !dir.is_dir() {
                self.note(format!(
                    "{} does not exist; nothing was created or written",
                    dir.display()
                ));
            }
            self.progress
                .message(&format!("cleaning {}", t.store_path.display()));
            let held = self.held[*i].as_ref();
            match run::apply(&t.agent_id, &t.store_path, &self.opts, Some(*stamp), held) {
                Ok(summary) => {
                    self.progress.suspend(|| console.write(&summary.logs))?;
                    for (file, holder) in &summary.left_in_use {
                        self.problems.add(
                            Exit::Locked,
                            format!(
                                "{}: {} was not archived: it was locked after the plan was \
                                 checked ({holder}); its entry is removed from the store and \
                                 the file stays where it is, unreferenced, for a later cleanup",
                                t.store_path.display(),
                                file.display()
                            ),
                        );
                    }
                    applied.push(summary);
                }
                Err(e) => self.problems.error(&e),
            }
        }
        let db_applied = self.apply_databases();
        self.progress.finish();
        if applied.is_empty() && db_applied.is_empty() && !self.problems.is_empty() {
            return Ok(self.problems.finish(Exit::Success));
        }
        let mut out = String::new();
        if self.args.mode.json {
            if db_applied.is_empty() {
                out = self.json(applied.iter(), false);
            } else {
                let mut docs: Vec<(String, serde_json::Value)> = applied
                    .iter()
                    .map(|s| {
                        (
                            s.agent_id.clone(),
                            with_resolved(s.to_json(), s, &self.resolved_dirs),
                        )
                    })
                    .collect();
                docs.extend(
                    db_applied
                        .iter()
                        .map(|(_, s)| (s.agent_id.clone(), s.to_json())),
                );
                let order = |agent: &str| self.targets.iter().position(|t| t.agent_id == agent);
                docs.sort_by_key(|d| order(&d.0));
                out = json_doc(
                    &self.opts.flags.mode,
                    false,
                    docs.into_iter().map(|d| d.1).collect(),
                );
            }
        } else if db_applied.is_empty() {
            cleanup_text::render_applied(&mut out, &applied.iter().collect::<Vec<_>>());
            resolved::text(&mut out, &self.resolved_dirs, true);
        } else {
            let mut lines: Vec<(Option<usize>, &Summary)> = applied
                .iter()
                .map(|s| {
                    (
                        self.targets.iter().position(|t| t.agent_id == s.agent_id),
                        s,
                    )
                })
                .collect();
            lines.extend(db_applied.iter().map(|(i, s)| (Some(*i), &s.base)));
            lines.sort_by_key(|l| l.0);
            let lines: Vec<&Summary> = lines.into_iter().map(|l| l.1).collect();
            cleanup_text::render_applied(&mut out, &lines);
            resolved::text(&mut out, &self.resolved_dirs, true);
        }
        self.print(&out)?;
        Ok(self.problems.finish(Exit::Success))
    }

    /// Apply every planned database (guarded; see `cleanup_db::apply_one`).
    fn apply_databases(&mut self) -> Vec<(usize, dbc::Summary)> {
        let wait = self.args.mode.wait_lock.unwrap_or_default();
        let previews = std::mem::take(&mut self.db_previews);
        let mut out = Vec::new();
        for (i, p) in &previews {
            let Some(db) = self.dbs[*i].clone() else {
                continue;
            };
            if let Some(limit) = &self.max_delete {
                let predicted = Prediction {
                    entries_before: p.summary.before_count,
                    entries_removed: p.summary.before_count - p.summary.after_count,
                    ..Default::default()
                };
                if let Some(over) = limit.exceeded_by(&db.db, &predicted) {
                    self.problems.error(
                        &Refusal::OverMaxDelete(format!("{over}; nothing was changed")).into(),
                    );
                    continue;
                }
            }
            self.progress
                .message(&format!("cleaning {}", db.db.display()));
            match cleanup_db::apply_one(&db, &self.env, &self.db_opts, p, wait) {
                Ok(s) => {
                    for key in &s.changed_meanwhile {
                        self.problems.warn(format!(
                            "{}: the entry {key} was not removed: another connection changed \
                             it after the plan, so it is left as it is for a later cleanup",
                            db.db.display()
                        ));
                    }
                    out.push((*i, s))
                }
                Err(e) => self.problems.error(&e),
            }
        }
        out
    }

    /// The stores that may be applied: a store whose plan removes a transcript that a live
    /// process has locked is left alone entirely (after waiting up to `--wait-lock`), and one
    /// whose apply would remove more than `--max-delete` allows is refused; each is a problem
    /// of its own. Each comes with the stamp its preview saw; the rest of the preview, which
    /// holds the store, is dropped here.
    fn check_before_apply(
        &mut self,
        previews: Vec<(usize, Preview)>,
    ) -> Result<Vec<(usize, Option<crate::store::Stamp>)>> {
        let deadline = self
            .args
            .mode
            .wait_lock
            .map(|w| std::time::Instant::now() + w);
        let mut runnable = Vec::new();
        for (i, p) in previews {
            let t = &self.targets[i];
            // A lock that cannot even be read is a problem of this store alone.
            let mut held = locked_transcript(t, &p, lock::lock_names);
            if matches!(held, Ok(Some(_))) && deadline.is_some() {
                self.progress
                    .message(&format!("waiting for a lock in {}", t.store_path.display()));
            }
            while matches!(held, Ok(Some(_)))
                && deadline.is_some_and(|d| std::time::Instant::now() < d)
            {
                std::thread::sleep(lock::RETRY);
                held = locked_transcript(t, &p, lock::lock_names);
            }
            let held = match held {
                Ok(held) => held,
                Err(e) => {
                    self.problems.error(&e);
                    continue;
                }
            };
            if let Some(why) = held {
                self.problems.add(
                    Exit::Locked,
                    format!(
                        "skipped {}: {why}; nothing in this store was changed",
                        t.store_path.display()
                    ),
                );
                continue;
            }
            if let Some(limit) = &self.max_delete {
                self.progress
                    .message(&format!("measuring {}", t.store_path.display()));
                let over = match predict::predict(&t.agent_id, &t.store_path, &self.opts) {
                    Ok(predicted) => limit.exceeded_by(&t.store_path, &predicted),
                    Err(e) => {
                        self.problems.error(&e.context(format!(
                            "cannot check --max-delete for {}",
                            t.store_path.display()
                        )));
                        continue;
                    }
                };
                if let Some(over) = over {
                    self.problems.error(
                        &Refusal::OverMaxDelete(format!("{over}; nothing was changed")).into(),
                    );
                    continue;
                }
            }
            runnable.push((i, p.stamp));
        }
        Ok(runnable)
    }

    /// The text plans of every store, in target order, then the resolved directories: to
    /// stdout, or to stderr when a `--json` word is on the command line.
    fn print_plans(&self, previews: &[(usize, Preview)]) -> Result<()> {
        /// A plan of a `sessions.json` store, or of a SQLite-era agent database.
        enum Plan<'p> {
            JsonEra(&'p Preview),
            SqliteEra(&'p dbc::Preview),
        }
        let mut plans: Vec<(usize, Plan<'_>)> = (previews.iter())
            .map(|(i, p)| (*i, Plan::JsonEra(p)))
            .chain(
                self.db_previews
                    .iter()
                    .map(|(i, p)| (*i, Plan::SqliteEra(p))),
            )
            .collect();
        plans.sort_by_key(|p| p.0);
        let multi = plans.len() > 1;
        let out: Box<dyn Write> = match self.json_on_command_line {
            true => Box::new(std::io::stderr().lock()),
            false => Box::new(std::io::stdout().lock()),
        };
        let mut sink = IoSink::new(out);
        for (n, (_, plan)) in plans.iter().enumerate() {
            if n > 0 {
                sink.push('\n');
            }
            match plan {
                Plan::JsonEra(p) => cleanup_text::render_plan(&mut sink, &self.cfg, p, multi),
                Plan::SqliteEra(p) => dbcleanup_text::render_plan(&mut sink, &self.cfg, p, multi),
            }
        }
        let mut tail = String::new();
        resolved::text(&mut tail, &self.resolved_dirs, false);
        sink.push_str(&tail);
        sink.finish()?;
        Ok(())
    }

    /// The `--json` document of these summaries (one store: its summary; several: wrapped).
    fn json<'s>(&self, summaries: impl Iterator<Item = &'s Summary>, dry_run: bool) -> String {
        let docs: Vec<_> = summaries
            .map(|s| with_resolved(s.to_json(), s, &self.resolved_dirs))
            .collect();
        json_doc(&self.opts.flags.mode, dry_run, docs)
    }

    /// The report goes to stdout, or to stderr when a `--json` word is on the command line
    /// but the report is text (as OpenClaw does).
    fn print(&self, out: &str) -> Result<()> {
        print(out, self.json_on_command_line && !self.args.mode.json)?;
        Ok(())
    }
}

/// The maintenance options of this run (config, overrides, mode) and `--max-delete`.
fn options(args: &CleanupArgs, cfg: &Config, env: &Env) -> Result<(Options, Option<MaxDelete>)> {
    let max_delete = args
        .max_delete
        .as_deref()
        .map(parse_max_delete)
        .transpose()?;
    let mode = args
        .mode
        .enforce
        .then(|| serde_json::Value::String("enforce".into()));
    let opts = super::cleanup_options(&args.plan, cfg, env, mode, args.mode.dry_run)?;
    Ok((opts, max_delete))
}

/// Why `--enforce` refuses to write this store at all: it is a symlink, or (a database that
/// appeared after the targets were sorted) its agent moved to SQLite.
fn refusal(t: &Target) -> Option<Refusal> {
    let is_link =
        std::fs::symlink_metadata(&t.store_path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        return Some(Refusal::Unsafe(format!(
            "refusing to write {}: it is a symlink, and clawkeeper never writes through symlinks",
            t.store_path.display()
        )));
    }
    targets::sqlite_marker(&t.store_path).map(|marker| {
        Refusal::Unsafe(format!(
            "{}: agent {:?} has moved to SQLite ({} exists); its sessions.json is no longer the live store and clawkeeper will not write it",
            t.store_path.display(),
            t.agent_id,
            marker.display()
        ))
    })
}

/// Where the `sessions/store` log lines of an applied run go, as OpenClaw's console logger
/// sends them: lines below the console level (`$OPENCLAW_LOG_LEVEL`, else
/// `logging.consoleLevel`, else `info`) are dropped; warnings go to stderr, other lines to
/// stdout, or to stderr as well when `--json` is on the command line (stdout then holds only
/// the document).
/// Always the plain compact style: no colours, no timestamps.
struct ConsoleLog {
    level: Level,
    json: bool,
    /// An `OPENCLAW_LOG_LEVEL` that is not a level: noted once, with the first line logged.
    invalid_env: std::cell::Cell<Option<String>>,
}

impl ConsoleLog {
    fn new(cfg: &crate::config::Config, json: bool) -> ConsoleLog {
        let from_env = std::env::var("OPENCLAW_LOG_LEVEL")
            .ok()
            .map(|v| crate::js::js_trim(&v).to_string())
            .filter(|v| !v.is_empty());
        let env_level = from_env.as_deref().and_then(Level::parse);
        let configured = match cfg.get(&["logging", "consoleLevel"]) {
            Some(serde_json::Value::String(s)) => Level::parse(s),
            _ => None,
        };
        ConsoleLog {
            level: env_level.or(configured).unwrap_or(Level::Info),
            json,
            invalid_env: std::cell::Cell::new(from_env.filter(|_| env_level.is_none())),
        }
    }

    fn write(&self, lines: &[LogLine]) -> Result<()> {
        if !lines.is_empty()
            && let Some(v) = self.invalid_env.take()
        {
            eprintln!(
                "[openclaw] Ignoring invalid OPENCLAW_LOG_LEVEL=\"{v}\" (allowed: silent|fatal|error|warn|info|debug|trace)."
            );
        }
        for line in lines.iter().filter(|l| l.level >= self.level) {
            let text = format!("{}\n", line.console_text());
            if self.json || line.level >= Level::Warn {
                std::io::stderr().lock().write_all(text.as_bytes())?;
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.flush()?;
            }
        }
        Ok(())
    }
}

/// The first transcript of an entry the plan removes that a live process has locked, with the
/// lock files of the sessions directory listed by `listed` (a preview's may be its plan's).
fn locked_transcript(
    t: &Target,
    p: &Preview,
    listed: fn(&Confined) -> Option<std::collections::HashSet<std::ffi::OsString>>,
) -> Result<Option<String>> {
    let dir = run::sessions_dir_of(&t.store_path);
    let Ok(confined) = Confined::new(&dir) else {
        return Ok(None);
    };
    // (An entry pruned as missing has no transcript with messages to hold.)
    let mut keys: Vec<&String> = (p.before.removed_keys())
        .filter(|(why, _)| *why != Removal::Missing)
        .map(|(_, key)| key)
        .collect();
    keys.sort();
    keys.dedup();
    let listed_locks = listed(&confined);
    let real = store::paths::RealDir::new(&dir);
    let unlocked = |file: &Path| {
        let (Some(locks), Some(name)) = (&listed_locks, file.file_name()) else {
            return false;
        };
        let mut lock_name = name.to_owned();
        lock_name.push(".lock");
        file.parent() == Some(confined.root()) && !locks.contains(&lock_name)
    };
    for key in keys {
        let Some(file) = p
            .before
            .get(key)
            .and_then(|e| files::entry_transcript_canonical(e, &dir, real.as_ref()))
        else {
            continue;
        };
        if unlocked(&file) {
            continue;
        }
        // Transcripts may live in a subdirectory; their lock sits beside them.
        let Ok(here) = confined.for_parent_of(&file) else {
            continue;
        };
        if let Some(holder) = lock::live_holder(&here, &file)? {
            return Ok(Some(format!(
                "the plan removes {key:?}, whose transcript is in use ({holder})"
            )));
        }
    }
    Ok(None)
}

/// A store's JSON document, with `resolvedSessionsDir` (the real directory) when its sessions
/// directory was reached through a symlink (a field OpenClaw does not print).
fn with_resolved(
    mut doc: serde_json::Value,
    s: &Summary,
    resolved_dirs: &[resolved::ResolvedDir],
) -> serde_json::Value {
    let dir = run::sessions_dir_of(Path::new(&s.store_path));
    if let (Some(r), serde_json::Value::Object(m)) =
        (resolved_dirs.iter().find(|r| r.dir == dir), &mut doc)
    {
        m.insert(
            "resolvedSessionsDir".into(),
            serde_json::Value::String(r.real.display().to_string()),
        );
    }
    doc
}

fn json_doc(mode: &serde_json::Value, dry_run: bool, mut docs: Vec<serde_json::Value>) -> String {
    let v = if docs.len() == 1 {
        docs.remove(0)
    } else {
        let mut m = serde_json::Map::new();
        m.insert("allAgents".into(), serde_json::Value::Bool(true));
        m.insert("mode".into(), mode.clone());
        m.insert("dryRun".into(), serde_json::Value::Bool(dry_run));
        m.insert("stores".into(), serde_json::Value::Array(docs));
        serde_json::Value::Object(m)
    };
    let mut s = crate::jsjson::to_string_pretty(&v);
    s.push('\n');
    s
}

fn print(out: &str, to_stderr: bool) -> Result<Exit> {
    if to_stderr {
        std::io::stderr().lock().write_all(out.as_bytes())?;
        return Ok(Exit::Success);
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(Exit::Success)
}

/// `--max-delete N` or `--max-delete P%`.
#[derive(Debug, Clone)]
struct MaxDelete {
    text: String,
    count: Option<u64>,
    percent: Option<f64>,
}

impl MaxDelete {
    /// Why the apply of this store would exceed the limit, if it would. The limit bounds the
    /// store entries removed, the files removed for good (the apply's own deletions on a
    /// scratch mirror: archive retention, unreferenced artifacts, the disk budget; an archive
    /// rename keeps its file) and, for a percentage, the bytes of those files against every
    /// byte in the sessions directory.
    fn exceeded_by(&self, store: &Path, p: &Prediction) -> Option<String> {
        let mut over = Vec::new();
        if self.exceeded(p.entries_removed, p.entries_before) {
            over.push(format!(
                "{} of {} entries",
                p.entries_removed, p.entries_before
            ));
        }
        if self.exceeded(p.files_removed, p.files_before) {
            over.push(format!("{} of {} files", p.files_removed, p.files_before));
        }
        if self.percent.is_some() && self.exceeded(p.bytes_removed, p.disk_before) {
            over.push(format!(
                "{} of {}",
                text::size(p.bytes_removed),
                text::size(p.disk_before)
            ));
        }
        (!over.is_empty()).then(|| {
            format!(
                "refusing to clean {}: the plan removes {}, more than --max-delete {} allows",
                store.display(),
                over.join(" and "),
                self.text
            )
        })
    }

    fn exceeded(&self, removed: u64, total: u64) -> bool {
        match (self.count, self.percent) {
            (Some(n), _) => removed > n,
            (None, Some(p)) => total > 0 && (removed as f64) * 100.0 > p * total as f64,
            _ => false,
        }
    }
}

fn parse_max_delete(raw: &str) -> Result<MaxDelete> {
    let t = raw.trim();
    let bad = || {
        anyhow::Error::new(crate::exit::UsageError(format!(
            "invalid --max-delete {raw:?}: use a number (e.g. 50) or a percentage (e.g. 10%)"
        )))
    };
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(bad());
        }
        return Ok(MaxDelete {
            text: t.to_string(),
            count: None,
            percent: Some(p),
        });
    }
    let n: u64 = t.parse().map_err(|_| bad())?;
    Ok(MaxDelete {
        text: t.to_string(),
        count: Some(n),
        percent: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_delete_forms() {
        let m = parse_max_delete("10%").unwrap();
        assert!(m.exceeded(2, 10));
        assert!(!m.exceeded(1, 10));
        let m = parse_max_delete("3").unwrap();
        assert!(m.exceeded(4, 100));
        assert!(!m.exceeded(3, 100));
        assert!(parse_max_delete("x").is_err());
        assert!(parse_max_delete("120%").is_err());
    }
}
