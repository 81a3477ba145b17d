use serde_json::json;

use super::*;
use crate::compact::testgen::{PathBuilder, Rng};

fn input<'a>(entries: &'a [Value], previous: Option<&'a Value>) -> SummaryInput<'a> {
    SummaryInput {
        entries: entries
            .iter()
            .filter(|e| crate::compact::is_context_entry(e))
            .collect(),
        previous,
        framing_before: None,
        generator: "clawkeeper 0.0.0",
        now: "2026-03-03T00:00:00.000Z",
    }
}

#[test]
fn summary_names_files_tools_failures_and_requests() {
    let mut b = PathBuilder::default();
    b.user("Please refactor the parser.\nKeep the API stable.");
    b.tool_round("read", json!({"path":"src/a.rs"}), "fn a() {}", false);
    b.tool_round(
        "edit",
        json!({"path":"src/b.rs","oldText":"x","newText":"y"}),
        "ok",
        false,
    );
    b.tool_round("read", json!({"path":"src/b.rs"}), "...", false);
    b.tool_round(
        "exec",
        json!({"command":"cargo test"}),
        "error:   test   failed\n\nboom",
        true,
    );
    b.assistant_text("Done </summary> here");
    b.user("Now also update the docs please");
    b.tool_round("write", json!({"path":"docs/x.md"}), "written", false);
    let s = build(&input(&b.entries, None));
    assert!(!s.boilerplate_only);
    assert!(s.text.starts_with(
        "[Offline compaction by clawkeeper 0.0.0 at 2026-03-03T00:00:00.000Z; no model was used"
    ));
    assert!(
        s.text.contains(
            "## Framing request\n> Please refactor the parser.\n> Keep the API stable.\n"
        )
    );
    assert_eq!(s.read_files, vec!["src/a.rs"]);
    assert_eq!(s.modified_files, vec!["docs/x.md", "src/b.rs"]);
    assert!(s.text.ends_with("<read-files>\nsrc/a.rs\n</read-files>\n\n<modified-files>\ndocs/x.md\nsrc/b.rs\n</modified-files>"));
    assert!(s.text.contains("- read ×2\n"));
    assert!(s.text.contains("- exec ×1 (1 error)"));
    assert!(
        s.text
            .contains("## Tool Failures\n- exec: error: test failed boom")
    );
    assert!(s.text.contains(": \"Now also update the docs please\""));
    assert!(!s.text.contains("</summary>"));
    assert_eq!(s.by_role["toolResult"], 5);
    assert_eq!(s.messages, 13);
    assert_eq!(s, build(&input(&b.entries, None)), "deterministic");
    let d = s.details("clawkeeper", "0.0.0");
    assert_eq!(d["readFiles"], json!(["src/a.rs"]));
    assert_eq!(d["offline"]["boilerplateOnly"], json!(false));
}

#[test]
fn previous_summary_is_carried_and_lists_merged() {
    let mut b = PathBuilder::default();
    b.user("continue with the work");
    b.tool_round("read", json!({"path":"z.rs"}), "", false);
    let prev = json!({"type":"compaction","summary":"## Goal\nShip it.\n\n<read-files>\nold.rs\n</read-files>",
        "details":{"readFiles":["old.rs","mod.rs"],"modifiedFiles":["mod.rs"]}});
    let s = build(&input(&b.entries, Some(&prev)));
    // Carried verbatim, but for its file block: the merged blocks end the summary, once.
    assert!(
        s.text
            .contains("## Previous summary\n## Goal\nShip it.\n\n## Activity (2026-"),
        "{}",
        s.text
    );
    assert_eq!(s.text.matches("<read-files>").count(), 1);
    assert!(s.text.ends_with(
        "<read-files>\nold.rs\nz.rs\n</read-files>\n\n<modified-files>\nmod.rs\n</modified-files>"
    ));
    assert_eq!(s.read_files, vec!["old.rs", "z.rs"]);
    assert_eq!(s.modified_files, vec!["mod.rs"]);
    // The `details` lists of a hook-written compaction are not carried, as in the runtime
    // (the files its text's blocks name are: the text is carried).
    let mut hook = prev.clone();
    hook["fromHook"] = json!(true);
    let s = build(&input(&b.entries, Some(&hook)));
    assert_eq!(
        (s.read_files, s.modified_files),
        (vec!["old.rs".to_owned(), "z.rs".to_owned()], vec![])
    );
}

