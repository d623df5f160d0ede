//! What a new user reads: each message says what is wrong and what to do, with the exit code
//! `docs/architecture.md` gives ("Errors and exit codes"); human output uses short ids and one vocabulary (artifacts, members,
//! entries); colour only on a terminal; `-v` shows the phases; `--help` explains every flag.

use std::process::Command;

use crate::common::*;

fn key_id(keys: &Keys) -> String {
    airlock::sign::TrustedKey::load(&keys.public).unwrap().key_id().to_string()
}

#[test]
fn an_untrusted_signer_is_named_by_the_key_the_manifest_claims() {
    let Built { t, keys: build_keys, bundle, .. } = built_project();
    let site = keygen(&t.path().join("k"), "site");
    let r = airlock_run(&["verify", s(&bundle), "--trust", s(&site.public)]).code(3);
    let (signer, trusted) = (key_id(&build_keys), key_id(&site));
    assert!(r.stdout.contains(&format!("the manifest says key `{}` signed it", &signer[..16])), "{}", r.stdout);
    assert!(r.stdout.contains(&trusted[..16]) && r.stdout.contains("add `--trust`"), "{}", r.stdout);
    assert!(!r.stdout.contains(&signer) && !r.stdout.contains(&trusted), "human output uses short ids: {}", r.stdout);
}

#[test]
fn a_bundle_trusted_only_through_a_cosignature_says_its_build_key_is_not_trusted() {
    let Built { t, keys: build_keys, bundle, .. } = built_project();
    let approver = keygen(&t.path().join("k"), "approver");
    airlock_run(&["sign", s(&bundle), "--key", s(&approver.private), "--trust", s(&build_keys.public)]).ok();
    let r = airlock_run(&["verify", s(&bundle), "--trust", s(&approver.public)]).code(3);
    let expect =
        format!("the provenance is signed by the build key `{}`, which is not trusted", &key_id(&build_keys)[..16]);
    assert!(r.stdout.contains(&expect), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("co-signature(s) by `{}`", &key_id(&approver)[..16])), "{}", r.stdout);
    assert!(!r.stdout.contains("provenance does not verify"), "{}", r.stdout);
    // Trusting the build key too, it verifies.
    airlock_run(&["verify", s(&bundle), "--trust", s(&approver.public), "--trust", s(&build_keys.public)]).ok();
}

#[test]
fn spec_and_key_mistakes_say_what_to_do() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("airlock.toml");
    std::fs::write(&spec, "[bundle]\nname = \"demo\"\nversion = \"1.0\"\n").unwrap();
    let r = airlock_run(&["lock", s(&spec)]).code(2);
    assert!(r.stderr.contains("airlock.toml:3:") && r.stderr.contains("must be semver"), "{}", r.stderr);
    assert!(r.stderr.contains("`1.0.0`") && !r.stderr.contains("unexpected end of input\n"), "{}", r.stderr);

    std::fs::write(&spec, "[bundle]\nname = \"demo\"\nversion = \"1.0.0\"\n").unwrap();
    let r = airlock_run(&["lock", s(&spec)]).ok();
    assert!(r.stderr.contains("has no entries") && r.stderr.contains("carry nothing"), "{}", r.stderr);

    let keys = t.path().join("keys");
    airlock_run(&["keygen", "--out-dir", s(&keys), "--name", "k"]).ok();
    let r = airlock_run(&["keygen", "--out-dir", s(&keys), "--name", "k"]).code(1);
    assert!(r.stderr.contains("refusing to overwrite") && r.stderr.contains("k.key"), "{}", r.stderr);
    assert!(!r.stderr.contains("UNENCRYPTED"), "no warning about a key that is not written: {}", r.stderr);
    // A name that is not a file name is a flag value that cannot be used: exit 2, as clap's.
    let r = airlock_run(&["keygen", "--out-dir", s(&keys), "--name", "../k"]).code(2);
    assert!(r.stderr.contains("invalid key name `../k`: expected a plain file name"), "{}", r.stderr);
}

