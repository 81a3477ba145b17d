//! `clawkeeper compact`: summarise the older part of long transcripts without a model and
//! append a `compaction` entry the runtime honours on its next turn.
//!
//! Resolve the targets; per file, read the active path's figures in one pass
//! (`compact::facts`), rebuild the context the way the runtime does (`transcript::tree`), let
//! `compact::plan` choose the cut, summarise the range in a second pass (`compact::load`),
//! optionally ask the operator's `--summarizer` (its input streamed from the transcript), and
//! hand the appended line to the shared transcript job (lock, validation, atomic replace, all
//! without a second index of the file). Every original line stays as it was; the new entry
//! becomes the last line. Memory is bounded by the largest line plus per-entry figures.
//!
//! A SQLite-era agent's sessions are planned by the same planner on their rows (read back by
//! `seq`, see `agentdb::transcripts`), and the entry is appended as a row under the database
//! write guard (`transcripts_db`). `--successor` is not built for them: such a database is
//! refused (exit 3) and nothing is written to it.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::transcripts::{self, Labels};
use crate::cli::{CompactArgs, Tokenizer};
use crate::compact::plan::{self, Compaction, Settings};
use crate::compact::{
    Estimator, TokenCounter, context_message, entry, external, facts, load, summary,
};
use crate::exit::Exit;
use crate::transcript::Index;
use crate::transcript::job::{Outcome, PlanError, Planned};
use crate::transcript::tree::Tree;
use crate::transcript::values::Transcript;

/// The estimator `compact` and `inspect` use for a `--tokenizer` choice; an error for a BPE
/// tokenizer in a build without the `tiktoken` feature.
pub fn estimator_for(t: Tokenizer) -> Result<Estimator> {
    let counter = match t {
        Tokenizer::Heuristic => TokenCounter::Heuristic,
        Tokenizer::O200k => TokenCounter::O200k,
        Tokenizer::Cl100k => TokenCounter::Cl100k,
    };
    if !counter.is_available() {
        bail!(
            "--tokenizer {} is not available: this clawkeeper was built without the tiktoken \
             feature (its BPE vocabularies); use --tokenizer heuristic, or a build with default \
             features",
            counter.name()
        );
    }
    Ok(Estimator::new(counter))
}

/// An operator's `--summarizer` command and its time limit.
pub struct External {
    command: String,
    timeout: Duration,
}

mod successor_mode;

pub fn run(args: &CompactArgs) -> Result<Exit> {
    if args.successor && args.targets.transcript.is_some() {
        return Err(crate::exit::UsageError(
            "--successor updates the store entry, so it needs a store target, not --transcript"
                .into(),
        )
        .into());
    }
    let settings = Settings {
        estimator: estimator_for(args.tokenizer)?,
        keep_recent_tokens: args.keep_recent_tokens,
        min_tokens: args.min_tokens.unwrap_or(args.keep_recent_tokens),
        version: env!("CARGO_PKG_VERSION"),
    };
    let external = args.summarizer.as_ref().map(|command| External {
        command: command.clone(),
        timeout: args.summarizer_timeout,
    });
    let enforce = args.mode.enforce;
    let labels = Labels {
        command: "compact",
        count_key: "messagesSummarized",
        count_header: "summarised",
        extra: None,
    };
    let now = entry::now_iso();
    if args.successor {
        let run = successor_mode::Run {
            settings: &settings,
            external: external.as_ref(),
            enforce,
            wait_lock: args.mode.wait_lock,
            now: &now,
        };
        return successor_mode::run(&args.targets, &args.mode, &labels, summarised_count, &run);
    }
    transcripts::run_at(
        &args.targets,
        &args.mode,
        &labels,
        summarised_count,
        Some(settings.estimator.counter()),
        &planner(&settings, &now, external.as_ref(), enforce),
    )
}

/// The per-transcript planner of in-place `compact` (also what `inspect` runs to predict
/// savings), for a file and for a session's rows alike. It needs an index measured with the
/// estimator's counter (its token figures); of the transcript it reads again only the
/// summarised entries, one at a time (see `compact::load`).
pub fn planner<'a>(
    settings: &'a Settings,
    now: &'a str,
    external: Option<&'a External>,
    enforce: bool,
) -> impl Fn(&dyn Transcript, &Index, &Tree) -> Result<Planned, PlanError> + Sync + 'a {
    move |transcript, index, tree| {
        let fail = PlanError::from_error;
        let scan = facts::scan(index, tree, &settings.estimator).map_err(fail)?;
        let planned = load::compaction(transcript, index, tree, &scan, settings, now);
        let mut c = match planned.map_err(fail)? {
            Ok(c) => c,
            Err(leave) => {
                return Ok(Planned {
                    notes: vec![format!("left alone: {leave}")],
                    ..Planned::default()
                });
            }
        };
        let mut notes = describe(index, &c);
        let mut source = "builtin";
        if let Some(ext) = external {
            let write = |c: &Compaction, w: &mut dyn Write| {
                load::write_request(transcript, index, &scan.active, c, w)
            };
            let (note, s) = use_external(ext, &mut c, enforce, now, &write);
            notes.push(note);
            source = s;
        }
        let mut planned = Planned {
            notes,
            details: Some(details(&c, &settings.estimator, source)),
            ..Planned::default()
        };
        planned.edits.append.push(c.entry.to_value());
        Ok(planned)
    }
}

