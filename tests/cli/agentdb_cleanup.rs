//! `cleanup` on SQLite-era agent databases against the reference releases (2026.9.6, 2026.9.5,
//! 2026.8.2) on copies of the same database: the dry-run document and text byte for byte
//! (paths normalised), and for `--enforce` the document (the disk-budget byte figures, which
//! count the WAL, included) and the database content afterwards, table by table and row by row
//! (timestamps of the run normalised; the zstd archive blobs compared by SHA-256 of their
//! bytes), with the files of `sessions/`.
//!
//! The databases are the demo imported by each release's own doctor, and generated JSON-era
//! stores imported the same way, then aged with SQL (`CLAWKEEPER_DBCLEANUP_CASES`, default 8;
//! `CLAWKEEPER_DBCLEANUP_SEED` runs one seed, `CLAWKEEPER_DBCLEANUP_KEEP` keeps its state dir).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Value, json};

use crate::agentdb::{
    copy_demo, damage_an_index_page, database, env_with_state, imported, read_only, sqlite_import,
};
use crate::storegen::{self, Rng};
use crate::util::{
    Release, SQLITE_FIRST, SQLITE_LATEST, SQLITE_MID, TestEnv, copy_dir, hermetic, oracle_path_of,
    stderr, stdout,
};

/// Run the reference's `sessions cleanup` in `env`.
pub fn reference(release: Release, env: &TestEnv, args: &[&str]) -> Output {
    let mut cmd = Command::new(release.wrapper());
    hermetic(&mut cmd);
    cmd.arg("sessions")
        .arg("cleanup")
        .args(args)
        .current_dir(env.work())
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home());
    cmd.output().unwrap()
}

fn ours(env: &TestEnv, args: &[&str]) -> Output {
    let mut all = vec!["cleanup"];
    all.extend_from_slice(args);
    env.run(&all)
}

fn normalized(text: &str, env: &TestEnv) -> String {
    text.replace(&env.root().display().to_string(), "ROOT")
}

/// The database and `sessions/` of `env` as sorted lines: every row of every table but the
/// FTS shadow tables and statistics, with values at or after `since` (ms) shown as `NOW`,
/// archive-name stamps as `STAMP` and blobs by SHA-256; the files with size, hash and mode.
/// `since` is when the run (or runs) whose times are `NOW` started, read just before it was
/// spawned: a time written before it (a template's own rows) stays as it is.
pub fn dump(env: &TestEnv, since: i64) -> Vec<String> {
    let conn = read_only(&database(env));
    let stamp = regex::Regex::new(r"\.deleted\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z\.").unwrap();
    let archived = regex::Regex::new(r#""archivedAt":(\d{13})"#).unwrap();
    let norm_text = |s: &str| {
        let s = stamp.replace_all(s, ".deleted.STAMP.").into_owned();
        archived
            .replace_all(&s, |c: &regex::Captures| {
                let v: i64 = c[1].parse().unwrap();
                if v >= since {
                    "\"archivedAt\":NOW".to_string()
                } else {
                    c[0].to_string()
                }
            })
            .into_owned()
    };
    let mut out = Vec::new();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for t in tables {
        if (t.contains("_fts") && t != "session_transcript_fts_rows") || t.starts_with("sqlite_") {
            continue;
        }
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let cells: Vec<String> = (0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Null => "null".into(),
                    rusqlite::types::ValueRef::Integer(v) => {
                        if v >= since && v < since + 3_600_000 {
                            "NOW".into()
                        } else {
                            v.to_string()
                        }
                    }
                    rusqlite::types::ValueRef::Real(v) => v.to_string(),
                    rusqlite::types::ValueRef::Text(s) => norm_text(&String::from_utf8_lossy(s)),
                    rusqlite::types::ValueRef::Blob(b) => {
                        format!("blob:{}", storegen::sha256_hex(b))
                    }
                })
                .collect();
            out.push(format!("{t}: {}", cells.join(" | ")));
        }
    }
    let fts: i64 = conn
        .query_row("SELECT count(*) FROM session_transcript_fts", [], |r| {
            r.get(0)
        })
        .unwrap_or(-1);
    out.push(format!("fts rows: {fts}"));
    let sessions = env.state().join("agents/main/sessions");
    if let Ok(rd) = std::fs::read_dir(&sessions) {
        for e in rd.flatten() {
            let meta = e.metadata().unwrap();
            if !meta.is_file() {
                continue;
            }
            use std::os::unix::fs::PermissionsExt;
            let bytes = std::fs::read(e.path()).unwrap();
            out.push(format!(
                "file {} {} {} {:o}",
                norm_text(&e.file_name().to_string_lossy()),
                bytes.len(),
                storegen::sha256_hex(&bytes),
                meta.permissions().mode() & 0o7777
            ));
        }
    }
    out.sort();
    out
}

/// Two lines of a text report are the same, or two rows of the action table whose Age cells
/// (which depend on when each program ran) differ by one rounding step.
fn same_row(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (ca, cb): (Vec<&str>, Vec<&str>) = (a.split('│').collect(), b.split('│').collect());
    if ca.len() != 7 || ca.len() != cb.len() {
        return false;
    }
    let age = |s: &str| -> Option<(i64, char)> {
        let t = s.trim();
        if t == "just now" {
            return Some((0, 'm'));
        }
        let t = t.strip_suffix(" ago")?;
        let unit = t.chars().last()?;
        Some((t[..t.len() - 1].parse().ok()?, unit))
    };
    (0..7).all(|i| {
        ca[i] == cb[i]
            || (i == 3
                && match (age(ca[i]), age(cb[i])) {
                    (Some((x, u)), Some((y, v))) => u == v && (x - y).abs() <= 1,
                    _ => false,
                })
    })
}

/// The first differing line of two dumps, with context.
#[track_caller]
pub fn same_lines(what: &str, want: &[String], got: &[String]) {
    if want == got {
        return;
    }
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).take(8).collect();
    let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).take(8).collect();
    if missing.is_empty() && extra.is_empty() {
        panic!("{what}: the same lines in another order or number:\n{want:#?}\n{got:#?}");
    }
    panic!("{what}: the reference has\n{missing:#?}\nclawkeeper has\n{extra:#?}");
}

