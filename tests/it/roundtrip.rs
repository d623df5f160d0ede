//! Build → verify → inspect → install with the real binary, reproducibility, lock policy, key
//! handling, and the signature checked by openssl (outside proof of the format).

use std::process::Command;

use crate::common::*;

#[test]
fn build_verify_inspect_install_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    let bundle = t.path().join("demo.airlock");
    build(&p, &keys, &bundle).ok();

    let v = airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public), "--json"]).ok().json();
    assert_eq!(v["verified"], true);
    assert_eq!(v["name"], "demo");
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["entries"], 3, "two files and the SBOM");
    assert_eq!(v["problems"], serde_json::json!([]));
    let key_id = v["signers"][0].as_str().unwrap().to_owned();
    assert_eq!(v["provenance"], serde_json::json!({"verified": true, "signers": [key_id.clone()]}));
    assert_eq!(key_id.len(), 64);

    let i = airlock_run(&["inspect", s(&bundle), "--json"]).ok().json();
    assert_eq!(i["members"], 6, "manifest, signature, provenance and the three entries");
    assert_eq!(i["signatures"][0]["key_id"], key_id.as_str());
    assert_eq!(i["created"], "2025-11-29T16:00:00Z");
    assert_eq!(i["artifacts"][0]["file_kind"], "firmware");
    assert_eq!(i["artifacts"][0]["notes"]["board"], "MI300X");
    let sizes: Vec<u64> = i["entries"].as_array().unwrap().iter().map(|e| e["size"].as_u64().unwrap()).collect();
    assert_eq!(i["content_bytes"], sizes.iter().sum::<u64>());
    assert_eq!(i["entries"][0]["path"], "airlock/sbom.cdx.json");
    assert_eq!(&sizes[1..], [70_000, "release notes for 1.0.0\n".len() as u64]);
    let said = airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok().stdout;
    assert!(said.contains("provenance verified"), "{said}");
    let human = airlock_run(&["inspect", s(&bundle)]).ok().stdout;
    assert!(human.contains("NOT verified") && human.contains("board = MI300X"), "{human}");

    let root = t.path().join("site");
    let installed =
        airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root), "--json"]).ok().json();
    let id = installed["id"].as_str().unwrap();
    assert_eq!(std::fs::read_link(root.join("current")).unwrap().to_str().unwrap(), format!("bundles/{id}"));
    assert_eq!(std::fs::read(root.join("current/files/board.bin")).unwrap(), pattern(70_000, 3));
    assert_eq!(std::fs::read(root.join("current/files/notes.txt")).unwrap(), b"release notes for 1.0.0\n");
    assert!(root.join("current/airlock/manifest.json").is_file());
    assert_eq!(
        sha256_file(&root.join("current/bundle.airlock")),
        sha256_file(&bundle),
        "the bundle file is retained as is"
    );
    assert_eq!(installed["previous"], serde_json::Value::Null);

    // A second version becomes current; the first becomes previous and stays retained.
    let p2 = project(&t.path().join("proj2"), "1.1.0");
    let bundle2 = t.path().join("demo2.airlock");
    build(&p2, &keys, &bundle2).ok();
    let second =
        airlock_run(&["install", s(&bundle2), "--trust", s(&keys.public), "--root", s(&root), "--json"]).ok().json();
    assert_eq!(second["previous"], format!("bundles/{id}"));
    assert_eq!(std::fs::read_link(root.join("previous")).unwrap().to_str().unwrap(), format!("bundles/{id}"));
    assert_eq!(std::fs::read(root.join("current/files/notes.txt")).unwrap(), b"release notes for 1.1.0\n");
    assert!(root.join(format!("bundles/{id}/files/board.bin")).is_file());

    // Reinstalling the older bundle is a downgrade: refused, unless asked for; then it is
    // re-verified, restaged and re-activated.
    let reinstall = ["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root), "--json"];
    let refused = airlock_run(&reinstall).code(3);
    assert!(refused.stderr.contains("already activated demo 1.1.0"), "{}", refused.stderr);
    let again = airlock_run(&[&reinstall[..], &["--allow-downgrade"]].concat()).ok().json();
    assert_eq!((again["already_present"].as_bool(), again["downgrade"].as_bool()), (Some(true), Some(true)));
    assert_eq!(std::fs::read(root.join("current/files/notes.txt")).unwrap(), b"release notes for 1.0.0\n");
    assert_eq!(std::fs::read_dir(root.join("staging")).unwrap().count(), 0, "nothing left in staging/");
}

