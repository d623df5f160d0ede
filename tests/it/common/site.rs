//! A site root and bundles of one name at several versions, signed by one key: what the
//! lifecycle and site-trust tests install, roll back and tamper with.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::common::*;

/// Bundles of one name at several versions, signed by one key, and a site root.
pub struct Releases {
    pub t: tempfile::TempDir,
    pub keys: Keys,
    pub root: PathBuf,
}

impl Releases {
    pub fn new() -> Self {
        let t = tempfile::tempdir().unwrap();
        let keys = keygen(&t.path().join("k"), "build");
        let root = t.path().join("site");
        Self { t, keys, root }
    }

    pub fn bundle(&self, version: &str) -> PathBuf {
        let out = self.t.path().join(format!("demo-{version}.airlock"));
        if !out.exists() {
            build(&project(&self.t.path().join(version), version), &self.keys, &out).ok();
        }
        out
    }

    pub fn install(&self, version: &str, extra: &[&str]) -> Run {
        let bundle = self.bundle(version);
        let args = [&["install", s(&bundle), "--trust", s(&self.keys.public), "--root", s(&self.root)][..], extra];
        airlock_run(&args.concat())
    }

    pub fn rollback(&self, extra: &[&str]) -> Run {
        airlock_run(&[&["rollback", "--root", s(&self.root)][..], extra].concat())
    }

    pub fn status(&self) -> serde_json::Value {
        airlock_run(&["status", "--root", s(&self.root), "--json"]).ok().json()
    }

    /// `current`'s version, and that its tree is the verified bundle it claims.
    pub fn current(&self) -> String {
        assert_current_verifies(&self.root, &self.keys);
        self.status()["current"]["version"].as_str().unwrap().to_owned()
    }

    /// The directory `ROOT/LINK` (`current` or `previous`) points at.
    pub fn linked(&self, link: &str) -> PathBuf {
        self.root.join(std::fs::read_link(self.root.join(link)).unwrap())
    }
}

/// `current` names a complete bundle that verifies, and its files are the bundle's.
pub fn assert_current_verifies(root: &Path, keys: &Keys) {
    let current = root.join("current");
    airlock_run(&["verify", s(&current.join("bundle.airlock")), "--trust", s(&keys.public)]).ok();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(current.join("airlock/manifest.json")).unwrap()).unwrap();
    for e in manifest["entries"].as_array().unwrap() {
        let path = current.join(e["path"].as_str().unwrap());
        assert_eq!(sha256_file(&path), e["sha256"].as_str().unwrap(), "{}", path.display());
    }
}
