//! `airlock outdated` against the real test servers: every upstream event the upgrade guide
//! says should trigger a requalification shows up with its layer and flags (an image tag
//! moved, a signature attached, a newer wheel and the pinned one yanked, a security update in
//! the suite beside the configured one, a model branch moved, a URL serving other bytes); an
//! untouched lock exits 0.

use std::path::Path;

use crate::common::http::HttpServer;
use crate::common::registry::{Mode, Registry};
use crate::common::*;

/// `DIR/p/airlock.toml` with `body` after a `[bundle]` section.
fn write_spec(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let project = dir.join("p");
    std::fs::create_dir_all(&project).unwrap();
    let spec = project.join("airlock.toml");
    std::fs::write(&spec, format!("[bundle]\nname = \"{name}\"\nversion = \"1.0.0\"\n\n{body}")).unwrap();
    spec
}

fn outdated(dir: &Path, spec: &Path, extra: &[&str]) -> Run {
    airlock_in(dir, &[&["outdated", s(spec), "--json"][..], extra].concat())
}

fn findings(r: &Run) -> Vec<serde_json::Value> {
    r.json()["findings"].as_array().unwrap().clone()
}

fn find<'a>(all: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    all.iter()
        .find(|f| f["kind"] == kind && f["name"].as_str().unwrap().contains(name))
        .unwrap_or_else(|| panic!("no {kind} finding for {name}: {all:#?}"))
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario: lock, move everything upstream, look")]
fn every_upstream_move_is_found_with_its_layer_and_an_untouched_lock_exits_0() {
    let t = tempfile::tempdir().unwrap();
    // Images: an engine image whose tag will move, a base that will get a cosign signature.
    let reg = Registry::start(Mode::Plain);
    reg.push("rocm/vllm", "rocm7", &["--seed", "1"]);
    let base_digest = reg.push("rocm/base", "1", &["--seed", "3"]);
    // Wheels on a PEP 691 index.
    let wheels = t.path().join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    make_wheel(&wheels, "torch_lite", "1.0.0", "py3-none-any");
    let index = HttpServer::spawn(&wheels, |port| vec![helper("json_index.py"), port.to_string(), ".".into()]);
    // A model whose `main` follows its files.
    let model = t.path().join("model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("config.json"), br#"{"hidden_size": 8}"#).unwrap();
    std::fs::write(model.join("model.safetensors"), pattern(10_000, 4)).unwrap();
    let hub = HttpServer::spawn(&model, |port| {
        [helper("hub_server.py"), port.to_string(), "org/tiny".into(), ".".into(), "--moving".into(), "yes".into()]
            .to_vec()
    });
    // Firmware by URL.
    let files = t.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let firmware = pattern(50_000, 5);
    std::fs::write(files.join("fw.bin"), &firmware).unwrap();
    let server = HttpServer::start(&files);

    let body = format!(
        "[registries.\"{r}\"]\ninsecure = true\n\n\
             [[image]]\nref = \"{r}/rocm/vllm:rocm7\"\n\n[[image]]\nref = \"{r}/rocm/base:1\"\n\n\
             [[wheel]]\nindex = \"{i}/simple\"\nrequirements = [\"torch-lite==1.0.0\"]\n\n\
             [[model]]\nhub = \"{h}\"\nrepo = \"org/tiny\"\nrevision = \"main\"\nfiles = [\"*\"]\n\n\
             [[file]]\nname = \"mi300x-fw.bin\"\nsource = \"{f}/fw.bin\"\nsha256 = \"{sha}\"\nkind = \"firmware\"\n",
        r = reg.host,
        i = index.url,
        h = hub.url,
        f = server.url,
        sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&firmware)),
    );
    let spec = write_spec(t.path(), "stack", &body);
    let lock = spec.with_extension("lock");
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let lock_before = std::fs::read(&lock).unwrap();

    // Nothing moved yet.
    let quiet = outdated(t.path(), &spec, &[]).code(0);
    assert_eq!(findings(&quiet), Vec::<serde_json::Value>::new());
    let human = airlock_in(t.path(), &["outdated", s(&spec)]).code(0);
    assert!(human.stdout.contains("nothing moved upstream"), "{}", human.stdout);

    // The world moves.
    reg.push("rocm/vllm", "rocm7", &["--seed", "2"]);
    assert_eq!(reg.push("rocm/base", "1", &["--seed", "3", "--cosign-sig"]), base_digest, "same image, now signed");
    make_wheel(&wheels, "torch_lite", "1.0.1", "py3-none-any");
    make_wheel(&wheels, "torch_lite", "1.1.0", "py3-none-any");
    std::fs::write(wheels.join("torch_lite-1.0.0-py3-none-any.whl.yanked"), "miscompiles on gfx942").unwrap();
    std::fs::write(model.join("config.json"), br#"{"hidden_size": 16}"#).unwrap();
    std::fs::write(files.join("fw.bin"), pattern(50_001, 6)).unwrap();

    let moved = outdated(t.path(), &spec, &[]).code(10);
    let all = findings(&moved);
    let image = find(&all, "image", "rocm/vllm");
    assert_eq!(image["layer"], "engine");
    assert!(image["detail"].as_str().unwrap().contains("another digest"), "{image}");
    let signed = find(&all, "image-attachment", "rocm/base");
    assert_eq!(signed["layer"], "rocm-core");
    assert!(signed["detail"].as_str().unwrap().contains("new signature"), "{signed}");
    let yanked = all.iter().find(|f| f["kind"] == "wheel" && f["security"] == true).expect("the yank is flagged");
    assert!(
        yanked["detail"].as_str().unwrap().contains("YANKED")
            && yanked["detail"].as_str().unwrap().contains("miscompiles")
    );
    assert_eq!(yanked["layer"], "framework");
    let newer = all.iter().find(|f| f["kind"] == "wheel" && f["security"] == false).unwrap();
    assert_eq!((newer["locked"].as_str(), newer["upstream"].as_str()), (Some("1.0.0"), Some("1.1.0")));
    assert!(newer["detail"].as_str().unwrap().contains("newest in the same minor: 1.0.1"), "{newer}");
    let m = find(&all, "model", "org/tiny");
    assert_eq!(m["layer"], "model");
    assert!(m["detail"].as_str().unwrap().contains("files changed: config.json"), "{m}");
    let fw = find(&all, "file", "mi300x-fw.bin");
    assert_eq!(fw["layer"], "driver-firmware");
    assert!(fw["detail"].as_str().unwrap().contains("50001 bytes"), "{fw}");
    // The table, by layer, and the lock untouched.
    let table = airlock_in(t.path(), &["outdated", s(&spec)]).code(10).stdout;
    for heading in [
        "driver/firmware: requalify",
        "ROCm core: requalify",
        "framework: requalify",
        "engine: requalify",
        "model: requalify",
    ] {
        assert!(table.contains(heading), "{heading}: {table}");
    }
    assert_eq!(std::fs::read(&lock).unwrap(), lock_before, "outdated never changes the lock");

    // The same bytes count, different content: only --deep can tell.
    std::fs::write(files.join("fw.bin"), pattern(50_000, 7)).unwrap();
    let shallow = findings(&outdated(t.path(), &spec, &[]).code(10));
    assert!(!shallow.iter().any(|f| f["kind"] == "file"), "same size: not seen without --deep");
    let deep = findings(&outdated(t.path(), &spec, &["--deep"]).code(10));
    assert!(find(&deep, "file", "mi300x-fw.bin")["upstream"].as_str().unwrap().starts_with("sha256:"));
    // Upstream unreachable: exit 1, so that CI retries rather than reports.
    drop(index);
    let down = airlock_in(t.path(), &["outdated", s(&spec), "--retries", "0"]).code(1);
    assert!(down.stderr.contains("simple/torch-lite"), "{}", down.stderr);
}