#[test]
fn diff_of_two_different_bundles_says_so() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let (a, b) = (project(&t.path().join("a"), "1.0.0"), project(&t.path().join("b"), "1.0.0"));
    let text = std::fs::read_to_string(&b.spec).unwrap();
    std::fs::write(&b.spec, text.replace("name = \"demo\"", "name = \"other\"")).unwrap();
    let (ba, bb) = (t.path().join("a.airlock"), t.path().join("b.airlock"));
    build(&a, &keys, &ba).ok();
    build(&b, &keys, &bb).ok();
    let r = airlock_run(&["diff", s(&ba), s(&bb), "--trust", s(&keys.public)]).ok();
    assert!(r.stderr.contains("two different bundles, `demo` 1.0.0 and `other` 1.0.0"), "{}", r.stderr);
}

#[test]
fn every_verb_counts_artifacts_members_and_entries_alike_with_short_ids_and_sub_second_times() {
    let Built { t: _t, keys, bundle, stdout: built, .. } = built_project();
    // Two files asked for; the manifest, signature, provenance and 3 entries (SBOM + 2 files).
    assert!(built.contains(": 2 artifacts in 6 members (3 entries, "), "{built}");
    let time = built.lines().next().and_then(|l| l.rsplit_once(" in ")).map(|(_, t)| t).unwrap_or_default();
    let seconds = time.strip_suffix(" s").and_then(|n| n.split_once('.')).map(|(_, frac)| frac.len());
    assert_eq!(seconds, Some(2), "a time like `0.21 s`: {built}");
    let id = key_id(&keys);
    assert!(built.contains(&id[..16]) && !built.contains(&id), "{built}");
    let verified = airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok().stdout;
    assert!(verified.contains(": 2 artifacts in 6 members (3 entries)"), "{verified}");
    let inspected = airlock_run(&["inspect", s(&bundle)]).ok().stdout;
    assert!(inspected.contains("artifacts:   2") && inspected.contains("members:     6"), "{inspected}");
    assert!(inspected.contains("entries:     3"), "{inspected}");
    let json = airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public), "--json"]).ok().json();
    assert_eq!((json["members"].as_u64(), json["entries"].as_u64()), (Some(6), Some(3)));
    assert_eq!(json["signers"][0], id.as_str(), "--json carries whole ids");
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let t = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_airlock");
    // Redirected: the warning about an unencrypted key, without escape codes.
    let r = airlock_run(&["keygen", "--out-dir", s(&t.path().join("a"))]).ok();
    assert!(r.stderr.contains("UNENCRYPTED") && !r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
    // On a terminal (script(1) gives it one): coloured, unless NO_COLOR is set.
    let on_tty = |dir: &str, no_color: bool| {
        let cmd = format!("{bin} keygen --out-dir {}", t.path().join(dir).display());
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]).env_remove("AIRLOCK_KEY_PASSWORD").env("RUST_LOG", "warn");
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        let out = run(&mut c).ok();
        assert!(out.stdout.contains("UNENCRYPTED"), "{}", out.stdout);
        out.stdout
    };
    assert!(on_tty("b", false).contains('\u{1b}'), "colour on a terminal");
    assert!(!on_tty("c", true).contains('\u{1b}'), "no colour with NO_COLOR");
}

#[test]
fn verbose_shows_the_phases_of_build_and_verify() {
    let Built { t, keys, .. } = built_project();
    // A project of its own, so that build resolves its lock.
    let p = project(&t.path().join("q"), "1.0.0");
    let bundle = t.path().join("q.airlock");
    let logged = |args: &[&str]| run(airlock().env_remove("RUST_LOG").env("SOURCE_DATE_EPOCH", EPOCH).args(args)).ok();
    let b = logged(&["-v", "build", s(&p.spec), "--key", s(&keys.private), "--out", s(&bundle)]).stderr;
    for phase in ["resolve:", "fetch:", "sbom:", "sign:", "pack:"] {
        assert!(b.contains(phase), "`{phase}` in: {b}");
    }
    let v = logged(&["-v", "verify", s(&bundle), "--trust", s(&keys.public)]).stderr;
    for phase in ["signature:", "members:", "provenance:"] {
        assert!(v.contains(phase), "`{phase}` in: {v}");
    }
    assert!(logged(&["verify", s(&bundle), "--trust", s(&keys.public)]).stderr.is_empty(), "quiet by default");
}