#[test]
fn offline_previous_summary_keeps_the_framing_request_once() {
    let mut b = PathBuilder::default();
    b.user("Build the importer for CSV files");
    b.tool_round("edit", json!({"path":"imp.rs"}), "ok", false);
    b.assistant_text("started");
    let first = build(&input(&b.entries, None));
    let prev = json!({"type":"compaction","summary":first.text,"details":first.details("clawkeeper","0.0.0")});
    let mut c = PathBuilder::default();
    c.user("next: add TSV too");
    c.assistant_text("ok");
    let second = build(&input(&c.entries, Some(&prev)));
    assert_eq!(second.text.matches("## Framing request").count(), 1);
    assert!(
        second
            .text
            .contains("## Framing request\n> Build the importer for CSV files\n")
    );
    assert_eq!(second.text.matches("[Offline compaction by").count(), 1);
    assert_eq!(second.text.matches("<modified-files>").count(), 1);
    assert!(
        second
            .text
            .contains("## Previous summary\n### Activity (2026-03-02T09:00:01.000Z to "),
        "{}",
        second.text
    );
    assert_eq!(second.modified_files, vec!["imp.rs"]);
}

#[test]
fn boilerplate_only_range_gets_the_fallback() {
    let mut b = PathBuilder::default();
    let prompt = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";
    for _ in 0..5 {
        b.user(prompt);
        b.assistant_text("HEARTBEAT_OK");
        b.user(prompt);
        b.assistant_text("NO_REPLY");
    }
    let s = build(&input(&b.entries, None));
    assert!(s.boilerplate_only);
    assert_eq!(s.boilerplate.heartbeat_exchanges, 10);
    assert!(
        s.text
            .contains("\n\n## Decisions\nNo prior history.\n\n## Open TODOs\nNone.")
    );
    let prev = json!({"summary":"earlier facts"});
    let s = build(&input(&b.entries, Some(&prev)));
    assert!(
        s.text
            .contains("## Decisions\nearlier facts\n\n## Open TODOs")
    );
    let structured = "## Decisions\nA\n## Open TODOs\nB\n## Constraints/Rules\nC\n## Pending user asks\nD\n## Exact identifiers\nE";
    assert_eq!(fallback_summary(Some(structured)), structured);
}

#[test]
fn failures_are_capped_and_sorting_is_utf16() {
    let mut b = PathBuilder::default();
    b.user("run everything");
    for i in 0..10 {
        b.tool_round("exec", json!({"command": i}), &"x".repeat(300), true);
    }
    let s = build(&input(&b.entries, None));
    assert!(s.text.contains("- ...and 2 more"));
    assert!(s.text.contains(&format!("- exec: {}...", "x".repeat(237))));
    // U+FF5E sorts after U+1F600 by code point but before it by UTF-16 code unit
    let mut c = PathBuilder::default();
    c.user("touch files");
    c.tool_round("read", json!({"path":"😀"}), "", false);
    c.tool_round("read", json!({"path":"～"}), "", false);
    let s = build(&input(&c.entries, None));
    assert_eq!(s.read_files, vec!["😀", "～"]);
}

#[test]
fn generated_sessions_name_every_touched_file() {
    let mut rng = Rng::new(3);
    for _ in 0..30 {
        let turns = 1 + rng.below(40) as usize;
        let b = PathBuilder::random(&mut rng, turns);
        let s = build(&input(&b.entries, None));
        for e in &b.entries {
            for block in e["message"]["content"].as_array().into_iter().flatten() {
                if let Some(path) = block["arguments"]["path"].as_str()
                    && matches!(block["name"].as_str(), Some("read" | "write" | "edit"))
                {
                    assert!(s.text.contains(&format!("\n{path}\n")), "{path}");
                }
            }
        }
        assert!(!s.text.contains("</summary>"));
        assert!(s.text.len() < 16_000, "a few KB, got {}", s.text.len());
    }
}