#[test]
fn rebuilds_are_byte_identical() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    let (first, second) = (t.path().join("a.airlock"), t.path().join("b.airlock"));
    build(&p, &keys, &first).ok();
    build(&p, &keys, &second).ok();
    assert_eq!(sha256_file(&first), sha256_file(&second));

    // Without SOURCE_DATE_EPOCH the lock's resolution time is used: still identical.
    let (third, fourth) = (t.path().join("c.airlock"), t.path().join("d.airlock"));
    for out in [&third, &fourth] {
        run(airlock().args(["build", s(&p.spec), "--key", s(&keys.private), "--out", s(out), "--locked"])).ok();
    }
    assert_eq!(sha256_file(&third), sha256_file(&fourth));
    let lock = std::fs::read_to_string(p.dir.join("airlock.lock")).unwrap();
    let resolved = lock.lines().find_map(|l| l.strip_prefix("resolved_at = ")).unwrap().trim_matches('"');
    let created = airlock_run(&["inspect", s(&third), "--json"]).ok().json()["created"].clone();
    assert_eq!(created, resolved);

    // `airlock lock` with unchanged inputs leaves the lock file alone.
    let before = std::fs::read(p.dir.join("airlock.lock")).unwrap();
    airlock_run(&["lock", s(&p.spec)]).ok();
    assert_eq!(std::fs::read(p.dir.join("airlock.lock")).unwrap(), before);
}

#[test]
fn openssl_verifies_the_signature_and_tar_lists_the_members() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    let bundle = t.path().join("demo.airlock");
    build(&p, &keys, &bundle).ok();

    let x = t.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let list = run(Command::new("sh").arg("-c").arg(format!("zstd -dc '{}' | tar -tv", s(&bundle)))).ok().stdout;
    let names: Vec<_> = list.lines().map(|l| l.split_whitespace().last().unwrap()).collect();
    assert_eq!(
        names,
        [
            "airlock/manifest.json",
            "airlock/manifest.json.sig",
            "airlock/sbom.cdx.json",
            "airlock/provenance.dsse.json",
            "files/board.bin",
            "files/notes.txt"
        ]
    );
    assert!(list.lines().all(|l| l.starts_with("-rw-r--r-- 0/0")), "{list}");
    run(Command::new("sh").arg("-c").arg(format!("zstd -dc '{}' | tar -x -C '{}'", s(&bundle), s(&x)))).ok();
    std::fs::write(x.join("sig.der"), {
        let b64 = std::fs::read_to_string(x.join("airlock/manifest.json.sig")).unwrap();
        base64_decode(b64.trim())
    })
    .unwrap();
    let out = openssl_verify(&keys.public, &x.join("sig.der"), &x.join("airlock/manifest.json"));
    assert_eq!(out.stdout.trim(), "Verified OK", "{}", out.stderr);
    // Content digests in the manifest match the extracted files.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(x.join("airlock/manifest.json")).unwrap()).unwrap();
    for e in manifest["entries"].as_array().unwrap() {
        assert_eq!(e["sha256"], sha256_file(&x.join(e["path"].as_str().unwrap())));
    }
    // The DSSE provenance, checked independently: PAE built here, ECDSA checked by openssl.
    let envelope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(x.join("airlock/provenance.dsse.json")).unwrap()).unwrap();
    assert_eq!(envelope["payloadType"], "application/vnd.in-toto+json");
    let payload = base64_decode(envelope["payload"].as_str().unwrap());
    let mut pae = format!("DSSEv1 28 application/vnd.in-toto+json {} ", payload.len()).into_bytes();
    pae.extend_from_slice(&payload);
    std::fs::write(x.join("pae.bin"), &pae).unwrap();
    std::fs::write(x.join("dsse.der"), base64_decode(envelope["signatures"][0]["sig"].as_str().unwrap())).unwrap();
    let out = openssl_verify(&keys.public, &x.join("dsse.der"), &x.join("pae.bin"));
    assert_eq!(out.stdout.trim(), "Verified OK", "{}", out.stderr);
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let manifest_digest = sha256_file(&x.join("airlock/manifest.json"));
    assert_eq!(statement["subject"][0]["name"], "airlock/manifest.json");
    assert_eq!(statement["subject"][0]["digest"]["sha256"], manifest_digest.as_str());
    assert_eq!(statement["subject"].as_array().unwrap().len(), 3, "the manifest and both files");
    assert_eq!(envelope["signatures"][0]["keyid"].as_str().unwrap().len(), 64);

    // `airlock provenance` prints the same statement, checked with --trust; another key fails.
    let printed = airlock_run(&["provenance", s(&bundle), "--trust", s(&keys.public)]).ok().json();
    assert_eq!(printed, statement);
    let other = keygen(&t.path().join("other"), "other");
    let refused = airlock_run(&["provenance", s(&bundle), "--trust", s(&other.public)]).code(3);
    assert!(refused.stderr.contains("no trusted key signed the provenance"), "{}", refused.stderr);

    // And openssl rejects a manifest changed by one byte.
    let mut m = std::fs::read(x.join("airlock/manifest.json")).unwrap();
    m[10] ^= 1;
    std::fs::write(x.join("tampered.json"), m).unwrap();
    let out = openssl_verify(&keys.public, &x.join("sig.der"), &x.join("tampered.json"));
    assert_ne!(out.code, 0);
}

