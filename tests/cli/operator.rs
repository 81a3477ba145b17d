//! What an operator sees around the work itself: exit codes in `--help`, completion scripts,
//! a closed stdout, usage and error lines, `NO_COLOR`, progress only on a terminal, and
//! reports that fit 80 columns when stdout is not a terminal. Terminal cases run under a
//! pseudo-terminal through util-linux `script` (skipped with a message where it is missing).

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::generator::generate_long;
use crate::util::{TestEnv, clawkeeper_bin, now_ms, stderr, stdout};

const SUBCOMMANDS: [&str; 6] = [
    "cleanup",
    "prune-noreply",
    "strip-images",
    "compact",
    "inspect",
    "completions",
];

/// A store of agent `main` with three generated transcripts (images, silent replies, enough
/// context to compact), plus one entry whose transcript is missing.
fn store(env: &TestEnv) -> String {
    let dir = env.sessions_dir("main");
    let mut s = serde_json::Map::new();
    for i in 0..4u64 {
        let id = format!("op-{i}-{}", "x".repeat(40));
        let key = format!("agent:main:telegram:direct:{}", "9".repeat(30 + i as usize));
        s.insert(key, json!({"sessionId": id, "updatedAt": now_ms()}));
        if i < 3 {
            let g = generate_long(90 + i, 150);
            fs::write(dir.join(format!("{id}.jsonl")), &g.bytes).unwrap();
        }
    }
    let p = dir.join("sessions.json");
    fs::write(&p, serde_json::to_string_pretty(&Value::Object(s)).unwrap()).unwrap();
    p.display().to_string()
}

#[test]
fn help_and_man_pages_list_the_exit_codes_of_the_code() {
    let env = TestEnv::new();
    let mut pages = vec![vec!["--help"]];
    pages.extend(SUBCOMMANDS.iter().map(|s| vec![*s, "--help"]));
    for args in pages {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stdout(&out).contains(clawkeeper::exit::EXIT_CODES_HELP),
            "{args:?} lacks the exit codes"
        );
        for line in stdout(&out).lines() {
            assert!(line.chars().count() <= 80, "{args:?}: too wide: {line}");
        }
    }
    let man = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    for sub in SUBCOMMANDS {
        let page = fs::read_to_string(man.join(format!("clawkeeper-{sub}.1"))).unwrap();
        assert!(page.contains("Exit codes:"), "{sub}");
    }
}

#[test]
fn completion_scripts_for_every_shell() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = env.run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {out:?}");
        assert!(stderr(&out).is_empty(), "{shell}");
        let script = stdout(&out);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} script lacks {sub}");
        }
        // (fish spells flags as `-l all-agents`)
        for flag in ["all-agents", "keep-turns", "max-delete", "transcript"] {
            assert!(script.contains(flag), "{shell} script lacks {flag}");
        }
        // Syntax-check with the shell itself where it is installed.
        let check: Option<(&str, Vec<&str>)> = match shell {
            "bash" => Some(("bash", vec!["-n"])),
            "zsh" => Some(("zsh", vec!["-n"])),
            "fish" => Some(("fish", vec!["--no-execute"])),
            _ => None,
        };
        if let Some((prog, args)) = check {
            let path = env.write(&format!("completion.{shell}"), script.as_bytes());
            match Command::new(prog).args(&args).arg(&path).output() {
                Ok(o) => assert!(o.status.success(), "{shell}: {}", stderr(&o)),
                Err(_) => eprintln!("{prog} not installed; {shell} script not syntax-checked"),
            }
        }
    }
    let out = env.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Run with stdout connected to a pipe whose reading end is already closed.
