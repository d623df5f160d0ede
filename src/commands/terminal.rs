//! What a person sees on a terminal: the progress reporter (bars on a terminal, log lines
//! elsewhere) and the colours of verdicts and errors.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::progress::Reporter;

/// Draws progress on stderr when stderr is a terminal (a total bar per phase, and a bar per
/// item in flight, such as each blob being downloaded); silent otherwise.
pub struct TerminalReporter {
    enabled: bool,
    multi: MultiProgress,
    bar: RefCell<Option<ProgressBar>>,
    items: RefCell<HashMap<String, ProgressBar>>,
}

impl TerminalReporter {
    pub fn new(json: bool) -> Self {
        Self {
            enabled: !json && std::io::stderr().is_terminal(),
            multi: MultiProgress::new(),
            bar: RefCell::new(None),
            items: RefCell::new(HashMap::new()),
        }
    }

    fn style(template: &str) -> ProgressStyle {
        ProgressStyle::with_template(template)
            .map_or_else(|_| ProgressStyle::default_bar(), |s| s.progress_chars("=> "))
    }
}

/// A phase that ended in an error never said `finish`: its bar is cleared, not left behind.
impl Drop for TerminalReporter {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.get_mut().take() {
            bar.finish_and_clear();
        }
        for (_, bar) in self.items.get_mut().drain() {
            bar.finish_and_clear();
        }
    }
}

impl Reporter for TerminalReporter {
    fn start(&self, phase: &str, total_bytes: u64) {
        // Nothing to show for nothing to move (a files-only lock fetches 0 bytes).
        if !self.enabled || total_bytes == 0 {
            return;
        }
        let bar = ProgressBar::new(total_bytes);
        let style =
            ProgressStyle::with_template("{msg:>10} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                .map_or_else(|_| ProgressStyle::default_bar(), |s| s.progress_chars("=> "));
        bar.set_style(style);
        bar.set_message(phase.to_owned());
        *self.bar.borrow_mut() = Some(bar);
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar.borrow().as_ref() {
            bar.inc(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            // A phase that finished is whole, whatever its estimate counted.
            bar.set_position(bar.length().unwrap_or(0));
            bar.finish_and_clear();
        }
    }

    fn item_start(&self, key: &str, total_bytes: u64) {
        if !self.enabled || total_bytes == 0 {
            return;
        }
        let bar = self.multi.add(ProgressBar::new(total_bytes));
        bar.set_style(Self::style("  {msg:>20} [{bar:30}] {bytes}/{total_bytes}"));
        bar.set_message(key.to_owned());
        self.items.borrow_mut().insert(key.to_owned(), bar);
    }

    fn item_advance(&self, key: &str, bytes: u64) {
        if let Some(bar) = self.items.borrow().get(key) {
            bar.inc(bytes);
        }
    }

    fn item_finish(&self, key: &str) {
        if let Some(bar) = self.items.borrow_mut().remove(key) {
            bar.finish_and_clear();
        }
    }
}

/// What a word is, for its colour: cargo's colours (`error:` and failures red, success green,
/// warnings yellow), for a person at a terminal only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Bad,
    Good,
    Warn,
}

/// Which stream a word is written to: colour depends on that stream being a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether `stream` gets colour: a terminal, and no `NO_COLOR` (no-color.org).
pub fn colour_on(stream: Stream) -> bool {
    use std::io::IsTerminal as _;
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `word` in its colour when `stream` gets colour, else as it is.
pub fn paint(word: &str, paint: Paint, stream: Stream) -> String {
    if !colour_on(stream) {
        return word.to_owned();
    }
    let code = match paint {
        Paint::Bad => "1;31",
        Paint::Good => "1;32",
        Paint::Warn => "1;33",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

/// A validation verdict's word in its colour.
pub fn paint_verdict(verdict: crate::validate::matrix::Verdict, stream: Stream) -> String {
    use crate::validate::matrix::Verdict;
    let how = match verdict {
        Verdict::Green => Paint::Good,
        Verdict::Amber => Paint::Warn,
        Verdict::Red => Paint::Bad,
    };
    paint(crate::validate::word(verdict), how, stream)
}

/// A validation summary (`green: amd 0 … matches row …`) for a terminal: its verdict word in
/// colour, the rest (tools' words: untrusted) escaped.
pub fn painted_summary(evidence: &crate::validate::Evidence, stream: Stream) -> String {
    let word = crate::validate::word(evidence.verdict);
    let rest = evidence.summary.strip_prefix(word).unwrap_or(&evidence.summary);
    format!("{}{}", paint_verdict(evidence.verdict, stream), crate::escape::value(rest))
}