#[test]
fn a_member_zstd_cannot_shrink_is_stored_in_raw_frames_that_zstd_reads_and_damage_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    // 3 MiB of a hash chain (nothing for zstd to find) as the last member, whose size is a
    // multiple of 512: the archive's end follows its raw frame directly.
    let weights = pattern(3 << 20, 5);
    std::fs::write(t.path().join("proj/notes.txt"), &weights).unwrap();
    let bundle = t.path().join("demo.airlock");
    build(&p, &keys, &bundle).ok();
    let bytes = std::fs::read(&bundle).unwrap();

    // Its blocks are in the bundle as they are, each after a raw block header (128 KiB, not
    // the last), in a frame of their own after the compressed frame of the tar headers.
    let at = bytes.windows(4096).position(|w| w == &weights[..4096]).expect("the member's bytes as they are");
    assert_eq!(&bytes[at - 9..at], &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38, 0x00, 0x00, 0x10]);
    assert_eq!(&bytes[at..at + (128 << 10)], &weights[..128 << 10]);
    // And the bundle is the content (with the 70 KB firmware, as incompressible) and little more.
    assert!(bytes.len() < weights.len() + 70_000 + (64 << 10), "{} bytes", bytes.len());
    // zstd reads every frame, and checks the compressed ones.
    run(Command::new("zstd").arg("-tq").arg(&bundle)).ok();
    let list = run(Command::new("sh").arg("-c").arg(format!("zstd -dc '{}' | tar -t", s(&bundle)))).ok().stdout;
    assert!(list.lines().any(|l| l == "files/board.bin") && list.ends_with("files/notes.txt\n"), "{list}");
    let x = t.path().join("x");
    std::fs::create_dir(&x).unwrap();
    run(Command::new("sh").arg("-c").arg(format!("zstd -dc '{}' | tar -x -C '{}'", s(&bundle), s(&x)))).ok();
    assert!(std::fs::read(x.join("files/notes.txt")).unwrap() == weights);
    // Read from the file, its stored member is hashed from there (`spans`); read from a pipe,
    // in the stream: the same verdict either way.
    let piped = |path: &std::path::Path, args: &[&str]| {
        let mut cat = Command::new("cat").arg(path).stdout(std::process::Stdio::piped()).spawn().unwrap();
        let out = run(airlock().args(["verify", "/dev/stdin"]).args(args).stdin(cat.stdout.take().unwrap()));
        cat.wait().unwrap();
        out
    };
    let trust = ["--trust", s(&keys.public), "--json"];
    let from_file = run(airlock().args([&["verify", s(&bundle)][..], &trust].concat()).env("RUST_LOG", "info")).ok();
    assert!(
        from_file
            .stderr
            .contains("stored members: 1 hashed from the bundle file beside the stream (1 ahead of it, 0 as reached)"),
        "{}",
        from_file.stderr
    );
    let from_file = from_file.json();
    let from_pipe = piped(&bundle, &trust).ok().json();
    assert_eq!(from_file["entries"], from_pipe["entries"]);
    assert_eq!(from_file["members"], from_pipe["members"]);

    // Cut inside a raw frame, cut where one ends (every member there, the archive's end
    // missing), a byte changed in a raw block, or a block header changed: refused.
    let end = at + weights.len() + ((weights.len() >> 17) - 1) * 3;
    assert_eq!(&bytes[end..end + 3], &[0x01, 0x00, 0x00], "the empty last block");
    let mut flipped = bytes.clone();
    flipped[at + 1_000_000] ^= 0x40;
    // The first block's header says "compressed" (type 2): zstd would try to decode it, the
    // reader refuses a frame with raw frames' header that is not all raw blocks.
    let mut typed = bytes.clone();
    typed[at - 3] |= 0b100;
    for (name, damaged, words) in [
        ("inside", bytes[..at + 200_000].to_vec(), "truncated or corrupt stream"),
        ("at the end of", bytes[..end + 3].to_vec(), "the archive ends without its two zero blocks"),
        ("a byte changed in", flipped, "sha256"),
        ("a compressed block in", typed, "a block of type 2"),
    ] {
        let path = t.path().join("damaged.airlock");
        std::fs::write(&path, damaged).unwrap();
        for refused in [airlock_run(&["verify", s(&path), "--trust", s(&keys.public)]), piped(&path, &trust[..2])] {
            let refused = refused.code(3);
            let said = format!("{}{}", refused.stdout, refused.stderr);
            assert!(said.contains(words), "{name}: {said}");
        }
        // `diff --trust` verifies each side as `verify` does, from the file.
        let diffed = airlock_run(&["diff", s(&bundle), s(&path), "--trust", s(&keys.public)]).code(3);
        assert!(
            diffed.stderr.contains("damaged.airlock") && diffed.stderr.contains("does not verify"),
            "{name}: {}",
            diffed.stderr
        );
    }
    let same =
        run(airlock().args(["diff", s(&bundle), s(&bundle), "--trust", s(&keys.public)]).env("RUST_LOG", "info"));
    assert_eq!(same.ok().stderr.matches("(1 ahead of it, 0 as reached)").count(), 2);
}

