//! Bundles as OCI artifacts through real registries (Debian's docker-registry): push, pull,
//! copy (registry to registry, and through an `oci-layout:` directory), install straight from
//! a registry, co-signatures as referrers; cross-checked with skopeo.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::registry::{Mode, Registry};
use crate::common::*;
use base64::Engine as _;

/// The docker config `airlock_in` points at, with the test credentials for `host`.
fn docker_config(dir: &Path, host: &str) {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", registry::USER, registry::PASSWORD));
    std::fs::create_dir_all(dir.join("docker")).unwrap();
    let config = serde_json::json!({ "auths": { host: { "auth": auth } } });
    std::fs::write(dir.join("docker/config.json"), config.to_string()).unwrap();
}

/// skopeo's view of a tag: the manifest's digest and the manifest.
fn skopeo_raw(reference: &str, ca_dir: Option<&Path>) -> (String, serde_json::Value) {
    let mut cmd = Command::new("skopeo");
    cmd.args(["inspect", "--raw"]);
    match ca_dir {
        Some(dir) => cmd.arg(format!("--cert-dir={}", dir.display())).arg(format!(
            "--creds={}:{}",
            registry::USER,
            registry::PASSWORD
        )),
        None => cmd.arg("--tls-verify=false"),
    };
    let out = cmd.arg(format!("docker://{reference}")).output().expect("skopeo is installed by scripts/test.sh");
    assert!(out.status.success(), "skopeo inspect {reference}: {}", String::from_utf8_lossy(&out.stderr));
    (
        format!("sha256:{}", hex(&<sha2::Sha256 as sha2::Digest>::digest(&out.stdout))),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

/// A built, co-signed demo bundle and the keys.
struct Release {
    t: tempfile::TempDir,
    keys: Keys,
    security: Keys,
    bundle: PathBuf,
}

fn release() -> Release {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let security = keygen(&t.path().join("keys"), "security");
    let p = project(&t.path().join("proj"), "1.0.0");
    let bundle = t.path().join("demo-1.0.0.airlock");
    build(&p, &keys, &bundle).ok();
    airlock_run(&["sign", s(&bundle), "--key", s(&security.private), "--trust", s(&keys.public)]).ok();
    Release { t, keys, security, bundle }
}

impl Release {
    fn run(&self, args: &[&str]) -> Run {
        airlock_in(self.t.path(), args)
    }

    fn both_keys(&self) -> Vec<&str> {
        vec!["--trust", s(&self.keys.public), "--trust", s(&self.security.public), "--threshold", "2"]
    }
}

#[test]
#[allow(clippy::too_many_lines, reason = "one journey, build host to two sites, checked step by step")]
fn a_bundle_goes_from_the_build_host_through_a_hub_to_two_sites_with_its_cosignatures() {
    let hub = Registry::start(Mode::Plain);
    let site_a = Registry::start(Mode::TlsHtpasswd);
    let site_b = Registry::start(Mode::Plain);
    let r = release();
    docker_config(r.t.path(), &site_a.host);
    let ca = site_a.ca.clone().unwrap();
    let ca_dir = ca.parent().unwrap().join("skopeo-certs");
    std::fs::create_dir_all(&ca_dir).unwrap();
    std::fs::copy(&ca, ca_dir.join("ca.crt")).unwrap();
    let hub_ref = format!("{}/bundles/demo:1.0.0", hub.host);
    let insecure_hub = format!("--insecure-registry={}", hub.host);

    // Build host → hub.
    let pushed = r.run(&["push", s(&r.bundle), &format!("oci://{hub_ref}"), &insecure_hub, "--json"]).ok().json();
    let digest = pushed["digest"].as_str().unwrap().to_owned();
    let id = pushed["id"].as_str().unwrap().to_owned();
    assert_eq!(pushed["cosignatures"].as_array().unwrap().len(), 1);
    assert_eq!(pushed["layers_pushed"], 3, "config, manifest and bundle: {pushed:#}");
    // What an independent client sees: an artifact whose bundle layer is the bundle file.
    let (seen, manifest) = skopeo_raw(&hub_ref, None);
    assert_eq!(seen, digest);
    assert_eq!(manifest["artifactType"], "application/vnd.airlock.bundle.v1");
    assert_eq!(manifest["annotations"]["dev.airlock.bundle.id"], id.as_str());
    assert_eq!(manifest["layers"][0]["mediaType"], "application/vnd.airlock.manifest.v1+json");
    assert_eq!(manifest["layers"][1]["digest"], format!("sha256:{}", sha256_file(&r.bundle)).as_str());
    let skopeo_dir = r.t.path().join("skopeo-copy");
    let out = Command::new("skopeo")
        .args([
            "copy",
            "--src-tls-verify=false",
            &format!("docker://{hub_ref}"),
            &format!("dir:{}", skopeo_dir.display()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        sha256_file(&skopeo_dir.join(sha256_file(&r.bundle))),
        sha256_file(&r.bundle),
        "skopeo's copy of the layer"
    );
    // Pushing again uploads nothing.
    let again = r.run(&["push", s(&r.bundle), &format!("oci://{hub_ref}"), &insecure_hub, "--json"]).ok().json();
    assert_eq!((again["layers_pushed"].clone(), again["digest"].clone()), (0.into(), digest.as_str().into()));

    // Pull: byte-identical, verified with both keys (the co-signature came as a referrer).
    let pulled_file = r.t.path().join("pulled/demo.airlock");
    std::fs::create_dir_all(pulled_file.parent().unwrap()).unwrap();
    let hub_url = format!("oci://{hub_ref}");
    let pull = [&["pull", &hub_url, "--out", s(&pulled_file), &insecure_hub, "--json"][..], &r.both_keys()].concat();
    let pulled = r.run(&pull).ok().json();
    assert_eq!(pulled["digest"], digest.as_str());
    assert_eq!(pulled["signers"].as_array().unwrap().len(), 2);
    assert_eq!(sha256_file(&pulled_file), sha256_file(&r.bundle));
    airlock_run(&[&["verify", s(&pulled_file)][..], &r.both_keys()].concat()).ok();

    // Hub → site A (TLS + htpasswd) → a layout directory (a one-way transfer) → site B.
    let first_site = format!("oci://{}/airlock/demo", site_a.host);
    let copy = ["copy", &format!("oci://{hub_ref}"), &first_site, &insecure_hub, "--registry-ca", s(&ca), "--json"];
    let copied = r.run(&copy).ok().json();
    assert_eq!((copied["digest"].clone(), copied["referrers"].clone()), (digest.as_str().into(), 1.into()));
    // Pushed straight to the TLS + htpasswd registry, in chunks: the same artifact.
    let direct = format!("oci://{}/airlock/direct:1.0.0", site_a.host);
    let pushed_a =
        r.run(&["push", s(&r.bundle), &direct, "--registry-ca", s(&ca), "--chunk-size", "32K", "--json"]).ok().json();
    assert_eq!((pushed_a["digest"].clone(), pushed_a["layers_pushed"].clone()), (digest.as_str().into(), 3.into()));
    let layout = r.t.path().join("media/layout");
    let to_layout =
        ["copy", &format!("{first_site}:1.0.0"), &format!("oci-layout:{}", layout.display()), "--registry-ca", s(&ca)];
    r.run(&to_layout).ok();
    let second_site = format!("oci://{}/airlock/demo", site_b.host);
    r.run(&["copy", &format!("oci-layout:{}", layout.display()), &second_site, "--insecure-registry"]).ok();
    assert_eq!(skopeo_raw(&format!("{}/airlock/demo:1.0.0", site_a.host), Some(&ca_dir)).0, digest);
    assert_eq!(skopeo_raw(&format!("{}/airlock/demo:1.0.0", site_b.host), None).0, digest);

    // Install straight from each site registry, and from the file: one bundle id everywhere,
    // the co-signature counted, the same tree.
    let install = |source: &str, root: &Path, extra: &[&str]| {
        let args = [&["install", source, "--root", s(root), "--json"][..], &r.both_keys(), extra].concat();
        r.run(&args).ok().json()
    };
    let (root_a, root_b, root_file) = (r.t.path().join("root-a"), r.t.path().join("root-b"), r.t.path().join("root-f"));
    let at_a = install(&format!("{first_site}:1.0.0"), &root_a, &["--registry-ca", s(&ca)]);
    let at_b = install(&format!("{second_site}@{digest}"), &root_b, &["--insecure-registry"]);
    let from_file = install(s(&r.bundle), &root_file, &[]);
    for installed in [&at_a, &at_b, &from_file] {
        assert_eq!(installed["id"], id.as_str());
        assert_eq!(installed["signers"].as_array().unwrap().len(), 2, "{installed:#}");
        assert_eq!(installed["cosignatures"].as_array().unwrap().len(), 1);
    }
    // A registry's listing is reported; a file has none.
    for installed in [&at_a, &at_b] {
        assert_eq!(installed["cosignature_referrers"], serde_json::json!({"listed": 1, "fetched": 1}), "{installed:#}");
    }
    assert!(from_file.get("cosignature_referrers").is_none(), "{from_file:#}");
    let tree = |root: &Path| {
        let dir = root.join(std::fs::read_link(root.join("current")).unwrap());
        snapshot(&dir).into_iter().map(|(p, w)| (p.strip_prefix(&dir).unwrap().to_owned(), w)).collect::<Vec<_>>()
    };
    assert_eq!(tree(&root_a), tree(&root_file));
    assert_eq!(tree(&root_b), tree(&root_file));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(at_a["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["bundle"]["file"], format!("oci://{}/airlock/demo@{digest}", site_a.host).as_str());
}

#[test]
fn a_cosignature_pushed_later_is_found_on_pull_and_counts() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let target = format!("oci://{}/bundles/demo:1.0.0", hub.host);
    r.run(&["push", s(&r.bundle), &target, "--insecure-registry"]).ok();
    // An auditor co-signs the bundle file after it was published, and pushes again.
    let auditor = keygen(&r.t.path().join("keys"), "auditor");
    airlock_run(&["sign", s(&r.bundle), "--key", s(&auditor.private), "--trust", s(&r.keys.public)]).ok();
    let again = r.run(&["push", s(&r.bundle), &target, "--insecure-registry", "--json"]).ok().json();
    assert_eq!(again["cosignatures"].as_array().unwrap().len(), 2);
    let out = r.t.path().join("three.airlock");
    let three = [
        &["pull", &target, "--out", s(&out), "--insecure-registry", "--json"][..],
        &["--trust", s(&r.keys.public), "--trust", s(&r.security.public), "--trust", s(&auditor.public)],
        &["--threshold", "3"],
    ]
    .concat();
    let pulled = r.run(&three).ok().json();
    assert_eq!(pulled["signers"].as_array().unwrap().len(), 3);
    // Four keys required, three signed: refused, nothing written.
    let four = r.t.path().join("four.airlock");
    let extra = keygen(&r.t.path().join("keys"), "extra");
    let refused = r
        .run(
            &[
                &["pull", &target, "--out", s(&four), "--insecure-registry"][..],
                &["--trust", s(&r.keys.public), "--trust", s(&r.security.public), "--trust", s(&auditor.public)],
                &["--trust", s(&extra.public), "--threshold", "4"],
            ]
            .concat(),
        )
        .code(3);
    assert!(refused.stderr.contains("threshold not met"), "{}", refused.stderr);
    assert!(!four.exists());
}

#[test]
fn a_tampered_layer_in_the_registry_is_refused_and_nothing_is_written_or_installed() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let target = format!("oci://{}/bundles/demo:1.0.0", hub.host);
    r.run(&["push", s(&r.bundle), &target, "--insecure-registry"]).ok();
    let data = hub.blob_data(&sha256_file(&r.bundle));
    let mut bytes = std::fs::read(&data).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&data, &bytes).unwrap();

    let out = r.t.path().join("pulled.airlock");
    let pull = [&["pull", &target, "--out", s(&out), "--insecure-registry"][..], &r.both_keys()].concat();
    let refused = r.run(&pull).code(3);
    assert!(refused.stderr.contains("sha256"), "{}", refused.stderr);
    assert!(!out.exists());
    let root = r.t.path().join("site");
    let install = [&["install", &target, "--root", s(&root), "--insecure-registry"][..], &r.both_keys()].concat();
    let refused = r.run(&install).code(3);
    assert!(refused.stderr.contains("failed verification"), "{}", refused.stderr);
    assert_nothing_installed(&root);
}

#[test]
fn an_interrupted_pull_resumes_where_it_stopped() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let bundle_digest = sha256_file(&r.bundle);
    r.run(&["push", s(&r.bundle), &format!("oci://{}/bundles/demo:1.0.0", hub.host), "--insecure-registry"]).ok();
    // One 503, then the bundle layer cut halfway, then the rest.
    let proxy = flaky::start(&hub.host, &bundle_digest, 1, 1);
    let out = r.t.path().join("pulled.airlock");
    let source = format!("oci://{}/bundles/demo:1.0.0", proxy.host);
    let pull = [&["pull", &source, "--out", s(&out), "--insecure-registry"][..], &r.both_keys()].concat();
    let pulled = r.run(&pull).ok();
    assert!(pulled.stderr.contains("retrying"), "retries are logged: {}", pulled.stderr);
    assert_eq!(sha256_file(&out), bundle_digest);
    let heads: Vec<String> =
        proxy.requests.lock().unwrap().iter().filter(|h| h.contains(&bundle_digest)).cloned().collect();
    assert_eq!(heads.len(), 3, "503, cut, resumed: {heads:#?}");
    let range = heads[2].lines().find(|l| l.to_ascii_lowercase().starts_with("range:")).unwrap_or_default().to_owned();
    let offset: u64 = range.trim().rsplit('=').next().unwrap().trim_end_matches('-').parse().unwrap_or(0);
    assert!(offset > 0, "the third request resumes from the bytes already received: {range:?}");
}

#[test]
fn an_install_from_a_registry_streams_and_resumes_a_dropped_layer() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let bundle_digest = sha256_file(&r.bundle);
    r.run(&["push", s(&r.bundle), &format!("oci://{}/bundles/demo:1.0.0", hub.host), "--insecure-registry"]).ok();
    let proxy = flaky::start(&hub.host, &bundle_digest, 1, 1);
    let root = r.t.path().join("site");
    let source = format!("oci://{}/bundles/demo:1.0.0", proxy.host);
    let install = [&["install", &source, "--root", s(&root), "--insecure-registry"][..], &r.both_keys()].concat();
    let installed = r.run(&install).ok();
    assert!(installed.stderr.contains("resuming"), "{}", installed.stderr);
    assert_eq!(sha256_file(&root.join("current/bundle.airlock")), bundle_digest);
    // Streamed: no copy of the bundle anywhere but the one the site keeps.
    assert!(
        !r.t.path().join("cache").exists()
            || walkdir::WalkDir::new(r.t.path().join("cache"))
                .into_iter()
                .all(|e| e.map_or(true, |e| !e.file_type().is_file() || e.metadata().unwrap().len() < 1000))
    );
    let heads: Vec<String> =
        proxy.requests.lock().unwrap().iter().filter(|h| h.contains(&bundle_digest)).cloned().collect();
    let resumed = heads
        .iter()
        .filter_map(|h| h.lines().find(|l| l.to_ascii_lowercase().starts_with("range:")))
        .any(|l| l.trim().rsplit('=').next().unwrap().trim_end_matches('-').parse::<u64>().unwrap_or(0) > 0);
    assert!(resumed, "a request resumed from the bytes already received: {heads:#?}");
}

#[test]
fn a_push_uploads_in_chunks_and_resumes_after_a_failed_chunk() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let dir = std::env::temp_dir();
    let upstream = hub.url();
    let proxy = http::HttpServer::spawn_with_stderr(
        &dir,
        move |port| {
            vec![
                helper("fault_proxy.py"),
                port.to_string(),
                upstream,
                "--fail-patch".into(),
                "5".into(),
                "--log".into(),
            ]
        },
        std::process::Stdio::from(std::fs::File::create(r.t.path().join("proxy.log")).unwrap()),
    );
    let via = proxy.url.trim_start_matches("http://").to_owned();
    let target = format!("oci://{via}/bundles/demo:1.0.0");
    // 16 KiB chunks: the ~72 kB bundle goes up in five PATCH requests, after one each for the
    // config and the manifest layer; the bundle's third chunk (the fifth PATCH) fails.
    let pushed = r.run(&["push", s(&r.bundle), &target, "--insecure-registry", "--chunk-size", "16K", "--json"]).ok();
    assert!(pushed.stderr.contains("resuming from byte 32768"), "{}", pushed.stderr);
    let log = std::fs::read_to_string(r.t.path().join("proxy.log")).unwrap();
    assert!(log.contains("failed PATCH 5"), "{log}");
    assert!(log.lines().filter(|l| l.starts_with("PATCH ")).count() >= 8, "{log}");
    assert!(
        log.lines().any(|l| l.starts_with("GET ") && l.contains("/blobs/uploads/")),
        "asked for the progress: {log}"
    );
    // What the registry holds is the bundle, byte for byte.
    assert_eq!(sha256_file(&hub.blob_data(&sha256_file(&r.bundle))), sha256_file(&r.bundle));
    let out = r.t.path().join("pulled.airlock");
    r.run(
        &[
            &["pull", &format!("oci://{}/bundles/demo:1.0.0", hub.host), "--out", s(&out), "--insecure-registry"][..],
            &r.both_keys(),
        ]
        .concat(),
    )
    .ok();
    assert_eq!(sha256_file(&out), sha256_file(&r.bundle));
}

