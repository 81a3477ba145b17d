//! Comparing the human output of two cleanup runs: text plans line by line (an Age cell may
//! differ by one rounding step, and OpenClaw's redaction of token-like ids is masked), the
//! `[sessions/store]` log lines of stderr, and the counters of a text plan read back as JSON.

use std::sync::OnceLock;

use serde_json::Value;

/// The `[sessions/store]` lines of a program's stderr.
pub fn log_lines(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("[sessions/store]"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The dry-run report as JSON: parsed `--json` output, or the counters of the text plan.
pub fn dry_run_report(stdout: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(stdout) {
        return Some(v);
    }
    // Text plan (one store): `Would prune stale: 3` and friends.
    let mut m = serde_json::Map::new();
    let mut budget = serde_json::Map::new();
    let mut unreferenced = serde_json::Map::new();
    for line in stdout.lines() {
        let num = |s: &str| s.trim().parse::<u64>().ok().map(Value::from);
        let key = match line.split_once(": ") {
            Some(("Would repair sessionFile metadata", v)) => ("repaired", num(v)),
            Some(("Would prune missing transcripts", v)) => ("missing", num(v)),
            Some(("Would retire stale direct DM sessions", v)) => ("dmScopeRetired", num(v)),
            Some(("Would prune stale model-run probes", v)) => ("modelRunPruned", num(v)),
            Some(("Would prune stale", v)) => ("pruned", num(v)),
            Some(("Would cap overflow", v)) => ("capped", num(v)),
            Some(("Would prune unreferenced artifacts", v)) => {
                unreferenced.insert("removedFiles".into(), num(v)?);
                continue;
            }
            Some(("Would enforce disk budget", v)) => {
                // `<B> -> <A> bytes (files <f>, entries <e>)`
                let f = v.split("files ").nth(1)?.split(',').next()?;
                let e = v.split("entries ").nth(1)?.trim_end_matches(')');
                budget.insert("removedFiles".into(), num(f)?);
                budget.insert("removedEntries".into(), num(e)?);
                continue;
            }
            _ => continue,
        };
        m.insert(key.0.into(), key.1?);
    }
    if m.is_empty() {
        return None;
    }
    m.insert("unreferencedArtifacts".into(), Value::Object(unreferenced));
    m.insert("diskBudget".into(), Value::Object(budget));
    Some(Value::Object(m))
}

/// One `formatTimeAgo` cell: `just now`, `<n>m ago`, `<n>h ago`, `<n>d ago`.
fn age_of(cell: &str) -> Option<(char, i64)> {
    if cell == "just now" {
        return Some(('m', 0));
    }
    let n = cell.strip_suffix(" ago")?;
    let unit = n.chars().last()?;
    let v = n[..n.len() - 1].parse().ok()?;
    "mhd".contains(unit).then_some((unit, v))
}

/// Two ages a few seconds of wall clock apart can round differently: equal, or one unit
/// apart (59m/1h and 47h/2d included).
fn ages_close(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (age_of(a), age_of(b)) else {
        return false;
    };
    let minutes = |(u, v): (char, i64)| match u {
        'm' => v,
        'h' => v * 60,
        _ => v * 1440,
    };
    let (x, y) = (minutes(x).min(minutes(y)), minutes(x).max(minutes(y)));
    // One rounding step at the scale of the larger value.
    let step = if y < 60 {
        1
    } else if y < 48 * 60 {
        60
    } else {
        1440
    };
    y - x <= step + 30
}

/// OpenClaw filters everything it prints through its secret redaction; of its patterns, the
/// one generated data can hit is `fc-` followed by 10+ letters or digits (inside a UUID session
/// id), which it prints as `***`. clawkeeper prints ids as they are (a deliberate difference,
/// see the README), so the comparison masks those spans on both sides.
fn mask_redaction(s: &str) -> String {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| regex::Regex::new("fc-[A-Za-z0-9]{10,}").unwrap())
        .replace_all(s, "***")
        .into_owned()
}

/// Text reports compared line by line; in the action table the Age cells (which depend on
/// when each program ran) may differ by one rounding step.
pub fn same_text(want: &str, got: &str) -> bool {
    if want == got {
        return true;
    }
    let (want, got) = (&mask_redaction(want), &mask_redaction(got));
    let (a, b): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    if a.len() != b.len() || want.ends_with('\n') != got.ends_with('\n') {
        return false;
    }
    a.iter().zip(&b).all(|(x, y)| x == y || same_row(x, y))
}

/// An action-table row: Action (19) Key (26) Age (9) Model (14) Flags, space-joined.
fn same_row(a: &str, b: &str) -> bool {
    let split = |l: &str| -> Option<(String, String, String)> {
        let head: String = l.chars().take(47).collect();
        let rest: String = l.chars().skip(47).collect();
        let age_end = rest.find(" ago").map(|i| i + 4).or_else(|| {
            rest.starts_with("just now")
                .then_some(8)
                .or_else(|| rest.starts_with("unknown").then_some(7))
        })?;
        let age = rest[..age_end].to_string();
        let tail = rest[age_end..].trim_start().to_string();
        Some((head, age, tail))
    };
    match (split(a), split(b)) {
        (Some((h1, a1, t1)), Some((h2, a2, t2))) => h1 == h2 && t1 == t2 && ages_close(&a1, &a2),
        _ => false,
    }
}
