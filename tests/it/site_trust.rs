//! A site root trusts only what it verified (issue 25): an attacker who can write files in the
//! root, without any signing key, cannot change what `rollback` activates, what `validate`
//! runs, or what `status`, `check` and `report` say. Each test is an attack that worked before.

use std::path::Path;
use std::process::Command;

use crate::common::site::Releases;
use crate::common::*;

/// A bundle of `name` at `version` signed by `keys`, built in `dir`.
fn foreign_bundle(dir: &Path, keys: &Keys, name: &str, version: &str) -> std::path::PathBuf {
    let p = project(dir, version);
    let spec = std::fs::read_to_string(&p.spec).unwrap().replace("name = \"demo\"", &format!("name = \"{name}\""));
    std::fs::write(&p.spec, spec).unwrap();
    std::fs::write(p.dir.join("notes.txt"), "the attacker's notes\n").unwrap();
    let out = dir.join("foreign.airlock");
    build(&p, keys, &out).ok();
    out
}

#[test]
fn a_key_planted_in_a_retained_trust_dir_never_verifies_a_rollback_or_a_report() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    r.install("1.1.0", &[]).ok();
    let evil = keygen(&r.t.path().join("evil"), "evil");
    let theirs = foreign_bundle(&r.t.path().join("theirs"), &evil, "demo", "1.0.0");
    for link in ["previous", "current"] {
        let dir = r.linked(link);
        std::fs::copy(&evil.public, dir.join("trust/planted.pub")).unwrap();
        std::fs::copy(&theirs, dir.join("bundle.airlock")).unwrap();
    }
    let before = snapshot(&r.root);
    let refused = r.rollback(&[]).code(3);
    assert!(refused.stderr.contains("not changed"), "{}", refused.stderr);
    assert_eq!(snapshot(&r.root), before, "a refused rollback changes nothing");
    let report = airlock_run(&["report", "--root", s(&r.root), "--json"]);
    assert_eq!(report.code, 3, "the report of a site whose current bundle was swapped: {}", report.stdout);
    assert_eq!(r.status()["current"]["version"], "1.1.0", "current still names what it named");
}

#[test]
fn a_retained_bundle_swapped_for_another_signed_one_is_refused_by_its_id() {
    let r = Releases::new();
    for v in ["1.0.0", "1.1.0", "1.2.0"] {
        r.install(v, &[]).ok();
    }
    let previous = r.linked("previous").join("bundle.airlock");
    let other = foreign_bundle(&r.t.path().join("other"), &r.keys, "other", "9.0.0");
    for swapped in [r.bundle("1.0.0"), other] {
        std::fs::copy(&swapped, &previous).unwrap();
        let before = snapshot(&r.root);
        for extra in [&[][..], &["--trust", s(&r.keys.public)][..]] {
            let refused = r.rollback(extra).code(3);
            assert!(
                refused.stderr.contains("is not the bundle this site retained as"),
                "{extra:?}: {}",
                refused.stderr
            );
            assert_eq!(snapshot(&r.root), before, "a refused rollback changes nothing");
        }
    }
    assert_eq!(r.current(), "1.2.0");
}

#[test]
fn one_key_in_two_encodings_counts_once_toward_a_threshold() {
    let b = built_project();
    let compressed = b.t.path().join("compressed.pub");
    let args =
        ["ec", "-pubin", "-in", s(&b.keys.public), "-conv_form", "compressed", "-pubout", "-out", s(&compressed)];
    run(Command::new("openssl").args(args)).ok();
    assert_ne!(std::fs::read(&compressed).unwrap(), std::fs::read(&b.keys.public).unwrap());
    // The compressed form alone is the same key, with the same id.
    let alone = airlock_run(&["verify", s(&b.bundle), "--trust", s(&compressed), "--json"]).ok().json();
    let plain = airlock_run(&["verify", s(&b.bundle), "--trust", s(&b.keys.public), "--json"]).ok().json();
    assert_eq!(alone["signers"], plain["signers"]);
    // Both forms are one key: a threshold of 2 can never be met (a usage error, before reading).
    let twice = ["--trust", s(&b.keys.public), "--trust", s(&compressed), "--threshold", "2"];
    let refused = airlock_run(&[&["verify", s(&b.bundle)][..], &twice].concat()).code(2);
    assert!(refused.stderr.contains("can never be met: only 1 distinct"), "{}", refused.stderr);
    let root = b.t.path().join("site");
    airlock_run(&[&["install", s(&b.bundle), "--root", s(&root)][..], &twice].concat()).code(2);
    assert_nothing_installed(&root);
}