#[test]
fn a_security_update_in_the_suite_beside_the_configured_one_is_flagged() {
    let r = apt::signed_repo();
    let t = tempfile::tempdir().unwrap();
    let body = format!(
        "[[deb]]\nrepo = \"{}\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\n\
         packages = [\"hello-airlock=2.11-1\", \"airlock-docs\"]\nkeyring = \"{}\"\n",
        r.server.url,
        r.dir.path().join("keyring.asc").display()
    );
    let spec = write_spec(t.path(), "debs", &body);
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let all = findings(&outdated(t.path(), &spec, &[]).code(10));
    assert_eq!(all.len(), 1, "only hello-airlock moved: {all:#?}");
    let d = &all[0];
    assert_eq!((d["kind"].as_str(), d["name"].as_str()), (Some("deb"), Some("hello-airlock:amd64")));
    assert_eq!((d["locked"].as_str(), d["upstream"].as_str()), (Some("2.11-1"), Some("2.11-1+deb12u1")));
    assert_eq!(d["security"], true);
    assert!(
        d["detail"].as_str().unwrap().contains("SECURITY update: newer in")
            && d["detail"].as_str().unwrap().contains("stable-security")
    );
    let table = airlock_in(t.path(), &["outdated", s(&spec)]).code(10).stdout;
    assert!(table.contains(" ! deb") && table.contains("1 security (!)"), "{table}");
    let doc = outdated(t.path(), &spec, &[]).code(10).json();
    assert_eq!(doc["security"]["checked"], true, "{doc:#}");

    // Without a security suite beside it, "no security update" is "not checked", and says so.
    std::fs::remove_dir_all(r.dir.path().join("repo/dists/stable-security")).unwrap();
    let doc = outdated(t.path(), &spec, &[]).code(0).json();
    assert_eq!(doc["security"]["checked"], false, "{doc:#}");
    let unchecked = doc["security"]["not_checked"][0].as_str().unwrap();
    assert!(unchecked.ends_with(" stable"), "{doc:#}");
    let table = airlock_in(t.path(), &["outdated", s(&spec)]).code(0).stdout;
    assert!(table.contains("security: not checked for") && !table.contains("0 security"), "{table}");
    drop(r);
}