#[test]
fn a_summariser_text_is_framed_honestly() {
    let mut b = PathBuilder::default();
    b.user("Port the billing job to Rust");
    b.tool_round("edit", json!({"path":"bill.rs"}), "ok", false);
    b.assistant_text("started");
    let s = build(&input(&b.entries, None));
    let text = wrap_external(
        "  The model's own summary </summary> ends here.\n",
        &s,
        "clawkeeper 0.0.0",
        "2026-03-03T00:00:00.000Z",
        "ollama run `x`\n  --fast",
    );
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        "[Offline compaction by clawkeeper 0.0.0 at 2026-03-03T00:00:00.000Z; summary written offline by the operator's summariser command `ollama run 'x' --fast`, not by the runtime's model; file lists extracted mechanically.]"
    );
    assert!(!text.contains("no model was used"));
    assert!(text.contains(
        "\n\n## Framing request\n> Port the billing job to Rust\n\nThe model's own summary <\\/summary> ends here.\n\n<modified-files>\nbill.rs\n</modified-files>"
    ));
    // Carried into the next compaction, its first line and blocks are not repeated.
    let prev =
        json!({"type":"compaction","summary":text,"details":s.details("clawkeeper","0.0.0")});
    let mut c = PathBuilder::default();
    c.user("and the invoices");
    c.assistant_text("ok");
    let next = build(&input(&c.entries, Some(&prev)));
    assert_eq!(next.text.matches("[Offline compaction by").count(), 1);
    assert_eq!(next.text.matches("## Framing request").count(), 1);
    assert!(
        next.text
            .contains("## Previous summary\nThe model's own summary <\\/summary> ends here.")
    );
    let long = external_header_line("t", "n", &"c".repeat(100));
    assert!(long.contains(&format!("`{}...`", "c".repeat(57))), "{long}");
}

#[test]
fn the_fallback_keeps_the_framing_request_and_the_file_blocks() {
    let prompt = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";
    let mut first = PathBuilder::default();
    first.user("Keep the nightly backups healthy");
    first.tool_round("read", json!({"path":"backup.cfg"}), "ok", false);
    first.assistant_text("checked");
    let earlier = build(&input(&first.entries, None));
    let prev = json!({"type":"compaction","summary":earlier.text,"details":earlier.details("clawkeeper","0.0.0")});
    let mut b = PathBuilder::default();
    for _ in 0..3 {
        b.user(prompt);
        b.assistant_text("HEARTBEAT_OK");
    }
    // A tool call with no conversation around it is still boilerplate, but its file counts.
    b.tool_round("edit", json!({"path":"state.json"}), "", false);
    let s = build(&input(&b.entries, Some(&prev)));
    assert!(s.boilerplate_only);
    let t = &s.text;
    assert_eq!(t.matches("[Offline compaction by").count(), 1, "{t}");
    assert!(
        t.contains("\n\n## Framing request\n> Keep the nightly backups healthy\n\n## Decisions\n"),
        "{t}"
    );
    assert!(t.contains("\n\n## Open TODOs\nNone."), "{t}");
    assert!(t.ends_with(
        "\n\n<read-files>\nbackup.cfg\n</read-files>\n\n<modified-files>\nstate.json\n</modified-files>"
    ));
    // Carried once more, an offline fallback keeps its sections and loses its first line.
    let prev2 =
        json!({"type":"compaction","summary":s.text,"details":s.details("clawkeeper","0.0.0")});
    let again = build(&input(&b.entries, Some(&prev2)));
    assert_eq!(again.text.matches("[Offline compaction by").count(), 1);
    assert_eq!(again.text.matches("## Decisions").count(), 1);
    assert_eq!(again.text.matches("## Framing request").count(), 1);
    // The framing request may also come from before the summarised range.
    let before = json!({"role":"user","content":"Watch the disk usage"});
    let mut i = input(&b.entries, None);
    i.framing_before = Some(&before);
    let s = build(&i);
    assert!(
        s.text.contains(
            "## Framing request\n> Watch the disk usage\n\n## Decisions\nNo prior history."
        )
    );
}