fn summarised_count(o: &Outcome) -> usize {
    o.details
        .as_ref()
        .and_then(|d| d["messagesSummarized"].as_u64())
        .unwrap_or(0) as usize
}

fn describe(index: &Index, c: &Compaction) -> Vec<String> {
    let line = index
        .entries
        .iter()
        .find(|e| e.id.as_deref() == Some(c.cut.first_kept_id.as_str()))
        .map_or(0, |e| e.line() + 1);
    let mut notes = vec![format!(
        "summarises {} messages (~{} tokens); keeps ~{} tokens from line {line} (entry {}); context ~{} tokens before",
        c.summary.messages,
        c.cut.summarized_tokens,
        c.cut.kept_tokens,
        c.cut.first_kept_id,
        c.tokens_before
    )];
    if c.summary.boilerplate_only {
        notes.push(
            "the summarised range is boilerplate only (heartbeats, silent replies); wrote the fallback summary so the runtime stops re-triggering"
                .into(),
        );
    }
    notes
}

/// Ask the operator's summariser (only when applying: a preview never runs it). Returns the
/// note to report and `details.summarySource`: `summarizer` (its text is used),
/// `builtin-fallback` (it failed; the built-in summary is used), or `summarizer-on-enforce`
/// (a preview: the summary would come from it; the figures are those of the built-in summary,
/// which is also the fallback).
fn use_external(
    ext: &External,
    c: &mut Compaction,
    enforce: bool,
    now: &str,
    write: &dyn Fn(&Compaction, &mut dyn Write) -> io::Result<()>,
) -> (String, &'static str) {
    if !enforce {
        return (
            format!(
                "the summary would come from --summarizer `{}`, which runs only with --enforce; the figures shown are for the built-in summary (also the fallback if it fails)",
                ext.command
            ),
            "summarizer-on-enforce",
        );
    }
    let result = {
        let planned: &Compaction = c;
        external::run(
            &ext.command,
            &|w: &mut dyn Write| write(planned, w),
            ext.timeout,
        )
    };
    match result {
        Ok(text) => {
            let generator = format!("{} {}", plan::TOOL, env!("CARGO_PKG_VERSION"));
            c.entry.summary =
                summary::wrap_external(&text, &c.summary, &generator, now, &ext.command);
            if let Some(Value::Object(offline)) = c.entry.details.get_mut("offline") {
                offline.insert("summarizer".into(), json!(ext.command));
            }
            ("summary written by --summarizer".into(), "summarizer")
        }
        Err(why) => (
            format!("--summarizer failed ({why}); used the built-in summary"),
            "builtin-fallback",
        ),
    }
}

/// The plan's figures. `tokensAfter` and `tokensSaved` are per-message estimates of the
/// effective context (no provider `usage`, which describes the context before): before =
/// previous summary + summarised + kept messages; after = new summary + kept messages.
fn details(c: &Compaction, estimator: &Estimator, summary_source: &str) -> Value {
    let summary_tokens =
        context_message(&c.entry.to_value()).map_or(0, |m| estimator.message_tokens(&m));
    let previous_tokens = c.previous_summary.as_ref().map_or(0, |s| {
        estimator.message_tokens(&json!({"role": "compactionSummary", "summary": s}))
    });
    let tokens_after = summary_tokens + c.cut.kept_tokens;
    let estimated_before = previous_tokens + c.cut.summarized_tokens + c.cut.kept_tokens;
    json!({
        "compactionId": c.entry.id,
        "firstKeptEntryId": c.cut.first_kept_id,
        "tokensBefore": c.tokens_before,
        "keptTokens": c.cut.kept_tokens,
        "summarizedTokens": c.cut.summarized_tokens,
        "tokensAfter": tokens_after,
        "tokensSaved": estimated_before.saturating_sub(tokens_after),
        "messagesSummarized": c.summary.messages,
        "boilerplateOnly": c.summary.boilerplate_only,
        "summaryChars": c.entry.summary.encode_utf16().count(),
        "summarySource": summary_source,
        "readFiles": c.summary.read_files.len(),
        "modifiedFiles": c.summary.modified_files.len(),
    })
}
