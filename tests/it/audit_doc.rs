//! The by-hand audit in `docs/security-audit.md`, run exactly as written (zstd, tar, openssl,
//! sha256sum, jq, skopeo, the `CycloneDX` validator), must reach the same verdict as
//! `airlock verify --threshold 2` on good and on tampered bundles.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// The shell block under "## Check a bundle by hand".
fn audit_script() -> String {
    let doc = std::fs::read_to_string(repo("docs/security-audit.md")).unwrap();
    let section = &doc[doc.find("## Check a bundle by hand").expect("the section exists")..];
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let len = section[start..].find("```").expect("the block ends");
    section[start..start + len].to_owned()
}

fn sh(script: &str, dir: &Path) -> Run {
    run(Command::new("bash").args(["-euo", "pipefail", "-c", script]).current_dir(dir))
}

/// Rewrite a bundle's tar stream: extract, let `change` edit the tree and the member list, re-pack
/// in that order with the same ustar conventions.
fn repack(bundle: &Path, change: impl FnOnce(&Path, &mut Vec<String>)) {
    let work = bundle.with_extension("repack");
    std::fs::create_dir(&work).unwrap();
    let list = sh(&format!("zstd -dc '{}' | tar -t", s(bundle)), &work).ok().stdout;
    let mut members: Vec<String> = list.lines().map(str::to_owned).collect();
    sh(&format!("zstd -dc '{}' | tar -x", s(bundle)), &work).ok();
    change(&work, &mut members);
    sh(
        &format!(
            "tar --format=ustar --owner=0 --group=0 --numeric-owner -cf - {} | zstd -q -f -o '{}'",
            members.join(" "),
            s(bundle)
        ),
        &work,
    )
    .ok();
    std::fs::remove_dir_all(&work).unwrap();
}

/// Edits a bundle file in place.
type Tamper = fn(&Path);

#[test]
#[allow(clippy::too_many_lines, reason = "the audit guide's six cases, each checked against verify")]
fn the_documented_audit_reaches_the_same_verdict_as_verify() {
    let t = tempfile::tempdir().unwrap();
    let keys = t.path().join("keys");
    let build_keys = keygen(&keys, "build");
    let security = keygen(&keys, "security");
    let p = project(&t.path().join("proj"), "1.0.0");
    oci_layout(&p.dir.join("layout"));
    let mut spec = std::fs::read_to_string(&p.spec).unwrap();
    spec.push_str("\n[[image]]\noci_layout = \"layout\"\ntag = \"demo/app:1.0\"\n");
    std::fs::write(&p.spec, spec).unwrap();
    let original = t.path().join("original.airlock");
    build(&p, &build_keys, &original).ok();
    let script = audit_script();

    let cases: [(&str, bool, Option<Tamper>, bool); 6] = [
        ("good, co-signed", true, None, true),
        ("good, not co-signed: below the threshold", false, None, false),
        (
            "content changed after signing",
            true,
            Some(|b| repack(b, |dir, _| std::fs::write(dir.join("files/notes.txt"), "other notes\n").unwrap())),
            false,
        ),
        (
            "unlisted member added",
            true,
            Some(|b| {
                repack(b, |dir, members| {
                    std::fs::write(dir.join("files/extra"), "smuggled\n").unwrap();
                    members.push("files/extra".into());
                });
            }),
            false,
        ),
        (
            "provenance stripped",
            true,
            Some(|b| repack(b, |_, members| members.retain(|m| m != "airlock/provenance.dsse.json"))),
            false,
        ),
        (
            "manifest changed after signing",
            true,
            Some(|b| {
                repack(b, |dir, _| {
                    let path = dir.join("airlock/manifest.json");
                    let text = std::fs::read_to_string(&path).unwrap().replace("\"demo\"", "\"dema\"");
                    std::fs::write(path, text).unwrap();
                });
            }),
            false,
        ),
    ];
    for (name, cosign, tamper, want) in cases {
        let w = t.path().join(name.replace([' ', ',', ':'], "-"));
        std::fs::create_dir_all(w.join("trusted")).unwrap();
        let bundle = w.join("B.airlock");
        std::fs::copy(&original, &bundle).unwrap();
        std::fs::copy(&build_keys.public, w.join("build.pub")).unwrap();
        std::fs::copy(&build_keys.public, w.join("trusted/build.pub")).unwrap();
        std::fs::copy(&security.public, w.join("trusted/security.pub")).unwrap();
        if cosign {
            airlock_run(&["sign", s(&bundle), "--key", s(&security.private)]).ok();
        }
        if let Some(tamper) = tamper {
            tamper(&bundle);
        }
        let by_hand = sh(&script, &w);
        let verify = airlock_run(&[
            "verify",
            s(&bundle),
            "--trust",
            s(&build_keys.public),
            "--trust",
            s(&security.public),
            "--threshold",
            "2",
        ]);
        assert_eq!(by_hand.code == 0, want, "{name}: by hand\n{}\n{}", by_hand.stdout, by_hand.stderr);
        assert_eq!(verify.code, if want { 0 } else { 3 }, "{name}: airlock verify\n{}{}", verify.stdout, verify.stderr);
        if want {
            assert_eq!(by_hand.stdout.matches("signed by ").count(), 2, "{}", by_hand.stdout);
            assert!(by_hand.stdout.contains("Verified OK"), "{}", by_hand.stdout);
            assert!(by_hand.stdout.contains("images/blobs/sha256/"), "step 2 checked the image blobs");
            assert!(by_hand.stdout.lines().any(|l| l == "true"), "step 7 found the image in index.json");
        }
    }
}
