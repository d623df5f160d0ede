//! URL-based sources against real local servers.

use crate::common::http::HttpServer;
use crate::common::*;

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

fn wheel_spec(dir: &std::path::Path, index: &str, requirement: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let spec = dir.join("airlock.toml");
    let body = format!(
        "[bundle]\nname = \"py\"\nversion = \"1.0.0\"\n\n[[wheel]]\nindex = \"{index}\"\nrequirements = [\"{requirement}\"]\npython = \"3.12\"\nplatforms = [\"any\", \"manylinux_2_28_x86_64\"]\n"
    );
    std::fs::write(&spec, body).unwrap();
    spec
}

#[test]
fn wheels_from_pypiserver_are_pinned_carried_and_pip_installs_them_offline() {
    let t = tempfile::tempdir().unwrap();
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    let any = make_wheel(&pkgs, "demo_pkg", "1.0.0", "py3-none-any");
    make_wheel(&pkgs, "demo_pkg", "1.0.0", "cp312-cp312-manylinux_2_28_x86_64");
    make_wheel(&pkgs, "demo_pkg", "1.0.0", "cp311-cp311-win_amd64");
    make_wheel(&pkgs, "demo_pkg", "1.1.0", "py3-none-any");
    let server = HttpServer::spawn(&pkgs, |_| {
        [helper("pypiserver_on.py"), "--hash-algo".into(), "sha256".into(), ".".into()].to_vec()
    });
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with_cache =
        |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));
    let index = format!("{}/simple", server.url);

    // A pin the index lacks lists what it has.
    let r = with_cache(&["lock", s(&wheel_spec(&t.path().join("missing"), &index, "Demo_Pkg==9.9"))]).code(1);
    assert!(r.stderr.contains("`demo-pkg==9.9` is not in the index (it has 1.0.0, 1.1.0)"), "{}", r.stderr);

    let spec = wheel_spec(&t.path().join("p"), &index, "Demo_Pkg==1.0.0");
    with_cache(&["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap();
    assert!(lock.contains("demo_pkg-1.0.0-py3-none-any.whl") && lock.contains("manylinux_2_28_x86_64.whl"), "{lock}");
    assert!(!lock.contains("win_amd64") && !lock.contains("1.1.0"), "filtered by tags and version: {lock}");
    let bundle = t.path().join("py.airlock");
    with_cache(&["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let root = t.path().join("site");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    drop(server);

    let simple = root.join("current/wheels/simple");
    let page = std::fs::read_to_string(simple.join("demo-pkg/index.html")).unwrap();
    assert!(page.contains("href=\"../../demo_pkg-1.0.0-py3-none-any.whl#sha256="), "{page}");
    let out = t.path().join("pip-out");
    let pip = |req: &str| pip_download(&simple, &out, req);
    pip("demo-pkg==1.0.0").ok();
    assert_eq!(std::fs::read(out.join("demo_pkg-1.0.0-py3-none-any.whl")).unwrap(), std::fs::read(&any).unwrap());
    assert_ne!(pip("demo-pkg==1.1.0").code, 0, "the newer version is not carried");
}

#[test]
fn wheels_from_a_pep691_json_index_and_a_lying_index_is_caught() {
    let t = tempfile::tempdir().unwrap();
    let pkgs = t.path().join("pkgs");
    std::fs::create_dir_all(&pkgs).unwrap();
    make_wheel(&pkgs, "json_pkg", "2.0", "py3-none-any");
    make_wheel(&pkgs, "liar", "1.0", "py3-none-any");
    let script = helper("json_index.py");
    let server = HttpServer::spawn(&pkgs, |port| {
        vec![script.clone(), port.to_string(), ".".into(), "--lie".into(), "liar-1.0-py3-none-any.whl".into()]
    });
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with_cache =
        |args: &[&str]| run(airlock().env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).args(args));
    let index = format!("{}/simple/", server.url);
    let spec = wheel_spec(&t.path().join("p"), &index, "json-pkg==2.0");
    let bundle = t.path().join("j.airlock");
    with_cache(&["build", s(&spec), "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let i = airlock_run(&["inspect", s(&bundle), "--json"]).ok().json();
    assert_eq!(i["artifacts"][0]["kind"], "wheel");
    let lock = toml_as_json(&std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap());
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock), Vec::<String>::new());
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    assert_eq!(i["artifacts"][0]["filename"], "json_pkg-2.0-py3-none-any.whl");

    let spec = wheel_spec(&t.path().join("q"), &index, "liar==1.0");
    let out = t.path().join("liar.airlock");
    let r = with_cache(&["build", s(&spec), "--key", s(&keys.private), "--out", s(&out)]).code(3);
    assert!(
        r.stderr.contains("liar-1.0-py3-none-any.whl") && r.stderr.contains("expected sha256 0000"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0, "nothing unverified stays");
}

fn model_spec(dir: &std::path::Path, hub: &str, files: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let spec = dir.join("airlock.toml");
    let body = format!(
        "[bundle]\nname = \"ml\"\nversion = \"1.0.0\"\n\n[[model]]\nhub = \"{hub}\"\nrepo = \"org/tiny-model\"\nrevision = \"main\"\nfiles = [{files}]\n"
    );
    std::fs::write(&spec, body).unwrap();
    spec
}

#[test]
fn models_are_pinned_to_a_commit_and_huggingface_hub_loads_them_offline() {
    let t = tempfile::tempdir().unwrap();
    let repo_dir = t.path().join("repo");
    std::fs::create_dir_all(repo_dir.join("tokenizer")).unwrap();
    std::fs::write(repo_dir.join("config.json"), br#"{"model_type": "tiny", "hidden_size": 8}"#).unwrap();
    std::fs::write(repo_dir.join("tokenizer/vocab.txt"), b"[PAD]\n[UNK]\nhello\n").unwrap();
    std::fs::write(repo_dir.join("README.md"), b"# tiny\n").unwrap();
    let weights = pattern(200_000, 11);
    std::fs::write(repo_dir.join("model.safetensors"), &weights).unwrap();
    let script = helper("hub_server.py");
    let hub = HttpServer::spawn(&repo_dir, |port| {
        [script.as_str(), &port.to_string(), "org/tiny-model", ".", "--token", "hf_secret", "--lie", "lie.bin"]
            .map(String::from)
            .to_vec()
    });
    let keys = keygen(&t.path().join("keys"), "build");
    let cache = t.path().join("cache");
    let with = |token: Option<&str>, args: &[&str]| {
        let mut c = airlock();
        c.env("AIRLOCK_CACHE", &cache).env("SOURCE_DATE_EPOCH", EPOCH).env_remove("HF_TOKEN");
        if let Some(tok) = token {
            c.env("HF_TOKEN", tok);
        }
        run(c.args(args))
    };
    let spec = model_spec(&t.path().join("p"), &hub.url, "\"*.json\", \"*.safetensors\", \"tokenizer/*\"");
    let r = with(None, &["lock", s(&spec)]).code(1);
    assert!(
        r.stderr.contains("HTTP 401") && r.stderr.contains("/api/models/org/tiny-model/revision/main"),
        "{}",
        r.stderr
    );
    with(Some("hf_secret"), &["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(t.path().join("p/airlock.lock")).unwrap();
    assert!(lock.contains("path = \"model.safetensors\"") && lock.contains("lfs = true"), "{lock}");
    assert!(lock.contains("path = \"tokenizer/vocab.txt\"") && !lock.contains("README"), "globs filter: {lock}");
    let commit = lock.lines().find_map(|l| l.strip_prefix("commit = ")).unwrap().trim_matches('"').to_owned();

    let bundle = t.path().join("ml.airlock");
    with(Some("hf_secret"), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    let lock_json = toml_as_json(&lock);
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &lock_json), Vec::<String>::new());
    let root = t.path().join("site");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    drop(hub);

    let models = root.join("current/models");
    let load = |file: &str, revision: &str| {
        let code = format!(
            "from huggingface_hub import hf_hub_download as d; print(d('org/tiny-model', '{file}', revision='{revision}'))"
        );
        let out = run(std::process::Command::new("python3")
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HUB_CACHE", &models)
            .args(["-c", &code]))
        .ok();
        std::fs::read(out.stdout.trim()).unwrap()
    };
    assert_eq!(load("model.safetensors", "main"), weights);
    assert_eq!(load("model.safetensors", &commit), weights);
    assert_eq!(load("tokenizer/vocab.txt", "main"), b"[PAD]\n[UNK]\nhello\n");
}

#[test]
fn a_model_file_that_does_not_match_its_lfs_digest_fails_the_lock() {
    let t = tempfile::tempdir().unwrap();
    let repo_dir = t.path().join("repo");
    std::fs::create_dir_all(&repo_dir).unwrap();
    std::fs::write(repo_dir.join("lie.bin"), pattern(50_000, 3)).unwrap();
    let script = helper("hub_server.py");
    let hub = HttpServer::spawn(&repo_dir, |port| {
        [script.as_str(), &port.to_string(), "org/tiny-model", ".", "--lie", "lie.bin"].map(String::from).to_vec()
    });
    let cache = t.path().join("cache");
    let spec = model_spec(&t.path().join("p"), &hub.url, "\"*.bin\"");
    let r = run(airlock().env("AIRLOCK_CACHE", &cache).args(["lock", s(&spec)])).code(3);
    assert!(r.stderr.contains("lie.bin") && r.stderr.contains("expected sha256 0000"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    let spec = model_spec(&t.path().join("q"), &hub.url, "\"*.gguf\"");
    let r = run(airlock().env("AIRLOCK_CACHE", &cache).args(["lock", s(&spec)])).code(1);
    assert!(r.stderr.contains("no file matches") && r.stderr.contains("lie.bin"), "{}", r.stderr);
}

#[test]
fn a_directory_is_one_file_entry_for_its_whole_tree() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = t.path().join("p");
    let tree = p.join("firmware");
    std::fs::create_dir_all(tree.join("mi300x/psp")).unwrap();
    std::fs::create_dir_all(tree.join("mi300x-b")).unwrap();
    std::fs::write(tree.join("README"), "MI300X firmware set\n").unwrap();
    std::fs::write(tree.join("mi300x/psp/sos.bin"), pattern(70_000, 3)).unwrap();
    std::fs::write(tree.join("mi300x/pldm.bin"), pattern(5_000, 4)).unwrap();
    std::fs::write(tree.join("mi300x-b/pldm.bin"), pattern(4_000, 5)).unwrap();
    let spec = p.join("airlock.toml");
    std::fs::write(
        &spec,
        "[bundle]\nname = \"fw-tree\"\nversion = \"1.0.0\"\n\n[[file]]\nname = \"firmware\"\nsource = \"firmware\"\nkind = \"firmware\"\n",
    )
    .unwrap();
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let lock = std::fs::read_to_string(p.join("airlock.lock")).unwrap();
    assert_eq!(schema_errors(&validator("airlock.lock.schema.json"), &toml_as_json(&lock)), Vec::<String>::new());
    let doc: toml::Table = toml::from_str(&lock).unwrap();
    // One `SHA256 SIZE PATH` line per file: the tree digest's own listing.
    let lines: Vec<&str> = doc["file"][0]["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let files: Vec<&str> = lines.iter().map(|l| l.splitn(3, ' ').nth(2).unwrap()).collect();
    assert_eq!(
        files,
        ["README", "mi300x-b/pldm.bin", "mi300x/pldm.bin", "mi300x/psp/sos.bin"],
        "every regular file, in byte order of its path"
    );
    // The tree digest is the sha256 of its listing, as anyone can recompute it with coreutils.
    let script = r#"cd "$1" && find . -type f -printf '%P\n' | LC_ALL=C sort | while read -r f; do
  printf '%s %s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"; done | sha256sum | cut -d' ' -f1"#;
    let by_hand = run(std::process::Command::new("bash").args(["-c", script, "-", s(&tree)])).ok().stdout;
    assert_eq!(doc["file"][0]["sha256"].as_str().unwrap(), by_hand.trim());

    let bundle = t.path().join("fw.airlock");
    airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).ok();
    older_and_damaged_locks(t.path(), &spec, &keys, &doc, &lines, &bundle);
    let manifest = manifest_member(&bundle);
    assert_eq!(schema_errors(&validator("airlock.manifest.v1.schema.json"), &manifest), Vec::<String>::new());
    assert!(sbom_components(&bundle, t.path()).contains("generic:firmware"), "each file a component with its hash");
    let root = t.path().join("site");
    airlock_run(&["install", s(&bundle), "--trust", s(&keys.public), "--root", s(&root)]).ok();
    assert_eq!(std::fs::read(root.join("current/files/firmware/mi300x/psp/sos.bin")).unwrap(), pattern(70_000, 3));
    airlock_run(&["check", "--root", s(&root)]).ok();

    // A file added since the lock makes it stale; a symbolic link is refused by name.
    std::fs::write(tree.join("mi300x/new.bin"), "x").unwrap();
    let stale =
        airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).code(1);
    assert!(
        stale.stderr.contains("`[[file]]` `firmware` directory changed since it was locked (1 added"),
        "{}",
        stale.stderr
    );
    std::os::unix::fs::symlink("/etc/passwd", tree.join("passwd")).unwrap();
    let refused = airlock_in(t.path(), &["lock", s(&spec)]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("passwd` is a symbolic link"), "{}", refused.stderr);
}

/// A tree whose manifest would pass the 64 MiB that readers accept before the signature is
/// refused by `build`, before anything is written, with the input to split (it was built, and
/// then no reader could open it: found with 400,000 files in `scripts/bench.sh`).
#[test]
fn a_tree_too_large_for_one_manifest_is_refused_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let p = t.path().join("p");
    // Long names make a large manifest from few files (each path is in it three times, about
    // 1.6 KB a file): 48,000 empty files of 250-character names in directories of 200.
    for d in 0..48 {
        let dir = p.join("tree").join(format!("{d:02}{}", "d".repeat(198)));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            std::fs::write(dir.join(format!("{f:03}{}", "x".repeat(247))), b"").unwrap();
        }
    }
    let spec = p.join("airlock.toml");
    std::fs::write(
        &spec,
        "[bundle]\nname = \"huge\"\nversion = \"1.0.0\"\n\n[[file]]\nname = \"tree\"\nsource = \"tree\"\n",
    )
    .unwrap();
    airlock_in(t.path(), &["lock", s(&spec)]).ok();
    let bundle = t.path().join("huge.airlock");
    let r =
        airlock_in(t.path(), &["build", s(&spec), "--locked", "--key", s(&keys.private), "--out", s(&bundle)]).code(2);
    assert!(
        r.stderr.contains("for 48001 entries; a bundle's manifest is at most 67108864 bytes")
            && r.stderr.contains("`[[file]]` `tree` alone lists 48000 files"),
        "{}",
        r.stderr
    );
    assert!(!bundle.exists());
    let left: Vec<_> = std::fs::read_dir(t.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(
        left.iter().all(|n| ["cache", "keys", "p"].contains(&n.to_str().unwrap())),
        "nothing beside --out: {left:?}"
    );
}

/// A lock written before the line form (a `{ path, sha256, size }` table per file) still builds
/// the same bundle; a damaged line, or a misspelt key, is named where it is (exit 2).
fn older_and_damaged_locks(
    dir: &std::path::Path,
    spec: &std::path::Path,
    keys: &Keys,
    doc: &toml::Table,
    lines: &[&str],
    bundle: &std::path::Path,
) {
    let mut old = doc.clone();
    let tables: Vec<toml::Value> = lines
        .iter()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let (sha256, size, path) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
            toml::Value::Table(toml::toml! { path = path sha256 = sha256 size = (size.parse::<i64>().unwrap()) })
        })
        .collect();
    old["file"].as_array_mut().unwrap()[0].as_table_mut().unwrap().insert("files".into(), tables.into());
    let old_lock = dir.join("old.lock");
    std::fs::write(&old_lock, toml::to_string(&old).unwrap()).unwrap();
    assert_eq!(
        schema_errors(
            &validator("airlock.lock.schema.json"),
            &toml_as_json(&std::fs::read_to_string(&old_lock).unwrap())
        ),
        Vec::<String>::new()
    );
    let again = dir.join("old-lock.airlock");
    let build = ["build", s(spec), "--locked", "--lock", s(&old_lock), "--key", s(&keys.private), "--out", s(&again)];
    airlock_in(dir, &build).ok();
    assert_eq!(manifest_member(&again)["artifacts"], manifest_member(bundle)["artifacts"]);
    let lock_text = std::fs::read_to_string(spec.with_file_name("airlock.lock")).unwrap();
    let damaged = lock_text.replacen(&format!(" {} README", "MI300X firmware set\n".len()), " many README", 1);
    std::fs::write(&old_lock, &damaged).unwrap();
    let refused = airlock_in(dir, &build).code(2);
    assert!(
        refused.stderr.contains("old.lock:") && refused.stderr.contains("is not a tree file line"),
        "{}",
        refused.stderr
    );
    std::fs::write(&old_lock, toml::to_string(&old).unwrap().replacen("size = ", "siz = ", 1)).unwrap();
    let refused = airlock_in(dir, &build).code(2);
    assert!(refused.stderr.contains("unknown field `siz`"), "{}", refused.stderr);
}
