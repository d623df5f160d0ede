//! The network as it fails: every source behind `tests/helpers/fault_proxy.py`, a reverse
//! proxy that answers 503 and then 429 (`Retry-After: 1`) to the first requests of every path,
//! cuts a body short, or corrupts one. A build host on a bad network still produces a correct
//! bundle, or none.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::http::HttpServer;
use crate::common::registry::{Mode, Registry};
use crate::common::*;

/// The proxy in front of `upstream`, with `faults` (see the helper).
fn proxy(upstream: &str, faults: &[&str]) -> HttpServer {
    let dir = std::env::temp_dir();
    let script = helper("fault_proxy.py");
    let faults: Vec<String> = faults.iter().map(|f| (*f).to_owned()).collect();
    HttpServer::spawn(&dir, move |port| [vec![script, port.to_string(), upstream.to_owned()], faults].concat())
}

fn host(url: &str) -> &str {
    url.trim_start_matches("http://")
}

fn write_spec(dir: &Path, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let spec = dir.join("airlock.toml");
    std::fs::write(&spec, format!("[bundle]\nname = \"faults\"\nversion = \"1.0.0\"\n\n{body}")).unwrap();
    spec
}

/// A spec in `dir` that carries the image `app/x:1.0` from the plain-HTTP registry `reg`.
fn image_spec(dir: &Path, reg: &str) -> PathBuf {
    write_spec(dir, &format!("[registries.\"{reg}\"]\ninsecure = true\n\n[[image]]\nref = \"{reg}/app/x:1.0\"\n"))
}

/// `airlock build SPEC --locked --cache CACHE --key KEY --out OUT EXTRA…`.
fn build_locked(spec: &Path, cache: &Path, key: &Path, out: &Path, extra: &[&str]) -> Run {
    let args = ["build", s(spec), "--locked", "--cache", s(cache), "--key", s(key), "--out", s(out)];
    airlock_run(&[&args[..], extra].concat())
}

/// The files under `dir` (links not followed), with their sizes.
fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_owned(), e.metadata().unwrap().len()))
        .collect()
}

#[test]
fn every_source_survives_503_and_429_on_the_first_requests_of_every_path() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    // A registry, a pip index, an apt repository and a plain file server, each behind a
    // proxy that fails the first two requests of every path.
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/x", "1.0", &[]);
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    make_wheel(&pkgs, "flaky_pkg", "1.0", "py3-none-any");
    let index = HttpServer::spawn(&pkgs, |_| {
        [helper("pypiserver_on.py"), "--hash-algo".into(), "sha256".into(), ".".into()].to_vec()
    });
    let repo = apt::signed_repo();
    let files = t.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let firmware = pattern(300_000, 7);
    std::fs::write(files.join("fw.bin"), &firmware).unwrap();
    let file_server = HttpServer::start(&files);
    let (reg, pip, debs, web) = (
        proxy(&upstream.url(), &["--flaky"]),
        proxy(&index.url, &["--flaky"]),
        proxy(&repo.server.url, &["--flaky"]),
        proxy(&file_server.url, &["--flaky"]),
    );
    let spec = write_spec(
        &t.path().join("p"),
        &format!(
            "[registries.\"{reg}\"]\ninsecure = true\n\n[[image]]\nref = \"{reg}/app/x:1.0\"\n\n\
             [[wheel]]\nindex = \"{pip}/simple\"\nrequirements = [\"flaky-pkg==1.0\"]\n\n\
             [[deb]]\nrepo = \"{debs}\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\npackages = [\"hello-airlock=2.10-3\"]\nkeyring = \"{}\"\n\n\
             [[file]]\nname = \"fw.bin\"\nsource = \"{web}/fw.bin\"\nsha256 = \"{}\"\n",
            repo.dir.path().join("keyring.asc").display(),
            Sha256Hex(&firmware),
            reg = host(&reg.url),
            pip = pip.url,
            debs = debs.url,
            web = web.url,
        ),
    );
    let bundle = t.path().join("b.airlock");
    // `--retries 2`: the two failures of each path and no more; they follow Retry-After.
    let r =
        airlock_in(t.path(), &["build", s(&spec), "--retries", "2", "--key", s(&keys.private), "--out", s(&bundle)]);
    let r = r.ok();
    assert!(r.stderr.contains("503") && r.stderr.contains("429"), "the failures were seen and retried: {}", r.stderr);
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();
    let inspect = airlock_run(&["inspect", s(&bundle), "--json"]).ok().json();
    let kinds: Vec<&str> =
        inspect["artifacts"].as_array().unwrap().iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["image", "wheel", "deb", "file"]);

    // With fewer tries than failures, the build fails, naming the request, and writes nothing.
    std::fs::remove_dir_all(t.path().join("cache")).unwrap();
    let fresh = proxy(&file_server.url, &["--flaky"]);
    let spec = write_spec(
        &t.path().join("q"),
        &format!(
            "[[file]]\nname = \"fw.bin\"\nsource = \"{}/fw.bin\"\nsha256 = \"{}\"\n",
            fresh.url,
            Sha256Hex(&firmware)
        ),
    );
    let out = t.path().join("none.airlock");
    let r = airlock_in(t.path(), &["build", s(&spec), "--retries", "1", "--key", s(&keys.private), "--out", s(&out)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("fw.bin") && r.stderr.contains("after 2 tries"), "{}", r.stderr);
    assert!(!out.exists());
}

