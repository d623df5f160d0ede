//! Getting bundles onto media: split volumes (`build --split-size`, read back by `verify`,
//! `inspect`, `install` from the parts file or the first part; joined with `cat`) and delta
//! bundles (`build --base`, `--base-lock`; install takes the omitted members from the base
//! retained on the site, and ends in the state a full bundle gives).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// A project whose firmware file is `fw_len` bytes that do not compress, so that parts cut
/// through it.
fn media_project(dir: &Path, version: &str, fw_len: usize) -> Project {
    let p = project(dir, version);
    std::fs::write(dir.join("fw/board.bin"), pattern(fw_len, 3)).unwrap();
    p
}

fn build_args(p: &Project, keys: &Keys, out: &Path, extra: &[&str]) -> Run {
    run(airlock()
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .env("AIRLOCK_CACHE", p.dir.join("cache"))
        .args(["build", s(&p.spec), "--key", s(&keys.private), "--out", s(out), "--json"])
        .args(extra))
}

fn part(bundle: &Path, n: usize) -> PathBuf {
    PathBuf::from(format!("{}.{n:03}", bundle.display()))
}

fn parts_file(bundle: &Path) -> PathBuf {
    PathBuf::from(format!("{}.parts.json", bundle.display()))
}

fn cat(parts: &[PathBuf], out: &Path) {
    let mut joined = Vec::new();
    for p in parts {
        joined.extend(std::fs::read(p).unwrap());
    }
    std::fs::write(out, joined).unwrap();
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, checked step by step")]
fn a_split_bundle_verifies_inspects_and_installs_from_its_parts_and_joins_with_cat() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = media_project(&t.path().join("proj"), "1.0.0", 350_000);
    let whole = t.path().join("whole/demo.airlock");
    std::fs::create_dir_all(whole.parent().unwrap()).unwrap();
    build_args(&p, &keys, &whole, &[]).ok();
    let bundle = t.path().join("media/demo.airlock");
    std::fs::create_dir_all(bundle.parent().unwrap()).unwrap();
    // 100 KiB parts cut through the 350 kB firmware member.
    let built = build_args(&p, &keys, &bundle, &["--split-size", "100K"]).ok().json();
    let listed = built["parts"].as_array().unwrap();
    assert_eq!(listed.len(), 4, "{built:#}");
    assert_eq!(built["bundle"], s(&parts_file(&bundle)));
    assert!(!bundle.exists(), "no single file is written");
    let parts: Vec<PathBuf> = (1..=4).map(|n| part(&bundle, n)).collect();
    for (i, p) in parts.iter().enumerate() {
        let size = std::fs::metadata(p).unwrap().len();
        assert_eq!(listed[i]["size"], size);
        assert_eq!(listed[i]["sha256"], sha256_file(p).as_str());
        if i < 3 {
            assert_eq!(size, 100 * 1024);
        }
    }
    assert!(!part(&bundle, 5).exists());

    // The parts file is signed like the manifest: openssl checks it with the public key.
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(parts_file(&bundle)).unwrap()).unwrap();
    assert_eq!(doc["schema"], "airlock.parts/v1");
    assert_eq!(schema_errors(&validator("airlock.parts.v1.schema.json"), &doc), Vec::<String>::new());
    assert_eq!(doc["bundle"], "demo.airlock");
    let sig = PathBuf::from(format!("{}.sig", parts_file(&bundle).display()));
    let der = t.path().join("parts.sig.der");
    std::fs::write(&der, base64_decode(&std::fs::read_to_string(&sig).unwrap())).unwrap();
    assert!(openssl_verify(&keys.public, &der, &parts_file(&bundle)).ok().stdout.contains("Verified OK"));

    // Joined with cat, the parts are the ordinary bundle, byte for byte.
    let joined = t.path().join("joined.airlock");
    cat(&parts, &joined);
    assert_eq!(sha256_file(&joined), sha256_file(&whole), "split and whole builds write the same bytes");
    assert_eq!(doc["sha256"], sha256_file(&joined).as_str());
    assert_eq!(doc["bytes"], std::fs::metadata(&joined).unwrap().len());

    // verify, inspect, sbom accept the parts file and the first part.
    for named in [parts_file(&bundle), part(&bundle, 1)] {
        let v = airlock_run(&["verify", s(&named), "--trust", s(&keys.public), "--json"]).ok().json();
        assert_eq!(v["verified"], true, "{v:#}");
        assert_eq!(v["parts"]["count"], 4);
        assert_eq!(v["manifest_sha256"], doc["manifest_sha256"]);
        let i = airlock_run(&["inspect", s(&named), "--json"]).ok().json();
        assert_eq!(i["manifest_sha256"], doc["manifest_sha256"]);
        assert_eq!(i["parts"]["parts_file"]["parts"].as_array().unwrap().len(), 4);
    }
    let human = airlock_run(&["verify", s(&part(&bundle, 1)), "--trust", s(&keys.public)]).ok().stdout;
    assert!(human.contains("read from 4 parts"), "{human}");
    let human = airlock_run(&["inspect", s(&parts_file(&bundle))]).ok().stdout;
    assert!(human.contains("parts:       4 of up to 102400 bytes"), "{human}");
    let sbom = t.path().join("sbom.json");
    airlock_run(&["sbom", s(&part(&bundle, 1)), "--out", s(&sbom)]).ok();
    // A later part is not where a bundle starts: say which to give.
    let later = airlock_run(&["verify", s(&part(&bundle, 2)), "--trust", s(&keys.public)]).code(1);
    assert!(later.stderr.contains("is part 2 of a split bundle: give its first part"), "{}", later.stderr);

    // A co-signature of a split bundle sits beside the bundle's name, where readers look.
    let security = keygen(&t.path().join("keys"), "security");
    airlock_run(&["sign", s(&parts_file(&bundle)), "--key", s(&security.private), "--trust", s(&keys.public)]).ok();
    let both = ["--trust", s(&keys.public), "--trust", s(&security.public), "--threshold", "2"];
    airlock_run(&[&["verify", s(&part(&bundle, 1))][..], &both].concat()).ok();

    // Install from the parts; the site keeps the joined bundle.
    let root = t.path().join("site");
    let installed =
        airlock_run(&["install", s(&parts_file(&bundle)), "--trust", s(&keys.public), "--root", s(&root), "--json"])
            .ok()
            .json();
    assert_eq!(installed["name"], "demo");
    assert_eq!(std::fs::read(root.join("current/files/board.bin")).unwrap(), pattern(350_000, 3));
    assert_eq!(sha256_file(&root.join("current/bundle.airlock")), sha256_file(&whole));
    // The joined file installs as well, as the same bundle.
    let again =
        airlock_run(&["install", s(&joined), "--trust", s(&keys.public), "--root", s(&root), "--json"]).ok().json();
    assert_eq!(again["id"], installed["id"]);

    // Re-splitting to the same path with larger parts removes the stale ones.
    let built = build_args(&p, &keys, &bundle, &["--split-size", "200K"]).ok().json();
    assert_eq!(built["parts"].as_array().unwrap().len(), 2);
    assert!(part(&bundle, 2).exists() && !part(&bundle, 3).exists() && !part(&bundle, 4).exists());
    airlock_run(&["verify", s(&parts_file(&bundle)), "--trust", s(&keys.public)]).ok();
}

