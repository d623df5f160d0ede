//! rpm sites: signed rpm-md repositories built here with the real tools (`rpmbuild`,
//! `rpmsign`, `createrepo_c`, `modifyrepo_c`, gpg; `tests/helpers/make_rpm_repo.sh`), shaped
//! like RHEL's (xz and zstd primaries, signed `repomd.xml`, signed packages, a package in three
//! EVRs with an epoch and a `~`, a file require, rich dependencies, a module stream, a security
//! advisory), served by `python3 -m http.server`. The site's view is read by Debian's `dnf`
//! (`--installroot`, offline, `gpgcheck` and `repo_gpgcheck` on) and `zypper --root`; a node
//! applies with dnf into a system of its own (`AIRLOCK_PACKAGE_ROOT`), validates, puts the
//! packages back on red and rolls back. No public rpm repository is reachable from here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::http::HttpServer;
use crate::common::*;

struct Repos {
    dir: tempfile::TempDir,
    server: HttpServer,
}

impl Repos {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        run(Command::new("bash").args([&helper("make_rpm_repo.sh"), s(dir.path())])).ok();
        let server = HttpServer::start(&dir.path().join("repo"));
        Self { dir, server }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A spec with the rocm repository (zstd primary) and the el9 one (xz, modules), resolved over
/// the target's rpm database; `extra` goes into the rocm entry.
fn spec(dir: &Path, r: &Repos, version: &str, packages: &str, extra: &str, validation: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let body = format!(
        r#"[bundle]
name = "rocm-el9"
version = "{version}"

[[rpm]]
baseurl = "{url}/rocm"
arch = "x86_64"
releasever = "9"
packages = [{packages}]
keyring = "{keyring}"
resolve = true
base_rpmdb = "{rpmdb}"
vendor = "rocky"
distro = "el9"
{extra}

[[rpm]]
baseurl = "{url}/el$releasever"
releasever = "9"
arch = "x86_64"
packages = []
keyring = "{binary}"
resolve = true
{validation}"#,
        url = r.server.url,
        keyring = r.file("keyring.asc").display(),
        binary = r.file("keyring.gpg").display(),
        rpmdb = r.file("rpmdb.sqlite").display(),
    );
    let path = dir.join("airlock.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// The lock's rpms: NEVRA → `required_by`.
fn locked(lock: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(lock).unwrap()).unwrap();
    doc["rpm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let epoch = r["epoch"].as_integer().unwrap();
            let evr = if epoch == 0 { String::new() } else { format!("{epoch}:") };
            let nevra = format!(
                "{}-{evr}{}-{}.{}",
                r["name"].as_str().unwrap(),
                r["version"].as_str().unwrap(),
                r["release"].as_str().unwrap(),
                r["architecture"].as_str().unwrap()
            );
            let by = r
                .get("required_by")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            (nevra, by)
        })
        .collect()
}

/// An rpm database at `root` holding bash (provides /bin/sh), as the target has it.
fn system(root: &Path, r: &Repos) {
    run(Command::new("rpm").arg("--root").arg(root).arg("--initdb")).ok();
    let bash = r.file("repo/el9/Packages/b/bash-5.1.8-9.el9.x86_64.rpm");
    run(Command::new("rpm").arg("--root").arg(root).args(["-i", "--justdb", "--nodeps", "--nosignature"]).arg(bash))
        .ok();
}

fn rpm_qa(root: &Path) -> Vec<String> {
    let out = run(Command::new("rpm").arg("--root").arg(root).args([
        "-qa",
        "--qf",
        "%{NAME}-%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n",
    ]))
    .ok();
    let mut list: Vec<String> =
        out.stdout.lines().filter(|l| !l.starts_with("gpg-pubkey")).map(str::to_owned).collect();
    list.sort();
    list
}

/// dnf with its own configuration, reading only `repo` (a `.repo` file's body).
fn dnf(dir: &Path, installroot: &Path, repo: &str, args: &[&str]) -> Run {
    std::fs::create_dir_all(dir.join("repos.d")).unwrap();
    std::fs::write(dir.join("repos.d/site.repo"), repo).unwrap();
    run(Command::new("dnf")
        .arg("--installroot")
        .arg(installroot)
        .args(["-y", "--releasever", "9", "--disableplugin=*", "--setopt", "install_weak_deps=False"])
        .arg("--setopt")
        .arg(format!("reposdir={}", dir.join("repos.d").display()))
        .arg("--setopt")
        .arg(format!("cachedir={}", dir.join("cache").display()))
        .args(args))
}

/// The site's view as RHEL's dnf and SUSE's zypper read it: offline, signatures on.
fn read_by_dnf_and_zypper(dir: &Path, r: &Repos, view: &Path) {
    // dnf, offline, checks repomd.xml with the site key and each rpm with the vendor's.
    let repo = format!(
        "[site]\nname=site\nbaseurl=file://{}\ngpgcheck=1\nrepo_gpgcheck=1\ngpgkey=file://{} file://{}\n",
        view.display(),
        r.file("keyring.asc").display(),
        r.file("site.asc").display()
    );
    let target = dir.join("target");
    system(&target, r);
    dnf(&dir.join("dnf"), &target, &repo, &["install", "hip-runtime"]).ok();
    assert_eq!(
        rpm_qa(&target),
        [
            "bash-5.1.8-9.el9",
            "hip-runtime-6.4.1-1.el9",
            "libdrm-amdgpu-2.4.120-1.el9",
            "rocm-core-1:6.4.1-1.el9",
            "rocm-helper-tools-1.0-1.el9"
        ]
    );
    // A view whose repomd.xml was changed after signing is refused by dnf.
    let tampered = dir.join("tampered");
    run(Command::new("cp").args(["-a", s(view), s(&tampered)])).ok();
    let md = tampered.join("repodata/repomd.xml");
    let text = std::fs::read_to_string(&md).unwrap().replace("<revision>", "<revision>1");
    std::fs::write(&md, text).unwrap();
    let other = dir.join("target2");
    system(&other, r);
    let refused = dnf(&dir.join("dnf2"), &other, &repo.replace(s(view), s(&tampered)), &["install", "hip-runtime"]);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert!(format!("{}{}", refused.stdout, refused.stderr).contains("repomd.xml"), "{}", refused.stderr);

    // zypper reads the same view, its signature checked against the imported site key.
    let zroot = dir.join("zypper");
    run(Command::new("rpm").arg("--root").arg(&zroot).arg("--initdb")).ok();
    run(Command::new("rpm").arg("--root").arg(&zroot).arg("--import").arg(r.file("site.asc"))).ok();
    let zypper =
        |args: &[&str]| run(Command::new("zypper").arg("--root").arg(&zroot).arg("--non-interactive").args(args));
    zypper(&["addrepo", &format!("file://{}", view.display()), "site"]).ok();
    zypper(&["refresh"]).ok();
    let found = zypper(&["search", "-s", "rocm-core"]).ok();
    assert!(found.stdout.contains("1:6.4.1-1.el9"), "{}", found.stdout);
}

#[test]
fn an_rpm_closure_is_locked_carried_signed_on_site_and_dnf_and_zypper_install_from_it() {
    let r = Repos::new();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let spec =
        spec(&t.path().join("p"), &r, "1.0.0", "\"hip-runtime=6.4.1-1.el9\", \"rocm-core=1:6.4.1-1.el9\"", "", "");
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let lock = spec.with_extension("lock");
    // The closure: the file require from el9, the first alternative of `(libdrm-amdgpu or
    // libdrm)`, the pinned rocm-core (not the newest, not the `~` pre-release); bash is the
    // target's (rpmdb), the plugin's condition (gdb) is not met, rocm-docs is only recommended.
    let got = locked(&lock);
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        [
            "hip-runtime-6.4.1-1.el9.x86_64",
            "libdrm-amdgpu-2.4.120-1.el9.x86_64",
            "rocm-core-1:6.4.1-1.el9.x86_64",
            "rocm-helper-tools-1.0-1.el9.x86_64"
        ],
        "{}",
        std::fs::read_to_string(&lock).unwrap()
    );
    assert_eq!(got["rocm-helper-tools-1.0-1.el9.x86_64"], ["hip-runtime"]);
    assert_eq!(
        schema_errors(&validator("airlock.lock.schema.json"), &toml_as_json(&std::fs::read_to_string(&lock).unwrap())),
        Vec::<String>::new()
    );