#[test]
fn a_body_cut_short_is_resumed_and_a_corrupted_one_fails_and_leaves_the_cache_clean() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let files = t.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let firmware = pattern(2_000_000, 9);
    std::fs::write(files.join("fw.bin"), &firmware).unwrap();
    let server = HttpServer::start(&files);
    let spec_for = |dir: &str, url: &str| {
        write_spec(
            &t.path().join(dir),
            &format!("[[file]]\nname = \"fw.bin\"\nsource = \"{url}/fw.bin\"\nsha256 = \"{}\"\n", Sha256Hex(&firmware)),
        )
    };

    let cut = proxy(&server.url, &["--truncate", "fw.bin"]);
    let bundle = t.path().join("b.airlock");
    let r =
        airlock_in(t.path(), &["build", s(&spec_for("p", &cut.url)), "--key", s(&keys.private), "--out", s(&bundle)])
            .ok();
    assert!(r.stderr.contains("from byte"), "resumed with a Range request: {}", r.stderr);
    airlock_run(&["verify", s(&bundle), "--trust", s(&keys.public)]).ok();
    let staged = t.path().join("x");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&staged)]).ok();
    assert_eq!(std::fs::read(staged.join("current/files/fw.bin")).unwrap(), firmware);

    std::fs::remove_dir_all(t.path().join("cache")).unwrap();
    let bad = proxy(&server.url, &["--corrupt", "fw.bin"]);
    let out = t.path().join("bad.airlock");
    let r = airlock_in(t.path(), &["build", s(&spec_for("q", &bad.url)), "--key", s(&keys.private), "--out", s(&out)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let expected = Sha256Hex(&firmware).to_string();
    assert!(r.stderr.contains(&expected), "names the expected digest: {}", r.stderr);
    assert!(!out.exists());
    let cache = t.path().join("cache");
    let left = files_under(&cache);
    assert!(left.is_empty(), "nothing unverified stays in the cache: {left:?}");
}

/// The lower-case hex sha256 of some bytes.
struct Sha256Hex<'a>(&'a [u8]);

impl std::fmt::Display for Sha256Hex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&airlock::digest::Sha256::of_bytes(self.0).to_string())
    }
}

#[test]
fn locking_an_image_asks_an_open_registry_for_v2_once() {
    let t = tempfile::tempdir().unwrap();
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/x", "1.0", &[]);
    let log = t.path().join("requests.log");
    let script = helper("fault_proxy.py");
    let url = upstream.url();
    let reg = HttpServer::spawn_with_stderr(
        t.path(),
        move |port| vec![script, port.to_string(), url, "--log".into()],
        std::fs::File::create(&log).unwrap().into(),
    );
    let reg = host(&reg.url);
    let spec = image_spec(&t.path().join("p"), reg);
    airlock_run(&["lock", s(&spec)]).ok();
    let text = std::fs::read_to_string(&log).unwrap();
    let requests: Vec<&str> = text.lines().filter(|l| l.starts_with("GET ") || l.starts_with("HEAD ")).collect();
    // The manifest, the four attachment tags, the referrers API and oci-client's own fallback
    // to the referrers tag; `/v2/` once, not before each of them.
    assert_eq!(requests.iter().filter(|r| **r == "GET /v2/").count(), 1, "{requests:#?}");
    assert!(requests.len() <= 8, "{requests:#?}");
}

