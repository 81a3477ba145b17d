//! The `clawkeeper` binary: parse the command line, run, map the outcome to an exit code.
//!
//! Errors are printed as one line, `clawkeeper: …`; a usage error from the argument parser
//! keeps clap's text (with its usage hint) under a `clawkeeper: ` first line and exits 2 (1 for `cleanup`, as OpenClaw does).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser as _;
use clawkeeper::cmd::problems::one_line;
use clawkeeper::{cli::Cli, cmd, exit};

fn main() -> ExitCode {
    clawkeeper::memory::configure();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failure(&e),
    };
    match cmd::run(&cli) {
        Ok(code) => code.into(),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("clawkeeper: {}", one_line(&format!("{err:#}")));
            match exit::exit_for_error(&err) {
                // `cleanup`'s bad values exit 1, as `openclaw sessions cleanup`'s do.
                exit::Exit::Usage if is_cleanup() => exit::Exit::Error.into(),
                code => code.into(),
            }
        }
    }
}

/// `--help` and `--version` print to stdout and succeed; anything else is a usage error.
fn parse_failure(e: &clap::Error) -> ExitCode {
    if !e.use_stderr() {
        // Help and version: clap colours them only on a terminal and without NO_COLOR; a
        // closed stdout (`clawkeeper --help | head -1`) is not an error.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    let text = match text.strip_prefix("error: ") {
        Some(rest) => rest.to_owned(),
        // No subcommand: clap prints the help itself.
        None => format!("a command is required\n\n{text}"),
    };
    let _ = write!(std::io::stderr().lock(), "clawkeeper: {text}");
    // `cleanup`'s usage errors exit 1 as `openclaw sessions cleanup`'s do, so cron lines that
    // check the exit code behave the same after the switch.
    if is_cleanup() {
        exit::Exit::Error.into()
    } else {
        exit::Exit::Usage.into()
    }
}

/// Whether the subcommand is `cleanup` (the first word that is not a flag).
fn is_cleanup() -> bool {
    std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .is_some_and(|s| s == "cleanup")
}

/// A closed stdout (`clawkeeper inspect | head`) ends the run quietly.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
