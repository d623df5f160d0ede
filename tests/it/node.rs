//! A GPU node on a real Debian system: `airlock apply` inside a `debootstrap --variant=minbase`
//! system of the suite this machine's apt uses (`scripts/node-fixture.sh`, cached under
//! `target/`), entered offline (`unshare -n chroot`). The bundles carry a real closure from
//! that suite's archive (served from its partial mirror on 127.0.0.1, locked with the
//! archive's own keyring) and a fixture package shaped like `ROCm` whose version file and RVS the
//! probe and the checks read, so the gate judges the stack that is actually installed.
//!
//! Needs root (chroot, unshare). Fails, never skips, when the fixture is missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::http::HttpServer;
use crate::common::*;

/// The cached minbase system and partial mirror.
fn fixture() -> PathBuf {
    let dir = std::env::var_os("AIRLOCK_NODE_FIXTURE")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/node-fixture"), PathBuf::from);
    assert!(
        dir.join("ready").is_file(),
        "the node fixture `{}` is missing: run `sudo scripts/node-fixture.sh` (scripts/test.sh does)",
        dir.display()
    );
    dir
}

/// A copy of the minbase system with this airlock in it, recorded GPU tools on its PATH and
/// the recorded host's kernel and sysfs files under `/host` (its `/etc` and `/opt` are the
/// system's own, so the probe reads the `ROCm` version the packages installed).
struct Node {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Node {
    fn new(fixture: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        run(Command::new("cp").args(["-a", s(&fixture.join("minbase")), s(&root)])).ok();
        std::fs::copy(env!("CARGO_BIN_EXE_airlock"), root.join("usr/local/bin/airlock")).unwrap();
        let probes = repo("testdata/probes/mi300x");
        std::fs::create_dir_all(root.join("opt/recorded/bin")).unwrap();
        for tool in ["amd-smi", "rocminfo"] {
            std::fs::copy(probes.join("bin").join(tool), root.join("opt/recorded/bin").join(tool)).unwrap();
        }
        run(Command::new("cp").args(["-a", s(&probes.join("out")), s(&root.join("opt/recorded/out"))])).ok();
        std::fs::create_dir_all(root.join("host")).unwrap();
        for d in ["proc", "sys"] {
            run(Command::new("cp").args(["-a", s(&probes.join("root").join(d)), s(&root.join("host"))])).ok();
        }
        std::os::unix::fs::symlink("/etc", root.join("host/etc")).unwrap();
        std::os::unix::fs::symlink("/opt", root.join("host/opt")).unwrap();
        // dpkg's status: the inventory, and the stack's version from its packages.
        std::os::unix::fs::symlink("/var", root.join("host/var")).unwrap();
        std::fs::create_dir_all(root.join("work")).unwrap();
        Self { _dir: dir, root }
    }

    /// `airlock ARGS` inside the system, without a network.
    fn airlock(&self, args: &[&str]) -> Run {
        let mut c = Command::new("unshare");
        c.args(["-n", "chroot", s(&self.root), "/usr/bin/env", "-i"]).args([
            "PATH=/opt/recorded/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "AIRLOCK_HOST_ROOT=/host",
            "RUST_LOG=warn",
            "/usr/local/bin/airlock",
        ]);
        run(c.args(args))
    }

    /// `airlock ARGS` inside the system, in a network namespace of its own where `dir` (a
    /// mirror's `public/`) is served on 127.0.0.1:8765 by nginx: the node reaches that mirror
    /// and nothing else. nginx's access log (`URI STATUS BYTES "RANGE"` a line) is appended to
    /// `DIR.log`.
    fn airlock_beside_server(&self, dir: &Path, args: &[&str]) -> Run {
        let conf_dir = tempfile::tempdir().unwrap();
        std::fs::write(conf_dir.path().join("nginx.conf"), nginx::conf(dir, 8765, conf_dir.path())).unwrap();
        let script = r#"ip link set lo up
nginx -e "$1/error.log" -c "$1/nginx.conf" &
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null && break; sleep 0.1; done
conf=$1; root=$2; log=$3; shift 3
chroot "$root" /usr/bin/env -i PATH=/opt/recorded/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  AIRLOCK_HOST_ROOT=/host RUST_LOG=warn /usr/local/bin/airlock "$@" < /dev/null
status=$?
kill %1; wait
cat "$conf/access.log" >> "$log" 2>/dev/null
exit $status"#;
        let log = format!("{}.log", dir.display());
        let mut c = Command::new("unshare");
        c.args(["-n", "bash", "-c", script, "node", s(conf_dir.path()), s(&self.root), &log]);
        run(c.args(args))
    }

    /// A file copied into the system's `/work`, and its path there.
    fn put(&self, file: &Path) -> String {
        let name = file.file_name().unwrap().to_str().unwrap();
        std::fs::copy(file, self.root.join("work").join(name)).unwrap();
        format!("/work/{name}")
    }

    /// What dpkg says is installed.
    fn packages(&self) -> BTreeMap<String, String> {
        let out =
            run(Command::new("chroot").args([s(&self.root), "dpkg-query", "-W", "-f", "${Package}\t${Version}\n"]))
                .ok();
        out.stdout.lines().filter_map(|l| l.split_once('\t')).map(|(p, v)| (p.to_owned(), v.to_owned())).collect()
    }

    fn records(&self) -> Vec<serde_json::Value> {
        let dir = self.root.join("var/lib/airlock/records");
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        paths.iter().map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()).collect()
    }
}

/// Builds bundles of one stack at several versions from the served archive and stack repo.
struct Stack {
    dir: tempfile::TempDir,
    keys: Keys,
    _archive: HttpServer,
    _repo: HttpServer,
    archive_url: String,
    repo_url: String,
}

impl Stack {
    fn new(fixture: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo_dir = dir.path().join("stack");
        std::fs::create_dir_all(&repo_dir).unwrap();
        run(Command::new("bash").args([&helper("make_node_repo.sh"), s(&repo_dir), s(&repo("testdata/probes"))])).ok();
        let archive = HttpServer::start(&fixture.join("archive"));
        let stack = HttpServer::start(&repo_dir.join("repo"));
        let keys = keygen(&dir.path().join("keys"), "build");
        let (archive_url, repo_url) = (archive.url.clone(), stack.url.clone());
        Self { dir, keys, _archive: archive, _repo: stack, archive_url, repo_url }
    }

    /// Bundle `version` carrying the archive's `jq` and `libfile-which-perl` closure and
    /// `stack` (`name=version` pins from the stack repository).
    fn bundle(&self, version: &str, stack: &[&str]) -> PathBuf {
        self.bundle_with(version, stack, VALIDATION)
    }