#[test]
fn help_describes_every_flag_and_argument_and_version_names_the_commit() {
    let verbs = ["keygen", "lock", "build", "verify", "sign", "inspect", "install", "diff", "provenance", "sbom"];
    for verb in verbs {
        let help = airlock_run(&[verb, "--help"]).ok().stdout;
        let mut in_list = false;
        for line in help.lines() {
            if line == "Arguments:" || line == "Options:" {
                in_list = true;
                continue;
            }
            if line.is_empty() {
                in_list = false;
            }
            let item = line.trim_start();
            if in_list && (item.starts_with('-') || item.starts_with('<') || item.starts_with('[')) {
                let described = item.split_once("  ").is_some_and(|(_, text)| !text.trim().is_empty());
                assert!(described, "`airlock {verb} --help`: `{item}` has no description");
            }
        }
    }
    let version = airlock_run(&["--version"]).ok().stdout;
    let (name, rest) = version.trim().split_once(' ').unwrap();
    assert_eq!(name, "airlock");
    let commit = rest.split_once(" (").and_then(|(_, c)| c.split_whitespace().next()).unwrap_or_default();
    assert!(commit.len() == 9 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "the commit: {version}");
}

#[test]
fn a_random_file_is_named_not_a_bundle_in_our_words_without_echoing_its_bytes() {
    let Built { t, keys, .. } = built_project();
    // A zstd frame around a "tar header" of text: the tar crate's own message would quote it.
    let garbage = t.path().join("garbage.airlock");
    let header = "MARKER-".repeat(100);
    std::fs::write(&garbage, zstd::encode_all(header.as_bytes(), 3).unwrap()).unwrap();
    let r = airlock_run(&["verify", s(&garbage), "--trust", s(&keys.public)]).code(3);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(all.contains("not an airlock bundle") && all.contains("the tar header is invalid"), "{all}");
    assert!(!all.contains("MARKER"), "no byte of the header is shown: {all}");
}

#[test]
fn build_makes_the_output_directory_and_sbom_json_needs_out() {
    let Built { t, keys, project, bundle, .. } = built_project();
    let deep = t.path().join("new/dir/x.airlock");
    build(&project, &keys, &deep).ok();
    assert!(deep.is_file());
    let r = airlock_run(&["sbom", s(&bundle), "--json"]).code(2);
    assert!(r.stderr.contains("--out"), "{}", r.stderr);
}

#[test]
fn install_says_its_verdict_once_each_finding_once() {
    let Built { t, keys, bundle, .. } = built_project();
    let green =
        airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&t.path().join("g"))]).ok();
    assert!(green.stdout.contains("validation green: "), "{}", green.stdout);
    // The inbox-driver host: the same amber finding on each of its 8 GPUs is one line.
    let root = t.path().join("a");
    let args = ["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)];
    let amber = run(on_host("mi300x-inbox").args(args).args(["--accept-amber", "--reason", "CAB-7"])).ok();
    let lines: Vec<&str> = amber.stdout.lines().filter(|l| l.contains("(expected `>=6.12`")).collect();
    assert_eq!(lines.len(), 1, "{}", amber.stdout);
    assert!(lines[0].ends_with("on 8 GPUs"), "{}", lines[0]);
    // Red says "red" once.
    let red = run(on_host("nogpu").args([
        "install",
        s(&bundle),
        "--trust",
        s(&keys.public),
        "--root",
        s(&t.path().join("r")),
    ]))
    .code(4);
    assert_eq!(red.stderr.matches("red").count(), 2, "`is red` and `a red stack`: {}", red.stderr);
}