#[test]
fn locked_builds_refuse_missing_and_stale_locks_and_changed_content() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    let out = t.path().join("out.airlock");
    let locked = |out: &std::path::Path| {
        run(airlock().args(["build", s(&p.spec), "--key", s(&keys.private), "--out", s(out), "--locked"]))
    };

    let r = locked(&out).code(1);
    assert!(r.stderr.contains("airlock.lock") && r.stderr.contains("does not exist"), "{}", r.stderr);
    assert!(!out.exists());

    airlock_run(&["lock", s(&p.spec)]).ok();
    // A new entry in the spec makes the lock stale.
    let mut spec = std::fs::read_to_string(&p.spec).unwrap();
    spec.push_str("\n[[file]]\nname = \"extra.txt\"\nsource = \"notes.txt\"\n");
    std::fs::write(&p.spec, &spec).unwrap();
    let r = locked(&out).code(1);
    assert!(r.stderr.contains("out of date") && r.stderr.contains("`extra.txt` is not locked"), "{}", r.stderr);
    // Without --locked, build updates the lock and succeeds.
    build(&p, &keys, &out).ok();
    std::fs::remove_file(&out).unwrap();

    // Content that changed after locking fails the build (exit 3) and leaves nothing behind.
    std::fs::write(p.dir.join("notes.txt"), "tampered\n").unwrap();
    let r = locked(&out).code(3);
    assert!(r.stderr.contains("notes.txt") && r.stderr.contains("expected"), "{}", r.stderr);
    assert!(!out.exists());
    let stray: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");

    // `airlock lock` picks the change up; a pinned sha256 in the spec that disagrees is exit 3.
    airlock_run(&["lock", s(&p.spec)]).ok();
    locked(&out).ok();
    spec.push_str("\n[[file]]\nname = \"pinned.txt\"\nsource = \"notes.txt\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n");
    std::fs::write(&p.spec, &spec).unwrap();
    let r = airlock_run(&["lock", s(&p.spec)]).code(3);
    assert!(r.stderr.contains("expected sha256 0000") && r.stderr.contains("pinned.txt"), "{}", r.stderr);
}