/// One comparison: `make` builds two identical envs; the reference runs on the first,
/// clawkeeper on the second, with `args`.
/// Run the reference on `a` and clawkeeper on `b` with `args` and assert the same outcome;
/// the reference's stdout (normalised) is returned.
pub fn compare(release: Release, a: &TestEnv, b: &TestEnv, args: &[&str], what: &str) -> String {
    let db_a = database(a).display().to_string();
    let db_b = database(b).display().to_string();
    let mut args_a: Vec<&str> = vec!["--store", &db_a];
    args_a.extend_from_slice(args);
    let mut args_b: Vec<&str> = vec!["--store", &db_b];
    args_b.extend_from_slice(args);
    let since = storegen::now_ms();
    let want = reference(release, a, &args_a);
    let got = ours(b, &args_b);
    let what = format!("{} {what} {args:?}", release.version);
    assert_eq!(
        want.status.code(),
        got.status.code(),
        "{what}: exit codes; reference stderr: {}\nclawkeeper stderr: {}",
        stderr(&want),
        stderr(&got)
    );
    let (w, g) = (normalized(&stdout(&want), a), normalized(&stdout(&got), b));
    let json = args.contains(&"--json");
    let enforce = !args.contains(&"--dry-run");
    if json && enforce {
        let wv: Value = serde_json::from_str(&w).unwrap_or_else(|_| panic!("{what}: {w}"));
        let gv: Value = serde_json::from_str(&g).unwrap_or_else(|_| panic!("{what}: {g}"));
        assert_eq!(wv, gv, "{what}");
    } else {
        let (wl, gl): (Vec<String>, Vec<String>) = (
            w.lines().map(str::to_string).collect(),
            g.lines().map(str::to_string).collect(),
        );
        let close = wl.len() == gl.len() && wl.iter().zip(&gl).all(|(a, b)| same_row(a, b));
        if !close {
            same_lines(&what, &wl, &gl);
        }
    }
    if enforce {
        same_lines(&what, &dump(a, since), &dump(b, since));
    }
    w
}

/// Two copies of the demo imported by `release`, with `config`.
fn demo_pair(release: Release, config: &str) -> Option<(TestEnv, TestEnv)> {
    let a = imported(release)?;
    let b = imported(release)?;
    a.write_config(config);
    b.write_config(config);
    Some((a, b))
}

pub const DEMO: &str = r#"{session:{dmScope:"main",maintenance:{mode:"enforce",pruneAfter:"3650d",resetArchiveRetention:"3650d",maxEntries:12,maxDiskBytes:"60kb",highWaterBytes:"40kb"}}}"#;
pub const DEMO_NO_BUDGET: &str =
    r#"{session:{maintenance:{pruneAfter:"3650d",maxEntries:12,maxDiskBytes:false}}}"#;

fn demo_run(release: Release, config: &str, args: &[&str]) {
    let Some((a, b)) = demo_pair(release, config) else {
        return;
    };
    compare(release, &a, &b, args, "demo");
}

#[test]
fn demo_dry_run_matches_2026_9_6() {
    demo_run(SQLITE_LATEST, DEMO, &["--dry-run", "--json"]);
    demo_run(SQLITE_LATEST, DEMO, &["--dry-run"]);
    demo_run(SQLITE_LATEST, "{}", &["--dry-run", "--json"]);
}

#[test]
fn demo_enforce_matches_2026_9_6() {
    demo_run(SQLITE_LATEST, DEMO, &["--enforce", "--json"]);
    // Without a budget the archives stay: their bytes are compared too.
    demo_run(SQLITE_LATEST, DEMO_NO_BUDGET, &["--enforce"]);
}

#[test]
fn demo_matches_2026_8_2() {
    demo_run(SQLITE_FIRST, DEMO, &["--dry-run", "--json"]);
    demo_run(SQLITE_FIRST, DEMO, &["--dry-run"]);
    demo_run(SQLITE_FIRST, DEMO_NO_BUDGET, &["--enforce", "--json"]);
}

#[test]
fn fix_missing_and_fix_dm_scope_match_the_references() {
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        demo_run(
            release,
            DEMO,
            &["--dry-run", "--fix-missing", "--fix-dm-scope"],
        );
        demo_run(
            release,
            DEMO_NO_BUDGET,
            &["--enforce", "--json", "--fix-missing", "--fix-dm-scope"],
        );
    }
}

