//! Memory on a store of many small entries (a neglected store of cron runs, one entry each, is
//! exactly the store that needs maintenance): every command's peak resident size stays under
//! 64 MB plus the size of `sessions.json`. At the 3 KB per entry that memory once grew by, this
//! store would take over 120 MB. The figures on 200,000 entries are rows of the benchmark.

use std::process::{Command, Stdio};

use crate::util::*;

/// Run `cmd` to its end; its exit code and its peak resident size in bytes.
fn peak_rss(mut cmd: Command) -> (i32, u64) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data, and `wait4` only waits for this test's own child, which
    // nothing else waits for (`child` is dropped unwaited).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    let code = match libc::WIFEXITED(status) {
        true => libc::WEXITSTATUS(status),
        false => -1,
    };
    // Linux gives `ru_maxrss` in KiB.
    (code, usage.ru_maxrss as u64 * 1024)
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
        // Last: it changes the store.
        &["cleanup", "--enforce", "--json"],
    ];
    for run in runs {
        let mut args = run.to_vec();
        args.extend(["--store", store]);
        let (code, peak) = peak_rss(env.command(&args));
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