#[test]
fn spec_errors_exit_2_with_file_and_line() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let spec = t.path().join("airlock.toml");
    std::fs::write(&spec, "[bundle]\nname = \"demo\"\nversion = \"1.0.0\"\ncolour = \"red\"\n").unwrap();
    let r = airlock_run(&["lock", s(&spec)]).code(2);
    assert!(r.stderr.contains("airlock.toml:4:") && r.stderr.contains("unknown field `colour`"), "{}", r.stderr);

    // An invalid entry of any kind points at its line (here an image reference without a tag).
    std::fs::write(&spec, "[bundle]\nname = \"demo\"\nversion = \"1.0.0\"\n\n[[image]]\nref = \"127.0.0.1:5000/x\"\n")
        .unwrap();
    let r =
        run(airlock().args(["build", s(&spec), "--key", s(&keys.private), "--out", s(&t.path().join("o"))])).code(2);
    assert!(r.stderr.contains("airlock.toml:5:") && r.stderr.contains("invalid image reference"), "{}", r.stderr);

    // A spec that is not there is a usage error, like a wrong one.
    let r = airlock_run(&["lock", s(&t.path().join("missing.toml"))]).code(2);
    assert!(r.stderr.contains("missing.toml"), "{}", r.stderr);
    airlock_run(&["verify"]).code(2);
}

#[test]
fn encrypted_keys_work_and_a_wrong_passphrase_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("keys");
    run(airlock().env("AIRLOCK_KEY_PASSWORD", "s3cret").args(["keygen", "--out-dir", s(&dir), "--name", "enc"])).ok();
    let key = std::fs::read_to_string(dir.join("enc.key")).unwrap();
    assert!(key.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"), "{key}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir.join("enc.key")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let public = std::fs::read_to_string(dir.join("enc.pub")).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"));

    let p = project(&t.path().join("proj"), "1.0.0");
    let out = t.path().join("b.airlock");
    let build_with = |pw: Option<&str>| {
        let mut c = airlock();
        if let Some(pw) = pw {
            c.env("AIRLOCK_KEY_PASSWORD", pw);
        }
        run(c.args(["build", s(&p.spec), "--key", s(&dir.join("enc.key")), "--out", s(&out)]))
    };
    let r = build_with(Some("wrong")).code(1);
    assert!(
        r.stderr.contains("wrong passphrase in AIRLOCK_KEY_PASSWORD") && r.stderr.contains("enc.key"),
        "{}",
        r.stderr
    );
    let r = build_with(None).code(1);
    assert!(r.stderr.contains("set AIRLOCK_KEY_PASSWORD"), "{}", r.stderr);
    assert!(!out.exists());
    let r = build_with(Some("s3cret")).ok();
    assert!(!r.stderr.contains("readable by others"), "a 0600 key draws no warning: {}", r.stderr);
    airlock_run(&["verify", s(&out), "--trust", s(&dir.join("enc.pub"))]).ok();
    // The passphrase decrypts in memory only: no key file but the encrypted one, ever.
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(std::fs::read_to_string(dir.join("enc.key")).unwrap(), key, "the key file is unchanged");
    // A private key others can read still works, with a warning that says what to do.
    let shared = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    std::fs::set_permissions(dir.join("enc.key"), shared).unwrap();
    std::fs::remove_file(&out).unwrap();
    let r = build_with(Some("s3cret")).ok();
    assert!(r.stderr.contains("readable by others (mode 644): `chmod 600"), "{}", r.stderr);

    // keygen never overwrites a key.
    let r = airlock_run(&["keygen", "--out-dir", s(&dir), "--name", "enc"]).code(1);
    assert!(r.stderr.contains("refusing to overwrite"), "{}", r.stderr);
    // A key id is the sha256 of the SPKI DER, as openssl computes it.
    run(Command::new("openssl").args([
        "pkey",
        "-pubin",
        "-in",
        s(&dir.join("enc.pub")),
        "-outform",
        "DER",
        "-out",
        s(&t.path().join("pub.der")),
    ]))
    .ok();
    let id = airlock_run(&["verify", s(&out), "--trust", s(&dir.join("enc.pub")), "--json"]).ok().json()["signers"][0]
        .clone();
    assert_eq!(id, sha256_file(&t.path().join("pub.der")));
}

