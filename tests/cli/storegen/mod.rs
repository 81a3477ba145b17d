//! Seeded generator of random OpenClaw state dirs for the cleanup parity suite.
//!
//! A [`Case`] is an abstract description of one state dir (files with contents and ages,
//! symlinks, the config, the command-line flags). Contents may contain the placeholder
//! [`ROOT`], replaced by the absolute case root when the case is materialised, so the same case
//! can be laid out twice under roots of equal length and the two copies differ only in that
//! prefix. Everything is derived from one `u64` seed through a small splitmix64 generator, so a
//! failing seed reproduces exactly (up to the wall clock, which only shifts every age).

mod config;
mod extras;
mod keys;
mod layout;
mod store;
pub mod transcript;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use store::generate;

/// Whether to generate inputs on which clawkeeper deliberately differs from OpenClaw
/// (trajectory runtime files outside the sessions dir that a pointer names; compaction
/// checkpoints of an entry without a session id or sharing one, which can name the transcript
/// of an entry that is removed): `CLAWKEEPER_PARITY_DEVIATIONS=1`. Off by default, so the suite checks
/// true parity.
pub fn deviations() -> bool {
    std::env::var("CLAWKEEPER_PARITY_DEVIATIONS").as_deref() == Ok("1")
}

/// Placeholder for the absolute case root inside generated contents.
pub const ROOT: &str = "@ROOT@";

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 60 * MINUTE;
pub const DAY: i64 = 24 * HOUR;

/// splitmix64: tiny, fast, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    pub fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }

    /// A random version-4 UUID in lowercase.
    pub fn uuid(&mut self) -> String {
        let variant = *self.pick(&['8', '9', 'a', 'b']);
        format!(
            "{}-{}-4{}-{}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            variant,
            self.hex(3),
            self.hex(12)
        )
    }

    /// A log-uniform value in `lo..hi` (both positive).
    pub fn log_uniform(&mut self, lo: i64, hi: i64) -> i64 {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (l + (h - l) * u).exp() as i64
    }
}

/// One node of a generated tree, path relative to the case root.
pub enum Node {
    /// A regular file; `age_ms` is how long before "now" its mtime lies.
    File { content: Vec<u8>, age_ms: i64 },
    /// A symbolic link with this target (placeholders allowed).
    Symlink { target: String },
    /// An empty directory.
    Dir,
}

/// How clawkeeper is told where the config is (the reference always gets the env var).
#[derive(Clone, Copy, Debug)]
pub enum ConfigVia {
    /// `OPENCLAW_CONFIG_PATH`.
    Env,
    /// No env var: the config lies at `<state dir>/openclaw.json`.
    StateDefault,
    /// `--config FILE`.
    Flag,
}

/// One generated test case.
pub struct Case {
    pub seed: u64,
    pub nodes: Vec<(String, Node)>,
    /// Config file path relative to the root.
    pub config_rel: String,
    pub config_via: ConfigVia,
    /// clawkeeper's config text, when it differs from the reference's (maintenance keys moved
    /// to `ours_flags`).
    pub ours_config: Option<Vec<u8>>,
    /// The target flags (`--store P`, `--agent ID`, `--all-agents`, none, or a conflict),
    /// placeholders allowed.
    pub target: Vec<String>,
    /// Working directory relative to the root.
    pub cwd_rel: String,
    /// Where `~` points, relative to the root (`HOME` is always `<root>/home`).
    pub home_rel: String,
    /// `OPENCLAW_HOME` for both programs, when set (placeholders allowed).
    pub openclaw_home: Option<String>,
    /// Flags shared by every run: `--fix-missing`, `--fix-dm-scope`, `--active-key K`.
    pub flags: Vec<String>,
    /// Flags only clawkeeper gets: the overrides standing for config keys of the reference's.
    pub ours_flags: Vec<String>,
    /// `--enforce` for the apply run, or `None` to follow the configured mode.
    pub apply_flag: Option<&'static str>,
    /// Human text instead of `--json` for both runs.
    pub text: bool,
    /// Human summary of the interesting choices, printed on failure.
    pub notes: Vec<String>,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `Date.prototype.toISOString` of an epoch-ms value.
pub fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        tod / 3600,
        (tod / 60) % 60,
        tod % 60
    )
}

/// Archive-name timestamp: the ISO form with every `:` replaced by `-`.
pub fn archive_ts(ms: i64) -> String {
    iso(ms).replace(':', "-")
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Lay the case out under `root` (which must exist), with ages counted back from `now`;
/// `ours` lays out clawkeeper's side (its own config text, when it has one).
pub fn materialize(case: &Case, root: &Path, now: i64, ours: bool) {
    let root_str = root.to_str().expect("utf-8 temp path");
    for (rel, node) in &case.nodes {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        match node {
            Node::Dir => fs::create_dir_all(&path).unwrap(),
            Node::Symlink { target } => {
                std::os::unix::fs::symlink(target.replace(ROOT, root_str), &path).unwrap()
            }
            Node::File { content, age_ms } => {
                let content = match &case.ours_config {
                    Some(c) if ours && *rel == case.config_rel => c,
                    _ => content,
                };
                let text = replace_bytes(content, ROOT.as_bytes(), root_str.as_bytes());
                fs::write(&path, text).unwrap();
                let mtime = UNIX_EPOCH + Duration::from_millis((now - age_ms).max(0) as u64);
                let f = fs::File::options().write(true).open(&path).unwrap();
                f.set_times(fs::FileTimes::new().set_modified(mtime).set_accessed(mtime))
                    .unwrap();
            }
        }
    }
}

/// Replace every occurrence of `from` in `hay` by `to`.
pub fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// SHA-256 of `data` in lowercase hex (prompt blobs are named by it).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn sha256_and_iso_match_known_values() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(iso(1_772_442_005_000), "2026-03-02T09:00:05.000Z");
    assert_eq!(archive_ts(0), "1970-01-01T00-00-00.000Z");
}
