//! Debian packages from a signed apt repository built here (dpkg-deb, apt-ftparchive, gpg),
//! served by `python3 -m http.server`, consumed on site by apt-get with private state.

use std::path::{Path, PathBuf};

use crate::common::apt::{Apt, signed_repo};
use crate::common::http::HttpServer;
use crate::common::*;

fn deb_spec(dir: &Path, url: &str, packages: &str, keyring: Option<&Path>, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let keyring = keyring.map(|k| format!("keyring = \"{}\"\n", k.display())).unwrap_or_default();
    let body = format!(
        "[bundle]\nname = \"debs\"\nversion = \"1.0.0\"\n\n[[deb]]\nrepo = \"{url}\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\npackages = [{packages}]\n{keyring}{extra}"
    );
    let spec = dir.join("airlock.toml");
    std::fs::write(&spec, body).unwrap();
    spec
}

#[test]
fn debs_from_a_signed_repository_are_carried_and_apt_installs_them_offline() {
    let r = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));
    let keyring = r.dir.path().join("keyring.asc");

    let spec = deb_spec(
        &t.path().join("p"),
        &r.server.url,
        "\"hello-airlock=2.10-3\", \"airlock-docs=1.0\"",
        Some(&keyring),
        "",
    );
    with(&["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap();
    assert!(lock.contains("hello-airlock_2.10-3_amd64.deb") && lock.contains("airlock-docs_1.0_all.deb"), "{lock}");
    assert!(!lock.contains("2.11-1"), "the pinned version only: {lock}");
    let lock_json = toml_as_json(&lock);
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock_json), Vec::<String>::new());

    let bundle = t.path().join("debs.airlock");
    with(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let root = t.path().join("site");
    let site_key = r.dir.path().join("site-secret.asc");
    airlock_run(&[
        "install",
        s(&bundle),
        "--trust",
        s(&keys.public),
        "--root",
        s(&root),
        "--apt-signing-key",
        s(&site_key),
    ])
    .ok();
    let site_public = r.dir.path().join("site.asc");

    // apt-get, with private state, updates from and downloads out of the site view.
    let debs = root.join("current/debs");
    let apt = Apt::new(&t.path().join("apt"));
    let apt_get = |args: &[&str]| apt.get(args);
    // Signed by the site key: apt verifies InRelease itself (no trusted=yes).
    apt.sources(&format!("deb [signed-by={}] file:{} ./", site_public.display(), debs.display()));
    apt_get(&["update"]).ok();
    apt_get(&["download", "hello-airlock=2.10-3", "airlock-docs"]).ok();
    let got = apt.out().join("hello-airlock_2.10-3_amd64.deb");
    assert_eq!(sha256_file(&got), sha256_file(&debs.join("pool/main/h/hello-airlock/hello-airlock_2.10-3_amd64.deb")));
    assert!(apt.out().join("airlock-docs_1.0_all.deb").is_file());

    // With the wrong key apt refuses the repository.
    let other = r.dir.path().join("other.asc");
    apt.sources(&format!("deb [signed-by={}] file:{} ./", other.display(), debs.display()));
    let refused = apt_get(&["update"]);
    assert!(
        refused.code != 0 || refused.stderr.contains("NO_PUBKEY") || refused.stderr.contains("not signed"),
        "{}",
        refused.stderr
    );

    // The site view is a flat repository (`suite = "./"`): served over HTTP it is an upstream
    // like any other, verified with the site key.
    let view = HttpServer::start(&debs);
    let flat = deb_spec(&t.path().join("flat"), &view.url, "\"hello-airlock=2.10-3\"", Some(&site_public), "");
    let text = std::fs::read_to_string(&flat).unwrap().replace("suite = \"stable\"", "suite = \"./\"");
    std::fs::write(&flat, text).unwrap();
    with(&["lock", s(&flat)]).ok();
    let lock = std::fs::read_to_string(flat.with_extension("lock")).unwrap();
    assert!(lock.contains("filename = \"pool/main/h/hello-airlock/hello-airlock_2.10-3_amd64.deb\""), "{lock}");
    let again = t.path().join("flat.airlock");
    with(&["build", s(&flat), "--locked", "--key", s(&keys.private), "--out", s(&again)]).ok();
    drop(r);
}

