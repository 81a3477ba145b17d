//! Output of the subcommands: text and JSON renderings, no logic of their own.

pub mod cleanup_text;
pub mod dbcleanup_text;
pub mod inspect_json;
pub mod inspect_text;
pub mod text;
pub mod transcript_text;
pub mod vacuum;

/// `n` followed by the singular or plural noun: `1 entry`, `2 entries`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
