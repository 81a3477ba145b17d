//! `clawkeeper cleanup` beside the reference on what an apply prints (the human summary and
//! the `[sessions/store]` log lines, in enforce and warn mode, with `--json` and a quieter
//! console level) and on how the command line is read (`--dry-run --enforce`, repeated
//! options, values starting with `-`, usage errors), plus the override flags' refusals.

use crate::cleanup::{compare, entry, mixed_env};
use crate::util::*;

#[test]
fn applied_text_and_log_lines_match_the_reference() {
    let env = TestEnv::new();
    env.write_config(
        r#"{ session: { maintenance: { maxEntries: 3, pruneAfter: "7d", maxDiskBytes: "4kb", highWaterBytes: "3kb" } } }"#,
    );
    let mut members = Vec::new();
    for i in 0..6 {
        members.push(format!(
            "\"agent:main:direct:p{i}\": {}",
            entry(&format!("s{i}"), (i + 1) * HOUR, "")
        ));
        env.file(
            &format!("s{i}.jsonl"),
            &format!("{{\"type\":\"message\"}}\n{}\n", "x".repeat(500)),
            (i + 1) * HOUR,
        );
    }
    members.push(format!(
        "\"agent:main:explicit:model-run-0123abcd-0000-4000-8000-0123456789ab\": {}",
        entry("probe", 2 * DAY, "")
    ));
    members.push(format!("\"agent:main:old\": {}", entry("old", 9 * DAY, "")));
    env.transcript("probe", 2 * DAY);
    env.transcript("old", 9 * DAY);
    env.write_store(&format!("{{\n  {}\n}}", members.join(",\n  ")));
    let warn = env.duplicate();
    warn.write_config(
        r#"{ session: { maintenance: { mode: "warn", maxEntries: 3, maxDiskBytes: "4kb" } } }"#,
    );
    let warn_json = warn.duplicate();
    let quiet = env.duplicate();
    quiet.write_config(
        r#"{ logging: { consoleLevel: "warn" }, session: { maintenance: { maxEntries: 3, maxDiskBytes: "4kb" } } }"#,
    );
    let json = env.duplicate();
    // Enforce, human text: every step logs, before the summary.
    let Some(out) = compare(&env, &["--store", "{STORE}", "--enforce"]) else {
        return;
    };
    assert!(
        out.contains("Applied maintenance. Current entries:"),
        "{out}"
    );
    let o = json.run(&[
        "cleanup",
        "--store",
        json.store_path().to_str().unwrap(),
        "--json",
    ]);
    let logged = stderr(&o);
    for line in [
        "[sessions/store] pruned stale gateway model-run session entries",
        "[sessions/store] pruned stale session entries",
        "[sessions/store] capped session entry count",
    ] {
        assert!(logged.contains(line), "{line} not on stderr: {logged}");
    }
    assert!(!stdout(&o).contains("[sessions/store]"));
    compare(&json, &["--store", "{STORE}", "--json"]);
    // Warn mode: the active-session warning and the budget warning, on stderr.
    compare(
        &warn,
        &["--store", "{STORE}", "--active-key", "agent:main:direct:p5"],
    );
    compare(&warn_json, &["--store", "{STORE}", "--json"]);
    // logging.consoleLevel = warn keeps the info lines quiet.
    compare(&quiet, &["--store", "{STORE}", "--enforce"]);
}

#[test]
fn command_line_quirks_match_the_reference() {
    let env = mixed_env();
    let warn = env.duplicate();
    warn.write_config(r#"{ session: { maintenance: { mode: "warn" } } }"#);
    let cases: [&[&str]; 11] = [
        &["--store", "{STORE}", "--dry-run", "--enforce"],
        &["--store", "{STORE}", "--dry-run", "--dry-run", "--json"],
        &[
            "--store",
            "nowhere/sessions.json",
            "--store",
            "{STORE}",
            "--dry-run",
            "--json",
        ],
        &["--store", "{STORE}", "--dry-run", "--active-key", "--json"],
        &["--store", "{STORE}", "--dry-run", "--active-key="],
        &["--store", "{STORE}", "--dry-run", "--active-key"],
        &["--store", "{STORE}", "--dry-run", "--bogus"],
        &["--store", "{STORE}", "--dry-run", "extra"],
        &["--store", "{STORE}", "--dry-run", "--json=1"],
        &["--store", "{STORE}", "--dry-run", "--fix-missing=yes"],
        &["--dry-run", "--store"],
    ];
    for args in cases {
        if compare(&env, args).is_none() {
            return;
        }
    }
    // --dry-run wins over --enforce, which still sets the previewed mode.
    let out = compare(&warn, &["--store", "{STORE}", "--dry-run", "--enforce"]).unwrap();
    assert!(out.contains("Maintenance mode: enforce"), "{out}");
    compare(&warn, &["--store", "{STORE}", "--dry-run", "--json"]);
}

#[test]
fn override_flags_refuse_what_the_config_schema_refuses() {
    let env = mixed_env();
    for (flag, value) in [
        ("--max-entries", "0"),
        ("--prune-after", "soon"),
        ("--reset-archive-retention", "true"),
        ("--max-disk", "plenty"),
        ("--high-water", "lots"),
    ] {
        let store = env.store_path();
        let o = env.run(&[
            "cleanup",
            "--store",
            store.to_str().unwrap(),
            "--dry-run",
            flag,
            value,
        ]);
        assert_eq!(o.status.code(), Some(1), "{flag} {value}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{flag}: {}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}