    /// The same with another `[validation]` (its TOML, tables included).
    fn bundle_with(&self, version: &str, stack: &[&str], validation: &str) -> PathBuf {
        let spec = self.spec(version, stack, validation);
        self.build(&spec, &format!("gpu-stack-{version}"))
    }

    /// The spec of bundle `version` (`p-VERSION/airlock.toml`).
    fn spec(&self, version: &str, stack: &[&str], validation: &str) -> PathBuf {
        let p = self.dir.path().join(format!("p-{version}"));
        std::fs::create_dir_all(&p).unwrap();
        let suite = std::fs::read_to_string(fixture().join("ready")).unwrap();
        let suite = suite.split_whitespace().next().unwrap().to_owned();
        let stack_list = stack.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", ");
        let spec = format!(
            r#"[bundle]
name = "gpu-stack"
version = "{version}"

[[deb]]
repo = "{archive}"
suite = "{suite}"
components = ["main"]
arch = "amd64"
packages = ["jq", "libfile-which-perl"]
keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
resolve = true

[[deb]]
repo = "{stack_repo}"
suite = "node"
components = ["main"]
arch = "amd64"
packages = [{stack_list}]
keyring = "{keyring}"

{validation}"#,
            archive = self.archive_url,
            stack_repo = self.repo_url,
            keyring = self.dir.path().join("stack/keyring.gpg").display(),
        );
        std::fs::write(p.join("airlock.toml"), spec).unwrap();
        p.join("airlock.toml")
    }

    /// `airlock ARGS` on the build host, with this stack's cache.
    fn host(&self, dir: &Path, args: &[&str]) -> Run {
        run(airlock().env("AIRLOCK_CACHE", self.dir.path().join("cache")).current_dir(dir).args(args))
    }

    /// `spec` locked and built into `NAME.airlock`.
    fn build(&self, spec: &Path, name: &str) -> PathBuf {
        let out = self.dir.path().join(format!("{name}.airlock"));
        let dir = spec.parent().unwrap();
        self.host(dir, &["lock", s(spec)]).ok();
        self.host(dir, &["build", s(spec), "--locked", "--key", s(&self.keys.private), "--out", s(&out)]).ok();
        out
    }
}

/// The stack's matrix row and check: the recorded MI300X host on this Debian system.
const VALIDATION: &str = r#"[[validation.target]]
gpu = "MI300X"
gfx = "gfx942"
os = ["debian 12"]
kernel = ["6.8.*"]
amdgpu = ">=6.12"
rocm = "10.0.*"
partition = { compute = ["SPX"], memory = ["NPS1"] }
virtualization = ["baremetal"]

[[validation.check]]
name = "rvs-gst"
run = ["/opt/rocm/bin/rvs", "-c", "gst_single.conf"]
timeout_s = 60
"#;

/// Every `.deb` under `dir`.
fn walk_debs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk_debs(&path));
        } else if path.extension().is_some_and(|e| e == "deb") {
            out.push(path);
        }
    }
    out
}

fn version_of<'a>(packages: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    packages.get(name).map(String::as_str)
}

#[test]
fn a_node_applies_a_stack_judges_it_installed_restores_red_and_rolls_back() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b1 = stack.bundle("1.0.0", &["airlock-rocm-core=10.0.0-1"]);
    let b2 = stack.bundle("2.0.0", &["airlock-rocm-core=10.0.1-1"]);
    let b3 = stack.bundle("3.0.0", &["airlock-rocm-core=10.0.2-1"]);
    let node = Node::new(&fixture);
    let pristine = node.packages();
    let key = node.put(&stack.keys.public);
    let apply = |bundle: &Path, extra: &[&str]| {
        let file = node.put(bundle);
        node.airlock(&[&["apply", &file, "--trust", &key, "--root", "/var/lib/airlock"][..], extra].concat())
    };

    // Bundle 1 on a fresh minbase system: the closure (perl included: a minimal system does
    // not have it, whatever `usrmerge | usr-is-merged` suggests) and the stack, at exactly
    // the locked versions; the gate judged ROCm 10.0.0-1 as installed.
    let r = apply(&b1, &["--json"]).ok();
    let done = r.json();
    assert_eq!(done["validation"]["verdict"], "green", "{}", r.stdout);
    let after1 = node.packages();
    assert_eq!(version_of(&after1, "airlock-rocm-core"), Some("10.0.0-1"));
    for p in ["jq", "libjq1", "libonig5", "libfile-which-perl", "perl"] {
        assert!(after1.contains_key(p) && !pristine.contains_key(p), "{p} was installed by the apply");
    }
    // Issue 76: what the closure pulled in is marked automatic, as apt marks it; what the spec
    // names stays manual.
    let auto = run(Command::new("chroot").arg(&node.root).args(["apt-mark", "showauto"])).ok().stdout;
    let auto: Vec<&str> = auto.lines().collect();
    let (deps, named) = (["libjq1", "libonig5", "perl"], ["jq", "libfile-which-perl", "airlock-rocm-core"]);
    assert!(deps.iter().all(|p| auto.contains(p)) && !named.iter().any(|p| auto.contains(p)), "{auto:?}");
    // Each phase's time, as the record has it.
    for phase in ["verify", "plan", "stage", "baseline", "packages", "validate", "switch"] {
        assert!(done["phases"][phase].as_f64().is_some(), "{phase} timed: {}", r.stdout);
    }
    let installed: Vec<&str> =
        done["packages"]["installed"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(installed.contains(&"jq") && installed.contains(&"airlock-rocm-core"), "{installed:?}");

    // A dry run of bundle 2 says what would change, with apt's simulation, and changes nothing.
    let records_before = node.records().len();
    let site_before = snapshot(&node.root.join("var/lib/airlock"));
    let r = apply(&b2, &["--dry-run"]).ok();
    assert!(
        r.stdout.contains("airlock-rocm-core 10.0.0-1 → 10.0.1-1") && r.stdout.contains("Inst airlock-rocm-core"),
        "{}",
        r.stdout
    );
    assert_eq!(node.packages(), after1);
    assert_eq!(node.records().len(), records_before, "a dry run writes no record");
    assert_eq!(snapshot(&node.root.join("var/lib/airlock")), site_before, "a dry run writes nothing under the root");
    // Nor does it make a root that is not there.
    let file = node.put(&b2);
    node.airlock(&["apply", &file, "--trust", &key, "--root", "/var/lib/fresh", "--dry-run"]).ok();
    assert!(!node.root.join("var/lib/fresh").exists(), "a dry run made the root it was pointed at");

    // Bundle 2: upgraded.
    let r = apply(&b2, &["--json"]).ok();
    assert_eq!(r.json()["packages"]["upgraded"][0]["name"], "airlock-rocm-core", "{}", r.stdout);
    let after2 = node.packages();
    assert_eq!(version_of(&after2, "airlock-rocm-core"), Some("10.0.1-1"));

    // Bundle 3's stack fails RVS: red on the stack installed, the host put back, exit 4, and
    // the record holds the red evidence, what was restored and the restored host's verdict.
    let r = apply(&b3, &[]).code(4);
    assert!(r.stderr.contains("red"), "{}", r.stderr);
    assert_eq!(node.packages(), after2, "the host is as it was before bundle 3");
    let last = node.records().pop().unwrap();
    assert_eq!(last["action"], "apply");
    assert_eq!(last["outcome"], "restored", "{}", last["reason"]);
    assert_eq!(last["validation"]["verdict"], "red");
    assert_eq!(last["packages"]["upgraded"][0]["after"], "10.0.2-1");
    assert_eq!(last["restored"]["downgraded"][0]["after"], "10.0.1-1");
    // The step that failed, the restore timed as its own phase, and the restored host judged
    // against the bundle it went back to (2.0.0, whose stack passes): green.
    assert_eq!(last["failed_in"], "validate", "{last}");
    assert!(last["phases"]["restore"].as_f64().is_some(), "{}", last["phases"]);
    assert_eq!(last["restored_validation"]["verdict"], "green");
    assert!(last["restored_validation"]["checks"][0]["summary"].as_str().unwrap_or("").contains("passed"), "{last}");
    // Nor is bundle 3 kept: retained, it would raise the anti-downgrade mark to a release this
    // node never ran.
    let retained = std::fs::read_dir(node.root.join("var/lib/airlock/bundles")).unwrap().count();
    assert_eq!(retained, 2, "bundles 1 and 2 only");

    // Rollback on a node puts bundle 1's package set back (a downgrade) and validates it.
    let r = node.airlock(&["rollback", "--root", "/var/lib/airlock", "--json"]).ok();
    let rolled = r.json();
    assert_eq!(rolled["version"], "1.0.0", "{}", r.stdout);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
    assert_eq!(rolled["packages"]["downgraded"][0]["name"], "airlock-rocm-core");
    for phase in ["verify", "packages", "validate", "switch"] {
        assert!(rolled["phases"].get(phase).is_some(), "{phase} timed: {}", r.stdout);
    }
    let status = node.airlock(&["status", "--root", "/var/lib/airlock", "--json"]).ok().json();
    assert_eq!(status["rollbacks"]["count"], 1, "{status}");

    // Every record the node wrote is what the published schema says.
    let schema = validator("record.v1.json");
    for record in node.records() {
        assert_eq!(schema_errors(&schema, &record), Vec::<String>::new(), "{}", record["action"]);
    }
}

