//! The site over time: installs, anti-downgrade, retention, verified rollback, records and
//! status; tampering with what is retained; interruptions (kill -9) and concurrent writers.
//! No interruption may leave the site without a verified current bundle.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::site::{Releases, assert_current_verifies};
use crate::common::*;

#[test]
fn installs_and_rollbacks_keep_versions_retention_records_and_status_straight() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    assert_eq!(r.current(), "1.0.0");
    r.install("1.1.0", &[]).ok();
    r.install("1.2.0", &["--keep", "2"]).ok();
    assert_eq!(r.current(), "1.2.0");
    let st = r.status();
    assert_eq!(st["previous"]["version"], "1.1.0");
    assert_eq!(st["retained"].as_array().unwrap().len(), 2, "--keep 2 pruned 1.0.0: {st}");
    let history = st["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    for (e, v) in history.iter().zip(["1.0.0", "1.1.0", "1.2.0"]) {
        assert_eq!(
            (e["action"].as_str(), e["name"].as_str(), e["version"].as_str()),
            (Some("install"), Some("demo"), Some(v))
        );
        assert!(e["id"].is_string() && e["installed_at"].is_string(), "{e}");
    }

    // A lower version is refused (exit 3, nothing changed), unless asked for.
    let before = snapshot(&r.root);
    let refused = r.install("1.1.0", &[]).code(3);
    assert!(refused.stderr.contains("already activated demo 1.2.0") && refused.stderr.contains("rollback"));
    assert_eq!(snapshot(&r.root), before, "a refused downgrade changes nothing");

    // Rollback: previous becomes current, verified; and back again.
    let back = r.rollback(&["--json"]).ok().json();
    assert_eq!((back["version"].as_str(), back["from"].is_string()), (Some("1.1.0"), true));
    assert_eq!(r.current(), "1.1.0");
    assert_eq!(r.status()["previous"]["version"], "1.2.0");
    // A second rollback would move forward, to the release rolled back from: that is install's.
    let before = snapshot(&r.root);
    let forward = r.rollback(&[]).code(1);
    assert!(forward.stderr.contains("nothing older to roll back to") && forward.stderr.contains("airlock install"));
    assert_eq!(snapshot(&r.root), before, "a refused rollback changes nothing");
    let st = r.status();
    assert_eq!(st["last_rollback"]["version"], "1.1.0");
    assert!(st["last_rollback"]["seconds"].as_f64().unwrap() > 0.0, "the rollback's measured time: {st}");
    let human = airlock_run(&["status", "--root", s(&r.root)]).ok().stdout;
    assert!(human.contains("last rollback: to demo 1.1.0") && human.contains(" s\n"), "{human}");
    r.install("1.2.0", &[]).ok();
    assert_eq!(r.current(), "1.2.0");

    // A downgrade on purpose is installed and recorded as one.
    let allowed = r.install("1.0.0", &["--allow-downgrade", "--json"]).ok().json();
    assert_eq!(allowed["downgrade"], true);
    assert_eq!(r.current(), "1.0.0");

    // Every action left a record with its phases timed, the refused one too; every record is
    // what the published schema says.
    let schema = validator("record.v1.json");
    let mut records: Vec<PathBuf> =
        std::fs::read_dir(r.root.join("records")).unwrap().map(|e| e.unwrap().path()).collect();
    records.sort();
    assert_eq!(records.len(), 8, "4 installs, 1 refused, 1 rollback, 1 refused, 1 downgrade: {records:?}");
    let mut refused = 0;
    for path in &records {
        let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(schema_errors(&schema, &rec), Vec::<String>::new(), "{}", path.display());
        if rec["outcome"] == "refused" {
            refused += 1;
            assert!(rec["reason"].as_str().unwrap().contains("already activated demo 1.2.0"), "{rec:#}");
            assert_eq!(
                (rec["failed_in"].as_str(), rec["bundle"]["version"].as_str()),
                (Some("validate"), Some("1.1.0"))
            );
            continue;
        }
        if rec["outcome"] == "failed" {
            refused += 1;
            assert_eq!(rec["action"], "rollback");
            assert!(rec["reason"].as_str().unwrap().contains("nothing older to roll back to"), "{rec:#}");
            continue;
        }
        assert_eq!(rec["outcome"], "activated");
        for phase in ["verify", "stage", "publish", "switch"] {
            assert!(rec["phases"][phase].as_f64().is_some(), "{phase} in {}", path.display());
        }
        assert!(rec["bundle"]["id"].is_string() && rec["signers"].as_array().is_some_and(|s| !s.is_empty()));
        assert_eq!(rec["trust"]["threshold"], 1);
    }
    assert_eq!(refused, 2, "the downgrade and the rollback forward");
}

