//! Shared helpers for integration tests: run the real binary, make keys and specs in temp
//! directories, snapshot directory trees.
#![allow(dead_code)]

pub mod apt;
pub mod flaky;
pub mod http;
pub mod nginx;
pub mod registry;
pub mod site;
pub mod slurm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

pub const EPOCH: &str = "1764432000";

/// The binary, on a recorded GPU host: `testdata/probes/mi300x` (8× MI300X, `ROCm` 7.0.2,
/// amdgpu 6.12.12, Ubuntu 24.04) replayed through its tool stand-ins and host files, so that
/// installs validate as they would on a site. `on_host` picks another.
pub fn airlock() -> Command {
    on_host("mi300x")
}

pub fn on_host(host: &str) -> Command {
    let probes = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/probes");
    let mut path = std::ffi::OsString::from(probes.join(host).join("bin"));
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut c = Command::new(env!("CARGO_BIN_EXE_airlock"));
    c.env_remove("AIRLOCK_KEY_PASSWORD").env_remove("SOURCE_DATE_EPOCH").env("RUST_LOG", "warn");
    c.env("PATH", path).env("AIRLOCK_HOST_ROOT", probes.join(host).join("root"));
    c
}

/// A finished command with its exit code and text.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }

    pub fn code(self, code: i32) -> Self {
        assert_eq!(self.code, code, "expected exit {code}\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

pub fn run(cmd: &mut Command) -> Run {
    let Output { status, stdout, stderr } = cmd.output().expect("the command starts");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

pub fn airlock_run(args: &[&str]) -> Run {
    run(airlock().args(args))
}

/// Runs airlock with its cache, docker config and home inside the test's directory `dir`,
/// and a fixed `SOURCE_DATE_EPOCH`.
#[allow(dead_code)]
pub fn airlock_in(dir: &Path, args: &[&str]) -> Run {
    run(airlock_at(dir).args(args))
}

/// `airlock_in`'s command, for a test that sets more of its environment.
#[allow(dead_code)]
pub fn airlock_at(dir: &Path) -> Command {
    let mut c = airlock();
    c.env("AIRLOCK_CACHE", dir.join("cache"))
        .env("DOCKER_CONFIG", dir.join("docker"))
        .env_remove("REGISTRY_AUTH_FILE")
        .env("HOME", dir)
        .env("SOURCE_DATE_EPOCH", EPOCH);
    c
}

pub struct Keys {
    pub private: PathBuf,
    pub public: PathBuf,
}

/// An unencrypted key pair made by `airlock keygen`.
pub fn keygen(dir: &Path, name: &str) -> Keys {
    airlock_run(&["keygen", "--out-dir", s(dir), "--name", name]).ok();
    Keys { private: dir.join(format!("{name}.key")), public: dir.join(format!("{name}.pub")) }
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// A project directory with a spec naming two local files (one firmware with notes).
pub struct Project {
    pub dir: PathBuf,
    pub spec: PathBuf,
}

pub fn project(dir: &Path, version: &str) -> Project {
    std::fs::create_dir_all(dir.join("fw")).unwrap();
    std::fs::write(dir.join("fw/board.bin"), pattern(70_000, 3)).unwrap();
    std::fs::write(dir.join("notes.txt"), format!("release notes for {version}\n")).unwrap();
    let spec = dir.join("airlock.toml");
    std::fs::write(
        &spec,
        format!(
            r#"[bundle]
name = "demo"
version = "{version}"

[[file]]
name = "board.bin"
source = "fw/board.bin"
kind = "firmware"
notes = {{ board = "MI300X", min_version = "01.25.05.00" }}

[[file]]
name = "notes.txt"
source = "notes.txt"
kind = "document"

[[validation.target]]
gpu = "MI300X"
gfx = "gfx942"
os = ["ubuntu 24.04"]
kernel = ["6.8.*"]
amdgpu = ">=6.12"
rocm = "7.0.*"
firmware = {{ PLDM_BUNDLE = ">=01.25.05.00" }}
partition = {{ compute = ["SPX"], memory = ["NPS1"] }}
virtualization = ["baremetal"]
"#
        ),
    )
    .unwrap();
    Project { dir: dir.to_owned(), spec }
}

/// Deterministic non-trivial bytes.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut block = Sha256::digest([seed]).to_vec();
    while out.len() < len {
        block = Sha256::digest(&block).to_vec();
        out.extend_from_slice(&block);
    }
    out.truncate(len);
    out
}

pub fn build(project: &Project, keys: &Keys, out: &Path) -> Run {
    run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).args([
        "build",
        s(&project.spec),
        "--key",
        s(&keys.private),
        "--out",
        s(out),
    ]))
}

pub fn sha256_file(path: &Path) -> String {
    hex(&Sha256::digest(std::fs::read(path).unwrap()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// A site's record of a refused or failed action (`records/*.json` with such an `outcome`):
/// evidence that an action was refused, which is all a refused action may leave.
pub fn is_refusal_record(path: &Path) -> bool {
    let in_records = path.parent().and_then(Path::file_name) == Some("records".as_ref());
    in_records
        && std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|r| matches!(r["outcome"].as_str(), Some("refused" | "failed")))
}

/// Every path below `root` with its type and content digest or link target: equal snapshots
/// mean nothing was added, removed or changed (a record of a refusal aside: every refused
/// action leaves one).
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    if !root.exists() {
        return out;
    }
    for entry in walkdir::WalkDir::new(root).follow_links(false).sort_by_file_name() {
        let entry = entry.unwrap();
        let path = entry.path().to_owned();
        if is_refusal_record(&path) || (entry.file_type().is_dir() && path.file_name() == Some("records".as_ref())) {
            continue;
        }
        let ft = entry.file_type();
        let what = if ft.is_symlink() {
            format!("link {}", std::fs::read_link(&path).unwrap().display())
        } else if ft.is_dir() {
            "dir".to_owned()
        } else if ft.is_file() {
            format!("file {}", sha256_file(&path))
        } else {
            "special".to_owned()
        };
        out.insert(path, what);
    }
    out
}

pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

pub fn validator(name: &str) -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo(&format!("schemas/{name}"))).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name} is a valid schema: {e}"))
}

