//! Habits every verb shares: flags declared once and honoured alike (`--cache`, `--jobs`,
//! `--trust`, `--threshold`), a lock per spec, `diff` that says whether it verified, and
//! `--json` on the verbs that report.

use crate::common::http::HttpServer;
use crate::common::*;

#[test]
fn lock_fills_the_cache_it_is_given_and_build_finds_everything_there_offline() {
    let t = tempfile::tempdir().unwrap();
    let docroot = t.path().join("docroot");
    std::fs::create_dir_all(&docroot).unwrap();
    let bytes = pattern(20_000, 9);
    std::fs::write(docroot.join("fw.bin"), &bytes).unwrap();
    let server = HttpServer::start(&docroot);
    let sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let dir = t.path().join("p");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("airlock.toml");
    let body = format!(
        "[bundle]\nname = \"fw\"\nversion = \"1.0.0\"\n\n[[file]]\nname = \"fw.bin\"\nsource = \"{}/fw.bin\"\nsha256 = \"{sha}\"\n",
        server.url
    );
    std::fs::write(&spec, body).unwrap();
    let (given, default) = (t.path().join("given"), t.path().join("default"));
    let keys = keygen(&t.path().join("keys"), "build");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &default).args(args));

    let locked = run(airlock().env("AIRLOCK_CACHE", &default).env_remove("RUST_LOG").args([
        "-vv",
        "lock",
        s(&spec),
        "--cache",
        s(&given),
        "--jobs",
        "2",
    ]))
    .ok();
    assert!(locked.stderr.contains(&format!("GET {}/fw.bin", server.url)), "-vv logs each request: {}", locked.stderr);
    assert!(given.join("blobs/sha256").join(&sha).is_file(), "lock downloaded into --cache");
    assert!(!default.join("blobs/sha256").join(&sha).exists(), "and not into the default cache");
    drop(server); // everything the build needs is in the given cache now
    let out = t.path().join("fw.airlock");
    let build = ["build", s(&spec), "--locked", "--cache", s(&given), "--key", s(&keys.private), "--out", s(&out)];
    with(&build).ok();
    assert!(out.is_file());
}

#[test]
fn specs_in_one_directory_each_get_their_own_lock() {
    let t = tempfile::tempdir().unwrap();
    let p = project(&t.path().join("p"), "1.0.0");
    let text = std::fs::read_to_string(&p.spec).unwrap();
    let (canary, expand) = (p.dir.join("canary.toml"), p.dir.join("expand.toml"));
    std::fs::write(&canary, text.replace("name = \"demo\"", "name = \"canary\"")).unwrap();
    let mut wider = text.replace("name = \"demo\"", "name = \"expand\"");
    wider.push_str("\n[[file]]\nname = \"extra.txt\"\nsource = \"notes.txt\"\n");
    std::fs::write(&expand, wider).unwrap();
    airlock_run(&["lock", s(&canary)]).ok();
    airlock_run(&["lock", s(&expand)]).ok();
    let (canary_lock, expand_lock) = (p.dir.join("canary.lock"), p.dir.join("expand.lock"));
    assert!(!std::fs::read_to_string(&canary_lock).unwrap().contains("extra.txt"));
    assert!(std::fs::read_to_string(&expand_lock).unwrap().contains("extra.txt"));
    assert!(!p.dir.join("airlock.lock").exists(), "neither spec wrote the other's lock");
    // Each builds `--locked` from its own lock: the wider one did not make the other stale.
    let keys = keygen(&t.path().join("keys"), "build");
    for spec in [&canary, &expand] {
        let out = spec.with_extension("airlock");
        airlock_run(&["build", s(spec), "--locked", "--key", s(&keys.private), "--out", s(&out)]).ok();
    }
    // `airlock.toml` keeps `airlock.lock`.
    airlock_run(&["lock", s(&p.spec)]).ok();
    assert!(p.dir.join("airlock.lock").is_file());
}

