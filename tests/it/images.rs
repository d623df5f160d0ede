//! Container images against real registries (Debian's docker-registry), cross-checked with
//! skopeo: lock pins tags, build fetches by digest into the bundle's OCI layout, install pushes
//! to a second registry with the digests unchanged.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::registry::{Mode, Registry};
use crate::common::*;
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

fn write_spec(dir: &Path, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let spec = dir.join("airlock.toml");
    std::fs::write(&spec, format!("[bundle]\nname = \"images\"\nversion = \"1.0.0\"\n\n{body}")).unwrap();
    spec
}

fn insecure(reg: &Registry) -> String {
    format!("[registries.\"{}\"]\ninsecure = true\n\n", reg.host)
}

/// Write `dir/docker/config.json` (what `airlock_in` points `DOCKER_CONFIG` at) with the test
/// registries' credentials for each of `hosts`.
fn docker_config(dir: &Path, hosts: &[&str]) {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", registry::USER, registry::PASSWORD));
    let auths: serde_json::Map<_, _> =
        hosts.iter().map(|h| ((*h).to_owned(), serde_json::json!({ "auth": auth }))).collect();
    std::fs::create_dir_all(dir.join("docker")).unwrap();
    std::fs::write(dir.join("docker/config.json"), serde_json::json!({ "auths": auths }).to_string()).unwrap();
}

/// sha256 of the manifest skopeo reads at `transport_ref` (`docker://…` or `oci:DIR:NAME`).
fn skopeo_digest(transport_ref: &str) -> String {
    let out = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false", transport_ref])
        .output()
        .expect("skopeo is installed by scripts/test.sh");
    assert!(out.status.success(), "skopeo inspect {transport_ref}: {}", String::from_utf8_lossy(&out.stderr));
    format!("sha256:{}", hex(&Sha256::digest(&out.stdout)))
}

/// skopeo copies every platform out of `from` into a `dir:` copy (which keeps manifest bytes
/// as they are); the digest of the copied manifest.
fn skopeo_copy_digest(from: &str, dir: &Path) -> String {
    let dest = format!("dir:{}", dir.display());
    let out = Command::new("skopeo")
        .args(["copy", "--all", "--preserve-digests", "--src-tls-verify=false", from, &dest])
        .output()
        .expect("skopeo runs");
    assert!(out.status.success(), "skopeo copy {from}: {}", String::from_utf8_lossy(&out.stderr));
    format!("sha256:{}", sha256_file(&dir.join("manifest.json")))
}

fn extract(bundle: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let sh = format!("zstd -dc '{}' | tar -x -C '{}'", bundle.display(), into.display());
    run(Command::new("sh").arg("-c").arg(sh)).ok();
}