/// Image blobs download while the bundle is packed: one that arrives corrupted stops the
/// build with the download's own error (exit 3, the digest named), the packing that had
/// started leaves nothing behind, and nothing unverified stays in the cache.
#[test]
fn a_corrupted_image_layer_stops_the_packing_that_started_beside_it() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/x", "1.0", &["--layers", "3", "--layer-size", "300000"]);
    let bad = proxy(&upstream.url(), &["--corrupt", "/blobs/"]);
    let reg = host(&bad.url);
    let dir = t.path().join("p");
    std::fs::create_dir_all(&dir).unwrap();
    // A file member sorts before `images/`: packing is under way when the blobs fail.
    std::fs::write(dir.join("notes.txt"), pattern(3_000_000, 5)).unwrap();
    let spec = write_spec(
        &dir,
        &format!(
            "[registries.\"{reg}\"]\ninsecure = true\n\n[[image]]\nref = \"{reg}/app/x:1.0\"\n\n\
             [[file]]\nname = \"notes.txt\"\nsource = \"notes.txt\"\n"
        ),
    );
    let out = t.path().join("b.airlock");
    let cache = t.path().join("cache");
    airlock_run(&["lock", s(&spec), "--cache", s(&cache)]).ok();
    let r = build_locked(&spec, &cache, &keys.private, &out, &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("sha256"), "names the digest: {}", r.stderr);
    assert!(!r.stderr.contains("was not fetched"), "the download's error, not packing's: {}", r.stderr);
    assert!(!out.exists());
    let leftovers: Vec<_> =
        std::fs::read_dir(t.path()).unwrap().filter_map(Result::ok).map(|e| e.file_name()).collect();
    assert!(!leftovers.iter().any(|n| n.to_string_lossy().contains("partial")), "{leftovers:?}");
    let partial = files_under(&cache.join("tmp"));
    assert!(partial.is_empty(), "nothing unverified stays in the cache: {partial:?}");
}

/// `build --no-blob-cache`: image layers go from the registry into the bundle as they download
/// and stay nowhere else. A body cut short is resumed from the byte reached, also from a
/// server that ignores `Range` (the bytes already packed are skipped); the bundle is the one a
/// cached build writes, byte for byte.
#[test]
fn a_build_that_keeps_no_blobs_resumes_cut_layers_and_writes_the_same_bundle() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let upstream = Registry::start(Mode::Plain);
    // Layers of over 1 MiB of gzip, which the bundle stores in raw zstd frames as they stream.
    upstream.push("app/x", "1.0", &["--layers", "3", "--layer-size", "1500000"]);
    for (name, faults) in
        [("ranged", &["--truncate", "/blobs/"][..]), ("unranged", &["--truncate", "/blobs/", "--ignore-range"])]
    {
        let front = proxy(&upstream.url(), faults);
        let reg = host(&front.url);
        let spec = image_spec(&t.path().join(name), reg);
        let dir = t.path().join(name);
        let build = |cache: &str, out: &str, extra: &[&str]| {
            let (cache, out) = (dir.join(cache), dir.join(out));
            let args = [&["build", s(&spec), "--cache", s(&cache), "--key", s(&keys.private), "--out", s(&out)], extra]
                .concat();
            airlock_run(&args).ok()
        };
        // Streamed first: the proxy cuts the first GET from byte 0 of every blob.
        let r = build("streamed-cache", "streamed.airlock", &["--no-blob-cache"]);
        assert!(r.stderr.contains("from byte"), "{name}: resumed: {}", r.stderr);
        let largest = files_under(&dir.join("streamed-cache")).into_iter().map(|(_, n)| n).max().unwrap_or(0);
        assert!(largest < 1_500_000, "{name}: no layer is kept in the cache (largest file: {largest} bytes)");
        build("cache", "cached.airlock", &[]);
        let (streamed, cached) = (dir.join("streamed.airlock"), dir.join("cached.airlock"));
        let bytes = std::fs::read(&streamed).unwrap();
        assert!(bytes == std::fs::read(&cached).unwrap(), "{name}: the same bundle");
        let raw_frames = bytes.windows(6).filter(|w| w == &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38]).count();
        assert_eq!(raw_frames, 3, "{name}: each layer stored in a raw frame");
        airlock_run(&["verify", s(&streamed), "--trust", s(&keys.public)]).ok();
    }
}