#[test]
fn diff_says_it_compares_claims_verifies_with_trust_and_reports_a_broken_lock() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let other = keygen(&t.path().join("keys"), "other");
    let old = project(&t.path().join("old"), "1.0.0");
    let new = project(&t.path().join("new"), "1.1.0");
    let (b1, b2, foreign) = (t.path().join("old.airlock"), t.path().join("new.airlock"), t.path().join("f.airlock"));
    build(&old, &keys, &b1).ok();
    build(&new, &keys, &b2).ok();
    build(&new, &other, &foreign).ok();

    let claims = airlock_run(&["diff", s(&b1), s(&b2), "--json"]).ok();
    assert!(claims.stderr.contains("unverified") && claims.stderr.contains("--trust"), "{}", claims.stderr);
    assert_eq!(claims.json()["verified"], false);
    let verified = airlock_run(&["diff", s(&b1), s(&b2), "--trust", s(&keys.public), "--json"]).ok();
    assert!(!verified.stderr.contains("unverified"), "{}", verified.stderr);
    let doc = verified.json();
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["changed"][0]["name"], "notes.txt");
    // A bundle that does not verify under the policy is refused, named, exit 3.
    let r = airlock_run(&["diff", s(&b1), s(&foreign), "--trust", s(&keys.public)]).code(3);
    assert!(r.stderr.contains("f.airlock") && r.stderr.contains("does not verify"), "{}", r.stderr);
    // Locks are compared as they are, without the bundles' warning.
    let (l1, l2) = (old.dir.join("airlock.lock"), new.dir.join("airlock.lock"));
    let locks = airlock_run(&["diff", s(&l1), s(&l2)]).ok();
    assert!(!locks.stderr.contains("unverified"), "{}", locks.stderr);

    // A lock that does not parse is reported as such, with file, line and column.
    std::fs::write(&l2, "version = 1\nresolved_at = [\n").unwrap();
    let r = airlock_run(&["diff", s(&l1), s(&l2)]).code(2);
    assert!(r.stderr.contains(&format!("{}:2:", l2.display())), "{}", r.stderr);
    assert!(!r.stderr.contains("neither"), "{}", r.stderr);
}

#[test]
fn sbom_and_provenance_take_json() {
    let Built { t, keys, bundle, .. } = built_project();

    let out = t.path().join("sbom.cdx.json");
    let doc = airlock_run(&["sbom", s(&bundle), "--out", s(&out), "--json"]).ok().json();
    assert_eq!((doc["sbom"].as_str(), doc["sha256"].as_str()), (Some(s(&out)), Some(sha256_file(&out).as_str())));
    assert_eq!(doc["bytes"], std::fs::metadata(&out).unwrap().len());
    let said = airlock_run(&["sbom", s(&bundle), "--out", s(&out)]).ok().stdout;
    assert!(said.contains(&format!("wrote {}", out.display())), "{said}");

    let doc = airlock_run(&["provenance", s(&bundle), "--trust", s(&keys.public), "--json"]).ok().json();
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["signers"].as_array().map(Vec::len), Some(1));
    assert_eq!(doc["statement"]["_type"], "https://in-toto.io/Statement/v1");
    let doc = airlock_run(&["provenance", s(&bundle), "--json"]).ok().json();
    assert_eq!((doc["verified"].as_bool(), doc["signers"].as_array().map(Vec::len)), (Some(false), Some(0)));
}

#[test]
fn output_cut_short_by_a_closed_pipe_is_not_an_error() {
    use std::fmt::Write as _;
    // Output larger than a pipe's buffer (64 KiB), so that writing blocks until the reader
    // goes away: 700 files make inspect and report print far more than that.
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let dir = t.path().join("p");
    std::fs::create_dir_all(dir.join("f")).unwrap();
    let mut spec = String::from("[bundle]\nname = \"many\"\nversion = \"1.0.0\"\n");
    for i in 0..700 {
        std::fs::write(dir.join(format!("f/file-{i:04}.txt")), format!("{i}\n")).unwrap();
        let _ = write!(spec, "\n[[file]]\nname = \"file-{i:04}.txt\"\nsource = \"f/file-{i:04}.txt\"\n");
    }
    std::fs::write(dir.join("airlock.toml"), spec).unwrap();
    let bundle = t.path().join("many.airlock");
    build(&Project { dir: dir.clone(), spec: dir.join("airlock.toml") }, &keys, &bundle).ok();
    for args in
        [vec!["inspect", s(&bundle)], vec!["inspect", s(&bundle), "--json"], vec!["report", s(&bundle), "--json"]]
    {
        let mut child = airlock()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 1];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("Broken pipe"), "{args:?}");
    }
}