#[test]
fn a_split_bundle_is_pushed_as_its_parts_and_pulled_whole() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let p = project(&r.t.path().join("proj"), "1.0.0");
    let split = r.t.path().join("split/demo.airlock");
    std::fs::create_dir_all(split.parent().unwrap()).unwrap();
    run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).env("AIRLOCK_CACHE", r.t.path().join("cache")).args([
        "build",
        s(&p.spec),
        "--key",
        s(&r.keys.private),
        "--out",
        s(&split),
        "--split-size",
        "16K",
    ]))
    .ok();
    let parts = PathBuf::from(format!("{}.parts.json", split.display()));
    let target = format!("oci://{}/bundles/split:1.0.0", hub.host);
    r.run(&["push", s(&parts), &target, "--insecure-registry"]).ok();
    let (_, manifest) = skopeo_raw(&format!("{}/bundles/split:1.0.0", hub.host), None);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1 + 5, "the manifest and five 16 KiB parts: {manifest:#}");
    assert!(layers[1..].iter().all(|l| l["mediaType"] == "application/vnd.airlock.bundle.part.v1"));
    let out = r.t.path().join("joined.airlock");
    r.run(&["pull", &target, "--out", s(&out), "--insecure-registry", "--trust", s(&r.keys.public)]).ok();
    let whole = r.t.path().join("demo-1.0.0.airlock");
    assert_eq!(sha256_file(&out), sha256_file(&whole), "the parts pulled are the bundle, joined");
    let bad = r.run(&["pull", "https://example/x", "--out", s(&out), "--trust", s(&r.keys.public)]).code(2);
    assert!(bad.stderr.contains("is not oci://HOST/REPO:TAG"), "{}", bad.stderr);
}

