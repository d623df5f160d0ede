//! The approval pack (`airlock report`): one self-contained HTML page, rendered by a real
//! browser (Debian's headless Chromium, network disabled): a screenshot kept as an artefact,
//! and the DOM it built checked for the verdict, each matrix row's reasons, the BOM diff and
//! the signers. Green, amber and red sites each show their colour and why.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Where screenshots are kept for people to look at (not compared pixel for pixel).
fn artefact(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Headless Chromium with no way out: every host resolves to nothing and every request goes to
/// a proxy that is not there. (As root it needs `--no-sandbox`.)
fn chromium(page: &Path, what: &[&str]) -> Run {
    let out = run(Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"])
        .args(["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,2200"])
        .args(what)
        .arg(format!("file://{}", page.display())));
    assert_eq!(out.code, 0, "chromium is installed by scripts/test.sh: {}", out.stderr);
    out
}

/// The DOM Chromium built from the page, and a screenshot of it under `name`.
fn render(page: &Path, name: &str) -> String {
    let shot = artefact(name);
    let _ = std::fs::remove_file(&shot);
    chromium(page, &[&format!("--screenshot={}", shot.display())]);
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000), "a screenshot at {}", shot.display());
    chromium(page, &["--dump-dom"]).stdout
}

/// Nothing on the page can reach out: no scripts, stylesheets, images, fonts or links (a URL
/// shown as text, a matrix row's source, reaches nothing).
fn self_contained(html: &str) {
    for needle in ["<script", "<link", "src=", "href=", "url(", "@import", "=\"http", "='http"] {
        assert!(!html.contains(needle), "the page holds `{needle}`");
    }
}

fn with_version(p: &Project, version: &str, notes: &str) {
    let spec =
        std::fs::read_to_string(&p.spec).unwrap().replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
    std::fs::write(&p.spec, spec).unwrap();
    std::fs::write(p.dir.join("notes.txt"), notes).unwrap();
}

#[test]
fn a_bundle_report_shows_signers_against_the_threshold_the_diff_and_the_firmware_floor() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let security = keygen(&t.path().join("keys"), "security");
    let old = t.path().join("demo-1.0.0.airlock");
    build(&project(&t.path().join("p1"), "1.0.0"), &keys, &old).ok();
    let p2 = project(&t.path().join("p2"), "1.0.0");
    with_version(&p2, "1.1.0", "release notes for 1.1.0, with a fix\n");
    let new = t.path().join("demo-1.1.0.airlock");
    build(&p2, &keys, &new).ok();
    airlock_run(&["sign", s(&new), "--key", s(&security.private), "--trust", s(&keys.public)]).ok();
    let build_id = airlock_run(&["verify", s(&new), "--trust", s(&keys.public), "--json"]).ok().json()["signers"][0]
        .as_str()
        .unwrap()
        .to_owned();

    let page = t.path().join("approval.html");
    let trust = ["--trust", s(&keys.public), "--trust", s(&security.public), "--threshold", "2"];
    let args = [&["report", s(&new), "--base", s(&old), "--out", s(&page), "--json"][..], &trust].concat();
    let data = airlock_run(&args).ok().json();
    assert_eq!(data["kind"], "bundle");
    assert_eq!(data["bundle"]["verified"], true);
    assert_eq!(
        (data["signatures"]["threshold"].clone(), data["signatures"]["signers"].as_array().unwrap().len()),
        (2.into(), 2)
    );
    assert_eq!(data["diff"]["base"], "demo 1.0.0");
    assert_eq!(data["diff"]["changed"][0]["name"], "notes.txt");
    assert_eq!(data["firmware"][0]["floor"], "01.25.05.00");
    assert_eq!(data["sbom"]["spec_version"], "1.5");
    // Deterministic: the same inputs, the same bytes.
    let again = t.path().join("again.html");
    airlock_run(&[&["report", s(&new), "--base", s(&old), "--out", s(&again)][..], &trust].concat()).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html, std::fs::read_to_string(&again).unwrap());
    self_contained(&html);

    let dom = render(&page, "bundle.png");
    assert!(dom.contains("id=\"verified\">verified</span>"), "{dom}");
    assert!(dom.contains("2; required: 2 of 2 trusted key(s)"), "{dom}");
    assert!(dom.contains(&build_id), "the build key's id");
    for signer in data["signatures"]["signers"].as_array().unwrap() {
        assert!(dom.contains(signer.as_str().unwrap()), "signer {signer} is on the page");
    }
    assert!(
        dom.contains(&format!("demo-1.1.0.airlock.{}.sig", data["signatures"]["signers"][1].as_str().unwrap())),
        "the co-signature file"
    );
    assert!(dom.contains("Changes since demo 1.0.0 (verified)") && dom.contains("notes.txt"), "{dom}");
    assert!(dom.contains("01.25.05.00") && dom.contains("board: MI300X"), "the firmware and its floor");

    // Without --trust the page says, everywhere it matters, that nothing was verified.
    let unverified = t.path().join("unverified.html");
    airlock_run(&["report", s(&new), "--out", s(&unverified)]).ok();
    let html = std::fs::read_to_string(&unverified).unwrap();
    assert!(html.contains("NOT verified") && html.contains("not checked"), "{html}");
    assert!(!html.to_lowercase().contains("not verified</span>: not verified"), "said once: {html}");
    // The matrix the bundle claims reads as the site's rows do: no JSON.
    assert!(html.contains("firmware.PLDM_BUNDLE") && html.contains("ubuntu 24.04"), "{html}");
    assert!(!html.contains("{&quot;") && !html.contains("[&quot;"), "no JSON in the matrix: {html}");
}