    let bundle = t.path().join("rocm.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    // Deterministic: the same lock and SOURCE_DATE_EPOCH give the same bytes.
    let again = t.path().join("again.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&again)]).ok();
    assert_eq!(sha256_file(&bundle), sha256_file(&again));

    // purls as the purl spec writes rpm: vendor namespace, VERSION-RELEASE, epoch, arch, distro.
    assert!(sbom_components(&bundle, t.path()).contains("rpm:library"));
    let (sbom, _) = checked_sbom(&bundle, &t.path().join("sbom.json"));
    let purls: Vec<&str> = sbom["components"].as_array().unwrap().iter().filter_map(|c| c["purl"].as_str()).collect();
    assert!(purls.contains(&"pkg:rpm/rocky/rocm-core@6.4.1-1.el9?arch=x86_64&distro=el9&epoch=1"), "{purls:?}");
    assert!(purls.contains(&"pkg:rpm/libdrm-amdgpu@2.4.120-1.el9?arch=x86_64"), "{purls:?}");

    // The site signs its view; `check` makes it again from the carried indexes.
    let root = t.path().join("site");
    airlock_run(&[
        "install",
        s(&bundle),
        "--trust",
        s(&keys.public),
        "--root",
        s(&root),
        "--apt-signing-key",
        s(&r.file("site-secret.asc")),
    ])
    .ok();
    let view = root.join("current/rpms");
    assert!(view.join("repodata/repomd.xml.asc").is_file());
    airlock_run(&["check", "--root", s(&root)]).ok();

    read_by_dnf_and_zypper(t.path(), &r, &view);

    // outdated: a newer rocm-core with a security advisory in updateinfo.xml.
    let report = airlock_in(t.path(), &["outdated", s(&spec), "--json"]).code(10).json();
    let finding =
        &report["findings"].as_array().unwrap().iter().find(|f| f["name"] == "rocm-core.x86_64").unwrap().clone();
    assert_eq!(
        (finding["name"].as_str(), finding["upstream"].as_str(), finding["security"].as_bool()),
        (Some("rocm-core.x86_64"), Some("1:6.4.2-1.el9"), Some(true))
    );
    assert!(finding["detail"].as_str().unwrap().contains("RHSA-2026:1234 (Important)"), "{finding}");
    // hip-runtime is newer too, but its only advisory is a bug fix.
    let hip = report["findings"].as_array().unwrap().iter().find(|f| f["name"] == "hip-runtime.x86_64").unwrap();
    assert_eq!((hip["upstream"].as_str(), hip["security"].as_bool()), (Some("6.4.2-1.el9"), Some(false)), "{hip}");
}

#[test]
fn repositories_that_do_not_verify_and_modules_not_named_are_refused() {
    let r = Repos::new();
    let t = tempfile::tempdir().unwrap();
    let lock = |spec: &Path| airlock_in(t.path(), &["lock", s(spec)]);
    // Signed by a key the keyring does not hold.
    let other = spec(&t.path().join("other"), &r, "1.0.0", "\"rocm-core\"", "", "");
    std::fs::write(&other, std::fs::read_to_string(&other).unwrap().replace("/rocm\"", "/other\"")).unwrap();
    let e = lock(&other).code(3);
    assert!(e.stderr.contains("repomd.xml.asc: the signature does not verify with keyring"), "{}", e.stderr);
    // Unsigned: no repomd.xml.asc.
    std::fs::remove_file(r.file("repo/other/repodata/repomd.xml.asc")).unwrap();
    let e = lock(&other).code(3);
    assert!(e.stderr.contains("is unsigned (no `repomd.xml.asc`)"), "{}", e.stderr);
    // sha1 checksums only.
    let sha1 = spec(&t.path().join("sha1"), &r, "1.0.0", "\"libdrm\"", "", "");
    std::fs::write(&sha1, std::fs::read_to_string(&sha1).unwrap().replace("/rocm\"", "/sha1\"")).unwrap();
    let e = lock(&sha1).code(3);
    assert!(e.stderr.contains("only sha1 checksums are offered"), "{}", e.stderr);
    // A package whose own header signature another key made.
    let resigned = spec(&t.path().join("resigned"), &r, "1.0.0", "\"rocm-core\"", "", "");
    std::fs::write(&resigned, std::fs::read_to_string(&resigned).unwrap().replace("/rocm\"", "/resigned\"")).unwrap();
    let e = lock(&resigned).code(3);
    assert!(
        e.stderr.contains("(rocm-core-1:6.4.1-1.el9.x86_64): its header signature was not made by a key of"),
        "{}",
        e.stderr
    );
    // A primary changed after repomd.xml was signed.
    let primary = std::fs::read_dir(r.file("repo/rocm/repodata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("primary.xml.zst"))
        .unwrap();
    let original = std::fs::read(&primary).unwrap();
    let mut bad = original.clone();
    let n = bad.len();
    bad[n - 5] ^= 1;
    std::fs::write(&primary, &bad).unwrap();
    let rocm = spec(&t.path().join("rocm"), &r, "1.0.0", "\"rocm-core\"", "", "");
    let e = lock(&rocm).code(3);
    assert!(e.stderr.contains("primary.xml.zst: expected checksum/size sha256:"), "{}", e.stderr);
    std::fs::write(&primary, &original).unwrap();

    // A module stream: nodejs 18 is modular; asked for by EVR without naming the stream it is
    // refused by name; named, it is carried (and its non-modular twin hidden).
    let module = spec(&t.path().join("module"), &r, "1.0.0", "\"rocm-core=1:6.4.1-1.el9\"", "", "");
    let text = std::fs::read_to_string(&module).unwrap().replacen(
        "packages = []",
        "packages = [\"nodejs=1:18.14.2-2.module+el9.2.0+17912+ab2d1d3d\"]",
        1,
    );
    std::fs::write(&module, &text).unwrap();
    let e = lock(&module).code(1);
    assert!(
        e.stderr.contains("module stream `nodejs:18`") && e.stderr.contains("modules = [\"nodejs:18\"]"),
        "{}",
        e.stderr
    );
    std::fs::write(&module, text.replacen("resolve = true\n", "resolve = true\nmodules = [\"nodejs:18\"]\n", 2))
        .unwrap();
    lock(&module).ok();
    let got = locked(&module.with_extension("lock"));
    assert!(got.contains_key("nodejs-1:18.14.2-2.module+el9.2.0+17912+ab2d1d3d.x86_64"), "{got:?}");
    let text = std::fs::read_to_string(module.with_extension("lock")).unwrap();
    assert!(text.contains("module = \"nodejs:18\""), "{text}");

    // A package that is not there names what is.
    let missing = spec(&t.path().join("missing"), &r, "1.0.0", "\"rocm-core=1:9.9-1.el9\"", "", "");
    let e = lock(&missing).code(1);
    assert!(e.stderr.contains("it has 1:6.4.1-1.el9, 1:6.4.1~rc1-1.el9, 1:6.4.2-1.el9"), "{}", e.stderr);
}

/// The recorded host's row, and a check that finds hip 6.4.2 (in the system the node changes)
/// red.
fn validation() -> String {
    format!("\n[[validation.target]]\n{MI300X_ROW}\n\n{CHECK}")
}

const CHECK: &str = r#"[[validation.check]]
name = "hip-6.4.1"
run = ["sh", "-c", "grep -qx 'hip 6.4.2' \"$AIRLOCK_PACKAGE_ROOT/opt/rocm/lib/libamdhip64.so.6\" && exit 1; exit 0"]
expect = "exit0"
"#;

/// A `PATH` with every tool of this one but dnf (a SUSE host has zypper only).
fn without_dnf(dir: &Path) -> std::ffi::OsString {
    std::fs::create_dir_all(dir).unwrap();
    for d in std::env::split_paths(&std::env::var_os("PATH").unwrap()) {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if !["dnf", "dnf-3", "yum"].contains(&name.to_string_lossy().as_ref()) && !dir.join(&name).exists() {
                std::os::unix::fs::symlink(entry.path(), dir.join(&name)).unwrap();
            }
        }
    }
    let probes = repo("testdata/probes/mi300x/bin");
    std::env::join_paths([probes, dir.to_owned()]).unwrap()
}

#[test]
fn a_node_applies_rpms_with_dnf_puts_them_back_on_red_and_rolls_back() {
    node_applies(false);
}

#[test]
fn a_suse_node_applies_rpms_with_zypper_puts_them_back_on_red_and_rolls_back() {
    node_applies(true);
}

fn node_applies(zypper: bool) {
    let r = Repos::new();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = |version: &str, packages: &str| {
        let spec = spec(&t.path().join(version), &r, version, packages, "", &validation());
        airlock_in(t.path(), &["lock", s(&spec)]).ok();
        let out = t.path().join(format!("rocm-{version}.airlock"));
        airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&out)]).ok();
        out
    };
    let one = bundle("1.0.0", "\"hip-runtime=6.4.1-1.el9\"");
    let two = bundle("2.0.0", "\"hip-runtime=6.4.2-1.el9\"");
    let sys = t.path().join("sys");
    system(&sys, &r);
    let node = t.path().join("node");
    let path = zypper.then(|| without_dnf(&t.path().join("bin")));
    let on_node = || {
        let mut c = airlock();
        c.env("AIRLOCK_PACKAGE_ROOT", &sys);
        if let Some(p) = &path {
            c.env("PATH", p);
        }
        c
    };
    let apply = |b: &Path, extra: &[&str]| {
        run(on_node().args(["apply", s(b), "--trust", s(&keys.public), "--root", s(&node), "--json"]).args(extra))
    };
    let before = rpm_qa(&sys);