/// The maintenance settings are trimmed as JavaScript trims them: a BOM, U+2028 and U+3000
/// are whitespace there, NEL (U+0085) is not (Rust's `trim` says the opposite of both). A
/// `pruneAfter` wrapped in a BOM keeps its ten years, with the reference's plan; one after a
/// NEL is no duration, and both programs refuse the config.
#[test]
fn settings_are_trimmed_as_javascript_trims_them() {
    let config = |prune: &str| {
        format!(
            r#"{{session:{{maintenance:{{pruneAfter:{prune},maxEntries:12,maxDiskBytes:"\uFEFF60kb\u2028",highWaterBytes:"40kb"}}}}}}"#
        )
    };
    let run = |prune: &str| {
        let (a, b) = demo_pair(SQLITE_LATEST, &config(prune))?;
        Some(compare(
            SQLITE_LATEST,
            &a,
            &b,
            &["--dry-run", "--json"],
            prune,
        ))
    };
    let Some(plain) = run(r#""3650d""#) else {
        return;
    };
    let bom = run(r#""\uFEFF3650d\uFEFF""#).unwrap();
    let separators = run(r#""\u20283650d\u3000""#).unwrap();
    assert_eq!(bom, plain, "a BOM is trimmed");
    assert_eq!(separators, plain, "U+2028 and U+3000 are trimmed");
    // NEL: invalid in both. (With `--json` the reference also prints its error as a JSON
    // document on stdout; clawkeeper prints it on stderr only, as the JSON-era release does.)
    let (a, b) = demo_pair(SQLITE_LATEST, &config(r#""\u00853650d""#)).unwrap();
    let db = database(&a).display().to_string();
    let want = reference(SQLITE_LATEST, &a, &["--store", &db, "--dry-run", "--json"]);
    let db = database(&b).display().to_string();
    let got = ours(&b, &["--store", &db, "--dry-run", "--json"]);
    assert_eq!(want.status.code(), Some(1), "{}", stderr(&want));
    assert!(
        stderr(&want).contains("session.maintenance.pruneAfter: invalid duration"),
        "{}",
        stderr(&want)
    );
    assert_eq!(got.status.code(), Some(1), "{}", stderr(&got));
    assert!(
        stderr(&got).contains("session.maintenance.pruneAfter: invalid duration"),
        "{}",
        stderr(&got)
    );
}

#[test]
fn demo_matches_2026_9_5() {
    demo_run(SQLITE_MID, DEMO, &["--dry-run", "--json"]);
    demo_run(SQLITE_MID, DEMO_NO_BUDGET, &["--enforce", "--json"]);
}

#[test]
fn warn_mode_still_makes_the_fix_removals_as_the_references_do() {
    // Mode `warn` skips the maintenance and the sweep, but the `--fix-*` removals (and the
    // archives of their transcripts) are made.
    const WARN: &str = r#"{session:{dmScope:"main",maintenance:{mode:"warn",pruneAfter:"3650d",maxEntries:3,maxDiskBytes:false}}}"#;
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        demo_run(
            release,
            WARN,
            &["--json", "--fix-missing", "--fix-dm-scope"],
        );
        demo_run(release, WARN, &["--fix-dm-scope"]);
        demo_run(
            release,
            WARN,
            &["--dry-run", "--fix-missing", "--fix-dm-scope"],
        );
    }
}

/// The demo with its `sessions.json` edited by `edit` (given the store and the sessions
/// directory), imported by `release`, twice, with `config`.
fn demo_edited(
    release: Release,
    config: &str,
    edit: impl Fn(&mut Value, &Path),
) -> Option<(tempfile::TempDir, TestEnv, TestEnv)> {
    let oracle = oracle_path_of(release, "SQLite-era cleanup on an edited demo")?;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    copy_demo(&state);
    let sessions = state.join("agents/main/sessions");
    let store = sessions.join("sessions.json");
    let mut s: Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    edit(&mut s, &sessions);
    std::fs::write(&store, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    sqlite_import(&oracle, &state, None);
    let (a, b) = (env_from(&state, config), env_from(&state, config));
    Some((dir, a, b))
}

/// The demo with a parent chain `subagent:9a3b… → cron:nightly-digest:run:7e1f… (spawnedBy)
/// → cron:nightly-digest → hook:gmail:inbox`.
fn demo_with_parents(
    release: Release,
    config: &str,
) -> Option<(tempfile::TempDir, TestEnv, TestEnv)> {
    demo_edited(release, config, |s, _| {
        s[SUBAGENT]["parentSessionKey"] = json!(CRON_RUN);
        s[CRON_RUN]["spawnedBy"] = json!("agent:main:cron:nightly-digest");
        s["agent:main:cron:nightly-digest"]["parentSessionKey"] =
            json!("agent:main:hook:gmail:inbox");
    })
}

#[test]
fn legacy_compaction_checkpoints_name_session_ids_as_the_references_read_them() {
    // The stale cron run has a checkpoint whose pre-compaction transcript is its own second
    // window (archived and deleted with it); `main` has one naming the cron run's current
    // session, which therefore stays (moved to `main`).
    const STALE: &str =
        r#"{session:{maintenance:{pruneAfter:"3650d",maxEntries:12,maxDiskBytes:false}}}"#;
    const WEEKLY: &str = "agent:main:cron:weekly-report:run:8f2a9b4c-1d3e-4f5a-8b7c-9d0e1f2a3b4c";
    let older = "aaaaaaaa-1111-4222-8333-444444444444";
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        let Some((_dir, a, b)) = demo_edited(release, STALE, |s, sessions| {
            let sid = s[WEEKLY]["sessionId"].as_str().unwrap().to_string();
            let main = s["agent:main:main"]["sessionId"]
                .as_str()
                .unwrap()
                .to_string();
            s[WEEKLY]["compactionCheckpoints"] = json!([{"checkpointId": "c1", "sessionKey": WEEKLY,
                "sessionId": sid, "createdAt": 1457000000000i64, "reason": "manual",
                "preCompaction": {"sessionId": older}, "postCompaction": {"sessionId": sid}}]);
            s["agent:main:main"]["compactionCheckpoints"] = json!([{"checkpointId": "c2",
                "sessionKey": "agent:main:main", "sessionId": main, "createdAt": 1457000000000i64,
                "reason": "manual", "preCompaction": {"sessionId": sid},
                "postCompaction": {"sessionId": main}}]);
            let text = std::fs::read_to_string(sessions.join(format!("{sid}.jsonl"))).unwrap();
            std::fs::write(
                sessions.join(format!("{older}.jsonl")),
                text.replace(&sid, older),
            )
            .unwrap();
        }) else {
            return;
        };
        compare(
            release,
            &a,
            &b,
            &["--enforce", "--json"],
            "compaction checkpoints",
        );
        let conn = Connection::open(database(&b)).unwrap();
        let owner: String = conn
            .query_row(
                "SELECT session_key FROM session_windows WHERE session_id = '8f2a9b4c-1d3e-4f5a-8b7c-9d0e1f2a3b4c'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(owner, "agent:main:main", "{}", release.version);
    }
}

const SUBAGENT: &str = "agent:main:subagent:9a3b0c5d-2e4f-4a6b-9c8d-0e1f2a3b4c5d";
const CRON_RUN: &str = "agent:main:cron:nightly-digest:run:7e1f8a3b-0c2d-4e4f-9a6b-8c9d0e1f2a3b";

#[test]
fn the_active_key_protects_its_parent_chain_in_the_apply_as_the_references_do() {
    // The apply walks the chain (2026.9.x through the `parent_session_key` projection, which
    // is `spawnedBy` when there is no `parentSessionKey`); the preview protects the key only.
    // The key is normalized (upper case here).
    const CAP: &str =
        r#"{session:{maintenance:{pruneAfter:"3650d",maxEntries:3,maxDiskBytes:false}}}"#;
    let active = SUBAGENT.replace("agent:main", "AGENT:Main");
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        for args in [&["--dry-run", "--json"][..], &["--enforce", "--json"][..]] {
            let Some((_dir, a, b)) = demo_with_parents(release, CAP) else {
                return;
            };
            let mut all = args.to_vec();
            all.extend(["--active-key", &active]);
            compare(release, &a, &b, &all, "parent chain");
            if args[0] == "--enforce" {
                let conn = Connection::open(database(&b)).unwrap();
                let kept: i64 = conn
                    .query_row(
                        "SELECT count(*) FROM session_nodes WHERE session_key IN (?1, ?2, \
                         'agent:main:cron:nightly-digest', 'agent:main:hook:gmail:inbox')",
                        [SUBAGENT, CRON_RUN],
                        |r| r.get(0),
                    )
                    .unwrap();
                // 2026.8.x follows `parentSessionKey` only: the `spawnedBy` link ends it.
                let want = if release.version == SQLITE_FIRST.version {
                    2
                } else {
                    4
                };
                assert_eq!(kept, want, "{}", release.version);
            }
        }
    }
}

#[test]
fn the_apply_preserves_entries_that_share_a_session_with_a_fix_removal_as_the_references_do() {
    // 2026.9.x makes the `--fix-*` removals as one lifecycle mutation and plans the maintenance
    // inside it, which preserves every node whose key or session id the mutation holds: in
    // seed 40003's store, `hook:webhook:w18` and a subagent share their sessions with retired
    // direct-message entries, so the apply caps two other entries than the dry run lists.
    // 2026.8.x preserves nothing of the kind.
    const W18: &str = "agent:main:hook:webhook:w18";
    const SUB: &str = "agent:main:subagent:ee4de84f-2be0-4391-aa94-413b6403e16c";
    for release in [SQLITE_LATEST, SQLITE_MID, SQLITE_FIRST] {
        let Some((_dir, template, config, _)) = generated_template(release, 40003) else {
            return;
        };
        let args = ["--enforce", "--json", "--fix-missing", "--fix-dm-scope"];
        let (a, b) = (env_from(&template, &config), env_from(&template, &config));
        compare(release, &a, &b, &args, "seed 40003");
        let dry = ours(
            &env_from(&template, &config),
            &["--dry-run", "--fix-dm-scope"],
        );
        let capped = |key: &str| {
            let short = &key[key.len() - 6..];
            stdout(&dry)
                .lines()
                .any(|l| l.contains("cap-overflow") && l.contains(short))
        };
        assert!(capped(W18) && capped(SUB), "{}", stdout(&dry));
        let conn = Connection::open(database(&b)).unwrap();
        let kept: i64 = conn
            .query_row(
                "SELECT count(*) FROM session_nodes WHERE session_key IN (?1, ?2)",
                [W18, SUB],
                |r| r.get(0),
            )
            .unwrap();
        let want = if release.version == SQLITE_FIRST.version {
            0
        } else {
            2
        };
        assert_eq!(kept, want, "{}", release.version);
    }
}

/// Move the transcripts of `state`'s database older than a day into cold storage with
/// `release`'s own worker pass (2026.9.x), after ageing each window's transcript times to its
/// `updated_at` (an import stamps them with the import time, which keeps them hot). Returns
/// how many transcripts went cold.
pub fn make_cold(release: Release, state: &Path) -> u64 {
    let db = state.join("agents/main/agent/openclaw-agent.sqlite");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "UPDATE session_windows SET transcript_updated_at = updated_at, \
             transcript_observed_at = updated_at",
        )
        .unwrap();
    let oracle = release.wrapper();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/sqlite-cold-storage.mjs");
    let mut cmd = Command::new(crate::util::oracle_node(&oracle));
    hermetic(&mut cmd);
    let out = cmd
        .arg(&script)
        .arg(oracle.parent().unwrap())
        .arg("1")
        .env("OPENCLAW_STATE_DIR", state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout(&out).lines().last().unwrap_or("")).unwrap();
    v["archivedTranscripts"].as_u64().unwrap()
}

#[test]
fn cold_transcripts_are_kept_as_the_references_keep_them() {
    // A removed entry whose transcript is cold keeps its node, cleared, with the window and
    // the cold archive (row and file); `--fix-missing` cannot judge a cold transcript and
    // keeps its entry; a cleared node is no entry for the next run.
    const CAP: &str = r#"{session:{dmScope:"main",maintenance:{pruneAfter:"3650d",maxEntries:3,maxDiskBytes:false}}}"#;
    for release in [SQLITE_LATEST, SQLITE_MID] {
        let Some(template) = imported(release) else {
            return;
        };
        assert!(make_cold(release, &template.state()) > 10);
        for args in [
            &["--dry-run", "--fix-missing"][..],
            &["--enforce", "--json", "--fix-missing", "--fix-dm-scope"][..],
            &["--enforce", "--json"][..],
        ] {
            let (a, b) = (
                env_from(&template.state(), CAP),
                env_from(&template.state(), CAP),
            );
            compare(release, &a, &b, args, "cold storage");
            if args[0] == "--enforce" {
                let conn = Connection::open(database(&b)).unwrap();
                let q = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
                assert!(q("SELECT count(*) FROM session_nodes WHERE entry_json = '{}'") > 0);
                assert_eq!(
                    q("SELECT count(*) FROM session_transcript_cold_archives") as usize,
                    std::fs::read_dir(b.state().join("agents/main/sessions/cold"))
                        .unwrap()
                        .count(),
                    "every cold file keeps its row"
                );
                // The next run sees the cleared nodes as no entries.
                compare(
                    release,
                    &a,
                    &b,
                    &["--enforce", "--json"],
                    "cold storage, again",
                );
            }
        }
    }
}

/// `program args…` run on a terminal `columns` wide (util-linux `script`), without colours;
/// its output from the `Session store:` line on (the reference's banner before it, and
/// stderr, left out). `None` when `script` is not installed.
fn on_terminal(env: &TestEnv, columns: u16, program: &Path, args: &[&str]) -> Option<Vec<String>> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let line: Vec<String> = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| quote(&a))
        .collect();
    let mut cmd = Command::new("script");
    hermetic(&mut cmd);
    let out = cmd
        .arg("-qec")
        .arg(format!(
            "stty cols {columns}; {} 2>/dev/null",
            line.join(" ")
        ))
        .arg("/dev/null")
        .current_dir(env.work())
        .env("NO_COLOR", "1")
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home())
        .output()
        .ok()?;
    let text = normalized(&stdout(&out).replace('\r', ""), env);
    Some(
        text.lines()
            .skip_while(|l| !l.starts_with("Session store:"))
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn the_action_table_is_as_wide_as_the_terminal_as_the_reference_makes_it() {
    let Some((a, b)) = demo_pair(SQLITE_LATEST, DEMO_NO_BUDGET) else {
        return;
    };
    let ours = Path::new(env!("CARGO_BIN_EXE_clawkeeper"));
    for columns in [84u16, 200, 50] {
        let db_a = database(&a).display().to_string();
        let db_b = database(&b).display().to_string();
        let wrapper = SQLITE_LATEST.wrapper();
        let args_a = ["sessions", "cleanup", "--store", &db_a, "--dry-run"];
        let Some(want) = on_terminal(&a, columns, &wrapper, &args_a) else {
            return;
        };
        let got = on_terminal(
            &b,
            columns,
            ours,
            &["cleanup", "--store", &db_b, "--dry-run"],
        )
        .unwrap();
        assert!(want.len() > 20, "{want:#?}");
        let table = |lines: &[String]| lines.iter().find(|l| l.starts_with('┌')).cloned();
        // `max(60, columns)`.
        let width = table(&want).unwrap().chars().count();
        assert_eq!(width, usize::from(columns.max(60)), "{want:#?}");
        let close = want.len() == got.len() && want.iter().zip(&got).all(|(x, y)| same_row(x, y));
        if !close {
            same_lines(&format!("{columns} columns"), &want, &got);
        }
    }
}

#[test]
fn migration_archives_are_out_of_the_sweep_of_the_apply_too() {
    // `*.migrated[.N]` and the doctor's exact `pre-doctor-…-repair-<stamp>.bak` are never
    // scanned; a look-alike `.bak` is, and an old orphan transcript next to them is swept.
    const SWEEP: &str =
        r#"{session:{maintenance:{pruneAfter:"30d",maxEntries:12,maxDiskBytes:false}}}"#;
    let sid = "11111111-2222-4333-8444-555555555555";
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        for args in [&["--dry-run", "--json"][..], &["--enforce", "--json"][..]] {
            let Some((a, b)) = demo_pair(release, SWEEP) else {
                return;
            };
            for env in [&a, &b] {
                let dir = env.state().join("agents/main/sessions");
                for name in [
                    "sessions.json.migrated".to_string(),
                    format!("{sid}.jsonl.migrated.1"),
                    format!("{sid}.jsonl.pre-doctor-branch-repair-2020-01-01T00-00-00-000Z.bak"),
                    format!("{sid}.jsonl.pre-doctor-fix-repair-2020-01-01.bak"),
                    "22222222-2222-4333-8444-555555555555.jsonl".to_string(),
                ] {
                    let p = dir.join(name);
                    std::fs::write(&p, "{\"type\":\"session\"}\n").unwrap();
                    let old = std::time::SystemTime::UNIX_EPOCH
                        + std::time::Duration::from_secs(1_450_000_000);
                    std::fs::File::options()
                        .write(true)
                        .open(&p)
                        .unwrap()
                        .set_modified(old)
                        .unwrap();
                }
            }
            compare(release, &a, &b, args, "migration archives");
        }
    }
}

