//! Sigstore bundles verified offline (issue 65): the public sigstore-conformance suite's
//! bundle-verify vectors (vendored under `testdata/sigstore-conformance/`), each run through
//! `scripts/sigstore-conformance` — the suite's CLI protocol over `airlock verify-blob` —
//! in a network namespace with no network at all: every valid one verifies, every `_fail` one
//! is refused.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The suite's defaults for a case that names no identity or issuer.
const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";

fn vectors() -> PathBuf {
    repo("testdata/sigstore-conformance/bundle-verify")
}

/// The protocol's `verify-bundle` arguments for one case directory, as the suite builds them.
fn case_args(dir: &Path) -> Vec<String> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok().map(|s| s.trim().to_owned());
    let mut args = vec!["verify-bundle".to_owned(), "--bundle".to_owned(), s(&dir.join("bundle.sigstore.json")).into()];
    if dir.join("key.pub").is_file() {
        args.extend(["--key".to_owned(), s(&dir.join("key.pub")).into()]);
    } else {
        args.extend(["--certificate-identity".to_owned(), read("identity").unwrap_or_else(|| IDENTITY.to_owned())]);
        args.extend(["--certificate-oidc-issuer".to_owned(), read("issuer").unwrap_or_else(|| ISSUER.to_owned())]);
    }
    if dir.join("trusted_root.json").is_file() {
        args.extend(["--trusted-root".to_owned(), s(&dir.join("trusted_root.json")).into()]);
    }
    let artifact = if dir.join("artifact").is_file() { dir.join("artifact") } else { vectors().join("a.txt") };
    args.push(s(&artifact).into());
    args
}

/// The conformance script in a fresh network namespace: no interface but a loopback that is down.
fn offline_conformance(args: &[String]) -> Run {
    let mut c = Command::new("unshare");
    c.args(["-rn", s(&repo("scripts/sigstore-conformance"))]).args(args);
    c.env("AIRLOCK", env!("CARGO_BIN_EXE_airlock")).env("RUST_LOG", "warn");
    run(&mut c)
}

#[test]
fn every_conformance_vector_verifies_or_is_refused_as_the_suite_says_with_no_network() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(vectors())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("bundle.sigstore.json").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 60, "the vendored vectors: {}", cases.len());
    let mut wrong = Vec::new();
    let (mut verified, mut refused) = (0, 0);
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let r = offline_conformance(&case_args(dir));
        let should_fail = name.ends_with("_fail");
        match (should_fail, r.code) {
            (false, 0) => verified += 1,
            // Refused as a verification failure; a key file that is no key (`managed-key-wrong-key`)
            // as the usage error it is, naming the file.
            (true, 3) => refused += 1,
            (true, 2) if r.stderr.contains("not a PEM public key") => refused += 1,
            (_, code) => wrong.push(format!("{name}: exit {code}: {}{}", r.stdout, r.stderr.trim())),
        }
    }
    assert!(wrong.is_empty(), "{} of {} cases wrong:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
    assert!(verified >= 20 && refused >= 35, "{verified} verified, {refused} refused");
}