    // Bundle 1: installed at the locked EVRs, green, committed. With dnf, the node takes it from
    // a mirror's root (only the manifest, its signature and `rpms/` are fetched).
    let done = if zypper {
        apply(&one, &[]).ok().json()
    } else {
        let mirror = t.path().join("mirror");
        airlock_run(&["install", s(&one), "--role", "mirror", "--trust", s(&keys.public), "--root", s(&mirror)]).ok();
        let source = format!("file://{}/", mirror.display());
        run(on_node().args(["apply", &source, "--trust", s(&keys.public), "--root", s(&node), "--json"])).ok().json()
    };
    assert_eq!(done["packages"]["installed"].as_array().unwrap().len(), 4, "{done}");
    assert!(rpm_qa(&sys).contains(&"rocm-core-1:6.4.1-1.el9".to_owned()));
    let probe = run(airlock().env("AIRLOCK_HOST_ROOT", &sys).args(["probe", "--json"])).ok().json();
    let installed = probe["host"]["packages"].as_array().unwrap();
    assert!(installed.iter().any(|p| p == "rocm-core=1:6.4.1-1.el9"), "{probe}");

    // Bundle 2: a dry run says what would change; then the check finds hip 6.4.2 red and the
    // packages are put back as they were.
    let dry = apply(&two, &["--dry-run"]).ok().json();
    let upgraded: Vec<&str> =
        dry["packages"]["upgraded"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(upgraded, ["hip-runtime", "rocm-core"], "{dry}");
    let after_one = rpm_qa(&sys);
    let red = apply(&two, &[]).code(4);
    assert_eq!(rpm_qa(&sys), after_one, "red: put back\n{}", red.stderr);

    // Bundle 2 without its check: upgraded; then a rollback to bundle 1 downgrades.
    let spec2 = t.path().join("2.0.0/airlock.toml");
    let text = std::fs::read_to_string(&spec2).unwrap();
    std::fs::write(
        &spec2,
        text.split("\n[[validation.check]]").next().unwrap().replace("version = \"2.0.0\"", "version = \"2.0.1\""),
    )
    .unwrap();
    let two = t.path().join("rocm-2.0.1.airlock");
    airlock_in(t.path(), &["build", s(&spec2), "--locked", "--key", s(&keys.private), "--out", s(&two)]).ok();
    apply(&two, &[]).ok();
    assert!(rpm_qa(&sys).contains(&"rocm-core-1:6.4.2-1.el9".to_owned()));
    let rolled = run(on_node().args(["rollback", "--trust", s(&keys.public), "--root", s(&node)])).ok();
    // Each phase's time, and airlock's own share beside the package manager's and the checks'.
    assert!(rolled.stdout.contains("phases: verify ") && rolled.stdout.contains("airlock's own "), "{}", rolled.stdout);
    // The node's own repository files name its views only, under its root.
    let manager = if zypper { "zypper" } else { "dnf" };
    assert!(node.join(manager).join("repos.d/airlock.repo").is_file(), "{manager}");
    assert_eq!(rpm_qa(&sys), after_one);
    assert_ne!(after_one, before);
}

#[test]
#[allow(clippy::too_many_lines, reason = "the adoption of an rpm node, probe to first release, step by step")]
fn an_rpm_node_installed_by_hand_is_frozen_adopted_and_a_red_release_puts_its_own_stack_back() {
    let r = Repos::new();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    // The admin installed ROCm 6.4.1 by hand, with what it needs from the distribution.
    let sys = t.path().join("sys");
    system(&sys, &r);
    let by_hand = [
        "rocm/Packages/r/rocm-core-6.4.1-1.el9.x86_64.rpm",
        "rocm/Packages/h/hip-runtime-6.4.1-1.el9.x86_64.rpm",
        "el9/Packages/l/libdrm-amdgpu-2.4.120-1.el9.x86_64.rpm",
        "el9/Packages/r/rocm-helper-tools-1.0-1.el9.x86_64.rpm",
    ];
    let mut install = Command::new("rpm");
    install.arg("--root").arg(&sys).args(["-i", "--nodeps", "--nosignature"]);
    run(install.args(by_hand.iter().map(|p| r.file(&format!("repo/{p}"))))).ok();
    let before = rpm_qa(&sys);

    // The inventory lists them with their architecture; freeze pins the release spec's
    // package and its installed closure (the rich and file requirements followed to what is
    // installed; bash is the base) at exactly those EVRs.
    let probe = run(airlock().env("AIRLOCK_HOST_ROOT", &sys).args(["probe", "--json"])).ok();
    let packages = &probe.json()["inventory"]["packages"];
    assert_eq!(
        (packages["rocm-core"]["version"].as_str(), packages["rocm-core"]["architecture"].as_str()),
        (Some("1:6.4.1-1.el9"), Some("x86_64")),
        "{packages}"
    );
    let dir = t.path().join("2.0.0");
    let release = spec(&dir, &r, "2.0.0", "\"hip-runtime=6.4.2-1.el9\"", "", &validation());
    std::fs::write(dir.join("node.json"), &probe.stdout).unwrap();
    let frozen = airlock_in(
        t.path(),
        &["freeze", s(&dir.join("node.json")), "--spec", s(&release), "--out", s(&dir.join("base.toml")), "--json"],
    )
    .ok()
    .json();
    let mut pinned: Vec<String> = frozen["pinned"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| v.as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()))
        .collect();
    pinned.sort();
    assert_eq!(
        pinned,
        [
            "hip-runtime=6.4.1-1.el9",
            "libdrm-amdgpu=2.4.120-1.el9",
            "rocm-core=1:6.4.1-1.el9",
            "rocm-helper-tools=1.0-1.el9"
        ],
        "{frozen}"
    );
    let base = t.path().join("base.airlock");
    airlock_in(
        t.path(),
        &["build", s(&dir.join("base.toml")), "--locked", "--key", s(&keys.private), "--out", s(&base)],
    )
    .ok();

