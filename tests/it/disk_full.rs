//! The file system under a bundle or a site. A full disk: a small tmpfs (mounted in a private
//! mount namespace with `unshare -rm`, so no privileges are needed) under the bundle being
//! written, the download cache, or the site root. Each run gives a clear error naming the path,
//! removes its temporary files, leaves no output and activates nothing. And an XFS (a loop
//! device, as root), whose files share blocks: the site's copy of a bundle is made that way,
//! and the space check before install counts the content alone.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// `unshare ARGS`, with the environment `airlock()` sets (the probes' fixture host).
fn unshare(args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(args);
    for (k, v) in airlock().get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd
}

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
    let mut cmd = unshare(&["-rm", "sh", "-c", &script]);
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

/// Run `script` (sh) as root in a private mount namespace with a new 512 MiB XFS mounted at
/// `m` (its image beside it); what it printed, once it exited 0.
fn on_xfs(m: &Path, script: &str) -> Run {
    std::fs::create_dir(m).unwrap();
    let image = m.with_extension("img");
    let script = format!(
        "truncate -s 512M '{image}' && mkfs.xfs -q '{image}' || exit 98\nmount -o loop '{image}' '{m}' || exit 99\n{script}",
        image = s(&image),
        m = s(m)
    );
    let r = run(&mut unshare(&["-m", "sh", "-c", &script]));
    assert_ne!(r.code, 98, "mkfs.xfs (scripts/test.sh installs xfsprogs): {}", r.stderr);
    assert_ne!(r.code, 99, "a loop device (the tests run as root): {}", r.stderr);
    r.ok()
}

/// What `out`'s lines that begin with `key` say after it.
fn said(out: &str, key: &str) -> Vec<String> {
    out.lines().filter_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_owned()).collect()
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

