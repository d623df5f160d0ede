//! README's "A short tour", run as written: every shell block of that section in order, in a
//! fresh directory that holds `testdata/demo`'s spec (the tour's "your `airlock.toml`"), with
//! `airlock` on `PATH`, `AIRLOCK_SRC` naming this checkout as the tour says, and no GPU: the
//! tour's own first site line replays the recorded host. The one change: the site root
//! `/var/lib/airlock` is a directory of the test's own.

use std::process::Command;

use crate::common::*;

/// The `sh` code blocks of the README section `title`, in order.
fn shell_blocks(readme: &str, title: &str) -> Vec<String> {
    let start = readme.find(&format!("## {title}")).expect("the section exists");
    let rest = &readme[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```sh" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            blocks.push(block.join("\n"));
        }
    }
    blocks
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_readme_tour_runs_as_written() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let blocks = shell_blocks(&readme, "A short tour");
    assert!(blocks.len() >= 4, "build host, site, auditor, openssl: {blocks:?}");
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("work");
    copy_tree(&repo("testdata/demo"), &dir);
    let site = t.path().join("site");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_airlock")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    for block in &blocks {
        let script = block.replace("/var/lib/airlock", s(&site));
        let r = run(Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("AIRLOCK_SRC", repo(""))
            .env_remove("AIRLOCK_HOST_ROOT")
            .env("HOME", t.path())
            .env("AIRLOCK_CACHE", t.path().join("cache"))
            .env_remove("AIRLOCK_KEY_PASSWORD")
            .env("RUST_LOG", "warn"));
        assert_eq!(r.code, 0, "the README block\n{block}\nfailed:\n{}\n{}", r.stdout, r.stderr);
        if block.contains("openssl dgst") {
            assert!(r.stdout.contains("Verified OK"), "{}", r.stdout);
        }
    }
    assert!(site.join("current/files").is_dir());
    assert!(dir.join("approval.html").is_file() && dir.join("sbom.cdx.json").is_file());
}