#[test]
fn every_json_command_prints_one_document_when_it_fails() {
    let Built { t, keys, bundle, .. } = built_project();
    let root = t.path().join("site");
    let root_args = ["--root", s(&root), "--json"];
    let red = run(on_host("nogpu").args(["install", s(&bundle), "--trust", s(&keys.public)]).args(root_args)).code(4);
    let doc: serde_json::Value = serde_json::from_str(&red.stdout).expect("one JSON document");
    assert_eq!((doc["error"]["class"].as_str(), doc["error"]["exit_code"].as_u64()), (Some("validation"), Some(4)));
    assert!(doc["error"]["message"].as_str().unwrap().contains("red"), "{doc:#}");
    assert_eq!(doc["error"]["verdict"], "red", "the verdict, for a scheduler's hold reason: {doc:#}");
    // Nothing to roll back to: not a site yet (runtime, exit 1).
    let none = airlock_run(&["rollback", "--root", s(&t.path().join("none")), "--json"]).code(1);
    let doc: serde_json::Value = serde_json::from_str(&none.stdout).expect("one JSON document");
    assert_eq!(doc["error"]["exit_code"], 1, "{doc:#}");
    assert!(doc["error"]["message"].as_str().unwrap().contains("is not a site root"), "{doc:#}");
    assert!(!t.path().join("none").exists(), "no root is made for a rollback");
    // A command whose own document says what failed prints no second one.
    let other = keygen(&t.path().join("k"), "other");
    let v = airlock_run(&["verify", s(&bundle), "--trust", s(&other.public), "--json"]).code(3);
    let doc: serde_json::Value = serde_json::from_str(&v.stdout).expect("exactly one JSON document");
    assert_eq!(doc["verified"], false);
    // A usage error before anything ran is one document too.
    let bad = airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public), "--threshold", "2", "--json"]).code(2);
    let doc: serde_json::Value = serde_json::from_str(&bad.stdout).expect("one JSON document");
    assert_eq!(doc["error"]["class"], "usage", "{doc:#}");
}