#[test]
fn a_ca_bundle_is_read_whole_and_a_file_that_is_no_bundle_of_certificates_is_refused() {
    let site = Registry::start(Mode::TlsHtpasswd);
    let r = release();
    docker_config(r.t.path(), &site.host);
    let ca = site.ca.clone().unwrap();
    // Another CA first, the registry's second: every certificate of the bundle counts.
    let other = r.t.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let key = other.join("k.pem");
    let cert = other.join("c.pem");
    let args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"];
    run(Command::new("openssl").args(args).args(["-subj", "/CN=other", "-keyout", s(&key), "-out", s(&cert)])).ok();
    let bundle_ca = r.t.path().join("bundle.pem");
    std::fs::write(&bundle_ca, [std::fs::read(&cert).unwrap(), std::fs::read(&ca).unwrap()].concat()).unwrap();
    let target = format!("oci://{}/bundles/demo:1.0.0", site.host);
    r.run(&["push", s(&r.bundle), &target, "--registry-ca", s(&bundle_ca), "--chunk-size", "32K"]).ok();
    let out = r.t.path().join("pulled.airlock");
    let pull = [&["pull", &target, "--out", s(&out), "--registry-ca", s(&bundle_ca)][..], &r.both_keys()].concat();
    r.run(&pull).ok();
    assert_eq!(sha256_file(&out), sha256_file(&r.bundle));
    // A file with a block that is no certificate is refused, naming it.
    let bad = r.t.path().join("bad.pem");
    std::fs::write(&bad, [std::fs::read(&ca).unwrap(), std::fs::read(&key).unwrap()].concat()).unwrap();
    let refused = r.run(&["pull", &target, "--out", s(&out), "--registry-ca", s(&bad), "--trust", s(&r.keys.public)]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("bad.pem") && refused.stderr.contains("not a PEM bundle"), "{}", refused.stderr);
}

