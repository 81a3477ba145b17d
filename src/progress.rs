//! Progress bars for long work: on stderr, only on a terminal, never with `--json` or
//! `--quiet` (nothing at all is drawn otherwise). Command modules use this; domain modules
//! report progress through plain callbacks.
//!
//! Bars are over bytes (transcripts read or rewritten); spinners mark phases whose size is not
//! known up front (a cleanup plan). Both tick on their own, so a single large file still shows
//! that work is going on, and both clear themselves when done.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const TICK: Duration = Duration::from_millis(120);

/// Whether progress may be drawn for a run with these output settings.
pub fn wanted(json: bool, quiet: bool) -> bool {
    !json && !quiet && std::io::stderr().is_terminal()
}

/// A progress bar or spinner, or nothing when progress is not wanted.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over `total` bytes (grown later by [`Progress::add_total`] when 0).
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
        // At most 80 columns with a 13-character label.
        let style = ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:20}] {bytes}/{total_bytes} {bytes_per_sec} {elapsed}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        if total > 0 {
            bar.enable_steady_tick(TICK);
        }
        Progress(Some(bar))
    }

    /// A spinner with a message, for work of unknown size.
    pub fn spinner(label: &str, enabled: bool) -> Progress {
        if !enabled {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} {prefix}: {wide_msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(TICK);
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
                bar.enable_steady_tick(TICK);
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

    /// Run `f` (which prints to stderr) with the bar hidden.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
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