/// `CMD` run on a terminal (`script` gives it a pty), with `NO_COLOR` set or not: what the
/// terminal showed.
fn on_a_terminal(cmd: &str, no_color: bool) -> String {
    let probes = repo("testdata/probes/mi300x");
    let path = format!("{}:{}", probes.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut script = Command::new("script");
    script.args(["-qec", cmd, "/dev/null"]).env("PATH", path).env("AIRLOCK_HOST_ROOT", probes.join("root"));
    script.env_remove("RUST_LOG").env_remove("NO_COLOR");
    if no_color {
        script.env("NO_COLOR", "1");
    }
    run(&mut script).stdout
}

#[test]
fn verdicts_and_errors_are_coloured_on_a_terminal_only() {
    let Built { t, keys, bundle, .. } = built_project();
    let other = keygen(&t.path().join("k"), "other");
    let bin = env!("CARGO_BIN_EXE_airlock");
    let verify = format!("{bin} verify {} --trust {}", s(&bundle), s(&other.public));
    let shown = on_a_terminal(&verify, false);
    assert!(shown.contains("\x1b[1;31mREJECTED\x1b[0m") && shown.contains("\x1b[1;31merror:\x1b[0m"), "{shown:?}");
    let install = format!("{bin} install {} --trust {} --root {}", s(&bundle), s(&keys.public), s(&t.path().join("r")));
    let shown = on_a_terminal(&install, false);
    assert!(shown.contains("validation \x1b[1;32mgreen\x1b[0m: "), "{shown:?}");
    // NO_COLOR, or not a terminal: no colour at all.
    assert!(!on_a_terminal(&verify, true).contains('\x1b'));
    let off = airlock_run(&["verify", s(&bundle), "--trust", s(&other.public)]).code(3);
    assert!(!off.stdout.contains('\x1b') && !off.stderr.contains('\x1b'));
}

#[test]
fn an_unreachable_threshold_is_a_usage_error_before_any_registry_is_asked() {
    let Built { t, keys, .. } = built_project();
    // Nothing listens on port 1: asking it would be a runtime error (exit 1).
    let nowhere = "oci://127.0.0.1:1/bundles/demo:1.0.0";
    let two = ["--trust", s(&keys.public), "--threshold", "2", "--insecure-registry"];
    let out = t.path().join("x.airlock");
    let pull = airlock_run(&[&["pull", nowhere, "--out", s(&out)][..], &two].concat()).code(2);
    assert!(pull.stderr.contains("can never be met"), "{}", pull.stderr);
    let root = t.path().join("site");
    let install = airlock_run(&[&["install", nowhere, "--root", s(&root)][..], &two].concat()).code(2);
    assert!(install.stderr.contains("can never be met"), "{}", install.stderr);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn on_a_node_an_amber_refusal_names_apply_and_a_rollback_with_nothing_older_names_apply() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("demo.airlock");
    let spec = repo("testdata/demo/airlock.toml");
    run(airlock().args(["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)])).ok();
    let root = t.path().join("node");
    let apply = ["apply", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)];
    // An inbox driver: amber, refused; the way on is the same apply with an acceptance.
    let amber = run(on_host("mi300x-inbox").args(apply)).code(4);
    assert!(amber.stderr.contains("run the same `airlock apply` again with --accept-amber"), "{}", amber.stderr);
    assert!(!amber.stderr.contains("airlock validate"), "nothing is current to validate: {}", amber.stderr);
    assert!(amber.stderr.contains("GPU 0 (AMD Instinct MI300X)"), "{}", amber.stderr);
    // The only release this node ran: nothing older to roll back to, and what to do instead.
    run(airlock().args(apply)).ok();
    let r = airlock_run(&["rollback", "--root", s(&root)]).code(1);
    assert!(
        r.stderr.contains("has run no older release") && r.stderr.contains("`airlock apply` the release"),
        "{}",
        r.stderr
    );
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn a_newcomers_mistakes_get_answers_a_script_and_a_person_can_use() {
    let t = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_airlock");
    // `--json` asked for: a usage error is one JSON document on stdout too.
    let r = airlock_run(&["status", "--no-such-flag", "--json"]).code(2);
    let doc = r.json();
    assert_eq!((doc["error"]["class"].as_str(), doc["error"]["exit_code"].as_i64()), (Some("usage"), Some(2)));
    assert!(doc["error"]["message"].as_str().unwrap().contains("--no-such-flag"), "{doc}");

    let keys = keygen(&t.path().join("keys"), "build");
    // Two files, no matrix: it installs on any host.
    let p = project(&t.path().join("p"), "1.0.0");
    let spec = std::fs::read_to_string(&p.spec).unwrap();
    std::fs::write(&p.spec, spec.split("[[validation.target]]").next().unwrap()).unwrap();
    let bundle = t.path().join("b.airlock");
    build(&p, &keys, &bundle).ok();
    // A build interrupted half-way (Ctrl-C) left its hidden partial file: the next build of the
    // same output removes it, and leaves alone one that a live build still writes.
    let stale = t.path().join(".b.airlock.Ab12Cd.partial");
    std::fs::write(&stale, pattern(1 << 20, 9)).unwrap();
    let live = t.path().join(".b.airlock.Ef34Gh.partial");
    std::fs::write(&live, b"").unwrap();
    let mut writer = Command::new("flock").args(["-x", s(&live), "sleep", "60"]).spawn().unwrap();
    while run(Command::new("flock").args(["-xn", s(&live), "true"])).code == 0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    build(&p, &keys, &bundle).ok();
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert!(!stale.exists(), "the abandoned partial file is gone");
    assert!(live.exists(), "a partial file a writer holds stays");
    // An HTML page is not printed on a terminal: said before anything is read.
    let cmd = format!("{bin} report {}", bundle.display());
    let tty = run(Command::new("script").args(["-qec", &cmd, "/dev/null"])).code(2);
    assert!(tty.stdout.contains("--out FILE.html") && !tty.stdout.contains("<html"), "{}", tty.stdout);

    // A user who may not write the root is told who may.
    let root = t.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(t.path()).unwrap().permissions(), 0o755);
    run(Command::new("chmod").args(["-R", "a+rX", s(t.path())])).ok();
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin, "install", s(&bundle), "--trust"]).args([
        s(&keys.public),
        "--root",
        s(&root),
    ]);
    let denied = run(&mut c).code(1);
    assert!(
        denied.stderr.contains("this user may not write there") && denied.stderr.contains("--root"),
        "{}",
        denied.stderr
    );

    // Issue 76: apply as another user than root is refused before anything, saying why.
    let node = t.path().join("node");
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin, "apply", s(&bundle), "--trust"]);
    c.args([s(&keys.public), "--root", s(&node)]);
    let refused = run(&mut c).code(2);
    assert!(refused.stderr.contains("run it as root") && !node.exists(), "{}", refused.stderr);
    // A scratch directory that cannot be made is TMPDIR's problem, said as such (it was said as
    // the site root's, with advice on who may write a site root).
    let r = run(airlock().env("TMPDIR", t.path().join("no-such-dir")).args([
        "apply",
        s(&bundle),
        "--trust",
        s(&keys.public),
        "--root",
        s(&node),
        "--dry-run",
    ]));
    assert!(
        r.code == 1 && r.stderr.contains("(TMPDIR)") && !r.stderr.contains("a site root is written by"),
        "{}",
        r.stderr
    );
    // A public key given where the private one belongs is named as such, with no advice on its
    // permissions.
    let r = airlock_run(&["build", s(&p.spec), "--key", s(&keys.public), "--out", s(&t.path().join("x.airlock"))]);
    assert!(r.code != 0 && r.stderr.contains("it is a public key") && !r.stderr.contains("chmod"), "{}", r.stderr);

    // `check` counts what is damaged, not what it looked at.
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    // Issue 76: an auditor who may read the root but not write it runs `check` (a reader's
    // lock, shared, never created; it needed the writer's lock and failed on the old code).
    run(Command::new("chmod").args(["-R", "a+rX", s(&root)])).ok();
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin, "check", "--root", s(&root)]);
    let audited = run(&mut c);
    assert_eq!(audited.code, 0, "{}{}", audited.stdout, audited.stderr);
    let notes = walkdir::WalkDir::new(root.join("bundles"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_file() && e.file_name() == "notes.txt")
        .expect("the notes are staged");
    std::fs::write(notes.path(), "changed").unwrap();
    let checked = airlock_run(&["check", "--root", s(&root)]).code(3);
    assert!(checked.stdout.contains("DAMAGED: 1 of 1 retained bundle(s)"), "{}", checked.stdout);
}

