//! A compaction planned from a transcript in bounded memory: a file, or a session's rows
//! (anything a [`Transcript`] reads back by the index's line numbers).
//!
//! [`compaction`] runs the steps on the transcript: the active path's figures (from the measured
//! index, [`super::facts::scan`], done by the caller), the decision ([`plan::decide`]), the
//! summary of the decided range (a pass over just that range, each entry fed to a
//! [`SummaryBuilder`] and dropped), and the entry to append ([`plan::finish`]).
//! [`write_request`] streams the `--summarizer` request (the summarised messages, re-read one
//! at a time) into the command's stdin. Nothing here holds more than one entry of the transcript.

use std::io::{self, Write};

use anyhow::Result;
use serde_json::Value;

use super::facts::{IndexCalls, Scan};
use super::plan::{self, Compaction, ContextSize, Leave, Settings, TOOL};
use super::pruned;
use super::summary::{self, SummaryBuilder};
use super::{context_message, str_field};
use crate::transcript::tree::Tree;
use crate::transcript::values::Transcript;
use crate::transcript::{Index, Role};

/// Decide, summarise and build the entry for `transcript` (indexed as `index`, `tree`,
/// scanned as `scan`). The inner `Err` says why it is left alone; the outer one that the
/// transcript could not be read as indexed.
pub fn compaction(
    transcript: &dyn Transcript,
    index: &Index,
    tree: &Tree,
    scan: &Scan,
    settings: &Settings,
    now: &str,
) -> Result<Result<Compaction, Leave>> {
    let id = |p: usize| scan.id(index, p);
    let calls = IndexCalls {
        index,
        active: &scan.active,
    };
    let size = ContextSize {
        tokens: scan.context_tokens,
        messages: scan.context_len,
    };
    let decision = match plan::decide(&scan.facts, &calls, size, &id, settings) {
        Ok(d) => d,
        Err(leave) => return Ok(Err(leave)),
    };
    let mut reader = transcript.reader(true)?;
    let mut read = |p: usize| reader.read(index, scan.active[p]);
    let previous = decision
        .cut
        .previous_compaction
        .map(&mut read)
        .transpose()?;
    // Only user messages can frame the session: only they are read to find out.
    let mut framing_before = None;
    plan::first_framing(decision.cut.window_start, |p| -> Result<bool> {
        if !index.entries[scan.active[p]].is_role(&Role::User) {
            return Ok(false);
        }
        let e = read(p)?;
        let framing = plan::is_framing_entry(&e);
        framing_before = framing.then_some(e);
        Ok(framing)
    })?;
    // The summarised entries are parsed with only what the summary reads, and those the index
    // says enough about are not read at all (except the first and the last, which give the
    // summary its time span).
    let mut builder = SummaryBuilder::default();
    let ends = [decision.summarized.first(), decision.summarized.last()];
    for p in &decision.summarized {
        let i = scan.active[*p as usize];
        if !ends.contains(&Some(p)) && builder.push_from_index(&index.entries[i]) {
            continue;
        }
        let parse = |b| pruned::parse(b, &pruned::SUMMARY);
        builder.push(&reader.read_borrowed(index, i, parse, |e| str_field(e, "id"))?);
    }
    let generator = format!("{TOOL} {}", settings.version);
    let summary = summary::finish(
        builder,
        previous.as_ref(),
        framing_before.as_ref().and_then(|e| e.get("message")),
        &generator,
        now,
    );
    let leaf_id = scan
        .active
        .last()
        .and_then(|&i| index.entries[i].id.as_deref());
    let taken = |id: &str| tree.find(index, id).is_some();
    Ok(Ok(plan::finish(
        decision,
        summary,
        previous.as_ref(),
        leaf_id,
        settings,
        &taken,
        now,
    )))
}

/// Write the `--summarizer` request of `c` to `out`: `{"previousSummary": …, "messages":
/// […]}` as one compact JSON document (what `JSON.stringify` writes), the summarised messages
/// in the runtime's context shape, read back from the transcript one at a time.
pub fn write_request(
    transcript: &dyn Transcript,
    index: &Index,
    active: &[usize],
    c: &Compaction,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut reader = transcript.reader(false).map_err(io::Error::other)?;
    let mut head = String::from("{\"previousSummary\":");
    match &c.previous_summary {
        Some(s) => crate::jsjson::write_string(&mut head, s),
        None => head.push_str("null"),
    }
    head.push_str(",\"messages\":[");
    out.write_all(head.as_bytes())?;
    let mut first = true;
    for &p in &c.summarized {
        let v: Value = reader
            .read(index, active[p as usize])
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        let Some(m) = context_message(&v) else {
            continue;
        };
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        out.write_all(crate::jsjson::to_string_compact(&*m).as_bytes())?;
    }
    out.write_all(b"]}")
}