#[test]
fn closing_tags_are_escaped_in_every_spelling() {
    for tag in [
        "</summary>",
        "</SUMMARY>",
        "</ Summary >",
        "< /summary>",
        "</summary\n>",
        "<\t/\tsUmMaRy\t>",
    ] {
        let out = sanitize(&format!("a {tag} b"));
        assert!(!out.to_lowercase().contains("</summary>"), "{out:?}");
        assert!(out.contains("\\/"), "{out:?}");
        assert_eq!(sanitize(&out), out, "escaping twice changes nothing");
    }
    assert_eq!(
        sanitize("<summary> ok </summarize>"),
        "<summary> ok </summarize>"
    );
}

#[test]
fn every_part_is_capped() {
    let mut b = PathBuilder::default();
    b.user(&format!("{}🎉{}", "f".repeat(1999), "g".repeat(3000)));
    for i in 0..60 {
        b.tool_round(&format!("tool_{i:02}"), json!({"x": i}), "boom", i % 2 == 0);
        b.tool_round(
            "read",
            json!({"path": format!("dir/read{i:03}.rs")}),
            "",
            false,
        );
        b.tool_round(
            "edit",
            json!({"path": format!("dir/edit{i:03}.rs")}),
            "",
            false,
        );
        b.user(&format!("request {i}: {}", "r".repeat(400)));
    }
    let prev = json!({"type":"compaction","summary":format!("START {} END", "p".repeat(20_000))});
    let s = build(&input(&b.entries, Some(&prev)));
    let t = &s.text;
    assert!(t.len() < 16_000, "{} bytes", t.len());
    // The framing request: 2000 UTF-16 units (the emoji would straddle the limit), a marker.
    assert!(
        t.contains(&format!(
            "> {}\n> [… shortened: 3002 more characters]\n",
            "f".repeat(1999)
        )),
        "{t}"
    );
    assert!(t.contains("## Previous summary\nSTART p"));
    assert!(t.contains("p END\n\n## Activity"));
    assert!(
        t.contains("[… 16010 characters of the previous summary left out …]"),
        "{t}"
    );
    assert!(t.contains("- … and 42 more tools (42 calls)"), "{t}");
    // Every file is named, however many.
    assert!(t.contains("dir/read059.rs\n</read-files>"), "{t}");
    for f in &s.read_files {
        assert!(t.contains(&format!("{f}\n")), "{f} missing: {t}");
    }
    assert_eq!(s.read_files.len(), 60);
    assert!(t.contains("- ...46 more requests..."), "{t}");
    assert!(t.contains("- ...and "));
    // A shortened framing request carried by the next offline summary is not cut again.
    let prev = json!({"type":"compaction","summary":s.text});
    let mut c = PathBuilder::default();
    c.user("go on");
    c.assistant_text("ok");
    let next = build(&input(&c.entries, Some(&prev)));
    assert_eq!(next.framing, s.framing);
    assert_eq!(next.text.matches("shortened: 3002 more").count(), 1);
}

#[test]
fn a_summary_never_exceeds_the_runtime_budget() {
    let mut b = PathBuilder::default();
    b.user("Index the archive");
    b.tool_round("read", json!({"path":"a.txt"}), "", false);
    let s = build(&input(&b.entries, None));
    // An operator's summariser that prints far too much.
    let long = format!("{}😀{}", "w".repeat(15_000), "z".repeat(30_000));
    let text = wrap_external(&long, &s, "clawkeeper 0.0.0", "now", "cat");
    assert_eq!(
        text.encode_utf16().count(),
        super::super::summary_text::MAX_SUMMARY_CHARS
    );
    assert!(text.ends_with(
        "\n\n[Compaction summary truncated to fit budget]\n\n<read-files>\na.txt\n</read-files>"
    ));
    assert!(text.starts_with("[Offline compaction by clawkeeper 0.0.0 at now; summary written"));
    // Short enough: unchanged.
    let short = wrap_external("fine", &s, "clawkeeper 0.0.0", "now", "cat");
    assert!(short.ends_with("\n\nfine\n\n<read-files>\na.txt\n</read-files>"));
}

