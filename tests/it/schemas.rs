//! The JSON Schemas in `schemas/` describe what airlock reads and writes: real samples must
//! validate, and inputs the parser refuses must not.

use std::path::Path;

use crate::common::*;

#[test]
fn spec_samples_validate_and_parse() {
    let v = validator("airlock.spec.schema.json");
    for sample in ["testdata/demo/airlock.toml", "testdata/specs/design-example.toml"] {
        let text = std::fs::read_to_string(repo(sample)).unwrap();
        assert_eq!(schema_errors(&v, &toml_as_json(&text)), Vec::<String>::new(), "{sample}");
        airlock::spec::SpecFile::parse(Path::new(sample), text).unwrap_or_else(|e| panic!("{sample}: {e}"));
    }
}

#[test]
fn specs_the_parser_refuses_the_schema_refuses_too() {
    let v = validator("airlock.spec.schema.json");
    let head = "[bundle]\nname = \"demo\"\nversion = \"1.0.0\"\n";
    let bad = [
        "[bundle]\nname = \"Demo\"\nversion = \"1.0.0\"\n".to_owned(),
        "[bundle]\nname = \"demo\"\nversion = \"1.0\"\n".to_owned(),
        format!("{head}colour = \"red\"\n"),
        format!("{head}[[widget]]\nname = \"a\"\n"),
        format!("{head}[[file]]\nname = \"a\"\nsource = \"a\"\nkind = \"rom\"\n"),
        format!("{head}[[file]]\nname = \"a\"\nsource = \"https://x.example/a\"\n"),
        format!("{head}[[file]]\nname = \"a\"\nsource = \"a\"\nsha256 = \"ABC\"\n"),
        format!("{head}[[image]]\nref = \"r:1\"\noci_layout = \"l\"\ntag = \"t\"\n"),
        format!("{head}[[image]]\noci_layout = \"l\"\n"),
        format!("{head}[[validation.check]]\nname = \"x\"\nrun = []\n"),
    ];
    for text in bad {
        assert!(!v.is_valid(&toml_as_json(&text)), "schema accepts:\n{text}");
        assert!(airlock::spec::SpecFile::parse(Path::new("t.toml"), text.clone()).is_err(), "parser accepts:\n{text}");
    }
}

#[test]
fn written_lock_and_manifest_validate() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = project(&t.path().join("proj"), "1.0.0");
    airlock_run(&["lock", s(&p.spec)]).ok();
    let lock = toml_as_json(&std::fs::read_to_string(p.dir.join("airlock.lock")).unwrap());
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock), Vec::<String>::new());

    let bundle = t.path().join("b.airlock");
    build(&p, &keys, &bundle).ok();
    let manifest = manifest_member(&bundle);
    let v = validator("airlock.manifest.v1.schema.json");
    assert_eq!(schema_errors(&v, &manifest), Vec::<String>::new());

    for (pointer, value) in [
        ("/schema", serde_json::json!("airlock.bundle/v2")),
        ("/entries/0/path", serde_json::json!("files/../../etc/passwd")),
        ("/entries/0/path", serde_json::json!("/etc/passwd")),
        ("/entries/0/sha256", serde_json::json!("XYZ")),
        ("/artifacts/0/file_kind", serde_json::json!("rom")),
    ] {
        let mut broken = manifest.clone();
        *broken.pointer_mut(pointer).unwrap() = value.clone();
        assert!(!v.is_valid(&broken), "schema accepts {pointer} = {value}");
    }
    let mut without_sbom = manifest.clone();
    without_sbom["entries"].as_array_mut().unwrap().retain(|e| e["path"] != "airlock/sbom.cdx.json");
    assert!(!v.is_valid(&without_sbom), "every v1 manifest lists its SBOM");
}

#[test]
fn the_official_cyclonedx_schema_check_rejects_a_broken_sbom() {
    let t = tempfile::tempdir().unwrap();
    let broken = t.path().join("broken.cdx.json");
    let bom = r#"{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,"metadata":{"component":{"type":"platform","name":"x","purl":"pkg:generic/x@1"}},"components":[{"type":"bogus","name":"y","purl":"pkg:generic/y@1"}]}"#;
    std::fs::write(&broken, bom).unwrap();
    let out = run(std::process::Command::new("python3").args([
        &helper("check_sbom.py"),
        s(&repo("schemas/cyclonedx")),
        s(&broken),
    ]));
    assert_ne!(out.code, 0, "an unknown component type must fail the schema: {}", out.stdout);
    assert!(out.stderr.contains("SCHEMA"), "{}", out.stderr);
}
