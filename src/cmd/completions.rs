//! `clawkeeper completions <shell>`: completion scripts generated from the clap model.
//!
//! The script is generated into memory first (`clap_complete::generate` panics when its writer
//! fails) and then written to stdout with the usual error handling: a closed pipe ends the run
//! quietly, any other write error is an error.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell as CompleteShell;

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::exit::Exit;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> Vec<u8> {
    let shell = match shell {
        Shell::Bash => CompleteShell::Bash,
        Shell::Zsh => CompleteShell::Zsh,
        Shell::Fish => CompleteShell::Fish,
        Shell::Powershell => CompleteShell::PowerShell,
        Shell::Elvish => CompleteShell::Elvish,
    };
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "clawkeeper", &mut buf);
    buf
}

pub fn run(args: &CompletionsArgs) -> Result<Exit> {
    let buf = script(args.shell);
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .context("cannot write the completion script to stdout")?;
    Ok(Exit::Success)
}
