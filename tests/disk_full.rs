//! A full disk: a small tmpfs (mounted in a private mount namespace with `unshare -rm`, so no
//! privileges are needed) under the bundle being written, the download cache, or the site
//! root. Each run gives a clear error naming the path, removes its temporary files, leaves no
//! output and activates nothing.

mod common;
#[path = "common/http.rs"]
mod http;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use common::*;

/// Run `airlock ARGS` with a `size` tmpfs mounted at `mount`, then list what is left there
/// (the namespace, and the tmpfs with it, is gone when the command returns).
fn on_small_disk(mount: &Path, size: &str, env: &[(&str, &Path)], args: &[&str]) -> (Run, Vec<String>) {
    std::fs::create_dir_all(mount).unwrap();
    let bin = airlock().get_program().to_owned();
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "mount -t tmpfs -o size={size} tmpfs '{m}' || exit 99\n'{bin}' {args}\necho \"EXIT $?\"\ncd '{m}' && find . -mindepth 1 | sort",
        m = s(mount),
        bin = bin.to_string_lossy(),
        args = quoted.join(" ")
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-rm", "sh", "-c", &script]);
    // The probes' fixture host, as `airlock()` sets it.
    for (k, v) in airlock().get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = run(&mut cmd);
    assert_ne!(r.code, 99, "unshare -rm could not mount a tmpfs (scripts/test.sh needs util-linux): {}", r.stderr);
    let (before, after) = r.stdout.split_once("EXIT ").unwrap_or_else(|| panic!("{}\n{}", r.stdout, r.stderr));
    let mut lines = after.lines();
    let code: i32 = lines.next().and_then(|c| c.trim().parse().ok()).unwrap();
    let left = lines.map(str::to_owned).collect();
    (Run { code, stdout: before.to_owned(), stderr: r.stderr }, left)
}

#[test]
fn building_onto_a_full_disk_leaves_nothing() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("p"), "1.0.0");
    // Incompressible content larger than the disk the bundle goes to.
    std::fs::write(p.dir.join("fw/board.bin"), pattern(3 << 20, 5)).unwrap();
    let out_dir = t.path().join("out");
    let out = out_dir.join("b.airlock");
    let cache = t.path().join("cache");
    let (r, left) = on_small_disk(
        &out_dir,
        "1m",
        &[("AIRLOCK_CACHE", &cache)],
        &["build", s(&p.spec), "--key", s(&keys.private), "--out", s(&out)],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(s(&out_dir)) && r.stderr.contains("No space left on device"), "{}", r.stderr);
    assert!(left.is_empty(), "no output and no temporary file: {left:?}");

    // The cache on the small disk: a download that cannot be stored fails, and nothing
    // half-written stays.
    let www = t.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let big = pattern(3 << 20, 6);
    std::fs::write(www.join("big.bin"), &big).unwrap();
    let server = http::HttpServer::start(&www);
    let q = t.path().join("q");
    std::fs::create_dir_all(&q).unwrap();
    let digest = airlock::digest::Sha256::of_bytes(&big);
    std::fs::write(
        q.join("airlock.toml"),
        format!("[bundle]\nname = \"q\"\nversion = \"1.0.0\"\n\n[[file]]\nname = \"big.bin\"\nsource = \"{}/big.bin\"\nsha256 = \"{digest}\"\n", server.url),
    )
    .unwrap();
    let (r, left) = on_small_disk(
        &cache,
        "1m",
        &[("AIRLOCK_CACHE", &cache)],
        &["build", s(&q.join("airlock.toml")), "--key", s(&keys.private), "--out", s(&t.path().join("c.airlock"))],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(s(&cache)) && r.stderr.contains("No space left on device"), "{}", r.stderr);
    assert!(!r.stderr.contains("retrying"), "a full disk is not retried: {}", r.stderr);
    let files: Vec<&String> = left.iter().filter(|l| l.contains(".partial") || l.starts_with("./tmp/")).collect();
    assert!(files.is_empty(), "no partial download left: {left:?}");
    assert!(!t.path().join("c.airlock").exists());
}

#[test]
fn installing_onto_a_full_disk_activates_nothing() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    // Many small files: the space check counts their bytes, but each takes a 4 KiB page on
    // tmpfs, so the disk fills while the bundle is being staged.
    let p = t.path().join("p");
    std::fs::create_dir_all(p.join("f")).unwrap();
    let mut spec = String::from("[bundle]\nname = \"many\"\nversion = \"1.0.0\"\n");
    for i in 0..300 {
        std::fs::write(p.join(format!("f/{i}.txt")), format!("file {i}\n")).unwrap();
        let _ = write!(spec, "\n[[file]]\nname = \"f{i}.txt\"\nsource = \"f/{i}.txt\"\n");
    }
    std::fs::write(p.join("airlock.toml"), spec).unwrap();
    let bundle = t.path().join("many.airlock");
    run(airlock().env("AIRLOCK_CACHE", t.path().join("cache")).args([
        "build",
        s(&p.join("airlock.toml")),
        "--key",
        s(&keys.private),
        "--out",
        s(&bundle),
    ]))
    .ok();
    let root = t.path().join("site");
    let (r, left) =
        on_small_disk(&root, "400k", &[], &["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(s(&root)) && r.stderr.contains("No space left on device"), "{}", r.stderr);
    // Only the site's skeleton: its lock file and an empty staging directory, and the record of
    // the failure (written once the staged tree was removed); no `current`.
    let is_record = |l: &str| l.starts_with("records/") && l.ends_with("-install.json");
    assert!(
        left.iter()
            .map(|l| l.trim_start_matches("./"))
            .all(|l| [".lock", "staging", "records"].contains(&l) || is_record(l)),
        "{left:?}"
    );
}
