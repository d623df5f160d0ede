//! GPU validation end to end, on recorded hosts (`testdata/probes`): `probe` on every format,
//! and `install` gated by the support matrix and the acceptance checks: green activates, amber
//! only with `--accept-amber --reason`, red never (exit 4, the site unchanged).

use std::path::{Path, PathBuf};

use crate::common::*;

/// A bundle whose matrix row and checks are `row` and `checks` (TOML), built once.
fn bundle(dir: &Path, keys: &Keys, name: &str, row: &str, checks: &str) -> PathBuf {
    let p = project(&dir.join(name), "1.0.0");
    let text = std::fs::read_to_string(&p.spec).unwrap();
    let head = text.split("[[validation.target]]").next().unwrap();
    std::fs::write(&p.spec, format!("{head}[[validation.target]]\n{row}\n{checks}")).unwrap();
    let out = dir.join(format!("{name}.airlock"));
    build(&p, keys, &out).ok();
    out
}

const ROW: &str = MI300X_ROW;

const RVS: &str =
    "[[validation.check]]\nname = \"rvs-gst\"\nrun = [\"rvs\", \"-c\", \"gst_single.conf\"]\ntimeout_s = 60\n";

fn install(host: &str, bundle: &Path, keys: &Keys, root: &Path, extra: &[&str]) -> Run {
    let mut c = on_host(host);
    c.args(["install", s(bundle), "--trust", s(&keys.public), "--root", s(root)]).args(extra);
    run(&mut c)
}

/// `host` with `rvs-fail`'s RVS first on PATH.
fn with_failing_rvs(host: &str) -> std::process::Command {
    let mut c = on_host(host);
    let fail = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/probes/rvs-fail/bin");
    let path = c.get_envs().find(|(k, _)| *k == "PATH").and_then(|(_, v)| v.map(ToOwned::to_owned)).unwrap();
    let mut new = std::ffi::OsString::from(fail);
    new.push(":");
    new.push(path);
    c.env("PATH", new);
    c
}

#[test]
fn probe_reads_every_recorded_format() {
    let json = |host: &str| run(on_host(host).args(["probe", "--json"])).ok().json();
    let amd = json("mi300x");
    assert_eq!(amd["gpus"].as_array().unwrap().len(), 8);
    assert_eq!(
        (amd["gpus"][0]["gfx"].as_str(), amd["gpus"][0]["firmware"]["PLDM_BUNDLE"].as_str()),
        (Some("gfx942"), Some("01.25.05.00"))
    );
    assert_eq!((amd["host"]["amdgpu"].as_str(), amd["host"]["os_id"].as_str()), (Some("6.12.12"), Some("ubuntu")));
    let old = json("mi300x-old");
    assert_eq!(old["gpus"][1]["firmware"]["PLDM_BUNDLE"], "01.25.03.12", "amd-smi 24.x bare list");
    let inbox = json("mi300x-inbox");
    assert_eq!(
        (inbox["host"]["amdgpu"].as_str(), inbox["gpus"][0]["driver"].as_str()),
        (Some("unknown"), Some("unknown")),
        "never the kernel string"
    );
    let nv = json("h200");
    assert_eq!(
        (nv["gpus"][0]["market_name"].as_str(), nv["gpus"][0]["compute_cap"].as_str()),
        (Some("NVIDIA H200"), Some("9.0"))
    );
    let guest = json("guest");
    assert_eq!(guest["host"]["virtualization"], serde_json::json!({"mode": "guest", "hypervisor": "qemu"}));
    let host = &amd["host"];
    assert_eq!(
        (host["iommu"].as_str(), host["security_modules"].as_str()),
        (Some("enabled (4 groups)"), Some("capability,lockdown,landlock,yama,apparmor"))
    );
    assert!(host["boot_parameters"].as_str().unwrap().contains("iommu=pt"));
    assert_eq!(
        host["packages"][1], "amdgpu-dkms=1:6.12.12.60400-2109676.24.04",
        "installed only: {}",
        host["packages"]
    );
    let health = &amd["gpus"][3]["health"];
    assert_eq!(
        (health["temperature_c"].as_str(), health["ecc_correctable"].as_str(), health["processes"].as_str()),
        (Some("44"), Some("12"), Some("0"))
    );
    assert_eq!(amd["gpus"][0]["health"]["processes"], "1");
    assert_eq!(json("h200")["gpus"][0]["health"]["power_w"], "112.47");
    assert_eq!(amd["gpus"][0]["uuid"], "00ff74a1-0000-1000-80a5-8af705259683", "from amd-smi list");
    let ri = json("rocminfo-only");
    assert_eq!(
        (ri["gpus"].as_array().map(Vec::len), ri["gpus"][0]["gfx"].as_str()),
        (Some(1), Some("gfx942")),
        "rocminfo's GPU agent"
    );
    let legacy = json("mi200-legacy");
    assert_eq!(legacy["gpus"][0]["market_name"], "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2");
    assert_eq!(legacy["gpus"][0]["gfx"], "gfx9010", "reported as it is, never corrected by a guess");
    let none = json("nogpu");
    assert_eq!(
        (none["gpus"].as_array().map(Vec::len), none["tools"]["amd-smi"]["status"].as_str()),
        (Some(0), Some("missing"))
    );
}