pub fn toml_as_json(text: &str) -> serde_json::Value {
    serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap()
}

pub fn schema_errors(v: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path)).collect()
}

/// The manifest member's JSON, read straight from the archive.
pub fn manifest_member(bundle: &Path) -> serde_json::Value {
    let file = std::fs::File::open(bundle).unwrap();
    let mut archive = tar::Archive::new(zstd::stream::read::Decoder::new(file).unwrap());
    let mut first = archive.entries().unwrap().next().unwrap().unwrap();
    assert_eq!(first.path_bytes().as_ref(), b"airlock/manifest.json");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut first, &mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

pub fn helper(name: &str) -> String {
    repo(&format!("tests/helpers/{name}")).to_str().unwrap().to_owned()
}

pub fn make_wheel(dir: &std::path::Path, name: &str, version: &str, tag: &str) -> std::path::PathBuf {
    let out =
        run(std::process::Command::new("python3").args([&helper("make_wheel.py"), s(dir), name, version, tag])).ok();
    std::path::PathBuf::from(out.stdout.trim())
}

/// `airlock sbom BUNDLE --out OUT`, checked by `tests/helpers/check_sbom.py` (the official
/// `CycloneDX` schema its `specVersion` names, and the purl rules): the document, and what the
/// checker printed (`TYPE SHA256 CLASS` per hashed component).
#[allow(dead_code)]
pub fn checked_sbom(bundle: &Path, out: &Path) -> (serde_json::Value, String) {
    airlock_run(&["sbom", s(bundle), "--out", s(out)]).ok();
    let checked =
        run(Command::new("python3").args([&helper("check_sbom.py"), s(&repo("schemas/cyclonedx")), s(out)])).ok();
    (serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap(), checked.stdout)
}

/// Extract the bundle's SBOM with `airlock sbom` into `dir/sbom.cdx.json`, validate it against
/// the official `CycloneDX` schema (`tests/helpers/check_sbom.py`), check that every component
/// hash is the digest of a member the manifest lists, and return the `purltype:class` pairs.
pub fn sbom_components(bundle: &Path, dir: &Path) -> std::collections::BTreeSet<String> {
    let (_, checked) = checked_sbom(bundle, &dir.join("sbom.cdx.json"));
    let manifest = manifest_member(bundle);
    let digests: Vec<&str> =
        manifest["entries"].as_array().unwrap().iter().map(|e| e["sha256"].as_str().unwrap()).collect();
    let mut types = std::collections::BTreeSet::new();
    for line in checked.lines() {
        let mut it = line.split_whitespace();
        let (purl_type, sha, class) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        types.insert(format!("{purl_type}:{class}"));
        assert!(digests.contains(&sha), "{line}: the hash is a listed member's digest");
    }
    types
}

/// `openssl dgst -sha256 -verify KEY -signature SIG DATA`: an outside check of an ECDSA signature.
pub fn openssl_verify(key: &Path, signature: &Path, data: &Path) -> Run {
    run(Command::new("openssl").args(["dgst", "-sha256", "-verify", s(key), "-signature", s(signature), s(data)]))
}

pub fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

/// `pip download --no-deps REQUIREMENT` from the PEP 503 index at `simple` (a directory, read
/// as `file://`) into `out`: what a site user does with the published wheel view.
pub fn pip_download(simple: &Path, out: &Path, requirement: &str) -> Run {
    let index = format!("file://{}", simple.display());
    let args = ["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-cache-dir"];
    run(Command::new("python3").args(args).args(["--index-url", &index, "-d", s(out), requirement]))
}

/// A minimal OCI image layout (one empty-tar layer) named `demo/app:1.0`, as a local image source.
pub fn oci_layout(dir: &Path) {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let blob = |bytes: &[u8]| {
        let hex = hex(&<sha2::Sha256 as sha2::Digest>::digest(bytes));
        std::fs::write(blobs.join(&hex), bytes).unwrap();
        (format!("sha256:{hex}"), bytes.len())
    };
    let (layer, layer_size) = blob(&[0u8; 1024]);
    let config =
        format!(r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":["{layer}"]}}}}"#);
    let (config, config_size) = blob(config.as_bytes());
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config}","size":{config_size}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{layer}","size":{layer_size}}}]}}"#
    );
    let (manifest, manifest_size) = blob(manifest.as_bytes());
    std::fs::write(
        dir.join("index.json"),
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{manifest}","size":{manifest_size},"annotations":{{"org.opencontainers.image.ref.name":"demo/app:1.0"}}}}]}}"#
        ),
    )
    .unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
}