#[test]
#[allow(clippy::too_many_lines, reason = "one end-to-end scenario, checked step by step")]
fn images_lock_build_verify_and_install_to_a_second_registry_with_identical_digests() {
    let upstream = Registry::start(Mode::Plain);
    let site = Registry::start(Mode::Plain);
    let multi =
        upstream.push("rocm/vllm", "rocm10.0.0", &["--platforms", "linux/amd64,linux/arm64/v8", "--cosign-sig"]);
    let single = upstream.push("rocm/base", "1.0", &["--docker", "--seed", "7", "--referrer"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let u = &upstream.host;
    let spec = write_spec(
        &t.path().join("p"),
        &format!(
            "{}[[image]]\nref = \"{u}/rocm/vllm:rocm10.0.0\"\n\n[[image]]\nref = \"{u}/rocm/base:1.0\"\n",
            insecure(&upstream)
        ),
    );
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap();
    assert!(
        lock.contains(&format!("digest = \"{multi}\"")) && lock.contains(&format!("digest = \"{single}\"")),
        "{lock}"
    );
    assert!(lock.contains("platform = \"linux/arm64/v8\"") && lock.contains(".sig\""), "{lock}");

    let bundle = t.path().join("images.airlock");
    let built = airlock_in(
        t.path(),
        &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle), "--json"],
    )
    .ok()
    .json();
    let images: Vec<_> =
        built["images"].as_array().unwrap().iter().map(|i| i["digest"].as_str().unwrap().to_owned()).collect();
    assert_eq!(images, [multi.clone(), single.clone()]);
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();
    let lock_json = toml_as_json(&lock);
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock_json), Vec::<String>::new());
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let types = sbom_components(&bundle, t.path());
    assert!(types.contains("oci:container"), "images are containers with pkg:oci purls: {types:?}");
    // Upstream SBOMs and signatures are referenced (type, bundle path, hash), not merged.
    let attached: Vec<_> = manifest["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attached"].as_array().unwrap().iter().map(|x| x["kind"].as_str().unwrap()).collect::<Vec<_>>())
        .collect();
    assert_eq!(attached, [vec!["signature"], vec!["sbom"]], "{manifest}");
    let sbom: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("sbom.cdx.json")).unwrap()).unwrap();
    let refs: Vec<(String, String, String)> = sbom["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["externalReferences"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            let (kind, url) = (r["type"].as_str().unwrap().to_owned(), r["url"].as_str().unwrap().to_owned());
            (kind, url, r["hashes"][0]["content"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(refs.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["other", "bom"], "{sbom}");
    assert_eq!(sbom.to_string().matches("\"bomFormat\"").count(), 1, "the upstream SBOM is not merged");

    // The bundle's images/ is an OCI layout skopeo reads, digests unchanged.
    let x = t.path().join("x");
    extract(&bundle, &x);
    let layout = x.join("images");
    assert_eq!(skopeo_digest(&format!("oci:{}:{u}/rocm/vllm:rocm10.0.0", layout.display())), multi);
    assert_eq!(
        skopeo_copy_digest(&format!("oci:{}:{u}/rocm/vllm:rocm10.0.0", layout.display()), &t.path().join("c1")),
        multi
    );
    // skopeo's oci: transport only resolves OCI-typed entries; the Docker schema-2 image is
    // carried byte for byte (so its digest holds) and checked through the site registry below.
    let docker_manifest = layout.join("blobs/sha256").join(&single["sha256:".len()..]);
    assert_eq!(format!("sha256:{}", sha256_file(&docker_manifest)), single);
    for (_, url, hash) in &refs {
        assert_eq!(&sha256_file(&x.join(url)), hash, "{url} is a member with that digest");
    }
    let upstream_sbom = std::fs::read(x.join(&refs[1].1)).unwrap();
    assert!(String::from_utf8_lossy(&upstream_sbom).contains("cyclonedx"), "the referrer's manifest");

    // Install pushes to the site registry under the same repository paths and tags.
    let root = t.path().join("site");
    let install = || {
        let args = ["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root), "--registry", &site.host];
        airlock_in(t.path(), &[&args[..], &["--insecure-registry", "--json"]].concat()).ok().json()
    };
    let installed = install();
    assert_eq!(
        installed["images"].as_array().unwrap().len(),
        4,
        "two images, a signature, a referrers index: {installed}"
    );
    assert_published(&site.host, u, &multi, &single, t.path());

    // A second install finds every blob present and pushes none.
    let again = install();
    assert!(again["images"].as_array().unwrap().iter().all(|i| i["blobs_pushed"] == 0), "{again}");
}

/// The site registry serves every image, signature and referrers index of the round trip with
/// upstream's digests, and skopeo copies them out unchanged.
fn assert_published(h: &str, u: &str, multi: &str, single: &str, dir: &Path) {
    assert_eq!(skopeo_digest(&format!("docker://{h}/rocm/vllm:rocm10.0.0")), multi);
    assert_eq!(skopeo_digest(&format!("docker://{h}/rocm/base:1.0")), single);
    assert_eq!(skopeo_copy_digest(&format!("docker://{h}/rocm/base:1.0"), &dir.join("c3")), single);
    assert_eq!(skopeo_copy_digest(&format!("docker://{h}/rocm/vllm:rocm10.0.0"), &dir.join("c2")), multi);
    let sig_tag = format!("{}.sig", multi.replace(':', "-"));
    assert_eq!(
        skopeo_digest(&format!("docker://{h}/rocm/vllm:{sig_tag}")),
        skopeo_digest(&format!("docker://{u}/rocm/vllm:{sig_tag}")),
        "the upstream signature travels with its image"
    );

    let referrers_tag = single.replace(':', "-");
    assert_eq!(
        skopeo_digest(&format!("docker://{h}/rocm/base:{referrers_tag}")),
        skopeo_digest(&format!("docker://{u}/rocm/base:{referrers_tag}")),
        "OCI referrers (tag schema) travel with their image"
    );
}

#[test]
fn a_tag_moved_upstream_does_not_change_a_locked_build() {
    let upstream = Registry::start(Mode::Plain);
    let before = upstream.push("app/x", "stable", &["--seed", "1"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let spec = write_spec(
        &t.path().join("p"),
        &format!("{}[[image]]\nref = \"{}/app/x:stable\"\n", insecure(&upstream), upstream.host),
    );
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let first = t.path().join("first.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&first)]).ok();

    let after = upstream.push("app/x", "stable", &["--seed", "2"]);
    assert_ne!(before, after);
    std::fs::remove_dir_all(t.path().join("cache")).unwrap(); // fetch again, by digest
    let second = t.path().join("second.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&second)]).ok();
    assert_eq!(sha256_file(&first), sha256_file(&second), "byte-identical despite the moved tag");
    let i = airlock_run(&["inspect", s(&second), "--json"]).ok().json();
    assert_eq!(i["artifacts"][0]["digest"], before.as_str());
}

#[test]
fn platforms_filter_an_index_and_the_filtered_index_is_what_the_site_gets() {
    let upstream = Registry::start(Mode::Plain);
    let site = Registry::start(Mode::Plain);
    let full = upstream.push("ml/torch", "2.9", &["--platforms", "linux/amd64,linux/arm64"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let body = format!(
        "{}[[image]]\nref = \"{}/ml/torch:2.9\"\nplatforms = [\"linux/arm64\"]\n",
        insecure(&upstream),
        upstream.host
    );
    let spec = write_spec(&t.path().join("p"), &body);
    let bundle = t.path().join("b.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let art = &airlock_run(&["inspect", s(&bundle), "--json"]).ok().json()["artifacts"][0];
    assert_eq!(art["upstream_digest"], full.as_str());
    assert_ne!(art["digest"], full.as_str());
    assert_eq!(art["platforms"].as_array().unwrap().len(), 1);
    assert_eq!(art["platforms"][0]["platform"], "linux/arm64");
    let carried = art["digest"].as_str().unwrap().to_owned();
    airlock_in(
        t.path(),
        &[
            "install",
            s(&bundle),
            "--trust",
            s(&keys.public),
            "--root",
            s(&t.path().join("site")),
            "--registry",
            &site.host,
            "--insecure-registry",
        ],
    )
    .ok();
    assert_eq!(skopeo_digest(&format!("docker://{}/ml/torch:2.9", site.host)), carried);

    // A platform the index lacks is an error that lists what it has.
    let body = format!(
        "{}[[image]]\nref = \"{}/ml/torch:2.9\"\nplatforms = [\"linux/s390x\"]\n",
        insecure(&upstream),
        upstream.host
    );
    let spec = write_spec(&t.path().join("q"), &body);
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    assert!(r.stderr.contains("linux/s390x") && r.stderr.contains("linux/amd64, linux/arm64"), "{}", r.stderr);
}

#[test]
fn basic_auth_comes_from_the_docker_config() {
    let upstream = Registry::start(Mode::Htpasswd);
    let digest = upstream.push("private/app", "1", &[]);
    let t = tempfile::tempdir().unwrap();
    let spec = write_spec(
        &t.path().join("p"),
        &format!("{}[[image]]\nref = \"{}/private/app:1\"\n", insecure(&upstream), upstream.host),
    );
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    assert!(r.stderr.contains(&format!("{}/private/app:1", upstream.host)), "{}", r.stderr);
    assert!(r.stderr.contains("401 unauthorized") && r.stderr.contains("docker config"), "{}", r.stderr);
    assert!(!r.stderr.contains(registry::PASSWORD));

    docker_config(t.path(), &[&upstream.host]);
    let r = airlock_in(t.path(), &["lock", s(&spec), "-v"]).ok();
    assert!(!r.stderr.contains(registry::PASSWORD), "credentials never logged");
    assert!(std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap().contains(&digest));

    // Install pushes to an authenticated site registry with credentials from the same place.
    let site = Registry::start(Mode::Htpasswd);
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("p.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let root = t.path().join("site");
    let install = |t: &Path| {
        airlock_in(
            t,
            &[
                "install",
                s(&bundle),
                "--trust",
                s(&keys.public),
                "--root",
                s(&root),
                "--registry",
                &site.host,
                "--insecure-registry",
            ],
        )
    };
    let r = install(t.path()).code(1);
    assert!(r.stderr.contains(&site.host) && r.stderr.contains("`current` was not changed"), "{}", r.stderr);
    assert!(!root.join("current").exists());
    docker_config(t.path(), &[&upstream.host, &site.host]);
    install(t.path()).ok();
    assert!(root.join("current").exists());
}

#[test]
fn bearer_token_challenges_are_answered_with_docker_config_credentials() {
    let upstream = Registry::start(Mode::Token);
    let digest = upstream.push("team/app", "1", &[]);
    let t = tempfile::tempdir().unwrap();
    let spec = write_spec(
        &t.path().join("p"),
        &format!("{}[[image]]\nref = \"{}/team/app:1\"\n", insecure(&upstream), upstream.host),
    );
    airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    docker_config(t.path(), &[&upstream.host]);
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("t.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    assert_eq!(airlock_run(&["inspect", s(&bundle), "--json"]).ok().json()["artifacts"][0]["digest"], digest.as_str());
}

#[test]
fn tls_registries_verify_against_the_spec_ca() {
    let upstream = Registry::start(Mode::Tls);
    let digest = upstream.push("secure/app", "1", &[]);
    let t = tempfile::tempdir().unwrap();
    let image = format!("[[image]]\nref = \"{}/secure/app:1\"\n", upstream.host);
    let ca = upstream.ca.clone().unwrap();

    let spec = write_spec(&t.path().join("noca"), &image);
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    assert!(r.stderr.contains(&upstream.host), "an unknown CA is refused: {}", r.stderr);

    std::fs::create_dir_all(t.path().join("bad")).unwrap();
    std::fs::write(t.path().join("bad/ca.pem"), "not a certificate").unwrap();
    let spec =
        write_spec(&t.path().join("bad"), &format!("[registries.\"{}\"]\nca = \"ca.pem\"\n\n{image}", upstream.host));
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    assert!(r.stderr.contains("is not a PEM bundle of certificates") && r.stderr.contains("ca.pem"), "{}", r.stderr);

    let spec = write_spec(
        &t.path().join("ok"),
        &format!("[registries.\"{}\"]\nca = \"{}\"\n\n{image}", upstream.host, ca.display()),
    );
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    assert!(std::fs::read_to_string(t.path().join("ok/airlock.lock")).unwrap().contains(&digest));

    // The system's roots are trusted too: with the registry's CA as the one root the system
    // has (`SSL_CERT_FILE`, and an empty `SSL_CERT_DIR`), a spec naming no CA locks, and
    // builds with the layers streamed over TLS.
    let no_certs = t.path().join("no-certs");
    std::fs::create_dir_all(&no_certs).unwrap();
    let system_ca = |args: &[&str]| {
        run(airlock_at(&t.path().join("system")).env("SSL_CERT_FILE", &ca).env("SSL_CERT_DIR", &no_certs).args(args))
    };
    let spec = write_spec(&t.path().join("system"), &image);
    system_ca(&["lock", s(&spec)]).ok();
    assert!(std::fs::read_to_string(t.path().join("system/airlock.lock")).unwrap().contains(&digest));
    let keys = keygen(&t.path().join("keys"), "build");
    let out = t.path().join("system.airlock");
    let key = s(&keys.private);
    system_ca(&["build", s(&spec), "--locked", "--no-blob-cache", "--key", key, "--out", s(&out)]).ok();
    airlock_run(&["verify", s(&out), "--trust", s(&keys.public)]).ok();
}

#[test]
fn registry_errors_name_the_reference_and_a_bad_blob_leaves_nothing_behind() {
    let upstream = Registry::start(Mode::Plain);
    let digest = upstream.push("app/y", "1", &["--layers", "1", "--layer-size", "20000"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let u = &upstream.host;
    for (name, reference) in [("tag", format!("{u}/app/y:nope")), ("repo", format!("{u}/no/such:1"))] {
        let spec =
            write_spec(&t.path().join(name), &format!("{}[[image]]\nref = \"{reference}\"\n", insecure(&upstream)));
        let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
        assert!(r.stderr.contains(&reference) && r.stderr.contains("manifest unknown"), "{name}: {}", r.stderr);
    }

    let spec = write_spec(&t.path().join("p"), &format!("{}[[image]]\nref = \"{u}/app/y:1\"\n", insecure(&upstream)));
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    // Damage the layer in the registry's storage: same size, different bytes.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(upstream.blob_data(&digest["sha256:".len()..])).unwrap()).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_owned();
    let data = upstream.blob_data(&layer);
    let mut bytes = std::fs::read(&data).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();

    let out = t.path().join("y.airlock");
    let r = airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&out)]).code(3);
    assert!(r.stderr.contains(&layer) && r.stderr.contains("expected sha256"), "{}", r.stderr);
    assert!(!out.exists(), "no bundle is left behind");
    assert!(!t.path().join("cache/blobs/sha256").join(&layer).exists(), "nothing unverified in the cache");
    assert_eq!(std::fs::read_dir(t.path().join("cache/tmp")).unwrap().count(), 0);
}

#[test]
fn a_local_oci_layout_is_a_source_too() {
    let upstream = Registry::start(Mode::Plain);
    let digest = upstream.push("vendor/base", "1.0", &["--platforms", "linux/amd64,linux/arm64"]);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let layout = t.path().join("p/vendor/images");
    std::fs::create_dir_all(&layout).unwrap();
    let out = Command::new("skopeo")
        .args([
            "copy",
            "--all",
            "--preserve-digests",
            "--src-tls-verify=false",
            &format!("docker://{}/vendor/base:1.0", upstream.host),
            &format!("oci:{}:vendor/base:1.0", layout.display()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(upstream); // the layout is all there is now
    let spec =
        write_spec(&t.path().join("p"), "[[image]]\noci_layout = \"vendor/images\"\ntag = \"vendor/base:1.0\"\n");
    let bundle = t.path().join("l.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let x = t.path().join("x");
    extract(&bundle, &x);
    assert_eq!(skopeo_digest(&format!("oci:{}:vendor/base:1.0", x.join("images").display())), digest);
    // Read from the layout into the bundle, with no copy in a cache: the same bundle.
    let (streamed, empty) = (t.path().join("s.airlock"), t.path().join("empty-cache"));
    let args =
        ["build", s(&spec), "--no-blob-cache", "--cache", s(&empty), "--key", s(&keys.private), "--out", s(&streamed)];
    airlock_in(t.path(), &args).ok();
    assert!(std::fs::read(&streamed).unwrap() == std::fs::read(&bundle).unwrap());
    let largest = walkdir::WalkDir::new(&empty).into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file());
    assert!(largest.map(|e| e.metadata().unwrap().len()).all(|n| n < 10_000), "no layer in the cache");

    let spec =
        write_spec(&t.path().join("p"), "[[image]]\noci_layout = \"vendor/images\"\ntag = \"vendor/base:2.0\"\n");
    let r = airlock_in(t.path(), &["lock", s(&spec)]).code(1);
    assert!(
        r.stderr.contains("no manifest tagged `vendor/base:2.0`") && r.stderr.contains("vendor/base:1.0"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_dropped_blob_download_is_retried_and_resumed_with_a_range_request() {
    let upstream = Registry::start(Mode::Plain);
    let digest = upstream.push("app/big", "1", &["--layers", "1", "--layer-size", "400000"]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(upstream.blob_data(&digest["sha256:".len()..])).unwrap()).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_owned();
    // One 503, then one response cut halfway, then the rest.
    let proxy = flaky::start(&upstream.host, &layer, 1, 1);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let body = format!("[registries.\"{0}\"]\ninsecure = true\n\n[[image]]\nref = \"{0}/app/big:1\"\n", proxy.host);
    let spec = write_spec(&t.path().join("p"), &body);
    let bundle = t.path().join("big.airlock");
    let r = airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    assert!(r.stderr.contains("retrying"), "retries are logged: {}", r.stderr);
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();

    let heads: Vec<String> = proxy.requests.lock().unwrap().iter().filter(|h| h.contains(&layer)).cloned().collect();
    assert_eq!(heads.len(), 3, "503, cut, resumed: {heads:#?}");
    let range = heads[2].lines().find(|l| l.to_ascii_lowercase().starts_with("range:")).unwrap_or_default().to_owned();
    let offset: u64 = range.trim().rsplit('=').next().unwrap().trim_end_matches('-').parse().unwrap_or(0);
    assert!(offset > 0, "the third request resumes from the bytes already received: {range:?}");
}

#[test]
fn rollback_republishes_the_previous_bundles_images_to_the_remembered_registry() {
    let upstream = Registry::start(Mode::Plain);
    let site = Registry::start(Mode::Plain);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let u = &upstream.host;
    // Two releases of one bundle: the same tag, with other content upstream in between.
    let mut bundles = Vec::new();
    for (version, seed) in [("1.0.0", "1"), ("1.1.0", "2")] {
        let digest = upstream.push("app/x", "1", &["--seed", seed]);
        let dir = t.path().join(version);
        let spec = write_spec(&dir, &format!("{}[[image]]\nref = \"{u}/app/x:1\"\n", insecure(&upstream)));
        let text =
            std::fs::read_to_string(&spec).unwrap().replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
        std::fs::write(&spec, text).unwrap();
        let out = t.path().join(format!("x-{version}.airlock"));
        airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)]).ok();
        bundles.push((out, digest));
    }
    assert_ne!(bundles[0].1, bundles[1].1);
    let root = t.path().join("site-root");
    let tag = format!("docker://{}/app/x:1", site.host);
    let install = |bundle: &Path| {
        let registry = ["--registry", site.host.as_str(), "--insecure-registry"];
        let args = [&["install", s(bundle), "--trust", s(&keys.public), "--root", s(&root)][..], &registry].concat();
        airlock_in(t.path(), &args).ok();
    };
    install(&bundles[0].0);
    install(&bundles[1].0);
    assert_eq!(skopeo_digest(&tag), bundles[1].1);
    // No --registry on rollback: the site remembers where it publishes.
    let back = airlock_in(t.path(), &["rollback", "--root", s(&root), "--json"]).ok().json();
    assert_eq!(back["version"], "1.0.0");
    assert_eq!(skopeo_digest(&tag), bundles[0].1, "the tag is back at the previous bundle's digest");
    assert_eq!(back["images"][0]["digest"], bundles[0].1.as_str());
    // The image layout in each retained tree is what check expects.
    let checked = airlock_in(t.path(), &["check", "--root", s(&root), "--json"]);
    assert_eq!(checked.code, 0, "{}", checked.stdout);
}

#[test]
fn a_build_after_lock_asks_the_registry_for_no_document_twice() {
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/one", "1", &["--layers", "2", "--layer-size", "300000"]);
    // No faults: the proxy only records what is asked.
    let proxy = flaky::start(&upstream.host, "none", 0, 0);
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let body = format!("[registries.\"{0}\"]\ninsecure = true\n\n[[image]]\nref = \"{0}/app/one:1\"\n", proxy.host);
    let spec = write_spec(&t.path().join("p"), &body);
    let cache = t.path().join("cache");
    let asked = |from: usize| -> Vec<String> {
        let heads = proxy.requests.lock().unwrap();
        heads[from..].iter().filter_map(|h| h.lines().next()).map(str::to_owned).collect()
    };
    airlock_in(t.path(), &["lock", s(&spec), "--cache", s(&cache)]).ok();
    let locked = asked(0);
    let count = |lines: &[String], part: &str| lines.iter().filter(|l| l.contains(part)).count();
    // The referrers tag schema (`sha256-HEX`) is asked for once, beside cosign's tags; the
    // referrers API's 404 does not make it ask again.
    // Cosign's tags end `.sig`, `.att`, `.sbom`; the tag schema's is the bare `sha256-HEX`.
    let path = |l: &String| l.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let tag_schema = locked.iter().map(path).filter(|p| p.contains("/manifests/sha256-") && !p.contains('.')).count();
    assert_eq!(tag_schema, 1, "{locked:#?}");
    assert_eq!(count(&locked, "/referrers/"), 1, "{locked:#?}");

    let bundle = t.path().join("one.airlock");
    let from = proxy.requests.lock().unwrap().len();
    let command = ["build", s(&spec), "--locked", "--cache", s(&cache), "--no-blob-cache", "--key", s(&keys.private)];
    airlock_in(t.path(), &[&command[..], &["--out", s(&bundle)]].concat()).ok();
    let built = asked(from);
    // The manifest `lock` read is in the cache: the build asks for the config and layers only.
    assert_eq!(count(&built, "/manifests/"), 0, "{built:#?}");
    assert_eq!(count(&built, "/blobs/"), 3, "{built:#?}");
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();
}