#[test]
fn version_completions_and_man_pages_describe_the_cli_itself() {
    let v = airlock_run(&["version", "--json"]).ok().json();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["target"].as_str().unwrap(), std::env::consts::ARCH.to_owned() + "-unknown-linux-gnu");
    let text = airlock_run(&["--version"]).ok().stdout;
    assert!(text.contains(v["target"].as_str().unwrap()), "--version names the target: {text}");

    let t = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let script = airlock_run(&["completions", shell]).ok().stdout;
        assert!(script.contains("apply") && script.contains("rollback"), "{shell}");
        let path = t.path().join(format!("airlock.{shell}"));
        std::fs::write(&path, &script).unwrap();
        if shell == "bash" {
            run(std::process::Command::new("bash").args(["-n", s(&path)])).ok();
        }
    }
    let listed = airlock_run(&["man", s(&t.path().join("man"))]).ok().stdout;
    let pages: Vec<&str> = listed.lines().collect();
    assert!(pages.len() > 20 && pages.iter().any(|p| p.ends_with("airlock-apply.1")), "{listed}");
    assert!(pages.iter().any(|p| p.ends_with("airlock-trust-rotate.1")), "a page per trust verb: {listed}");
    for page in pages {
        let r = run(std::process::Command::new("man").env("MANWIDTH", "80").args(["-l", page]));
        assert_eq!(r.code, 0, "{page}: {}", r.stderr);
        assert!(r.stdout.contains("SYNOPSIS"), "{page}");
        // Its NAME is the name `man` finds it by; its synopsis the command as typed.
        let name = std::path::Path::new(page).file_stem().unwrap().to_str().unwrap();
        let typed = name
            .replace('-', " ")
            .replace("self upgrade", "self-upgrade")
            .replace("sigstore root", "sigstore-root")
            .replace("verify blob", "verify-blob")
            .replace("verify approval", "verify-approval");
        let name_line = r.stdout.lines().skip_while(|l| l.trim() != "NAME").nth(1).unwrap_or("");
        assert!(name_line.trim_start().starts_with(&format!("{name} ")), "{page}: NAME {name_line}");
        let flat = r.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(name == "airlock" || flat.contains(&format!("SYNOPSIS {typed}")), "{page}: SYNOPSIS {typed}");
    }
    // Every rotate flag says what it does.
    let help = airlock_run(&["trust", "rotate", "--help"]).ok().stdout;
    for flag in ["--add-root-key", "--remove-root-key", "--root-threshold", "--add-targets-key", "--targets-threshold"]
    {
        let line = help.lines().skip_while(|l| !l.contains(flag)).nth(1).unwrap_or("");
        assert!(!line.trim().is_empty() && !line.trim().starts_with("--"), "{flag} has no help: {help}");
    }
}

/// A bundle carrying this airlock binary as a `[[file]]` of kind `airlock` for this target.
fn carrying_airlock(dir: &std::path::Path, keys: &Keys) -> std::path::PathBuf {
    carrying_airlock_with(dir, keys, "")
}

