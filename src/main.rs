//! The `clawkeeper` binary: parse the command line, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;
use clawkeeper::{cli::Cli, cmd, exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
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

/// A closed stdout (`clawkeeper inspect | head`) ends the run quietly.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
