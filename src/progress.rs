//! Progress bars for long work: on stderr, only on a terminal, never with `--json` or
//! `--quiet`. Command modules use this; domain modules report progress through plain callbacks.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether progress may be drawn for a run with these output settings.
pub fn wanted(json: bool, quiet: bool) -> bool {
    !json && !quiet && std::io::stderr().is_terminal()
}

/// A progress bar over `total` units of bytes, or nothing when progress is not wanted.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    pub fn bytes(total: u64, label: &str, enabled: bool) -> Progress {
        if !enabled {
            return Progress(None);
        }
        // With no known total yet, draw nothing until `add_total` gives one.
        let target = if total == 0 {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let style = ProgressStyle::with_template(
            "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        Progress(Some(bar))
    }

    pub fn disabled() -> Progress {
        Progress(None)
    }

    /// Grow the total by `n` (work discovered as it goes, e.g. store after store).
    pub fn add_total(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc_length(n);
            if n > 0 && bar.is_hidden() {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    pub fn message(&self, msg: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(msg.to_string());
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
