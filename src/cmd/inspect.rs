//! `clawkeeper inspect`: resolve the stores, hand `inspect::inspect_store` the very planners
//! the commands use (with the flags given here), then print the tables or the JSON document.
//! Never writes to a store or its directory.

use std::io::Write;

use anyhow::{Result, anyhow, bail};

use super::compact::{estimator_for, planner as compact_planner};
use crate::cli::{InspectArgs, InspectSort};
use crate::compact::plan::Settings;
use crate::compact::{ContextEstimate, entry};
use crate::config::grammar::{parse_byte_size, parse_duration_ms};
use crate::config::maintenance::{Maintenance, Overrides};
use crate::exit::Exit;
use crate::inspect::{self, Filters, Hooks, StoreReport, Tick};
use crate::keys::SessionKind;
use crate::maintenance::run::Options;
use crate::progress::{self, Progress};
use crate::report::inspect_text::{self, Sort};
use crate::transcript::Index;
use crate::transcript::tree::Tree;
use crate::{images, noreply};

pub fn run(args: &InspectArgs) -> Result<Exit> {
    if args.targets.transcript.is_some() {
        bail!("inspect works on stores: use --store PATH, --agent ID or --all-agents");
    }
    let (cfg, env, targets) = super::resolve_targets(&args.targets.target)?;
    let filters = Filters {
        older_than_ms: args
            .older_than
            .as_deref()
            .map(|s| parse_duration_ms(s, "d").ok_or_else(|| anyhow!("invalid --older-than {s:?}")))
            .transpose()?,
        larger_than: args
            .larger_than
            .as_deref()
            .map(|s| {
                parse_byte_size(s)
                    .map(|n| n.max(0) as u64)
                    .ok_or_else(|| anyhow!("invalid --larger-than {s:?}"))
            })
            .transpose()?,
        kind: args
            .kind
            .as_deref()
            .map(|k| {
                SessionKind::parse(k).ok_or_else(|| {
                    let all: Vec<&str> = SessionKind::ALL.iter().map(|k| k.as_str()).collect();
                    anyhow!("unknown --kind {k:?}; use one of {}", all.join(", "))
                })
            })
            .transpose()?,
        session: args.targets.session.clone(),
    };
    let cleanup = if args.no_cleanup {
        None
    } else {
        let overrides = Overrides {
            prune_after: args.prune_after.clone(),
            max_entries: args.max_entries,
            reset_archive_retention: args.reset_archive_retention.clone(),
            max_disk: args.max_disk.clone(),
            high_water: args.high_water.clone(),
        };
        let maintenance =
            Maintenance::with_overrides(cfg.get(&["session", "maintenance"]), &overrides)
                .map_err(|m| anyhow!(m))?;
        Some(Options {
            maintenance,
            mode: serde_json::Value::String("enforce".into()),
            dry_run: false,
            active_key: args.active_key.clone(),
            fix_missing: args.fix_missing,
            fix_dm_scope: args.fix_dm_scope,
            dm_scope: cfg.dm_scope(),
            home: env.home(),
        })
    };
    let (keep, keep_turns) = (args.keep, args.keep_turns);
    let strip = move |i: &Index, t: &Tree| images::planned(i, t, keep_turns);
    let prune = move |i: &Index, t: &Tree| Ok(noreply::planned(i, t, keep));
    let settings = Settings {
        estimator: estimator_for(args.tokenizer),
        keep_recent_tokens: args.keep_recent_tokens,
        min_tokens: args.min_tokens.unwrap_or(args.keep_recent_tokens),
        version: env!("CARGO_PKG_VERSION"),
    };
    let now = entry::now_iso();
    let compact = compact_planner(&settings, &now, None, false);
    let estimator = settings.estimator;
    let context_tokens = move |p: &std::path::Path, i: &Index, t: &Tree| {
        let ContextEstimate { tokens, .. } =
            crate::compact::context_estimate(p, i, t, &estimator).map_err(|e| format!("{e:#}"))?;
        Ok(tokens)
    };
    let progress = Progress::bytes(0, "inspect", progress::wanted(args.json, args.quiet));
    let tick = |t: Tick| match t {
        Tick::Planned(n) => progress.add_total(n),
        Tick::Done(n) => progress.inc(n),
    };
    let hooks = Hooks {
        strip: &strip,
        prune: &prune,
        compact: &compact,
        compact_min_tokens: settings.min_tokens,
        context_tokens: &context_tokens,
        cleanup: cleanup.as_ref(),
        progress: &tick,
    };
    let now_ms = crate::maintenance::now_ms();
    let mut reports: Vec<StoreReport> = Vec::new();
    for t in &targets {
        reports.push(inspect::inspect_store(
            &t.agent_id,
            &t.store_path,
            &filters,
            &hooks,
            now_ms,
        )?);
    }
    progress.finish();
    let view = inspect_text::View {
        sort: match args.sort {
            InspectSort::Bytes => Sort::Bytes,
            InspectSort::Age => Sort::Age,
            InspectSort::Tokens => Sort::Tokens,
            InspectSort::Images => Sort::Images,
            InspectSort::Key => Sort::Key,
        },
        limit: args.limit,
        now_ms,
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let doc = inspect_text::json(&reports, &view);
        writeln!(stdout, "{}", crate::jsjson::to_string_pretty(&doc))?;
    } else {
        let mut out = String::new();
        inspect_text::render(&mut out, &reports, &view);
        stdout.write_all(out.as_bytes())?;
    }
    stdout.flush()?;
    Ok(Exit::Success)
}