/// The same, with `bundle` lines added to its `[bundle]` table (`expires = …`).
fn carrying_airlock_with(dir: &std::path::Path, keys: &Keys, bundle: &str) -> std::path::PathBuf {
    let p = dir.join(format!("carrier{}", bundle.len()));
    std::fs::create_dir_all(&p).unwrap();
    let target = airlock_run(&["version", "--json"]).ok().json()["target"].as_str().unwrap().to_owned();
    std::fs::copy(env!("CARGO_BIN_EXE_airlock"), p.join("airlock-bin")).unwrap();
    std::fs::write(
        p.join("airlock.toml"),
        format!(
            "[bundle]\nname = \"site-tools\"\nversion = \"1.0.0\"\n{bundle}\n[[file]]\nname = \"airlock-{target}\"\nsource = \"airlock-bin\"\nkind = \"airlock\"\nnotes = {{ target = \"{target}\" }}\n"
        ),
    )
    .unwrap();
    let bundle = dir.join(if bundle.is_empty() {
        "rocm10-2026.11.1.airlock".to_owned()
    } else {
        format!("carrier-{}.airlock", bundle.len())
    });
    let spec = p.join("airlock.toml");
    airlock_in(&p, &["lock", s(&spec)]).ok();
    airlock_in(&p, &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    bundle
}

/// Two airlocks for one target: `self-upgrade` would install whichever the manifest lists
/// first, and a reviewer of the bundle could not tell which. The spec is refused, naming both.
#[test]
fn a_spec_with_two_airlocks_for_one_target_is_refused_naming_both() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("a"), "#!/bin/sh\necho airlock 1.0.0\n").unwrap();
    std::fs::write(t.path().join("b"), "#!/bin/sh\necho airlock 9.0.0\n").unwrap();
    let file = |name: &str, target: &str| {
        format!(
            "[[file]]\nname = \"{name}\"\nsource = \"{name}\"\nkind = \"airlock\"\nnotes = {{ target = \"{target}\" }}\n"
        )
    };
    let spec = t.path().join("airlock.toml");
    let head = "[bundle]\nname = \"tools\"\nversion = \"1.0.0\"\n";
    let text = [head, &file("a", "x86_64-unknown-linux-gnu"), &file("b", "x86_64-unknown-linux-gnu")].concat();
    std::fs::write(&spec, text).unwrap();
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(2);
    assert!(
        r.stderr.contains("airlock.toml:9:")
            && r.stderr.contains("`[[file]]` `b` is an airlock for x86_64-unknown-linux-gnu, as `[[file]]` `a` is"),
        "{}",
        r.stderr
    );
    // One for each target is a bundle for a mixed fleet.
    let text = [head, &file("a", "x86_64-unknown-linux-gnu"), &file("b", "aarch64-unknown-linux-gnu")].concat();
    std::fs::write(&spec, text).unwrap();
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs jq")]
fn the_first_airlock_is_checked_with_openssl_as_the_docs_say_and_self_upgrade_replaces_it() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = carrying_airlock(t.path(), &keys);

    // The bootstrap block of docs/site-operator.md, run as written, in a directory holding the
    // bundle and the key.
    let doc = std::fs::read_to_string(repo("docs/site-operator.md")).unwrap();
    let block = doc.split("<!-- bootstrap -->").nth(1).unwrap().split("<!-- /bootstrap -->").next().unwrap();
    let script = block.trim().trim_start_matches("```sh").trim_end_matches("```");
    let site = t.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::copy(&bundle, site.join("rocm10-2026.11.1.airlock")).unwrap();
    std::fs::copy(&keys.public, site.join("build.pub")).unwrap();
    let r = run(std::process::Command::new("bash").current_dir(&site).args(["-euo", "pipefail", "-c", script])).ok();
    assert!(
        r.stdout.contains("Verified OK") && r.stdout.contains(": OK") && r.stdout.contains("airlock "),
        "{}",
        r.stdout
    );

    // self-upgrade over a copy: the new binary runs, the old one is kept beside it.
    let installed = t.path().join("bin/airlock");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    std::fs::write(&installed, "#!/bin/sh\necho old airlock\n").unwrap();
    let r =
        airlock_run(&["self-upgrade", s(&bundle), "--trust", s(&keys.public), "--to", s(&installed), "--json"]).ok();
    assert!(r.json()["version"].as_str().unwrap().starts_with("airlock "), "{}", r.stdout);
    let out = run(std::process::Command::new(&installed).arg("--version")).ok();
    assert!(out.stdout.starts_with("airlock "), "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(installed.with_file_name("airlock.previous")).unwrap(),
        "#!/bin/sh\necho old airlock\n"
    );

    // A bundle whose carried binary is not the one its manifest lists: refused, nothing replaced.
    let tampered = t.path().join("tampered.airlock");
    let script = format!(
        r#"
import io, subprocess, tarfile
src, dst, member = {src:?}, {dst:?}, {member:?}
raw = subprocess.run(["zstd", "-dc", src], check=True, capture_output=True).stdout
out = io.BytesIO()
with tarfile.open(fileobj=io.BytesIO(raw)) as tin, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tout:
    for m in tin.getmembers():
        data = tin.extractfile(m).read() if m.isfile() else None
        if m.name == member:
            data = bytes([data[0] ^ 1]) + data[1:]
        tout.addfile(m, io.BytesIO(data) if data is not None else None)
open(dst, "wb").write(subprocess.run(["zstd", "-q", "-c"], input=out.getvalue(), check=True, capture_output=True).stdout)
"#,
        src = bundle.display().to_string(),
        dst = tampered.display().to_string(),
        member =
            format!("files/airlock-{}", airlock_run(&["version", "--json"]).ok().json()["target"].as_str().unwrap()),
    );
    run(std::process::Command::new("python3").args(["-c", &script])).ok();
    let before = std::fs::read(&installed).unwrap();
    let r = airlock_run(&["self-upgrade", s(&tampered), "--trust", s(&keys.public), "--to", s(&installed)]).code(3);
    assert!(r.stderr.contains("failed verification") && r.stderr.contains("nothing was replaced"), "{}", r.stderr);
    assert_eq!(std::fs::read(&installed).unwrap(), before);
}

