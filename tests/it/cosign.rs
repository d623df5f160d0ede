//! Co-signing and the threshold policy, with the real binary: `airlock sign` writes
//! `BUNDLE.KEYID.sig` beside the bundle (checked here by openssl over the manifest bytes),
//! `verify` and `install` with `--threshold N` need N distinct trusted keys, and install retains
//! the co-signatures with the bundle.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

struct Setup {
    t: tempfile::TempDir,
    build: Keys,
    security: Keys,
    rogue: Keys,
    bundle: PathBuf,
}

fn setup() -> Setup {
    let t = tempfile::tempdir().unwrap();
    let build_keys = keygen(&t.path().join("keys"), "build");
    let security = keygen(&t.path().join("keys"), "security");
    let rogue = keygen(&t.path().join("keys"), "rogue");
    let p = project(&t.path().join("proj"), "1.0.0");
    let bundle = t.path().join("out/demo.airlock");
    std::fs::create_dir_all(bundle.parent().unwrap()).unwrap();
    build(&p, &build_keys, &bundle).ok();
    Setup { t, build: build_keys, security, rogue, bundle }
}

fn key_id(keys: &Keys) -> String {
    airlock::sign::TrustedKey::load(&keys.public).unwrap().key_id().to_string()
}

/// `verb BUNDLE --trust K… --threshold N` and `extra`, run.
fn with_policy(verb: &str, bundle: &Path, keys: &[&Keys], threshold: &str, extra: &[&str]) -> Run {
    let mut args = vec![verb, s(bundle), "--threshold", threshold];
    for k in keys {
        args.extend(["--trust", s(&k.public)]);
    }
    args.extend(extra);
    run(airlock().args(&args))
}

fn verify(bundle: &Path, keys: &[&Keys], threshold: &str) -> Run {
    with_policy("verify", bundle, keys, threshold, &["--json"])
}

