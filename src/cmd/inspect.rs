//! `clawkeeper inspect`: resolve the stores, hand `inspect::inspect_store` the very planners
//! the commands use (with the flags given here), then print the tables or the JSON document.
//! Never writes to a store or its directory.

use std::path::Path;

use anyhow::Result;

use super::compact::{estimator_for, planner as compact_planner};
use super::problems::Problems;
use super::resolved::{self, ResolvedDir};
use super::transcript_targets::unknown_session;
use crate::cli::{InspectArgs, InspectSort};
use crate::compact::plan::Settings;
use crate::compact::{ContextEstimate, entry};
use crate::config::grammar::{parse_byte_size, parse_duration_ms};
use crate::exit::{Exit, UsageError};
use crate::inspect::{self, Filters, Hooks, StoreReport, Tick};
use crate::keys::SessionKind;
use crate::keys::SessionSelector;
use crate::maintenance::run::Options;
use crate::progress::{self, Progress};
use crate::report::inspect_json;
use crate::report::inspect_text::{self, Sort};
use crate::transcript::Index;
use crate::transcript::tree::Tree;
use crate::{images, noreply};

pub fn run(args: &InspectArgs) -> Result<Exit> {
    if let Some(file) = &args.targets.transcript {
        return run_transcript(args, file);
    }
    let mut problems = Problems::default();
    let (cfg, env, targets) = super::resolve_targets(&args.targets.target, &mut problems)?;
    let filters = filters_of(args)?;
    let cleanup = if args.no_cleanup {
        None
    } else {
        Some(super::cleanup_options(
            &args.plan,
            &cfg,
            &env,
            Some(serde_json::Value::String("enforce".into())),
            false,
        )?)
    };
    let dirs: Vec<std::path::PathBuf> = targets
        .iter()
        .map(|t| crate::maintenance::run::sessions_dir_of(&t.store_path))
        .collect();
    let resolved_dirs = resolved::collect(dirs.iter().map(|d| d.as_path()));
    resolved::announce(&resolved_dirs, false, args.quiet);
    let progress = Progress::bytes(0, "inspect", progress::wanted(args.json, args.quiet));
    let now_ms = crate::maintenance::now_ms();
    let cleanup_db = if args.no_cleanup {
        None
    } else {
        Some(super::cleanup_db::options(&args.plan, true, false, &cfg)?)
    };
    let reports = with_hooks(
        args,
        cleanup.as_ref(),
        cleanup_db.as_ref(),
        &progress,
        |hooks| {
            let mut reports: Vec<StoreReport> = Vec::new();
            for t in &targets {
                // A store that cannot be read is reported on stderr; the others are inspected.
                match inspect_target(t, &filters, hooks, now_ms) {
                    Ok(r) => reports.push(r),
                    Err(e) => problems.error(&e),
                }
            }
            Ok(reports)
        },
    )?;
    progress.finish();
    if let Some(sel) = &filters.session
        && !reports.iter().any(|r| r.session_matched)
    {
        problems.add(Exit::Error, unknown_session(sel));
        return Ok(problems.finish(Exit::Success));
    }
    let view = inspect_text::View {
        sort: match args.sort {
            InspectSort::Bytes => Sort::Bytes,
            InspectSort::Age => Sort::Age,
            InspectSort::Tokens => Sort::Tokens,
            InspectSort::Images => Sort::Images,
            InspectSort::Key => Sort::Key,
        },
        limit: args.limit.unwrap_or(if args.json { 0 } else { 20 }),
        now_ms,
    };
    let done = if args.json {
        let mut stdout = std::io::stdout().lock();
        let mut sink = crate::jsonout::IoSink::new(&mut stdout);
        inspect_json::write_json(&mut sink, &reports, &view, resolved::json(&resolved_dirs));
        crate::jsjson::Sink::push(&mut sink, '\n');
        sink.finish()?;
        Exit::Success
    } else {
        let mut out = String::new();
        inspect_text::render(&mut out, &reports, &view);
        resolved::text(&mut out, &resolved_dirs, false);
        print(&out)?
    };
    Ok(problems.finish(done))
}

/// The report filters of the command line (a usage error names a value that does not parse).
fn filters_of(args: &InspectArgs) -> Result<Filters> {
    let usage = |m: String| anyhow::Error::new(UsageError(m));
    Ok(Filters {
        older_than_ms: args
            .older_than
            .as_deref()
            .map(|s| {
                parse_duration_ms(s, "d")
                    .ok_or_else(|| usage(format!("invalid --older-than {s:?}")))
            })
            .transpose()?,
        larger_than: args
            .larger_than
            .as_deref()
            .map(|s| {
                parse_byte_size(s)
                    .map(|n| n.max(0) as u64)
                    .ok_or_else(|| usage(format!("invalid --larger-than {s:?}")))
            })
            .transpose()?,
        kind: args
            .kind
            .as_deref()
            .map(|k| {
                SessionKind::parse(k).ok_or_else(|| {
                    let all: Vec<&str> = SessionKind::ALL.iter().map(|k| k.as_str()).collect();
                    usage(format!(
                        "unknown --kind {k:?}; use one of {}",
                        all.join(", ")
                    ))
                })
            })
            .transpose()?,
        session: args.targets.session.as_deref().map(SessionSelector::new),
    })
}