/// A generated JSON-era state dir: one agent with entries of every kind the rules tell
/// apart, transcripts for each, ages spread from minutes to years.
/// Returns the config and a key with a parent chain (`--active-key` for some seeds).
fn generated_state(seed: u64, dir: &Path) -> (String, Option<String>) {
    let mut rng = Rng::new(seed);
    let now = storegen::now_ms();
    let sessions = dir.join("agents/main/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    const DAY: i64 = 86_400_000;
    let kinds: &[&str] = &[
        "explicit:e{}",
        "dashboard:d{}",
        "explicit:model-run-{uuid}",
        "subagent:{uuid}",
        "cron:job{}",
        "cron:job{}:run:{uuid}",
        "hook:webhook:w{}",
        "acp:{uuid}",
        "main:heartbeat",
        "telegram:direct:{}",
        "signal:direct:+1555000{}",
        "direct:+1555111{}",
        "discord:channel:{}",
        "slack:channel:c0{}:thread:{}.0001",
        "telegram:group:-100{}:topic:{}",
        "whatsapp:default:direct:+1777{}",
    ];
    let labels = ["ops", "Ana", "research", "ops", "Bob"];
    let mut store = serde_json::Map::new();
    let n = rng.range(8, 30);
    let mut ids: Vec<String> = Vec::new();
    // The delivery routes of channel sessions come from a stream of their own, so that the rest
    // of each seed's case is what it was before they were added.
    let mut routes = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let mut add = |key: String, rng: &mut Rng, store: &mut serde_json::Map<String, Value>| {
        if store.contains_key(&key) {
            return;
        }
        let share = !ids.is_empty() && rng.chance(0.05);
        let sid = if share {
            rng.pick(&ids).clone()
        } else {
            rng.uuid()
        };
        let age = rng.log_uniform(60_000, 4000 * DAY);
        let updated = now - age;
        let mut e = json!({"sessionId": sid, "updatedAt": updated});
        let m = e.as_object_mut().unwrap();
        if rng.chance(0.2) {
            m.insert(
                "lastInteractionAt".into(),
                json!(updated + rng.range(0, age / 2)),
            );
        }
        if rng.chance(0.5) {
            m.insert("label".into(), json!(rng.pick(&labels)));
        }
        if rng.chance(0.1) {
            m.insert("pinnedAt".into(), json!(updated - DAY));
        }
        if rng.chance(0.05) {
            m.insert("spawnedBy".into(), json!("agent:main:main"));
        }
        // A legacy compaction history naming another session's id.
        if !ids.is_empty() && rng.chance(0.1) {
            let other = rng.pick(&ids).clone();
            m.insert(
                "compactionCheckpoints".into(),
                json!([{"checkpointId": "c", "sessionId": sid, "createdAt": updated,
                    "reason": "manual", "preCompaction": {"sessionId": other},
                    "postCompaction": {"sessionId": sid}}]),
            );
        }
        // Parent chains, for `--active-key` (the apply protects the chain).
        if !store.is_empty() && rng.chance(0.2) {
            let keys: Vec<String> = store.keys().cloned().collect();
            let field = if rng.chance(0.3) {
                "spawnedBy"
            } else {
                "parentSessionKey"
            };
            m.insert(field.into(), json!(rng.pick(&keys)));
        }
        if rng.chance(0.05) {
            m.insert("modelSelectionLocked".into(), json!(true));
        }
        if rng.chance(0.05) {
            m.insert("status".into(), json!("running"));
        }
        if rng.chance(0.05) {
            m.insert("chatType".into(), json!("group"));
        }
        if rng.chance(0.1) {
            m.insert("model".into(), json!("claude-sonnet-4-5"));
        }
        external_route(&key, &mut routes, m);
        if !share {
            let shape = storegen::transcript::Shape::random(rng);
            let text = storegen::transcript::transcript(rng, &sid, updated - 3_600_000, shape);
            std::fs::write(sessions.join(format!("{sid}.jsonl")), text).unwrap();
            ids.push(sid);
        }
        store.insert(key, e);
    };
    add("agent:main:main".into(), &mut rng, &mut store);
    for i in 0..n {
        let kind = *rng.pick(kinds);
        let mut key = format!("agent:main:{kind}");
        while key.contains("{uuid}") {
            let u = rng.uuid();
            key = key.replacen("{uuid}", &u, 1);
        }
        while key.contains("{}") {
            key = key.replacen("{}", &i.to_string(), 1);
        }
        add(key, &mut rng, &mut store);
    }
    std::fs::write(
        sessions.join("sessions.json"),
        serde_json::to_string_pretty(&Value::Object(store.clone())).unwrap(),
    )
    .unwrap();
    // A random maintenance config, in the keys both eras know.
    let prune = *rng.pick(&["\"3650d\"", "\"30d\"", "\"10d\"", "\"1d\""]);
    let mut parts = vec![format!("pruneAfter:{prune}")];
    if rng.chance(0.8) {
        parts.push(format!("maxEntries:{}", rng.pick(&[3, 5, 8, 12, 50])));
    }
    match rng.below(4) {
        0 => parts.push("maxDiskBytes:false".into()),
        1 => parts.push("maxDiskBytes:\"60kb\"".into()),
        2 => parts.push("maxDiskBytes:\"300kb\",highWaterBytes:\"200kb\"".into()),
        _ => {}
    }
    match rng.below(3) {
        0 => parts.push("archiveDashboardAfter:false".into()),
        1 => parts.push("archiveDashboardAfter:\"1d\"".into()),
        _ => {}
    }
    if rng.chance(0.3) {
        parts.push("preserveRecent:\"2d\"".into());
    }
    if rng.chance(0.15) {
        parts.push("mode:\"warn\"".into());
    }
    let child = store
        .iter()
        .rev()
        .find(|(_, e)| e.get("parentSessionKey").is_some() || e.get("spawnedBy").is_some())
        .map(|(k, _)| k.clone());
    (
        format!("{{session:{{maintenance:{{{}}}}}}}", parts.join(",")),
        child,
    )
}

/// The JSON-era delivery fields a channel session carries (`deliveryContext`, `origin`,
/// `last*`, `chatType`, `displayName`), in the shapes the runtime wrote them, for some of the
/// keys that name a channel peer: the import derives each such entry's conversation, and an
/// entry archived in place derives it again.
fn external_route(key: &str, r: &mut Rng, m: &mut serde_json::Map<String, Value>) {
    let parts: Vec<&str> = key.split(':').collect();
    let (channel, kind, peer) = match parts.get(2..) {
        Some(["telegram", "direct", p]) => ("telegram", "direct", p.to_string()),
        Some(["signal", "direct", p]) => ("signal", "direct", p.to_string()),
        Some(["whatsapp", "default", "direct", p]) => ("whatsapp", "direct", p.to_string()),
        Some(["discord", "channel", p]) => ("discord", "channel", p.to_string()),
        Some(["slack", "channel", p, "thread", _]) => ("slack", "channel", p.to_string()),
        Some(["telegram", "group", p, "topic", _]) => ("telegram", "group", p.to_string()),
        Some(["direct", p]) => (
            *r.pick(&["telegram", "signal", "whatsapp"]),
            "direct",
            p.to_string(),
        ),
        // A session opened elsewhere that replied to a peer: its key names no channel.
        // (2026.8.2 archives such a stale dashboard in place: see
        // `stale_sessions_with_an_external_delivery_are_kept_or_archived_as_the_releases_do`.)
        Some(["explicit" | "dashboard", p]) if r.chance(0.3) => {
            ("telegram", "direct", format!("4{p}"))
        }
        _ => return,
    };
    if !r.chance(0.8) {
        return;
    }
    let to = match kind {
        "direct" => format!("{channel}:{peer}"),
        "channel" => format!("channel:{peer}"),
        _ => format!("{channel}:group:{peer}"),
    };
    let account = *r.pick(&["default", "default", "work", " Ops "]);
    let mut ctx = json!({"channel": channel, "to": to, "accountId": account});
    if let Some(["slack", "channel", _, "thread", t]) | Some(["telegram", "group", _, "topic", t]) =
        parts.get(2..)
    {
        ctx["threadId"] = if r.chance(0.5) { json!(t) } else { json!(7) };
    }
    match r.below(4) {
        // The canonical context only.
        0 => {
            m.insert("deliveryContext".into(), ctx.clone());
        }
        // The legacy `last*` fields only.
        1 => {
            m.insert("lastChannel".into(), ctx["channel"].clone());
            m.insert("lastTo".into(), ctx["to"].clone());
            m.insert("lastAccountId".into(), ctx["accountId"].clone());
        }
        // Both, as the runtime wrote them before the import.
        _ => {
            m.insert("deliveryContext".into(), ctx.clone());
            m.insert("lastChannel".into(), ctx["channel"].clone());
            m.insert("lastTo".into(), ctx["to"].clone());
        }
    }
    if r.chance(0.7) {
        let from = match kind {
            "direct" => to.clone(),
            _ => format!("{channel}:user{}", r.below(9)),
        };
        let mut origin = json!({"provider": channel, "from": from, "to": format!("{channel}:bot"),
            "chatType": kind, "accountId": account});
        if r.chance(0.3) {
            origin["label"] = json!(format!("Peer {peer}"));
        }
        m.insert("origin".into(), origin);
    }
    if r.chance(0.6) {
        m.insert("chatType".into(), json!(kind));
    }
    if r.chance(0.4) {
        m.insert("displayName".into(), json!(format!("{channel} {peer}")));
    }
}

/// Age an imported database with SQL the way a long-running runtime leaves it: some entries
/// moved back in time, in `entry_json` and its `updated_at` projection alike.
fn age_with_sql(db: &Path, seed: u64) {
    let conn = Connection::open(db).unwrap();
    let shift = (seed % 5 + 1) as i64 * 9 * 86_400_000;
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE;
         CREATE TEMP TABLE valid AS SELECT session_key, entry_valid FROM session_nodes;
         UPDATE session_nodes SET
           entry_json = json_set(entry_json, '$.updatedAt', json_extract(entry_json, '$.updatedAt') - {shift}),
           updated_at = updated_at - {shift}
         WHERE (rowid % 3) = {} AND json_extract(entry_json, '$.updatedAt') IS NOT NULL;
         UPDATE session_nodes SET entry_valid = (SELECT v.entry_valid FROM valid v WHERE v.session_key = session_nodes.session_key);
         DELETE FROM session_canonical_validation_pending
           WHERE session_key IN (SELECT session_key FROM valid);
         COMMIT;",
        seed % 3
    ))
    .unwrap();
}