    // Issue 77, attack 2: a probe file's name wrote a real `[[validation.check]]` table into
    // the baseline's header comment on the old code (signed by `build --locked`, run by
    // `validate` on every node). The name goes in escaped: the comment stays a comment.
    let hostile = dir.join("gpu07\n[[validation.check]]\nname = \"injected\"\nrun = [\"touch\", \"PWNED\"]\n#.json");
    std::fs::write(&hostile, &probe.stdout).unwrap();
    let out = dir.join("hostile.toml");
    airlock_in(t.path(), &["freeze", s(&hostile), "--spec", s(&release), "--out", s(&out)]).ok();
    let text = std::fs::read_to_string(&out).unwrap();
    let parsed: toml::Value = toml::from_str(&text).unwrap();
    let mut lines = text.lines();
    assert!(
        lines.next().is_some_and(|l| l.starts_with("# Written by"))
            && lines.next().is_some_and(|l| l.starts_with("# "))
    );
    assert_eq!(lines.next(), Some("[bundle]"), "the comment is two lines, then the spec: {text}");
    let checks = parsed.get("validation").and_then(|v| v.get("check")).and_then(toml::Value::as_array);
    assert!(
        checks.is_none_or(|c| c.iter().all(|c| c.get("name").and_then(toml::Value::as_str) != Some("injected"))),
        "{text}"
    );

