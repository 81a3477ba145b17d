//! The README is checked against the program: every `clawkeeper …` line in it parses, the cron
//! line and the systemd units are valid (`systemd-analyze verify` where installed) and their
//! commands run on a copy of the demo, and each `--json` example has the fields the command
//! prints.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use serde_json::Value;

use crate::demo::demo_copy;
use crate::generator::generate_long;
use crate::util::{DAY, TestEnv, clawkeeper_bin, now_ms, stderr};

fn readme() -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

/// Fenced code blocks as `(language, body)`.
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(lang)) => cur = Some((lang.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => out.push(cur.take().unwrap()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// Split a command line into words the way `sh` would for these simple cases: quotes group,
/// `#` starts a comment, and a redirection or pipe ends the command.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (None, '#' | '>' | '|' | ';') => break,
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                has = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn every_command_line_in_the_readme_parses() {
    let mut n = 0;
    for (lang, body) in blocks(&readme()) {
        if lang != "sh" {
            continue;
        }
        for line in body.lines().filter(|l| l.starts_with("clawkeeper ")) {
            let w = words(line);
            if let Err(e) = clawkeeper::cli::Cli::try_parse_from(&w) {
                panic!("README line does not parse: {line}\n{e}");
            }
            n += 1;
        }
    }
    assert!(n >= 15, "only {n} command lines found");
    // Every subcommand has an example.
    let text = readme();
    for sub in [
        "cleanup",
        "prune-noreply",
        "strip-images",
        "compact",
        "inspect",
        "completions",
    ] {
        assert!(
            text.contains(&format!("clawkeeper {sub} ")),
            "no example of {sub}"
        );
    }
}

/// A state dir for the nightly jobs: agent `main` with 12 entries and generated transcripts
/// (silent replies and images to remove), two of them older than the default `pruneAfter`,
/// so `cleanup` removes fewer than 20% of the entries. Returns the state dir.
fn nightly_state(env: &TestEnv) -> PathBuf {
    let dir = env.sessions_dir("main");
    let mut store = serde_json::Map::new();
    for i in 0..12u64 {
        let id = format!("night-{i}");
        let age = if i < 2 { 60 * DAY } else { i as i64 * 1000 };
        store.insert(
            format!("agent:main:telegram:direct:{}", 500 + i),
            serde_json::json!({"sessionId": id, "updatedAt": now_ms() - age}),
        );
        fs::write(
            dir.join(format!("{id}.jsonl")),
            generate_long(300 + i, 60).bytes,
        )
        .unwrap();
    }
    fs::write(
        dir.join("sessions.json"),
        serde_json::to_string_pretty(&Value::Object(store)).unwrap(),
    )
    .unwrap();
    env.state()
}

/// What `inspect` says about the nightly state: (entries, prune-noreply bytes left,
/// strip-images bytes left with `--keep-turns 3`).
fn after_nightly(env: &TestEnv) -> (u64, i64, i64) {
    let (code, v) = env.run_json(&["inspect", "--no-cleanup", "--keep-turns", "3"]);
    assert_eq!(code, 0, "{v}");
    let s = &v["stores"][0];
    (
        s["entries"].as_u64().unwrap(),
        s["reclaimable"]["prune-noreply"].as_i64().unwrap(),
        s["reclaimable"]["strip-images"].as_i64().unwrap(),
    )
}

/// The nightly state has work for every step: stale entries, silent replies, old images and
/// media references (whose replacement by the runtime's longer marker can outweigh what the
/// small generated images free, so the strip figure is only non-zero).
fn assert_nightly_work(env: &TestEnv) {
    let (entries, prunable, strippable) = after_nightly(env);
    assert_eq!(entries, 12);
    assert!(prunable > 0, "no silent replies to prune");
    assert!(strippable != 0, "no images or media references to strip");
}

/// Run a README command (its words after `clawkeeper`) on a copy of the demo.
fn run_on_demo(env: &TestEnv, demo: &Path, args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let config = demo.join("openclaw.json");
    env.run_with_env(
        &args,
        &[
            ("OPENCLAW_STATE_DIR", demo.to_str().unwrap()),
            ("OPENCLAW_CONFIG_PATH", config.to_str().unwrap()),
        ],
    )
}

fn unit(kind: &str) -> String {
    blocks(&readme())
        .into_iter()
        .find(|(lang, body)| lang == "ini" && body.contains(&format!("[{kind}]")))
        .unwrap_or_else(|| panic!("no unit with [{kind}] in the README"))
        .1
}

#[test]
fn systemd_units_verify_and_their_commands_run() {
    let service = unit("Service");
    let timer = unit("Timer");
    let env = TestEnv::new();
    nightly_state(&env);
    assert_nightly_work(&env);
    // The commands, as systemd would run them (%% is a literal %), with exit 4 a success.
    let mut ran = 0;
    for line in service.lines() {
        let Some(cmd) = line.strip_prefix("ExecStart=") else {
            continue;
        };
        let w = words(&cmd.replace("%%", "%"));
        assert_eq!(w[0], "/usr/local/bin/clawkeeper");
        let args: Vec<&str> = w[1..].iter().map(String::as_str).collect();
        let out = env.run(&args);
        assert!(
            matches!(out.status.code(), Some(0 | 4)),
            "{cmd}: {:?}\n{}",
            out.status,
            stderr(&out)
        );
        ran += 1;
    }
    assert_eq!(ran, 1);
    assert!(service.contains("SuccessExitStatus=4"));
    assert_eq!(
        after_nightly(&env),
        (10, 0, 0),
        "two stale entries, every silent run and every old image gone"
    );
    // systemd's own check, with the binary and the man pages where the units expect them.
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man/man1");
    fs::create_dir_all(&man).unwrap();
    for e in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("man")).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), man.join(e.file_name())).unwrap();
    }
    let units: Vec<PathBuf> = [
        (
            "clawkeeper-maintenance.service",
            service.replace("/usr/local/bin/clawkeeper", clawkeeper_bin()),
        ),
        ("clawkeeper-maintenance.timer", timer),
    ]
    .iter()
    .map(|(name, text)| {
        let p = dir.path().join(name);
        fs::write(&p, text).unwrap();
        p
    })
    .collect();
    match Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .env("MANPATH", dir.path().join("man"))
        .output()
    {
        Ok(out) => assert!(
            out.status.success() && out.stderr.is_empty(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        ),
        Err(_) => eprintln!("systemd-analyze not installed: units not verified"),
    }
}