/// Import a generated state dir with `release`'s doctor into a template.
pub fn generated_template(
    release: Release,
    seed: u64,
) -> Option<(tempfile::TempDir, PathBuf, String, Option<String>)> {
    let oracle = oracle_path_of(release, "generated SQLite-era cleanup")?;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (config, child) = generated_state(seed, &state);
    std::fs::write(state.join("openclaw.json"), &config).unwrap();
    sqlite_import(&oracle, &state, None);
    let db = state.join("agents/main/agent/openclaw-agent.sqlite");
    if seed.is_multiple_of(2) && release.version != SQLITE_FIRST.version {
        age_with_sql(&db, seed);
    }
    // Some cases with cold transcripts (2026.9.x's Gateway worker moves them).
    if seed % 7 == 4 && release.version != SQLITE_FIRST.version {
        make_cold(release, &state);
    }
    // `CLAWKEEPER_DBCLEANUP_KEEP=<dir>` keeps each case's state dir as `<dir>/seed-<seed>`, to
    // run both tools on a failing case by hand.
    if let Some(keep) = std::env::var_os("CLAWKEEPER_DBCLEANUP_KEEP") {
        let to = Path::new(&keep).join(format!("seed-{seed}"));
        let _ = std::fs::remove_dir_all(&to);
        copy_dir(&state, &to);
    }
    Some((dir, state, config, child))
}