/// The demo bundle (a matrix row and an RVS check) built once, and a site that installed it on
/// the recorded 8× MI300X host.
struct Site {
    t: tempfile::TempDir,
    keys: Keys,
    bundle: PathBuf,
}

fn demo() -> Site {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let bundle = t.path().join("demo.airlock");
    run(airlock().env("SOURCE_DATE_EPOCH", EPOCH).args([
        "build",
        s(&repo("testdata/demo/airlock.toml")),
        "--locked",
        "--key",
        s(&keys.private),
        "--out",
        s(&bundle),
    ]))
    .ok();
    Site { t, keys, bundle }
}

fn probes(host: &str) -> (String, PathBuf) {
    let probes = repo("testdata/probes");
    let path = format!("{}:{}", probes.join(host).join("bin").display(), std::env::var("PATH").unwrap_or_default());
    (path, probes.join(host).join("root"))
}

fn site_report(root: &Path, name: &str) -> (serde_json::Value, String) {
    let page = root.with_extension("html");
    let data = airlock_run(&["report", "--root", s(root), "--out", s(&page), "--json"]).ok().json();
    let html = std::fs::read_to_string(&page).unwrap();
    self_contained(&html);
    (data, render(&page, name))
}

#[test]
fn a_green_site_shows_each_rows_reasons_the_checks_and_the_rehearsed_rollback() {
    let d = demo();
    let root = d.t.path().join("green");
    let install = |b: &Path| airlock_run(&["install", s(b), "--trust", s(&d.keys.public), "--root", s(&root)]).ok();
    install(&d.bundle);
    // A second release over it, and a rollback rehearsed: its time is the report's.
    let next = d.t.path().join("next");
    std::fs::create_dir_all(&next).unwrap();
    for dir in ["firmware", "docs"] {
        run(Command::new("cp").args(["-r", s(&repo(&format!("testdata/demo/{dir}"))), s(&next)])).ok();
    }
    let spec = std::fs::read_to_string(repo("testdata/demo/airlock.toml")).unwrap().replace("2026.11.0", "2026.11.1");
    std::fs::write(next.join("airlock.toml"), spec).unwrap();
    let next_bundle = d.t.path().join("next.airlock");
    run(airlock().args([
        "build",
        s(&next.join("airlock.toml")),
        "--key",
        s(&d.keys.private),
        "--out",
        s(&next_bundle),
    ]))
    .ok();
    install(&next_bundle);
    airlock_run(&["rollback", "--root", s(&root)]).ok();

    let (data, dom) = site_report(&root, "site-green.png");
    assert_eq!(data["kind"], "site");
    assert_eq!(data["bundle"]["version"], "2026.11.0");
    assert_eq!(data["site"]["validation"]["verdict"], "green");
    assert!(data["site"]["rollback"]["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(data["site"]["rollbacks"]["count"], 1);
    assert_eq!(data["site"]["rollbacks"]["median_seconds"], data["site"]["rollback"]["seconds"]);
    assert!(dom.contains("data-verdict=\"green\""), "{dom}");
    for reason in ["matches `ubuntu 24.04`", "6.12.12 satisfies &gt;=6.12", "01.25.05.00 satisfies &gt;=01.25.05.00"] {
        assert!(dom.contains(reason), "the reason `{reason}` is on the page");
    }
    assert!(dom.contains("rvs-gst") && dom.contains("[RESULT]"), "the check and its output excerpt");
    assert!(dom.contains("Rehearsed: the last rollback took"), "{dom}");
    assert!(dom.contains("Over 1 rollback(s): median"), "{dom}");
    assert!(dom.contains("2026.11.1") && dom.contains("rollback"), "the records");
    assert!(dom.contains("&quot;gpus&quot;") || dom.contains("\"gpus\""), "the current-state record");
}

#[test]
fn amber_and_red_sites_show_their_colour_and_why() {
    let d = demo();
    // Amber: an inbox driver reports no version; accepted with a reason at install.
    let amber = d.t.path().join("amber");
    let (path, host) = probes("mi300x-inbox");
    run(airlock()
        .env("PATH", &path)
        .env("AIRLOCK_HOST_ROOT", &host)
        .args(["install", s(&d.bundle), "--trust", s(&d.keys.public), "--root", s(&amber)])
        .args(["--accept-amber", "--reason", "CAB-42: inbox driver accepted for the canary"]))
    .ok();
    let (data, dom) = site_report(&amber, "site-amber.png");
    assert_eq!(data["site"]["validation"]["verdict"], "amber");
    assert!(dom.contains("data-verdict=\"amber\""), "{dom}");
    assert!(dom.contains("cannot be determined on this live device"), "the amber field's reason");
    assert!(dom.contains("Amber accepted at install: CAB-42"), "{dom}");
    assert!(dom.contains("No rollback has been rehearsed"), "{dom}");

    // Red: installed green, then an RVS run on the same host fails (`airlock validate`).
    let red = d.t.path().join("red");
    airlock_run(&["install", s(&d.bundle), "--trust", s(&d.keys.public), "--root", s(&red)]).ok();
    let probes_dir = repo("testdata/probes");
    let failing = format!(
        "{}:{}:{}",
        probes_dir.join("rvs-fail/bin").display(),
        probes_dir.join("mi300x/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(airlock().env("PATH", failing).args(["validate", "--root", s(&red)])).code(4);
    let (data, dom) = site_report(&red, "site-red.png");
    assert_eq!(data["site"]["validation"]["verdict"], "red");
    assert!(dom.contains("data-verdict=\"red\""), "{dom}");
    assert!(dom.contains("RVS reports a failure") && dom.contains("met: FALSE"), "the failing check and its output");
}

#[test]
fn matrix_rows_show_their_provenance_and_the_impact_register_its_checks_verdict() {
    let d = demo();
    let dir = d.t.path().join("impact");
    std::fs::create_dir_all(&dir).unwrap();
    for sub in ["firmware", "docs"] {
        run(Command::new("cp").args(["-r", s(&repo(&format!("testdata/demo/{sub}"))), s(&dir)])).ok();
    }
    let base = std::fs::read_to_string(repo("testdata/demo/airlock.toml")).unwrap();
    let with_provenance = base.replacen(
        "[[validation.target]]\n",
        "[[validation.target]]\nsource = \"https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html\"\nsource_date = \"2026-11-20\"\nreviewed_by = \"gpu-platform (A. Reviewer)\"\nstatus = \"supported\"\n",
        1,
    );
    let impact = "\n[[impact]]\ncomponent = \"RCCL\"\nold = \"ring all-reduce by default\"\nnew = \"tree all-reduce above 8 GPUs\"\ntest = \"rvs-gst\"\nmitigation = \"NCCL_ALGO=Ring on the training fleet\"\nowner = \"ml-infra\"\ndecision = \"accept\"\nexpires = \"2027-03-31\"\n";
    let spec = dir.join("airlock.toml");
    // An entry whose test names no check is a spec error, with its line.
    std::fs::write(&spec, format!("{with_provenance}{}", impact.replace("\"rvs-gst\"", "\"no-such-check\""))).unwrap();
    let bad = run(airlock().args(["lock", s(&spec)])).code(2);
    assert!(
        bad.stderr.contains("names test `no-such-check`, which is no `[[validation.check]]` (the checks are: rvs-gst)"),
        "{}",
        bad.stderr
    );
    std::fs::write(&spec, format!("{with_provenance}{impact}")).unwrap();
    let bundle = d.t.path().join("impact.airlock");
    run(airlock().args(["build", s(&spec), "--key", s(&d.keys.private), "--out", s(&bundle)])).ok();
    let root = d.t.path().join("site");
    airlock_run(&["install", s(&bundle), "--trust", s(&d.keys.public), "--root", s(&root)]).ok();
    let (data, dom) = site_report(&root, "site-impact.png");
    assert_eq!(data["matrix"]["impact"][0]["owner"], "ml-infra");
    assert_eq!(data["matrix"]["target"][0]["reviewed_by"], "gpu-platform (A. Reviewer)");
    for text in [
        "<b>supported</b>, from <span class=\"mono\">https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html</span>",
        "read 2026-11-20, reviewed by gpu-platform (A. Reviewer)",
        "Impact register",
        "tree all-reduce above 8 GPUs",
        "NCCL_ALGO=Ring on the training fleet",
    ] {
        assert!(dom.contains(text), "`{text}` is on the page");
    }
    assert!(dom.contains("<td class=\"green\">green: RVS"), "the impact entry shows its check's verdict: {dom}");
    // A bundle's own report (nothing run yet) says so, and a row without provenance is flagged.
    let page = d.t.path().join("bundle.html");
    airlock_run(&["report", s(&d.bundle), "--out", s(&page)]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("the row names no source, date, reviewer or status"), "the demo's row has none");
}

#[test]
fn a_bundle_that_does_not_verify_under_the_keys_given_leads_with_not_verified_and_exits_3() {
    let d = demo();
    let other = keygen(&d.t.path().join("keys"), "other");
    let page = d.t.path().join("wrong-key.html");
    let r = airlock_run(&["report", s(&d.bundle), "--trust", s(&other.public), "--out", s(&page), "--json"]).code(3);
    let data = r.json();
    assert_eq!(data["bundle"]["verified"], false);
    assert!(r.stderr.contains("did not verify"), "{}", r.stderr);
    let dom = render(&page, "bundle-not-verified.png");
    let body = &dom[dom.find("<body>").expect("a body")..];
    let banner = body.find("id=\"not-verified\"").expect("the NOT VERIFIED banner");
    assert!(banner < body.find("<h1").unwrap(), "the banner is the page's first element: {body}");
    assert!(body.contains("NOT VERIFIED") && body.contains("untrusted or bad signature"), "{body}");
    assert!(!body.contains("data-verdict"), "no verdict badge over a failed verification: {body}");
    // Without --trust nothing was checked: the page says so, and that is no failure.
    let claims = d.t.path().join("claims.html");
    airlock_run(&["report", s(&d.bundle), "--out", s(&claims)]).ok();
    assert!(std::fs::read_to_string(&claims).unwrap().contains("no --trust key was given"));
}

#[test]
fn a_node_fed_from_a_mirror_has_an_approval_pack_of_the_part_it_holds_and_so_has_the_mirror() {
    let d = demo();
    let mirror = d.t.path().join("mirror");
    let node = d.t.path().join("node");
    let key = s(&d.keys.public);
    airlock_run(&["install", s(&d.bundle), "--role", "mirror", "--trust", key, "--root", s(&mirror)]).ok();
    let source = format!("file://{}/", mirror.display());
    airlock_run(&["apply", &source, "--trust", key, "--root", s(&node)]).ok();
    assert!(!node.join("current/bundle.airlock").exists(), "a node fed from a mirror keeps no bundle file");

    let (data, dom) = site_report(&node, "site-node-from-mirror.png");
    assert_eq!(data["bundle"]["verified"], true, "{data}");
    assert_eq!(data["site"]["check"]["ok"], true, "{data}");
    assert_eq!(data["site"]["validation"]["verdict"], "green", "{data}");
    let held = &data["bundle"]["held"];
    // The demo carries files only: the node holds its signed manifest and no package member.
    assert_eq!((held["entries"].as_u64(), held["on_mirror_entries"].as_u64()), (Some(0), Some(3)), "{data}");
    assert!(dom.contains("Held here") && dom.contains("stayed on the mirror"), "{dom}");
    assert!(dom.contains("SLSA provenance: kept on the mirror"), "{dom}");
    assert!(dom.contains("8 × AMD Instinct MI300X (gfx942) (amd 0–7)"), "identical GPUs once, counted: {dom}");
    assert!(dom.contains("data-verdict=\"green\"") && !dom.contains("NOT VERIFIED"), "{dom}");

    // The mirror holds the whole bundle: its pack verifies all of it.
    let (data, _) = site_report(&mirror, "site-mirror.png");
    assert_eq!(data["bundle"]["verified"], true, "{data}");
    assert!(data["bundle"]["held"].is_null(), "{data}");

    // A kept member altered on the node: the node's pack leads with NOT VERIFIED, exit 3.
    let kept = walkdir_files(&node.join("current"));
    let manifest = kept.iter().find(|p| p.ends_with("airlock/manifest.json")).expect("the kept manifest");
    let mut bytes = std::fs::read(manifest).unwrap();
    bytes.extend_from_slice(b" ");
    std::fs::write(manifest, bytes).unwrap();
    let page = node.with_extension("damaged.html");
    airlock_run(&["report", "--root", s(&node), "--out", s(&page)]).code(3);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"not-verified\"") && !html.contains("data-verdict"), "{html}");
    assert!(
        html.contains("DAMAGED") && !html.contains("NOT TRUSTED NOW"),
        "altered bytes are damage, not policy: {html}"
    );
}

/// Every regular file under `dir`, following the `current` link.
fn walkdir_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![std::fs::canonicalize(dir).unwrap()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().filter_map(Result::ok) {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_raised_firmware_floor_alone_is_a_change_in_diff_and_in_the_reports_changes_since() {
    let d = demo();
    let next = d.t.path().join("next");
    run(Command::new("cp").args(["-r", s(&repo("testdata/demo")), s(&next)])).ok();
    let spec = std::fs::read_to_string(next.join("airlock.toml")).unwrap();
    let raised = spec.replace("PLDM_BUNDLE = \">=01.25.05.00\"", "PLDM_BUNDLE = \">=01.25.06.00\"");
    assert_ne!(spec, raised, "the demo names the floor");
    std::fs::write(next.join("airlock.toml"), raised).unwrap();
    let bundle = d.t.path().join("next.airlock");
    run(airlock_at(&next).current_dir(&next).args([
        "build",
        "airlock.toml",
        "--key",
        s(&d.keys.private),
        "--out",
        s(&bundle),
    ]))
    .ok();

    let floor = |changed: &serde_json::Value| {
        changed.as_array().unwrap().iter().any(|c| {
            c["kind"] == "target"
                && c["name"] == "MI300X: firmware.PLDM_BUNDLE"
                && c["from"] == ">=01.25.05.00"
                && c["to"] == ">=01.25.06.00"
        })
    };
    let json = airlock_run(&["diff", s(&d.bundle), s(&bundle), "--trust", s(&d.keys.public), "--json"]).ok().json();
    assert!(floor(&json["changed"]), "{json}");
    let text = airlock_run(&["diff", s(&d.bundle), s(&bundle)]).ok().stdout;
    assert!(text.contains("MI300X: firmware.PLDM_BUNDLE  >=01.25.05.00 -> >=01.25.06.00"), "{text}");
    assert!(text.contains("0 added, 0 removed, 1 changed"), "{text}");
    // The locks too, each read with the spec beside it.
    let locks = airlock_run(&["diff", s(&repo("testdata/demo/airlock.lock")), s(&next.join("airlock.lock")), "--json"]);
    assert!(floor(&locks.ok().json()["changed"]), "a lock diff names the matrix change too");

    let page = d.t.path().join("changes.html");
    let trust = ["--trust", s(&d.keys.public)];
    let args = [&["report", s(&bundle), "--base", s(&d.bundle), "--out", s(&page), "--json"][..], &trust].concat();
    let data = airlock_run(&args).ok().json();
    assert!(floor(&data["diff"]["changed"]), "{}", data["diff"]);
    let dom = render(&page, "changes-matrix.png");
    assert!(dom.contains("1 changed") && dom.contains("firmware.PLDM_BUNDLE"), "{dom}");
}