#[test]
fn a_change_that_needs_a_reboot_waits_for_validate_commit() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b1 = stack.bundle("1.0.0", &["airlock-rocm-core=10.0.0-1", "airlock-amdgpu-dkms=1.0-1"]);
    let b2 = stack.bundle("2.0.0", &["airlock-rocm-core=10.0.1-1"]);
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);
    let f2 = node.put(&b2);
    // Bundle 1 arrives as an OCI artifact in an image layout (what `airlock copy` puts on media).
    let layout = stack.dir.path().join("layout");
    run(airlock().args(["push", s(&b1), &format!("oci-layout:{}:1.0.0", layout.display())])).ok();
    run(Command::new("cp").args(["-a", s(&layout), s(&node.root.join("layout"))])).ok();
    let r = node.airlock(&["apply", "oci-layout:/layout:1.0.0", "--trust", &key, "--root", "/var/lib/airlock"]).code(5);
    assert!(r.stdout.contains("pending reboot") && r.stdout.contains("airlock-amdgpu-dkms"), "{}", r.stdout);
    let status = node.airlock(&["status", "--root", "/var/lib/airlock", "--json"]).ok().json();
    assert_eq!(status["pending"]["version"], "1.0.0", "{status}");
    assert!(status["current"].is_null(), "nothing is committed before the reboot: {status}");
    let r = node.airlock(&["apply", &f2, "--trust", &key, "--root", "/var/lib/airlock"]).code(1);
    assert!(r.stderr.contains("waits for a reboot") && r.stderr.contains("validate --commit"), "{}", r.stderr);

    // The reboot: the flag file goes, as it does at boot.
    std::fs::remove_file(node.root.join("run/reboot-required")).unwrap();
    let r = node.airlock(&["validate", "--root", "/var/lib/airlock", "--commit", "--json"]).ok();
    assert_eq!(r.json()["verdict"], "green", "{}", r.stdout);
    let status = node.airlock(&["status", "--root", "/var/lib/airlock", "--json"]).ok().json();
    assert!(status["pending"].is_null(), "{status}");
    assert_eq!(status["current"]["version"], "1.0.0", "{status}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "a mirror's life with one node: apply, rollback, refusal, a restored release")]
fn a_mirror_without_gpus_serves_nodes_that_apply_from_its_url() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b1 = stack.bundle("1.0.0", &["airlock-rocm-core=10.0.0-1"]);
    let b2 = stack.bundle("2.0.0", &["airlock-rocm-core=10.0.1-1"]);

    // The mirror has no GPU at all: `--role mirror` verifies, stages and publishes without
    // validation (the host role would say "no GPU detected"), and says so on record.
    let site = stack.dir.path().join("mirror");
    let mirror = |bundle: &Path| {
        run(on_host("nogpu")
            .args(["install", s(bundle), "--trust", s(&stack.keys.public), "--root", s(&site)])
            .args(["--role", "mirror", "--json"]))
    };
    let r = mirror(&b1).ok();
    assert_eq!(r.json()["validation"], serde_json::Value::Null, "{}", r.stdout);
    let host = run(on_host("nogpu").args([
        "install",
        s(&b1),
        "--trust",
        s(&stack.keys.public),
        "--root",
        s(&stack.dir.path().join("host")),
    ]))
    .code(4);
    assert!(host.stderr.contains("red"), "the host role judges this GPU-less host: {}", host.stderr);

    // A node reads the mirror's root from a plain web server (inside its own network
    // namespace: the node is offline but for the mirror), checks the signed manifest, fetches
    // the bundle, and applies it.
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);
    let served = node
        .airlock_beside_server(
            &site.join("public"),
            &["apply", "http://127.0.0.1:8765/", "--trust", &key, "--root", "/var/lib/airlock", "--json"],
        )
        .ok();
    assert_eq!(served.json()["validation"]["verdict"], "green", "{}", served.stdout);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
    // The node fetched and keeps only the signed manifest and the packages: the images,
    // models and files stay on the mirror.
    let kept = node.root.join("var/lib/airlock/current");
    assert!(kept.join("debs/Packages").is_file() && kept.join("airlock/manifest.json").is_file());
    assert!(!kept.join("bundle.airlock").exists(), "no bundle file on the node");
    assert!(site.join("current/debs/Packages").is_file());

    // The mirror moves to bundle 2; a node that mounts the mirror's root applies from files.
    mirror(&b2).ok();
    run(Command::new("cp").args(["-a", s(&site), s(&node.root.join("mirror"))])).ok();
    let r = node.airlock(&["apply", "file:///mirror/", "--trust", &key, "--root", "/var/lib/airlock", "--json"]).ok();
    assert_eq!(r.json()["packages"]["upgraded"][0]["after"], "10.0.1-1", "{}", r.stdout);
    node.airlock(&["check", "--root", "/var/lib/airlock"]).ok();

    // What the node keeps is verified again before a rollback uses it: a swapped package in
    // the previous bundle is named by check and refused by rollback (exit 3).
    let previous = node.root.join("var/lib/airlock/previous/debs");
    let deb = walk_debs(&previous).into_iter().find(|p| p.to_string_lossy().contains("airlock-rocm-core")).unwrap();
    let original = std::fs::read(&deb).unwrap();
    std::fs::write(&deb, b"not the package").unwrap();
    let r = node.airlock(&["check", "--root", "/var/lib/airlock"]).code(3);
    assert!(r.stdout.contains("airlock-rocm-core"), "{}", r.stdout);
    node.airlock(&["rollback", "--root", "/var/lib/airlock"]).code(3);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.1-1"));
    std::fs::write(&deb, original).unwrap();
    // A rollback whose stack is red on this host (its amdgpu is now below the matrix's
    // floor): the newer set is put back, exit 4, and the node stays on bundle 2.
    let amdgpu = node.root.join("host/sys/module/amdgpu/version");
    let live = std::fs::read_to_string(&amdgpu).unwrap();
    std::fs::write(&amdgpu, "6.10.5\n").unwrap();
    let r = node.airlock(&["rollback", "--root", "/var/lib/airlock"]).code(4);
    assert!(r.stderr.contains("amdgpu"), "{}", r.stderr);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.1-1"));
    let last = node.records().pop().unwrap();
    assert_eq!(
        (last["action"].as_str(), last["outcome"].as_str()),
        (Some("rollback"), Some("restored")),
        "{}",
        last["reason"]
    );
    std::fs::write(&amdgpu, live).unwrap();
    let r = node.airlock(&["rollback", "--root", "/var/lib/airlock", "--json"]).ok();
    assert_eq!(r.json()["version"], "1.0.0", "{}", r.stdout);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));

    // A mirror whose current manifest is not signed by the node's key: nothing is downloaded.
    let other = keygen(&stack.dir.path().join("other"), "other");
    let other_key = node.put(&other.public);
    let r = node
        .airlock_beside_server(
            &site.join("public"),
            &["apply", "http://127.0.0.1:8765/", "--trust", &other_key, "--root", "/var/lib/airlock"],
        )
        .code(3);
    assert!(
        r.stderr.contains("signed by 0 trusted key(s)") && r.stderr.contains("nothing was downloaded"),
        "{}",
        r.stderr
    );

    // Issue 76: a release red after its change is restored, and what the node fetched for it
    // stays under downloads/ID: trying it again fetches nothing.
    let b3 = stack.build(&stack.spec("3.0.0", &["airlock-rocm-core=10.0.2-1"], VALIDATION), "gpu-stack-3.0.0");
    mirror(&b3).ok();
    let apply = || {
        let args = ["apply", "http://127.0.0.1:8765/", "--trust", &key, "--root", "/var/lib/airlock"];
        node.airlock_beside_server(&site.join("public"), &args).code(4)
    };
    apply();
    let first = node.records().pop().unwrap();
    assert_eq!(first["outcome"], "restored", "{}", first["reason"]);
    assert!(first["transfer"]["fetched"]["files"].as_u64().unwrap() > 0, "{}", first["transfer"]);
    let held: Vec<_> = std::fs::read_dir(node.root.join("var/lib/airlock/downloads")).unwrap().collect();
    assert_eq!(held.len(), 1, "the restored release's packages are kept");
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
    apply();
    let second = node.records().pop().unwrap();
    assert_eq!(second["outcome"], "restored", "{}", second["reason"]);
    let (fetched, reused) = (&second["transfer"]["fetched"], &second["transfer"]["reused"]);
    assert_eq!(fetched["files"], 0, "nothing fetched again: {}", second["transfer"]);
    let total =
        |t: &serde_json::Value| t["fetched"]["files"].as_u64().unwrap() + t["reused"]["files"].as_u64().unwrap();
    assert_eq!(reused["files"].as_u64().unwrap(), total(&first["transfer"]), "{}", second["transfer"]);
    node.airlock(&["check", "--root", "/var/lib/airlock"]).ok();
}

