//! A registry or an `oci-layout:` directory that lies (issue 25): a layer declared 1 TiB long,
//! a body that never ends, a manifest or referrers list that never ends, a blob that is a
//! link to `/dev/zero` or a FIFO (refused unread: not a regular file),
//! and a tag that names another version than the bundle it points at. `pull`, `copy` and
//! `install oci://` write at most what was declared, stop at the first byte past it, and
//! activate only the version a version tag names.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

/// Bytes under `dir`, links not followed.
fn bytes_under(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

fn pushed_layout(b: &Built, tag: &str) -> std::path::PathBuf {
    let layout = b.t.path().join("layout");
    airlock_run(&["push", s(&b.bundle), &format!("oci-layout:{}:{tag}", layout.display())]).ok();
    layout
}

#[test]
fn a_hostile_registry_never_fills_the_disk() {
    let b = built_project();
    let layout = pushed_layout(&b, "1.0.0");
    let cases = [
        ("huge", 1, "declares"),
        ("endless", 3, "more than the declared"),
        ("bigdoc", 1, "more than a manifest can be"),
        ("bigrefs", 1, "more than a manifest can be"),
    ];
    for (mode, code, says) in cases {
        let server = http::HttpServer::spawn(b.t.path(), |port| {
            vec![helper("hostile_registry.py"), port.to_string(), s(&layout).to_owned(), mode.to_owned()]
        });
        let host = server.url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let work = b.t.path().join(mode);
        std::fs::create_dir_all(&work).unwrap();
        let out = work.join("pulled.airlock");
        let started = Instant::now();
        let target = format!("oci://{host}/demo:1.0.0");
        let pull = run(airlock().env("AIRLOCK_CACHE", work.join("cache")).args([
            "pull",
            &target,
            "--out",
            s(&out),
            "--trust",
            s(&b.keys.public),
            "--insecure-registry",
        ]));
        assert_eq!(pull.code, code, "{mode}: {}", pull.stderr);
        assert!(pull.stderr.contains(says), "{mode}: {}", pull.stderr);
        assert!(started.elapsed() < Duration::from_secs(30), "{mode}: took {:?}", started.elapsed());
        let written = bytes_under(&work);
        assert!(written < 4 << 20, "{mode}: {written} bytes written");
        assert!(!out.exists());
        let copy = run(airlock().args([
            "copy",
            &target,
            &format!("oci-layout:{}:x", work.join("copy").display()),
            "--insecure-registry",
        ]));
        assert_ne!(copy.code, 0, "{mode}: copy: {}", copy.stderr);
        assert!(bytes_under(&work) < 4 << 20, "{mode}: copy wrote {} bytes", bytes_under(&work));
    }
}

#[test]
fn a_manifest_that_is_not_the_digest_asked_for_is_a_verification_failure() {
    let b = built_project();
    let layout = pushed_layout(&b, "1.0.0");
    // The hostile registry answers every manifest request with the same bytes.
    let server = http::HttpServer::spawn(b.t.path(), |port| {
        vec![helper("hostile_registry.py"), port.to_string(), s(&layout).to_owned(), "endless".to_owned()]
    });
    let host = server.url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let asked = format!("oci://{host}/demo@sha256:{}", "0".repeat(64));
    let out = b.t.path().join("pulled.airlock");
    let pull = airlock_run(&["pull", &asked, "--out", s(&out), "--trust", s(&b.keys.public), "--insecure-registry"]);
    assert_eq!(pull.code, 3, "{}", pull.stderr);
    assert!(pull.stderr.contains(&format!("expected sha256 {}", "0".repeat(64))), "{}", pull.stderr);
    assert!(!out.exists());
}

#[test]
fn a_layout_blob_linked_to_dev_zero_is_refused_unread() {
    let b = built_project();
    let layout = pushed_layout(&b, "1.0.0");
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let artifact_digest = index["manifests"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:");
    let artifact: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(artifact_digest)).unwrap()).unwrap();
    let layers = artifact["layers"].as_array().unwrap();
    let bundle_layer = layers.last().unwrap()["digest"].as_str().unwrap().trim_start_matches("sha256:");
    let blob = layout.join("blobs/sha256").join(bundle_layer);
    std::fs::remove_file(&blob).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &blob).unwrap();
    let work = b.t.path().join("work");
    let started = Instant::now();
    let pull = run(airlock().env("AIRLOCK_CACHE", work.join("cache")).args([
        "pull",
        &format!("oci-layout:{}:1.0.0", layout.display()),
        "--out",
        s(&work.join("pulled.airlock")),
        "--trust",
        s(&b.keys.public),
    ]))
    .code(3);
    assert!(pull.stderr.contains("not a regular file"), "refused before a byte is read: {}", pull.stderr);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(bytes_under(&work) < 4 << 20, "{} bytes written", bytes_under(&work));
    let root = b.t.path().join("site");
    let install = airlock_run(&[
        "install",
        &format!("oci-layout:{}:1.0.0", layout.display()),
        "--trust",
        s(&b.keys.public),
        "--root",
        s(&root),
    ]);
    assert_eq!(install.code, 3, "{}", install.stderr);
    assert_nothing_installed(&root);
}