#[test]
fn probe_diff_shows_what_changed_between_two_records() {
    let t = tempfile::tempdir().unwrap();
    let before = t.path().join("before.json");
    std::fs::write(&before, run(on_host("mi300x-old").args(["probe", "--json"])).ok().stdout).unwrap();
    let doc = run(on_host("mi300x").args(["probe", "--diff", s(&before), "--json"])).ok().json();
    let changes = doc["changes"].as_array().unwrap();
    let fw = changes.iter().find(|c| c["path"] == "gpus[0].firmware.PLDM_BUNDLE").unwrap();
    assert_eq!((fw["old"].as_str(), fw["new"].as_str()), (Some("01.25.03.12"), Some("01.25.05.00")));
    assert!(changes.iter().any(|c| c["path"] == "gpus[7].bdf" && c["old"].is_null()), "GPUs that appeared");
    let human = run(on_host("mi300x").args(["probe", "--diff", s(&before)])).ok().stdout;
    assert!(human.contains("~ gpus[0].firmware.PLDM_BUNDLE: 01.25.03.12 -> 01.25.05.00"), "{human}");
    assert!(run(on_host("mi300x").args(["probe", "--diff", s(&t.path().join("none.json"))])).code == 1);
}

#[test]
#[allow(clippy::too_many_lines, reason = "one site through red, green and amber installs, each checked")]
fn green_activates_amber_needs_a_reason_red_never_activates() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let green = bundle(t.path(), &keys, "green", ROW, RVS);
    let root = t.path().join("site");

    // Red, several ways: exit 4, nothing activated.
    for (host, why) in [
        ("mi300x-old", "01.25.03.12 does not satisfy >=01.25.05.00"),
        ("nogpu", "no GPU detected"),
        ("h200", "another GPU"),
    ] {
        let r = install(host, &green, &keys, &root, &[]).code(4);
        assert!(r.stderr.contains("validation is red") && r.stderr.contains(why), "{host}: {}", r.stderr);
        assert!(r.stderr.contains("`current` was not changed"), "{}", r.stderr);
        assert_nothing_installed(&root);
    }
    let r =
        run(with_failing_rvs("mi300x").args(["install", s(&green), "--trust", s(&keys.public), "--root", s(&root)]))
            .code(4);
    assert!(
        r.stderr.contains("check `rvs-gst`") && r.stderr.contains("met: FALSE"),
        "RVS FAIL with exit 0: {}",
        r.stderr
    );
    assert_nothing_installed(&root);

    // Green: activated, the evidence recorded.
    let done = install("mi300x", &green, &keys, &root, &["--json"]).ok().json();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(done["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["validation"]["verdict"], "green");
    assert_eq!(record["validation"]["checks"][0]["verdict"], "green");
    assert!(record["validation"]["probe"]["gpus"].as_array().is_some_and(|g| g.len() == 8), "the probe is evidence");
    assert!(record["phases"]["validate"].as_f64().is_some());
    let v = run(on_host("mi300x").args(["validate", "--root", s(&root), "--json"])).ok().json();
    assert_eq!(v["verdict"], "green");
    let v = run(on_host("mi300x-old").args(["validate", "--root", s(&root), "--json"])).code(4).json();
    let fw = v["rows"][0]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "firmware.PLDM_BUNDLE")
        .unwrap()
        .clone();
    assert_eq!(
        (fw["verdict"].as_str(), fw["expected"].as_str(), fw["actual"].as_str()),
        (Some("red"), Some(">=01.25.05.00"), Some("01.25.03.12"))
    );

    // Amber (an inbox driver's version cannot be determined): refused, then accepted with a reason.
    let r = install(
        "mi300x-inbox",
        &bundle(t.path(), &keys, "again", &ROW.replace("7.0.*", "7.0.2"), ""),
        &keys,
        &root,
        &[],
    )
    .code(4);
    assert!(r.stderr.contains("validation is amber") && r.stderr.contains("--accept-amber"), "{}", r.stderr);
    let silent_os = bundle(t.path(), &keys, "silent", &ROW.replace("os = [\"ubuntu 24.04\"]\n", ""), "");
    let r = install("mi300x", &silent_os, &keys, &root, &[]).code(4);
    assert!(r.stderr.contains("amber"), "an undocumented OS is amber: {}", r.stderr);
    let accepted = install(
        "mi300x",
        &silent_os,
        &keys,
        &root,
        &["--accept-amber", "--reason", "CHG-1234: OS row pending", "--json"],
    )
    .ok()
    .json();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(accepted["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(
        (record["validation"]["verdict"].as_str(), record["accepted_amber"].as_str()),
        (Some("amber"), Some("CHG-1234: OS row pending"))
    );
    let usage = run(on_host("mi300x").args([
        "install",
        s(&silent_os),
        "--trust",
        s(&keys.public),
        "--root",
        s(&root),
        "--accept-amber",
    ]))
    .code(2);
    assert!(usage.stderr.contains("--reason"), "accepting amber needs a reason: {}", usage.stderr);
}

#[test]
fn a_check_that_times_out_is_red_and_a_bundle_without_targets_skips_validation() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let slow = bundle(
        t.path(),
        &keys,
        "slow",
        ROW,
        "[[validation.check]]\nname = \"hang\"\nrun = [\"sleep\", \"30\"]\ntimeout_s = 1\n",
    );
    let root = t.path().join("site");
    let r = install("mi300x", &slow, &keys, &root, &[]).code(4);
    assert!(r.stderr.contains("check `hang`") && r.stderr.contains("timed out after 1 s"), "{}", r.stderr);

    let p = project(&t.path().join("bare"), "1.0.0");
    let text = std::fs::read_to_string(&p.spec).unwrap();
    std::fs::write(&p.spec, text.split("[[validation.target]]").next().unwrap()).unwrap();
    let bare = t.path().join("bare.airlock");
    build(&p, &keys, &bare).ok();
    let done = install("nogpu", &bare, &keys, &root, &["--json"]).ok().json();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(done["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["validation"]["verdict"], "skipped", "no targets: nothing to decide, and the record says so");
}

#[test]
fn a_mode_the_row_does_not_name_is_red_and_an_nvidia_row_validates_an_h200() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let spx = bundle(t.path(), &keys, "spx", ROW, "");
    let root = t.path().join("site");
    for (host, why) in [
        ("mi300x-cpx", "partition.compute: a mode the row was not qualified in"),
        ("guest", "virtualization: a mode the row was not qualified in"),
        ("sriov", "virtualization: a mode the row was not qualified in"),
    ] {
        let r = install(host, &spx, &keys, &root, &[]).code(4);
        assert!(r.stderr.contains("validation is red") && r.stderr.contains(why), "{host}: {}", r.stderr);
    }
    // A row qualified for passthrough accepts the passthrough guest.
    let pt = bundle(t.path(), &keys, "pt", &ROW.replace("[\"baremetal\"]", "[\"baremetal\", \"passthrough\"]"), "");
    install("guest", &pt, &keys, &root, &[]).ok();

    let nvidia = r#"gpu = "H200"
os = ["ubuntu 24.04"]
kernel = ["6.8.*"]
virtualization = ["baremetal"]
driver = ">=570"
compute_cap = ">=9.0"
mig = "disabled""#;
    let h200 = bundle(t.path(), &keys, "h200", nvidia, "");
    let root = t.path().join("nv-site");
    let done = install("h200", &h200, &keys, &root, &["--json"]).ok().json();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(done["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["validation"]["verdict"], "green", "{}", record["validation"]["summary"]);
    let old = bundle(t.path(), &keys, "h200-new-driver", &nvidia.replace(">=570", ">=575"), "");
    let r = install("h200", &old, &keys, &root, &[]).code(4);
    assert!(r.stderr.contains("driver: 570.86.15 does not satisfy >=575"), "{}", r.stderr);
    // The CUDA toolkit's version, from its own version.json, named as the evidence.
    let cuda = bundle(t.path(), &keys, "h200-cuda", &format!("{nvidia}\ncuda = \"12.8.*\""), "");
    let done = install("h200", &cuda, &keys, &root, &["--json"]).ok().json();
    let reasons = done["validation"]["rows"][0]["fields"].to_string();
    assert!(reasons.contains("12.8.1 satisfies 12.8.* (from /usr/local/cuda/version.json)"), "{reasons}");
    let newer = bundle(t.path(), &keys, "h200-cuda-13", &format!("{nvidia}\ncuda = \"13.0.*\""), "");
    let r = install("h200", &newer, &keys, &root, &[]).code(4);
    assert!(r.stderr.contains("cuda: 12.8.1 does not satisfy"), "{}", r.stderr);
}

#[test]
fn validate_gives_each_recorded_host_its_verdict_and_records_it() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let green = bundle(t.path(), &keys, "green", ROW, RVS);
    let root = t.path().join("site");
    install("mi300x", &green, &keys, &root, &[]).ok();
    let cases = [
        ("mi300x", "green", 0),
        ("mi300x-inbox", "amber", 0),
        ("mi300x-old", "red", 4),
        ("mi300x-cpx", "red", 4),
        ("guest", "red", 4),
        ("sriov", "red", 4),
        ("h200", "red", 4),
        ("nogpu", "red", 4),
        ("rocminfo-only", "red", 4),
    ];
    for (host, verdict, code) in cases {
        let doc = run(on_host(host).args(["validate", "--root", s(&root), "--json"])).code(code).json();
        assert_eq!(doc["verdict"], verdict, "{host}: {}", doc["summary"]);
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(doc["record"].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(
            (record["action"].as_str(), record["validation"]["verdict"].as_str()),
            (Some("validate"), Some(verdict))
        );
    }
    let doc = run(with_failing_rvs("mi300x").args(["validate", "--root", s(&root), "--json"])).code(4).json();
    assert_eq!((doc["checks"][0]["verdict"].as_str(), doc["checks"][0]["exit_code"].as_i64()), (Some("red"), Some(0)));
}

#[test]
fn amber_names_its_owner_and_expiry_and_an_expired_one_is_flagged_everywhere() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let root = t.path().join("site");
    let silent_os = bundle(t.path(), &keys, "silent", &ROW.replace("os = [\"ubuntu 24.04\"]\n", ""), "");
    let past = install(
        "mi300x",
        &silent_os,
        &keys,
        &root,
        &["--accept-amber", "--reason", "CHG-1", "--owner", "gpu-platform", "--expires", "2020-01-01"],
    )
    .code(2);
    assert!(past.stderr.contains("is already past"), "{}", past.stderr);
    let accepted = install(
        "mi300x",
        &silent_os,
        &keys,
        &root,
        &[
            "--accept-amber",
            "--reason",
            "CHG-1234: OS row pending",
            "--owner",
            "gpu-platform",
            "--expires",
            "1h",
            "--json",
        ],
    )
    .ok()
    .json();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(accepted["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(record["amber"]["owner"], "gpu-platform", "{record}");
    assert!(record["amber"]["expires"].is_string(), "{record}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &record), Vec::<String>::new());
    let open = airlock_run(&["status", "--root", s(&root)]).ok().stdout;
    assert!(open.contains("amber accepted: by gpu-platform, until ") && !open.contains("EXPIRED"), "{open}");

    // Two hours later (the test clock moved ahead, not waited for): status, the report and
    // `outdated --root` (exit 10) flag it.
    let later = |args: &[&str]| run(airlock().env("AIRLOCK_TEST_CLOCK_AHEAD", "7200").args(args));
    let status = later(&["status", "--root", s(&root), "--json"]).ok().json();
    assert_eq!(
        (status["amber"]["expired"].as_bool(), status["amber"]["owner"].as_str()),
        (Some(true), Some("gpu-platform"))
    );
    assert!(later(&["status", "--root", s(&root)]).ok().stdout.contains("EXPIRED: requalify or accept again"));
    let report = later(&["report", "--root", s(&root), "--json"]).ok().json();
    assert_eq!(report["site"]["accepted_amber"]["expired"], true, "{}", report["site"]);
    let page = t.path().join("report.html");
    later(&["report", "--root", s(&root), "--out", s(&page)]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"amber\"") && html.contains("EXPIRED"), "the page flags it");
    let outdated =
        later(&["outdated", s(&t.path().join("no-spec.toml")), "--root", s(&root), "--json"]).code(10).json();
    let finding = &outdated["findings"][0];
    assert_eq!(
        (finding["kind"].as_str(), finding["upstream"].as_str().map(|u| u.starts_with("expired "))),
        (Some("amber"), Some(true)),
        "{outdated}"
    );
}

/// A stand-in benchmark: prints `{"ttft": {"p99": N}}` from `file` (or what `file` holds).
fn bench_check(file: &Path) -> String {
    format!(
        "[[validation.check]]\nname = \"serve-bench\"\nrun = [\"cat\", \"{}\"]\n[[validation.check.metric]]\nname = \"ttft_p99_ms\"\nfrom = \"json:/ttft/p99\"\nbetter = \"lower\"\nthreshold = \"<= 1.05 * current\"\n",
        file.display()
    )
}

/// The evidence of run `r1` as the collection lays it out, from `nodes`' site roots (every
/// record copied: the page judges only those of the run).
fn fleet_evidence(dir: &Path, nodes: &[(&str, &Path)]) -> std::path::PathBuf {
    let evidence = dir.join("evidence");
    let run_dir = evidence.join("runs/r1");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::write(
        run_dir.join("run.json"),
        r#"{"id": "r1", "started": "2020-01-01T00:00:00Z", "ended": "2099-01-01T00:00:00Z", "aborted": false}"#,
    )
    .unwrap();
    for (node, site) in nodes {
        let dir = run_dir.join("nodes").join(node);
        std::fs::create_dir_all(&dir).unwrap();
        run(std::process::Command::new("cp").args(["-r", s(&site.join("records")), s(&dir)])).ok();
        std::fs::write(dir.join("node.json"), r#"{"tuple": "MI300X gfx942 | ubuntu 24.04", "wave": "canary"}"#)
            .unwrap();
    }
    evidence
}

#[test]
fn metrics_compare_the_candidate_with_the_current_stack_under_a_declared_threshold() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let root = t.path().join("site");
    let bench = t.path().join("bench.json");
    let p99 = |v: &str| std::fs::write(&bench, format!("{{\"ttft\": {{\"p99\": {v}}}}}\n")).unwrap();
    let release = |name: &str| bundle(t.path(), &keys, name, ROW, &bench_check(&bench));
    let record = |done: &serde_json::Value| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(done["record"].as_str().unwrap()).unwrap()).unwrap()
    };
    let metric = |evidence: &serde_json::Value| evidence["checks"][0]["metrics"][0].clone();

    // The first release: no current side yet, so the relative threshold cannot be decided: amber.
    p99("100");
    let first = release("first");
    let r = install("mi300x", &first, &keys, &root, &[]).code(4);
    assert!(r.stderr.contains("no current value to compare with"), "{}", r.stderr);
    install("mi300x", &first, &keys, &root, &["--accept-amber", "--reason", "first release: no baseline"]).ok();
    // The current side, measured on the stack that runs now.
    let taken = airlock_run(&["validate", "--root", s(&root), "--baseline", "--json"]).ok().json();
    assert_eq!(taken["values"]["serve-bench"]["ttft_p99_ms"], 100.0);

    // A candidate 20% slower at p99 is red, with its row.
    let second = release("second");
    p99("120");
    let red = install("mi300x", &second, &keys, &root, &["--json"]).code(4);
    assert!(red.stderr.contains("metric `ttft_p99_ms`: 120 misses <= 1.05 * current (105.0000)"), "{}", red.stderr);
    let refused = std::fs::read_dir(root.join("records")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let refused: serde_json::Value = serde_json::from_slice(&std::fs::read(refused).unwrap()).unwrap();
    let row = metric(&refused["validation"]);
    assert_eq!(
        (row["current"].as_f64(), row["candidate"].as_f64(), row["decision"].as_str()),
        (Some(100.0), Some(120.0), Some("fail")),
        "{row}"
    );
    assert_eq!(row["change_percent"].as_f64().map(f64::round), Some(20.0));
    assert_eq!(schema_errors(&validator("record.v1.json"), &refused), Vec::<String>::new());

    // Within the threshold: green, and the results sheet shows the row.
    p99("104");
    let done = install("mi300x", &second, &keys, &root, &["--json", "--run-id", "r1"]).ok().json();
    let green = record(&done);
    assert_eq!(metric(&green["validation"])["decision"], "pass");
    let page = t.path().join("report.html");
    airlock_run(&["report", "--root", s(&root), "--out", s(&page)]).ok();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("Results sheet") && html.contains("+4.0%") && html.contains("&lt;= 1.05 * current"),
        "the results sheet"
    );

    // A second node of the tuple (baseline 100, candidate 102): the fleet page gives medians.
    let other = t.path().join("site-b");
    p99("100");
    install("mi300x", &first, &keys, &other, &["--accept-amber", "--reason", "first release: no baseline"]).ok();
    airlock_run(&["validate", "--root", s(&other), "--baseline"]).ok();
    p99("102");
    install("mi300x", &second, &keys, &other, &["--run-id", "r1"]).ok();
    let evidence = fleet_evidence(t.path(), &[("gpu-a", &root), ("gpu-b", &other)]);
    let fleet = airlock_run(&["report", "--fleet", s(&evidence), "--json"]).ok().json();
    let sheet = &fleet["tuples"][0]["results"][0];
    assert_eq!(
        (
            sheet["nodes"].as_u64(),
            sheet["current_median"].as_f64(),
            sheet["candidate_median"].as_f64(),
            sheet["passed"].as_u64()
        ),
        (Some(2), Some(100.0), Some(103.0), Some(2)),
        "{sheet}"
    );

    // A metric that cannot be read is red: the evidence is missing.
    std::fs::write(&bench, "Segmentation fault\n").unwrap();
    let third = release("third");
    let r = install("mi300x", &third, &keys, &root, &[]).code(4);
    assert!(
        r.stderr.contains("the candidate's value cannot be read") && r.stderr.contains("the evidence is missing"),
        "{}",
        r.stderr
    );
    // A threshold that does not parse is a spec error.
    let bad = bundle_spec_error(t.path(), &bench_check(&bench).replace("<= 1.05 * current", "faster"));
    assert!(bad.contains("metric `ttft_p99_ms`: threshold `faster`"), "{bad}");
}

/// `airlock lock` of a spec with `checks`: its error text.
fn bundle_spec_error(dir: &Path, checks: &str) -> String {
    let p = project(&dir.join("bad-spec"), "1.0.0");
    let text = std::fs::read_to_string(&p.spec).unwrap();
    let head = text.split("[[validation.target]]").next().unwrap();
    std::fs::write(&p.spec, format!("{head}[[validation.target]]\n{ROW}\n{checks}")).unwrap();
    airlock_run(&["lock", s(&p.spec)]).code(2).stderr
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn apply_measures_the_current_stack_before_it_changes_anything() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let node = t.path().join("node");
    // Each run is 20 slower than the one before: the run before the change is the current side.
    let state = t.path().join("runs");
    std::fs::write(&state, "100").unwrap();
    let script = t.path().join("bench.sh");
    std::fs::write(
        &script,
        format!(
            "n=$(cat {0}); echo $((n + 20)) > {0}; echo \"{{\\\"ttft\\\": {{\\\"p99\\\": $n}}}}\"\n",
            state.display()
        ),
    )
    .unwrap();
    let check = "[[validation.check]]\nname = \"serve-bench\"\nrun = [\"sh\", \"SCRIPT\"]\n[[validation.check.metric]]\nname = \"ttft_p99_ms\"\nfrom = \"json:/ttft/p99\"\nbetter = \"lower\"\nthreshold = \"<= 1.05 * current\"\n".replace("SCRIPT", s(&script));
    let b = bundle(t.path(), &keys, "bench", ROW, &check);
    let r = run(airlock().args(["apply", s(&b), "--trust", s(&keys.public), "--root", s(&node)])).code(4);
    let baseline: serde_json::Value =
        serde_json::from_slice(&std::fs::read(node.join("baseline.json")).unwrap()).unwrap();
    assert_eq!(baseline["values"]["serve-bench"]["ttft_p99_ms"], 100.0, "measured before the change");
    assert!(r.stderr.contains("120 misses <= 1.05 * current"), "{}", r.stderr);
}

#[test]
fn probe_lists_the_whole_rocm_family_carried_packages_python_environments_and_images() {
    use std::fmt::Write as _;
    let t = tempfile::tempdir().unwrap();
    // The recorded host, with ROCm 10's package names in its dpkg status.
    let host = t.path().join("host");
    run(std::process::Command::new("cp").args(["-a", s(&repo("testdata/probes/mi300x/root")), s(&host)])).ok();
    let status = host.join("var/lib/dpkg/status");
    let mut text = std::fs::read_to_string(&status).unwrap();
    for (name, version, source) in [
        ("amdrocm-core", "10.0.0-1", "amdrocm"),
        ("amdrocm-hip-runtime", "10.0.0-1", "amdrocm"),
        ("libamdhip64-7", "7.0.2.70002-56~24.04", "hip-runtime-amd"),
        ("hipcc", "1.1.1.70002-56~24.04", "hipcc"),
        ("libhsa-runtime64-1", "1.18.0.70002-56~24.04", "hsa-rocr"),
        ("hello", "2.10-3", "hello"),
    ] {
        let _ = write!(
            text,
            "\nPackage: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\nSource: {source}\n"
        );
    }
    std::fs::write(&status, text).unwrap();
    // A Python environment, and a container runtime that holds one image.
    let venv = t.path().join("venv");
    run(std::process::Command::new("python3").args(["-m", "venv", s(&venv)])).ok();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("docker"),
        "#!/bin/sh\necho '{\"Repository\":\"registry.site/rocm/vllm\",\"Tag\":\"0.9.2\",\"Digest\":\"sha256:4f2a0c1e9d3b5a7c8e6f1d2b3a4c5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d\"}'\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(bin.join("docker")).unwrap().permissions(),
        0o755,
    );
    run(std::process::Command::new("chmod").args(["755", s(&bin.join("docker"))])).ok();
    let path = format!(
        "{}:{}:{}",
        repo("testdata/probes/mi300x/bin").display(),
        bin.display(),
        std::env::var("PATH").unwrap()
    );
    let probe = |extra: &[&str]| {
        run(on_host("mi300x")
            .env("AIRLOCK_HOST_ROOT", &host)
            .env("PATH", &path)
            .args(["probe", "--json", "--venv", s(&venv)])
            .args(extra))
    };
    let record = probe(&[]).ok().json();
    let packages = &record["inventory"]["packages"];
    for name in [
        "amdrocm-core",
        "amdrocm-hip-runtime",
        "libamdhip64-7",
        "hipcc",
        "libhsa-runtime64-1",
        "rocm-core",
        "amdgpu-dkms",
        "amd-smi-lib",
    ] {
        assert!(packages[name]["version"].is_string(), "`{name}` is listed: {packages}");
    }
    assert_eq!(packages["libamdhip64-7"]["source"], "hip-runtime-amd");
    // Every installed package, not only the family: the inventory `freeze` pins; the host's
    // stack summary keeps the family alone.
    assert!(packages["bash"]["version"].is_string(), "every installed package: {packages}");
    assert!(!record["host"]["packages"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with("bash=")));
    assert!(record["host"]["packages"].as_array().unwrap().iter().any(|p| p == "hipcc=1.1.1.70002-56~24.04"));
    assert!(record["inventory"]["python"][s(&venv)]["pip"].is_string(), "{}", record["inventory"]["python"]);
    assert_eq!(
        record["inventory"]["images"]["registry.site/rocm/vllm:0.9.2"],
        "sha256:4f2a0c1e9d3b5a7c8e6f1d2b3a4c5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
    );
    // probe --diff names each package that changed by its own path.
    let before = t.path().join("before.json");
    std::fs::write(&before, serde_json::to_vec(&record).unwrap()).unwrap();
    let text = std::fs::read_to_string(&status)
        .unwrap()
        .replace("Version: 1.1.1.70002-56~24.04", "Version: 1.1.2.70100-1~24.04");
    std::fs::write(&status, text).unwrap();
    let diff = probe(&["--diff", s(&before)]).ok().json();
    let paths: Vec<&str> = diff["changes"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"inventory.packages.hipcc.version"), "{paths:?}");
}