fn statuses(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["key_id"].as_str().unwrap_or("-").to_owned(), s["status"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn threshold_counts_distinct_trusted_keys_embedded_or_beside_the_bundle() {
    let x = setup();
    let (build_id, security_id, rogue_id) = (key_id(&x.build), key_id(&x.security), key_id(&x.rogue));

    // One of two required signatures: exit 3, naming the threshold.
    let one = verify(&x.bundle, &[&x.build, &x.security], "2").code(3);
    let doc = one.json();
    assert_eq!(doc["verified"], false);
    assert_eq!(doc["signers"], serde_json::json!([build_id]));
    assert_eq!(doc["threshold"], 2);
    let reason = doc["problems"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("threshold not met") && reason.contains("2 distinct trusted keys"), "{reason}");

    // A co-signature by a key the site does not trust does not count.
    let signed = airlock_run(&["sign", s(&x.bundle), "--key", s(&x.rogue.private), "--json"]).ok().json();
    let rogue_sig = PathBuf::from(signed["signature"].as_str().unwrap());
    assert_eq!(rogue_sig, x.t.path().join(format!("out/demo.airlock.{rogue_id}.sig")));
    assert_eq!(signed["verified_first"], false);
    let doc = verify(&x.bundle, &[&x.build, &x.security], "2").code(3).json();
    assert_eq!(doc["signers"], serde_json::json!([build_id]));
    assert_eq!(
        statuses(&doc),
        [(build_id.clone(), "valid".to_owned()), (rogue_id.clone(), "untrusted".to_owned())],
        "{doc}"
    );

    // The security team verifies, then co-signs: two distinct trusted keys, exit 0.
    let before = sha256_file(&x.bundle);
    let signed =
        airlock_run(&["sign", s(&x.bundle), "--key", s(&x.security.private), "--trust", s(&x.build.public), "--json"])
            .ok()
            .json();
    assert_eq!(signed["verified_first"], true);
    assert_eq!(sha256_file(&x.bundle), before, "the bundle is not rewritten");
    let security_sig = x.t.path().join(format!("out/demo.airlock.{security_id}.sig"));
    assert_eq!(signed["signature"], s(&security_sig));
    let doc = verify(&x.bundle, &[&x.build, &x.security], "2").ok().json();
    assert_eq!(doc["signers"], serde_json::json!([build_id, security_id]));
    assert_eq!(doc["sbom"]["verified"], true);
    let human = with_policy("verify", &x.bundle, &[&x.build, &x.security], "2", &[]).ok().stdout;
    assert!(human.contains("(2 of 2 required)") && human.contains("not trusted"), "{human}");

    // The co-signature is cosign sign-blob format over the manifest bytes: openssl agrees.
    let xdir = x.t.path().join("x");
    std::fs::create_dir(&xdir).unwrap();
    run(Command::new("sh").arg("-c").arg(format!("zstd -dc '{}' | tar -x -C '{}'", s(&x.bundle), s(&xdir)))).ok();
    let der = xdir.join("co.der");
    std::fs::write(&der, base64_decode(std::fs::read_to_string(&security_sig).unwrap().trim())).unwrap();
    let out = openssl_verify(&x.security.public, &der, &xdir.join("airlock/manifest.json"));
    assert_eq!(out.stdout.trim(), "Verified OK", "{}", out.stderr);

    // Trusting one key twice is still one key; a threshold above the trusted keys is a usage error.
    let r = verify(&x.bundle, &[&x.build, &x.build], "2").code(2);
    assert!(r.stderr.contains("--threshold 2 can never be met") && r.stderr.contains("1 distinct"), "{}", r.stderr);
    verify(&x.bundle, &[&x.build], "0").code(2);

    // A stale co-signature (over another manifest) does not count and is reported as invalid.
    let p2 = project(&x.t.path().join("proj2"), "1.1.0");
    let other = x.t.path().join("out/other.airlock");
    build(&p2, &x.build, &other).ok();
    airlock_run(&["sign", s(&other), "--key", s(&x.security.private)]).ok();
    let stale = x.t.path().join(format!("out/other.airlock.{security_id}.sig"));
    std::fs::copy(&stale, &security_sig).unwrap();
    let doc = verify(&x.bundle, &[&x.build, &x.security], "2").code(3).json();
    assert_eq!(doc["signers"], serde_json::json!([build_id]));
    let invalid: Vec<_> = doc["signatures"].as_array().unwrap().iter().filter(|s| s["status"] == "invalid").collect();
    assert_eq!(invalid.len(), 1, "{doc}");
    assert_eq!(invalid[0]["source"], s(&security_sig));
    // …and the other bundle, with its own co-signature, meets the threshold.
    verify(&other, &[&x.build, &x.security], "2").ok();
}

#[test]
fn install_enforces_the_threshold_and_retains_the_cosignatures() {
    let x = setup();
    let security_id = key_id(&x.security);
    let root = x.t.path().join("site");
    let install = |threshold: &str| {
        with_policy("install", &x.bundle, &[&x.build, &x.security], threshold, &["--root", s(&root), "--json"])
    };
    let refused = install("2").code(3);
    assert!(refused.stderr.contains("threshold not met"), "{}", refused.stderr);
    assert!(refused.stderr.contains("the site was not changed"), "{}", refused.stderr);
    assert_nothing_installed(&root);

    // Installed under a one-key policy first; co-signed later, the re-install adds the co-signature.
    let first = install("1").ok().json();
    assert_eq!(first["cosignatures"], serde_json::json!([]));
    airlock_run(&["sign", s(&x.bundle), "--key", s(&x.security.private), "--trust", s(&x.build.public)]).ok();
    let done = install("2").ok().json();
    assert_eq!(done["already_present"], true);
    assert_eq!(done["signers"].as_array().unwrap().len(), 2);
    let retained = root.join("current").join(format!("bundle.airlock.{security_id}.sig"));
    assert_eq!(
        done["cosignatures"],
        serde_json::json!([root
            .join("bundles")
            .join(done["id"].as_str().unwrap())
            .join(retained.file_name().unwrap())])
    );
    assert_eq!(
        std::fs::read(&retained).unwrap(),
        std::fs::read(x.t.path().join(format!("out/demo.airlock.{security_id}.sig"))).unwrap()
    );
    // Bundles, co-signatures and the site tree get the modes `File::create` and `mkdir` give (not
    // tempfile's private 0600/0700): other users and the web server read them.
    let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777;
    let (plain_file, plain_dir) = (x.t.path().join("plain"), x.t.path().join("plain-dir"));
    std::fs::File::create(&plain_file).unwrap();
    std::fs::create_dir(&plain_dir).unwrap();
    for file in [x.bundle.clone(), retained.clone(), x.t.path().join(format!("out/demo.airlock.{security_id}.sig"))] {
        assert_eq!(mode(&file), mode(&plain_file), "{}", file.display());
    }
    assert_eq!(mode(&root.join("current/")), mode(&plain_dir));
    // The retained bundle still meets the policy on its own, with what was kept beside it.
    verify(&root.join("current/bundle.airlock"), &[&x.build, &x.security], "2").ok();
}

#[test]
fn sign_refuses_a_bundle_that_does_not_verify() {
    let x = setup();
    let mut bytes = std::fs::read(&x.bundle).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 0x40;
    let broken = x.t.path().join("out/broken.airlock");
    std::fs::write(&broken, bytes).unwrap();
    let r = airlock_run(&["sign", s(&broken), "--key", s(&x.security.private), "--trust", s(&x.build.public)]).code(3);
    assert!(r.stderr.contains("refusing to co-sign") && r.stderr.contains("broken.airlock"), "{}", r.stderr);
    let left: Vec<_> = std::fs::read_dir(x.t.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "sig"))
        .collect();
    assert!(left.is_empty(), "no co-signature written: {left:?}");
    let r = airlock_run(&["sign", s(&x.bundle), "--key", s(&x.security.public)]).code(1);
    assert!(r.stderr.contains("security.pub"), "a public key is not a signing key: {}", r.stderr);
}

#[test]
fn a_fifo_named_like_a_cosignature_does_not_hang_verify() {
    let x = setup();
    // Named exactly as the security key's co-signature would be; nobody ever writes to it.
    let fifo = PathBuf::from(format!("{}.{}.sig", x.bundle.display(), key_id(&x.security)));
    run(Command::new("mkfifo").arg(&fifo)).ok();
    let mut child = airlock()
        .args(["verify", s(&x.bundle), "--trust", s(&x.build.public), "--trust", s(&x.security.public)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("verify hung on a FIFO co-signature");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "the build key's signature suffices; the FIFO is skipped");
    drop(x.t);
}