/// A temporary directory with a build key and the two-file demo project built into a bundle.
pub struct Built {
    pub t: tempfile::TempDir,
    pub keys: Keys,
    pub project: Project,
    pub bundle: PathBuf,
    /// What `build` printed.
    pub stdout: String,
}

pub fn built_project() -> Built {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let project = project(&t.path().join("p"), "1.0.0");
    let bundle = t.path().join("b.airlock");
    let stdout = build(&project, &keys, &bundle).ok().stdout;
    Built { t, keys, project, bundle, stdout }
}

/// A site root after installs that all failed: nothing but its skeleton (an empty `.lock`,
/// which is never unlinked, an empty `staging/`, and the records of the refusals), or no root
/// at all.
pub fn assert_nothing_installed(root: &Path) {
    if !root.exists() {
        return;
    }
    let mut names: Vec<String> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    // A refusal leaves its record, and nothing else.
    if names.iter().any(|n| n == "records") {
        for r in std::fs::read_dir(root.join("records")).unwrap() {
            let path = r.unwrap().path();
            assert!(is_refusal_record(&path), "{} records a refusal", path.display());
        }
        names.retain(|n| n != "records");
    }
    assert_eq!(names, [".lock", "staging"], "only the skeleton is left in {}", root.display());
    assert_eq!(std::fs::read(root.join(".lock")).unwrap(), b"", "the lock's note is cleared");
    assert_eq!(std::fs::read_dir(root.join("staging")).unwrap().count(), 0, "nothing is left in staging/");
}

/// A support-matrix row the recorded 8x MI300X host (`airlock()`'s) meets in every field.
#[allow(dead_code)]
pub const MI300X_ROW: &str = r#"gpu = "MI300X"
gfx = "gfx942"
os = ["ubuntu 24.04"]
kernel = ["6.8.*"]
amdgpu = ">=6.12"
rocm = "7.0.*"
firmware = { PLDM_BUNDLE = ">=01.25.05.00" }
partition = { compute = ["SPX"], memory = ["NPS1"] }
virtualization = ["baremetal"]"#;
