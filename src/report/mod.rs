//! Output of the subcommands: text and JSON renderings, no logic of their own.

pub mod cleanup_text;