#[test]
fn a_tampered_retained_bundle_is_never_rolled_back_to_and_a_tampered_tree_is_restaged() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    r.install("1.1.0", &[]).ok();
    let previous = r.root.join(std::fs::read_link(r.root.join("previous")).unwrap());

    // The staged tree of previous, altered: rollback restages it from the verified file.
    std::fs::write(previous.join("files/notes.txt"), "altered\n").unwrap();
    std::fs::write(previous.join("files/planted.sh"), "#!/bin/sh\n").unwrap();
    r.rollback(&[]).ok();
    assert_eq!(r.current(), "1.0.0");
    assert_eq!(std::fs::read(r.root.join("current/files/notes.txt")).unwrap(), b"release notes for 1.0.0\n");
    assert!(!r.root.join("current/files/planted.sh").exists(), "the tree came from the bundle alone");

    // Forward to 1.1.0 again (install); then the retained bundle file of previous (1.0.0),
    // altered: refused, nothing changes.
    r.install("1.1.0", &[]).ok();
    let previous = r.root.join(std::fs::read_link(r.root.join("previous")).unwrap());
    let file = previous.join("bundle.airlock");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let before = snapshot(&r.root);
    let refused = r.rollback(&[]).code(3);
    assert!(
        refused.stderr.contains("failed verification") && refused.stderr.contains("not changed"),
        "{}",
        refused.stderr
    );
    assert_eq!(snapshot(&r.root), before, "a refused rollback changes nothing");
    assert_eq!(r.current(), "1.1.0");
}

#[test]
fn a_reinstall_over_a_tampered_tree_restages_it() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    std::fs::write(r.root.join("current/files/board.bin"), b"not the firmware").unwrap();
    let again = r.install("1.0.0", &["--json"]).ok().json();
    assert_eq!(again["already_present"], true);
    assert_current_verifies(&r.root, &r.keys);
}

#[test]
fn a_two_key_site_stays_a_two_key_site_across_a_rollback() {
    let r = Releases::new();
    let security = keygen(&r.t.path().join("k"), "security");
    let cosign = |v: &str| {
        let b = r.bundle(v);
        airlock_run(&["sign", s(&b), "--key", s(&security.private), "--trust", s(&r.keys.public)]).ok();
    };
    let two = ["--trust", s(&security.public), "--threshold", "2"];
    cosign("1.0.0");
    cosign("1.1.0");
    r.install("1.0.0", &two).ok();
    r.install("1.1.0", &two).ok();
    // Only one valid signature left on the retained previous bundle.
    let previous = r.root.join(std::fs::read_link(r.root.join("previous")).unwrap());
    for e in std::fs::read_dir(&previous).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".sig") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let before = snapshot(&r.root);
    let refused = r.rollback(&[]).code(3);
    assert!(refused.stderr.contains("threshold not met"), "the recorded two-key policy: {}", refused.stderr);
    assert_eq!(snapshot(&r.root), before);
    // Naming one key and threshold 1 explicitly is the operator's decision, and works.
    r.rollback(&["--trust", s(&r.keys.public)]).ok();
}

