//! Sigstore bundles verified offline (issue 65): the public sigstore-conformance suite's
//! bundle-verify vectors (vendored under `testdata/sigstore-conformance/`), each run through
//! `scripts/sigstore-conformance` — the suite's CLI protocol over `airlock sigstore verify` —
//! in a network namespace with no network at all: every valid one verifies, every `_fail` one
//! is refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

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
        let mut args = vec!["sigstore", "verify", "--bundle"];
        let bundle = dir.join("bundle.sigstore.json");
        args.push(s(&bundle));
        args.extend_from_slice(extra);
        args.push(s(&a));
        run(airlock().args(&args))
    };
    let ok = verify(&["--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, "--json"]).ok().json();
    assert_eq!((ok["identity"].as_str(), ok["issuer"].as_str()), (Some(IDENTITY), Some(ISSUER)), "{ok}");
    assert!(ok["logged_at"].as_str().is_some_and(|t| t.starts_with("20")), "{ok}");
    // The same bundle by the file's digest.
    let digest = format!("sha256:{}", sha256_file(&a));
    let mut args = vec!["sigstore", "verify", "--bundle"];
    let bundle = dir.join("bundle.sigstore.json");
    args.push(s(&bundle));
    args.extend(["--certificate-identity-regexp", "https://github.com/sigstore-conformance/.*"]);
    args.extend(["--certificate-oidc-issuer", ISSUER, &digest]);
    let text = run(airlock().args(&args)).ok();
    assert!(text.stdout.contains("verified, signed by https://github.com/sigstore-conformance/"), "{}", text.stdout);
    // Another identity, a pattern that matches only part of it, another issuer: exit 3, naming what was asked.
    let r = verify(&["--certificate-identity", "https://github.com/someone/else", "--certificate-oidc-issuer", ISSUER]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("someone/else") && r.stderr.contains("does not verify"), "{}", r.stderr);
    let r = verify(&["--certificate-identity-regexp", "sigstore-conformance", "--certificate-oidc-issuer", ISSUER]);
    assert_eq!(r.code, 3, "a pattern matches the whole identity: {}", r.stderr);
    let r = verify(&["--certificate-identity", IDENTITY, "--certificate-oidc-issuer", "https://accounts.google.com"]);
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
    assert!(r.code != 0 && r.stderr.contains("not a regular file"), "{}", r.stderr);
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
        let mut args = vec!["sigstore", "verify", "--bundle", s(&b), "--certificate-identity", who];
        args.extend(["--certificate-oidc-issuer", from]);
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
