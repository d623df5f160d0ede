//! Every digest or size mismatch of every source is a verification failure: exit 3, a message
//! naming what did not match, no bundle written and nothing unverified left in the cache.
//! Each source is tried against the real server kind it reads (files over HTTP, a PEP 691
//! index, a signed apt repository, a hub, a local OCI layout); the cases not already pinned
//! elsewhere (a wrong URL pin, a lying wheel digest or LFS oid, a damaged registry layer, a
//! local file edited after the lock) are here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::http::HttpServer;
use crate::common::*;

/// Runs airlock with its own cache under `dir` and a fixed time.
struct Project {
    dir: PathBuf,
    keys: Keys,
}

impl Project {
    fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        Self { dir: dir.to_owned(), keys: keygen(&dir.join("keys"), "build") }
    }

    fn spec(&self, name: &str, body: &str) -> PathBuf {
        let spec = self.dir.join(format!("{name}.toml"));
        std::fs::write(&spec, format!("[bundle]\nname = \"{name}\"\nversion = \"1.0.0\"\n\n{body}")).unwrap();
        spec
    }

    fn cache(&self, name: &str) -> PathBuf {
        self.dir.join(format!("cache-{name}"))
    }

    fn airlock(&self, cache: &str, args: &[&str]) -> Run {
        run(airlock().env("AIRLOCK_CACHE", self.cache(cache)).env("SOURCE_DATE_EPOCH", EPOCH).args(args))
    }

    fn lock(&self, cache: &str, spec: &Path) -> Run {
        self.airlock(cache, &["lock", s(spec)])
    }

    /// `build --locked` into `NAME.airlock`; returns the run and the bundle path.
    fn build(&self, cache: &str, spec: &Path) -> (Run, PathBuf) {
        let out = spec.with_extension("airlock");
        let r = self.airlock(cache, &["build", s(spec), "--locked", "--key", s(&self.keys.private), "--out", s(&out)]);
        (r, out)
    }

    /// `build --locked --no-blob-cache`: image layers go from the source into the bundle.
    fn build_streamed(&self, cache: &str, spec: &Path) -> (Run, PathBuf) {
        let out = spec.with_extension("airlock");
        let args = ["build", s(spec), "--locked", "--no-blob-cache", "--key", s(&self.keys.private), "--out", s(&out)];
        (self.airlock(cache, &args), out)
    }

    /// Exit 3, every `needle` in the message, no bundle, nothing partial in `cache`.
    fn refused(&self, r: Run, out: Option<&Path>, cache: &str, needles: &[&str]) {
        let r = r.code(3);
        for n in needles {
            assert!(r.stderr.contains(n), "`{n}` missing from: {}", r.stderr);
        }
        if let Some(out) = out {
            assert!(!out.exists(), "no bundle is left behind");
        }
        let tmp = self.cache(cache).join("tmp");
        let partial = std::fs::read_dir(&tmp).map_or(0, Iterator::count);
        assert_eq!(partial, 0, "nothing unverified stays in {}", tmp.display());
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

#[test]
fn files_local_or_by_url_that_changed_since_the_lock_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    std::fs::write(p.dir.join("fw.bin"), pattern(5000, 1)).unwrap();
    let spec = p.spec("local", "[[file]]\nname = \"fw.bin\"\nsource = \"fw.bin\"\n");
    p.lock("a", &spec).ok();
    // Same size, other bytes: the digest.
    std::fs::write(p.dir.join("fw.bin"), pattern(5000, 2)).unwrap();
    let (r, out) = p.build("a", &spec);
    p.refused(r, Some(&out), "a", &["fw.bin", "expected sha256", "changed since `airlock lock`"]);
    // Longer: the size, reported as the file's real size.
    std::fs::write(p.dir.join("fw.bin"), pattern(5008, 2)).unwrap();
    let (r, out) = p.build("a", &spec);
    p.refused(r, Some(&out), "a", &["fw.bin", "expected 5000 bytes, got 5008"]);
    // Shorter: what there was.
    std::fs::write(p.dir.join("fw.bin"), pattern(4000, 1)).unwrap();
    let (r, out) = p.build("a", &spec);
    p.refused(r, Some(&out), "a", &["fw.bin", "expected 5000 bytes, got 4000"]);

    let docroot = t.path().join("docroot");
    std::fs::create_dir_all(&docroot).unwrap();
    std::fs::write(docroot.join("notes.pdf"), pattern(3000, 3)).unwrap();
    let server = HttpServer::start(&docroot);
    let sha = sha256_hex(&pattern(3000, 3));
    let spec = p.spec(
        "url",
        &format!("[[file]]\nname = \"notes.pdf\"\nsource = \"{}/notes.pdf\"\nsha256 = \"{sha}\"\n", server.url),
    );
    p.lock("b", &spec).ok();
    // The server now serves other bytes; a build host with an empty cache downloads them.
    std::fs::write(docroot.join("notes.pdf"), pattern(3000, 4)).unwrap();
    let (r, out) = p.build("c", &spec);
    p.refused(r, Some(&out), "c", &["notes.pdf", &format!("expected sha256 {sha}")]);
}