#[test]
fn a_repository_signed_by_another_key_or_unsigned_is_refused() {
    let r = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).args(args));
    let pkg = "\"hello-airlock=2.10-3\"";

    let other = r.dir.path().join("other.asc");
    let spec = deb_spec(&t.path().join("other"), &r.server.url, pkg, Some(&other), "");
    let out = with(&["lock", s(&spec)]).code(3);
    assert!(
        out.stderr.contains("InRelease") && out.stderr.contains("does not verify") && out.stderr.contains("other.asc"),
        "{}",
        out.stderr
    );

    let spec = deb_spec(&t.path().join("nokey"), &r.server.url, pkg, None, "");
    let out = with(&["lock", s(&spec)]).code(1);
    assert!(out.stderr.contains("needs `keyring`"), "{}", out.stderr);

    let keyring = r.dir.path().join("keyring.asc");
    // A pin the repository lacks lists what it has.
    let spec = deb_spec(&t.path().join("missing"), &r.server.url, "\"hello-airlock=9.9\"", Some(&keyring), "");
    let out = with(&["lock", s(&spec)]).code(1);
    assert!(out.stderr.contains("it has 2.10-3, 2.11-1"), "{}", out.stderr);

    // Without InRelease, Release + Release.gpg are checked; without Release.gpg it is unsigned.
    let dists = r.dir.path().join("repo/dists/stable");
    std::fs::remove_file(dists.join("InRelease")).unwrap();
    let spec = deb_spec(&t.path().join("detached"), &r.server.url, pkg, Some(&keyring), "");
    with(&["lock", s(&spec)]).ok();
    std::fs::remove_file(dists.join("Release.gpg")).unwrap();
    let out = with(&["lock", s(&spec)]).code(3);
    assert!(out.stderr.contains("unsigned") && out.stderr.contains("allow_unsigned"), "{}", out.stderr);
    let spec = deb_spec(&t.path().join("unsigned"), &r.server.url, pkg, None, "allow_unsigned = true\n");
    let out = with(&["lock", s(&spec)]).ok();
    assert!(out.stderr.contains("allow_unsigned = true"), "the exception is logged: {}", out.stderr);
}

#[test]
fn a_real_shaped_archive_binary_keyring_and_an_expired_release() {
    // The fixture is served like deb.debian.org: compressed indexes only (the Release lists the
    // plain file too), by-hash paths, two signatures of which one is by a key the keyring lacks.
    let r = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).args(args));
    let pkg = "\"hello-airlock=2.10-3\"";
    let binary = r.dir.path().join("keyring.gpg");
    let spec = deb_spec(&t.path().join("binary"), &r.server.url, pkg, Some(&binary), "");
    with(&["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(spec.with_extension("lock")).unwrap();
    assert!(lock.contains("hello-airlock_2.10-3_amd64.deb"), "{lock}");

    // A Release past its Valid-Until: refused (exit 3), unless the entry accepts it.
    let stale = deb_spec(&t.path().join("stale"), &r.server.url, pkg, Some(&binary), "").with_file_name("airlock.toml");
    let text = std::fs::read_to_string(&stale).unwrap().replace("suite = \"stable\"", "suite = \"stale\"");
    std::fs::write(&stale, &text).unwrap();
    let refused = with(&["lock", s(&stale)]).code(3);
    assert!(
        refused.stderr.contains("expired") && refused.stderr.contains("allow_expired = true"),
        "{}",
        refused.stderr
    );
    std::fs::write(&stale, format!("{text}allow_expired = true\n")).unwrap();
    let accepted = with(&["lock", s(&stale)]).ok();
    assert!(accepted.stderr.contains("accepted (allow_expired = true)"), "logged: {}", accepted.stderr);
}

/// A dpkg status file saying `base-airlock VERSION` is installed.
fn base_status(version: &str) -> String {
    format!(
        "Package: base-airlock\nStatus: install ok installed\nPriority: required\nMaintainer: t <t@airlock.test>\nArchitecture: all\nVersion: {version}\nDescription: the target's base\n"
    )
}

fn closure_spec(dir: &Path, url: &str, keyring: &Path, packages: &str, extra: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let body = format!(
        "[bundle]\nname = \"closure\"\nversion = \"1.0.0\"\n\n[[deb]]\nrepo = \"{url}\"\nsuite = \"closure\"\ncomponents = [\"closure\"]\narch = \"amd64\"\npackages = [{packages}]\nkeyring = \"{}\"\nresolve = true\n{extra}",
        keyring.display()
    );
    let spec = dir.join("airlock.toml");
    std::fs::write(&spec, body).unwrap();
    spec
}

/// `package -> required_by` of every locked deb.
fn locked_closure(lock: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let lock = toml_as_json(&std::fs::read_to_string(lock).unwrap());
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock), Vec::<String>::new());
    lock["deb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let by = d["required_by"].as_array().map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect());
            (d["package"].as_str().unwrap().to_owned(), by.unwrap_or_default())
        })
        .collect()
}

