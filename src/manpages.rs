//! Man pages generated from the clap model: `man/clawkeeper.1` and one
//! `man/clawkeeper-<sub>.1` per subcommand. They are committed; a unit test fails when they are
//! stale, and `CLAWKEEPER_UPDATE_MAN=1 cargo test manpages` rewrites them. The module (and
//! `clap_mangen`, a dev-dependency) exists only in test builds.

use clap::CommandFactory;

use crate::cli::Cli;

/// Every page as `(file name, roff bytes)`.
pub fn render_all() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut root = Cli::command();
    root.build();
    let mut pages = Vec::new();
    pages.push(("clawkeeper.1".to_string(), render(root.clone())?));
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("clawkeeper-{}", sub.get_name());
        let bin = format!("clawkeeper {}", sub.get_name());
        let sub = sub.clone().name(name.clone()).bin_name(bin);
        pages.push((format!("{name}.1"), render(sub)?));
    }
    Ok(pages)
}

fn render(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn committed_man_pages_are_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
        let update = std::env::var_os("CLAWKEEPER_UPDATE_MAN").is_some();
        let pages = render_all().unwrap();
        let mut stale = Vec::new();
        for (name, bytes) in &pages {
            let path = dir.join(name);
            if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
                if update {
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(&path, bytes).unwrap();
                } else {
                    stale.push(name.clone());
                }
            }
        }
        let expected: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        let extra: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".1") && !expected.contains(&n.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            stale.is_empty() && extra.is_empty(),
            "man pages are stale: {stale:?}, not generated any more: {extra:?}; \
             run `CLAWKEEPER_UPDATE_MAN=1 cargo test manpages`"
        );
    }

    #[test]
    fn every_page_lists_the_exit_codes() {
        for (name, bytes) in render_all().unwrap() {
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.contains("Exit codes"), "{name} lacks the exit codes");
            for e in crate::exit::Exit::ALL {
                assert!(
                    text.contains(&format!("\n  {}  ", e.code())),
                    "{name} lacks exit code {}",
                    e.code()
                );
            }
        }
    }
}