/// The headings of a summary, in order.
fn headings(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with('#')).collect()
}

/// The span an activity heading names, as (first, last) timestamps.
fn span_of(heading: &str) -> (String, String) {
    let inner = heading
        .split_once(" (")
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no span in {heading:?}"));
    let (a, b) = inner.split_once(" to ").unwrap();
    (a.to_owned(), b.to_owned())
}

#[test]
fn stacked_offline_summaries_keep_one_previous_section_and_dated_activity() {
    let mut rng = Rng::new(31);
    let mut b = PathBuilder::random(&mut rng, 12);
    let mut previous: Option<Value> = None;
    let mut from = 0;
    let mut texts = Vec::new();
    for round in 0..3 {
        let s = build(&input(&b.entries[from..], previous.as_ref()));
        assert!(!s.boilerplate_only);
        let t = &s.text;
        texts.push(t.clone());
        assert_eq!(t.matches("[Offline compaction by").count(), 1, "{t}");
        assert_eq!(t.matches("## Framing request").count(), 1, "{t}");
        assert_eq!(
            t.matches("## Previous summary").count(),
            usize::from(round > 0),
            "{t}"
        );
        assert_eq!(t.matches("<read-files>").count(), 1, "{t}");
        assert_eq!(t.matches("<modified-files>").count(), 1, "{t}");
        let files = format!(
            "\n\n<read-files>\n{}\n</read-files>\n\n<modified-files>\n{}\n</modified-files>",
            s.read_files.join("\n"),
            s.modified_files.join("\n")
        );
        assert!(t.ends_with(&files), "{t}");
        // One activity section per compaction so far, each dated, oldest first; the newest
        // is the only one at the top level, after the previous summary.
        let h = headings(t);
        let activity: Vec<&str> = h
            .iter()
            .copied()
            .filter(|l| l.trim_start_matches('#').starts_with(" Activity"))
            .collect();
        assert_eq!(activity.len(), round + 1, "{t}");
        for (k, a) in activity.iter().enumerate() {
            let top = k == round;
            assert_eq!(a.starts_with("## Activity ("), top, "{a}");
            assert_eq!(a.starts_with("### Activity ("), !top, "{a}");
        }
        let spans: Vec<(String, String)> = activity.iter().map(|a| span_of(a)).collect();
        for w in spans.windows(2) {
            assert!(w[0].1 < w[1].0, "{spans:?}");
        }
        // Only the sections of the newest range are at the top level.
        let top: Vec<&str> = h.iter().copied().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            top.iter()
                .filter(|l| l.starts_with("## Tools called"))
                .count(),
            1,
            "{t}"
        );
        if round > 0 {
            let prev = t.find("## Previous summary").unwrap();
            let newest = t.find(activity[round]).unwrap();
            assert!(prev < newest);
            // Everything the earlier summaries said is still there.
            let body = |x: &str| {
                x.lines()
                    .filter(|l| l.starts_with("- "))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            for line in body(&texts[round - 1]) {
                assert!(t.contains(&line), "{line} lost from\n{t}");
            }
        }
        // The next round: more conversation after this compaction.
        previous = Some(json!({"type":"compaction","summary":s.text,
            "details":s.details("clawkeeper","0.0.0")}));
        from = b.entries.len();
        for t in 0..8 {
            b.user(&format!("round {round} turn {t}: carry on"));
            let path = format!("src/round{round}_{t}.rs");
            b.tool_round("edit", json!({ "path": path }), "ok", false);
            b.assistant_text("done");
        }
    }
}