#[test]
fn split_sizes_are_read_like_split_does_and_a_fat32_trap_is_named() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = media_project(&t.path().join("proj"), "1.0.0", 10_000);
    let out = t.path().join("x.airlock");
    let bad = build_args(&p, &keys, &out, &["--split-size", "4Q"]).code(2);
    assert!(bad.stderr.contains("unknown unit `Q`"), "{}", bad.stderr);
    let small = build_args(&p, &keys, &out, &["--split-size", "100"]).code(2);
    assert!(small.stderr.contains("at least 4096 bytes"), "{}", small.stderr);
    let fat = build_args(&p, &keys, &out, &["--split-size", "4G"]).ok();
    assert!(fat.stderr.contains("one byte too large for FAT32"), "{}", fat.stderr);
    assert_eq!(fat.json()["parts"].as_array().unwrap().len(), 1, "a small bundle is one part");
}

/// A bundle split in four 100 KiB parts, and the same release built as version 1.0.1 (other
/// bytes from the first part on) split the same way.
struct Split {
    t: tempfile::TempDir,
    keys: Keys,
    bundle: PathBuf,
    other: PathBuf,
    root: PathBuf,
}

fn split_pair() -> Split {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let mut outs = Vec::new();
    for version in ["1.0.0", "1.0.1"] {
        let p = media_project(&t.path().join(version), version, 350_000);
        let out = t.path().join(version).join("demo.airlock");
        build_args(&p, &keys, &out, &["--split-size", "100K"]).ok();
        outs.push(out);
    }
    let root = t.path().join("site");
    let other = outs.pop().unwrap();
    Split { bundle: outs.pop().unwrap(), other, keys, root, t }
}