#[test]
fn a_dependency_closure_is_locked_with_reasons_carried_and_apt_installs_it_over_the_base() {
    let r = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));
    let keyring = r.dir.path().join("keyring.gpg");
    let (url, app) = (r.server.url.as_str(), "\"rocm-app-airlock\"");
    let s_ = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
    let expected = |base: Option<&str>| {
        let mut m = std::collections::BTreeMap::from([
            ("rocm-app-airlock".to_owned(), Vec::new()),
            // The newest version that satisfies `(>= 6.4)`, not 6.2.
            ("libhip-airlock=6.4.1".to_owned(), s_(&["rocm-app-airlock"])),
            // `mta-missing | mail-airlock`: the first alternative with a candidate.
            ("mail-airlock=1.0".to_owned(), s_(&["rocm-app-airlock"])),
            // `java-airlock (>= 2)`: only the versioned Provides satisfies it (not oldjre-airlock).
            ("jre-airlock=9".to_owned(), s_(&["rocm-app-airlock"])),
            // Pre-Depends `rt-python-airlock:any`, through Multi-Arch: allowed.
            ("rt-python-airlock=3.11".to_owned(), s_(&["rocm-app-airlock"])),
        ]);
        if let Some(v) = base {
            m.insert(format!("base-airlock={v}"), s_(&["libhip-airlock", "rocm-app-airlock"]));
        }
        m
    };

    // The target's status file as the base: base-airlock is there, so it is not carried.
    let p = t.path().join("p");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("status"), base_status("1.0")).unwrap();
    let spec = closure_spec(&p, url, &keyring, app, "base_status = \"status\"\n");
    with(&["lock", s(&spec)]).ok();
    assert_eq!(locked_closure(&p.join("airlock.lock")), expected(None));
    // The lock remembers the base by digest: a target that changed makes it stale.
    std::fs::write(p.join("status"), base_status("0.9")).unwrap();
    let stale = t.path().join("stale.airlock");
    let out = with(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&stale)]).code(1);
    assert!(out.stderr.contains("base status `status` changed since it was locked"), "{}", out.stderr);
    std::fs::write(p.join("status"), base_status("1.0")).unwrap();

    // No status file: the suite's Priority: required packages are the base.
    let q = t.path().join("q");
    with(&["lock", s(&closure_spec(&q, url, &keyring, app, ""))]).ok();
    assert_eq!(locked_closure(&q.join("airlock.lock")), expected(None));

    // A requested package that another requested package depends on (any natural ROCm
    // list: the runtime and the library it needs): locked once, with what requires it, and
    // `build --locked` right after `lock` takes that lock as it is.
    let both = t.path().join("both");
    let both_spec = closure_spec(&both, url, &keyring, "\"rocm-app-airlock\", \"libhip-airlock\"", "");
    with(&["lock", s(&both_spec)]).ok();
    let mut wanted = expected(None);
    wanted.remove("libhip-airlock=6.4.1");
    wanted.insert("libhip-airlock".to_owned(), s_(&["rocm-app-airlock"]));
    assert_eq!(locked_closure(&both.join("airlock.lock")), wanted);
    let both_bundle = t.path().join("both.airlock");
    with(&["build", s(&both_spec), "--locked", "--key", s(&keys.private), "--out", s(&both_bundle)]).ok();

    // A base too old for `base-airlock (>= 1.0)`: the newer one is carried, and why.
    let old = t.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("status"), base_status("0.9")).unwrap();
    with(&["lock", s(&closure_spec(&old, url, &keyring, app, "base_status = \"status\"\n"))]).ok();
    assert_eq!(locked_closure(&old.join("airlock.lock")), expected(Some("1.0")));

    // Built, installed, and apt-get resolves the same closure from the site view alone, over
    // the target's status.
    let bundle = t.path().join("closure.airlock");
    with(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let root = t.path().join("site");
    let site_key = r.dir.path().join("site-secret.asc");
    let trust = ["--trust", s(&keys.public), "--root", s(&root), "--apt-signing-key", s(&site_key)];
    airlock_run(&[&["install", s(&bundle)][..], &trust[..]].concat()).ok();
    let apt = Apt::new(&t.path().join("apt"));
    apt.status(&base_status("1.0"));
    let debs = root.join("current/debs");
    apt.sources(&format!("deb [signed-by={}] file:{} ./", r.dir.path().join("site.asc").display(), debs.display()));
    apt.get(&["update"]).ok();
    let out = apt.get(&["-s", "install", "rocm-app-airlock"]).ok();
    for inst in
        ["rocm-app-airlock (1.0", "libhip-airlock (6.4.1", "mail-airlock (1.0", "jre-airlock (9", "rt-python-airlock"]
    {
        assert!(out.stdout.contains(&format!("Inst {inst}")), "{inst}: {}", out.stdout);
    }
    assert!(!out.stdout.contains("Inst base-airlock"), "the base is not reinstalled: {}", out.stdout);

    closure_sbom(&bundle, &p.join("airlock.lock"), t.path());
    drop(r);
}

