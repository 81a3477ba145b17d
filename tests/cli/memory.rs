//! Memory on a store of many small entries (a neglected store of cron runs, one entry each, is
//! exactly the store that needs maintenance): every command's peak resident size stays under
//! 64 MB plus the size of `sessions.json`. At the 3 KB per entry that memory once grew by, this
//! store would take over 120 MB. The figures on 200,000 entries are rows of the benchmark.

use std::process::Command;

use crate::util::*;

/// Run `cmd` to its end under GNU `time`: its exit code and its peak resident size in bytes
/// (`None` when `time` is not installed: see [`run_under`]).
///
/// Measured by a small parent: a process started from this test binary (hundreds of megabytes
/// while the suite runs) carries the binary's resident size into its own peak through the exec,
/// while `time`'s child starts from `time`'s few pages.
fn peak_rss(cmd: &Command) -> Option<(i32, u64)> {
    let scratch = tempfile::tempdir().unwrap();
    let out_file = scratch.path().join("peak");
    let args = [
        "-f".as_ref(),
        "%M".as_ref(),
        "-o".as_ref(),
        out_file.as_os_str(),
    ];
    let out = run_under("/usr/bin/time", &args, cmd)?;
    // `time` writes "Command exited with non-zero status N" before the figure on a failure.
    let text = std::fs::read_to_string(&out_file).unwrap();
    let kib: u64 = (text.lines().last().unwrap_or_default().trim().parse())
        .unwrap_or_else(|e| panic!("time wrote {text:?}: {e}"));
    Some((out.status.code().unwrap_or(-1), kib * 1024))
}

#[test]
fn every_command_stays_under_64_mb_plus_the_store_on_a_store_of_many_entries() {
    const ENTRIES: usize = 40_000;
    const TRANSCRIPTS: usize = 300;
    let env = TestEnv::new();
    let now = now_ms();
    let mut text = String::from("{");
    for i in 0..ENTRIES {
        let id = format!("{i:08x}-0000-4000-8000-{:012x}", i * 7919);
        // Ages from minutes to 60 days: cleanup prunes the older half.
        let updated = now - (i as i64 % 60) * 24 * 3_600_000 - 60_000;
        let sep = if i == 0 { "" } else { "," };
        text.push_str(&format!(
            "{sep}\n  \"agent:main:cron:{:08x}:run:{id}\": {{\n    \"sessionId\": \"{id}\",\n    \"updatedAt\": {updated}\n  }}",
            i * 31
        ));
        if i % (ENTRIES / TRANSCRIPTS) == 0 {
            env.transcript(&id, 60_000);
        }
    }
    text.push_str("\n}");
    env.write_store(&text);
    let limit = (64 << 20) + text.len() as u64;
    let store = env.store_path();
    let store = store.to_str().unwrap();
    let runs: &[&[&str]] = &[
        &["inspect"],
        &["inspect", "--json"],
        &["prune-noreply", "--dry-run", "--json"],
        &["strip-images", "--dry-run", "--json"],
        &["prune-cache-ttl", "--dry-run", "--json"],
        &["compact", "--dry-run", "--json"],
        &["cleanup", "--dry-run"],
        &["cleanup", "--dry-run", "--json"],
        // Every step in one process: what a step held is freed before the next.
        &["maintain"],
        // Last: they change the store.
        &["cleanup", "--enforce", "--json"],
        &["maintain", "--enforce"],
    ];
    for run in runs {
        let mut args = run.to_vec();
        args.extend(["--store", store]);
        let Some((code, peak)) = peak_rss(&env.command(&args)) else {
            return;
        };
        assert_eq!(code, 0, "{run:?}");
        eprintln!(
            "{}: {:.1} MB",
            run.join(" "),
            peak as f64 / (1 << 20) as f64
        );
        assert!(
            peak < limit,
            "{run:?}: peak resident size {} MB, over 64 MB plus the store ({} MB)",
            peak >> 20,
            limit >> 20
        );
    }
    let after = env.store_text();
    assert!(
        after.len() < text.len() / 2,
        "the enforce run pruned the old half"
    );
}