/// A layer that arrives corrupted, or that does not end, stops a build that keeps no blobs:
/// exit 3 naming the blob, no bundle, nothing past the declared size written anywhere.
#[test]
fn a_streamed_layer_that_is_corrupt_or_endless_stops_the_build() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/x", "1.0", &["--layers", "2", "--layer-size", "300000"]);
    for (name, fault, says) in
        [("corrupt", "--corrupt", "expected sha256"), ("endless", "--endless", "more than the declared")]
    {
        let front = proxy(&upstream.url(), &[fault, "/blobs/"]);
        let reg = host(&front.url);
        let dir = t.path().join(name);
        let spec = image_spec(&dir, reg);
        let cache = dir.join("cache");
        airlock_run(&["lock", s(&spec), "--cache", s(&cache)]).ok();
        let out = dir.join("b.airlock");
        let started = std::time::Instant::now();
        let r = build_locked(&spec, &cache, &keys.private, &out, &["--no-blob-cache"]);
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(says) && r.stderr.contains("blob sha256:"), "{name}: names the blob: {}", r.stderr);
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{name}: took {:?}", started.elapsed());
        assert!(!out.exists());
        let written: u64 = files_under(&dir).into_iter().map(|(_, n)| n).sum();
        assert!(written < 1 << 20, "{name}: {written} bytes written");
    }
}

/// A blob already in the cache is hashed again when it is packed (a blob downloaded by the
/// same build is not: it was hashed as it arrived). One damaged in the cache since an
/// earlier build, as by a power loss, stops the build with exit 3 naming it.
#[test]
fn a_cached_layer_damaged_since_an_earlier_build_is_caught_when_packed() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let upstream = Registry::start(Mode::Plain);
    upstream.push("app/x", "1.0", &["--layers", "2", "--layer-size", "200000"]);
    let reg = host(&upstream.url()).to_owned();
    let spec = image_spec(&t.path().join("p"), &reg);
    let cache = t.path().join("cache");
    let build = |out: &str| {
        let out = t.path().join(out);
        airlock_run(&["build", s(&spec), "--cache", s(&cache), "--key", s(&keys.private), "--out", s(&out)])
    };
    build("first.airlock").ok();
    // The largest blob in the cache is a layer; flip one byte, keeping its size.
    let (layer, _) = files_under(&cache.join("blobs")).into_iter().max_by_key(|(_, n)| *n).unwrap();
    let mut bytes = std::fs::read(&layer).unwrap();
    bytes[1000] ^= 0x40;
    std::fs::write(&layer, &bytes).unwrap();
    let r = build("second.airlock");
    assert_eq!(r.code, 3, "{}", r.stderr);
    let name = layer.file_name().unwrap().to_string_lossy().into_owned();
    assert!(r.stderr.contains(&name), "names the blob: {}", r.stderr);
    assert!(!t.path().join("second.airlock").exists());
}