/// Whether a cron field is `*` or numbers in `lo..=hi` (with `,`, `-` and `/`).
fn cron_field_ok(f: &str, lo: u32, hi: u32) -> bool {
    f.split(',').all(|part| {
        let (range, step) = part.split_once('/').unwrap_or((part, "1"));
        let step_ok = step.parse::<u32>().is_ok_and(|s| s > 0);
        let in_range = |s: &str| s.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n));
        let range_ok = range == "*"
            || match range.split_once('-') {
                Some((a, b)) => in_range(a) && in_range(b),
                None => in_range(range),
            };
        step_ok && range_ok
    })
}

/// The README's one cron line (comments and blank lines left out).
fn cron_line() -> String {
    let block = blocks(&readme())
        .into_iter()
        .find(|(lang, _)| lang == "crontab")
        .expect("a crontab block")
        .1;
    let lines: Vec<&str> = block
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(lines.len(), 1, "{block}");
    lines[0].to_owned()
}

#[test]
fn the_cron_line_and_the_systemd_unit_run_the_same_steps() {
    // cron: `;`-separated commands, `\%` a literal `%`; systemd: ExecStart= lines, `%%` one.
    let cron: Vec<Vec<String>> = cron_line()
        .splitn(6, ' ')
        .nth(5)
        .unwrap()
        .replace("\\%", "%")
        .split(';')
        .map(|cmd| {
            let w = words(cmd);
            assert_eq!(w[0], "$HOME/.cargo/bin/clawkeeper", "{cmd}");
            w[1..].to_vec()
        })
        .collect();
    let systemd: Vec<Vec<String>> = unit("Service")
        .lines()
        .filter_map(|l| l.strip_prefix("ExecStart="))
        .map(|cmd| {
            let w = words(&cmd.replace("%%", "%"));
            assert_eq!(w[0], "/usr/local/bin/clawkeeper", "{cmd}");
            w[1..].to_vec()
        })
        .collect();
    assert_eq!(cron, systemd, "the cron line and the systemd unit differ");
    let steps: Vec<&str> = cron.iter().map(|w| w[0].as_str()).collect();
    assert_eq!(steps, ["maintain"]);
}

#[test]
fn the_cron_line_is_valid_and_runs() {
    let line = cron_line();
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    let limits = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)];
    for (f, (lo, hi)) in fields[..5].iter().zip(limits) {
        assert!(cron_field_ok(f, lo, hi), "bad cron field {f:?}");
    }
    // cron passes `\%` as `%`; a bare `%` would end the command.
    let command = fields[5];
    assert!(
        !command.replace("\\%", "").contains('%'),
        "unescaped % in {command}"
    );
    let command = command.replace("\\%", "%");
    let env = TestEnv::new();
    let state = nightly_state(&env);
    assert_nightly_work(&env);
    let bin_dir = env.home().join(".cargo/bin");
    fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(clawkeeper_bin(), bin_dir.join("clawkeeper")).unwrap();
    let out = Command::new("sh")
        .args(["-c", &command])
        .env_clear()
        .env("HOME", env.home())
        .env("PATH", "/usr/bin:/bin")
        .env("OPENCLAW_STATE_DIR", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(
        after_nightly(&env),
        (10, 0, 0),
        "two stale entries, every silent run and every old image gone"
    );
}

