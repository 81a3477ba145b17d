//! Exit codes: the one place they are defined. One table gives the [`Exit`] variants, their
//! numbers and their meanings; `--help`, the man pages ([`EXIT_CODES_HELP`]) and the README
//! section (checked by a test against [`markdown_table`]) are derived from it.

use std::process::ExitCode;

/// Defines [`Exit`], its codes and meanings, and [`EXIT_CODES_HELP`] from one table.
macro_rules! exit_codes {
    ($( $(#[doc = $doc:literal])* $name:ident = $code:literal, $meaning:literal; )*) => {
        /// How a run ended. Cron wrappers branch on these, so the numbers are a stable contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Exit {
            $( $(#[doc = $doc])* $name, )*
        }

        impl Exit {
            /// Every outcome, in code order.
            pub const ALL: &[Exit] = &[$(Exit::$name),*];

            pub fn code(self) -> u8 {
                match self { $(Exit::$name => $code,)* }
            }

            /// One line saying what the code means.
            pub fn meaning(self) -> &'static str {
                match self { $(Exit::$name => $meaning,)* }
            }
        }

        /// The exit codes as `--help` and the man pages list them.
        pub const EXIT_CODES_HELP: &str =
            concat!("Exit codes:", $("\n  ", $code, "  ", $meaning),*);
    };
}

exit_codes! {
    /// Everything asked for was done (or previewed).
    Success = 0, "success (also a preview or dry run that would change something)";
    /// An error: bad values, unreadable input, an unknown agent or session key, an I/O failure.
    Error = 1, "error: bad value, unreadable input, unknown agent or session key, I/O";
    /// The command line did not parse (reported by the argument parser). `cleanup` exits 1
    /// instead, as `openclaw sessions cleanup` does.
    Usage = 2, "usage error: unknown flag, missing or bad argument (cleanup exits 1)";
    /// Refused: the input is unsafe to write (unparsable store, agent moved to SQLite, …).
    Refused = 3, "refused: unsafe input, or a rewrite that failed (the others are written)";
    /// Something was skipped because its lock is held by a live process.
    Locked = 4, "skipped: a lock is held by a live process";
    /// Refused: the plan removes more entries than `--max-delete` allows.
    OverMaxDelete = 5, "refused, nothing written: the plan exceeds --max-delete";
}

impl Exit {
    /// The more serious of two outcomes, for runs over several stores or files.
    pub fn worst(self, other: Exit) -> Exit {
        fn rank(e: Exit) -> u8 {
            match e {
                Exit::Success => 0,
                Exit::Locked => 1,
                Exit::OverMaxDelete => 2,
                Exit::Refused => 3,
                Exit::Usage => 4,
                Exit::Error => 5,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// The exit codes as a Markdown table (the README's section must contain exactly this).
pub fn markdown_table() -> String {
    let mut s = String::from("| code | meaning |\n|---:|---|\n");
    for e in Exit::ALL {
        s.push_str(&format!("| {} | {} |\n", e.code(), e.meaning()));
    }
    s
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// An error the program branches on: it maps to a specific exit code.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The input cannot be written safely; nothing was changed.
    #[error("{0}")]
    Unsafe(String),
    /// The plan removes more than `--max-delete` allows; nothing was changed.
    #[error("{0}")]
    OverMaxDelete(String),
    /// A live process holds a lock (or the database) the write needs; nothing was changed.
    #[error("{0}")]
    Locked(String),
}

impl Refusal {
    pub fn exit(&self) -> Exit {
        match self {
            Refusal::Unsafe(_) => Exit::Refused,
            Refusal::OverMaxDelete(_) => Exit::OverMaxDelete,
            Refusal::Locked(_) => Exit::Locked,
        }
    }
}

/// A bad value on the command line found after parsing (a conflict between flags, an
/// unknown `--kind`): exit 2 like the parser's own errors (`cleanup` exits 1, as OpenClaw does).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit code for an error that ended the run (or one store's part of it).
pub fn exit_for_error(err: &anyhow::Error) -> Exit {
    err.chain()
        .find_map(|e| {
            e.downcast_ref::<Refusal>()
                .map(Refusal::exit)
                .or_else(|| e.downcast_ref::<UsageError>().map(|_| Exit::Usage))
        })
        .unwrap_or(Exit::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_their_codes() {
        let e = anyhow::Error::new(Refusal::Unsafe("x".into())).context("while loading");
        assert_eq!(exit_for_error(&e), Exit::Refused);
        assert_eq!(exit_for_error(&anyhow::anyhow!("plain")), Exit::Error);
        let usage = anyhow::Error::new(UsageError("x".into())).context("in args");
        assert_eq!(exit_for_error(&usage), Exit::Usage);
        assert_eq!(Exit::Success.worst(Exit::Locked), Exit::Locked);
        assert_eq!(Exit::Error.worst(Exit::Locked), Exit::Error);
    }

    #[test]
    fn the_table_is_complete_and_ordered() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, vec![0, 1, 2, 3, 4, 5]);
        for e in Exit::ALL {
            let line = format!("\n  {}  {}", e.code(), e.meaning());
            assert!(
                EXIT_CODES_HELP.contains(&line),
                "{e:?} missing from the help"
            );
        }
        assert_eq!(EXIT_CODES_HELP.lines().count(), Exit::ALL.len() + 1);
        assert!(EXIT_CODES_HELP.lines().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn readme_lists_the_exit_codes_of_the_code() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md");
        let table = markdown_table();
        assert!(
            readme.contains(&table),
            "README.md's exit-code section must contain exactly:\n{table}"
        );
    }
}