#[test]
fn install_and_rollback_publish_through_a_site_registry_that_answers_503_then_429() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let upstream = Registry::start(Mode::Plain);
    let digest = upstream.push("app/x", "1.0", &[]);
    let mut bundles = Vec::new();
    for version in ["1.0.0", "1.1.0"] {
        let spec = write_spec(
            &t.path().join(version),
            &format!(
                "[registries.\"{u}\"]\ninsecure = true\n\n[[image]]\nref = \"{u}/app/x:1.0\"\n",
                u = upstream.host
            ),
        );
        let text = std::fs::read_to_string(&spec).unwrap().replace("1.0.0", version);
        std::fs::write(&spec, text).unwrap();
        let out = t.path().join(format!("x-{version}.airlock"));
        airlock_in(t.path(), &["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)]).ok();
        bundles.push(out);
    }
    // The site registry behind a proxy that fails the first two requests of every path (an
    // upload session's every step is a new path).
    let site = Registry::start(Mode::Plain);
    let front = proxy(&site.url(), &["--flaky"]);
    let root = t.path().join("site");
    for (i, bundle) in bundles.iter().enumerate() {
        let args = ["install", s(bundle), "--trust", s(&keys.public), "--root", s(&root)];
        let r = airlock_in(t.path(), &[&args[..], &["--registry", host(&front.url), "--insecure-registry"]].concat());
        let r = r.ok();
        if i == 0 {
            // Every request of the first publish met both failures and was tried again.
            for step in ["starting an upload", "manifest", "503", "429"] {
                assert!(r.stderr.contains(step), "`{step}` retried: {}", r.stderr);
            }
        }
    }
    let back = airlock_in(t.path(), &["rollback", "--root", s(&root), "--json", "--retries", "3"]).ok().json();
    assert_eq!(back["version"], "1.0.0");
    assert_eq!(back["images"][0]["digest"], digest.as_str(), "{back:#}");
    // The same flags as every command that talks to a network: no retries, no publish.
    let fresh = Registry::start(Mode::Plain);
    let strict = proxy(&fresh.url(), &["--flaky"]);
    let strict_root = t.path().join("strict");
    let args = ["install", s(&bundles[0]), "--trust", s(&keys.public), "--root", s(&strict_root)];
    let refused = airlock_in(
        t.path(),
        &[&args[..], &["--registry", host(&strict.url), "--insecure-registry", "--retries", "0"]].concat(),
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("publishing the images"), "{}", refused.stderr);
    // The site registry itself holds the image by its digest.
    let tag = format!("docker://{}/app/x:1.0", site.host);
    let inspect = run(Command::new("skopeo").args(["inspect", "--tls-verify=false", "--raw", &tag])).ok();
    assert_eq!(format!("sha256:{}", hex(&<sha2::Sha256 as sha2::Digest>::digest(inspect.stdout.as_bytes()))), digest);
}

/// Issue 79, 7: Ctrl-C in the middle of a build removes the `.NAME.XXXXXX.partial` it was
/// writing (hundreds of MB beside `--out`, left until the next build) and exits 130.
/// A project of 384 MiB that zstd cannot shrink, locked: long enough to be caught half-way.
fn big_project(dir: &Path) -> (PathBuf, Keys) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut chunk = vec![0u8; 1 << 20];
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("weights.bin")).unwrap());
    for _ in 0..384 {
        for b in chunk.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b.copy_from_slice(&state.to_le_bytes());
        }
        std::io::Write::write_all(&mut file, &chunk).unwrap();
    }
    drop(file);
    let spec = write_spec(dir, "[[file]]\nname = \"weights.bin\"\nsource = \"weights.bin\"\n");
    let keys = keygen(&dir.join("keys"), "k");
    run(airlock().current_dir(dir).args(["lock", s(&spec)])).ok();
    (spec, keys)
}

/// Issue 79: an install interrupted while it verifies the bundle into `staging/` removes that
/// tree before it exits 130 (it stayed, the bundle's whole content, until the next writer).
#[test]
fn an_interrupted_install_removes_its_staged_tree_and_exits_130() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (spec, keys) = big_project(dir);
    let out = dir.join("big.airlock");
    run(airlock().current_dir(dir).args(["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)])).ok();
    let root = dir.join("site");
    let staged = || {
        std::fs::read_dir(root.join("staging")).map_or(0, |d| {
            d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("stage-")).count()
        })
    };
    let mut install = airlock();
    install.args(["install", s(&out), "--trust", s(&keys.public), "--root", s(&root), "--role", "mirror"]);
    let done = interrupted(&mut install, || staged() > 0, "a staged tree");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("staged tree(s) it was writing"), "{stderr}");
    assert_eq!(staged(), 0, "the staged tree is gone");
    assert!(!root.join("current").exists(), "nothing activated");
    // The site is as it was: the next install goes through.
    run(airlock().args(["install", s(&out), "--trust", s(&keys.public), "--root", s(&root), "--role", "mirror"])).ok();
}

#[test]
fn an_interrupted_build_removes_its_partial_bundle_and_exits_130() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let (spec, keys) = big_project(dir);
    let out = dir.join("big.airlock");
    let partials = || {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(".big.airlock.") && name.ends_with(".partial")
            })
            .count()
    };
    // Locked first (`big_project`): the lock's own partial file is not the one to catch.
    let mut build = airlock();
    build.current_dir(dir).args(["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)]);
    let done = interrupted(build.args(["--cache", s(&dir.join("cache"))]), || partials() > 0, "a partial bundle");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted; removed 1 partial file"), "{stderr}");
    assert_eq!(partials(), 0, "the partial bundle is gone");
    assert!(!out.exists(), "no bundle either");
}

/// `command` started, sent SIGINT once `ready` (`what` has appeared; within a minute, and before
/// the command ends), and its output.
fn interrupted(command: &mut Command, ready: impl Fn() -> bool, what: &str) -> std::process::Output {
    let mut child = command.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let started = std::time::Instant::now();
    while !ready() {
        assert!(started.elapsed().as_secs() < 60, "no {what} appeared");
        assert!(child.try_wait().unwrap().is_none(), "the command ended before {what} could be caught");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(Command::new("kill").args(["-INT", &child.id().to_string()])).ok();
    child.wait_with_output().unwrap()
}
