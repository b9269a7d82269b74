//! Progress bars on standard error, while a person watches: installed only when standard
//! error is a terminal and the command prints no JSON, so a script or a pipe never sees one.
//! What reports progress, and when, is berth-git's `progress` (re-exported by berth-ops) (checkouts over a second) and
//! the operations' loops; this only draws it.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};

use berth_ops::progress::{Reporter, report_to};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars shown, by label (one at a time in practice: a checkout, or a loop's items).
struct Bars {
    bars: Mutex<HashMap<String, ProgressBar>>,
}

static BARS: OnceLock<Arc<Bars>> = OnceLock::new();

/// Shows progress from now on, unless `json` or standard error is not a terminal.
pub fn watch(json: bool) {
    if json || !std::io::stderr().is_terminal() {
        return;
    }
    let bars = BARS.get_or_init(|| {
        Arc::new(Bars {
            bars: Mutex::default(),
        })
    });
    report_to(bars.clone());
}

/// Clears every bar: before a command prints what it did.
pub fn finish_all() {
    if let Some(bars) = BARS.get() {
        let mut all = bars.bars.lock().unwrap_or_else(|e| e.into_inner());
        for (_, bar) in all.drain() {
            bar.finish_and_clear();
        }
    }
}

impl Reporter for Bars {
    fn step(&self, label: &str, done: u64, total: u64) {
        let mut bars = self.bars.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bars.entry(label.to_owned()).or_insert_with(|| {
            let bar = if total > 0 {
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()).with_style(
                    ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
                        .expect("a valid template")
                        .progress_chars("=> "),
                )
            } else {
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                    ProgressStyle::with_template("{msg}: {pos} ({elapsed})")
                        .expect("a valid template"),
                )
            };
            bar.set_message(label.to_owned());
            bar
        });
        if total > 0 {
            bar.set_length(total);
        }
        bar.set_position(done);
    }

    fn finish(&self, label: &str) {
        let bar = self
            .bars
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(label);
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    }
}