#[test]
fn a_symlink_planted_in_the_root_is_refused_not_followed() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    let outside = r.t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::remove_dir(r.root.join("staging")).unwrap();
    std::os::unix::fs::symlink(&outside, r.root.join("staging")).unwrap();
    let refused = r.install("1.1.0", &[]).code(1);
    assert!(refused.stderr.contains("staging") && refused.stderr.contains("symbolic link"), "{}", refused.stderr);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing was written through the link");
    assert_eq!(r.current(), "1.0.0");
}

#[test]
fn a_second_writer_fails_naming_the_holder_or_waits_for_it() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    // The same bundle twice, so that either order is a valid history.
    let (b1, b2) = (r.bundle("1.1.0"), r.bundle("1.1.0"));
    let spawn = |bundle: &Path, wait: &str| {
        airlock()
            .args(["install", s(bundle), "--trust", s(&r.keys.public), "--root", s(&r.root), "--wait", wait])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Both wait for each other: both succeed, one after the other.
    let (a, b) = (spawn(&b1, "60"), spawn(&b2, "60"));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_current_verifies(&r.root, &r.keys);
    // Holding the lock from here (as a writer would), a writer that does not wait is told who.
    let lock = std::fs::OpenOptions::new().write(true).open(r.root.join(".lock")).unwrap();
    lock.try_lock().unwrap();
    std::fs::write(r.root.join(".lock"), "pid 4242 install since now\n").unwrap();
    let busy = r.install("1.2.0", &[]).code(1);
    assert!(busy.stderr.contains("pid 4242 install") && busy.stderr.contains("--wait"), "{}", busy.stderr);
}