#[test]
fn wheels_whose_size_or_bytes_differ_from_the_index_or_lock_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    let wheel = make_wheel(&pkgs, "sized", "1.0", "py3-none-any");
    make_wheel(&pkgs, "swapped", "1.0", "py3-none-any");
    let script = helper("json_index.py");
    let server = HttpServer::spawn(&pkgs, |port| {
        [script.as_str(), &port.to_string(), ".", "--lie-size", "sized-1.0-py3-none-any.whl"].map(String::from).to_vec()
    });
    let index = format!("{}/simple/", server.url);
    let wheel_spec =
        |name: &str| p.spec(name, &format!("[[wheel]]\nindex = \"{index}\"\nrequirements = [\"{name}==1.0\"]\n"));
    let size = std::fs::metadata(&wheel).unwrap().len();
    let r = p.lock("a", &wheel_spec("sized"));
    p.refused(r, None, "a", &["sized-1.0-py3-none-any.whl", &format!("expected {} bytes, got {size}", size + 1)]);

    let spec = wheel_spec("swapped");
    p.lock("a", &spec).ok();
    let swapped = pkgs.join("swapped-1.0-py3-none-any.whl");
    let mut bytes = std::fs::read(&swapped).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&swapped, bytes).unwrap();
    let (r, out) = p.build("b", &spec);
    p.refused(r, Some(&out), "b", &["swapped-1.0-py3-none-any.whl", "expected sha256"]);
}

#[test]
fn debs_whose_index_or_package_does_not_match_the_signed_release_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    let repo = t.path().join("apt");
    std::fs::create_dir_all(&repo).unwrap();
    run(Command::new("bash").args([&helper("make_apt_repo.sh"), s(&repo)])).ok();
    let server = HttpServer::start(&repo.join("repo"));
    let spec = p.spec(
        "debs",
        &format!(
            "[[deb]]\nrepo = \"{}\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\npackages = [\"hello-airlock=2.10-3\"]\nkeyring = \"{}\"\n",
            server.url,
            repo.join("keyring.asc").display()
        ),
    );
    p.lock("a", &spec).ok();
    // The package file changes on the server after the lock: a fresh cache downloads it.
    let deb = repo.join("repo/pool/main/h/hello-airlock/hello-airlock_2.10-3_amd64.deb");
    let mut bytes = std::fs::read(&deb).unwrap();
    bytes.extend_from_slice(b"trailing");
    std::fs::write(&deb, &bytes).unwrap();
    // A download is stopped at the first byte past the locked size.
    let (r, out) = p.build("b", &spec);
    p.refused(r, Some(&out), "b", &["hello-airlock=2.10-3", "more than the declared"]);

    // The Packages index served no longer matches what the signed Release says of it (the
    // repository serves indexes by hash, as real archives do: that is what is fetched).
    let by_hash = repo.join("repo/dists/stable/main/binary-amd64/by-hash/SHA256");
    for file in std::fs::read_dir(&by_hash).unwrap() {
        let path = file.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"\nPackage: injected\n");
        std::fs::write(&path, bytes).unwrap();
    }
    let r = p.lock("c", &spec);
    p.refused(r, None, "c", &["binary-amd64/by-hash/SHA256/", "expected sha256/size"]);
}

