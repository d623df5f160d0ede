//! Records the commit airlock is built from, for `airlock --version` (like cargo's
//! `cargo 1.95.0 (f2d3ce0bd 2026-03-21)`). Outside a git checkout the version stands alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let text = match (git(&["rev-parse", "--short=9", "HEAD"]), git(&["log", "-1", "--format=%cs"])) {
        (Some(commit), Some(date)) => format!("{version} ({commit} {date})"),
        _ => version.to_owned(),
    };
    println!("cargo:rustc-env=AIRLOCK_VERSION={text}");
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit).
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &reference])
    {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