fn run_into_closed_pipe(env: &TestEnv, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(clawkeeper_bin())
        .args(args)
        .current_dir(env.work())
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let env = TestEnv::new();
    let s = store(&env);
    let t = env
        .sessions_dir("main")
        .join(format!("op-0-{}.jsonl", "x".repeat(40)));
    let t = t.to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["completions", "fish"],
        vec!["completions", "powershell"],
        vec!["completions", "elvish"],
        vec!["--help"],
        vec!["inspect", "--store", &s],
        vec!["inspect", "--store", &s, "--json"],
        vec!["inspect", "--transcript", t],
        vec!["cleanup", "--dry-run", "--store", &s],
        vec!["cleanup", "--dry-run", "--store", &s, "--json"],
        vec!["prune-noreply", "--transcript", t],
        vec!["strip-images", "--store", &s, "--json"],
        vec!["compact", "--store", &s],
    ];
    for args in runs {
        let out = run_into_closed_pipe(&env, &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

/// A report that cannot be written (a full disk) is an error, named on stderr: the text plan
/// is written as it is rendered, and a failed write stops it.
#[test]
fn a_report_that_cannot_be_written_is_an_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full");
        return;
    };
    let env = TestEnv::new();
    let s = store(&env);
    for args in [
        &["cleanup", "--dry-run", "--store", &s][..],
        &["cleanup", "--dry-run", "--store", &s, "--json"],
        &["inspect", "--store", &s],
    ] {
        let out = Command::new(clawkeeper_bin())
            .args(args)
            .current_dir(env.work())
            .env("OPENCLAW_STATE_DIR", env.state())
            .env("OPENCLAW_CONFIG_PATH", env.config_path())
            .env("HOME", env.home())
            .stdout(full.try_clone().unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("No space left on device"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn usage_errors_are_attributed_and_exit_2() {
    let env = TestEnv::new();
    // `cleanup` exits 1 on usage errors, as `openclaw sessions cleanup` does.
    for (args, code) in [
        (&["cleanup", "--bogus"][..], 1),
        (&["frobnicate"], 2),
        (&["inspect", "--limit", "many"], 2),
        (&["prune-noreply", "--keep"], 2),
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        let err = stderr(&out);
        assert!(err.starts_with("clawkeeper: "), "{args:?}: {err}");
        assert!(err.contains("--help"), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    let out = env.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("clawkeeper: a command is required\n"),
        "{err}"
    );
    assert!(err.contains("Usage: clawkeeper <COMMAND>"), "{err}");
}

#[test]
fn errors_are_one_line_naming_the_file_and_line() {
    let env = TestEnv::new();
    let s = store(&env);
    // A JSON5 syntax error in openclaw.json.
    env.write_config("{\n  session: {\n    store: \"x\",,\n  },\n}\n");
    let out = env.run(&["cleanup", "--dry-run", "--store", &s]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let want = format!(
        "clawkeeper: {}: line 3 column 16: invalid JSON5: ",
        env.config_path().display()
    );
    let err = stderr(&out);
    assert!(err.starts_with(&want), "{err:?} should start with {want:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    env.write_config("{}");
    // An unparsable sessions.json: refused (exit 3), named with its line and column.
    fs::write(&s, "{\n  \"a\": {\"sessionId\": \"x\"},\n  oops\n}\n").unwrap();
    for cmd in ["cleanup", "inspect", "prune-noreply"] {
        let out = env.run(&[cmd, "--store", &s]);
        assert_eq!(out.status.code(), Some(3), "{cmd}: {out:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.starts_with(&format!("clawkeeper: refusing to touch {s}")),
            "{err}"
        );
        assert!(err.contains("line 3 column 3"), "{cmd}: {err}");
    }
    // A --transcript file that does not exist is an error naming it (not a skip).
    for cmd in ["prune-noreply", "strip-images", "compact", "inspect"] {
        let mut args = vec![cmd, "--transcript", "/nonexistent.jsonl"];
        if cmd != "inspect" {
            args.push("--enforce");
        }
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {out:?}");
        assert_eq!(
            stderr(&out),
            "clawkeeper: cannot read --transcript /nonexistent.jsonl: No such file or directory (os error 2)\n",
            "{cmd}"
        );
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn reports_fit_80_columns_when_stdout_is_not_a_terminal() {
    let env = TestEnv::new();
    let s = store(&env);
    for cmd in ["prune-noreply", "strip-images", "compact"] {
        for mode in [&[][..], &["--dry-run"], &["--keep-recent-tokens", "300"]] {
            if cmd != "compact" && mode.len() == 2 {
                continue;
            }
            let mut args = vec![cmd, "--store", &s];
            args.extend_from_slice(mode);
            let out = env.run(&args);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
            let text = stdout(&out);
            assert!(text.contains("Total: 4 transcripts"), "{text}");
            for line in text.lines() {
                let n = line.chars().count();
                assert!(n <= 80, "{args:?}: {n} columns: {line}\n{text}");
            }
        }
    }
}

/// Run a command line under a pseudo-terminal; `None` when `script` is not installed.
fn under_pty(env: &TestEnv, cmdline: &str, vars: &[(&str, &str)]) -> Option<String> {
    let mut c = Command::new("script");
    c.args(["-qec", cmdline, "/dev/null"])
        .current_dir(env.work())
        .env("OPENCLAW_STATE_DIR", env.state())
        .env("OPENCLAW_CONFIG_PATH", env.config_path())
        .env("HOME", env.home())
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    for (k, v) in vars {
        c.env(k, v);
    }
    match c.output() {
        Ok(o) => {
            assert!(o.status.success() || o.status.code().is_some(), "{o:?}");
            Some(String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n"))
        }
        Err(_) => {
            eprintln!("`script` (util-linux) not installed: terminal cases skipped");
            None
        }
    }
}

/// Whether `text` holds an SGR (colour or style) escape sequence.
fn has_sgr(text: &str) -> bool {
    let re = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    re.is_match(text)
}

#[test]
fn no_color_turns_every_colour_off_on_a_terminal() {
    let env = TestEnv::new();
    let s = store(&env);
    let bin = clawkeeper_bin();
    let Some(coloured) = under_pty(&env, &format!("{bin} --help"), &[]) else {
        return;
    };
    // The check can see colour: clap styles help on a terminal.
    assert!(has_sgr(&coloured), "{coloured:?}");
    for cmdline in [
        format!("{bin} --help"),
        format!("{bin} inspect --help"),
        format!("{bin} cleanup --bogus"),
        format!("{bin} inspect --store {s}"),
        format!("{bin} cleanup --dry-run --store {s}"),
        format!("{bin} strip-images --store {s}"),
    ] {
        let text = under_pty(&env, &cmdline, &[("NO_COLOR", "1")]).unwrap();
        assert!(!has_sgr(&text), "{cmdline}: {text:?}");
        assert!(!text.trim().is_empty(), "{cmdline}");
    }
}

#[test]
fn progress_only_on_a_terminal_and_never_with_json_or_quiet() {
    let env = TestEnv::new();
    let s = store(&env);
    let t = env
        .sessions_dir("main")
        .join(format!("op-0-{}.jsonl", "x".repeat(40)));
    let t = t.to_str().unwrap().to_owned();
    let runs: Vec<Vec<&str>> = vec![
        vec!["inspect", "--store", &s],
        vec!["inspect", "--transcript", &t],
        vec!["cleanup", "--dry-run", "--store", &s],
        vec!["prune-noreply", "--transcript", &t],
        vec!["strip-images", "--store", &s],
        vec!["compact", "--transcript", &t],
    ];
    // Not a terminal: nothing at all on stderr, with or without --json.
    for args in &runs {
        for json in [false, true] {
            let mut a = args.clone();
            if json {
                a.push("--json");
            }
            let out = env.run(&a);
            assert_eq!(out.status.code(), Some(0), "{a:?}: {out:?}");
            assert!(stderr(&out).is_empty(), "{a:?}: {}", stderr(&out));
        }
    }
    // A terminal: --json output is the JSON document and nothing else; --quiet draws nothing.
    let bin = clawkeeper_bin();
    for args in &runs {
        let line = format!("{bin} {}", args.join(" "));
        let Some(text) = under_pty(&env, &format!("{line} --json"), &[]) else {
            return;
        };
        let v: Result<Value, _> = serde_json::from_str(&text);
        assert!(v.is_ok(), "{line} --json: {text:?}");
        let text = under_pty(&env, &format!("{line} --quiet"), &[]).unwrap();
        assert!(!text.contains("\x1b[2K"), "{line} --quiet: {text:?}");
    }
    // And a single file does get a bar on a terminal.
    let text = under_pty(&env, &format!("{bin} prune-noreply --transcript {t}"), &[]).unwrap();
    assert!(text.contains("prune-noreply ["), "{text:?}");
    assert!(text.contains("prune-noreply: preview"), "{text:?}");
}