#[test]
fn deleting_or_editing_the_state_does_not_lift_the_downgrade_guard() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    r.install("1.1.0", &[]).ok();
    let state_path = r.root.join("state.json");
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    state["high_water"]["demo"] = "0.0.1".into();
    std::fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    let refused = r.install("1.0.0", &[]).code(3);
    assert!(refused.stderr.contains("already activated demo 1.1.0"), "{}", refused.stderr);

    std::fs::remove_file(&state_path).unwrap();
    let before = snapshot(&r.root);
    let refused = r.install("1.0.0", &[]).code(3);
    assert!(
        refused.stderr.contains("state.json") && refused.stderr.contains("records"),
        "the missing state is named, with the repair: {}",
        refused.stderr
    );
    assert_eq!(snapshot(&r.root), before);
    let refused = r.install("1.2.0", &[]).code(3);
    assert!(refused.stderr.contains("state.json"), "not even an upgrade proceeds: {}", refused.stderr);
}

/// The demo project with one `[[validation.check]]` (its TOML body) built in `t`, and a site
/// root path: (keys, bundle, root).
fn with_check(t: &tempfile::TempDir, check: &str) -> (Keys, std::path::PathBuf, std::path::PathBuf) {
    let keys = keygen(&t.path().join("k"), "build");
    let p = project(&t.path().join("p"), "1.0.0");
    let spec = std::fs::read_to_string(&p.spec).unwrap();
    std::fs::write(&p.spec, format!("{spec}\n[[validation.check]]\n{check}\n")).unwrap();
    let bundle = t.path().join("b.airlock");
    build(&p, &keys, &bundle).ok();
    (keys, bundle, t.path().join("site"))
}

#[test]
fn validate_runs_nothing_from_a_tampered_active_manifest() {
    let t = tempfile::tempdir().unwrap();
    let (keys, bundle, root) = with_check(&t, "name = \"smoke\"\nrun = [\"true\"]\nexpect = \"exit0\"");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    airlock_run(&["validate", "--root", s(&root)]).ok();

    let marker = t.path().join("pwned");
    let manifest = root.join("current/airlock/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let evil = text.replace(r#"["true"]"#, &format!(r#"["touch","{}"]"#, marker.display()));
    assert_ne!(text, evil);
    std::fs::write(&manifest, evil).unwrap();
    let refused = airlock_run(&["validate", "--root", s(&root)]).code(3);
    assert!(refused.stderr.contains("airlock check"), "{}", refused.stderr);
    assert!(!marker.exists(), "the tampered check command never ran");
}

#[test]
fn check_finds_every_tampered_file_and_swapped_bundle_and_passes_a_clean_root() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    r.install("1.1.0", &[]).ok();
    let clean = airlock_run(&["check", "--root", s(&r.root), "--json"]).ok().json();
    assert_eq!(clean["ok"], true, "{clean}");
    let human = airlock_run(&["check", "--root", s(&r.root)]).ok().stdout;
    assert!(human.contains("ok"), "{human}");

    std::fs::write(r.root.join("current/files/notes.txt"), "other bytes\n").unwrap();
    std::fs::write(r.root.join("current/files/planted.sh"), "#!/bin/sh\n").unwrap();
    std::fs::remove_file(r.root.join("current/files/board.bin")).unwrap();
    std::fs::copy(r.bundle("1.1.0"), r.linked("previous").join("bundle.airlock")).unwrap();
    let damaged = airlock_run(&["check", "--root", s(&r.root), "--json"]).code(3).json();
    assert_eq!(damaged["ok"], false);
    let text = damaged.to_string();
    for name in ["files/notes.txt", "files/planted.sh", "files/board.bin", "is not the bundle this site retained as"] {
        assert!(text.contains(name), "{name} in {damaged:#}");
    }
    let human = airlock_run(&["check", "--root", s(&r.root)]).code(3).stdout;
    assert!(human.contains("files/notes.txt") && human.contains("DAMAGED"), "{human}");
    // The report says what it checked and how.
    let report = airlock_run(&["report", "--root", s(&r.root), "--json"]).json();
    assert!(report.to_string().contains("airlock check"), "{report:#}");
}