#[test]
fn a_registry_with_thousands_of_referrers_and_a_forged_cosignature_is_read_in_one_pass() {
    let hub = Registry::start(Mode::Plain);
    let r = release();
    let target = format!("oci://{}/bundles/demo:1.0.0", hub.host);
    let pushed = r.run(&["push", s(&r.bundle), &target, "--insecure-registry", "--json"]).ok().json();
    let digest = pushed["digest"].as_str().unwrap().to_owned();
    let security_id = pushed["cosignatures"][0].as_str().unwrap().to_owned();
    let real_sig = std::fs::read(r.t.path().join(format!("demo-1.0.0.airlock.{security_id}.sig"))).unwrap();
    // 1,500 co-signatures under keys nobody trusts, and one more under the security key's id
    // whose bytes are no signature: what a hostile or merely busy registry lists.
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-referrers.py");
    let out = Command::new("python3")
        .arg(helper)
        .args([&hub.url(), "bundles/demo", &digest, "1500", "--kind", "cosignature", "--forge", &security_id])
        .output()
        .unwrap();
    assert!(out.status.success(), "bench-referrers.py: {}", String::from_utf8_lossy(&out.stderr));

    let pulled_to = r.t.path().join("pulled/demo.airlock");
    std::fs::create_dir_all(pulled_to.parent().unwrap()).unwrap();
    let pull =
        [&["pull", &target, "--out", s(&pulled_to), "--insecure-registry", "--json"][..], &r.both_keys()].concat();
    let pulled = r.run(&pull).ok().json();
    assert_eq!(pulled["signers"].as_array().unwrap().len(), 2, "{pulled}");
    // Only the co-signature that verified is written, and it is the security officer's.
    let written: Vec<String> = std::fs::read_dir(pulled_to.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written.len(), 2, "{written:?}");
    let sig = pulled_to.with_file_name(format!("demo.airlock.{security_id}.sig"));
    assert_eq!(std::fs::read(&sig).unwrap(), real_sig);

    // An install from the registry fetches only the co-signatures listed under a key its
    // policy names (the real one and the forgery): the 1,500 others are never asked for.
    let root = r.t.path().join("site");
    let install =
        [&["install", &target, "--root", s(&root), "--insecure-registry", "--json"][..], &r.both_keys()].concat();
    let installed = r.run(&install).ok().json();
    assert_eq!(installed["cosignature_referrers"], serde_json::json!({"listed": 1502, "fetched": 2}), "{installed}");
    assert_eq!(installed["signers"].as_array().unwrap().len(), 2);

    // A copy carries every referrer, each listed once, however often it is repeated.
    let layout = r.t.path().join("layout");
    let to = format!("oci-layout:{}", layout.display());
    for _ in 0..2 {
        let copied = r.run(&["copy", &target, &to, "--insecure-registry", "--json"]).ok().json();
        assert_eq!(copied["referrers"], 1502, "{copied}");
    }
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let listed: std::collections::BTreeSet<&str> =
        index["manifests"].as_array().unwrap().iter().map(|m| m["digest"].as_str().unwrap()).collect();
    assert_eq!(index["manifests"].as_array().unwrap().len(), listed.len(), "no entry twice");
    assert_eq!(listed.len(), 1503, "the bundle and its 1,502 referrers");
    // And from the layout, the same two signers.
    let again = r.t.path().join("again.airlock");
    let pull = [&["pull", &to, "--out", s(&again), "--json"][..], &r.both_keys()].concat();
    assert_eq!(r.run(&pull).ok().json()["signers"].as_array().unwrap().len(), 2);
}