#[test]
fn a_version_tag_that_points_at_another_version_is_refused() {
    let b = built_project(); // demo 1.0.0
    let layout = pushed_layout(&b, "2.0.0");
    let from = format!("oci-layout:{}:2.0.0", layout.display());
    let out = b.t.path().join("pulled.airlock");
    let pull = airlock_run(&["pull", &from, "--out", s(&out), "--trust", s(&b.keys.public)]).code(3);
    assert!(pull.stderr.contains("tag `2.0.0`") && pull.stderr.contains("1.0.0"), "{}", pull.stderr);
    assert!(!out.exists());
    let root = b.t.path().join("site");
    let install = airlock_run(&["install", &from, "--trust", s(&b.keys.public), "--root", s(&root)]).code(3);
    assert!(install.stderr.contains("tag `2.0.0`"), "{}", install.stderr);
    assert_nothing_installed(&root);

    // A tag that is not a version names no version; `latest` installs whatever it points at.
    let latest = pushed_layout(&b, "latest");
    airlock_run(&[
        "install",
        &format!("oci-layout:{}:latest", latest.display()),
        "--trust",
        s(&b.keys.public),
        "--root",
        s(&root),
    ])
    .ok();
    // Anti-downgrade holds for oci:// installs as for files.
    let newer = project(&b.t.path().join("p2"), "1.1.0");
    let newer_bundle = b.t.path().join("b2.airlock");
    build(&newer, &b.keys, &newer_bundle).ok();
    airlock_run(&["install", s(&newer_bundle), "--trust", s(&b.keys.public), "--root", s(&root)]).ok();
    let old = pushed_layout(&b, "1.0.0");
    let refused = airlock_run(&[
        "install",
        &format!("oci-layout:{}:1.0.0", old.display()),
        "--trust",
        s(&b.keys.public),
        "--root",
        s(&root),
    ])
    .code(3);
    assert!(refused.stderr.contains("already activated demo 1.1.0"), "{}", refused.stderr);
}

/// Issue 77: a FIFO planted in an `oci-layout:` directory (a manifest or a layer) held `pull`
/// for ever: nothing writes to it. Opened as the rest of airlock opens files it did not write
/// (a regular file or nothing), it is refused at once.
#[test]
fn a_fifo_planted_in_a_layout_is_refused_not_waited_on() {
    let b = built_project();
    let layout = pushed_layout(&b, "1.0.0");
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let artifact_digest = index["manifests"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_owned();
    let artifact_path = layout.join("blobs/sha256").join(&artifact_digest);
    let artifact: serde_json::Value = serde_json::from_slice(&std::fs::read(&artifact_path).unwrap()).unwrap();
    let layer = artifact["layers"].as_array().unwrap().last().unwrap()["digest"].as_str().unwrap().to_owned();
    let planted = |path: &Path| {
        std::fs::remove_file(path).unwrap();
        let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(made.success());
    };
    planted(&layout.join("blobs/sha256").join(layer.trim_start_matches("sha256:")));
    for round in ["layer", "manifest"] {
        if round == "manifest" {
            planted(&artifact_path);
        }
        let work = b.t.path().join(round);
        let mut child = airlock()
            .env("AIRLOCK_CACHE", work.join("cache"))
            .args(["pull", &format!("oci-layout:{}:1.0.0", layout.display()), "--out"])
            .arg(work.join("pulled.airlock"))
            .args(["--trust", s(&b.keys.public)])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{round}: pull still waits on the FIFO after 30 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{round}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{round}: {stderr}");
        assert!(!work.join("pulled.airlock").exists(), "{round}");
    }
}
