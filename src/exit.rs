//! Exit codes: the one place they are defined. `cli::EXIT_CODES_HELP` (and
//! `cli::CLEANUP_EXIT_CODES_HELP`) list them for `--help`.

use std::process::ExitCode;

/// How a run ended. Cron wrappers branch on these, so the numbers are a stable contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything asked for was done (or previewed).
    Success,
    /// An error: bad arguments, unreadable input, an I/O failure.
    Error,
    /// Refused: the input is unsafe to write (unparsable store, agent moved to SQLite, …).
    Refused,
    /// Something was skipped because its lock is held by a live process.
    Locked,
    /// Refused: the plan removes more entries than `--max-delete` allows.
    OverMaxDelete,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Error => 1,
            Exit::Refused => 3,
            Exit::Locked => 4,
            Exit::OverMaxDelete => 5,
        }
    }

    /// The more serious of two outcomes, for runs over several stores or files.
    pub fn worst(self, other: Exit) -> Exit {
        fn rank(e: Exit) -> u8 {
            match e {
                Exit::Success => 0,
                Exit::Locked => 1,
                Exit::OverMaxDelete => 2,
                Exit::Refused => 3,
                Exit::Error => 4,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
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
}

impl Refusal {
    pub fn exit(&self) -> Exit {
        match self {
            Refusal::Unsafe(_) => Exit::Refused,
            Refusal::OverMaxDelete(_) => Exit::OverMaxDelete,
        }
    }
}

/// The exit code for an error that ended the run.
pub fn exit_for_error(err: &anyhow::Error) -> Exit {
    err.chain()
        .find_map(|e| e.downcast_ref::<Refusal>())
        .map_or(Exit::Error, Refusal::exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_their_codes() {
        let e = anyhow::Error::new(Refusal::Unsafe("x".into())).context("while loading");
        assert_eq!(exit_for_error(&e), Exit::Refused);
        assert_eq!(exit_for_error(&anyhow::anyhow!("plain")), Exit::Error);
        assert_eq!(Exit::Success.worst(Exit::Locked), Exit::Locked);
        assert_eq!(Exit::Error.worst(Exit::Locked), Exit::Error);
    }
}