/// Every object path (`a.b[].c`) in a JSON value; maps whose keys are data are not descended.
fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    const DATA_KEYED: [&str; 3] = ["storeFields", "files", "kinds"];
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}.{k}");
                out.insert(p.clone());
                if !DATA_KEYED.contains(&k.as_str()) {
                    paths(x, &p, out);
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                paths(x, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn json_examples_have_the_fields_the_commands_print() {
    let env = TestEnv::new();
    let demo = demo_copy(&env);
    let store = demo.join("agents/main/sessions/sessions.json");
    let store = store.to_str().unwrap().to_owned();
    let transcript = demo
        .join("agents/main/sessions/0b4c1d6e-3f5a-4b7c-8d9e-1f2a3b4c5d6e.jsonl")
        .display()
        .to_string();
    let mut seen = 0;
    for (lang, body) in blocks(&readme()) {
        if lang != "json" {
            continue;
        }
        let example: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("README JSON example does not parse: {e}\n{body}"));
        let args: Vec<String> = if example.get("command").is_some() {
            let cmd = example["command"].as_str().unwrap();
            vec![
                cmd.into(),
                "--store".into(),
                store.clone(),
                "--session".into(),
                "agent:main:main".into(),
            ]
        } else if example.get("stores").is_some() {
            vec!["inspect".into(), "--store".into(), store.clone()]
        } else if example.get("transcript").is_some() {
            vec!["inspect".into(), "--transcript".into(), transcript.clone()]
        } else {
            vec![
                "cleanup".into(),
                "--dry-run".into(),
                "--store".into(),
                store.clone(),
            ]
        };
        let mut all = args.clone();
        all.push("--json".into());
        let out = run_on_demo(&env, &demo, &all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let real: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (mut want, mut got) = (BTreeSet::new(), BTreeSet::new());
        paths(&example, "", &mut want);
        paths(&real, "", &mut got);
        // Status counts in `totals` depend on the run.
        let status = |p: &String| {
            ["would-change", "unchanged", "skipped", "changed"]
                .iter()
                .any(|s| p.ends_with(&format!("totals.{s}")))
        };
        want.retain(|p| !status(p));
        got.retain(|p| !status(p));
        assert_eq!(want, got, "README example vs `{}`", args.join(" "));
        seen += 1;
    }
    assert_eq!(seen, 4, "one example per document");
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and
/// `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_link_inside_the_readme_names_a_heading() {
    let text = readme();
    // Headings outside code blocks, as (level, anchor).
    let mut in_code = false;
    let mut headings = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            let title = line.trim_start_matches('#');
            headings.push((line.len() - title.len(), slug(title)));
        }
    }
    let anchors: BTreeSet<&str> = headings.iter().map(|(_, a)| a.as_str()).collect();
    let mut links = 0;
    for part in text.split("](#").skip(1) {
        let anchor = part.split(')').next().unwrap();
        assert!(
            anchors.contains(anchor),
            "no heading for #{anchor}: {anchors:?}"
        );
        links += 1;
    }
    assert!(links >= 10, "only {links} links");
    // The table of contents links to every section.
    let contents = text
        .split("\n## Contents\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Contents section");
    for (_, anchor) in headings.iter().filter(|(level, _)| *level == 2) {
        assert!(
            anchor == "contents" || contents.contains(&format!("](#{anchor})")),
            "the table of contents has no link to #{anchor}"
        );
    }
}

/// A state dir with the usual damage, one agent each: `healthy`; `unparsable` (its
/// `sessions.json` does not parse); `empty` (a 0-byte transcript beside healthy ones);
/// `readonly` (a transcript with mode 0444); `locked` (a transcript a live process holds).
/// Every transcript but the empty one has silent replies and old images. Returns the state
/// dir and the config.
fn troubled_state(env: &TestEnv) -> (PathBuf, PathBuf) {
    let agents = ["healthy", "unparsable", "empty", "readonly", "locked"];
    let list: Vec<Value> = agents
        .iter()
        .map(|a| serde_json::json!({"id": a}))
        .collect();
    env.write_config(&serde_json::json!({"agents": {"list": list}}).to_string());
    for (n, agent) in agents.iter().enumerate() {
        let dir = env.sessions_dir(agent);
        fs::create_dir_all(&dir).unwrap();
        let mut store = serde_json::Map::new();
        for i in 0..3u64 {
            let id = format!("{agent}-{i}");
            store.insert(
                format!("agent:{agent}:s{i}"),
                serde_json::json!({"sessionId": id, "updatedAt": now_ms()}),
            );
            let p = dir.join(format!("{id}.jsonl"));
            fs::write(&p, generate_long(700 + 10 * n as u64 + i, 60).bytes).unwrap();
        }
        let text = if *agent == "unparsable" {
            "{ \"agent:unparsable:s0\": ".to_owned()
        } else {
            serde_json::to_string_pretty(&Value::Object(store)).unwrap()
        };
        fs::write(dir.join("sessions.json"), text).unwrap();
    }
    fs::write(env.sessions_dir("empty").join("empty-1.jsonl"), b"").unwrap();
    let readonly = env.sessions_dir("readonly").join("readonly-0.jsonl");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&readonly, fs::Permissions::from_mode(0o444)).unwrap();
    fs::write(
        env.sessions_dir("locked").join("locked-0.jsonl.lock"),
        format!(
            "{{\"pid\": {}, \"createdAt\": \"2099-01-01T00:00:00.000Z\"}}",
            std::process::id()
        ),
    )
    .unwrap();
    (env.state(), env.config_path())
}