#[test]
fn self_upgrade_refuses_an_expired_bundle_an_older_airlock_and_trust_keys_where_a_site_root_decides() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let installed = t.path().join("bin/airlock");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    let upgrade = |bundle: &std::path::Path, extra: &[&str]| {
        let args = [&["self-upgrade", s(bundle), "--trust", s(&keys.public), "--to", s(&installed)][..], extra];
        airlock_run(&args.concat())
    };
    // An expired bundle (one `verify` refuses) is refused here too, unless waived on purpose.
    std::fs::write(&installed, "#!/bin/sh\necho old airlock\n").unwrap();
    let expired = carrying_airlock_with(t.path(), &keys, "expires = \"2020-06-30\"\n");
    let r = upgrade(&expired, &[]).code(3);
    assert!(r.stderr.contains("expired"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), "#!/bin/sh\necho old airlock\n");
    upgrade(&expired, &["--allow-expired", "--reason", "CAB-7: no newer release yet"]).ok();

    // An older airlock over a newer one: refused unless --allow-downgrade --reason.
    std::fs::write(&installed, "#!/bin/sh\necho airlock 9.9.9\n").unwrap();
    std::fs::set_permissions(&installed, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bundle = carrying_airlock(t.path(), &keys);
    let r = upgrade(&bundle, &[]).code(3);
    assert!(r.stderr.contains("older") && r.stderr.contains("9.9.9"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&installed).unwrap(), "#!/bin/sh\necho airlock 9.9.9\n");
    upgrade(&bundle, &["--allow-downgrade", "--reason", "9.9.9 breaks the exporter"]).ok();

    // A site with a trust root decides with it: --trust is refused there.
    let site = t.path().join("site");
    std::fs::create_dir_all(site.join("trust")).unwrap();
    std::fs::write(site.join("trust/1.root.json"), "{}").unwrap();
    let r = upgrade(&bundle, &["--root", s(&site)]).code(2);
    assert!(r.stderr.contains("has a trust root"), "{}", r.stderr);
}

/// Issue 79: the documentation as HTML for the isolated side (`scripts/docs-html.py`, shipped by
/// `scripts/release.sh`): every page rendered, no link left to a `.md`, every relative link and
/// image found among the pages written.
#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python3-markdown")]
fn the_documentation_renders_to_html_pages_whose_links_all_resolve() {
    let out = tempfile::tempdir().unwrap();
    let html = out.path().join("html");
    run(std::process::Command::new("/usr/bin/python3").arg(repo("scripts/docs-html.py")).arg(&html)).ok();
    let pages: Vec<std::path::PathBuf> = walkdir::WalkDir::new(&html)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    for page in ["index.html", "site-operator.html", "site/mirror-and-nodes.html", "fleet.html"] {
        assert!(html.join(page).is_file(), "{page} is missing");
    }
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for attr in ["href=\"", "src=\""] {
            for link in text.split(attr).skip(1).filter_map(|t| t.split('"').next()) {
                if link.starts_with("http") || link.starts_with('#') || link.starts_with("mailto:") {
                    continue;
                }
                let file = link.split('#').next().unwrap();
                assert!(
                    std::path::Path::new(file).extension().is_none_or(|x| x != "md"),
                    "{}: a link to {link} was not made a page",
                    page.display()
                );
                let target = page.parent().unwrap().join(file);
                assert!(target.exists(), "{}: {link} leads nowhere", page.display());
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} links checked");
}