/// Issue 78: a node applies from a rack's relay exactly what it applies from the mirror: the
/// same bundle, the same package bytes installed, the same green verdict.
#[test]
fn a_node_applies_from_a_relay_what_it_applies_from_the_mirror() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b1 = stack.bundle("1.0.0", &["airlock-rocm-core=10.0.0-1"]);
    let site = stack.dir.path().join("mirror");
    let key = s(&stack.keys.public);
    run(on_host("nogpu").args(["install", s(&b1), "--trust", key, "--root", s(&site), "--role", "mirror"])).ok();
    let relay = stack.dir.path().join("relay");
    let upstream = format!("file://{}/", site.join("public").display());
    let relayed = run(on_host("nogpu").args(["install", &upstream, "--role", "relay", "--trust", key]).args([
        "--root",
        s(&relay),
        "--json",
    ]))
    .ok()
    .json();
    let (direct, via) = (Node::new(&fixture), Node::new(&fixture));
    let apply = |node: &Node, public: &Path| {
        let key = node.put(&stack.keys.public);
        let args = ["apply", "http://127.0.0.1:8765/", "--trust", &key, "--root", "/var/lib/airlock", "--json"];
        node.airlock_beside_server(public, &args).ok().json()
    };
    let from_mirror = apply(&direct, &site.join("public"));
    let from_relay = apply(&via, &relay.join("public"));
    assert_eq!(
        (from_relay["id"].as_str(), from_mirror["id"].as_str()),
        (relayed["id"].as_str(), relayed["id"].as_str())
    );
    assert_eq!(from_relay["validation"]["verdict"], "green", "{from_relay}");
    assert_eq!(version_of(&via.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
    assert_eq!(via.packages(), direct.packages(), "the same packages installed");
    let debs = |node: &Node| -> Vec<Vec<u8>> {
        walk_debs(&node.root.join("var/lib/airlock/current/debs")).iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    assert_eq!(debs(&via), debs(&direct), "the same package bytes");
    via.airlock(&["check", "--root", "/var/lib/airlock"]).ok();
}

#[test]
fn changes_that_cannot_be_undone_are_refused_and_a_failed_change_is_put_back() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b2 = stack.bundle("2.0.0", &["airlock-rocm-core=10.0.1-1"]);
    let broken = stack.bundle("3.0.0", &["airlock-rocm-core=10.0.1-1", "airlock-broken=1.0-1"]);
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);

    // The admin installed ROCm 10.0.0-1 by hand: no view this node retains holds it, so the
    // upgrade could not be undone. Refused, nothing changed; accepted with a reason, applied.
    let deb = stack.dir.path().join("stack/repo/pool/main/a/airlock-rocm-core/airlock-rocm-core_10.0.0-1_all.deb");
    let by_hand = node.put(&deb);
    run(Command::new("chroot").args([s(&node.root), "dpkg", "-i", &by_hand])).ok();
    let before = node.packages();
    let f2 = node.put(&b2);
    let r = node.airlock(&["apply", &f2, "--trust", &key, "--root", "/var/lib/airlock"]).code(1);
    assert!(
        r.stderr.contains("airlock-rocm-core 10.0.0-1 → 10.0.1-1") && r.stderr.contains("--accept-unrestorable"),
        "{}",
        r.stderr
    );
    assert_eq!(node.packages(), before);
    let r = node
        .airlock(&[
            "apply",
            &f2,
            "--trust",
            &key,
            "--root",
            "/var/lib/airlock",
            "--accept-unrestorable",
            "--reason",
            "CHG-1234: the by-hand install is retired",
        ])
        .ok();
    assert!(r.stdout.contains("airlock-rocm-core 10.0.0-1 → 10.0.1-1"), "{}", r.stdout);
    let after2 = node.packages();

    // A package whose postinst fails: apt's own message, exit 1, and the host put back.
    let f3 = node.put(&broken);
    let r = node.airlock(&["apply", &f3, "--trust", &key, "--root", "/var/lib/airlock"]).code(1);
    assert!(r.stderr.contains("airlock-broken") && r.stderr.contains("put back as they were"), "{}", r.stderr);
    assert_eq!(node.packages(), after2, "the half-configured package is gone");
    let last = node.records().pop().unwrap();
    assert_eq!(
        (last["outcome"].as_str(), last["failed_in"].as_str()),
        (Some("restored"), Some("packages")),
        "{}",
        last["reason"]
    );

    // Issue 76: a bundle locked without `resolve = true` lacks jq's libraries: the node says
    // which dependency is missing and what would carry it, not apt's words alone.
    let spec = stack.spec("4.0.0", &["airlock-rocm-core=10.0.1-1"], VALIDATION);
    let text = std::fs::read_to_string(&spec).unwrap();
    let text =
        text.replacen("resolve = true", "resolve = false", 1).replacen("\"jq\", \"libfile-which-perl\"", "\"jq\"", 1);
    std::fs::write(&spec, text).unwrap();
    let fresh = Node::new(&fixture);
    let (bare, key) = (fresh.put(&stack.build(&spec, "gpu-stack-4.0.0")), fresh.put(&stack.keys.public));
    let pristine = fresh.packages();
    let r = fresh.airlock(&["apply", &bare, "--trust", &key, "--root", "/var/lib/airlock"]).code(1);
    assert!(r.stderr.contains("jq needs libjq1 (= ") && r.stderr.contains("`resolve = true`"), "{}", r.stderr);
    assert_eq!(fresh.packages(), pristine, "nothing changed");
}