/// Issue 77, attack 4: while another command holds the root (a `--download-only` from a slow
/// mirror can hold it for hours), `validate --nhc` said "busy, not judged" and exit 0 on a node
/// whose stack was red, so NHC never drained it. It repeats the last verdict with its age.
#[test]
fn a_busy_root_repeats_the_last_verdict_and_never_calls_a_red_node_healthy() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let green = bundle(t.path(), &keys, "green", ROW, RVS);
    let root = t.path().join("site");
    install("mi300x", &green, &keys, &root, &[]).ok();
    let nhc = |c: &mut std::process::Command| run(c.args(["validate", "--root", s(&root), "--nhc"]));
    // Holding the lock from here, as a writer would.
    let lock = std::fs::OpenOptions::new().write(true).open(root.join(".lock")).unwrap();
    lock.try_lock().unwrap();
    std::fs::write(root.join(".lock"), "pid 4242 apply since now\n").unwrap();
    let busy = nhc(&mut on_host("mi300x")).code(0);
    assert!(busy.stdout.starts_with("airlock: busy, last judged green"), "{}", busy.stdout);
    lock.unlock().unwrap();
    let red = nhc(&mut with_failing_rvs("mi300x")).code(1);
    assert!(red.stdout.starts_with("airlock: red "), "{}", red.stdout);
    lock.try_lock().unwrap();
    let busy = nhc(&mut with_failing_rvs("mi300x")).code(1);
    assert!(busy.stdout.starts_with("airlock: red demo 1.0.0 record "), "{}", busy.stdout);
    assert!(busy.stdout.contains("(last judged ") && busy.stdout.contains("; busy now): "), "{}", busy.stdout);
}

