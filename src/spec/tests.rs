use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<SpecFile, SpecError> {
    SpecFile::parse(Path::new("dir/airlock.toml"), text.to_owned())
}

fn message(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

const HEAD: &str = "[bundle]\nname = \"demo\"\nversion = \"1.0.0\"\n";

#[test]
fn the_design_example_parses_every_section() {
    let text = r#"
[bundle]
name = "rocm10-canary"
version = "2026.11.0"
description = "ROCm 10.0.0 + vLLM 0.27.0 canary for MI300X pool A"

[registries."127.0.0.1:5000"]
insecure = true
ca = "certs/site-ca.pem"

[[image]]
ref = "127.0.0.1:5000/rocm/vllm:rocm10.0.0_vllm0.27.0"
platforms = ["linux/amd64"]

[[image]]
oci_layout = "vendor/images"
tag = "base:1.0"

[[wheel]]
index = "http://127.0.0.1:8080/simple"
requirements = ["six==1.16.0", "packaging==24.1"]
python = "3.12"
platforms = ["manylinux_2_28_x86_64", "any"]

[[deb]]
repo = "http://127.0.0.1:8081/debian"
suite = "stable"
components = ["main"]
arch = "amd64"
packages = ["hello=2.10-3"]
keyring = "keys/upstream-apt.asc"

[[model]]
hub = "http://127.0.0.1:8082"
repo = "org/tiny-model"
revision = "main"
files = ["*.json", "*.safetensors"]

[[file]]
name = "mi300x-pldm-01.25.05.00.bin"
source = "https://oem.example/fw/mi300x.bin"
sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
kind = "firmware"
notes = { board = "MI300X", min_version = "01.25.05.00", vendor = "OEM", advisory = "x" }

[[validation.target]]
gpu = "MI300X"
gfx = "gfx942"
os = ["ubuntu 24.04", "ubuntu 22.04"]
kernel = ["6.8.*", "6.14.*"]
amdgpu = ">=6.12"
firmware = { PLDM_BUNDLE = ">=01.25.05.00" }

[[validation.check]]
name = "rvs-gst"
run = ["rvs", "-c", "/opt/rocm/share/rocm-validation-suite/conf/MI300X/gst_single.conf"]
timeout_s = 900
"#;
    let f = parse(text).unwrap();
    let s = &f.spec;
    assert_eq!(s.bundle.name.as_str(), "rocm10-canary");
    assert_eq!(s.bundle.version, semver::Version::parse("2026.11.0").unwrap());
    assert!(s.registries["127.0.0.1:5000"].insecure);
    assert_eq!((s.image.len(), s.wheel.len(), s.deb.len(), s.model.len(), s.file.len()), (2, 1, 1, 1, 1));
    assert_eq!(s.file[0].get_ref().kind, FileKind::Firmware);
    assert_eq!(s.file[0].get_ref().notes["board"], "MI300X");
    assert_eq!(f.line_of(&s.image[1].span()), 15, "spans point at the entry");
    assert_eq!(s.validation.target[0].firmware["PLDM_BUNDLE"], ">=01.25.05.00");
    assert_eq!(s.validation.check[0].get_ref().timeout_s, Some(900));
    assert_eq!(f.base_dir(), Path::new("dir"));
}

#[test]
fn unknown_keys_name_file_line_and_key() {
    let msg = message(&format!("{HEAD}\n[[file]]\nname = \"a\"\nsource = \"a\"\nsha = \"x\"\n"));
    assert!(msg.starts_with("dir/airlock.toml:8:"), "{msg}");
    assert!(msg.contains("unknown field `sha`"), "{msg}");
}

#[test]
fn unknown_entry_kinds_are_named_as_such() {
    let msg = message(&format!("{HEAD}\n[[widget]]\nname = \"a\"\n"));
    assert!(msg.starts_with("dir/airlock.toml:5:"), "{msg}");
    assert!(msg.contains("unknown entry kind `[[widget]]`"), "{msg}");
}

#[test]
fn unknown_file_kind_and_bad_values_are_errors_with_lines() {
    let msg = message(&format!("{HEAD}[[file]]\nname = \"a\"\nsource = \"a\"\nkind = \"rom\"\n"));
    assert!(msg.contains(":7:") && msg.contains("unknown variant `rom`"), "{msg}");
    let msg = message("[bundle]\nname = \"Demo\"\nversion = \"1.0.0\"\n");
    assert!(msg.contains(":2:") && msg.contains("invalid bundle name `Demo`"), "{msg}");
    let msg = message("[bundle]\nname = \"demo\"\nversion = \"one\"\n");
    assert!(msg.contains(":3:"), "{msg}");
    let msg = message(&format!("{HEAD}[[file]]\nname = \"../x\"\nsource = \"a\"\n"));
    assert!(msg.contains("invalid file name `../x`"), "{msg}");
    let msg = message(&format!("{HEAD}[[file]]\nname = \"a\"\nsource = \"a\"\nsha256 = \"ABC\"\n"));
    assert!(msg.contains("not a sha256 digest"), "{msg}");
    let msg = message("[bundle]\nname = \"demo\"\n");
    assert!(msg.contains("missing field `version`"), "{msg}");
    // The manifest's `validation` carries `impact`; a spec's `[validation]` does not.
    let impact = "impact = [{ component = \"c\", old = \"a\", new = \"b\", test = \"t\", owner = \"o\", decision = \"accept\" }]";
    let msg = message(&format!("{HEAD}[validation]\n{impact}\n"));
    assert!(msg.contains(":5:") && msg.contains("the top-level `[[impact]]` register"), "{msg}");
    let msg = message(&format!("{HEAD}[validation]\nimpacts = []\n"));
    assert!(msg.contains("unknown field `impacts`"), "{msg}");
}

#[test]
fn cross_entry_rules_point_at_the_entry() {
    let dup = format!("{HEAD}[[file]]\nname = \"a\"\nsource = \"a\"\n\n[[file]]\nname = \"a\"\nsource = \"b\"\n");
    let msg = message(&dup);
    assert!(msg.starts_with("dir/airlock.toml:8:") && msg.contains("duplicate `[[file]]` name `a`"), "{msg}");
    let url = format!("{HEAD}[[file]]\nname = \"a\"\nsource = \"https://x.example/a\"\n");
    assert!(message(&url).contains("needs `sha256`"));
    let both = format!("{HEAD}[[image]]\nref = \"r:1\"\noci_layout = \"l\"\ntag = \"base:1\"\n");
    assert!(message(&both).contains("either `ref` or `oci_layout`"));
    let unpinned = format!("{HEAD}[[image]]\nref = \"127.0.0.1:5000/rocm/vllm\"\n");
    let msg = message(&unpinned);
    assert!(
        msg.starts_with("dir/airlock.toml:4:") && msg.contains("expected a `:tag` or an `@sha256:` digest"),
        "{msg}"
    );
    let bare_tag = format!("{HEAD}[[image]]\noci_layout = \"l\"\ntag = \"1.0\"\n");
    assert!(message(&bare_tag).contains("invalid image reference `1.0`"));
    let platform = format!("{HEAD}[[image]]\nref = \"r/x:1\"\nplatforms = [\"amd64\"]\n");
    assert!(message(&platform).contains("invalid platform `amd64`"));
    let no_tag = format!("{HEAD}[[image]]\noci_layout = \"l\"\n");
    assert!(message(&no_tag).contains("needs `tag`"));
    let deb = "[[deb]]\nrepo = \"http://a/debian\"\nsuite = \"s\"\ncomponents = [\"main\"]\narch = \"amd64\"\n";
    let resolving = format!("{HEAD}{deb}packages = [\"jq\"]\nresolve = true\ndependencies = [\"libjq1=1\"]\n");
    assert!(message(&resolving).contains("`dependencies` need `resolve = false`"), "{}", message(&resolving));
    let loose = format!("{HEAD}{deb}packages = [\"jq=1\"]\ndependencies = [\"libjq1\"]\n");
    assert!(
        message(&loose).contains("dependency `libjq1` needs its version (`libjq1=VERSION`)"),
        "{}",
        message(&loose)
    );
    let empty_run = format!("{HEAD}[[validation.check]]\nname = \"x\"\nrun = []\n");
    let msg = message(&empty_run);
    assert!(msg.contains(":4:") && msg.contains("empty `run`"), "{msg}");
}

#[test]
fn validation_serialises_as_written() {
    let f = parse(&format!("{HEAD}[[validation.target]]\ngpu = \"MI300X\"\nos = [\"ubuntu 24.04\"]\n")).unwrap();
    let v = serde_json::to_value(&f.spec.validation).unwrap();
    assert_eq!(v, serde_json::json!({"target": [{"gpu": "MI300X", "os": ["ubuntu 24.04"]}]}));
}

#[test]
fn lock_staleness_is_explained() {
    use crate::clock::Timestamp;
    use crate::spec::lock::{Lock, LockedFile};
    let f = parse(&format!("{HEAD}[[file]]\nname = \"a\"\nsource = \"a.bin\"\n")).unwrap();
    let mut lock = Lock::new(Timestamp::from_unix(0));
    assert!(lock.stale_reason(&f.spec).unwrap().contains("`a` is not locked"));
    let entry = LockedFile {
        name: FileName::new("a").unwrap(),
        source: "a.bin".into(),
        sha256: crate::digest::Sha256::of_bytes(b""),
        size: 0,
        files: Vec::new(),
        signature: None,
    };
    lock.file.push(entry.clone());
    assert_eq!(lock.stale_reason(&f.spec), None);
    lock.file[0].source = "b.bin".into();
    assert!(lock.stale_reason(&f.spec).unwrap().contains("source changed"));
    lock.file[0] = entry.clone();
    lock.file.push(LockedFile { name: FileName::new("gone").unwrap(), ..entry });
    assert!(lock.stale_reason(&f.spec).unwrap().contains("`gone` is no longer in the spec"));
}