#[test]
fn closure_failures_name_the_chain_and_entries_resolve_together() {
    let r = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let with = |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).args(args));
    let keyring = r.dir.path().join("keyring.gpg");
    let url = r.server.url.as_str();

    // An unsatisfiable request names the chain; a conflict within the closure names both.
    let bad = closure_spec(&t.path().join("bad"), url, &keyring, "\"needs-future-airlock\"", "");
    let out = with(&["lock", s(&bad)]).code(1);
    assert!(
        out.stderr.contains(
            "needs-future-airlock 1.0 → hip-runtime-airlock (>= 1) → libhip-airlock (>= 9): no candidate (libhip-airlock 6.4.1 is already in the closure; libhip-airlock has 6.4.1, 6.2)"
        ),
        "{}",
        out.stderr
    );
    let clash = closure_spec(&t.path().join("clash"), url, &keyring, "\"wants-clash-airlock\"", "");
    let out = with(&["lock", s(&clash)]).code(1);
    assert!(
        out.stderr.contains("clash-airlock 1.0 conflicts with `mail-airlock`, which mail-airlock 1.0 satisfies"),
        "{}",
        out.stderr
    );
    assert!(!t.path().join("bad/airlock.lock").exists() && !t.path().join("clash/airlock.lock").exists());

    // Two entries, resolved together: a dependency the first entry's suite lacks comes from the
    // second (a vendor repository beside the distribution archive, which asks for nothing).
    let two = t.path().join("two");
    let archive = format!(
        "\n[[deb]]\nrepo = \"{url}\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\npackages = []\nkeyring = \"{}\"\n",
        keyring.display()
    );
    with(&["lock", s(&closure_spec(&two, url, &keyring, "\"uses-docs-airlock\"", &archive))]).ok();
    let lock = toml_as_json(&std::fs::read_to_string(two.join("airlock.lock")).unwrap());
    let from: Vec<(&str, &str)> = lock["deb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["package"].as_str().unwrap(), d["suite"].as_str().unwrap()))
        .collect();
    assert_eq!(from, [("uses-docs-airlock", "closure"), ("airlock-docs=1.0", "stable")]);

    drop(r);
}