#[test]
#[cfg_attr(not(feature = "system-tests"), ignore = "system tier: needs root")]
fn apply_unless_current_leaves_a_node_on_its_bundle_alone_and_probe_names_the_current_bundle() {
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("k"), "build");
    let node = t.path().join("node");
    let b = bundle(t.path(), &keys, "demo", ROW, "");
    let apply = |extra: &[&str]| {
        let mut c = on_host("mi300x");
        c.args(["apply", s(&b), "--trust", s(&keys.public), "--root", s(&node), "--json"]).args(extra);
        run(&mut c)
    };
    let records = || std::fs::read_dir(node.join("records")).map_or(0, Iterator::count);
    // A node with nothing current takes the bundle, on record, with or without the flag.
    let first = apply(&["--unless-current"]).ok().json();
    assert_eq!(first.get("unchanged"), None, "{first}");
    assert_eq!(first["validation"]["verdict"], "green", "{first}");
    assert_eq!(records(), 1);
    let id = first["id"].as_str().unwrap().to_owned();

    // Again: nothing to change, nothing done (no validation, no record), exit 0; a dry run says so.
    let again = apply(&["--unless-current"]).ok().json();
    assert_eq!((again["unchanged"].as_bool(), again["dry_run"].as_bool()), (Some(true), Some(false)), "{again}");
    assert_eq!((again["id"].as_str(), again.get("validation"), again.get("record")), (Some(id.as_str()), None, None));
    let dry = apply(&["--unless-current", "--dry-run"]).ok().json();
    assert_eq!((dry["unchanged"].as_bool(), dry["dry_run"].as_bool()), (Some(true), Some(true)), "{dry}");
    assert_eq!(records(), 1, "neither wrote a record");
    let mut c = on_host("mi300x");
    c.args(["apply", s(&b), "--trust", s(&keys.public), "--root", s(&node), "--unless-current"]);
    let text = run(&mut c).ok().stdout;
    assert!(text.contains("already runs demo 1.0.0") && text.contains("left as it is"), "{text}");
    // Without it the same bundle is validated again, on record (an operator's re-check).
    let revalidated = apply(&[]).ok().json();
    assert_eq!((revalidated.get("unchanged"), revalidated["validation"]["verdict"].as_str()), (None, Some("green")));
    assert_eq!(records(), 2);

    // `probe --root` names the root's current bundle as `status` does; a directory that is no
    // site root has none; without `--root` the probe is what it was.
    let probe = |extra: &[&str]| {
        let mut c = on_host("mi300x");
        c.args(["probe", "--json"]).args(extra);
        run(&mut c).ok().json()
    };
    let status = airlock_run(&["status", "--root", s(&node), "--json"]).ok().json();
    assert_eq!(probe(&["--root", s(&node)])["current"], status["current"]);
    assert_eq!(status["current"]["id"], id.as_str());
    assert!(probe(&["--root", s(t.path())])["current"].is_null());
    assert_eq!(probe(&[]).get("current"), None);
}