#[test]
fn a_carried_model_summary_loses_its_file_blocks_to_the_merged_ones() {
    let mut b = PathBuilder::default();
    b.user("continue the migration");
    b.tool_round("read", json!({"path":"new.rs"}), "", false);
    b.tool_round("edit", json!({"path":"seen.rs"}), "", false);
    let model = "## Goal\nMigrate the DB.\n\n## Progress\n- schema done\n\n<read-files>\nseen.rs\nonly-in-text.rs\n</read-files>\n\n<modified-files>\n  schema.sql\n</modified-files>";
    // A hook-written compaction: its details are not carried, its text's blocks are.
    let prev = json!({"type":"compaction","summary":model,"fromHook":true});
    let s = build(&input(&b.entries, Some(&prev)));
    let t = &s.text;
    assert!(
        t.contains("## Previous summary\n## Goal\nMigrate the DB.\n\n## Progress\n- schema done\n\n## Activity ("),
        "{t}"
    );
    assert_eq!(t.matches("<read-files>").count(), 1, "{t}");
    assert_eq!(t.matches("<modified-files>").count(), 1, "{t}");
    assert_eq!(s.read_files, vec!["new.rs", "only-in-text.rs"]);
    assert_eq!(s.modified_files, vec!["schema.sql", "seen.rs"]);
    assert!(t.ends_with(
        "\n\n<read-files>\nnew.rs\nonly-in-text.rs\n</read-files>\n\n<modified-files>\nschema.sql\nseen.rs\n</modified-files>"
    ));
    // Compacted again offline: the model's text stays once, under the one previous section.
    let prev =
        json!({"type":"compaction","summary":s.text,"details":s.details("clawkeeper","0.0.0")});
    let mut c = PathBuilder::default();
    c.user("next step");
    c.assistant_text("ok");
    let next = build(&input(&c.entries, Some(&prev)));
    let t = &next.text;
    assert_eq!(t.matches("## Previous summary").count(), 1, "{t}");
    assert_eq!(t.matches("## Goal\nMigrate the DB.").count(), 1, "{t}");
    assert_eq!(t.matches("<read-files>").count(), 1, "{t}");
    assert!(t.contains("- schema done\n\n### Activity ("), "{t}");
    // An unclosed tag is text, not a block.
    let prev = json!({"type":"compaction","summary":"notes\n<read-files>\nhalf"});
    let s = build(&input(&c.entries, Some(&prev)));
    assert!(
        s.text
            .contains("## Previous summary\nnotes\n<read-files>\nhalf\n\n## Activity")
    );
}

#[test]
fn summaries_written_before_flattening_are_flattened_when_carried() {
    // The nested layout of earlier versions: a previous summary inside a previous summary,
    // activity headings without their span.
    let old = "[Offline compaction by clawkeeper 0.0.0 at 2026-03-02T00:00:00.000Z; no model was used; facts below are extracted mechanically.]\n\n## Framing request\n> Build it\n\n## Previous summary\n## Previous summary\nmodel text\n\n## Activity\n- Messages summarized: 4 (user 2, assistant 2); 2026-03-01T01:00:00.000Z to 2026-03-01T02:00:00.000Z\n\n## Tools called\n- read ×1\n\n## Activity\n- Messages summarized: 6 (user 3, assistant 3); 2026-03-01T03:00:00.000Z to 2026-03-01T04:00:00.000Z\n\n<read-files>\na.rs\n</read-files>";
    let prev = json!({"type":"compaction","summary":old});
    let mut c = PathBuilder::default();
    c.user("next step");
    c.assistant_text("ok");
    let s = build(&input(&c.entries, Some(&prev)));
    let t = &s.text;
    assert_eq!(t.matches("## Previous summary").count(), 1, "{t}");
    assert!(t.contains("## Previous summary\nmodel text\n\n### Activity (2026-03-01T01:00:00.000Z to 2026-03-01T02:00:00.000Z)\n- Messages summarized: 4"), "{t}");
    assert!(t.contains("### Tools called\n- read ×1\n\n### Activity (2026-03-01T03:00:00.000Z to 2026-03-01T04:00:00.000Z)\n"), "{t}");
    assert_eq!(s.read_files, vec!["a.rs"]);
}