    // An EVR no repository serves: exit 3, naming it.
    let moved = probe.stdout.replace("\"1:6.4.1-1.el9\"", "\"1:6.4.0-7.el9\"");
    std::fs::write(dir.join("moved.json"), moved).unwrap();
    let r3 = airlock_in(
        t.path(),
        &["freeze", s(&dir.join("moved.json")), "--spec", s(&release), "--out", s(&dir.join("moved.toml"))],
    )
    .code(3);
    assert!(r3.stderr.contains("rocm-core 1:6.4.0-7.el9"), "{}", r3.stderr);
    assert!(!dir.join("moved.toml").exists());
    // Issue 77, attack 3: a version holding a line break reached stderr raw, a forged line of
    // its own under the error. Escaped now.
    let forged =
        probe.stdout.replace("\"1:6.4.1-1.el9\"", "\"1:6.4.0-7.el9\\nwrote moved.toml: every package pinned\"");
    std::fs::write(dir.join("forged.json"), forged).unwrap();
    let r4 = airlock_in(
        t.path(),
        &["freeze", s(&dir.join("forged.json")), "--spec", s(&release), "--out", s(&dir.join("forged.toml"))],
    )
    .code(3);
    assert!(!r4.stderr.lines().any(|l| l.starts_with("wrote ")), "a forged line: {}", r4.stderr);
    assert!(r4.stderr.contains("1:6.4.0-7.el9\\nwrote"), "{}", r4.stderr);

    // Adopted with dnf untouched; the red release then puts the by-hand stack back.
    let on_node = |root: &Path, args: &[&str]| {
        run(airlock().env("AIRLOCK_PACKAGE_ROOT", &sys).args(args).args([
            "--trust",
            s(&keys.public),
            "--root",
            s(root),
        ]))
    };
    let node = t.path().join("node");
    on_node(&node, &["apply", s(&base), "--adopt"]).ok();
    assert_eq!(rpm_qa(&sys), before);
    airlock_in(t.path(), &["lock", s(&release)]).ok();
    let two = t.path().join("rocm-2.0.0.airlock");
    airlock_in(t.path(), &["build", s(&release), "--locked", "--key", s(&keys.private), "--out", s(&two)]).ok();
    let red = on_node(&node, &["apply", s(&two)]).code(4);
    assert_eq!(rpm_qa(&sys), before, "put back from the baseline\n{}", red.stderr);
    // A node root without the baseline refuses the same change, as before.
    let refused = on_node(&t.path().join("bare"), &["apply", s(&two)]).code(1);
    assert!(refused.stderr.contains("--accept-unrestorable"), "{}", refused.stderr);
}
