//! A site trust root (issue 30): signing roles and thresholds in TUF metadata that python-tuf
//! verifies, root rotation one version at a time, revocation that reaches retained bundles,
//! expiry of metadata and of bundles, and a site pinned against replayed or planted metadata.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The keys of a site's trust root, and an authoring root (`auth`: where the security team
/// rotates and revokes) whose metadata sites take up.
struct Trust {
    t: tempfile::TempDir,
    root1: Keys,
    root2: Keys,
    root3: Keys,
    build: Keys,
    sec1: Keys,
    sec2: Keys,
    auth: PathBuf,
}

impl Trust {
    fn new() -> Self {
        let t = tempfile::tempdir().unwrap();
        let k = t.path().join("keys");
        let key = |name| keygen(&k, name);
        let (root1, root2, root3, build, sec1, sec2) =
            (key("root1"), key("root2"), key("root3"), key("build"), key("sec1"), key("sec2"));
        let auth = t.path().join("auth");
        Self { t, root1, root2, root3, build, sec1, sec2, auth }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.t.path().join(rel)
    }

    /// `trust init` of `root` with build 1 of 1 and security 1 of 2, root keys root1 and
    /// root2, 2 of 2.
    fn init(&self, root: &Path, expires: &str) -> Run {
        airlock_run(&[
            "trust",
            "init",
            "--root",
            s(root),
            "--root-key",
            s(&self.root1.public),
            "--root-key",
            s(&self.root2.public),
            "--root-threshold",
            "2",
            "--role",
            &format!("build={}:1", s(&self.build.public)),
            "--role",
            &format!("security={},{}:1", s(&self.sec1.public), s(&self.sec2.public)),
            "--expires",
            expires,
            "--sign",
            s(&self.root1.private),
            "--sign",
            s(&self.root2.private),
        ])
    }

    /// A site provisioned from the authoring root's version 1 (copied, as provisioning media do).
    fn site(&self, name: &str) -> PathBuf {
        let site = self.path(name);
        std::fs::create_dir_all(site.join("trust")).unwrap();
        for f in ["1.root.json", "targets.json"] {
            std::fs::copy(self.auth.join("trust").join(f), site.join("trust").join(f)).unwrap();
        }
        site
    }

    /// A bundle of `demo` at `version` signed by build and co-signed by `cosigners`.
    fn bundle(&self, version: &str, cosigners: &[&Keys], extra_spec: &str, build_args: &[&str]) -> PathBuf {
        let p = project(&self.path(&format!("src-{version}")), version);
        let spec = std::fs::read_to_string(&p.spec).unwrap();
        let spec =
            spec.replacen(&format!("version = \"{version}\"\n"), &format!("version = \"{version}\"\n{extra_spec}"), 1);
        std::fs::write(&p.spec, spec).unwrap();
        let out = self.path(&format!("demo-{version}.airlock"));
        let args = [&["build", s(&p.spec), "--key", s(&self.build.private), "--out", s(&out)][..], build_args].concat();
        run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).args(&args)).ok();
        for k in cosigners {
            airlock_run(&["sign", s(&out), "--key", s(&k.private)]).ok();
        }
        out
    }
}

/// python-tuf loads every root version and the targets metadata under `dir` and checks each
/// signature threshold with `verify_delegate`: root 1 by itself, N+1 by N and by itself,
/// targets by the newest root.
fn python_tuf(dir: &Path) -> Run {
    let script = r#"
import os, sys
from tuf.api.metadata import Metadata, Root, Targets
d = sys.argv[1]
roots, n = [], 1
while os.path.exists(f"{d}/{n}.root.json"):
    roots.append(Metadata[Root].from_file(f"{d}/{n}.root.json")); n += 1
roots[0].verify_delegate("root", roots[0])
for a, b in zip(roots, roots[1:]):
    a.verify_delegate("root", b)
    b.verify_delegate("root", b)
t = Metadata[Targets].from_file(f"{d}/targets.json")
roots[-1].verify_delegate("targets", t)
roles = sorted((r.name, r.threshold, len(r.keyids)) for r in t.signed.delegations.roles.values())
print(len(roots), t.signed.version, roles)
"#;
    run(std::process::Command::new("python3").args(["-c", script, s(dir)]))
}