impl Split {
    /// `verify` and `install` both refuse with exit 3, naming `needle`; the site is untouched.
    fn refused(&self, needle: &str) {
        let pf = parts_file(&self.bundle);
        let v = airlock_run(&["verify", s(&pf), "--trust", s(&self.keys.public)]).code(3);
        assert!(v.stdout.contains(needle) || v.stderr.contains(needle), "{needle}:\n{}\n{}", v.stdout, v.stderr);
        let json = airlock_run(&["verify", s(&pf), "--trust", s(&self.keys.public), "--json"]).code(3).json();
        assert_eq!(json["verified"], false);
        let i = airlock_run(&["install", s(&pf), "--trust", s(&self.keys.public), "--root", s(&self.root)]).code(3);
        assert!(i.stderr.contains(needle), "{needle}:\n{}", i.stderr);
        assert_nothing_installed(&self.root);
    }
}

#[test]
fn a_missing_truncated_swapped_or_foreign_part_is_named_before_anything_is_read() {
    let x = split_pair();
    let (b, p2, p3) = (&x.bundle, part(&x.bundle, 2), part(&x.bundle, 3));
    let aside = x.t.path().join("aside");

    std::fs::rename(&p3, &aside).unwrap();
    x.refused("part 3 of 4 `");
    x.refused("demo.airlock.003` is missing");
    std::fs::rename(&aside, &p3).unwrap();

    // Parts 2 and 3 swapped (same size): part 2 begins like part 3.
    std::fs::rename(&p2, &aside).unwrap();
    std::fs::rename(&p3, &p2).unwrap();
    std::fs::rename(&aside, &p3).unwrap();
    x.refused("part 2 of 4");
    x.refused("it begins like part 3 of 4: parts swapped or renamed?");
    std::fs::rename(&p2, &aside).unwrap();
    std::fs::rename(&p3, &p2).unwrap();
    std::fs::rename(&aside, &p3).unwrap();

    // The last part cut short, as by an interrupted copy.
    let last = part(b, 4);
    let bytes = std::fs::read(&last).unwrap();
    std::fs::write(&last, &bytes[..bytes.len() - 10]).unwrap();
    x.refused("truncated: copied incompletely?");
    std::fs::write(&last, &bytes).unwrap();

    // Part 2 of another build of the release.
    let own = std::fs::read(&p2).unwrap();
    std::fs::copy(part(&x.other, 2), &p2).unwrap();
    x.refused("is from another bundle or damaged");
    std::fs::write(&p2, &own).unwrap();

    // Damage past the first 64 KiB: found when the part has been read whole.
    let mut damaged = own.clone();
    damaged[90_000] ^= 0x55;
    std::fs::write(&p2, &damaged).unwrap();
    x.refused("part 2 of 4");
    let v = airlock_run(&["verify", s(&parts_file(b)), "--trust", s(&x.keys.public)]).code(3);
    assert!(v.stdout.contains("is damaged: sha256 expected"), "{}", v.stdout);
    std::fs::write(&p2, &own).unwrap();

    // A parts file altered after signing (its count edited) no longer verifies.
    let pf = parts_file(b);
    let text = std::fs::read_to_string(&pf).unwrap();
    std::fs::write(&pf, text.replacen("\"part_size\": 102400", "\"part_size\": 102401", 1)).unwrap();
    x.refused("does not verify with any trusted key");
    std::fs::write(&pf, &text).unwrap();

    airlock_run(&["verify", s(&pf), "--trust", s(&x.keys.public)]).ok();
    airlock_run(&["install", s(&pf), "--trust", s(&x.keys.public), "--root", s(&x.root)]).ok();
}