#[test]
fn model_files_whose_size_or_bytes_differ_from_the_hub_or_lock_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    let repo = t.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("config.json"), br#"{"hidden_size": 8}"#).unwrap();
    std::fs::write(repo.join("model.safetensors"), pattern(40_000, 7)).unwrap();
    let script = helper("hub_server.py");
    let hub = HttpServer::spawn(&repo, |port| {
        [script.as_str(), &port.to_string(), "org/m", ".", "--lie-size", "config.json"].map(String::from).to_vec()
    });
    let model = |name: &str, files: &str| {
        p.spec(name, &format!("[[model]]\nhub = \"{}\"\nrepo = \"org/m\"\nfiles = [\"{files}\"]\n", hub.url))
    };
    // A small (non-LFS) file whose size is not what the hub's tree says.
    let r = p.lock("a", &model("small", "*.json"));
    p.refused(r, None, "a", &["config.json", "the tree says 19 bytes, the hub sent 18"]);

    let spec = model("weights", "*.safetensors");
    p.lock("a", &spec).ok();
    std::fs::write(repo.join("model.safetensors"), pattern(40_000, 8)).unwrap();
    let (r, out) = p.build("b", &spec);
    p.refused(r, Some(&out), "b", &["model.safetensors", "expected sha256"]);
}

#[test]
fn images_from_a_layout_whose_manifest_or_layer_was_altered_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    let layout = p.dir.join("layout");
    oci_layout(&layout);
    let spec = p.spec("img", "[[image]]\noci_layout = \"layout\"\ntag = \"demo/app:1.0\"\n");
    p.lock("a", &spec).ok();
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let manifest_hex = index["manifests"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_owned();
    let manifest_path = layout.join("blobs/sha256").join(&manifest_hex);
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let layer_hex = manifest["layers"][0]["digest"].as_str().unwrap().trim_start_matches("sha256:").to_owned();

    // A layer with other bytes of the same size.
    let layer_path = layout.join("blobs/sha256").join(&layer_hex);
    let original = std::fs::read(&layer_path).unwrap();
    std::fs::write(&layer_path, vec![1u8; original.len()]).unwrap();
    let (r, out) = p.build("b", &spec);
    p.refused(r, Some(&out), "b", &[&layer_hex, "expected sha256"]);
    // A layer longer than its descriptor says: stopped at the declared size, kept in the
    // cache or streamed into the bundle alike.
    let mut longer = original.clone();
    longer.extend_from_slice(&[0u8; 4096]);
    std::fs::write(&layer_path, &longer).unwrap();
    let declared = format!("more than the declared {} bytes", original.len());
    let (r, out) = p.build("b", &spec);
    p.refused(r, Some(&out), "b", &[&layer_hex, &declared]);
    let (r, out) = p.build_streamed("s", &spec);
    p.refused(r, Some(&out), "s", &[&layer_hex, &declared]);
    std::fs::write(&layer_path, original).unwrap();

    // A manifest whose bytes no longer hash to the digest the lock pinned.
    let mut bytes = std::fs::read(&manifest_path).unwrap();
    bytes.push(b'\n');
    std::fs::write(&manifest_path, bytes).unwrap();
    let (r, out) = p.build("c", &spec);
    p.refused(r, Some(&out), "c", &[&format!("expected sha256 {manifest_hex}")]);
}

/// Members are read a chunk (1 MiB) at a time ahead of the tar stream: a file that grew by a
/// few bytes past an exact chunk boundary, or changed in its last byte, is still caught.
#[test]
fn large_files_that_changed_at_a_chunk_boundary_exit_3() {
    let t = tempfile::tempdir().unwrap();
    let p = Project::new(&t.path().join("p"));
    let two_chunks = pattern(2 << 20, 4);
    std::fs::write(p.dir.join("w.bin"), &two_chunks).unwrap();
    let spec = p.spec("big", "[[file]]\nname = \"w.bin\"\nsource = \"w.bin\"\n");
    p.lock("a", &spec).ok();
    let mut grown = two_chunks.clone();
    grown.extend_from_slice(b"appended");
    std::fs::write(p.dir.join("w.bin"), &grown).unwrap();
    let (r, out) = p.build("a", &spec);
    p.refused(r, Some(&out), "a", &["w.bin", "expected 2097152 bytes, got 2097160"]);
    let mut last = two_chunks.clone();
    *last.last_mut().unwrap() ^= 1;
    std::fs::write(p.dir.join("w.bin"), &last).unwrap();
    let (r, out) = p.build("a", &spec);
    p.refused(r, Some(&out), "a", &["w.bin", "expected sha256", "changed since `airlock lock`"]);
    std::fs::write(p.dir.join("w.bin"), &two_chunks).unwrap();
    let (r, _) = p.build("a", &spec);
    r.ok();
}
