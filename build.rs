//! Records the commit airlock is built from and its target, for `airlock --version` (like
//! cargo's `cargo 1.95.0 (f2d3ce0bd 2026-03-21)`) and `airlock version --json`. Outside a git
//! checkout the version names the target alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let target = std::env::var("TARGET").unwrap_or_default();
    let commit = git(&["rev-parse", "--short=9", "HEAD"]);
    let date = git(&["log", "-1", "--format=%cs"]);
    let text = match (&commit, &date) {
        (Some(commit), Some(date)) => format!("{version} ({commit} {date} {target})"),
        _ => format!("{version} ({target})"),
    };
    println!("cargo:rustc-env=AIRLOCK_VERSION={text}");
    println!("cargo:rustc-env=AIRLOCK_TARGET={target}");
    println!("cargo:rustc-env=AIRLOCK_COMMIT={}", commit.unwrap_or_default());
    println!("cargo:rustc-env=AIRLOCK_COMMIT_DATE={}", date.unwrap_or_default());
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