#[test]
fn a_host_below_a_firmware_floor_is_refused_before_any_package_is_fetched_or_changed() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let raised = VALIDATION.replace(
        "virtualization = [\"baremetal\"]",
        "virtualization = [\"baremetal\"]\nfirmware = { PLDM_BUNDLE = \">=01.26.00.00\" }",
    );
    let bundle = stack.bundle_with("1.0.0", &["airlock-rocm-core=10.0.0-1"], &raised);
    let site = stack.dir.path().join("mirror");
    run(on_host("nogpu").args([
        "install",
        s(&bundle),
        "--trust",
        s(&stack.keys.public),
        "--root",
        s(&site),
        "--role",
        "mirror",
    ]))
    .ok();
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);
    let (dpkg_log, before) = (std::fs::read(node.root.join("var/log/dpkg.log")).unwrap_or_default(), node.packages());
    let apply = |extra: &[&str]| {
        let args = [&["apply", "http://127.0.0.1:8765/", "--trust", &key, "--root", "/var/lib/airlock"][..], extra];
        node.airlock_beside_server(&site.join("public"), &args.concat())
    };

    // The recorded MI300X reports PLDM_BUNDLE 01.25.05.00: no package can change that, so the
    // apply is refused (exit 4) before a package is fetched from the mirror or apt runs.
    let r = apply(&[]).code(4);
    assert!(r.stderr.contains("pre-flight") && r.stderr.contains("PLDM_BUNDLE"), "{}", r.stderr);
    assert!(r.stderr.contains("GPU 0 (AMD Instinct MI300X)"), "the GPU by its index and name: {}", r.stderr);
    assert_eq!(std::fs::read(node.root.join("var/log/dpkg.log")).unwrap_or_default(), dpkg_log, "dpkg.log unchanged");
    assert_eq!(node.packages(), before);
    let served = std::fs::read_to_string(site.join("public.log")).unwrap();
    assert!(served.contains("manifest.json"), "{served}");
    assert!(!served.contains("/debs/"), "no package was fetched: {served}");
    let last = node.records().pop().expect("the refusal is on record");
    assert_eq!((last["outcome"].as_str(), last["failed_in"].as_str()), (Some("refused"), Some("preflight")), "{last}");
    assert_eq!(last["preflight"]["verdict"], "red", "{last}");
    assert_eq!(last["bundle"]["version"], "1.0.0", "{last}");
    let rows = last["preflight"]["rows"][0]["fields"].as_array().unwrap();
    assert!(rows.iter().all(|f| f["field"] != "rocm"), "the stack's version waits for the change: {last}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &last), Vec::<String>::new());

    // A dry run says the pre-flight verdict too, and is refused alike.
    let r = apply(&["--dry-run"]).code(4);
    assert!(r.stderr.contains("pre-flight"), "{}", r.stderr);
    // Where the floor is met, the dry run shows the pre-flight verdict before what would change.
    let met = stack.bundle_with("1.0.1", &["airlock-rocm-core=10.0.0-1"], VALIDATION);
    let file = node.put(&met);
    let r = node.airlock(&["apply", &file, "--trust", &key, "--root", "/var/lib/airlock", "--dry-run"]).ok();
    assert!(r.stdout.starts_with("pre-flight green"), "{}", r.stdout);
}