#[test]
fn killing_an_install_at_any_moment_leaves_a_verified_current_and_the_next_install_succeeds() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let root = t.path().join("site");
    let small = project(&t.path().join("small"), "1.0.0");
    let small_bundle = t.path().join("small.airlock");
    build(&small, &keys, &small_bundle).ok();
    let install =
        |bundle: &Path| ["install", s(bundle), "--trust", s(&keys.public), "--root", s(&root)].map(String::from);
    airlock_run(&install(&small_bundle).each_ref().map(String::as_str)).ok();
    // A large bundle, so that a kill lands in the middle of its verify and staging.
    let big = project(&t.path().join("big"), "2.0.0");
    std::fs::write(big.dir.join("fw/board.bin"), pattern(48 << 20, 7)).unwrap();
    let big_bundle = t.path().join("big.airlock");
    build(&big, &keys, &big_bundle).ok();
    // How long a whole install takes here, so that the kills land at fractions of it.
    let scratch = t.path().join("scratch");
    let started = std::time::Instant::now();
    airlock_run(&["install", s(&big_bundle), "--trust", s(&keys.public), "--root", s(&scratch)]).ok();
    let full = started.elapsed();
    let mut interrupted = 0;
    for fraction in [0.0, 0.05, 0.15, 0.3, 0.5] {
        let before = staged(&root);
        let mut child =
            airlock().args(install(&big_bundle)).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // Once it is staging (a loaded machine can take a while to start it), then a fraction
        // of a whole install's time: the early kills land mid-install even on a loaded machine,
        // the later ones may find it done, which must be as safe.
        wait_for_staging(&root, &before, &mut child);
        std::thread::sleep(full.mul_f64(fraction));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        assert_current_verifies(&root, &keys);
        airlock_run(&["status", "--root", s(&root), "--json"]).ok();
        // Back to the small bundle for the next round, if the big one got through.
        let version = airlock_run(&["status", "--root", s(&root), "--json"]).ok().json()["current"]["version"].clone();
        if version == "2.0.0" {
            let args = [&install(&small_bundle)[..], &["--allow-downgrade".to_owned()]].concat();
            airlock_run(&args.iter().map(String::as_str).collect::<Vec<_>>()).ok();
        }
    }
    assert!(interrupted >= 2, "kills landed in the middle of an install ({interrupted} of 5)");
    airlock_run(&install(&big_bundle).each_ref().map(String::as_str)).ok();
    assert_current_verifies(&root, &keys);
    assert_eq!(std::fs::read_dir(root.join("staging")).unwrap().count(), 0, "leftovers were cleaned");

    // The same for rollbacks that restage a large bundle: a rollback goes back, so the large
    // bundle retained as previous is an older release (0.5.0) under the current 2.0.0.
    let old_big = project(&t.path().join("old-big"), "0.5.0");
    std::fs::write(old_big.dir.join("fw/board.bin"), pattern(48 << 20, 8)).unwrap();
    let old_big_bundle = t.path().join("old-big.airlock");
    build(&old_big, &keys, &old_big_bundle).ok();
    let reinstall = |bundle: &Path| {
        let args = [&install(bundle)[..], &["--allow-downgrade".to_owned()]].concat();
        airlock_run(&args.iter().map(String::as_str).collect::<Vec<_>>()).ok();
    };
    reinstall(&old_big_bundle);
    reinstall(&big_bundle);
    // Issue 79: the kills are counted as the install's are (a loop whose kills all landed after
    // the rollback finished would prove nothing).
    let mut interrupted = 0;
    for fraction in [0.0, 0.1, 0.3] {
        let before = staged(&root);
        let mut child = airlock()
            .args(["rollback", "--root", s(&root)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_staging(&root, &before, &mut child);
        std::thread::sleep(full.mul_f64(fraction));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_current_verifies(&root, &keys);
        let st = airlock_run(&["status", "--root", s(&root), "--json"]).ok().json();
        if st["current"]["version"] == "0.5.0" {
            reinstall(&big_bundle); // forward is install; previous is the large one again
        }
    }
    assert!(interrupted >= 2, "kills landed in the middle of a rollback ({interrupted} of 3)");
    airlock_run(&["rollback", "--root", s(&root)]).ok();
    assert_current_verifies(&root, &keys);
}

/// The names under `staging/` now.
fn staged(root: &Path) -> std::collections::BTreeSet<std::ffi::OsString> {
    std::fs::read_dir(root.join("staging")).map_or_else(
        |_| std::collections::BTreeSet::default(),
        |d| d.filter_map(Result::ok).map(|e| e.file_name()).collect(),
    )
}

/// Until the install (or rollback) started after `before` was taken has a directory of its own
/// under `staging/` (a killed run's leftover does not count), or has ended.
fn wait_for_staging(
    root: &Path,
    before: &std::collections::BTreeSet<std::ffi::OsString>,
    child: &mut std::process::Child,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        if staged(root).difference(before).next().is_some() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn the_lock_file_is_never_removed_and_status_of_an_empty_root_is_empty() {
    let r = Releases::new();
    // A directory that is no site root says so (exit 1), instead of looking like an empty site.
    let none = airlock_run(&["status", "--root", s(&r.t.path().join("none")), "--json"]).code(1);
    assert!(none.stderr.contains("is not a site root"), "{}", none.stderr);
    // A root whose only install was refused is a site with nothing current; a rollback
    // is not suggested where there is nothing to roll back to.
    let other = keygen(&r.t.path().join("other"), "other");
    airlock_run(&["install", s(&r.bundle("1.0.0")), "--trust", s(&other.public), "--root", s(&r.root)]).code(3);
    let st = r.status();
    assert!(st["current"].is_null() && st["history"].as_array().is_some_and(Vec::is_empty));
    let human = airlock_run(&["status", "--root", s(&r.root)]).ok().stdout;
    assert!(human.contains("a rollback needs a previous bundle") && !human.contains("rehearse"), "{human}");
    r.install("1.0.0", &[]).ok();
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(r.root.join(".lock")).unwrap());
    r.install("1.1.0", &[]).ok();
    let after = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(r.root.join(".lock")).unwrap());
    assert_eq!(inode, after, "one lock file for the life of the root");
}
