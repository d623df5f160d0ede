//! One spec with every kind served by real local servers (wheels from pypiserver, Debian
//! packages from a signed apt repository, a model from a hub, files by URL and from disk):
//! it locks, builds, verifies and installs, and pip, apt and `huggingface_hub` each consume the
//! site views offline.

use std::process::Command;

use crate::common::apt::{Apt, signed_repo};
use crate::common::http::HttpServer;
use crate::common::*;

#[test]
fn one_spec_with_every_kind_is_consumed_offline_by_pip_apt_and_huggingface_hub() {
    let t = tempfile::tempdir().unwrap();
    // Upstreams.
    let debs = signed_repo();
    let firmware = pattern(123_456, 8);
    std::fs::write(debs.dir.path().join("repo/fw.bin"), &firmware).unwrap();
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    let wheel = make_wheel(&pkgs, "vllm_lite", "0.27.0", "py3-none-any");
    let pypi = HttpServer::spawn(&pkgs, |_| {
        [helper("pypiserver_on.py"), "--hash-algo".into(), "sha256".into(), ".".into()].to_vec()
    });
    let model_dir = t.path().join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::write(model_dir.join("config.json"), br#"{"hidden_size": 8}"#).unwrap();
    let weights = pattern(64_000, 9);
    std::fs::write(model_dir.join("model.safetensors"), &weights).unwrap();
    let hub_script = helper("hub_server.py");
    let hub = HttpServer::spawn(&model_dir, |port| {
        [hub_script.as_str(), &port.to_string(), "amd/tiny", "."].map(String::from).to_vec()
    });

    // The spec.
    let project = t.path().join("project");
    std::fs::create_dir_all(project.join("fw")).unwrap();
    std::fs::write(project.join("fw/notes.txt"), "apply before the driver\n").unwrap();
    let fw_sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&firmware));
    let spec = project.join("airlock.toml");
    write_spec(&spec, &pypi.url, &debs.server.url, &debs.dir.path().join("keyring.asc"), &hub.url, &fw_sha);

    // Build host.
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with_cache =
        |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));
    with_cache(&["lock", s(&spec)]).ok();
    let bundle = t.path().join("rocm10-canary.airlock");
    with_cache(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let again = t.path().join("again.airlock");
    with_cache(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&again)]).ok();
    assert_eq!(sha256_file(&bundle), sha256_file(&again), "byte-identical with every kind");
    let kinds: Vec<String> = airlock_run(&["inspect", s(&bundle), "--json"]).ok().json()["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["wheel", "deb", "model", "file", "file"]);
    check_sbom(&bundle, t.path());
    check_provenance_subjects(&bundle, &keys.public);

    // Air gap: the upstreams go away.
    let site_secret = debs.dir.path().join("site-secret.asc");
    let site_public = t.path().join("site.asc");
    std::fs::copy(debs.dir.path().join("site.asc"), &site_public).unwrap();
    let site_secret_copy = t.path().join("site-secret.asc");
    std::fs::copy(&site_secret, &site_secret_copy).unwrap();
    drop((debs, pypi, hub));

    // Site.
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();
    let root = t.path().join("site");
    airlock_run(&[
        "install",
        s(&bundle),
        "--trust",
        s(&keys.public),
        "--root",
        s(&root),
        "--apt-signing-key",
        s(&site_secret_copy),
    ])
    .ok();
    let current = root.join("current");
    assert_eq!(std::fs::read(current.join("files/mi300x-pldm.bin")).unwrap(), firmware);

    consume_offline(t.path(), &current, &site_public, &wheel, &weights);

    // Every view of every kind is what check makes again from the verified manifest: nothing
    // damaged on a site that was only installed and used (pip, apt and the hub client read).
    let checked = airlock_run(&["check", "--root", s(&root), "--json"]);
    assert_eq!(checked.code, 0, "{}", checked.stdout);
    let doc = checked.json();
    assert!(doc["bundles"][0]["files_checked"].as_u64().unwrap() > 10, "{doc:#}");
    // And a model blob changed behind the hub cache's back is found.
    let blob = walkdir::WalkDir::new(current.join("models"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_file() && e.path().parent().is_some_and(|p| p.ends_with("blobs")))
        .expect("the Hugging Face cache holds blobs");
    std::fs::write(blob.path(), b"other weights").unwrap();
    let damaged = airlock_run(&["check", "--root", s(&root), "--json"]).code(3).json();
    assert!(damaged.to_string().contains("models/"), "{damaged:#}");
}

/// pip, apt (verifying the site key) and `huggingface_hub` each take what they need from the
/// site views, offline.
fn consume_offline(
    t: &std::path::Path,
    current: &std::path::Path,
    site_public: &std::path::Path,
    wheel: &std::path::Path,
    weights: &[u8],
) {
    let pip_out = t.join("pip");
    pip_download(&current.join("wheels/simple"), &pip_out, "vllm-lite==0.27.0").ok();
    assert_eq!(
        std::fs::read(pip_out.join("vllm_lite-0.27.0-py3-none-any.whl")).unwrap(),
        std::fs::read(wheel).unwrap()
    );

    let apt = Apt::new(&t.join("apt"));
    apt.sources(&format!("deb [signed-by={}] file:{} ./", site_public.display(), current.join("debs").display()));
    apt.get(&["update"]).ok();
    apt.get(&["download", "hello-airlock"]).ok();
    assert!(apt.out().join("hello-airlock_2.10-3_amd64.deb").is_file());

    let code =
        "from huggingface_hub import hf_hub_download as d; print(d('amd/tiny', 'model.safetensors', revision='main'))";
    let out = run(Command::new("python3")
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_HUB_CACHE", current.join("models"))
        .args(["-c", code]))
    .ok();
    assert_eq!(std::fs::read(out.stdout.trim()).unwrap(), weights);
}

fn write_spec(spec: &std::path::Path, pypi: &str, repo: &str, keyring: &std::path::Path, hub: &str, fw_sha: &str) {
    let keyring = keyring.display();
    std::fs::write(
        spec,
        format!(
            r#"[bundle]
name = "rocm10-canary"
version = "2026.11.0"

[[wheel]]
index = "{pypi}/simple"
requirements = ["vllm-lite==0.27.0"]

[[deb]]
repo = "{repo}"
suite = "stable"
components = ["main"]
arch = "amd64"
packages = ["hello-airlock=2.10-3"]
keyring = "{keyring}"

[[model]]
hub = "{hub}"
repo = "amd/tiny"
revision = "main"
files = ["*.json", "*.safetensors"]

[[file]]
name = "mi300x-pldm.bin"
source = "{repo}/fw.bin"
sha256 = "{fw_sha}"
kind = "firmware"
notes = {{ board = "MI300X", min_version = "01.25.05.00" }}

[[file]]
name = "notes.txt"
source = "fw/notes.txt"
kind = "document"
"#,
        ),
    )
    .unwrap();
}

/// Every provenance subject after the manifest is an artifact (model files one by one) whose
/// digest is that of a member the manifest lists, and every artifact is a subject.
fn check_provenance_subjects(bundle: &std::path::Path, key: &std::path::Path) {
    let statement = airlock_run(&["provenance", s(bundle), "--trust", s(key)]).ok().json();
    let manifest = manifest_member(bundle);
    let listed: Vec<&str> =
        manifest["entries"].as_array().unwrap().iter().map(|e| e["sha256"].as_str().unwrap()).collect();
    let subjects = statement["subject"].as_array().unwrap();
    assert_eq!(subjects[0]["name"], "airlock/manifest.json");
    for subject in &subjects[1..] {
        let digest = subject["digest"]["sha256"].as_str().unwrap();
        assert!(listed.contains(&digest), "subject {subject} is a listed member");
    }
    let models = manifest["artifacts"].as_array().unwrap().iter().filter(|a| a["kind"] == "model");
    let model_files: usize = models.map(|m| m["files"].as_array().unwrap().len()).sum();
    let others = manifest["artifacts"].as_array().unwrap().iter().filter(|a| a["kind"] != "model").count();
    assert_eq!(subjects.len(), 1 + others + model_files, "{statement}");
}

/// The SBOM validates against the official schema, every kind has its purl type, and every
/// component hash is the digest of a member the manifest lists.
fn check_sbom(bundle: &std::path::Path, t: &std::path::Path) {
    let types = sbom_components(bundle, t);
    let want = ["pypi:library", "deb:library", "generic:file", "generic:firmware"];
    assert!(want.iter().all(|w| types.contains(*w)), "{types:?}");
    let text = std::fs::read_to_string(t.join("sbom.cdx.json")).unwrap();
    assert!(text.contains("pkg:huggingface/amd/tiny@") && text.contains("machine-learning-model"), "{text}");
    assert!(text.contains("airlock:note:board"), "firmware notes are properties");
}