#[test]
fn the_stacks_version_comes_from_its_packages_where_no_version_file_is() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let without_checks = VALIDATION.split("\n[[validation.check]]").next().unwrap();
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);
    let apply = |bundle: &Path| {
        let file = node.put(bundle);
        node.airlock(&["apply", &file, "--trust", &key, "--root", "/var/lib/airlock", "--json"])
    };
    let rocm = |done: &serde_json::Value| {
        let field = done["validation"]["rows"][0]["fields"].as_array().unwrap().iter().find(|f| f["field"] == "rocm");
        let field = field.cloned().unwrap_or_default();
        (field["actual"].as_str().unwrap_or("").to_owned(), field["reason"].as_str().unwrap_or("").to_owned())
    };

    // Debian's own HIP runtime: no /opt/rocm/.info/version, no rocm-core. Without
    // `rocm_from` nothing says which ROCm this is: red, and the reason says what to name.
    let distro = without_checks.replace("rocm = \"10.0.*\"", "rocm = \"5.2.*\"");
    let r = apply(&stack.bundle_with("1.0.0", &["libamdhip64-5=5.2.3-3"], &distro)).code(4);
    assert!(r.stderr.contains("rocm_from"), "{}", r.stderr);
    // With `rocm_from = "libamdhip64-5"`: its installed 5.2.3-3 is ROCm 5.2.3, green.
    let named = format!("[validation]\nrocm_from = \"libamdhip64-5\"\n\n{distro}");
    let r = apply(&stack.bundle_with("1.0.1", &["libamdhip64-5=5.2.3-3"], &named)).ok();
    let done = r.json();
    assert_eq!(done["validation"]["verdict"], "green", "{}", r.stdout);
    let (actual, reason) = rocm(&done);
    assert_eq!(actual, "5.2.3");
    assert!(reason.contains("libamdhip64-5 5.2.3-3 (dpkg, rocm_from)"), "the evidence names its source: {reason}");
    let probe = node.airlock(&["probe", "--json", "--root", "/var/lib/airlock"]).ok().json();
    assert_eq!(probe["inventory"]["packages"]["libamdhip64-5"]["version"], "5.2.3-3", "{probe}");

    // AMD's rocm-core without the version file: 10.0.0.100000-42~24.04 is ROCm 10.0.0.
    let r = apply(&stack.bundle_with("2.0.0", &["rocm-core=10.0.0.100000-42~24.04"], without_checks)).ok();
    let done = r.json();
    assert_eq!(done["validation"]["verdict"], "green", "{}", r.stdout);
    let (actual, reason) = rocm(&done);
    assert_eq!(actual, "10.0.0");
    assert!(reason.contains("from rocm-core 10.0.0.100000-42~24.04 (dpkg)"), "{reason}");
    assert!(!node.root.join("opt/rocm/.info/version").exists());
}

#[test]
fn a_node_takes_the_release_it_is_pinned_to_and_its_update_fetches_only_what_changed() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let b1 = stack.bundle("1.0.0", &["airlock-rocm-core=10.0.0-1"]);
    let b2 = stack.bundle("2.0.0", &["airlock-rocm-core=10.0.1-1"]);
    let site = stack.dir.path().join("mirror");
    for b in [&b1, &b2] {
        run(on_host("nogpu").args([
            "install",
            s(b),
            "--trust",
            s(&stack.keys.public),
            "--root",
            s(&site),
            "--role",
            "mirror",
        ]))
        .ok();
    }
    let public = site.join("public");
    let log = site.join("public.log");
    let node = Node::new(&fixture);
    let key = node.put(&stack.keys.public);
    let apply = |extra: &[&str]| {
        let args =
            [&["apply", "http://127.0.0.1:8765/", "--trust", &key, "--root", "/var/lib/airlock", "--json"][..], extra];
        node.airlock_beside_server(&public, &args.concat())
    };
    let debs_served = || -> Vec<String> {
        let requests = nginx::read_log(&log);
        std::fs::write(&log, "").unwrap();
        requests
            .into_iter()
            .filter(|r| Path::new(&r.uri).extension().is_some_and(|x| x == "deb"))
            .map(|r| r.uri)
            .collect()
    };

    // The mirror's current is 2.0.0; the node is pinned to 1.0.0 and takes it.
    let r = apply(&["--release", "1.0.0"]).ok();
    assert_eq!(r.json()["version"], "1.0.0", "{}", r.stdout);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
    let first = debs_served();
    assert!(first.len() > 2, "the whole package set the first time: {first:?}");

    // A dry run of the update fetches no package and changes nothing: state, records, packages.
    let var = node.root.join("var/lib/airlock");
    let (state, records, packages) =
        (std::fs::read(var.join("state.json")).unwrap(), node.records().len(), node.packages());
    let r = apply(&["--dry-run"]).ok();
    assert!(r.json()["packages"]["upgraded"].as_array().is_some_and(|u| u.len() == 1), "{}", r.stdout);
    assert_eq!(debs_served(), Vec::<String>::new(), "a dry run fetches no package");
    assert_eq!(std::fs::read(var.join("state.json")).unwrap(), state);
    assert_eq!((node.records().len(), node.packages()), (records, packages));

    // The update fetches exactly the package that changed; the rest is taken from what the
    // node retains, verified, and says so on record.
    let r = apply(&[]).ok();
    assert_eq!(r.json()["packages"]["upgraded"][0]["after"], "10.0.1-1", "{}", r.stdout);
    let fetched = debs_served();
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert!(fetched[0].contains("airlock-rocm-core_10.0.1-1"), "{fetched:?}");
    let last = node.records().pop().unwrap();
    assert_eq!(last["transfer"]["fetched"]["files"], 2, "the package and the index: {last}");
    assert_eq!(last["transfer"]["reused"]["files"].as_u64(), Some(first.len() as u64 - 1), "{last}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &last), Vec::<String>::new());
    node.airlock(&["check", "--root", "/var/lib/airlock"]).ok();
    let r = node.airlock(&["rollback", "--root", "/var/lib/airlock", "--json"]).ok();
    assert_eq!(r.json()["version"], "1.0.0", "{}", r.stdout);
    assert_eq!(version_of(&node.packages(), "airlock-rocm-core"), Some("10.0.0-1"));
}