pub fn env_from(template: &Path, config: &str) -> TestEnv {
    let env = env_with_state(template);
    env.write_config(config);
    env
}

pub fn case_count() -> u64 {
    std::env::var("CLAWKEEPER_DBCLEANUP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

fn generated_case(seed: u64) {
    // Every third case runs against 2026.8.2 (schema 19), the others against 2026.9.6.
    let release = if seed % 3 == 2 {
        SQLITE_FIRST
    } else {
        SQLITE_LATEST
    };
    generated_case_on(release, seed);
}

fn generated_case_on(release: Release, seed: u64) {
    let Some((_dir, template, config, child)) = generated_template(release, seed) else {
        return;
    };
    let what = format!("seed {seed} config {config}");
    let mut active: Vec<String> = Vec::new();
    if seed % 4 == 1 {
        let key = child.unwrap_or_else(|| "agent:main:explicit:e1".into());
        active = vec!["--active-key".into(), key];
    }
    if seed % 5 == 3 {
        active.extend(["--fix-missing".to_string(), "--fix-dm-scope".to_string()]);
    }
    let active: Vec<&str> = active.iter().map(String::as_str).collect();
    // In warn mode an apply without `--enforce` makes only the `--fix-*` removals.
    let warn = config.contains("warn");
    for args in [
        &["--dry-run", "--json"][..],
        &["--dry-run"][..],
        &["--enforce", "--json"][..],
        &["--json"][..],
    ] {
        if args == ["--json"] && !warn {
            continue;
        }
        let (a, b) = (env_from(&template, &config), env_from(&template, &config));
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(&active);
        compare(release, &a, &b, &all, &what);
    }
}

#[test]
fn generated_cases_match_the_references() {
    // `CLAWKEEPER_DBCLEANUP_SEED` alone runs that seed; with `CLAWKEEPER_DBCLEANUP_CASES`, that
    // many seeds from it. Every case runs; the failing seeds are listed at the end.
    let seed = std::env::var("CLAWKEEPER_DBCLEANUP_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let (first, n) = match seed {
        Some(s) if std::env::var("CLAWKEEPER_DBCLEANUP_CASES").is_err() => (s, 1),
        Some(s) => (s, case_count()),
        None => (7000, case_count()),
    };
    let failed = std::sync::Mutex::new(Vec::new());
    // Two workers: the references run single-threaded, and the machine has two cores.
    std::thread::scope(|sc| {
        for w in 0..2u64 {
            let failed = &failed;
            sc.spawn(move || {
                for seed in (first..first + n).filter(|s| s % 2 == w) {
                    if std::panic::catch_unwind(|| generated_case(seed)).is_err() {
                        failed.lock().unwrap().push(seed);
                    }
                }
            });
        }
    });
    let mut failed = failed.into_inner().unwrap();
    failed.sort_unstable();
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
}

#[test]
fn generated_cases_match_2026_9_5() {
    // The release between the two (schema 21) on seeds of its own; 11000–11023 passed when
    // this test was added.
    for seed in 11000..11004 {
        generated_case_on(SQLITE_MID, seed);
    }
}

#[test]
fn stale_entries_are_deleted_oldest_first_as_the_release_deletes_them() {
    // Seed 30000 (2026.9.6, `pruneAfter:"10d"`, `maxEntries:3`): the release deletes its
    // stale entries in the order it reads its age candidates (`updated_at`), so its archive
    // rows take other free pages than a deletion in key order would; the WAL it leaves, which
    // `diskBudget.totalBytesBefore` counts, is three pages larger.
    generated_case(30000);
}

#[test]
fn removals_sharing_a_transcript_are_deleted_together_as_the_release_deletes_them() {
    // Seeds 7607 and 7610 (2026.8.2) and 7711 (2026.9.6): removed entries share transcripts
    // (in 7607 a removed subagent names the transcript of a removed direct chat); both
    // releases delete such entries in one group, where the first of them is in the removal
    // order, so the archives written after them take other free pages than a deletion entry by
    // entry would; the WAL each leaves, which `diskBudget.totalBytesBefore` counts, differs
    // by one, four and six pages.
    generated_case(7607);
    generated_case(7610);
    generated_case(7711);
}

#[test]
fn full_text_rows_are_deleted_by_id_as_the_release_deletes_them() {
    // Seeds 9217 and 9310 (2026.9.6): the release deletes a transcript's full-text rows
    // through `session_transcript_fts_rows` by id (`id IN (SELECT id … WHERE session_id = ?)`),
    // so its trigger removes the full-text rows in id order. A delete by session id walks
    // them in message order, and the deletion batch then took one page from the end of the
    // file where the release reused a freed one: the WAL that `diskBudget.totalBytesBefore`
    // counts was one page larger, and the file kept one more free page.
    generated_case(9217);
    generated_case(9310);
}

#[test]
fn the_wal_of_a_routed_session_written_by_2026_8_2_is_the_releases() {
    // Seed 9527 (2026.8.2) gives explicit and dashboard sessions delivery routes. Built with
    // SQLite 3.54.1 instead of the releases' 3.53 line, clawkeeper failed it on the WAL's size
    // (`diskBudget.totalBytesBefore`): 3.54 does not rewrite an expression index's entry that
    // an upsert leaves unchanged (see Cargo.toml).
    generated_case(9527);
}

#[test]
fn an_entry_archived_in_place_rewrites_its_sessions_window_as_the_release_does() {
    // Seeds 7620, 7801 and 7804 (2026.9.6): an entry archived in place (by the cap, or as a
    // stale dashboard) shares its session id with another entry, from which the window was
    // last written. The release writes the archived entry with its entry write, whose upsert
    // gives the window the archived entry's projection (its update time, display name,
    // parent, spawner, model and provenance) and keeps the window's owner; the window row,
    // and so the WAL, differed when only the update time of a window the entry owns was set.
    generated_case(7620);
    generated_case(7801);
    generated_case(7804);
}

#[test]
fn stale_sessions_with_an_external_delivery_are_kept_or_archived_as_the_releases_do() {
    // A dashboard and an explicit session that last replied to a Telegram peer, stale for the
    // age rule and for `archiveDashboardAfter`. 2026.9.x protects an entry whose delivery is
    // external (it is never archived in place, so its conversation is never derived again);
    // 2026.8.2 protects only channel and group keys, and archives the dashboard in place: its
    // entry write upserts the conversation at the entry's update time and links it to the
    // session again. The import gives both entries a conversation; the entries are then moved
    // back a day with SQL, as a runtime's later writes leave them, so that the write changes
    // the conversation's rows. Every table is compared.
    const CONFIG: &str = r#"{session:{maintenance:{pruneAfter:"10d",archiveDashboardAfter:"1d",maxEntries:50,maxDiskBytes:false}}}"#;
    let day = 86_400_000;
    for release in [SQLITE_LATEST, SQLITE_MID, SQLITE_FIRST] {
        let Some((_dir, a, b)) = demo_edited(release, CONFIG, |s, sessions| {
            let now = storegen::now_ms();
            for (i, (key, peer)) in [
                ("agent:main:dashboard:routed", "4100"),
                ("agent:main:explicit:routed", "4200"),
            ]
            .into_iter()
            .enumerate()
            {
                let sid = format!("5e55a000-0000-4000-8000-00000000000{i}");
                let to = format!("telegram:{peer}");
                s[key] = json!({
                    "sessionId": sid,
                    "updatedAt": now - 20 * day,
                    "chatType": "direct",
                    "displayName": format!("Peer {peer}"),
                    "deliveryContext": {"channel": "telegram", "to": to, "accountId": "default"},
                    "lastChannel": "telegram",
                    "lastTo": to,
                    "origin": {"provider": "telegram", "from": to, "to": "telegram:bot",
                        "chatType": "direct", "accountId": "default"},
                });
                let mut rng = Rng::new(41 + i as u64);
                let shape = storegen::transcript::Shape::random(&mut rng);
                let text = storegen::transcript::transcript(&mut rng, &sid, now - 21 * day, shape);
                std::fs::write(sessions.join(format!("{sid}.jsonl")), text).unwrap();
            }
        }) else {
            return;
        };
        let db = read_only(&database(&a));
        let conversations: i64 = db
            .query_row("SELECT count(*) FROM session_conversations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(conversations >= 2, "the import linked no conversation");
        drop(db);
        for env in [&a, &b] {
            // (As `age_with_sql` ages entries: their validity kept, no revalidation queued.)
            let conn = Connection::open(database(env)).unwrap();
            let pending: i64 = conn
                .query_row(
                    "SELECT count(*) FROM sqlite_schema \
                     WHERE name = 'session_canonical_validation_pending'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            let forget = match pending {
                0 => "",
                _ => {
                    "DELETE FROM session_canonical_validation_pending
                       WHERE session_key IN (SELECT session_key FROM valid);"
                }
            };
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE;
                     CREATE TEMP TABLE valid AS SELECT session_key, entry_valid FROM session_nodes;
                     UPDATE session_nodes SET updated_at = updated_at - {day},
                       entry_json = json_set(entry_json, '$.updatedAt',
                         json_extract(entry_json, '$.updatedAt') - {day})
                     WHERE session_key LIKE '%:routed';
                     UPDATE session_nodes SET entry_valid = (SELECT v.entry_valid FROM valid v
                       WHERE v.session_key = session_nodes.session_key);
                     {forget}
                     COMMIT;"
            ))
            .unwrap();
        }
        compare(
            release,
            &a,
            &b,
            &["--enforce", "--json"],
            "routed stale sessions",
        );
        let db = read_only(&database(&a));
        let archived = |key: &str| -> Option<bool> {
            db.query_row(
                "SELECT json_extract(entry_json, '$.archivedAt') IS NOT NULL FROM session_nodes \
                 WHERE session_key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
            .unwrap()
        };
        let (dashboard, explicit) = (
            archived("agent:main:dashboard:routed"),
            archived("agent:main:explicit:routed"),
        );
        let want = match release.version == SQLITE_FIRST.version {
            // The dashboard archived in place, the explicit session deleted.
            true => (Some(true), None),
            // Both kept as they were.
            false => (Some(false), Some(false)),
        };
        assert_eq!((dashboard, explicit), want, "{}", release.version);
    }
}

/// The demo imported by 2026.9.6 with the demo config (a plan that archives, deletes and
/// evicts).
fn demo_env() -> Option<TestEnv> {
    let env = imported(SQLITE_LATEST)?;
    env.write_config(DEMO);
    Some(env)
}

/// What a refused cleanup must leave as it was: every row and every file.
fn snapshot(env: &TestEnv) -> Vec<String> {
    dump(env, i64::MAX / 2)
}

#[track_caller]
fn refused(env: &TestEnv, code: i32, needle: &str) {
    let before = snapshot(env);
    let out = ours(env, &["--enforce"]);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    same_lines("a refused cleanup", &before, &snapshot(env));
}

/// The gateway lifecycle lock file of a state dir, as the runtime names it.
fn lifecycle_lock(state: &Path) -> PathBuf {
    let identity = std::fs::canonicalize(state.join("state/openclaw.sqlite")).unwrap();
    let hash = storegen::sha256_hex(identity.as_os_str().as_encoded_bytes());
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!(
        "/tmp/openclaw-state-locks-{uid}/gateway-lifecycle.{}.lock.sqlite",
        &hash[..8]
    ))
}

#[test]
fn cleanup_waits_for_the_gateway_lifecycle_lock_and_writes_nothing_while_it_is_held() {
    let Some(env) = demo_env() else { return };
    let lock = lifecycle_lock(&env.state());
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let holder = Connection::open(&lock).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    refused(&env, 4, "lifecycle");
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let out = ours(&env, &["--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn cleanup_refuses_a_database_with_a_live_lease() {
    let Some(env) = demo_env() else { return };
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    let conn = Connection::open(env.state().join("state/openclaw.sqlite")).unwrap();
    conn.execute(
        "INSERT INTO agent_database_leases (lease_id, agent_id, path, owner_pid, owner_start_time, opened_at) \
         VALUES ('test-lease', 'main', ?1, ?2, NULL, 0)",
        rusqlite::params![database(&env).display().to_string(), holder.id()],
    )
    .unwrap();
    drop(conn);
    refused(
        &env,
        4,
        &format!("process {} has the database open", holder.id()),
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn cleanup_previews_an_unknown_schema_version_and_never_writes_it() {
    let Some(env) = demo_env() else { return };
    let db = database(&env);
    Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let out = ours(&env, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("version 99") && stderr(&out).contains("--enforce would refuse"),
        "{}",
        stderr(&out)
    );
    refused(&env, 3, "version 99");
}

#[test]
fn cleanup_refuses_a_database_that_fails_its_check() {
    let Some(env) = demo_env() else { return };
    let db = database(&env);
    damage_an_index_page(&db);
    let before = std::fs::read(&db).unwrap();
    let out = ours(&env, &["--enforce"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fails its check before any write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database is untouched"
    );
}

#[test]
fn a_half_finished_migration_cleans_the_database_and_leaves_sessions_json() {
    let Some(env) = demo_env() else { return };
    let legacy = env.store_path();
    std::fs::write(
        &legacy,
        r#"{"agent:main:old":{"sessionId":"x","updatedAt":1}}"#,
    )
    .unwrap();
    let (code, doc) = env.run_json(&["cleanup", "--dry-run"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["storePath"], database(&env).display().to_string());
    assert_eq!(doc["beforeCount"], 22);
    let out = env.run(&["cleanup", "--enforce"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("both exist")
            && stderr(&out).contains("the database is the live store"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&legacy).unwrap(),
        r#"{"agent:main:old":{"sessionId":"x","updatedAt":1}}"#
    );
}

#[test]
fn a_config_only_sqlite_era_releases_accept_is_still_refused_for_a_json_era_store() {
    let env = TestEnv::new();
    env.write_store("{}");
    env.write_config(r#"{session:{maintenance:{maxDiskBytes:false}}}"#);
    let out = env.run(&["cleanup", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("maxDiskBytes"), "{}", stderr(&out));
    let Some(db) = demo_env() else { return };
    db.write_config(r#"{session:{maintenance:{maxDiskBytes:false}}}"#);
    let (code, doc) = db.run_json(&["cleanup", "--dry-run"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["diskBudget"], Value::Null);
}

/// Grow a database with SQL: `n` historical windows (a window, its events, their identities
/// and a watermark, copied from live sessions under new session ids and an old `updated_at`),
/// as session resets leave them behind, which no entry references.
pub fn add_historical_windows(db: &Path, n: usize) {
    let conn = Connection::open(db).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON; BEGIN IMMEDIATE;")
        .unwrap();
    let cols = |t: &str| -> Vec<String> {
        conn.prepare(&format!("PRAGMA table_info({t})"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    // The 19th window on (in key order) of the demo; the last `n` of a smaller database.
    let sources: Vec<String> = conn
        .prepare(
            "SELECT session_id FROM session_windows ORDER BY session_key LIMIT ?1 \
             OFFSET max(0, min(18, (SELECT count(*) FROM session_windows) - ?1))",
        )
        .unwrap()
        .query_map([n as i64], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (i, src) in sources.iter().enumerate() {
        let id = format!("0000000{i}-aaaa-4bbb-8ccc-dddddddddddd");
        let c = cols("session_windows");
        let sel: Vec<String> = c
            .iter()
            .map(|x| match x.as_str() {
                "session_id" => "?1".into(),
                "updated_at" | "created_at" => format!("1400000000000 + {i}"),
                _ => x.clone(),
            })
            .collect();
        conn.execute(
            &format!(
                "INSERT INTO session_windows ({}) SELECT {} FROM session_windows WHERE session_id = ?2",
                c.join(","),
                sel.join(",")
            ),
            rusqlite::params![id, src],
        )
        .unwrap();
        for t in ["transcript_events", "transcript_event_identities"] {
            let c: Vec<String> = cols(t)
                .into_iter()
                .filter(|x| !(t == "transcript_events" && x == "event_utf8_bytes"))
                .collect();
            let sel: Vec<String> = c
                .iter()
                .map(|x| {
                    if x == "session_id" {
                        "?1".into()
                    } else {
                        x.clone()
                    }
                })
                .collect();
            conn.execute(
                &format!(
                    "INSERT INTO {t} ({}) SELECT {} FROM {t} WHERE session_id = ?2",
                    c.join(","),
                    sel.join(",")
                ),
                rusqlite::params![id, src],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) \
             VALUES (?1, ?2, 1400000000000)",
            rusqlite::params![id, format!("{i:032x}")],
        )
        .unwrap();
    }
    conn.execute_batch("COMMIT;").unwrap();
}

#[test]
fn historical_windows_are_evicted_as_the_reference_evicts_them() {
    for release in [SQLITE_LATEST, SQLITE_FIRST] {
        let Some((a, b)) = demo_pair(release, DEMO) else {
            return;
        };
        for env in [&a, &b] {
            add_historical_windows(&database(env), 3);
        }
        let what = "historical windows";
        compare(release, &a, &b, &["--dry-run", "--json"], what);
        compare(release, &a, &b, &["--enforce", "--json"], what);
    }
}
