//! `cleanup --enforce` between plan and apply: `--max-delete` at its boundaries (and bad
//! values), and a gateway rewriting `sessions.json` while cleanup runs, whose last write must
//! never be lost.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::hostile::tree;
use crate::hostile_cleanup::{entry, store_of};
use crate::util::{DAY, MIN, TestEnv, now_ms, stderr, stdout};

#[test]
fn max_delete_boundaries() {
    let env = TestEnv::new();
    let mut members: Vec<(String, String)> = (0..4)
        .map(|i| {
            (
                format!("agent:main:k{i}"),
                entry(&format!("m{i}"), 90 * DAY, ""),
            )
        })
        .collect();
    members.push(("agent:main:fresh".into(), entry("fresh", MIN, "")));
    env.write_store(&store_of(&members));
    for i in 0..4 {
        env.transcript(&format!("m{i}"), 90 * DAY);
    }
    env.transcript("fresh", MIN);
    let before = tree(&env.root());
    // 4 of 5 entries (80 %) go.
    for limit in ["0", "3", "0%", "79%", "79.9%"] {
        let o = env.run(&["cleanup", "--enforce", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(5), "{limit}: {}", stderr(&o));
        assert!(stderr(&o).contains("4 of 5"), "{limit}: {}", stderr(&o));
        assert_eq!(tree(&env.root()), before, "{limit}");
    }
    for limit in ["-1", "101%", "abc", "", "5 %x", "1e999"] {
        let o = env.run(&["cleanup", "--enforce", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(1), "{limit:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("--max-delete"),
            "{limit:?}: {}",
            stderr(&o)
        );
        assert_eq!(tree(&env.root()), before, "{limit:?}");
    }
    for limit in ["4", "80%", "100%"] {
        let env = env.duplicate();
        let o = env.run(&["cleanup", "--enforce", "--json", "--max-delete", limit]);
        assert_eq!(o.status.code(), Some(0), "{limit}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("\"appliedCount\": 1"),
            "{limit}: {}",
            stdout(&o)
        );
    }
    // Nothing to remove: even 0 passes.
    let o = env.run(&[
        "cleanup",
        "--enforce",
        "--max-delete",
        "0",
        "--prune-after",
        "365d",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The store keys written by a concurrent gateway: one fresh marker key per write.
fn gateway_write(store: &Path, base: &str, i: u32) {
    let text = base.replacen(
        '{',
        &format!(
            "{{\n  \"agent:main:gateway\": {{\"sessionId\": \"gw\", \"updatedAt\": {}, \"n\": \"{i:06}\"}},",
            now_ms()
        ),
        1,
    );
    let tmp = store.with_extension(format!("gw{i}.tmp"));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, store).unwrap();
}

#[test]
fn a_store_rewritten_during_cleanup_never_loses_the_other_writers_update() {
    let rounds = crate::util::case_count(12);
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let env = TestEnv::new();
        let members: Vec<(String, String)> = (0..400)
            .map(|i| {
                let age = if i % 2 == 0 { 90 * DAY } else { MIN };
                (
                    format!("agent:main:telegram:direct:{i}"),
                    entry(
                        &format!("s{i}"),
                        age,
                        "\"label\": \"padding padding padding\"",
                    ),
                )
            })
            .collect();
        let base = store_of(&members);
        env.write_store(&base);
        let store = env.store_path();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let last = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let writer = {
            let (stop, last, store, base) =
                (stop.clone(), last.clone(), store.clone(), base.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                // After a pause that differs per round (before, during or after the run), a
                // burst of same-size writes a fraction of a millisecond apart.
                std::thread::sleep(Duration::from_millis(round * 53 % 500));
                for _ in 0..10 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    i += 1;
                    gateway_write(&store, &base, i);
                    last.store(i, std::sync::atomic::Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(300));
                }
            })
        };
        let o = env.run(&["cleanup", "--enforce", "--json"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        let code = o.status.code();
        assert!(matches!(code, Some(0 | 3)), "{}", stderr(&o));
        *outcomes.entry(code).or_insert(0) += 1;
        let text = env.store_text();
        let n = last.load(std::sync::atomic::Ordering::Relaxed);
        if n == 0 {
            // The writer never wrote: cleanup ran alone and must have succeeded.
            assert_eq!(code, Some(0), "{}", stderr(&o));
            continue;
        }
        assert!(
            text.contains(&format!("\"n\": \"{n:06}\"")),
            "round {round}: cleanup overwrote the gateway's last write ({n}); exit {code:?}: {}",
            stderr(&o)
        );
    }
    eprintln!("store races: {outcomes:?}");
}