/// Tool results the summary builder takes from the index (see
/// `SummaryBuilder::push_from_index`) give the summary that reading their lines gives, however
/// `isError`, the role and the image blocks are spelled.
#[test]
fn tool_results_taken_from_the_index_summarise_as_their_lines() {
    use crate::compact::pruned;
    use crate::transcript::Index;
    let hostile = [
        r#"{"role":"toolResult","toolCallId":"c1","toolName":"exec","content":[{"type":"text","text":"boom"}],"isError":"true"}"#,
        r#"{"role":"toolResult","toolCallId":"c2","toolName":"exec","content":[{"type":"text","text":"boom"}],"isError":1}"#,
        r#"{"role":"toolResult","toolCallId":"c3","toolName":"exec","content":[{"type":"text","text":"x"}],"isError":true,"isError":false}"#,
        r#"{"role":"toolResult","toolCallId":"c4","toolName":"exec","content":[{"type":"text","text":"x"}],"isError":false,"isError":true}"#,
        r#"{"role":"toolResult","toolCallId":"c5","toolName":"exec","content":[{"type":"text","text":"x"}],"is\u0045rror":true}"#,
        r#"{"role":"toolResult","toolCallId":"c6","content":[{"type":"im\u0061ge","data":"QQ=="},"img",{"type":"image"},{"type":"image","type":"text","text":"t"}]}"#,
        r#"{"role":"toolResult","toolCallId":"c7","content":"plain text with an \"image\""}"#,
        r#"{"role":"toolResult","toolCallId":"c8","content":{"type":"image","data":"QQ=="}}"#,
        r#"{"role":"user","role":"toolResult","toolCallId":"c9","content":[{"type":"image","data":"QQ=="}]}"#,
        r#"{"role":"toolResult","role":"user","content":"a user after all"}"#,
        r#"{"role":"tool\u0052esult","toolCallId":"c10","content":[{"type":"text","text":"escaped role"}],"isError":null}"#,
        r#"{"role":"toolResult","toolCallId":"c11","toolName":"read","details":{"status":"failed","exitCode":2},"content":[],"isError":true}"#,
    ];
    let mut rng = Rng::new(77);
    let (mut compared, mut spelled) = (0, 0);
    for case in 0..120 {
        let mut b = PathBuilder::random(&mut rng, 1 + case % 7);
        for _ in 0..rng.below(8) {
            let m = if rng.chance(50) {
                serde_json::from_str(hostile[rng.below(hostile.len() as u64) as usize]).unwrap()
            } else {
                crate::compact::testgen::message(&mut rng, 1_772_442_000_000)
            };
            b.message(m);
            if rng.chance(30) {
                b.assistant_text(&rng.text(40));
            }
        }
        // The hostile messages are written as they are spelled (escapes, repeated keys).
        let mut text = String::new();
        for e in &b.entries {
            let mut line = crate::jsjson::to_string_compact(e);
            if let Some(m) = e.get("message") {
                for h in hostile {
                    let v: Value = serde_json::from_str(h).unwrap();
                    if v.get("toolCallId") == m.get("toolCallId")
                        && v.get("content") == m.get("content")
                    {
                        let written = crate::jsjson::to_string_compact(m);
                        line = line.replacen(&written, h, 1);
                        spelled += 1;
                    }
                }
            }
            text.push_str(&line);
            text.push('\n');
        }
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let context: Vec<usize> = (0..index.entries.len())
            .filter(|&i| index.entries[i].context())
            .collect();
        let parse = |i: usize| {
            pruned::parse(lines[index.entries[i].line()].as_bytes(), &pruned::SUMMARY).unwrap()
        };
        let (mut read, mut taken) = (SummaryBuilder::default(), SummaryBuilder::default());
        for (k, &i) in context.iter().enumerate() {
            read.push(&parse(i));
            let end = k == 0 || k + 1 == context.len();
            if end || !taken.push_from_index(&index.entries[i]) {
                taken.push(&parse(i));
            } else {
                compared += 1;
            }
        }
        let now = "2026-03-03T00:00:00.000Z";
        assert_eq!(
            finish(read, None, None, "g", now),
            finish(taken, None, None, "g", now),
            "{text}"
        );
    }
    assert!(compared > 300, "{compared}");
    assert!(spelled > 100, "{spelled}");
}
