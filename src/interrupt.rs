//! Ctrl-C (SIGINT) or SIGTERM in the middle of a command: the partial files it was writing are
//! removed before it exits (128 + the signal: 130 for Ctrl-C, 143 for SIGTERM). A build stopped
//! half-way left its `.NAME.XXXXXX.partial` (hundreds of MB beside `--out`) until the next one
//! swept it. An install's or apply's tree being verified under `staging/` goes too (the next
//! writer would clean it, but a bundle's content may be gigabytes); what the site holds is
//! crash-safe as it is (its transaction). A download's `CACHE/tmp/HEX.partial` is kept on
//! purpose: it resumes.
//!
//! The signals are taken by `signal-hook`'s iterator (a self-pipe), so the removal runs on an
//! ordinary thread, not in a signal handler.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The partial files of this process that an interrupt removes.
static PARTIALS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Past this many names, the ones no longer on disk (persisted or dropped) are forgotten.
const PRUNE_AT: usize = 256;

/// `path`, a `.partial` file this process writes, is removed if the process is interrupted
/// while it still exists under that name (once renamed into place it is not).
pub fn remove_on_interrupt(path: &Path) {
    let Ok(mut partials) = PARTIALS.lock() else { return };
    if partials.len() >= PRUNE_AT {
        partials.retain(|p| p.exists());
    }
    partials.push(path.to_owned());
}

/// The staging trees of this process that an interrupt removes (until they are renamed away).
static TREES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// `dir`, a tree this process verifies into under a site's `staging/` (`stage-…`), is removed if
/// the process is interrupted while it is still there (once retained it has another name).
pub fn remove_tree_on_interrupt(dir: &Path) {
    let Ok(mut trees) = TREES.lock() else { return };
    trees.retain(|p| p.exists());
    trees.push(dir.to_owned());
}

/// Take SIGINT and SIGTERM for the rest of the process: on the first, remove the partial files
/// and exit with 128 + the signal. A failure to install leaves the default (the process dies,
/// and the next writer sweeps what it left).
pub fn install() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("interrupts keep their default action: {e}");
            return;
        }
    };
    let spawned = std::thread::Builder::new().name("interrupt".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let removed = remove_partials();
            if removed > 0 {
                eprintln!("airlock: interrupted; removed {removed} partial file(s) or staged tree(s) it was writing");
            }
            std::process::exit(128 + signal);
        }
    });
    if let Err(e) = spawned {
        tracing::debug!("interrupts keep their default action: {e}");
    }
}

/// Remove every registered partial file still on disk under its partial name, and every
/// staging tree still under `staging/`; how many.
fn remove_partials() -> usize {
    let partials = match PARTIALS.lock() {
        Ok(p) => p.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    let files = partials
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".partial")))
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count();
    let trees = match TREES.lock() {
        Ok(t) => t.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    let staged = |p: &&PathBuf| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("stage-"))
            && p.parent().and_then(Path::file_name).is_some_and(|n| n == "staging")
    };
    files + trees.iter().filter(staged).filter(|p| std::fs::remove_dir_all(p).is_ok()).count()
}
