//! URL-based sources against real local servers.

mod common;
#[path = "common/http.rs"]
mod http;

use common::*;
use http::HttpServer;

#[test]
fn files_by_url_are_pinned_verified_and_carried() {
    let t = tempfile::tempdir().unwrap();
    let docroot = t.path().join("served");
    std::fs::create_dir_all(&docroot).unwrap();
    let firmware = pattern(300_000, 5);
    std::fs::write(docroot.join("mi300x.bin"), &firmware).unwrap();
    let server = HttpServer::start(&docroot);
    let keys = keygen(&t.path().join("keys"), "build");
    let right = hex(&<sha2::Sha256 as sha2::Digest>::digest(&firmware));
    let spec_with = |dir: &str, sha: &str| {
        let d = t.path().join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let spec = d.join("airlock.toml");
        let body = format!(
            "[bundle]\nname = \"fw\"\nversion = \"1.0.0\"\n\n[[file]]\nname = \"mi300x.bin\"\nsource = \"{}/mi300x.bin\"\nsha256 = \"{sha}\"\nkind = \"firmware\"\nnotes = {{ board = \"MI300X\" }}\n",
            server.url
        );
        std::fs::write(&spec, body).unwrap();
        spec
    };
    let cache = t.path().join("cache");
    let with_cache =
        |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));

    // A wrong pin fails the lock with exit 3 and leaves nothing in the cache.
    let wrong = "0".repeat(64);
    let spec = spec_with("bad", &wrong);
    let r = with_cache(&["lock", s(&spec)]).code(3);
    assert!(r.stderr.contains(&format!("expected sha256 {wrong}")) && r.stderr.contains(&right), "{}", r.stderr);
    assert!(!cache.join("blobs/sha256").join(&wrong).exists() && !cache.join("blobs/sha256").join(&right).exists());
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    let out = t.path().join("bad.airlock");
    with_cache(&["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)]).code(3);
    assert!(!out.exists());

    // The right pin: locked with its size, built from the cache, installed.
    let spec = spec_with("good", &right);
    with_cache(&["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(t.path().join("good/airlock.lock")).unwrap();
    assert!(lock.contains("size = 300000") && lock.contains(&right), "{lock}");
    let bundle = t.path().join("fw.airlock");
    drop(server); // the build needs nothing but the cache now
    with_cache(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let root = t.path().join("site");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    assert_eq!(std::fs::read(root.join("current/files/mi300x.bin")).unwrap(), firmware);
}