fn record_trust(root: &Path, action: &str) -> serde_json::Value {
    let mut records: Vec<_> = std::fs::read_dir(root.join("records"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(&format!("-{action}.json")))
        .collect();
    records.sort();
    let last = records.last().expect("a record");
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(last).unwrap()).unwrap()["trust"].clone()
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python-tuf")]
fn python_tuf_verifies_every_file_written_and_rejects_a_tampered_copy() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let dir = t.auth.join("trust");
    assert_eq!(python_tuf(&dir).ok().stdout.trim(), "1 1 [('build', 1, 1), ('security', 1, 2)]");
    // Rotation 1 → 2 → 3 with key changes, then a revocation; each state verifies.
    let rotate = |args: &[&str]| airlock_run(&[&["trust", "rotate", "--root", s(&t.auth)][..], args].concat());
    rotate(&["--add-root-key", s(&t.root3.public), "--sign", s(&t.root1.private), "--sign", s(&t.root2.private)]).ok();
    rotate(&[
        "--remove-root-key",
        s(&t.root1.public),
        "--root-threshold",
        "1",
        "--sign",
        s(&t.root1.private),
        "--sign",
        s(&t.root2.private),
        "--sign",
        s(&t.root3.private),
    ])
    .ok();
    let targets_keys = ["--sign", s(&t.root1.private), "--sign", s(&t.root2.private)];
    airlock_run(&[&["trust", "revoke", "--root", s(&t.auth), "--key", s(&t.sec1.public)][..], &targets_keys].concat())
        .ok();
    assert_eq!(python_tuf(&dir).ok().stdout.trim(), "3 2 [('build', 1, 1), ('security', 1, 1)]");
    let shown = airlock_run(&["trust", "show", "--root", s(&t.auth), "--json"]).ok().json();
    assert_eq!((shown["root_version"].as_u64(), shown["targets_version"].as_u64()), (Some(3), Some(2)));
    let root_role = shown["top_level"].as_array().unwrap().iter().find(|r| r["name"] == "root").unwrap().clone();
    assert_eq!((root_role["threshold"].as_u64(), root_role["keys"].as_array().unwrap().len()), (Some(1), 2));

    // A tampered copy: a threshold lowered without the signatures to show for it.
    let tampered = t.path("tampered/trust");
    std::fs::create_dir_all(&tampered).unwrap();
    for f in ["1.root.json", "2.root.json", "3.root.json"] {
        std::fs::copy(dir.join(f), tampered.join(f)).unwrap();
    }
    let targets = std::fs::read_to_string(dir.join("targets.json")).unwrap();
    let targets = targets.replacen("\"threshold\": 1", "\"threshold\": 2", 1);
    std::fs::write(tampered.join("targets.json"), targets).unwrap();
    let refused = python_tuf(&tampered);
    assert_ne!(refused.code, 0, "python-tuf accepted a tampered targets.json: {}", refused.stdout);
    assert!(refused.stderr.contains("UnsignedMetadataError"), "{}", refused.stderr);
    let ours = airlock_run(&["trust", "show", "--root", s(&t.path("tampered"))]);
    assert_eq!(ours.code, 3, "{}", ours.stderr);
    assert!(ours.stderr.contains("targets.json") && ours.stderr.contains("signed by 0 of the 2"), "{}", ours.stderr);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python-tuf")]
fn a_2_of_2_root_needs_both_keys_and_a_site_accepts_exactly_the_next_version() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    // One root key of a 2-of-2 root cannot make version 2.
    let one = airlock_run(&[
        "trust",
        "rotate",
        "--root",
        s(&t.auth),
        "--add-root-key",
        s(&t.root3.public),
        "--sign",
        s(&t.root1.private),
    ]);
    assert_eq!(one.code, 2, "{}", one.stderr);
    assert!(one.stderr.contains("needs 2 signature(s) by root keys of root version 1"), "{}", one.stderr);
    assert!(!t.auth.join("trust/2.root.json").exists());
    for (add, signers) in
        [(&t.root3, vec![&t.root1, &t.root2, &t.root3]), (&t.sec2, vec![&t.root1, &t.root2, &t.root3, &t.sec2])]
    {
        let mut args = vec!["trust", "rotate", "--root", s(&t.auth), "--add-root-key", s(&add.public)];
        for k in signers {
            args.extend(["--sign", s(&k.private)]);
        }
        airlock_run(&args).ok();
    }
    let v = |n: u32| t.auth.join(format!("trust/{n}.root.json"));
    let update = |files: &[&Path]| {
        let mut args = vec!["trust".to_owned(), "update".to_owned(), "--root".to_owned(), s(&site).to_owned()];
        args.extend(files.iter().map(|f| s(f).to_owned()));
        run(airlock().args(&args))
    };
    // A skipped version.
    let skipped = update(&[&v(3)]).code(3);
    assert!(skipped.stderr.contains("accepts exactly version 2 next"), "{}", skipped.stderr);
    // Version 3 signed by its own keys only (the old root's signatures stripped): refused.
    let forged = t.path("3.root.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(v(3)).unwrap()).unwrap();
    let v2: serde_json::Value = serde_json::from_slice(&std::fs::read(v(2)).unwrap()).unwrap();
    let v2_root_keys = v2["signed"]["roles"]["root"]["keyids"].as_array().unwrap().clone();
    let kept: Vec<_> = doc["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|sig| !v2_root_keys.contains(&sig["keyid"]) || sig["keyid"] == v2_root_keys[2])
        .cloned()
        .collect();
    doc["signatures"] = serde_json::Value::Array(kept);
    std::fs::write(&forged, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    update(&[&v(2)]).ok();
    let forged_refused = update(&[&forged]).code(3);
    assert!(
        forged_refused.stderr.contains("signed by 1 of the 2 root key(s) of root version 2"),
        "{}",
        forged_refused.stderr
    );
    // The real version 3 is accepted; then version 2 again is a lower version, refused.
    update(&[&v(3)]).ok();
    let lower = update(&[&v(2)]).code(3);
    assert!(lower.stderr.contains("the site is at root version 3"), "{}", lower.stderr);
    assert_eq!(python_tuf(&site.join("trust")).ok().stdout.trim(), "3 1 [('build', 1, 1), ('security', 1, 2)]");
    // Planting an older root chain in place of the site's is refused: the state pins version 3.
    std::fs::remove_file(site.join("trust/3.root.json")).unwrap();
    let replayed = airlock_run(&["trust", "show", "--root", s(&site)]).code(3);
    assert!(replayed.stderr.contains("older than what this site has used"), "{}", replayed.stderr);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python-tuf")]
fn a_bundle_carrying_root_2_brings_a_site_at_root_1_up_to_date() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    let signers = ["--sign", s(&t.root1.private), "--sign", s(&t.root2.private), "--sign", s(&t.root3.private)];
    airlock_run(
        &[&["trust", "rotate", "--root", s(&t.auth), "--add-root-key", s(&t.root3.public)][..], &signers].concat(),
    )
    .ok();
    let bundle = t.bundle("1.0.0", &[&t.sec2], "", &["--trust-root", s(&t.auth)]);
    let listed =
        manifest_member(&bundle)["entries"].as_array().unwrap().iter().map(|e| e["path"].clone()).collect::<Vec<_>>();
    for carried in ["airlock/trust/1.root.json", "airlock/trust/2.root.json", "airlock/trust/targets.json"] {
        assert!(listed.contains(&serde_json::json!(carried)), "{listed:?}");
    }
    assert!(!site.join("trust/2.root.json").exists());
    let installed = airlock_run(&["install", s(&bundle), "--root", s(&site), "--json"]).ok().json();
    assert_eq!(installed["version"], "1.0.0");
    assert_eq!(
        std::fs::read(site.join("trust/2.root.json")).unwrap(),
        std::fs::read(t.auth.join("trust/2.root.json")).unwrap()
    );
    assert_eq!(python_tuf(&site.join("trust")).ok().stdout.trim(), "2 1 [('build', 1, 1), ('security', 1, 2)]");
    let used = record_trust(&site, "install");
    assert_eq!((used["root_version"].as_u64(), used["targets_version"].as_u64()), (Some(2), Some(1)), "{used}");
    let roles: Vec<_> =
        used["roles"].as_array().unwrap().iter().map(|r| r["role"].as_str().unwrap().to_owned()).collect();
    assert_eq!(roles, ["build", "security"]);
    // A node at root 1 applying from that site as its mirror catches up from the mirror's
    // current bundle (a bundle without debs: no package manager is involved).
    let node = t.site("node");
    let mirror = format!("file://{}/", s(&site));
    airlock_run(&["apply", &mirror, "--root", s(&node)]).ok();
    assert!(node.join("trust/2.root.json").exists());
    assert_eq!(record_trust(&node, "apply")["root_version"].as_u64(), Some(2));
    // `--trust` is not how a site with a trust root decides.
    let given = airlock_run(&["install", s(&bundle), "--root", s(&site), "--trust", s(&t.build.public)]).code(2);
    assert!(given.stderr.contains("has a trust root"), "{}", given.stderr);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python-tuf")]
fn a_revoked_key_no_longer_counts_at_install_nor_at_rollback_of_a_retained_bundle() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    let b1 = t.bundle("1.0.0", &[&t.sec1], "", &[]);
    let b2 = t.bundle("1.1.0", &[&t.sec2], "", &[]);
    let b3 = t.bundle("1.2.0", &[&t.sec1], "", &[]);
    let unsigned = t.bundle("1.3.0", &[], "", &[]);
    for b in [&b1, &b2] {
        airlock_run(&["install", s(b), "--root", s(&site)]).ok();
    }
    let missing = airlock_run(&["install", s(&unsigned), "--root", s(&site)]).code(3);
    assert!(missing.stderr.contains("signing role `security` not met"), "{}", missing.stderr);
    // The security team revokes sec1 (a lost laptop) and the site takes up the new targets.
    let old_targets = t.path("targets-1.json");
    std::fs::copy(t.auth.join("trust/targets.json"), &old_targets).unwrap();
    let signers = ["--sign", s(&t.root1.private), "--sign", s(&t.root2.private)];
    airlock_run(&[&["trust", "revoke", "--root", s(&t.auth), "--key", s(&t.sec1.public)][..], &signers].concat()).ok();
    airlock_run(&["trust", "update", "--root", s(&site), s(&t.auth.join("trust/targets.json"))]).ok();
    assert_eq!(python_tuf(&site.join("trust")).ok().stdout.trim(), "1 2 [('build', 1, 1), ('security', 1, 1)]");
    let before = snapshot(&site);
    let install = airlock_run(&["install", s(&b3), "--root", s(&site)]).code(3);
    assert!(install.stderr.contains("signing role `security` not met"), "{}", install.stderr);
    let verify = airlock_run(&["verify", s(&b3), "--root", s(&site)]).code(3);
    assert!(verify.stdout.contains("security"), "{}", verify.stdout);
    // The retained 1.0.0 met `security` only through sec1: rollback refuses it.
    let rollback = airlock_run(&["rollback", "--root", s(&site)]).code(3);
    assert!(rollback.stderr.contains("security"), "{}", rollback.stderr);
    let after = snapshot(&site);
    let changed: Vec<_> =
        after.keys().filter(|k| before.get(*k) != after.get(*k)).filter(|k| !k.starts_with("records")).collect();
    assert!(changed.is_empty(), "a refused install or rollback changed {changed:?}");
    // What sec2 co-signed still installs.
    let b4 = t.bundle("1.4.0", &[&t.sec2], "", &[]);
    airlock_run(&["install", s(&b4), "--root", s(&site)]).ok();
    assert_eq!(record_trust(&site, "install")["targets_version"].as_u64(), Some(2));
    // Putting the old targets.json back (it still names sec1) is a replay: refused.
    std::fs::copy(&old_targets, site.join("trust/targets.json")).unwrap();
    let replay = airlock_run(&["install", s(&b3), "--root", s(&site)]).code(3);
    assert!(replay.stderr.contains("replayed trust metadata is refused"), "{}", replay.stderr);
}

#[test]
fn a_site_whose_current_bundle_lost_its_signer_to_a_revocation_reports_the_policy_not_damage() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    let b1 = t.bundle("1.0.0", &[&t.sec1], "", &[]);
    airlock_run(&["install", s(&b1), "--root", s(&site)]).ok();
    let page = t.path("before.html");
    airlock_run(&["report", "--root", s(&site), "--out", s(&page)]).ok();
    assert!(!std::fs::read_to_string(&page).unwrap().contains("NOT VERIFIED"));
    let signers = ["--sign", s(&t.root1.private), "--sign", s(&t.root2.private)];
    airlock_run(&[&["trust", "revoke", "--root", s(&t.auth), "--key", s(&t.sec1.public)][..], &signers].concat()).ok();
    airlock_run(&["trust", "update", "--root", s(&site), s(&t.auth.join("trust/targets.json"))]).ok();

    // The page is still written, led by NOT VERIFIED naming the key and the targets version;
    // no verdict badge sits above it, and nothing calls the tree damaged. Exit 3.
    let page = t.path("after.html");
    let r = airlock_run(&["report", "--root", s(&site), "--out", s(&page), "--json"]).code(3);
    let policy = r.json()["site"]["check"]["policy"].as_str().unwrap_or_default().to_owned();
    // sec1's key id: the one signer when only its key is trusted (the build key is not).
    let sec1 = airlock_run(&["verify", s(&b1), "--trust", s(&t.sec1.public), "--json"]).code(3).json();
    let sec1 = sec1["signers"][0].as_str().unwrap()[..16].to_owned();
    assert!(policy.contains(&format!("key `{sec1}`")), "names the revoked key: {policy}");
    assert!(policy.contains("revoked") && policy.contains("targets version 2"), "{policy}");
    let html = std::fs::read_to_string(&page).unwrap();
    let body = &html[html.find("<body>").unwrap()..];
    assert!(body.find("id=\"not-verified\"").unwrap() < body.find("<h1").unwrap(), "{body}");
    assert!(!body.contains("data-verdict") && !body.contains("DAMAGED"), "{body}");
    assert!(body.contains("NOT TRUSTED NOW"), "{body}");
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs python-tuf")]
fn expired_metadata_and_an_expired_bundle_are_refused_unless_accepted_on_record() {
    let t = Trust::new();
    t.init(&t.auth, "1h").ok();
    let site = t.site("site");
    let b1 = t.bundle("1.0.0", &[&t.sec1], "", &[]);
    let stale = t.bundle("0.9.0", &[&t.sec1], "expires = \"2020-06-30\"\n", &[]);
    // Two hours later (the test clock moved ahead, not waited for): the metadata has expired.
    let later = |args: &[&str]| run(airlock().env("AIRLOCK_TEST_CLOCK_AHEAD", "7200").args(args));
    let refused = later(&["install", s(&b1), "--root", s(&site)]).code(3);
    assert!(
        refused.stderr.contains("expired at") && refused.stderr.contains("airlock trust renew"),
        "{}",
        refused.stderr
    );
    assert!(!site.join("current").exists());
    later(&["install", s(&b1), "--root", s(&site), "--allow-expired", "--reason", "CHG-1 renewal pending"]).ok();
    let waiver = &record_trust(&site, "install")["expired_accepted"];
    assert_eq!(waiver["reason"], "CHG-1 renewal pending");
    assert_eq!(waiver["expired"].as_array().unwrap().len(), 2, "root and targets: {waiver}");
    // Renewed, the site is usable without the waiver; an expired bundle is still refused.
    let signers = ["--sign", s(&t.root1.private), "--sign", s(&t.root2.private)];
    airlock_run(&[&["trust", "renew", "--root", s(&site), "--expires", "90d"][..], &signers].concat()).ok();
    let stale_refused = airlock_run(&["install", s(&stale), "--root", s(&site), "--allow-downgrade"]).code(3);
    assert!(stale_refused.stderr.contains("demo 0.9.0 expired at 2020-07-01T00:00:00Z"), "{}", stale_refused.stderr);
    let verify = airlock_run(&["verify", s(&stale), "--root", s(&site), "--json"]).code(3);
    assert!(verify.stdout.contains("expired at"), "{}", verify.stdout);
    airlock_run(&[
        "install",
        s(&stale),
        "--root",
        s(&site),
        "--allow-downgrade",
        "--allow-expired",
        "--reason",
        "lab replay",
    ])
    .ok();
    let waiver = &record_trust(&site, "install")["expired_accepted"];
    assert_eq!(waiver["expired"], serde_json::json!(["bundle demo 0.9.0 expired at 2020-07-01T00:00:00Z"]));
    assert_eq!(python_tuf(&site.join("trust")).ok().stdout.trim(), "2 2 [('build', 1, 1), ('security', 1, 2)]");
}

/// `evil`'s trust root (its own root keys and roles) copied over `site/trust/`: what someone
/// with write access to the root and no key of the site's can plant.
fn plant(evil: &Trust, site: &Path) {
    std::fs::remove_dir_all(site.join("trust")).unwrap();
    std::fs::create_dir_all(site.join("trust")).unwrap();
    for f in ["1.root.json", "targets.json"] {
        std::fs::copy(evil.auth.join("trust").join(f), site.join("trust").join(f)).unwrap();
    }
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn a_trust_root_planted_over_a_provisioned_one_is_refused_though_no_trust_command_ever_ran() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    // Provisioned as the docs say (the metadata copied in), then used: no `trust` command ran,
    // and the bundle carried no metadata.
    let site = t.site("site");
    airlock_run(&["install", s(&t.bundle("1.0.0", &[&t.sec1], "", &[])), "--root", s(&site)]).ok();
    assert!(
        std::fs::read_to_string(site.join("state.json")).unwrap().contains("\"anchor\""),
        "the first command that read the trust root pinned it"
    );
    let evil = Trust::new();
    evil.init(&evil.auth, "30d").ok();
    plant(&evil, &site);
    let bad = evil.bundle("1.1.0", &[&evil.sec1], "", &[]);
    for verb in ["install", "apply"] {
        let r = airlock_run(&[verb, s(&bad), "--root", s(&site)]).code(3);
        assert!(r.stderr.contains("is not the trust root this site was provisioned with"), "{verb}: {}", r.stderr);
    }
    let status = airlock_run(&["status", "--root", s(&site), "--json"]).ok().json();
    assert_eq!(status["current"]["version"], "1.0.0");
    // Refused before the root's lock, and on record all the same.
    let refusals: Vec<String> = std::fs::read_dir(site.join("records"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .filter(|r| r.contains("\"refused\"") && r.contains("not the trust root this site was provisioned with"))
        .collect();
    assert_eq!(refusals.len(), 2, "an install and an apply refusal on record");
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn deleting_the_trust_root_does_not_let_trust_keys_back_in() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    airlock_run(&["install", s(&t.bundle("1.0.0", &[&t.sec1], "", &[])), "--root", s(&site)]).ok();
    std::fs::remove_dir_all(site.join("trust")).unwrap();
    // A bundle the attacker signed with a key of their own, offered with `--trust`.
    let evil = Trust::new();
    let bad = evil.bundle("1.1.0", &[], "", &[]);
    for verb in ["install", "apply"] {
        let r = airlock_run(&[verb, s(&bad), "--root", s(&site), "--trust", s(&evil.build.public)]).code(3);
        assert!(r.stderr.contains("trust") && r.stderr.contains("root version 1"), "{verb}: {}", r.stderr);
    }
    let status = airlock_run(&["status", "--root", s(&site), "--json"]).ok().json();
    assert_eq!(status["current"]["version"], "1.0.0");
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn a_mirror_that_serves_every_root_version_cannot_hold_a_node_nor_fill_its_memory() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let mirror = t.site("mirror");
    let bundle = t.bundle("1.0.0", &[&t.sec1], "", &[]);
    airlock_run(&["install", s(&bundle), "--root", s(&mirror), "--role", "mirror"]).ok();
    // The mirror answers 200 (1 MiB each) for 2.root.json, 3.root.json, … without end.
    let count = t.path("root-requests.txt");
    let server = http::HttpServer::spawn(&mirror, |port| {
        vec![helper("endless_roots.py"), port.to_string(), count.display().to_string()]
    });
    let node = t.site("node");
    // `timeout`: code that reads "until a 404" never ends here (11 GB in 45 s was seen); 120 s
    // is no speed target, only the bound after which the attack has worked.
    let probes = repo("testdata/probes/mi300x");
    let path = format!("{}:{}", probes.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let r = run(std::process::Command::new("timeout")
        .env("PATH", path)
        .env("AIRLOCK_HOST_ROOT", probes.join("root"))
        .args(["120", env!("CARGO_BIN_EXE_airlock"), "apply", &format!("{}/", server.url), "--root", s(&node)]));
    let asked = std::fs::read_to_string(&count).unwrap_or_default().lines().count();
    assert_ne!(r.code, 124, "the apply never ended: {asked} root versions asked for");
    assert!(asked <= 1, "it stops at the first root version that does not verify: {asked} asked for");
    assert_eq!(r.code, 0, "the node's own trust root decides: {}", r.stderr);
}

#[test]
fn metadata_a_command_is_given_is_read_bounded_and_a_symlinked_trust_dir_is_refused() {
    let t = Trust::new();
    t.init(&t.auth, "30d").ok();
    let site = t.site("site");
    // `trust update` with a link to /dev/zero: read forever on the old code.
    let zero = t.path("targets.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let r = run(std::process::Command::new("timeout").args(["60", env!("CARGO_BIN_EXE_airlock")]).args([
        "trust",
        "update",
        "--root",
        s(&site),
        s(&zero),
    ]));
    assert_ne!(r.code, 124, "trust update read /dev/zero without end");
    assert!(r.stderr.contains("not a regular file"), "{}", r.stderr);
    // A site whose trust/ is a symbolic link (to a directory someone else controls): refused.
    let elsewhere = t.path("elsewhere");
    std::fs::rename(site.join("trust"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, site.join("trust")).unwrap();
    let bundle = t.bundle("1.0.0", &[&t.sec1], "", &[]);
    let r = airlock_run(&["install", s(&bundle), "--root", s(&site)]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
}

#[test]
fn a_sites_sigstore_root_is_a_target_of_its_trust_root_checked_and_taken_up_like_the_rest() {
    let tr = Trust::new();
    tr.init(&tr.auth, "1y").ok();
    // A private Sigstore instance's bundle (a vector of the conformance suite, its own root).
    let case = repo("testdata/sigstore-conformance/bundle-verify/intoto-with-custom-trust-root");
    let identity = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
    let verify = |root: &Path| {
        airlock_run(&[
            "verify-blob",
            "--bundle",
            s(&case.join("bundle.sigstore.json")),
            "--identity",
            identity,
            "--issuer",
            "https://token.actions.githubusercontent.com",
            "--root",
            s(root),
            s(&case.join("artifact")),
        ])
    };
    // Without a Sigstore target the site uses the public-good root, which does not know it.
    let site = tr.site("site");
    let r = verify(&site);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("public-good"), "{}", r.stderr);

    // The security team sets the private instance's root as a target, signed like any change.
    let set = airlock_run(&[
        "trust",
        "sigstore-root",
        "--root",
        s(&tr.auth),
        s(&case.join("trusted_root.json")),
        "--sign",
        s(&tr.root1.private),
        "--sign",
        s(&tr.root2.private),
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(set["targets_version"], 2, "{set}");
    assert_eq!(set["sigstore_root"]["hashes"]["sha256"], sha256_file(&case.join("trusted_root.json")), "{set}");
    // Not a trusted root at all: refused before anything is signed.
    let r = airlock_run(&[
        "trust",
        "sigstore-root",
        "--root",
        s(&tr.auth),
        s(&case.join("artifact")),
        "--sign",
        s(&tr.root1.private),
    ]);
    assert_eq!(r.code, 3, "{}", r.stderr);

    // The site takes it up with `trust update`: the new targets need the file they list.
    let targets = tr.auth.join("trust/targets.json");
    let r = airlock_run(&["trust", "update", "--root", s(&site), s(&targets)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("sigstore/trusted_root.json") && r.stderr.contains("trusted_root.json"), "{}", r.stderr);
    let wrong = repo("testdata/sigstore-conformance/bundle-verify/bundle-with-sct-with-extensions/trusted_root.json");
    let staged = tr.path("wrong/trusted_root.json");
    std::fs::create_dir_all(staged.parent().unwrap()).unwrap();
    std::fs::copy(&wrong, &staged).unwrap();
    let r = airlock_run(&["trust", "update", "--root", s(&site), s(&targets), s(&staged)]);
    assert_eq!(r.code, 3, "another root than the one listed: {}", r.stderr);
    airlock_run(&["trust", "update", "--root", s(&site), s(&targets), s(&case.join("trusted_root.json"))]).ok();
    let r = verify(&site);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("verified, signed by"), "{}", r.stdout);

    // An edited root on the site's disk is refused, naming the file and both digests.
    let on_disk = site.join("trust/targets/sigstore/trusted_root.json");
    let mut bytes = std::fs::read(&on_disk).unwrap();
    bytes.extend_from_slice(b"\n");
    std::fs::write(&on_disk, &bytes).unwrap();
    let r = verify(&site);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("trust/targets/sigstore/trusted_root.json") && r.stderr.contains("expected"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bundle_carries_the_sigstore_root_with_the_targets_that_list_it_and_a_site_takes_both_up() {
    let tr = Trust::new();
    tr.init(&tr.auth, "1y").ok();
    let site = tr.site("site");
    let custom = repo("testdata/sigstore-conformance/bundle-verify/intoto-with-custom-trust-root/trusted_root.json");
    let signers = ["--sign", s(&tr.root1.private), "--sign", s(&tr.root2.private)];
    airlock_run(&[&["trust", "sigstore-root", "--root", s(&tr.auth), s(&custom)][..], &signers].concat()).ok();
    let bundle = tr.bundle("1.0.0", &[&tr.sec2], "", &["--trust-root", s(&tr.auth)]);
    let listed =
        manifest_member(&bundle)["entries"].as_array().unwrap().iter().map(|e| e["path"].clone()).collect::<Vec<_>>();
    assert!(listed.contains(&serde_json::json!("airlock/trust/trusted_root.json")), "{listed:?}");
    airlock_run(&["install", s(&bundle), "--root", s(&site), "--json"]).ok();
    assert_eq!(
        std::fs::read(site.join("trust/targets/sigstore/trusted_root.json")).unwrap(),
        std::fs::read(&custom).unwrap()
    );
    let shown = airlock_run(&["trust", "show", "--root", s(&site)]).ok().stdout;
    assert!(shown.contains("Sigstore trusted root: sigstore/trusted_root.json"), "{shown}");
}

#[test]
fn a_site_checks_upstream_signatures_again_under_its_own_sigstore_root() {
    let tr = Trust::new();
    tr.init(&tr.auth, "1y").ok();
    // A private Sigstore instance signs an upstream file (tests/sigstore_instance.py).
    let inst = tr.path("instance");
    let upstream = tr.path("upstream/vendor-fw.bin");
    std::fs::create_dir_all(upstream.parent().unwrap()).unwrap();
    std::fs::write(&upstream, pattern(20_000, 9)).unwrap();
    let identity = "https://git.example.org/vendor/fw/.ci/release.yml@refs/tags/v3";
    let issuer = "https://ci.example.org/oidc";
    run(std::process::Command::new("python3").args([
        s(&repo("tests/sigstore_instance.py")),
        s(&inst),
        "--identity",
        identity,
        "--issuer",
        issuer,
        "--file",
        s(&upstream),
    ]))
    .ok();
    let root = inst.join("trusted_root.json");
    // Both sites are provisioned at targets version 1: no Sigstore root but the public-good one.
    let (site, other) = (tr.site("site"), tr.site("other"));
    let signers = ["--sign", s(&tr.root1.private), "--sign", s(&tr.root2.private)];
    airlock_run(&[&["trust", "sigstore-root", "--root", s(&tr.auth), s(&root)][..], &signers].concat()).ok();
    let extra = format!(
        "\n[[file]]\nname = \"vendor-fw.bin\"\nsource = \"{}\"\nkind = \"firmware\"\nsigstore_bundle = \"{}\"\n\
         verify = {{ identity = \"{identity}\", issuer = \"{issuer}\" }}\n",
        s(&upstream),
        s(&inst.join("bundle.sigstore.json"))
    );
    // Built with the site's trust metadata carried: the site takes up the Sigstore root with it.
    let carried = tr.bundle("1.0.0", &[&tr.sec2], &extra, &["--trusted-root", s(&root), "--trust-root", s(&tr.auth)]);
    let installed = airlock_run(&["install", s(&carried), "--root", s(&site), "--json"]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert!(site.join("trust/targets/sigstore/trusted_root.json").is_file());
    let pack = airlock_run(&["report", "--root", s(&site), "--json"]).ok().json();
    let line = pack["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "vendor-fw.bin").unwrap().clone();
    let said = line["upstream"].as_str().unwrap();
    assert!(said.starts_with(&format!("signed by {identity} ({issuer}), logged at 20")), "{pack}");
    assert!(said.contains("the site's `sigstore/trusted_root.json`"), "{said}");
    let unsigned = pack["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "notes.txt").unwrap().clone();
    assert_eq!(unsigned["upstream"], "unsigned upstream", "{pack}");
    // A command line cannot hand a site another Sigstore root.
    let r = airlock_run(&["install", s(&carried), "--root", s(&site), "--trusted-root", s(&root)]);
    assert_eq!(r.code, 2, "{}", r.stderr);

    // A site whose Sigstore root is the public-good one refuses the same content: nothing is
    // activated, and the refusal names the artifact and the root it was checked under.
    let bare = tr.bundle("1.0.1", &[&tr.sec2], &extra, &["--trusted-root", s(&root)]);
    let r = airlock_run(&["install", s(&bare), "--root", s(&other)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("vendor-fw.bin") && r.stderr.contains("public-good"), "{}", r.stderr);
    assert!(!other.join("current").exists(), "nothing activated");
}

/// Issue 75: an independent rebuild on a second build host co-signs only the same bundle, and a
/// site whose `rebuilders` role needs one takes the bundle only with such a co-signature; a
/// rebuild from an edited lock is refused naming the member that differs, and co-signs nothing.
#[test]
fn a_rebuild_from_the_same_lock_co_signs_and_one_from_an_edited_lock_is_refused_naming_the_member() {
    let t = tempfile::tempdir().unwrap();
    let keys = t.path().join("keys");
    let [root, build_key, r1, r2] = ["root", "build", "r1", "r2"].map(|n| keygen(&keys, n));
    let first = project(&t.path().join("host-a"), "1.0.0");
    let bundle = t.path().join("demo.airlock");
    build(&first, &build_key, &bundle).ok();
    let site = t.path().join("site");
    airlock_run(&[
        "trust",
        "init",
        "--root",
        s(&site),
        "--root-key",
        s(&root.public),
        "--role",
        &format!("build={}:1", s(&build_key.public)),
        "--role",
        &format!("rebuilders={},{}:1", s(&r1.public), s(&r2.public)),
        "--expires",
        "1y",
        "--sign",
        s(&root.private),
    ])
    .ok();
    let r = airlock_run(&["install", s(&bundle), "--root", s(&site)]).code(3);
    assert!(r.stderr.contains("rebuilders"), "no rebuild yet: {}", r.stderr);

    // A second host: the same spec and lock, its own cache and key.
    let copy = |name: &str| {
        let dir = t.path().join(name);
        run(std::process::Command::new("cp").args(["-r", s(&first.dir), s(&dir)])).ok();
        dir
    };
    let second = copy("host-b");
    let rebuild = |dir: &Path, key: &Keys| {
        let cache = dir.join(".cache");
        airlock_run(&[
            "rebuild",
            s(&bundle),
            "--spec",
            s(&dir.join("airlock.toml")),
            "--key",
            s(&key.private),
            "--cache",
            s(&cache),
            "--json",
        ])
    };
    let done = rebuild(&second, &r1).ok().json();
    assert_eq!(done["identical"], true, "{done}");
    let cosig = PathBuf::from(done["signature"].as_str().unwrap());
    assert!(cosig.exists());
    airlock_run(&["install", s(&bundle), "--root", s(&site)]).ok();
    // The approval pack says who rebuilt: each signature with the role its key signs for.
    let pack = airlock_run(&["report", "--root", s(&site), "--json"]).ok().json();
    let roles: Vec<String> = pack["signatures"]["checked"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["roles"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    assert!(roles.contains(&"rebuilders".to_owned()) && roles.contains(&"build".to_owned()), "{pack}");

    // A third host whose lock pins other release notes: refused, naming the member.
    let third = copy("host-c");
    std::fs::write(third.join("notes.txt"), "release notes, edited\n").unwrap();
    airlock_run(&["lock", s(&third.join("airlock.toml"))]).ok();
    let r = rebuild(&third, &r2).code(3);
    assert!(
        r.stderr.contains("not the same bundle")
            && r.stderr.contains("notes.txt")
            && r.stderr.contains("the lock differs"),
        "{}",
        r.stderr
    );
    let sigs: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sig"))
        .collect();
    assert_eq!(sigs.len(), 1, "only the identical rebuild co-signed: {sigs:?}");
}