/// Issue 76: the hint after a rollback that would move forward is a command that works when
/// pasted: the same `--root`, and `--trust` named where the site has no trust root (it named
/// the bundle file only, and pasted it targeted /var/lib/airlock).
#[test]
fn the_moving_forward_hint_runs_when_pasted() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let root = t.path().join("site");
    for v in ["1.0.0", "1.1.0"] {
        let p = project(&t.path().join(v), v);
        let out = t.path().join(format!("{v}.airlock"));
        build(&p, &keys, &out).ok();
        airlock_run(&["install", s(&out), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    }
    airlock_run(&["rollback", "--root", s(&root)]).ok();
    let forward = airlock_run(&["rollback", "--root", s(&root)]).code(1);
    let hint = forward.stderr.split("moving forward is `").nth(1).and_then(|h| h.split('`').next()).unwrap_or_default();
    assert!(
        hint.contains(&format!("--root {}", root.display())) && hint.contains("--trust KEY.pub"),
        "{}",
        forward.stderr
    );
    let pasted: Vec<String> = hint
        .split_whitespace()
        .skip(1)
        .map(|w| if w == "KEY.pub" { s(&keys.public).to_owned() } else { w.to_owned() })
        .collect();
    let done = run(airlock().args(&pasted).arg("--json")).ok().json();
    assert_eq!(done["version"], "1.1.0", "{done}");
}

#[test]
fn flag_slips_name_the_flag_that_works() {
    // Issue 76: clap's own tips sent these to `--registry-ca` (with a usage line that made it
    // look required) and to `-- --key`.
    let cases = [
        (vec!["install", "b.airlock", "--site", "/srv/airlock"], "`--root DIR`"),
        (vec!["apply", "b.airlock", "--site=/srv/airlock"], "`--root DIR`"),
        (vec!["verify", "b.airlock", "--key", "k.pub"], "`--trust KEY.pub`"),
        (vec!["verify", "--bundle", "b.airlock"], "the bundle is the first argument"),
        (vec!["build", "airlock.toml", "--out-dir", "x"], "`--out PATH`"),
    ];
    for (args, hint) in cases {
        let r = airlock_run(&args).code(2);
        assert!(r.stderr.contains(hint), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("registry-ca") && !r.stderr.contains("-- --"), "{args:?}: {}", r.stderr);
    }
    // The hinted flags parse: what fails then is the missing file, not the command line.
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("b.airlock");
    let r = airlock_run(&["verify", s(&missing), "--trust", s(&t.path().join("k.pub"))]);
    assert_ne!(r.code, 2, "{}", r.stderr);
    // A slip with no better flag keeps clap's own tip.
    let r = airlock_run(&["verify", "b.airlock", "--trsut", "k.pub"]).code(2);
    assert!(r.stderr.contains("--trust"), "{}", r.stderr);
}