/// A release of the demo project with a 500 kB weights file shared by every version, and,
/// when `changelog`, one more file.
fn release(dir: &Path, version: &str, changelog: bool) -> Project {
    let p = media_project(dir, version, 350_000);
    std::fs::write(dir.join("weights.bin"), pattern(500_000, 9)).unwrap();
    let mut spec = std::fs::read_to_string(&p.spec).unwrap();
    spec.push_str("\n[[file]]\nname = \"weights.bin\"\nsource = \"weights.bin\"\n");
    if changelog {
        std::fs::write(dir.join("changelog.txt"), format!("what changed in {version}\n")).unwrap();
        spec.push_str("\n[[file]]\nname = \"changelog.txt\"\nsource = \"changelog.txt\"\nkind = \"document\"\n");
    }
    std::fs::write(&p.spec, spec).unwrap();
    p
}

/// The tree `current` points at, by relative path, without what differs between a delta and
/// the full bundle of the same release by design: the bundle file, its manifest, signature
/// and provenance (a delta's manifest marks its `from_base` entries).
fn current_tree(root: &Path) -> std::collections::BTreeMap<PathBuf, String> {
    let dir = root.join(std::fs::read_link(root.join("current")).unwrap());
    let by_design =
        ["bundle.airlock", "airlock/manifest.json", "airlock/manifest.json.sig", "airlock/provenance.dsse.json"];
    snapshot(&dir)
        .into_iter()
        .map(|(p, what)| (p.strip_prefix(&dir).unwrap().to_owned(), what))
        .filter(|(p, _)| !by_design.iter().any(|d| p == Path::new(d)))
        .collect()
}