#[test]
#[allow(clippy::too_many_lines, reason = "the guide's adoption, probe to first release, on two nodes, step by step")]
fn a_node_installed_by_hand_is_frozen_adopted_and_a_red_release_puts_its_own_stack_back() {
    let fixture = fixture();
    let stack = Stack::new(&fixture);
    let release = stack.spec("3.0.0", &["airlock-rocm-core=10.0.2-1"], VALIDATION);
    let b3 = stack.build(&release, "gpu-stack-3.0.0");
    let rocm = stack.dir.path().join("stack/repo/pool/main/a/airlock-rocm-core/airlock-rocm-core_10.0.0-1_all.deb");
    // Two nodes whose admin installed the stack by hand: jq and its libraries from the real
    // archive, at the suite's version, and ROCm 10.0.0-1 from the signed vendor repository.
    let by_hand = |node: &Node| {
        let mut debs: Vec<String> = walk_debs(&fixture.join("archive/pool"))
            .iter()
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                ["jq_", "libjq1_", "libonig5_"].iter().any(|w| name.starts_with(w))
            })
            .map(|p| node.put(p))
            .collect();
        debs.push(node.put(&rocm));
        run(Command::new("chroot").arg(&node.root).args(["dpkg", "-i"]).args(&debs)).ok();
    };
    let node = Node::new(&fixture);
    by_hand(&node);
    let key = node.put(&stack.keys.public);
    let before = node.packages();
    for p in ["jq", "libjq1", "libonig5"] {
        assert!(before.contains_key(p), "{p} installed by hand");
    }

    // The inventory: every installed package, with its architecture and source.
    let probed = node.airlock(&["probe", "--json"]).ok();
    let inventory = &probed.json()["inventory"]["packages"];
    assert_eq!(inventory["jq"]["version"].as_str(), before.get("jq").map(String::as_str), "{inventory}");
    assert_eq!(inventory["jq"]["architecture"], "amd64");
    assert_eq!(inventory["libonig5"]["source"], "libonig");
    assert_eq!(inventory["airlock-rocm-core"]["version"], "10.0.0-1");
    for (name, version) in before.iter().filter(|(_, v)| !v.is_empty()) {
        assert_eq!(inventory[name]["version"].as_str(), Some(version.as_str()), "every installed package: {name}");
    }
    let p = release.parent().unwrap();
    std::fs::write(p.join("node-a.json"), &probed.stdout).unwrap();

    // One baseline per tuple: two nodes with the same set say so, a node that differs says how.
    let other = Node::new(&fixture);
    by_hand(&other);
    std::fs::write(p.join("node-b.json"), other.airlock(&["probe", "--json"]).ok().stdout).unwrap();
    let same = stack.host(p, &["probe", "--inventory-diff", "node-a.json", "node-b.json"]).ok();
    assert!(same.stdout.contains("one baseline serves both"), "{}", same.stdout);
    let mut moved: serde_json::Value = probed.json();
    moved["inventory"]["packages"]["jq"]["version"] = "1.5+local-1".into();
    std::fs::write(p.join("node-c.json"), serde_json::to_vec(&moved).unwrap()).unwrap();
    let differs = stack.host(p, &["probe", "--inventory-diff", "node-a.json", "node-c.json"]).code(10);
    assert!(differs.stdout.contains("~ jq: ") && differs.stdout.contains("-> 1.5+local-1"), "{}", differs.stdout);

    // A by-hand version no archive serves: exit 3 naming it, and nothing written.
    let r = stack.host(p, &["freeze", "node-c.json", "--spec", "airlock.toml", "--out", "base-c.toml"]).code(3);
    assert!(r.stderr.contains("jq 1.5+local-1") && r.stderr.contains("add an archive"), "{}", r.stderr);
    assert!(!p.join("base-c.toml").exists() && !p.join("base-c.lock").exists());

    // Freeze: the spec's packages and their installed closure, at exactly the node's versions.
    let r = stack.host(p, &["freeze", "node-a.json", "--spec", "airlock.toml", "--out", "base.toml", "--json"]).ok();
    let frozen = r.json();
    let pinned: Vec<String> = frozen["pinned"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()))
        .collect();
    let mut expected: Vec<String> =
        ["jq", "libjq1", "libonig5"].iter().map(|n| format!("{n}={}", before[*n])).collect();
    expected.push("airlock-rocm-core=10.0.0-1".into());
    for e in &expected {
        assert!(pinned.contains(e), "{e} pinned: {pinned:?}");
    }
    assert_eq!(pinned.len(), expected.len(), "nothing else: {pinned:?}");
    assert_eq!(frozen["absent"], serde_json::json!(["libfile-which-perl"]), "{frozen}");
    // Issue 76: the stack is pinned, its dependencies apart (the distribution patches them),
    // and what the OS's base covers (libc6, under jq's and libjq1's dependencies) left to it.
    assert_eq!(frozen["dependencies"], serde_json::json!(["libjq1", "libonig5"]), "{frozen}");
    let left = frozen["left_to_os"].as_array().unwrap();
    assert!(left.iter().any(|l| l.as_str().unwrap().starts_with("libc6 ")), "{frozen}");
    for name in left.iter().map(|l| l.as_str().unwrap().split(' ').next().unwrap()) {
        assert!(!pinned.iter().any(|p| p.starts_with(&format!("{name}="))), "{name} left and pinned: {frozen}");
    }
    let spec = std::fs::read_to_string(p.join("base.toml")).unwrap();
    assert!(spec.contains("version = \"0.0.0-baseline\"") && spec.contains("resolve = false"), "{spec}");
    assert!(spec.contains("dependencies = [\"libjq1="), "{spec}");
    assert!(spec.contains("[[validation.check]]"), "the matrix and checks carry over: {spec}");
    let lock = std::fs::read_to_string(p.join("base.lock")).unwrap();
    assert!(lock.contains("airlock-rocm-core_10.0.0-1_all.deb"), "{lock}");
    let base = stack.build(&p.join("base.toml"), "gpu-stack-baseline");

    // Adopt: verified, checked package by package, current, and dpkg never called.
    let dpkg_log = |n: &Node| std::fs::read_to_string(n.root.join("var/log/dpkg.log")).unwrap_or_default();
    let log_before = dpkg_log(&node);
    let fb = node.put(&base);
    // Issue 76: a pinned package dpkg left half-configured (`iF`) is not adopted as installed.
    let status = node.root.join("var/lib/dpkg/status");
    let kept = std::fs::read_to_string(&status).unwrap();
    let at = kept.find("Package: airlock-rocm-core\n").expect("the by-hand stack's rocm-core");
    let (head, tail) = kept.split_at(at);
    let half =
        format!("{head}{}", tail.replacen("Status: install ok installed", "Status: install ok half-configured", 1));
    std::fs::write(&status, half).unwrap();
    let r = node.airlock(&["apply", &fb, "--adopt", "--trust", &key, "--root", "/var/lib/airlock"]).code(3);
    assert!(
        r.stderr.contains("airlock-rocm-core half-configured") && r.stderr.contains("dpkg --configure -a"),
        "{}",
        r.stderr
    );
    assert!(!node.root.join("var/lib/airlock/current").exists(), "not adopted");
    std::fs::write(&status, kept).unwrap();
    let adopted =
        node.airlock(&["apply", &fb, "--adopt", "--trust", &key, "--root", "/var/lib/airlock", "--json"]).ok();
    assert_eq!(adopted.json()["version"], "0.0.0-baseline", "{}", adopted.stdout);
    assert_eq!(dpkg_log(&node), log_before, "adopting ran no package manager");
    assert_eq!(node.packages(), before);
    let status = node.airlock(&["status", "--root", "/var/lib/airlock", "--json"]).ok().json();
    assert_eq!(status["current"]["version"], "0.0.0-baseline", "{status}");
    let record = node.records().pop().unwrap();
    assert_eq!((record["action"].as_str(), record["outcome"].as_str()), (Some("adopt"), Some("activated")));
    assert_eq!(schema_errors(&validator("record.v1.json"), &record), Vec::<String>::new());

    // The other node's ROCm was upgraded by hand since it was probed: adopting the baseline
    // there is refused, naming the difference, and nothing changes.
    let key_b = other.put(&stack.keys.public);
    let fb_b = other.put(&base);
    let pool = stack.dir.path().join("stack/repo/pool/main/a/airlock-rocm-core");
    let newer = walk_debs(&pool).into_iter().find(|d| d.to_string_lossy().contains("10.0.1-1")).unwrap();
    let newer = other.put(&newer);
    run(Command::new("chroot").arg(&other.root).args(["dpkg", "-i", &newer])).ok();
    let other_before = other.packages();
    let r = other.airlock(&["apply", &fb_b, "--adopt", "--trust", &key_b, "--root", "/var/lib/airlock"]).code(3);
    assert!(r.stderr.contains("airlock-rocm-core 10.0.1-1 → 10.0.0-1"), "{}", r.stderr);
    assert_eq!(other.packages(), other_before);
    assert!(!other.root.join("var/lib/airlock/current").exists(), "not adopted");

    // The first release is red after its change: the by-hand stack is put back from the
    // baseline's view, no --accept-unrestorable needed.
    let f3 = node.put(&b3);
    let r = node.airlock(&["apply", &f3, "--trust", &key, "--root", "/var/lib/airlock"]).code(4);
    assert!(r.stderr.contains("red"), "{}", r.stderr);
    assert_eq!(node.packages(), before, "the host runs its by-hand stack again");
    let last = node.records().pop().unwrap();
    assert_eq!(last["outcome"], "restored", "{last}");
    assert_eq!(last["restored"]["downgraded"][0]["after"], "10.0.0-1", "{last}");

    // The same release on a node without the baseline is refused as before adoption existed.
    let release_there = other.put(&b3);
    let r = other.airlock(&["apply", &release_there, "--trust", &key_b, "--root", "/var/lib/airlock"]).code(1);
    assert!(r.stderr.contains("--accept-unrestorable"), "{}", r.stderr);
    assert_eq!(other.packages(), other_before);

    // The approval pack shows the baseline as the freeze of the guide's first step.
    let pack = node.airlock(&["report", "--root", "/var/lib/airlock", "--json"]).ok().json();
    assert_eq!(pack["site"]["baseline"]["version"], "0.0.0-baseline", "{}", pack["site"]);
    // Issue 76: led by the current bundle's own verdict on the stack as it is now (the restored
    // baseline's), not the red candidate's; the candidate is this node's last attempt.
    let site = &pack["site"];
    assert_eq!(site["validation"]["record"], last_file(&node), "the restore's judgement: {site}");
    assert_eq!(site["validation"]["verdict"], "green", "{site}");
    assert_eq!(
        (site["attempt"]["outcome"].as_str(), site["attempt"]["action"].as_str()),
        (Some("restored"), Some("apply"))
    );
    let probe = &site["validation"]["probe"]["host"]["rocm"];
    assert_eq!(probe, "10.0.0-1", "the stack after the restore: {site}");

    // Issue 76: a node that took the distribution's update of a dependency after the freeze
    // adopts the baseline (recorded, nothing downgraded) while the stack's dependency on it
    // holds; one whose update breaks the stack's exact dependency is refused.
    let patched = Node::new(&fixture);
    by_hand(&patched);
    let key_p = patched.put(&stack.keys.public);
    let fb_p = patched.put(&base);
    let archive_deb = |prefix: &str| {
        walk_debs(&fixture.join("archive/pool"))
            .into_iter()
            .find(|d| d.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .unwrap()
    };
    let install = |deb: &Path, force: bool| {
        let f = patched.put(deb);
        let mut c = Command::new("chroot");
        c.arg(&patched.root).arg("dpkg");
        if force {
            c.arg("--force-depends");
        }
        run(c.args(["-i", &f])).ok();
    };
    let libjq1 = rebuilt(&archive_deb("libjq1_"), "+sec1", stack.dir.path());
    install(&libjq1, true);
    let r = patched.airlock(&["apply", &fb_p, "--adopt", "--trust", &key_p, "--root", "/var/lib/airlock"]).code(3);
    assert!(r.stderr.contains("libjq1 ") && r.stderr.contains("jq: libjq1 (= "), "{}", r.stderr);
    install(&archive_deb("libjq1_"), false);
    let libonig5 = rebuilt(&archive_deb("libonig5_"), "+sec1", stack.dir.path());
    install(&libonig5, false);
    let onig = patched.packages()["libonig5"].clone();
    assert!(onig.ends_with("+sec1"), "{onig}");
    let r =
        patched.airlock(&["apply", &fb_p, "--adopt", "--trust", &key_p, "--root", "/var/lib/airlock", "--json"]).ok();
    assert_eq!(r.json()["version"], "0.0.0-baseline", "{}", r.stdout);
    assert_eq!(patched.packages()["libonig5"], onig, "nothing downgraded");
    let record = patched.records().pop().unwrap();
    assert_eq!(record["newer_than_baseline"][0]["name"], "libonig5", "{record}");
    assert_eq!(record["newer_than_baseline"][0]["after"].as_str(), Some(onig.as_str()), "{record}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &record), Vec::<String>::new());
}

/// The newest record's file name on `node`.
fn last_file(node: &Node) -> String {
    let dir = node.root.join("var/lib/airlock/records");
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.pop().unwrap()
}

/// `deb` rebuilt with `suffix` appended to its version: the distribution's update of it.
fn rebuilt(deb: &Path, suffix: &str, dir: &Path) -> PathBuf {
    let tree = tempfile::tempdir_in(dir).unwrap();
    run(Command::new("dpkg-deb").args(["-R", s(deb), s(tree.path())])).ok();
    let control = tree.path().join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap();
    let text: String = text
        .lines()
        .map(|l| if l.starts_with("Version: ") { format!("{l}{suffix}\n") } else { format!("{l}\n") })
        .collect();
    std::fs::write(&control, text).unwrap();
    let out = dir.join(format!("{}{suffix}.deb", deb.file_stem().unwrap().to_string_lossy()));
    run(Command::new("dpkg-deb").args(["--root-owner-group", "-b", s(tree.path()), s(&out)])).ok();
    out
}
