//! `clawkeeper completions <shell>`: completion scripts generated from the clap model.

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell as CompleteShell;

use crate::cli::{Cli, CompletionsArgs, Shell};
use crate::exit::Exit;

pub fn run(args: &CompletionsArgs) -> Result<Exit> {
    let shell = match args.shell {
        Shell::Bash => CompleteShell::Bash,
        Shell::Zsh => CompleteShell::Zsh,
        Shell::Fish => CompleteShell::Fish,
        Shell::Powershell => CompleteShell::PowerShell,
        Shell::Elvish => CompleteShell::Elvish,
    };
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "clawkeeper", &mut out);
    Ok(Exit::Success)
}