fn install(bundle: &Path, keys: &Keys, root: &Path, extra: &[&str]) -> Run {
    run(airlock().args(["install", s(bundle), "--trust", s(&keys.public), "--root", s(root), "--json"]).args(extra))
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, checked step by step")]
fn a_delta_installs_over_its_base_to_the_state_the_full_bundle_gives() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let v1 = t.path().join("demo-1.0.0.airlock");
    build_args(&release(&t.path().join("r1"), "1.0.0", false), &keys, &v1, &[]).ok();
    let p2 = release(&t.path().join("r2"), "1.1.0", true);
    let full = t.path().join("demo-1.1.0.airlock");
    build_args(&p2, &keys, &full, &[]).ok();
    let delta = t.path().join("demo-1.1.0-delta.airlock");
    let built = build_args(&p2, &keys, &delta, &["--base", s(&v1)]).ok().json();
    assert_eq!(built["from_base"], 2, "{built:#}");

    // Smaller by the shared bytes (which do not compress).
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let shared = 350_000 + 500_000;
    assert!(size(&full) - size(&delta) >= shared * 99 / 100, "full {} delta {}", size(&full), size(&delta));
    assert!(size(&delta) < 20_000, "{}", size(&delta));

    let base = airlock_run(&["inspect", s(&v1), "--json"]).ok().json();
    let inspected = airlock_run(&["inspect", s(&delta), "--json"]).ok().json();
    assert_eq!(inspected["base"]["manifest_sha256"], base["manifest_sha256"]);
    assert_eq!(inspected["base"]["name"], "demo");
    assert_eq!(inspected["base"]["version"], "1.0.0");
    assert_eq!(inspected["from_base"], serde_json::json!({ "entries": 2, "bytes": shared }));
    let held: Vec<&serde_json::Value> =
        inspected["entries"].as_array().unwrap().iter().filter(|e| e["from_base"] == true).collect();
    assert_eq!(held.len(), 2);
    let manifest = manifest_member(&delta);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let human = airlock_run(&["inspect", s(&delta)]).ok().stdout;
    assert!(human.contains("(from base)") && human.contains("left to the base demo 1.0.0"), "{human}");
    // The SBOM and provenance describe the whole release, not what the delta carries.
    let (sbom_full, sbom_delta) = (t.path().join("full.cdx.json"), t.path().join("delta.cdx.json"));
    airlock_run(&["sbom", s(&full), "--out", s(&sbom_full)]).ok();
    airlock_run(&["sbom", s(&delta), "--out", s(&sbom_delta)]).ok();
    assert_eq!(std::fs::read(&sbom_full).unwrap(), std::fs::read(&sbom_delta).unwrap());
    let prov = airlock_run(&["provenance", s(&delta), "--trust", s(&keys.public)]).ok().json();
    let subjects: Vec<&str> = prov["subject"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert!(subjects.iter().any(|n| n.contains("weights.bin")), "{subjects:?}");
    assert_eq!(prov["predicate"]["buildDefinition"]["externalParameters"]["base"]["version"], "1.0.0");

    // The delta verifies on its own; what it leaves out is said.
    let verified = airlock_run(&["verify", s(&delta), "--trust", s(&keys.public), "--json"]).ok().json();
    assert_eq!((verified["verified"].clone(), verified["from_base"].clone()), (true.into(), 2.into()));
    let human = airlock_run(&["verify", s(&delta), "--trust", s(&keys.public)]).ok().stdout;
    assert!(human.contains("delta: 2 entries (850000 bytes) are not in this bundle"), "{human}");
    // diff between a delta and its base.
    let diff = airlock_run(&["diff", s(&v1), s(&delta), "--json"]).ok().json();
    let added: Vec<&str> = diff["added"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(added, ["changelog.txt"], "{diff:#}");

    // A site without the base refuses the delta, naming the base it needs.
    let empty_site = t.path().join("empty-site");
    let refused = install(&delta, &keys, &empty_site, &[]).code(3);
    let id = &base["id"].as_str().unwrap();
    assert!(refused.stderr.contains("demo 1.0.0") && refused.stderr.contains(id), "{}", refused.stderr);
    assert_nothing_installed(&empty_site);

    // Full 1.0.0 then the delta gives what the full 1.1.0 gives.
    let (a, b) = (t.path().join("site-a"), t.path().join("site-b"));
    install(&v1, &keys, &a, &[]).ok();
    // The retained tree is never trusted: a changed file there does not reach the delta.
    let base_tree = a.join("bundles").join(id);
    std::fs::write(base_tree.join("files/weights.bin"), b"tampered").unwrap();
    let over = install(&delta, &keys, &a, &[]).ok().json();
    assert_eq!(over["base"], *id);
    install(&full, &keys, &b, &[]).ok();
    assert_eq!(current_tree(&a), current_tree(&b));
    assert_eq!(std::fs::read(a.join("current/files/weights.bin")).unwrap(), pattern(500_000, 9));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(over["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["bundle"]["base"], *id);

    // Rollback to the base, then forward again to the delta (install), which takes from the
    // base again.
    airlock_run(&["rollback", "--root", s(&a)]).ok();
    assert!(!a.join("current/files/changelog.txt").exists());
    install(&delta, &keys, &a, &[]).ok();
    assert_eq!(current_tree(&a), current_tree(&b));
    // A delta's tree, the members its base supplied included, is what check expects.
    let checked = airlock_run(&["check", "--root", s(&a), "--json"]);
    assert_eq!(checked.code, 0, "{}", checked.stdout);

    // A damaged base bundle file fails the delta's install, naming the base; nothing changes.
    let retained = a.join("bundles").join(id).join("bundle.airlock");
    let mut bytes = std::fs::read(&retained).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&retained, &bytes).unwrap();
    let before = snapshot(&a.join("bundles"));
    let failed = install(&delta, &keys, &a, &[]).code(3);
    assert!(failed.stderr.contains(&format!("the delta's base bundles/{id} failed verification")), "{}", failed.stderr);
    assert_eq!(snapshot(&a.join("bundles")), before);
}

#[test]
fn deltas_chain_and_pruning_keeps_the_bases_kept_deltas_need() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let mut bundles: Vec<PathBuf> = Vec::new();
    for (n, version) in ["1.0.0", "1.1.0", "1.2.0"].iter().enumerate() {
        let p = release(&t.path().join(version), version, n > 0);
        let out = t.path().join(format!("demo-{version}.airlock"));
        let base: Vec<&str> = bundles.last().map(|b| vec!["--base", s(b)]).unwrap_or_default();
        build_args(&p, &keys, &out, &base).ok();
        bundles.push(out);
    }
    // 1.2.0's weights are in neither 1.1.0 (a delta) nor 1.2.0: they come from 1.0.0.
    let i = airlock_run(&["inspect", s(&bundles[2]), "--json"]).ok().json();
    assert_eq!(i["from_base"]["entries"], 2);
    let root = t.path().join("site");
    let ids: Vec<String> = bundles
        .iter()
        .map(|b| install(b, &keys, &root, &["--keep", "2"]).ok().json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(std::fs::read(root.join("current/files/weights.bin")).unwrap(), pattern(500_000, 9));
    // --keep 2 keeps current (1.2.0) and previous (1.1.0), and 1.0.0, which 1.1.0 needs.
    for id in &ids {
        assert!(root.join("bundles").join(id).is_dir(), "bundles/{id} is kept");
    }
    let back = airlock_run(&["rollback", "--root", s(&root), "--json"]).ok().json();
    assert_eq!(back["version"], "1.1.0");
    assert_eq!(std::fs::read(root.join("current/files/board.bin")).unwrap(), pattern(350_000, 3));
}

#[test]
fn a_delta_against_a_lock_installs_over_any_bundle_built_from_that_lock() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p1 = release(&t.path().join("r1"), "1.0.0", false);
    let v1 = t.path().join("demo-1.0.0.airlock");
    build_args(&p1, &keys, &v1, &[]).ok();
    let p2 = release(&t.path().join("r2"), "1.1.0", true);
    let delta = t.path().join("delta.airlock");
    let lock = p1.dir.join("airlock.lock");
    let built = build_args(&p2, &keys, &delta, &["--base-lock", s(&lock)]).ok().json();
    assert_eq!(built["from_base"], 2);
    assert_eq!(built["base"]["lock_sha256"], sha256_file(&lock).as_str());
    assert_eq!(built["base"].get("manifest_sha256"), None);
    let root = t.path().join("site");
    let refused = install(&delta, &keys, &root, &[]).code(3);
    assert!(refused.stderr.contains(&format!("built from lock sha256 {}", sha256_file(&lock))), "{}", refused.stderr);
    install(&v1, &keys, &root, &[]).ok();
    install(&delta, &keys, &root, &[]).ok();
    assert_eq!(std::fs::read(root.join("current/files/weights.bin")).unwrap(), pattern(500_000, 9));
    let missing = build_args(&p2, &keys, &delta, &["--base-lock", "/nonexistent.lock"]).code(2);
    assert!(missing.stderr.contains("base lock `/nonexistent.lock` does not exist"), "{}", missing.stderr);
}

/// sha256 of the manifest skopeo reads at `docker://REF`.
fn skopeo_digest(reference: &str) -> String {
    let out = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{reference}")])
        .output()
        .expect("skopeo is installed by scripts/test.sh");
    assert!(out.status.success(), "skopeo inspect {reference}: {}", String::from_utf8_lossy(&out.stderr));
    let mut h = <sha2::Sha256 as sha2::Digest>::new();
    sha2::Digest::update(&mut h, &out.stdout);
    format!("sha256:{}", hex(&sha2::Digest::finalize(h)))
}

#[test]
fn a_delta_leaves_out_the_image_layers_the_site_has_and_publishes_the_same_digests() {
    let upstream = registry::Registry::start(registry::Mode::Plain);
    let (site_a, site_b) =
        (registry::Registry::start(registry::Mode::Plain), registry::Registry::start(registry::Mode::Plain));
    let u = &upstream.host;
    let base_digest = upstream.push("app/base", "1", &["--layers", "3", "--layer-size", "300000", "--seed", "1"]);
    let x_digest = upstream.push("app/x", "2", &["--layers", "1", "--layer-size", "100000", "--seed", "2"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let spec = |version: &str, images: &[&str]| {
        let dir = t.path().join(version);
        std::fs::create_dir_all(&dir).unwrap();
        let mut text =
            format!("[bundle]\nname = \"images\"\nversion = \"{version}\"\n\n[registries.\"{u}\"]\ninsecure = true\n");
        for image in images {
            let _ = write!(text, "\n[[image]]\nref = \"{u}/{image}\"\n");
        }
        std::fs::write(dir.join("airlock.toml"), text).unwrap();
        dir.join("airlock.toml")
    };
    let build = |spec: &Path, out: &Path, extra: &[&str]| {
        let args = [&["build", s(spec), "--key", s(&keys.private), "--out", s(out), "--json"][..], extra].concat();
        airlock_in(t.path(), &args).ok().json()
    };
    let (s1, s2) = (spec("1.0.0", &["app/base:1"]), spec("1.1.0", &["app/base:1", "app/x:2"]));
    let (v1, full, delta, by_lock) = (
        t.path().join("v1.airlock"),
        t.path().join("full.airlock"),
        t.path().join("delta.airlock"),
        t.path().join("by-lock.airlock"),
    );
    build(&s1, &v1, &[]);
    build(&s2, &full, &[]);
    let by_base = build(&s2, &delta, &["--base", s(&v1)]);
    // The base image's manifest, config and three layers, and `images/oci-layout` (the same
    // bytes in both); from the lock, the same blobs through the cached manifests.
    assert_eq!(by_base["from_base"], 6, "{by_base:#}");
    let from_lock = build(&s2, &by_lock, &["--base-lock", s(&t.path().join("1.0.0/airlock.lock"))]);
    assert_eq!(from_lock["from_base"], 5, "{from_lock:#}");
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(size(&full) - size(&delta) >= 900_000, "full {} delta {}", size(&full), size(&delta));

    let (a, b) = (t.path().join("site-a"), t.path().join("site-b"));
    let install = |bundle: &Path, root: &Path, site: &registry::Registry| {
        let args = [
            "install",
            s(bundle),
            "--trust",
            s(&keys.public),
            "--root",
            s(root),
            "--registry",
            site.host.as_str(),
            "--insecure-registry",
        ];
        airlock_in(t.path(), &args).ok();
    };
    install(&v1, &a, &site_a);
    install(&delta, &a, &site_a);
    install(&full, &b, &site_b);
    assert_eq!(current_tree(&a), current_tree(&b));
    for (site, _) in [(&site_a, &a), (&site_b, &b)] {
        assert_eq!(skopeo_digest(&format!("{}/app/base:1", site.host)), base_digest);
        assert_eq!(skopeo_digest(&format!("{}/app/x:2", site.host)), x_digest);
    }
}
