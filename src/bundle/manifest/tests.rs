use std::collections::BTreeMap;

use super::*;
use crate::spec::{FileKind, FileName};

#[test]
fn attachments_are_classified_by_cosign_tag_then_artifact_type() {
    use AttachmentKind as K;
    let c = AttachmentKind::classify;
    assert_eq!(c(Some("sha256-ab.sig"), None), K::Signature);
    assert_eq!(c(Some("sha256-ab.att"), Some("application/vnd.cyclonedx+json")), K::Attestation);
    assert_eq!(c(Some("sha256-ab.sbom"), None), K::Sbom);
    assert_eq!(c(Some("sha256-ab"), Some("application/spdx+json")), K::Sbom);
    assert_eq!(c(None, Some("application/vnd.in-toto+json")), K::Attestation);
    assert_eq!(c(None, Some("application/vnd.dev.sigstore.bundle.v0.3+json")), K::Signature);
    assert_eq!(c(None, Some("application/vnd.example.thing")), K::Other);
    assert_eq!(c(None, None), K::Other);
}

#[test]
fn artifacts_are_read_with_their_files_and_refused_as_a_tagged_enum_refuses_them() {
    use serde_json::json;
    let sha = "0".repeat(64);
    let file = json!({"file_kind": "generic", "files": [{"member": "files/t/a", "path": "a", "sha256": sha, "size": 1}],
        "kind": "file", "name": "t", "path": "files/t", "sha256": sha, "size": 1, "source": "t"});
    let read: Artifact = serde_json::from_reader(file.to_string().as_bytes()).unwrap();
    let Artifact::File(f) = &read else { panic!("{read:?}") };
    // A directory's files are summed up, not held: its entries are those.
    let zero: Sha256 = sha.parse().unwrap();
    let digest = crate::spec::lock::tree_digest([("a", zero, 1)]);
    assert_eq!((f.files.len(), f.tree), (0, Some(TreeListing { count: 1, total: 1, digest })));
    let mut m = manifest(&["files/t/a"]);
    (m.entries[0].sha256, m.entries[0].size) = (zero, 1);
    m.artifacts = vec![read.clone()];
    let written = m.canonical_bytes();
    m.list_tree_files();
    assert_eq!(m.canonical_bytes(), written, "written from the entries, or listed again first, alike");
    let Artifact::File(f) = &m.artifacts[0] else { unreachable!() };
    assert_eq!((f.files.len(), f.member(&f.files[0]).unwrap().as_str()), (1, "files/t/a"));
    assert_eq!(serde_json::to_value(&m.artifacts[0]).unwrap(), file);
    let model = json!({"commit": "c0ffee", "files": [{"member": "models/o/m/c0ffee/w", "path": "w", "sha256": sha, "size": 2}],
        "hub": "https://huggingface.co", "kind": "model", "repo": "o/m", "revision": "main"});
    assert_eq!(serde_json::to_value(serde_json::from_value::<Artifact>(model.clone()).unwrap()).unwrap(), model);
    let deb = json!({"architecture": "amd64", "kind": "deb", "name": "jq", "path": "debs/jq.deb", "repo": "http://r",
        "sha256": sha, "size": 1, "suite": "s", "version": "1"});
    assert_eq!(serde_json::to_value(serde_json::from_value::<Artifact>(deb.clone()).unwrap()).unwrap(), deb);

    let refused = |text: String| serde_json::from_str::<Artifact>(&text).unwrap_err().to_string();
    let with = |key: &str, value: serde_json::Value| {
        let mut v = deb.clone();
        if value.is_null() {
            v.as_object_mut().unwrap().remove(key);
        } else {
            v[key] = value;
        }
        v.to_string()
    };
    assert!(refused(with("files", json!([]))).contains("unknown field `files`"));
    assert!(refused(with("kind", serde_json::Value::Null)).contains("missing field `kind`"));
    assert!(refused(with("suite", serde_json::Value::Null)).contains("deb artifact: missing field `suite`"));
    assert!(refused(with("kind", json!("tarball"))).contains("unknown variant `tarball`"));
    assert!(refused(with("kind", json!(7))).contains("`kind` is not a string"));
    assert!(refused(r#"{"kind": "deb", "kind": "deb"}"#.into()).contains("duplicate field `kind`"));
    assert!(refused(r#"{"kind": "file", "files": [], "files": []}"#.into()).contains("duplicate field `files`"));

    // A file's member is not held: it must be what the artifact gives, or the read fails.
    let two = |a: &str, b: &str| {
        let mut v = file.clone();
        v["files"] = json!([{"member": a, "path": "a", "sha256": sha, "size": 1},
                            {"member": b, "path": "b", "sha256": sha, "size": 0}]);
        v.to_string()
    };
    assert!(serde_json::from_str::<Artifact>(&two("files/t/a", "files/t/b")).is_ok());
    let refusal = refused(two("files/t/a", "files/u/b"));
    assert!(refusal.contains("file `b` is at `files/u/b`, not under `files/t/` with the files before it"), "{refusal}");
    let refusal = refused(two("files/t/x", "files/t/b"));
    assert!(
        refusal.contains("file `a` is not at `files/t/x`: a file's member is its directory, then `/a`"),
        "{refusal}"
    );
    let refusal = refused(two("files/t/ba", "files/t/b"));
    assert!(refusal.contains("file `a` is not at `files/t/ba`"), "{refusal}");
    let refusal = refused(two("files/u/a", "files/u/b"));
    assert!(refusal.contains("file `t` tree file `a` is not at `files/t/a`"), "{refusal}");
    let commit = "c0ffee".repeat(10)[..40].to_owned();
    let mut moved = model.clone();
    moved["commit"] = json!(commit);
    moved["files"][0]["member"] = json!(format!("models/o/other/{commit}/w"));
    let refusal = refused(moved.to_string());
    assert!(refusal.contains(&format!("model `o/m` file `w` is not at `models/o/m/{commit}/w`")), "{refusal}");
    // A commit that is not one is named as such before the file it moved.
    moved["commit"] = json!("c0ffee");
    assert!(refused(moved.to_string()).contains("commit `c0ffee` is not a hex commit sha"));
}

fn manifest(entries: &[&str]) -> Manifest {
    let d = Sha256::of_bytes(b"");
    Manifest {
        schema: SCHEMA_V1.into(),
        name: BundleName::new("demo").unwrap(),
        version: semver::Version::new(1, 0, 0),
        description: None,
        created: Timestamp::from_unix(0),
        builder: Builder { tool: "airlock/test".into(), key_id: crate::sign::KeyId::of_spki_der(b"k") },
        spec_sha256: d,
        lock_sha256: d,
        artifacts: vec![],
        entries: entries
            .iter()
            .map(|p| Entry { path: MemberPath::new(*p).unwrap(), size: 0, sha256: d, from_base: false })
            .collect(),
        base: None,
        validation: Validation::default(),
        expires: None,
    }
}

#[test]
fn canonical_bytes_are_rfc8785() {
    let bytes = manifest(&["files/a"]).canonical_bytes();
    let text = String::from_utf8(bytes).unwrap();
    // Keys sorted by UTF-16 code units, no insignificant whitespace.
    assert!(text.starts_with(r#"{"artifacts":[],"builder":{"key_id":""#), "{text}");
    assert!(text.contains(r#""entries":[{"path":"files/a","sha256":"e3b0"#), "{text}");
    assert!(!text.contains(": ") && !text.contains('\n'));
    // Same value, same bytes; parsing and re-canonicalising is the identity.
    let back: Manifest = serde_json::from_str(&text).unwrap();
    assert_eq!(back.canonical_bytes(), text.as_bytes());
}

#[test]
fn a_validation_section_this_airlock_cannot_read_refuses_the_manifest() {
    let text = String::from_utf8(manifest(&["files/a"]).canonical_bytes()).unwrap();
    assert!(text.contains(r#""validation":{}"#), "{text}");
    let with = |section: &str| text.replace(r#""validation":{}"#, &format!(r#""validation":{section}"#));
    // A newer airlock's field in a row: never read as "no targets", never skipped.
    let err = serde_json::from_str::<Manifest>(&with(r#"{"target":[{"gpu":"MI300X","pcie_gen":"5"}]}"#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`validation`") && err.contains("pcie_gen") && err.contains("newer airlock"), "{err}");
    let err = serde_json::from_str::<Manifest>(&with(r#"{"check":[{"name":"rvs"}]}"#)).unwrap_err().to_string();
    assert!(err.contains("`validation`") && err.contains("run"), "{err}");
    // None at all, or null: nothing to decide.
    let none = serde_json::from_str::<Manifest>(&with("null")).unwrap();
    assert_eq!(none.validation, Validation::default());
}

#[test]
fn the_streamed_canonical_bytes_are_the_crates_for_every_field() {
    use serde_json::json;
    let sha = "ab".repeat(32);
    let file = |path: &str| json!({"member": format!("files/t/{path}"), "path": path, "sha256": sha, "size": 3});
    let mut m = manifest(&["files/t/a", "files/t/b", "models/o/m/c0ffee/w"]);
    m.entries[1].from_base = true;
    m.description = Some("Ünïcode \"quoted\" \u{1}".into());
    m.expires = Some(Timestamp::from_unix(1_900_000_000));
    m.base = Some(BaseRef {
        manifest_sha256: Some(m.spec_sha256),
        name: Some(m.name.clone()),
        version: None,
        lock_sha256: m.lock_sha256,
    });
    m.validation = serde_json::from_value(json!({"rocm_from": "libamdhip64-5", "target": [
        {"gpu": "MI300X", "os": ["ubuntu 24.04", "rhel 9.4"], "firmware": {"é": ">=1", "PLDM_BUNDLE": ">=01.25.05.00"},
         "source": "Ünïcode \"quoted\" \u{1}"}], "check": [{"name": "rvs", "run": ["rvs", "-c", "x"], "timeout_s": 60,
         "metric": [{"name": "bw", "from": "json:/a", "better": "higher", "threshold": ">= 0.95 * current"}]}],
        "impact": [{"component": "hip", "old": "a", "new": "b", "test": "rvs", "owner": "o", "decision": "accept"}]}))
    .unwrap();
    m.artifacts = serde_json::from_value(json!([
        {"kind": "file", "name": "t", "source": "t/", "sha256": sha, "size": 6, "path": "files/t", "file_kind": "generic",
         "notes": {"why": "a tree", "a": "b"}, "files": [file("a"), file("b")]},
        {"kind": "file", "name": "one", "source": "https://x/one", "sha256": sha, "size": 1, "path": "files/one", "file_kind": "generic"},
        {"kind": "model", "hub": "https://huggingface.co", "repo": "o/m", "revision": "main", "commit": "c0ffee",
         "files": [{"member": "models/o/m/c0ffee/w", "path": "w", "sha256": sha, "size": 2}]},
        {"kind": "model", "hub": "https://huggingface.co", "repo": "o/e", "revision": "main", "commit": "c0ffee", "files": []},
        {"kind": "deb", "name": "jq", "version": "1.6-2", "architecture": "amd64", "repo": "http://r", "suite": "s",
         "sha256": sha, "size": 1, "path": "debs/jq.deb", "required_by": ["x"]},
        {"kind": "rpm", "name": "rocm-core", "epoch": 1, "version": "6.4.1", "release": "1.el9", "architecture": "x86_64",
         "repo": "http://r", "sha256": sha, "size": 1, "path": "rpms/r.rpm"},
        {"kind": "wheel", "name": "numpy", "version": "2.0.0", "filename": "numpy.whl", "url": "http://p/numpy.whl",
         "sha256": sha, "size": 1, "path": "wheels/numpy.whl", "dependencies": ["a"]},
        {"kind": "image", "reference": "r/i:1", "source": "r/i:1", "digest": format!("sha256:{sha}"),
         "media_type": "application/vnd.oci.image.index.v1+json", "size": 9},
    ]))
    .unwrap();
    m.list_tree_files();
    let expected = serde_json_canonicalizer::to_vec(&m).unwrap();
    assert_eq!(String::from_utf8(m.canonical_bytes()).unwrap(), String::from_utf8(expected.clone()).unwrap());
    assert_eq!(m.canonical_digest(), (Sha256::of_bytes(&expected), expected.len() as u64));
    // And with nothing in the lists.
    let empty = manifest(&[]);
    assert_eq!(empty.canonical_bytes(), serde_json_canonicalizer::to_vec(&empty).unwrap());
}

#[test]
fn canonical_json_follows_jcs_for_numbers_and_strings() {
    let v = serde_json::json!({"b": 1.0, "a": "\u{20ac}\n", "c": [1e21, 0.000_001]});
    let s = String::from_utf8(serde_json_canonicalizer::to_vec(&v).unwrap()).unwrap();
    assert_eq!(s, "{\"a\":\"\u{20ac}\\n\",\"b\":1,\"c\":[1e+21,0.000001]}");
}

/// A directory read from a manifest holds no files: the entries under it must be its
/// listing, file for file, or `check` refuses the manifest.
#[test]
fn a_directory_that_was_read_is_proved_by_the_entries_under_it() {
    use serde_json::json;
    let (x, y) = (Sha256::of_bytes(b"x"), Sha256::of_bytes(b"yy"));
    let tree = |listing: &[(&str, Sha256, u64)], claimed: Option<Sha256>| {
        let files: Vec<_> = listing
            .iter()
            .map(|(p, sha, size)| json!({"member": format!("files/t/{p}"), "path": p, "sha256": sha.to_string(), "size": size}))
            .collect();
        let digest = claimed.unwrap_or_else(|| crate::spec::lock::tree_digest(listing.iter().copied()));
        let size: u64 = listing.iter().map(|f| f.2).sum();
        json!({"kind": "file", "name": "t", "source": "t/", "sha256": digest.to_string(), "size": size,
               "path": "files/t", "file_kind": "generic", "files": files})
    };
    let checked = |entries: &[(&str, Sha256, u64)], artifact: serde_json::Value| {
        let mut m = manifest(&[SBOM]);
        for (p, sha256, size) in entries {
            m.entries.push(Entry {
                path: MemberPath::new(*p).unwrap(),
                size: *size,
                sha256: *sha256,
                from_base: false,
            });
        }
        m.artifacts = vec![serde_json::from_value(artifact).unwrap()];
        m.check()
    };
    let listing = [("a", x, 1), ("b", y, 2)];
    let entries = [("files/t/a", x, 1), ("files/t/b", y, 2), ("files/tt/c", x, 1)];
    assert_eq!(checked(&entries, tree(&listing, None)), Ok(()));
    let reversed: Vec<_> = entries.iter().rev().copied().collect();
    assert_eq!(checked(&reversed, tree(&listing, None)), Ok(()), "entries in another order are looked up");

    let refused = |entries: &[(&str, Sha256, u64)], artifact| checked(entries, artifact).unwrap_err().to_string();
    let unlike = "file `t`: its 2 files do not match the";
    let other = refused(&[("files/t/a", x, 1), ("files/t/b", x, 2)], tree(&listing, None));
    assert!(other.contains(unlike), "{other}");
    let more = refused(&[("files/t/a", x, 1), ("files/t/b", y, 2), ("files/t/c", x, 1)], tree(&listing, None));
    assert!(more.contains(&format!("{unlike} 3 entries under `files/t/`")), "{more}");
    let rule = ArtifactRule::TreeCount { name: "t".into(), files: 2, entries: 3, dir: "files/t/".into() };
    assert_eq!(
        checked(&[("files/t/a", x, 1), ("files/t/b", y, 2), ("files/t/c", x, 1)], tree(&listing, None)),
        Err(ManifestError::Artifact(rule))
    );
    let fewer = refused(&[("files/t/a", x, 1)], tree(&listing, None));
    assert!(fewer.contains(&format!("{unlike} 1 entries")), "{fewer}");
    let backwards = refused(&entries, tree(&[("b", y, 2), ("a", x, 1)], None));
    assert!(backwards.contains(unlike), "a listing out of path order: {backwards}");
    let claimed = checked(&entries, tree(&listing, Some(x)));
    assert_eq!(claimed, Err(ManifestError::Artifact(ArtifactRule::TreeDigest { name: "t".into() })));
}

/// `build` holds a directory's files as entries once the SBOM is written: the manifest it
/// writes is the same, and reads back the same way.
#[test]
fn a_directory_held_as_entries_writes_the_same_manifest() {
    let (x, y) = (Sha256::of_bytes(b"x"), Sha256::of_bytes(b"yy"));
    let mut m = manifest(&[SBOM, "files/t/a", "files/t/b/c"]);
    (m.entries[1].sha256, m.entries[1].size, m.entries[2].sha256, m.entries[2].size) = (x, 1, y, 2);
    let files = vec![
        ModelFile { path: MemberPath::new("a").unwrap(), sha256: x, size: 1 },
        ModelFile { path: MemberPath::new("b/c").unwrap(), sha256: y, size: 2 },
    ];
    let digest = crate::spec::lock::tree_digest([("a", x, 1), ("b/c", y, 2)]);
    m.artifacts = vec![Artifact::File(FileArtifact {
        name: FileName::new("t").unwrap(),
        source: "t/".into(),
        sha256: digest,
        size: 3,
        path: MemberPath::new("files/t").unwrap(),
        file_kind: FileKind::Generic,
        notes: BTreeMap::new(),
        files,
        tree: None,
        signature: None,
    })];
    let written = m.canonical_bytes();
    m.hold_trees_as_entries();
    let Artifact::File(f) = &m.artifacts[0] else { unreachable!() };
    assert_eq!((f.files.len(), f.tree), (0, Some(TreeListing { count: 2, total: 3, digest })));
    assert_eq!(String::from_utf8(m.canonical_bytes()).unwrap(), String::from_utf8(written.clone()).unwrap());
    assert_eq!(m.check(), Ok(()));
    let read: Manifest = serde_json::from_slice(&written).unwrap();
    assert_eq!(read.artifacts, m.artifacts);
}

#[test]
fn check_refuses_unsafe_manifests() {
    assert!(manifest(&[SBOM, "files/a", "wheels/b.whl"]).check().is_ok());
    assert!(manifest(&[SBOM, "files/a", "files/a"]).check().unwrap_err().to_string().contains("listed twice"));
    assert!(manifest(&[SBOM, "etc/passwd"]).check().unwrap_err().to_string().contains("outside the areas"));
    assert!(manifest(&[SBOM, MANIFEST]).check().unwrap_err().to_string().contains("reserved"));
    assert!(manifest(&[SBOM]).check().is_ok());
    assert!(manifest(&["files/a"]).check().unwrap_err().to_string().contains("lists its SBOM"));
    assert!(manifest(&[SBOM, "files/a", "files/a/b"]).check().unwrap_err().to_string().contains("also the directory"));
    let mut m = manifest(&[SBOM, "files/a"]);
    m.entries[1].from_base = true;
    assert!(m.check().unwrap_err().to_string().contains("names no base"));
    m.base = Some(BaseRef { manifest_sha256: None, name: None, version: None, lock_sha256: Sha256::of_bytes(b"") });
    assert!(m.check().is_ok());
    m.entries[0].from_base = true;
    assert!(m.check().unwrap_err().to_string().contains("always carried"));
    let mut m = manifest(&[]);
    m.schema = "airlock.bundle/v2".into();
    assert!(m.check().unwrap_err().to_string().contains("expected `airlock.bundle/v1`"));
}

#[test]
fn entries_are_found_by_path_sorted_or_not_and_a_path_listed_twice_is_named() {
    let paths = ["airlock/sbom.cdx.json", "files/a", "files/a.txt", "files/a/b", "images/x", "wheels/w.whl"];
    let sorted = manifest(&paths);
    let mut reversed = paths;
    reversed.reverse();
    let reversed = manifest(&reversed);
    for (m, is_sorted) in [(&sorted, true), (&reversed, false)] {
        let by_path = ByPath::new(&m.entries).unwrap();
        assert_eq!(by_path.index.is_none(), is_sorted, "an index only for unsorted entries");
        for p in paths {
            assert_eq!(by_path.get(p).map(|e| e.path.as_str()), Some(p));
        }
        for absent in ["", "files", "files/a/", "files/b", "zzz"] {
            assert!(by_path.get(absent).is_none(), "{absent}");
        }
        // `files/a` is also the directory of `files/a/b`, in either order.
        assert!(
            m.check().unwrap_err().to_string().contains("entry `files/a` is also the directory of entry `files/a/b`")
        );
    }
    for twice in
        [&["airlock/sbom.cdx.json", "files/a", "files/a"][..], &["files/a", "airlock/sbom.cdx.json", "files/a"]]
    {
        assert_eq!(ByPath::new(&manifest(twice).entries).err(), Some("files/a"));
        assert_eq!(manifest(twice).check().unwrap_err(), ManifestError::ListedTwice { path: "files/a".into() });
    }
    assert!(manifest(&["files/z", "airlock/sbom.cdx.json"]).check().is_ok());
}