#[test]
fn a_damaged_previous_bundle_leaves_status_showing_current() {
    let r = Releases::new();
    r.install("1.0.0", &[]).ok();
    r.install("1.1.0", &[]).ok();
    let manifest = r.linked("previous").join("airlock/manifest.json");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.extend_from_slice(b"garbage");
    std::fs::write(&manifest, bytes).unwrap();
    let st = r.status();
    assert_eq!(st["current"]["version"], "1.1.0");
    assert!(st["previous"]["damaged"].is_string(), "{st:#}");
    let human = airlock_run(&["status", "--root", s(&r.root)]).ok().stdout;
    assert!(human.contains("previous: damaged") && human.contains("airlock check"), "{human}");

    // A huge state file is refused by its size, not read into memory; what else can be read
    // is still shown, and the exit code says something is wrong.
    let state = std::fs::OpenOptions::new().write(true).open(r.root.join("state.json")).unwrap();
    state.set_len(1 << 30).unwrap();
    let refused = airlock_run(&["status", "--root", s(&r.root), "--json"]).code(1);
    assert!(refused.stderr.contains("state.json") && refused.stderr.contains("larger than"), "{}", refused.stderr);
    let shown: serde_json::Value = serde_json::from_str(&refused.stdout).unwrap();
    assert_eq!(shown["current"]["version"], "1.1.0");
    assert!(shown["state_damaged"].as_str().is_some_and(|d| d.contains("larger than")), "{shown:#}");
}

#[test]
fn a_red_install_leaves_a_record() {
    let b = built_project();
    let root = b.t.path().join("site");
    let red =
        run(on_host("nogpu").args(["install", s(&b.bundle), "--trust", s(&b.keys.public), "--root", s(&root)])).code(4);
    assert!(red.stderr.contains("red"), "{}", red.stderr);
    assert!(!root.join("current").exists());
    let records: Vec<_> = std::fs::read_dir(root.join("records")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&records[0]).unwrap()).unwrap();
    assert_eq!(rec["action"], "install");
    assert_eq!(rec["outcome"], "refused");
    assert_eq!(rec["validation"]["verdict"], "red");
    assert!(rec["reason"].as_str().is_some_and(|r| r.contains("red")), "{rec:#}");
    assert!(rec["phases"]["verify"].as_f64().is_some(), "{rec:#}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &rec), Vec::<String>::new());
}

#[test]
fn a_check_whose_background_grandchild_keeps_stdout_open_does_not_hang_validate() {
    let t = tempfile::tempdir().unwrap();
    let check =
        "name = \"daemon\"\nrun = [\"sh\", \"-c\", \"sleep 120 & echo started\"]\nexpect = \"exit0\"\ntimeout_s = 60";
    let (keys, bundle, root) = with_check(&t, check);
    let started = std::time::Instant::now();
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    airlock_run(&["validate", "--root", s(&root)]).ok();
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
}

/// The points a test build of airlock stops dead at (`AIRLOCK_TEST_CRASH_AT`), in order.
const CRASH_POINTS: [&str; 6] = ["verified", "remembered", "retained", "published", "activated", "saved"];

/// After a crash: `current` is a complete verified bundle, `check` finds nothing wrong, and
/// `status` reads.
fn assert_consistent(r: &Releases, point: &str) {
    site::assert_current_verifies(&r.root, &r.keys);
    let checked = airlock_run(&["check", "--root", s(&r.root), "--json"]);
    assert_eq!(checked.code, 0, "after a crash at {point}: {}", checked.stdout);
    r.status();
}