/// What is left to prune and strip in each transcript of the troubled state, by file name.
fn left_to_do(env: &TestEnv) -> Vec<(String, i64, i64)> {
    let mut out = Vec::new();
    for agent in ["healthy", "empty", "readonly", "locked"] {
        for i in 0..3 {
            if agent == "locked" && i == 0 {
                continue;
            }
            let f = env.sessions_dir(agent).join(format!("{agent}-{i}.jsonl"));
            let (code, v) = env.run_json(&[
                "inspect",
                "--transcript",
                f.to_str().unwrap(),
                "--keep-turns",
                "3",
            ]);
            if agent == "empty" && i == 1 {
                assert_eq!(code, 0, "{v}");
                continue;
            }
            let r = &v["transcript"]["reclaimable"];
            out.push((
                format!("{agent}-{i}"),
                r["prune-noreply"].as_i64().unwrap(),
                r["strip-images"].as_i64().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn the_nightly_job_maintains_every_healthy_store_and_names_every_problem() {
    let cron = cron_line();
    let command = cron.splitn(6, ' ').nth(5).unwrap().replace("\\%", "%");
    let exec = unit("Service")
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("%%", "%");
    for (how, recipe) in [("cron", command), ("systemd", exec)] {
        let env = TestEnv::new();
        let (state, config) = troubled_state(&env);
        let before = left_to_do(&env);
        let locked = env.sessions_dir("locked").join("locked-0.jsonl");
        let locked_bytes = fs::read(&locked).unwrap();
        assert!(
            before.iter().all(|(_, p, s)| *p > 0 && *s != 0),
            "every transcript has work: {before:?}"
        );
        let bin_dir = env.home().join(".cargo/bin");
        fs::create_dir_all(&bin_dir).unwrap();
        std::os::unix::fs::symlink(clawkeeper_bin(), bin_dir.join("clawkeeper")).unwrap();
        // The lock is held for the whole test: waiting a second instead of a minute shows the
        // same thing without a minute of waiting per step.
        assert!(recipe.contains("--wait-lock 60s"), "{recipe}");
        let recipe = recipe
            .replace("/usr/local/bin/clawkeeper", "$HOME/.cargo/bin/clawkeeper")
            .replace("--wait-lock 60s", "--wait-lock 1s");
        let out = Command::new("sh")
            .args(["-c", &recipe])
            .env_clear()
            .env("HOME", env.home())
            .env("PATH", "/usr/bin:/bin")
            .env("OPENCLAW_STATE_DIR", &state)
            .env("OPENCLAW_CONFIG_PATH", &config)
            .output()
            .unwrap();
        // The most serious outcome: the unparsable store (3) outranks the lock (4).
        assert_eq!(out.status.code(), Some(3), "{how}: {}", stderr(&out));
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 3, "{how}: one line per problem:\n{err}");
        assert!(lines.iter().all(|l| l.starts_with("clawkeeper: ")), "{err}");
        let named = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
        assert_eq!(
            named("agents/unparsable/sessions/sessions.json"),
            1,
            "{err}"
        );
        assert_eq!(named("agents/empty/sessions/empty-1.jsonl"), 1, "{err}");
        assert_eq!(named("agents/locked/sessions/locked-0.jsonl"), 1, "{err}");
        // Every healthy transcript was maintained; only the locked one is left as it was.
        for (name, prune, strip) in left_to_do(&env) {
            assert_eq!((prune, strip), (0, 0), "{how}: {name} maintained");
        }
        assert_eq!(
            fs::read(&locked).unwrap(),
            locked_bytes,
            "{how}: in use, untouched"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(env.sessions_dir("readonly").join("readonly-0.jsonl"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o444,
            "{how}: the read-only transcript keeps its mode"
        );
    }
}