#[test]
fn a_verified_bundle_says_who_signed_and_when_it_was_logged_and_a_wrong_identity_is_refused() {
    let dir = vectors().join("happy-path-v0.3");
    let a = vectors().join("a.txt");
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify-blob", "--bundle"];
        let bundle = dir.join("bundle.sigstore.json");
        args.push(s(&bundle));
        args.extend_from_slice(extra);
        args.push(s(&a));
        run(airlock().args(&args))
    };
    let ok = verify(&["--identity", IDENTITY, "--issuer", ISSUER, "--json"]).ok().json();
    assert_eq!((ok["identity"].as_str(), ok["issuer"].as_str()), (Some(IDENTITY), Some(ISSUER)), "{ok}");
    assert!(ok["logged_at"].as_str().is_some_and(|t| t.starts_with("20")), "{ok}");
    // The same bundle by the file's digest, through the verb's first spelling and cosign's option names.
    let digest = format!("sha256:{}", sha256_file(&a));
    let mut args = vec!["sigstore", "verify", "--bundle"];
    let bundle = dir.join("bundle.sigstore.json");
    args.push(s(&bundle));
    args.extend(["--certificate-identity-regexp", "https://github.com/sigstore-conformance/.*"]);
    args.extend(["--certificate-oidc-issuer", ISSUER, "--digest", &digest]);
    let text = run(airlock().args(&args)).ok();
    assert!(text.stdout.contains("verified, signed by https://github.com/sigstore-conformance/"), "{}", text.stdout);
    // Issue 77, 6: the digest form is explicit. A bare `sha256:HEX` is a file name only (the old
    // code verified the digest when no such file existed, and the file when one did).
    let mut args = vec!["verify-blob", "--bundle", s(&bundle), "--identity", IDENTITY, "--issuer", ISSUER, &digest];
    let r = run(airlock().args(&args));
    assert!(r.code == 2 && r.stderr.contains("--digest"), "{}", r.stderr);
    let planted = tempfile::tempdir().unwrap();
    std::fs::write(planted.path().join(&digest), b"another file").unwrap();
    let r = run(airlock().current_dir(planted.path()).args(&args));
    assert_eq!(r.code, 3, "the file of that name is what is verified, and it is another: {}", r.stderr);
    args.pop();
    args.extend(["--digest", &digest]);
    run(airlock().current_dir(planted.path()).args(&args)).ok();
    // Another identity, a pattern that matches only part of it, another issuer: exit 3, naming what was asked.
    let r = verify(&["--identity", "https://github.com/someone/else", "--issuer", ISSUER]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("someone/else") && r.stderr.contains("does not verify"), "{}", r.stderr);
    let r = verify(&["--identity-regexp", "sigstore-conformance", "--issuer", ISSUER]);
    assert_eq!(r.code, 3, "a pattern matches the whole identity: {}", r.stderr);
    // Issue 77, attack 1: a pattern that is not whole on its own closed the anchoring group and
    // matched anyone (`other/x)|(.*` verified this bundle on the old code): a usage error.
    let r = verify(&["--identity-regexp", r"https://github\.com/other/x)|(.*", "--issuer", ISSUER]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not a whole pattern"), "{}", r.stderr);
    let r = verify(&["--identity", IDENTITY, "--issuer", "https://accounts.google.com"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    // No signer named: a usage error.
    let r = verify(&[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // A FIFO as the bundle or the signed file is refused, never read without end.
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("fifo");
    run(Command::new("mkfifo").arg(&fifo)).ok();
    let mut args = vec!["sigstore", "verify", "--bundle", s(&fifo)];
    args.extend(["--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, s(&a)]);
    let r = run(airlock().args(&args));
    assert!(r.code == 3 && r.stderr.contains("not a regular file"), "issue 77: exit 3, it was 1: {}", r.stderr);
    // A bundle larger than any Sigstore document is refused unread, a verification failure too.
    let huge = t.path().join("huge.sigstore.json");
    std::fs::write(&huge, vec![b' '; 5 << 20]).unwrap();
    let mut args = vec!["verify-blob", "--bundle", s(&huge)];
    args.extend(["--identity", IDENTITY, "--issuer", ISSUER, s(&a)]);
    let r = run(airlock().args(&args));
    assert!(r.code == 3 && r.stderr.contains("refused"), "{}", r.stderr);
    let bundle = dir.join("bundle.sigstore.json");
    let mut args = vec!["sigstore", "verify", "--bundle", s(&bundle)];
    args.extend(["--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, s(&fifo)]);
    let r = run(airlock().args(&args));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
}

#[test]
fn a_private_instances_keyless_signature_verifies_under_its_root_only_and_a_tampered_entry_is_refused() {
    // A private Sigstore instance the test makes (tests/sigstore_instance.py): CA and
    // intermediate for Fulcio, a CT log key and its SCT, a Rekor key with a real Merkle tree,
    // its inclusion proof and signed checkpoint, and the SET.
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("release.tar.gz");
    std::fs::write(&file, b"the release").unwrap();
    let out = t.path().join("instance");
    let identity = "https://git.example.org/platform/stack/.ci/release.yml@refs/tags/v2026.11.1";
    let issuer = "https://ci.example.org/oidc";
    run(Command::new("python3").args([
        s(&repo("tests/sigstore_instance.py")),
        s(&out),
        "--identity",
        identity,
        "--issuer",
        issuer,
        "--file",
        s(&file),
    ]))
    .ok();
    let verify = |bundle: &str, who: &str, from: &str, root: Option<&Path>| {
        let b = out.join(bundle);
        let mut args = vec!["verify-blob", "--bundle", s(&b), "--identity", who];
        args.extend(["--issuer", from]);
        let r = root.map(|r| s(r).to_owned());
        if let Some(r) = &r {
            args.extend(["--trusted-root", r.as_str()]);
        }
        args.push(s(&file));
        run(airlock().args(&args))
    };
    let root = out.join("trusted_root.json");
    // The instance is a real one as far as an independent verifier can tell: sigstore-python
    // accepts its signature and refuses the tampered entry, offline.
    let python = |bundle: &str| {
        run(Command::new("sigstore").args([
            "--trust-config",
            s(&out.join("trust_config.json")),
            "verify",
            "identity",
            "--offline",
            "--bundle",
            s(&out.join(bundle)),
            "--cert-identity",
            identity,
            "--cert-oidc-issuer",
            issuer,
            s(&file),
        ]))
    };
    assert_eq!(python("bundle.sigstore.json").code, 0, "sigstore-python: {}", python("bundle.sigstore.json").stderr);
    assert_ne!(python("tampered-entry.sigstore.json").code, 0, "sigstore-python refuses the tampered entry");
    let ok = verify("bundle.sigstore.json", identity, issuer, Some(&root));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(ok.stdout.contains(identity) && ok.stdout.contains(issuer), "{}", ok.stdout);
    let refused = |r: Run, why: &str| {
        assert_eq!(r.code, 3, "{why}: {}", r.stderr);
        r.stderr
    };
    refused(
        verify("bundle.sigstore.json", "https://git.example.org/platform/other.yml", issuer, Some(&root)),
        "identity",
    );
    refused(verify("bundle.sigstore.json", identity, "https://accounts.google.com", Some(&root)), "issuer");
    let e = refused(verify("tampered-entry.sigstore.json", identity, issuer, Some(&root)), "tampered entry");
    assert!(e.contains("inclusion promise") || e.contains("SET"), "{e}");
    let e = refused(verify("other-log.sigstore.json", identity, issuer, Some(&root)), "another leaf's proof");
    assert!(e.contains("inclusion proof"), "{e}");
    // Sigstore's public-good root does not know this instance.
    refused(verify("bundle.sigstore.json", identity, issuer, None), "public-good root");
    // Another file than the one signed.
    std::fs::write(&file, b"the release, altered").unwrap();
    refused(verify("bundle.sigstore.json", identity, issuer, Some(&root)), "altered file");
}

/// The private instance's `sigstore_instance.py` run once more, signing `what` (`--digest HEX`
/// or `--file PATH`) into `OUT/PREFIXbundle.sigstore.json`, …
fn instance_sign(out: &Path, prefix: &str, identity: &str, issuer: &str, what: [&str; 2]) {
    run(Command::new("python3").args([
        s(&repo("tests/sigstore_instance.py")),
        s(out),
        "--identity",
        identity,
        "--issuer",
        issuer,
        "--prefix",
        prefix,
        what[0],
        what[1],
    ]))
    .ok();
}

fn attach(reg: &registry::Registry, repo_name: &str, digest: &str, args: &[&str]) {
    let mut c = Command::new("python3");
    c.arg(helper("attach_sigstore.py")).args([reg.url().as_str(), repo_name, digest]).args(args);
    run(&mut c).ok();
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario: lock, refusals, build, the site's check, a poisoned lock")]
fn upstream_keyless_signatures_are_verified_at_lock_carried_and_verified_again_offline() {
    let t = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start(registry::Mode::Plain);
    let host = reg.url().trim_start_matches("http://").to_owned();
    let inst = t.path().join("instance");
    let identity = "https://git.example.org/platform/stack/.ci/release.yml@refs/tags/v2026.11.1";
    let issuer = "https://ci.example.org/oidc";
    // Image `app`: cosign's bundle format, a referrer whose layer is the bundle over its digest.
    let app = reg.push("stack/app", "v1", &[]);
    instance_sign(&inst, "app-", identity, issuer, ["--digest", app.trim_start_matches("sha256:")]);
    attach(&reg, "stack/app", &app, &["--referrer", s(&inst.join("app-bundle.sigstore.json"))]);
    // Image `base`: cosign's legacy `.sig` tag, the simple-signing payload naming its digest.
    let base = reg.push("stack/base", "v1", &["--seed", "2", "--platforms", "linux/amd64,linux/arm64"]);
    let payload = t.path().join("payload.json");
    let simple = serde_json::json!({"critical": {"identity": {"docker-reference": format!("{host}/stack/base")},
        "image": {"docker-manifest-digest": base}, "type": "cosign container image signature"}, "optional": null});
    std::fs::write(&payload, simple.to_string()).unwrap();
    instance_sign(&inst, "base-", identity, issuer, ["--file", s(&payload)]);
    attach(
        &reg,
        "stack/base",
        &base,
        &["--legacy", s(&inst.join("base-bundle.sigstore.json")), "--payload", s(&payload)],
    );
    // Image `tampered`: a referrer whose log entry's time was moved (its SET no longer holds).
    let tampered = reg.push("stack/tampered", "v1", &["--seed", "3"]);
    instance_sign(&inst, "tampered-", identity, issuer, ["--digest", tampered.trim_start_matches("sha256:")]);
    attach(&reg, "stack/tampered", &tampered, &["--referrer", s(&inst.join("tampered-tampered-entry.sigstore.json"))]);
    // A file from a web server, its bundle beside it.
    let www = t.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("release.tar.gz"), pattern(50_000, 7)).unwrap();
    instance_sign(&inst, "file-", identity, issuer, ["--file", s(&www.join("release.tar.gz"))]);
    std::fs::copy(inst.join("file-bundle.sigstore.json"), www.join("release.tar.gz.sigstore.json")).unwrap();
    let web = http::HttpServer::start(&www);
    let root = inst.join("trusted_root.json");

    let proj = t.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let spec = proj.join("airlock.toml");
    let write_spec = |app_identity: &str, base_issuer: &str, extra: &str| {
        let text = format!(
            r#"[bundle]
name = "signed"
version = "1.0.0"

[registries."{host}"]
insecure = true

[[image]]
ref = "{host}/stack/app:v1"
verify = {{ identity = "{app_identity}", issuer = "{issuer}" }}

[[image]]
ref = "{host}/stack/base:v1"
platforms = ["linux/amd64"]
verify = {{ identity_regex = "https://git\\.example\\.org/platform/.*", issuer = "{base_issuer}" }}

[[file]]
name = "release.tar.gz"
source = "{url}/release.tar.gz"
sha256 = "{sha}"
sigstore_bundle = "{url}/release.tar.gz.sigstore.json"
verify = {{ identity = "{identity}", issuer = "{issuer}" }}
{extra}"#,
            url = web.url,
            sha = sha256_file(&www.join("release.tar.gz")),
        );
        std::fs::write(&spec, text).unwrap();
    };
    let cache = t.path().join("cache");
    let lock = |extra: &[&str]| {
        let mut args = vec!["lock", s(&spec), "--cache", s(&cache)];
        args.extend_from_slice(extra);
        airlock_run(&args)
    };
    let refused = |r: Run, why: &str| {
        assert_eq!(r.code, 3, "{why}: {}", r.stderr);
        r.stderr
    };

    // The public-good root does not know the private instance: refused, naming what was found.
    write_spec(identity, issuer, "");
    let e = refused(lock(&[]), "public-good root");
    assert!(e.contains("stack/app") && e.contains("public-good") && e.contains("referrer sha256:"), "{e}");
    // Another identity, another issuer: refused, naming the policy asked for.
    write_spec("https://git.example.org/platform/other.yml@refs/heads/main", issuer, "");
    let e = refused(lock(&["--trusted-root", s(&root)]), "another identity");
    assert!(e.contains("platform/other.yml") && e.contains("no upstream Sigstore signature verifies"), "{e}");
    // The head names the policy and the root; each signature found says only why it failed.
    assert_eq!(e.matches("trusted_root.json").count(), 1, "the root named once: {e}");
    write_spec(identity, "https://accounts.google.com", "");
    let e = refused(lock(&["--trusted-root", s(&root)]), "another issuer");
    assert!(e.contains("stack/base") && e.contains("accounts.google.com") && e.contains("`.sig` layer"), "{e}");
    // A tampered log entry: refused.
    let extra = format!(
        "\n[[image]]\nref = \"{host}/stack/tampered:v1\"\nverify = {{ identity = \"{identity}\", issuer = \"{issuer}\" }}\n"
    );
    write_spec(identity, issuer, &extra);
    let e = refused(lock(&["--trusted-root", s(&root)]), "tampered entry");
    assert!(e.contains("stack/tampered") && (e.contains("SET") || e.contains("inclusion promise")), "{e}");

    // The right policy under the instance's root: locked, each with what it proves.
    write_spec(identity, issuer, "");
    lock(&["--trusted-root", s(&root)]).ok();
    let locked = toml_as_json(&std::fs::read_to_string(proj.join("airlock.lock")).unwrap());
    let forms: Vec<(&str, &str)> = locked["image"]
        .as_array()
        .unwrap()
        .iter()
        .chain(locked["file"].as_array().unwrap())
        .map(|e| (e["signature"]["form"].as_str().unwrap(), e["signature"]["identity"].as_str().unwrap()))
        .collect();
    assert_eq!(forms, [("referrer", identity), ("cosign-sig", identity), ("file", identity)], "{locked}");
    // The spec, the lock and (below) the manifest are what their published schemas say.
    let spec_json = toml_as_json(&std::fs::read_to_string(&spec).unwrap());
    assert_eq!(schema_errors(&validator("airlock.spec.schema.json"), &spec_json), Vec::<String>::new());
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &locked), Vec::<String>::new());

    // Built: the bundles travel as members, the manifest and the SBOM name them.
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("signed.airlock");
    let build = |out: &Path, extra: &[&str]| {
        let mut args = vec!["build", s(&spec), "--key", s(&keys.private), "--out", s(out)];
        args.extend(["--cache", s(&cache)]);
        args.extend_from_slice(extra);
        run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).args(&args))
    };
    build(&bundle, &["--trusted-root", s(&root)]).ok();
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let file_sig =
        &manifest["artifacts"].as_array().unwrap().iter().find(|a| a["kind"] == "file").unwrap()["signature"];
    let member =
        format!("sigstore/{}.sigstore.json", file_sig["bundle"].as_str().unwrap().trim_start_matches("sha256:"));
    assert!(manifest["entries"].as_array().unwrap().iter().any(|e| e["path"] == member.as_str()), "{manifest}");
    // Issue 77, 6: `base` is carried filtered to linux/amd64; the upstream index its signature
    // is over travels beside it, so the site can check the carried platform against it.
    let base_art = manifest["artifacts"].as_array().unwrap().iter().find(|a| a["upstream_digest"].is_string()).unwrap();
    let upstream_path =
        format!("images/blobs/sha256/{}", base_art["upstream_digest"].as_str().unwrap().trim_start_matches("sha256:"));
    assert!(manifest["entries"].as_array().unwrap().iter().any(|e| e["path"] == upstream_path.as_str()), "{manifest}");
    let (sbom, _) = checked_sbom(&bundle, &t.path().join("sbom"));
    assert!(sbom.to_string().contains(&member) && sbom.to_string().contains("upstream signature"), "SBOM refs");

    // The site checks them again, offline, under the instance's root.
    let offline_verify = |b: &Path, extra: &[&str]| {
        let mut c = Command::new("unshare");
        c.args(["-rn", env!("CARGO_BIN_EXE_airlock"), "verify", s(b), "--trust", s(&keys.public)]).args(extra);
        run(&mut c)
    };
    let ok = offline_verify(&bundle, &["--trusted-root", s(&root)]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(
        ok.stdout.matches(&format!("signed by {identity} ({issuer}), logged at 20")).count(),
        3,
        "{}",
        ok.stdout
    );
    let json = offline_verify(&bundle, &["--trusted-root", s(&root), "--json"]).ok().json();
    assert_eq!(json["upstream_signatures"].as_array().unwrap().len(), 3, "{json}");
    // Under the public-good root the same bundle is refused: the check is made here, not trusted.
    let r = offline_verify(&bundle, &[]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert!(r.stdout.contains("upstream signature of") || r.stderr.contains("upstream signature of"), "{}", r.stdout);

    // The approval pack says, per artifact, who signed it upstream, checked again here.
    let report = |extra: &[&str]| {
        let mut args = vec!["report", s(&bundle), "--trust", s(&keys.public), "--json"];
        args.extend_from_slice(extra);
        airlock_run(&args)
    };
    let pack = report(&["--trusted-root", s(&root)]).ok().json();
    let upstream: Vec<&str> =
        pack["artifacts"].as_array().unwrap().iter().filter_map(|a| a["upstream"].as_str()).collect();
    assert_eq!(upstream.len(), 3, "{pack}");
    assert!(
        upstream.iter().all(|u| u.starts_with(&format!("signed by {identity} ({issuer}), logged at 20"))),
        "{pack}"
    );
    assert!(upstream.iter().all(|u| u.contains("verified here")), "{pack}");
    let refused = report(&[]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    let pack = refused.json();
    assert_eq!(pack["bundle"]["verified"], false, "{pack}");
    assert!(pack["artifacts"][0]["upstream"].as_str().unwrap().contains("does NOT verify here"), "{pack}");

    // A poisoned lock on the build host (the bundle swapped for one whose entry was altered,
    // its digest written into the lock): the build carries it, the site refuses it.
    let bad = std::fs::read(inst.join("file-tampered-entry.sigstore.json")).unwrap();
    std::fs::write(www.join("release.tar.gz.sigstore.json"), &bad).unwrap();
    let lock_path = proj.join("airlock.lock");
    let text = std::fs::read_to_string(&lock_path).unwrap();
    let good = file_sig["bundle"].as_str().unwrap();
    std::fs::write(
        &lock_path,
        text.replace(good, &format!("sha256:{}", hex(&<sha2::Sha256 as sha2::Digest>::digest(&bad)))),
    )
    .unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    let poisoned = t.path().join("poisoned.airlock");
    build(&poisoned, &["--locked"]).ok();
    let r = offline_verify(&poisoned, &["--trusted-root", s(&root)]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert!(r.stdout.contains("release.tar.gz") && r.stdout.contains("does not verify"), "{}", r.stdout);

    // The source now serves another bundle than the lock pins, and the cache lost the pinned
    // one: the build refuses, naming what, where, expected and actual, and keeps nothing of it.
    std::fs::write(
        www.join("release.tar.gz.sigstore.json"),
        std::fs::read(inst.join("file-bundle.sigstore.json")).unwrap(),
    )
    .unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    let r = build(&t.path().join("moved.airlock"), &["--locked"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let served = good.trim_start_matches("sha256:");
    assert!(
        r.stderr.contains("release.tar.gz sigstore_bundle")
            && r.stderr.contains("release.tar.gz.sigstore.json")
            && r.stderr.contains(served)
            && r.stderr.contains("run `airlock lock`"),
        "{}",
        r.stderr
    );
    let kept = walkdir::WalkDir::new(&cache).into_iter().filter_map(Result::ok);
    assert!(!kept.into_iter().any(|e| e.path().to_string_lossy().contains(served)), "the served bundle was kept");

    // Issue 77, 6: a poisoned lock pins, as `base`'s linux/amd64, a manifest the signed index
    // never listed (pushed beside it in the same repository). The old code carried it under
    // the index's signature, and the site accepted it; the build refuses it now, naming it.
    lock(&["--trusted-root", s(&root)]).ok();
    let evil = reg.push("stack/base", "evil", &["--seed", "9"]);
    let text = std::fs::read_to_string(&lock_path).unwrap();
    let locked = toml_as_json(&text);
    let base_lock = locked["image"].as_array().unwrap().iter().find(|i| i["platforms"].is_array()).unwrap();
    let amd64 = base_lock["platforms"][0]["digest"].as_str().unwrap();
    std::fs::write(&lock_path, text.replace(amd64, &evil)).unwrap();
    let r = build(&t.path().join("evil.airlock"), &["--locked", "--trusted-root", s(&root)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let evil_hex = evil.trim_start_matches("sha256:");
    assert!(r.stderr.contains(evil_hex) && r.stderr.contains("not listed in the upstream index"), "{}", r.stderr);
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario: the fixture's independent check, refusals, lock, build, the site's check"
)]
fn pep740_attestations_from_a_json_index_are_verified_at_lock_carried_and_verified_again() {
    let t = tempfile::tempdir().unwrap();
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    let signed = make_wheel(&pkgs, "signed_pkg", "1.0", "py3-none-any");
    let plain = make_wheel(&pkgs, "plain_pkg", "1.0", "py3-none-any");
    let name = signed.file_name().unwrap().to_str().unwrap().to_owned();
    let inst = t.path().join("instance");
    let identity = "https://github.com/platform/stack/.github/workflows/release.yml@refs/tags/v1.0";
    let issuer = "https://token.actions.githubusercontent.com";
    let subject = format!("{name}:{}", sha256_file(&signed));
    instance_sign(&inst, "", identity, issuer, ["--dsse-subject", &subject]);
    // PyPI's own library reads the provenance object and sigstore-python verifies what it makes
    // of it: the fixture is what PyPI serves, as far as its reference implementation can tell.
    let check = format!(
        "from pypi_attestations import Provenance\n\
         p = Provenance.model_validate_json(open('{}').read())\n\
         open('{}', 'w').write(p.attestation_bundles[0].attestations[0].to_bundle().to_json())",
        s(&inst.join("provenance.json")),
        s(&inst.join("converted.sigstore.json"))
    );
    run(Command::new("python3").args(["-c", &check])).ok();
    let python = run(Command::new("sigstore").args([
        "--trust-config",
        s(&inst.join("trust_config.json")),
        "verify",
        "identity",
        "--offline",
        "--bundle",
        s(&inst.join("converted.sigstore.json")),
        "--cert-identity",
        identity,
        "--cert-oidc-issuer",
        issuer,
        &format!("sha256:{}", sha256_file(&signed)),
    ]));
    assert_eq!(python.code, 0, "sigstore-python: {}", python.stderr);
    std::fs::copy(inst.join("provenance.json"), pkgs.join(format!("{name}.provenance"))).unwrap();
    let index = http::HttpServer::spawn(&pkgs, |port| vec![helper("json_index.py"), port.to_string(), ".".into()]);
    let root = inst.join("trusted_root.json");

    let proj = t.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let spec = proj.join("airlock.toml");
    let write_spec = |requirement: &str, who: &str| {
        let text = format!(
            "[bundle]\nname = \"wheels\"\nversion = \"1.0.0\"\n\n[[wheel]]\nindex = \"{}/simple/\"\nrequirements = \
             [\"{requirement}\"]\nverify = {{ identity = \"{who}\", issuer = \"{issuer}\" }}\n",
            index.url
        );
        std::fs::write(&spec, text).unwrap();
    };
    let cache = t.path().join("cache");
    let lock = || airlock_run(&["lock", s(&spec), "--cache", s(&cache), "--trusted-root", s(&root)]);
    // A wheel the index offers no provenance for: refused, saying so.
    write_spec("plain-pkg==1.0", identity);
    let r = lock();
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains(plain.file_name().unwrap().to_str().unwrap()) && r.stderr.contains("no PEP 740"),
        "{}",
        r.stderr
    );
    // Another identity: refused.
    write_spec("signed-pkg==1.0", "https://github.com/someone/else/.github/workflows/x.yml@refs/heads/main");
    let r = lock();
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("someone/else") && r.stderr.contains("identity"), "{}", r.stderr);
    // Issue 77, 6: an attestation of another predicate, by the same identity, over the same
    // wheel: not PyPI's publish attestation, refused (the old code accepted any predicateType).
    run(Command::new("python3").args([
        s(&repo("tests/sigstore_instance.py")),
        s(&inst),
        "--identity",
        identity,
        "--issuer",
        issuer,
        "--prefix",
        "slsa-",
        "--dsse-subject",
        &subject,
        "--predicate-type",
        "https://slsa.dev/provenance/v1",
    ]))
    .ok();
    std::fs::copy(inst.join("slsa-provenance.json"), pkgs.join(format!("{name}.provenance"))).unwrap();
    write_spec("signed-pkg==1.0", identity);
    let r = lock();
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("not PyPI's publish attestation"), "{}", r.stderr);
    // A tampered log entry: refused.
    std::fs::copy(inst.join("tampered-provenance.json"), pkgs.join(format!("{name}.provenance"))).unwrap();
    write_spec("signed-pkg==1.0", identity);
    let r = lock();
    assert_eq!(r.code, 3, "{}", r.stderr);
    std::fs::copy(inst.join("provenance.json"), pkgs.join(format!("{name}.provenance"))).unwrap();
    // The publisher's identity: locked, carried, checked again offline.
    lock().ok();
    let locked = toml_as_json(&std::fs::read_to_string(proj.join("airlock.lock")).unwrap());
    assert_eq!(locked["wheel"][0]["signature"]["form"], "pep740", "{locked}");
    let spec_json = toml_as_json(&std::fs::read_to_string(&spec).unwrap());
    assert_eq!(schema_errors(&validator("airlock.spec.schema.json"), &spec_json), Vec::<String>::new());
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &locked), Vec::<String>::new());
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("wheels.airlock");
    run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).args([
        "build",
        s(&spec),
        "--key",
        s(&keys.private),
        "--out",
        s(&bundle),
        "--cache",
        s(&cache),
    ]))
    .ok();
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let member = format!(
        "sigstore/{}.provenance.json",
        manifest["artifacts"][0]["signature"]["bundle"].as_str().unwrap().trim_start_matches("sha256:")
    );
    assert!(manifest["entries"].as_array().unwrap().iter().any(|e| e["path"] == member.as_str()), "{manifest}");
    let mut c = Command::new("unshare");
    c.args(["-rn", env!("CARGO_BIN_EXE_airlock"), "verify", s(&bundle), "--trust", s(&keys.public)]);
    let ok = run(c.args(["--trusted-root", s(&root)]));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(
        ok.stdout.contains(&format!("upstream signature of {name}: signed by {identity} ({issuer})")),
        "{}",
        ok.stdout
    );
}

#[test]
fn a_registry_listing_endless_sigstore_referrers_cannot_make_the_lock_fetch_without_end() {
    // The attack: an image with 40 Sigstore-typed referrers, none valid. Each is a small
    // document, but before the bound the lock fetched and tried every one of them.
    let t = tempfile::tempdir().unwrap();
    let reg = registry::Registry::start(registry::Mode::Plain);
    let host = reg.url().trim_start_matches("http://").to_owned();
    let inst = t.path().join("instance");
    let (identity, issuer) = ("https://git.example.org/a/b/.ci/x.yml@refs/tags/v1", "https://ci.example.org/oidc");
    let image = reg.push("stack/many", "v1", &["--seed", "9"]);
    instance_sign(&inst, "", identity, issuer, ["--digest", image.trim_start_matches("sha256:")]);
    let bad = inst.join("tampered-entry.sigstore.json");
    attach(&reg, "stack/many", &image, &["--referrer", s(&bad), "--copies", "40"]);
    let spec = t.path().join("airlock.toml");
    let text = format!(
        "[bundle]\nname = \"many\"\nversion = \"1.0.0\"\n\n[registries.\"{host}\"]\ninsecure = true\n\n[[image]]\nref = \
         \"{host}/stack/many:v1\"\nverify = {{ identity = \"{identity}\", issuer = \"{issuer}\" }}\n"
    );
    std::fs::write(&spec, text).unwrap();
    let root = inst.join("trusted_root.json");
    let cache = t.path().join("cache");
    let r = airlock_run(&["lock", s(&spec), "--cache", s(&cache), "--trusted-root", s(&root)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let tried = r.stderr.matches("'s bundle sha256:").count();
    assert_eq!(tried, 16, "at most 16 tried: {}", r.stderr);
    assert!(r.stderr.contains("24 more not fetched or tried"), "{}", r.stderr);
}

/// Issue 77, attack 1: `[[wheel]] verify` was never checked as `[[image]]` and `[[file]]`
/// `verify` are: a pattern that is not whole (`…x)|(.*`, which matched an attacker's identity
/// once anchored) and both `identity` and `identity_regex` were accepted. Both are usage
/// errors naming the field now, before anything is fetched.
#[test]
fn a_wheels_signer_pattern_must_be_whole_and_alone() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{ identity_regex = "https://github\\.com/org/repo/x)|(.*", issuer = "https://token.actions.githubusercontent.com" }"#,
            "not a whole pattern",
        ),
        (r#"{ identity = "https://a", identity_regex = "https://a", issuer = "https://i" }"#, "not both"),
    ];
    for (n, (verify, says)) in cases.iter().enumerate() {
        let spec = t.path().join(format!("{n}.toml"));
        let text = format!(
            "[bundle]\nname = \"wheels\"\nversion = \"1.0.0\"\n\n[[wheel]]\nindex = \"http://127.0.0.1:9/simple/\"\n\
             requirements = [\"demo==1.0\"]\nverify = {verify}\n"
        );
        std::fs::write(&spec, text).unwrap();
        let r = run(airlock().current_dir(t.path()).args(["lock", s(&spec)]));
        assert_eq!(r.code, 2, "{n}: {}", r.stderr);
        // Refused as the spec is read: the line of `verify` (8), the field, what is wrong.
        assert!(r.stderr.contains(".toml:8:") && r.stderr.contains(says), "{n}: {}", r.stderr);
    }
}

/// Issue 77, 6: what parsers disagree on is refused, named, before anything is verified: a key
/// twice, no `mediaType`, two log entries, a DSSE payload that is not an in-toto Statement, and
/// two issuer extensions that disagree (the old code took the first key, guessed the version,
/// took an entry, took any payload, and took the current extension). Each mutation of the good
/// bundle below verified on the old code where the library accepts it.
#[test]
fn a_bundle_whose_reading_is_ambiguous_is_refused_naming_the_ambiguity() {
    let dir = vectors().join("happy-path-v0.3");
    let a = vectors().join("a.txt");
    let good = std::fs::read_to_string(dir.join("bundle.sigstore.json")).unwrap();
    let t = tempfile::tempdir().unwrap();
    let verify = |bundle: &str, extra: &[&str], subject: &[&str]| {
        let path = t.path().join("b.sigstore.json");
        std::fs::write(&path, bundle).unwrap();
        let mut c = airlock();
        c.args(["verify-blob", "--bundle", s(&path)]).args(extra).args(subject);
        run(&mut c)
    };
    let who = ["--identity", IDENTITY, "--issuer", ISSUER];
    verify(&good, &who, &[s(&a)]).ok();
    let doc: serde_json::Value = serde_json::from_str(&good).unwrap();
    // A key twice: the first and the last differ; a reader picks one.
    let media = doc["mediaType"].as_str().unwrap();
    let twice = good.replacen('{', &format!("{{\"mediaType\":\"{media}\",\n"), 1);
    let r = verify(&twice, &who, &[s(&a)]).code(3);
    assert!(r.stderr.contains("`mediaType` twice") || r.stderr.contains("duplicate field"), "{}", r.stderr);
    // No mediaType.
    let mut none = doc.clone();
    none.as_object_mut().unwrap().remove("mediaType");
    let r = verify(&none.to_string(), &who, &[s(&a)]).code(3);
    assert!(r.stderr.contains("no `mediaType`"), "{}", r.stderr);
    // Two log entries.
    let mut two = doc.clone();
    let entries = two["verificationMaterial"]["tlogEntries"].as_array_mut().unwrap();
    entries.push(entries[0].clone());
    let r = verify(&two.to_string(), &who, &[s(&a)]).code(3);
    assert!(r.stderr.contains("2 transparency log entries"), "{}", r.stderr);

    // Signed by a private instance: a payload whose `_type` is not a Statement, and a
    // certificate whose legacy issuer extension names another issuer than the current one.
    let inst = t.path().join("instance");
    let subject = format!("thing:{}", sha256_file(&a));
    let sign = |prefix: &str, extra: &[&str]| {
        let mut c = Command::new("python3");
        c.args([s(&repo("tests/sigstore_instance.py")), s(&inst), "--identity", IDENTITY, "--issuer", ISSUER]);
        c.args(["--prefix", prefix, "--dsse-subject", &subject]).args(extra);
        run(&mut c).ok();
        std::fs::read_to_string(inst.join(format!("{prefix}bundle.sigstore.json"))).unwrap()
    };
    let root = inst.join("trusted_root.json");
    let signed = sign("plain-", &[]);
    let mut with_root = who.to_vec();
    with_root.extend(["--trusted-root", s(&root)]);
    let digest = format!("sha256:{}", sha256_file(&a));
    verify(&signed, &with_root, &["--digest", &digest]).ok();
    let odd = sign("odd-", &["--statement-type", "https://example.org/NotAStatement/v1"]);
    let r = verify(&odd, &with_root, &["--digest", &digest]).code(3);
    assert!(r.stderr.contains("not an in-toto Statement"), "{}", r.stderr);
    let split = sign("split-", &["--issuer-v1", "https://accounts.google.com"]);
    let r = verify(&split, &with_root, &["--digest", &digest]).code(3);
    assert!(r.stderr.contains("two OIDC issuers") && r.stderr.contains("accounts.google.com"), "{}", r.stderr);

    // A log entry with the promise (SET) and no inclusion proof: the library took it, and
    // sigstore-python refuses it ("Field required"). Refused, named; the suite's v0.1 bundle,
    // which has its proof, verifies.
    let v01 = std::fs::read_to_string(vectors().join("happy-path-v0.1/bundle.sigstore.json")).unwrap();
    verify(&v01, &who, &[s(&a)]).ok();
    let mut set_only: serde_json::Value = serde_json::from_str(&v01).unwrap();
    set_only["verificationMaterial"]["tlogEntries"][0].as_object_mut().unwrap().remove("inclusionProof");
    let r = verify(&set_only.to_string(), &who, &[s(&a)]).code(3);
    assert!(r.stderr.contains("no inclusion proof"), "{}", r.stderr);
}