/// The report of one target: its SQLite-era database when it has one, else its store.
fn inspect_target(
    t: &super::Target,
    filters: &Filters,
    hooks: &inspect::Hooks,
    now_ms: f64,
) -> Result<StoreReport> {
    let db = crate::agentdb::for_store(&t.store_path);
    if crate::agentdb::exists(&db) {
        let target = crate::agentdb::cleanup::Target {
            agent_id: t.agent_id.clone(),
            store_path: t.store_path.clone(),
            db: std::path::absolute(&db).unwrap_or(db),
        };
        inspect::database::inspect_database(&target, filters, hooks, now_ms)
    } else {
        inspect::inspect_store(&t.agent_id, &t.store_path, filters, hooks, now_ms)
    }
}

/// `inspect --transcript FILE`: one transcript, no store (so no cleanup figure).
fn run_transcript(args: &InspectArgs, file: &Path) -> Result<Exit> {
    let t = &args.targets;
    if t.session.is_some() {
        return Err(UsageError(
            "--session needs a store target (--store, --agent or --all-agents), not --transcript"
                .into(),
        )
        .into());
    }
    let cleanup_flags = [
        ("--fix-missing", args.plan.fix_missing),
        ("--fix-dm-scope", args.plan.fix_dm_scope),
        ("--active-key", args.plan.active_key.is_some()),
        ("--prune-after", args.plan.prune_after.is_some()),
        ("--max-entries", args.plan.max_entries.is_some()),
        (
            "--reset-archive-retention",
            args.plan.reset_archive_retention.is_some(),
        ),
        ("--max-disk", args.plan.max_disk.is_some()),
        ("--high-water", args.plan.high_water.is_some()),
        ("--older-than", args.older_than.is_some()),
        ("--larger-than", args.larger_than.is_some()),
        ("--kind", args.kind.is_some()),
    ];
    if let Some((flag, _)) = cleanup_flags.iter().find(|(_, given)| *given) {
        return Err(UsageError(format!(
            "{flag} needs a store target (--store, --agent or --all-agents), not --transcript"
        ))
        .into());
    }
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let resolved_dirs = resolved::collect([dir]);
    resolved::announce(&resolved_dirs, false, args.quiet);
    let progress = Progress::bytes(0, "inspect", progress::wanted(args.json, args.quiet));
    let report = with_hooks(args, None, None, &progress, |hooks| {
        inspect::single::inspect_transcript(file, hooks)
    })?;
    progress.finish();
    if args.json {
        print_json(&with_resolved(
            inspect_json::transcript_json(&report),
            &resolved_dirs,
        ))
    } else {
        let mut out = String::new();
        inspect_text::render_transcript(&mut out, &report);
        resolved::text(&mut out, &resolved_dirs, false);
        print(&out)
    }
}

/// Build the planners `inspect` predicts with (the commands' own, with this run's flags) and
/// hand them to `f`.
fn with_hooks<T>(
    args: &InspectArgs,
    cleanup: Option<&Options>,
    cleanup_db: Option<&crate::agentdb::cleanup::Options>,
    progress: &Progress,
    f: impl FnOnce(&Hooks) -> Result<T>,
) -> Result<T> {
    let (keep, keep_turns) = (args.keep, args.keep_turns);
    let strip = move |i: &Index, t: &Tree| images::planned(i, t, keep_turns);
    let prune = move |i: &Index, t: &Tree| Ok(noreply::planned(i, t, keep));
    let settings = Settings {
        estimator: estimator_for(args.tokenizer)?,
        keep_recent_tokens: args.keep_recent_tokens,
        min_tokens: args.min_tokens.unwrap_or(args.keep_recent_tokens),
        version: env!("CARGO_PKG_VERSION"),
    };
    let now = entry::now_iso();
    let compact = compact_planner(&settings, &now, None, false);
    let estimator = settings.estimator;
    let context_tokens = move |i: &Index, t: &Tree| {
        let ContextEstimate { tokens, .. } = crate::compact::context_estimate(i, t, &estimator)?;
        Ok(tokens)
    };
    let tick = |t: Tick| match t {
        Tick::Planned(n) => progress.add_total(n),
        Tick::Done(n) => progress.inc(n),
    };
    let cache_ttl = |i: &Index, t: &Tree| crate::cachettl::planned(i, t);
    let hooks = Hooks {
        strip: &strip,
        prune: &prune,
        cache_ttl: &cache_ttl,
        compact: &compact,
        compact_min_tokens: settings.min_tokens,
        counter: estimator.counter(),
        context_tokens: &context_tokens,
        cleanup,
        cleanup_db,
        progress: &tick,
    };
    f(&hooks)
}

/// The document with `resolvedDirs`: the directories reached through a symlink.
fn with_resolved(mut doc: serde_json::Value, resolved_dirs: &[ResolvedDir]) -> serde_json::Value {
    if let serde_json::Value::Object(m) = &mut doc {
        m.insert("resolvedDirs".into(), resolved::json(resolved_dirs));
    }
    doc
}

fn print_json(doc: &serde_json::Value) -> Result<Exit> {
    let mut s = crate::jsjson::to_string_pretty(doc);
    s.push('\n');
    print(&s)
}

fn print(out: &str) -> Result<Exit> {
    super::print_stdout(out)?;
    Ok(Exit::Success)
}