#[test]
fn diff_lists_added_removed_and_changed_between_bundles_and_between_locks() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let old = project(&t.path().join("old"), "1.0.0");
    let new = project(&t.path().join("new"), "1.1.0");
    let mut spec = std::fs::read_to_string(&new.spec).unwrap();
    spec.push_str("\n[[file]]\nname = \"extra.txt\"\nsource = \"notes.txt\"\n");
    std::fs::write(&new.spec, spec).unwrap();
    let (b1, b2) = (t.path().join("old.airlock"), t.path().join("new.airlock"));
    build(&old, &keys, &b1).ok();
    build(&new, &keys, &b2).ok();

    let d = airlock_run(&["diff", s(&b1), s(&b2), "--json"]).ok().json();
    assert_eq!(d["added"].as_array().unwrap().len(), 1);
    assert_eq!(d["added"][0]["name"], "extra.txt");
    assert_eq!(d["removed"], serde_json::json!([]));
    assert_eq!(d["changed"].as_array().unwrap().len(), 1, "{d}");
    assert_eq!((d["changed"][0]["kind"].as_str(), d["changed"][0]["name"].as_str()), (Some("file"), Some("notes.txt")));
    assert_ne!(d["changed"][0]["from"], d["changed"][0]["to"]);

    // The same between the locks, and the other way round.
    let locks = airlock_run(&["diff", s(&old.dir.join("airlock.lock")), s(&new.dir.join("airlock.lock")), "--json"])
        .ok()
        .json();
    for key in ["added", "removed", "changed"] {
        assert_eq!(locks[key], d[key], "{key}");
    }
    assert_eq!((d["old"]["name"].as_str(), d["new"]["version"].as_str()), (Some("demo"), Some("1.1.0")));
    assert!(locks["old"].is_null(), "a lock has no bundle name");
    let back = airlock_run(&["diff", s(&b2), s(&b1)]).ok().stdout;
    assert!(back.contains("- file   extra.txt") && back.contains("0 added, 1 removed, 1 changed"), "{back}");
    airlock_run(&["diff", s(&b1), s(&t.path().join("nope"))]).code(1);
}

#[test]
fn compression_flags_are_deterministic_recorded_and_read_back() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    let plain = t.path().join("plain.airlock");
    build(&p, &keys, &plain).ok();
    let flagged = |out: &str, flags: &[&str]| {
        let out = t.path().join(out);
        let mut cmd = airlock();
        cmd.env("SOURCE_DATE_EPOCH", EPOCH);
        cmd.args(["build", s(&p.spec), "--key", s(&keys.private), "--out", s(&out)]).args(flags);
        (run(&mut cmd), out)
    };
    let (r, small) = flagged("small.airlock", &["--compression-level", "19", "--long=24"]);
    r.ok();
    let (r, again) = flagged("again.airlock", &["--compression-level", "19", "--long=24"]);
    r.ok();
    assert_eq!(sha256_file(&small), sha256_file(&again), "the same flags give the same bytes");
    assert_ne!(sha256_file(&small), sha256_file(&plain), "other flags, other bytes");

    // The frame asks for the window it was written with; every reader copes.
    let listed = run(Command::new("zstd").args(["-lv", s(&small)])).ok().stdout;
    assert!(listed.contains("(16777216 B)"), "{listed}");
    let listed = run(Command::new("zstd").args(["-lv", s(&plain)])).ok().stdout;
    assert!(!listed.contains("(16777216 B)") && listed.contains("Window Size:"), "{listed}");
    let (r, long) = flagged("long.airlock", &["--long"]);
    r.ok();
    let listed = run(Command::new("zstd").args(["-lv", s(&long)])).ok().stdout;
    assert!(listed.contains("(134217728 B)"), "--long alone is 27: {listed}");
    for bundle in [&small, &long] {
        airlock_run(&["verify", s(bundle), "--trust", s(&keys.public)]).ok();
    }

    // The provenance says how the bytes were made.
    let statement = airlock_run(&["provenance", s(&small), "--trust", s(&keys.public)]).ok().stdout;
    let statement: serde_json::Value = serde_json::from_str(&statement).unwrap();
    let compression = &statement["predicate"]["buildDefinition"]["externalParameters"]["compression"];
    assert_eq!(compression, &serde_json::json!({"zstd_level": 19, "long_window_log": 24}));

    for bad in [&["--long=28"][..], &["--compression-level", "0"], &["--compression-level", "20"]] {
        let (r, out) = flagged("bad.airlock", bad);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
        assert!(!out.exists());
    }
}