/// On a file system whose files can share blocks (XFS with reflink, RHEL's default), the site's
/// copy of the bundle shares the bundle file's blocks and is what is verified: install and
/// rollback write the tree, not the bundle a second time. A damaged bundle is still refused.
#[test]
fn on_xfs_the_retained_copy_shares_the_bundle_files_blocks() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let (mut bundles, mut size) = (Vec::new(), 0);
    for version in ["1.0.0", "1.1.0"] {
        let p = project(&t.path().join(version), version);
        std::fs::write(p.dir.join("fw/board.bin"), pattern(4 << 20, 7)).unwrap();
        let out = t.path().join(format!("{version}.airlock"));
        build(&p, &keys, &out).ok();
        size = std::fs::metadata(&out).unwrap().len();
        bundles.push(out);
    }
    // The last member's bytes damaged: refused on the copy as on the file.
    let mut damaged = std::fs::read(&bundles[0]).unwrap();
    let at = damaged.len() - 100_000;
    damaged[at] ^= 1;
    std::fs::write(t.path().join("damaged.airlock"), damaged).unwrap();

    let m = t.path().join("xfs");
    let bin = airlock().get_program().to_string_lossy().into_owned();
    let (pubkey, dir) = (s(&keys.public), s(t.path()));
    let script = format!(
        r#"cp '{dir}/1.0.0.airlock' '{dir}/1.1.0.airlock' '{dir}/damaged.airlock' '{m}/'
used() {{ df -B1 --output=used '{m}' | tail -1; }}
a=$(used)
RUST_LOG=info '{bin}' install '{m}/1.0.0.airlock' --trust '{pubkey}' --root '{m}/site' || exit 1
echo "GREW $(( $(used) - a ))"
filefrag -v '{m}'/site/bundles/*/bundle.airlock | grep -c shared | sed 's/^/SHARED /'
'{bin}' install '{m}/damaged.airlock' --trust '{pubkey}' --root '{m}/site'; echo "DAMAGED $?"
ls '{m}/site/bundles' '{m}/site/staging' | sed 's/^/LEFT /'
'{bin}' install '{m}/1.1.0.airlock' --trust '{pubkey}' --root '{m}/site' || exit 1
a=$(used)
RUST_LOG=info '{bin}' rollback --root '{m}/site' || exit 1
echo "ROLLED $(( $(used) - a ))"
"#,
        m = s(&m),
    );
    let r = on_xfs(&m, &script);
    let said = |key: &str| said(&r.stdout, key);
    // Signed: the used space can also drop while the script runs (XFS trims the speculative
    // preallocation of the files copied in before it), and a negative growth is below any bound.
    let number = |key: &str| -> i64 { said(key)[0].parse().unwrap() };
    let size = i64::try_from(size).unwrap();
    // Install and rollback each verified the copy, which shares the file's blocks.
    assert_eq!(
        r.stderr.matches("the copy shares the bundle file's blocks; verifying the copy").count(),
        2,
        "{}",
        r.stderr
    );
    assert_eq!(said("SHARED "), ["1"], "{}", r.stdout);
    // The disk took the tree (the 4 MiB member and the rest), not the bundle again.
    assert!(number("GREW ") < size + size / 2, "{} of a {size}-byte bundle", number("GREW "));
    assert!(number("ROLLED ") < size + size / 2, "{} of a {size}-byte bundle", number("ROLLED "));
    // The damaged bundle: refused (exit 3), nothing retained or left staged.
    assert_eq!(said("DAMAGED "), ["3"], "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("damaged.airlock") && r.stderr.contains("sha256"), "{}", r.stderr);
    assert_eq!(said("LEFT ").iter().filter(|l| !l.is_empty() && !l.ends_with(':')).count(), 1, "{}", r.stdout);
}

/// The space check before install counts what the install will take: on XFS, with the bundle
/// file on the root's own file system, its content alone (the kept copy shares the file's
/// blocks); from another file system, the copy as well. The disk is filled to leave room for
/// 1.5 times the bundle: the first install is refused before anything is written, the second
/// fits and is made.
#[test]
fn on_xfs_the_space_check_counts_the_content_alone() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("p"), "1.0.0");
    std::fs::write(p.dir.join("fw/board.bin"), pattern(16 << 20, 9)).unwrap();
    let out = t.path().join("b.airlock");
    build(&p, &keys, &out).ok();
    let size = std::fs::metadata(&out).unwrap().len();

    let m = t.path().join("xfs");
    let bin = airlock().get_program().to_string_lossy().into_owned();
    let (pubkey, bundle) = (s(&keys.public), s(&out));
    let script = format!(
        r#"cp '{bundle}' '{m}/b.airlock' && mkdir '{m}/site/'
avail=$(df -B1 --output=avail '{m}' | tail -1)
fallocate -l $(( avail - {size} * 3 / 2 )) '{m}/filler' || exit 1
'{bin}' install '{bundle}' --trust '{pubkey}' --root '{m}/site'; echo "ELSEWHERE $?"
ls -A '{m}/site' '{m}/site/staging' | sed 's/^/LEFT /'
RUST_LOG=debug '{bin}' install '{m}/b.airlock' --trust '{pubkey}' --root '{m}/site'; echo "HERE $?"
ls '{m}/site/bundles' | sed 's/^/RETAINED /'
"#,
        m = s(&m),
    );
    let r = on_xfs(&m, &script);
    let said = |key: &str| said(&r.stdout, key);
    // From the test's own file system: the copy is written, and it does not fit with the content.
    assert_eq!(said("ELSEWHERE "), ["1"], "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("not enough space under") && r.stderr.contains("(the file kept and its content unpacked)"),
        "{}",
        r.stderr
    );
    // Refused before anything was written: the lock file and an empty staging, a record.
    let left: Vec<String> = said("LEFT ").into_iter().filter(|l| !l.is_empty() && !l.ends_with(':')).collect();
    assert!(left.iter().all(|l| [".lock", "staging", "records"].contains(&l.as_str())), "{left:?}");
    // From the root's file system: the content alone is counted, and the install is made.
    assert_eq!(said("HERE "), ["0"], "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("the site's copy will share the bundle file's blocks"), "{}", r.stderr);
    assert!(r.stderr.contains("the copy shares the bundle file's blocks; verifying the copy"), "{}", r.stderr);
    assert_eq!(said("RETAINED ").len(), 1, "{}", r.stdout);
}
