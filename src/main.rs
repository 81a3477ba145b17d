//! The `clawkeeper` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser as _;
use clawkeeper::{cli::Cli, cmd, exit};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match cmd::run(&cli) {
        Ok(code) => code.into(),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("clawkeeper: {err:#}");
            exit::exit_for_error(&err).into()
        }
    }
}

/// Help and version go to stdout (exit 0). Other parse errors exit 2, except for `cleanup`,
/// whose usage errors exit 1 as `openclaw sessions cleanup`'s do, so cron lines that check
/// the exit code behave the same after the switch.
fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    let subcommand = std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'));
    if subcommand.is_some_and(|s| s == "cleanup") {
        exit::Exit::Error.into()
    } else {
        ExitCode::from(2)
    }
}

/// A closed stdout (`clawkeeper inspect | head`) ends the run quietly.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
