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
mod transcript;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use store::generate;

/// Whether to generate inputs on which clawkeeper deliberately differs from OpenClaw
/// (trajectory runtime files outside the sessions dir that a pointer names):
/// `CLAWKEEPER_PARITY_DEVIATIONS=1`. Off by default, so the suite checks true parity.
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
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in chunk.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (hi, vi) in h.iter_mut().zip(v) {
            *hi = hi.wrapping_add(vi);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
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