/// The SBOM a scanner reads: deb purls with the vendor and distro the Release names (Origin
/// Debian, Codename closure), and the closure as its dependency graph (each package depends on
/// what it required).
fn closure_sbom(bundle: &Path, lock: &Path, dir: &Path) {
    let (sbom, _) = checked_sbom(bundle, &dir.join("closure.cdx.json"));
    let purl_of = |name: &str| {
        sbom["components"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()["purl"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let app = purl_of("rocm-app-airlock");
    assert!(app.starts_with("pkg:deb/debian/rocm-app-airlock@1.0?arch=") && app.ends_with("&distro=closure"), "{app}");
    let depends_on = |name: &str| -> std::collections::BTreeSet<String> {
        let prefix = format!("deb:{name}=");
        let entry = sbom["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["ref"].as_str().unwrap().starts_with(&prefix))
            .unwrap();
        entry["dependsOn"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r.as_str().unwrap().trim_start_matches("deb:").split('=').next().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (package, required_by) in locked_closure(lock) {
        let name = package.split('=').next().unwrap().to_owned();
        for parent in required_by {
            assert!(depends_on(&parent).contains(&name), "{parent} depends on {name} in the SBOM");
        }
    }
    assert_eq!(
        depends_on("rocm-app-airlock"),
        ["jre-airlock", "libhip-airlock", "mail-airlock", "rt-python-airlock"]
            .iter()
            .map(|x| (*x).to_owned())
            .collect()
    );
}

/// Issue 79: `freeze` read every archive's indexes, then the lock of the baseline it wrote
/// fetched them all again. A `Packages` file the signed `Release` names by its sha256 is now
/// kept in the cache: one freeze asks for each index once, and the next asks only for the
/// `InRelease` (which may have changed), never for an index whose digest it holds.
#[test]
fn freeze_fetches_each_index_once_and_the_next_run_only_the_signed_release() {
    let dir = tempfile::tempdir().unwrap();
    run(std::process::Command::new("bash").args([&helper("make_apt_repo.sh"), s(dir.path())])).ok();
    let log_path = dir.path().join("requests.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let server = HttpServer::spawn_with_stderr(
        &dir.path().join("repo"),
        |port| vec!["-m".into(), "http.server".into(), "--bind".into(), "127.0.0.1".into(), port.to_string()],
        std::process::Stdio::from(log),
    );
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("p");
    let spec = deb_spec(&p, &server.url, "\"hello-airlock\"", Some(&dir.path().join("keyring.asc")), "");
    // A node that runs hello-airlock 2.10-3: the recorded host's probe with that inventory.
    let mut node = airlock_run(&["probe", "--json"]).ok().json();
    node["inventory"]["packages"] = serde_json::json!({
        "hello-airlock": {"version": "2.10-3", "source": "hello-airlock", "manager": "dpkg", "architecture": "amd64"}
    });
    std::fs::write(p.join("node.json"), serde_json::to_vec(&node).unwrap()).unwrap();
    let cache = t.path().join("cache");
    let freeze = |out: &str| {
        let (inventory, out) = (p.join("node.json"), p.join(out));
        let args = ["freeze", s(&inventory), "--spec", s(&spec), "--out", s(&out), "--json"];
        run(airlock().env("AIRLOCK_CACHE", &cache).args(args)).ok()
    };
    let requests = || -> Vec<String> {
        let text = std::fs::read_to_string(&log_path).unwrap();
        text.lines().filter_map(|l| l.split("\"GET ").nth(1)?.split(' ').next().map(str::to_owned)).collect()
    };
    let indexes = |paths: &[String]| -> Vec<String> {
        paths.iter().filter(|p| p.contains("/Packages") || p.contains("/by-hash/")).cloned().collect()
    };

    let frozen = freeze("base.toml").json();
    assert!(frozen["pinned"].to_string().contains("hello-airlock=2.10-3"), "{frozen}");
    let first = requests();
    let fetched = indexes(&first);
    assert!(!fetched.is_empty(), "the indexes were fetched: {first:?}");
    let distinct: std::collections::BTreeSet<&String> = fetched.iter().collect();
    assert_eq!(distinct.len(), fetched.len(), "each index once, the baseline's lock included: {fetched:?}");

    freeze("base-again.toml");
    let again: Vec<String> = requests()[first.len()..].to_vec();
    assert_eq!(indexes(&again), Vec::<String>::new(), "no index fetched again: {again:?}");
    assert!(again.iter().any(|p| p.ends_with("/InRelease")), "the signed Release is read again: {again:?}");
}
