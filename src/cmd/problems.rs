//! What went wrong in a run over several stores or files, for stderr and the exit code.
//!
//! A run never stops at the first bad store or file: each problem is recorded with the exit
//! code it maps to, the run goes on with the rest, and at the end every problem is printed on
//! stderr as one line `clawkeeper: …` naming the store or file, and the run exits with the
//! most serious outcome ([`Exit::worst`]). Warnings (damage that was skipped, a store that
//! does not exist yet) are printed the same way but do not change the exit code.

use std::io::Write as _;

use crate::exit::{Exit, exit_for_error};

/// The problems of one run, in the order they were met.
#[derive(Debug, Default)]
pub struct Problems {
    lines: Vec<(Exit, String)>,
}

impl Problems {
    /// A problem with its outcome; the line names the store or file.
    pub fn add(&mut self, exit: Exit, line: impl Into<String>) {
        self.lines.push((exit, one_line(&line.into())));
    }

    /// An error that ended one store's (or file's) part of the run.
    pub fn error(&mut self, err: &anyhow::Error) {
        self.add(exit_for_error(err), format!("{err:#}"));
    }

    /// Something the operator should see that does not fail the run.
    pub fn warn(&mut self, line: impl Into<String>) {
        self.add(Exit::Success, format!("warning: {}", line.into()));
    }

    /// The most serious outcome recorded (success when there is none).
    pub fn exit(&self) -> Exit {
        self.lines
            .iter()
            .fold(Exit::Success, |acc, (e, _)| acc.worst(*e))
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Print every problem on stderr, one line each, and return [`Problems::exit`] combined
    /// with `outcome` (what the rest of the run ended with). A line this process printed
    /// already (an earlier step of `maintain` met the same bad store) is not printed again.
    pub fn finish(&self, outcome: Exit) -> Exit {
        static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        for (_, line) in &self.lines {
            if !printed.contains(line) {
                let _ = writeln!(err, "clawkeeper: {line}");
                printed.push(line.clone());
            }
        }
        self.exit().worst(outcome)
    }
}

/// Error text on one line: line breaks inside a message become "; ".
pub fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Refusal;

    #[test]
    fn the_worst_outcome_wins_and_warnings_do_not_fail() {
        let mut p = Problems::default();
        assert_eq!(p.exit(), Exit::Success);
        p.warn("a.jsonl: empty");
        assert_eq!(p.exit(), Exit::Success);
        p.add(Exit::Locked, "b.jsonl: in use");
        p.error(&anyhow::Error::new(Refusal::Unsafe("c: bad\nstore".into())));
        assert_eq!(p.exit(), Exit::Refused);
        assert_eq!(p.lines[2].1, "c: bad; store");
        p.error(&anyhow::anyhow!("d: I/O"));
        assert_eq!(p.exit(), Exit::Error);
    }
}