#[test]
fn an_install_or_rollback_stopped_dead_at_any_point_leaves_a_consistent_root() {
    for point in CRASH_POINTS {
        let r = Releases::new();
        r.install("1.0.0", &[]).ok();
        let bundle = r.bundle("1.1.0");
        let args = ["install", s(&bundle), "--trust", s(&r.keys.public), "--root", s(&r.root)];
        let crashed = run(airlock().env("AIRLOCK_TEST_CRASH_AT", point).args(args));
        assert_ne!(crashed.code, 0, "the install stopped at {point}");
        assert_consistent(&r, point);
        let current = r.current();
        assert!(current == "1.0.0" || point == "activated" || point == "saved", "{point}: current {current}");
        // The next writer finishes the job.
        r.install("1.1.0", &[]).ok();
        assert_eq!(r.current(), "1.1.0");
        assert_consistent(&r, point);

        let crashed = run(airlock().env("AIRLOCK_TEST_CRASH_AT", point).args(["rollback", "--root", s(&r.root)]));
        assert_ne!(crashed.code, 0, "the rollback stopped at {point}");
        assert_consistent(&r, point);
        if r.current() == "1.1.0" {
            r.rollback(&[]).ok();
        }
        assert_eq!(r.current(), "1.0.0", "{point}");
        assert_consistent(&r, point);
    }
}

/// The demo bundle at `version`, built under `dir`.
fn demo_release(dir: &Path, keys: &Keys, version: &str) -> std::path::PathBuf {
    let p = dir.join(version);
    run(std::process::Command::new("cp").args(["-r", s(&repo("testdata/demo")), s(&p)])).ok();
    let spec = std::fs::read_to_string(p.join("airlock.toml")).unwrap().replace("2026.11.0", version);
    std::fs::write(p.join("airlock.toml"), spec).unwrap();
    let out = dir.join(format!("{version}.airlock"));
    run(airlock().current_dir(&p).args(["build", "airlock.toml", "--key", s(&keys.private), "--out", s(&out)])).ok();
    out
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn a_node_stopped_between_retaining_and_judging_a_release_is_not_held_to_it() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let release = |version: &str| demo_release(t.path(), &keys, version);
    let node = t.path().join("node");
    let apply = |bundle: &std::path::Path| {
        let mut c = airlock();
        c.args(["apply", s(bundle), "--trust", s(&keys.public), "--root", s(&node)]);
        c
    };
    run(&mut apply(&release("2026.11.0"))).ok();
    // Power lost after 2026.12.0 was retained, before its packages and its gate: it never ran.
    let crashed = run(apply(&release("2026.12.0")).env("AIRLOCK_TEST_CRASH_AT", "retained"));
    assert_ne!(crashed.code, 0);
    // A release between the two is no downgrade: 2026.12.0 never ran here.
    let r = run(&mut apply(&release("2026.11.5")));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // What did run still holds the mark.
    let r = run(&mut apply(&release("2026.11.1"))).code(3);
    assert!(r.stderr.contains("2026.11.5"), "{}", r.stderr);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn an_apply_stopped_dead_at_any_point_leaves_a_consistent_node_that_the_next_apply_completes() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let release = |version: &str| demo_release(t.path(), &keys, version);
    let (first, second) = (release("2026.11.0"), release("2026.12.0"));
    for point in ["verified", "remembered", "retained", "committing", "activated", "saved"] {
        let node = t.path().join(format!("node-{point}"));
        let apply = |bundle: &std::path::Path| {
            let mut c = airlock();
            c.args(["apply", s(bundle), "--trust", s(&keys.public), "--root", s(&node), "--json"]);
            c
        };
        run(&mut apply(&first)).ok();
        let crashed = run(apply(&second).env("AIRLOCK_TEST_CRASH_AT", point));
        assert_ne!(crashed.code, 0, "the apply stopped at {point}");
        // The node is whole: current verifies, check finds nothing, status reads.
        site::assert_current_verifies(&node, &keys);
        let checked = airlock_run(&["check", "--root", s(&node), "--json"]);
        assert_eq!(checked.code, 0, "after a crash at {point}: {}", checked.stdout);
        let status = airlock_run(&["status", "--root", s(&node), "--json"]).ok().json();
        let current = status["current"]["version"].as_str().unwrap().to_owned();
        assert!(current == "2026.11.0" || ["activated", "saved"].contains(&point), "{point}: current {current}");
        // The next apply of the same release completes.
        let done = run(&mut apply(&second)).ok().json();
        assert_eq!(done["version"], "2026.12.0", "{point}");
        let status = airlock_run(&["status", "--root", s(&node), "--json"]).ok().json();
        assert_eq!(status["current"]["version"], "2026.12.0", "{point}");
        assert_eq!(airlock_run(&["check", "--root", s(&node), "--json"]).code, 0, "{point}");
    }
}
