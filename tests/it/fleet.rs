//! A fleet in waves with the Ansible collection `airlock.site` (`ansible/`): the collection built
//! with `ansible-galaxy collection build` and installed offline from its tarball, then the
//! playbook `airlock.site.rollout` run with `ansible-core` over an inventory of nodes on this
//! machine (`ansible_connection=local`), each with its own site root and its own recorded GPU
//! host (`airlock_environment`), in three hardware tuples, plus a tuple whose firmware is below
//! the bundle's floor. Fails, never skips, when ansible-core is missing. Each rollout run's
//! evidence lands under `EVIDENCE/runs/ID/`; `report --fleet` judges the newest run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::slurm::Slurm;
use crate::common::*;

/// The collection installed from its tarball into a collections path of its own.
fn collection(dir: &Path) -> PathBuf {
    let built = dir.join("built");
    let src = repo("ansible");
    run(Command::new("ansible-galaxy").args(["collection", "build", "--force", "--output-path", s(&built), s(&src)]))
        .ok();
    // Named by galaxy.yml's version: the one tarball built.
    let tarball = std::fs::read_dir(&built)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("airlock-site-")))
        .expect("ansible-galaxy built the collection's tarball");
    let path = dir.join("collections");
    run(Command::new("ansible-galaxy").args(["collection", "install", "--offline", "-p", s(&path), s(&tarball)])).ok();
    path
}

struct Fleet {
    dir: tempfile::TempDir,
    collections: PathBuf,
    keys: Keys,
}

/// (node, recorded host): three green tuples (SPX bare metal, CPX/NPS4, a passthrough guest).
const GREEN: [(&str, &str); 6] =
    [("n1", "mi300x"), ("n2", "mi300x"), ("n3", "mi300x-cpx"), ("n4", "mi300x-cpx"), ("n5", "guest"), ("n6", "guest")];

impl Fleet {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let collections = collection(dir.path());
        let keys = keygen(&dir.path().join("keys"), "build");
        // The demo's bundle, qualified for SPX and CPX partitions, at two versions.
        let p = dir.path().join("project");
        run(Command::new("cp").args(["-r", s(&repo("testdata/demo")), s(&p)])).ok();
        let spec = std::fs::read_to_string(p.join("airlock.toml")).unwrap().replace(
            r#"partition = { compute = ["SPX"], memory = ["NPS1"] }"#,
            r#"partition = { compute = ["SPX", "CPX"], memory = ["NPS1", "NPS4"] }"#,
        );
        for version in ["2026.11.0", "2026.11.1"] {
            std::fs::write(p.join("airlock.toml"), spec.replace("2026.11.0", version)).unwrap();
            let out = dir.path().join(format!("{version}.airlock"));
            run(airlock().current_dir(&p).args(["build", "airlock.toml", "--key", s(&keys.private), "--out", s(&out)]))
                .ok();
        }
        Self { dir, collections, keys }
    }

    fn root(&self, node: &str) -> PathBuf {
        self.dir.path().join("nodes").join(node)
    }

    fn inventory(&self, name: &str, nodes: &[(&str, &str)]) -> PathBuf {
        self.inventory_with(name, nodes, &[])
    }

    /// An inventory whose nodes in `failing_rvs` run an RVS that reports FAIL (the tuple is
    /// the same: RVS is not part of it).
    fn inventory_with(&self, name: &str, nodes: &[(&str, &str)], failing_rvs: &[&str]) -> PathBuf {
        let probes = repo("testdata/probes");
        let mut text = String::from("[airlock_nodes]\n");
        for (node, host) in nodes {
            // The recorded host's tools first; its rvs from the 8x MI300X recording.
            let first = if failing_rvs.contains(node) {
                format!("{}:", probes.join("rvs-fail/bin").display())
            } else {
                String::new()
            };
            let env = host_environment(host, &first);
            let _ = writeln!(
                text,
                "{node} ansible_connection=local airlock_root={} airlock_environment='{env}'",
                self.root(node).display()
            );
        }
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `ansible-playbook airlock.site.rollout` with `version`'s bundle and `extra` variables.
    fn rollout(&self, inventory: &Path, version: &str, evidence: &str, extra: &[&str]) -> Run {
        run(&mut self.rollout_command(inventory, version, evidence, extra))
    }

    /// The same, to start.
    fn rollout_command(&self, inventory: &Path, version: &str, evidence: &str, extra: &[&str]) -> Command {
        let vars = serde_json::json!({
            "airlock_source": self.dir.path().join(format!("{version}.airlock")),
            "airlock_trust": [self.keys.public.clone()],
            "airlock_binary": env!("CARGO_BIN_EXE_airlock"),
            "airlock_batches": [1, 2],
            "airlock_evidence_dir": self.dir.path().join(evidence),
            "ansible_python_interpreter": python(),
        });
        let vars_file = self.dir.path().join(format!("{evidence}.vars.json"));
        std::fs::write(&vars_file, vars.to_string()).unwrap();
        let mut c = Command::new("ansible-playbook");
        c.env("ANSIBLE_COLLECTIONS_PATH", &self.collections)
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_LOCAL_TEMP", self.dir.path().join("ansible-tmp"))
            .env("ANSIBLE_HOME", self.dir.path().join("ansible-home"))
            .args(["airlock.site.rollout", "-i", s(inventory), "-e", &format!("@{}", vars_file.display())])
            .args(extra);
        c
    }

    /// One module of the collection on one node, ad hoc (`ansible NODE -m MODULE -a ARGS`).
    fn module(&self, inventory: &Path, node: &str, module: &str, args: &serde_json::Value, extra: &[&str]) -> Run {
        let mut args = args.clone();
        args["root"] = serde_json::json!(self.root(node));
        args["binary"] = serde_json::json!(env!("CARGO_BIN_EXE_airlock"));
        let mut c = Command::new("ansible");
        c.env("ANSIBLE_COLLECTIONS_PATH", &self.collections)
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_LOCAL_TEMP", self.dir.path().join("ansible-tmp"))
            .env("ANSIBLE_HOME", self.dir.path().join("ansible-home"))
            .args([node, "-i", s(inventory), "-m", &format!("airlock.site.{module}"), "-a", &args.to_string()])
            .args(["-e", &format!("ansible_python_interpreter={}", python())])
            .args(extra);
        run(&mut c)
    }

    /// One module of the collection on `node`, the way Ansible runs it on a node when no action
    /// plugin takes its task (a playbook of the user's calling the module by its file, an older
    /// controller): its file under Python, its arguments in a file, nothing of the controller.
    fn module_on_node(&self, node: &str, host: &str, module: &str, args: &serde_json::Value) -> serde_json::Value {
        let mut args = args.clone();
        args["root"] = serde_json::json!(self.root(node));
        args["binary"] = serde_json::json!(env!("CARGO_BIN_EXE_airlock"));
        args["environment"] = host_environment(host, "");
        let file = self.dir.path().join(format!("{node}-{module}.args.json"));
        std::fs::write(&file, serde_json::json!({ "ANSIBLE_MODULE_ARGS": args }).to_string()).unwrap();
        let source =
            self.collections.join("ansible_collections/airlock/site/plugins/modules").join(format!("{module}.py"));
        run(Command::new(python()).arg(&source).arg(&file).env("PYTHONPATH", &self.collections)).ok().json()
    }

    /// The version each node runs now (`status`), or `-`.
    fn versions(&self, nodes: &[(&str, &str)]) -> BTreeMap<String, String> {
        nodes
            .iter()
            .map(|(node, _)| {
                let r = run(airlock().args(["status", "--root", s(&self.root(node)), "--json"]));
                let v = if r.code == 0 {
                    r.json()["current"]["version"].as_str().unwrap_or("-").to_owned()
                } else {
                    "-".into()
                };
                ((*node).to_owned(), v)
            })
            .collect()
    }

    fn records(&self, node: &str) -> usize {
        std::fs::read_dir(self.root(node).join("records")).map_or(0, Iterator::count)
    }
}

/// A node's environment: the recorded `host`'s tools first (after `first`, a directory list
/// ending in `:`), then the 8x MI300X recording's (its rvs).
fn host_environment(host: &str, first: &str) -> serde_json::Value {
    let probes = repo("testdata/probes");
    serde_json::json!({
        "PATH": format!("{first}{}:{}:/usr/bin:/bin", probes.join(host).join("bin").display(), probes.join("mi300x/bin").display()),
        "AIRLOCK_HOST_ROOT": probes.join(host).join("root"),
    })
}

/// The Python that runs ansible (its modules run under it too).
fn python() -> String {
    let r = run(Command::new("python3").args(["-c", "import sys; print(sys.executable)"])).ok();
    r.stdout.trim().to_owned()
}

/// `name=N` counts of the play recap, per host.
fn recap(stdout: &str) -> BTreeMap<String, String> {
    let start = stdout.find("PLAY RECAP").expect("a play recap");
    stdout[start..]
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(host, counts)| (host.trim().to_owned(), counts.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

fn all(version: &str, nodes: &[(&str, &str)]) -> BTreeMap<String, String> {
    nodes.iter().map(|(n, _)| ((*n).to_owned(), version.to_owned())).collect()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one rollout and its evidence, then the same rollout again")]
fn a_green_fleet_goes_canaries_first_then_batches_and_a_second_run_changes_nothing() {
    let f = Fleet::new();
    let inventory = f.inventory("green.ini", &GREEN);

    // --check: nothing changes anywhere.
    let r = f.rollout(&inventory, "2026.11.0", "check-evidence", &["--check"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(GREEN.iter().all(|(n, _)| f.records(n) == 0), "a check run writes no record");

    let r = f.rollout(&inventory, "2026.11.0", "evidence", &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.versions(&GREEN), all("2026.11.0", &GREEN));
    // No node has a step around its change: the waves are wave-plain.yml's, no drain or resume
    // include for each node to skip.
    assert!(!r.stdout.contains("Drain the node") && !r.stdout.contains("Back into service"), "{}", r.stdout);

    // Check mode runs nothing and says so honestly: no validation record, and no rollback
    // promised to a node that has nothing to go back to.
    let records = f.records("n1");
    let v = f.module(&inventory, "n1", "validate", &serde_json::json!({}), &["--check"]);
    assert!(v.code == 0 && v.stdout.contains("would validate") && !v.stdout.contains("CHANGED"), "{}", v.stdout);
    assert_eq!(f.records("n1"), records, "check mode wrote no record");
    let rb = f.module(&inventory, "n1", "rollback", &serde_json::json!({}), &["--check"]);
    assert!(
        rb.code == 0 && rb.stdout.contains("nothing to roll back to") && !rb.stdout.contains("CHANGED"),
        "{}",
        rb.stdout
    );

    // The fleet report: canaries (one per tuple) ran before batch 1, and batch 1 before batch 2.
    let page = f.dir.path().join("fleet.html");
    let evidence = f.dir.path().join("evidence");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--out", s(&page), "--json"])).ok().json();
    assert_eq!(report["verdict"], "green");
    assert_eq!(report["bundle"]["version"], "2026.11.0", "{report}");
    assert_eq!(report["tuples"].as_array().unwrap().len(), 3, "{report}");
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert_final_state(&f, &report, &GREEN);
    let waves: Vec<(String, Vec<String>, String)> = report["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let nodes = w["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
            (w["name"].as_str().unwrap().to_owned(), nodes, w["to"].as_str().unwrap().to_owned())
        })
        .collect();
    let names: Vec<&str> = waves.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(names, ["canary", "batch 1", "batch 2"], "{report}");
    assert_eq!(waves[0].1, ["n1", "n3", "n5"]);
    let froms: Vec<&str> = report["waves"].as_array().unwrap().iter().map(|w| w["from"].as_str().unwrap()).collect();
    assert!(waves[0].2.as_str() <= froms[1] && waves[1].2.as_str() <= froms[2], "waves in order: {report}");
    let dom = chromium_dom(&page);
    assert!(dom.contains("GREEN") && dom.contains("batch 2") && dom.contains("CPX/NPS4"), "{dom}");
    assert!(dom.contains("Rollout of rocm10-demo 2026.11.0"), "the page names the bundle: {dom}");
    counts_lead(&page, 3, 2);
    // Each node's approval pack is in the evidence, linked from the page, and opens.
    let pack = report["nodes"][0]["pack"].as_str().expect("an approval pack per node");
    let run_dir = Path::new(report["dir"].as_str().unwrap());
    let pack_dom = chromium_dom(&run_dir.join(pack));
    assert!(pack_dom.contains("rocm10-demo 2026.11.0") && pack_dom.contains("GREEN"), "{pack_dom}");
    assert!(dom.contains("report.html"), "{dom}");

    // The same bundle again: nothing changes on a node. The controller's changes are the new
    // run's evidence (its directory, start, plan, batch notes and end), reported as such.
    let r = f.rollout(&inventory, "2026.11.0", "evidence-again", &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let counts = recap(&r.stdout);
    for (host, counts) in counts.iter().filter(|(h, _)| *h != "localhost") {
        assert!(counts.contains("changed=0") && counts.contains("failed=0"), "{host}: {counts}");
    }
    let controller = counts.get("localhost").expect("the controller's plays in the recap");
    assert!(controller.contains("failed=0") && !controller.contains("changed=0"), "{controller}");
    // Two writes on the controller: the run's start and plan, then its batch notes, the nodes'
    // evidence and its end (one `evidence` call each).
    assert_eq!(r.stdout.matches("changed: [localhost]").count(), 2, "open, then finish: {}", r.stdout);

    // A capacity rule the second batch would break: the play stops before it, with the numbers.
    let capacity = r#"{"airlock_capacity": {"total": 6, "reserved": 2, "demand": 3, "headroom": 0}}"#;
    let r = f.rollout(&inventory, "2026.11.1", "evidence-capacity", &["-e", capacity]);
    assert_ne!(r.code, 0);
    assert!(
        r.stdout.contains("capacity rule broken before the batch n4, n6") && r.stdout.contains("= 2 is below demand 3"),
        "{}",
        r.stdout
    );
    // The stopped run is red, and its capacity table names the numbers.
    let evidence = f.dir.path().join("evidence-capacity");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!((report["verdict"].as_str(), report["run"]["aborted"].as_bool()), (Some("red"), Some(true)));
    let broken: Vec<(i64, bool)> = report["capacity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["available"].as_i64().unwrap(), c["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(broken, [(3, true), (2, false)], "{report}");
    let versions = f.versions(&GREEN);
    assert_eq!(
        (versions["n2"].as_str(), versions["n4"].as_str(), versions["n6"].as_str()),
        ("2026.11.1", "2026.11.0", "2026.11.0")
    );
}

/// The node modules run on the controller through action plugins of the same name; run on a
/// node as plain modules (their `main()`), they do the same.
#[test]
fn the_node_modules_run_on_a_node_on_their_own_as_they_do_through_the_action_plugins() {
    let f = Fleet::new();
    let (node, host, via) = ("n1", "mi300x", "n2");
    let inventory = f.inventory("modules", &[(node, host), (via, host)]);
    let through_plugin = |module: &str, mut args: serde_json::Value| {
        args["environment"] = host_environment(host, "");
        let r = f.module(&inventory, via, module, &args, &[]).ok();
        let json = r.stdout.split_once(" => ").map_or_else(|| panic!("a result: {}", r.stdout), |(_, j)| j);
        serde_json::from_str::<serde_json::Value>(json).unwrap()
    };
    let probe = f.module_on_node(node, host, "probe", &serde_json::json!({}));
    assert_eq!(probe["changed"], false);
    assert_eq!(probe["tuple"], through_plugin("probe", serde_json::json!({}))["tuple"], "the same tuple either way");
    assert!(probe["tuple"].as_str().is_some_and(|t| t.contains("gfx942")), "{probe}");

    let apply = |version: &str| serde_json::json!({ "source": f.dir.path().join(format!("{version}.airlock")), "trust": [f.keys.public] });
    let first = f.module_on_node(node, host, "apply", &apply("2026.11.0"));
    assert_eq!(
        (first["changed"].clone(), first["verdict"].clone()),
        (serde_json::json!(true), serde_json::json!("green"))
    );
    let again = through_plugin("apply", apply("2026.11.0"));
    assert_eq!(again["verdict"], "green");
    assert_eq!(again["id"], first["id"], "the same bundle id either way");
    let status = f.module_on_node(node, host, "status", &serde_json::json!({}));
    assert_eq!(status["status"]["current"]["version"], "2026.11.0");
    let validated = f.module_on_node(node, host, "validate", &serde_json::json!({}));
    assert_eq!(validated["verdict"], "green", "{validated}");
    // The same bundle again on the same node: one `apply --unless-current`, nothing changed or
    // recorded; `brief` leaves airlock's whole answer on the node; the probe names the bundle.
    let records = || std::fs::read_dir(f.root(node).join("records")).unwrap().count();
    let before = records();
    let unchanged = f.module_on_node(node, host, "apply", &apply("2026.11.0"));
    assert_eq!(
        (unchanged["changed"].as_bool(), unchanged["unchanged"].as_bool()),
        (Some(false), Some(true)),
        "{unchanged}"
    );
    assert!(unchanged["msg"].as_str().is_some_and(|m| m.starts_with("already runs")), "{unchanged}");
    assert!(unchanged["result"]["id"].is_string(), "the whole answer without brief: {unchanged}");
    let mut brief = apply("2026.11.0");
    brief["brief"] = serde_json::json!(true);
    let brief = through_plugin("apply", brief);
    assert_eq!((brief["changed"].as_bool(), brief.get("result")), (Some(false), None), "{brief}");
    assert_eq!(records(), before, "no record for a node left as it was");
    let probed = through_plugin("probe", serde_json::json!({ "brief": true }));
    assert_eq!((probed["current"]["id"].clone(), probed.get("probe")), (first["id"].clone(), None), "{probed}");
    assert_eq!(f.module_on_node(node, host, "probe", &serde_json::json!({}))["current"]["version"], "2026.11.0");

    let second = f.module_on_node(node, host, "apply", &apply("2026.11.1"));
    assert_eq!(second["changed"], true);
    let rolled = f.module_on_node(node, host, "rollback", &serde_json::json!({}));
    assert_eq!(rolled["changed"], true, "{rolled}");
    assert_eq!(f.versions(&[(node, host), (via, host)]), all("2026.11.0", &[(node, host), (via, host)]));

    // Issue 79: the node modules are the action group `airlock.site.node`: `module_defaults`
    // sets their common options once, and the action plugin takes them.
    let play = serde_json::json!([{
        "hosts": via, "gather_facts": false,
        "module_defaults": { "group/airlock.site.node": {
            "root": f.root(via), "binary": env!("CARGO_BIN_EXE_airlock"), "environment": host_environment(host, ""),
        }},
        "tasks": [{ "airlock.site.status": {}, "register": "st" },
                  { "ansible.builtin.debug": { "msg": "version={{ st.status.current.version }}" } },
                  // Issue 79: the task's `environment:` reaches airlock (it was ignored), under
                  // the module's own `environment` argument (here emptied).
                  { "airlock.site.probe": { "environment": {} }, "environment": host_environment(host, ""),
                    "register": "pr" },
                  { "ansible.builtin.debug": { "msg": "tuple={{ pr.tuple }}" } }],
    }]);
    let book = f.dir.path().join("defaults.yml");
    std::fs::write(&book, play.to_string()).unwrap();
    let r = run(Command::new("ansible-playbook")
        .env("ANSIBLE_COLLECTIONS_PATH", &f.collections)
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", f.dir.path().join("ansible-tmp"))
        .env("ANSIBLE_HOME", f.dir.path().join("ansible-home"))
        .args(["-i", s(&inventory), s(&book), "-e", &format!("ansible_python_interpreter={}", python())]));
    assert!(r.code == 0 && r.stdout.contains("version=2026.11.0"), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("tuple=") && r.stdout.contains("gfx942"), "the task's environment: {}", r.stdout);
}

#[test]
fn a_pinned_candidate_is_staged_on_every_node_first_then_rolled_out_while_the_mirror_keeps_its_current() {
    let f = Fleet::new();
    let nodes = &GREEN[..4];
    let inventory = f.inventory("pinned.ini", nodes);
    // The mirror: 2026.11.0 qualified (current), 2026.11.1 a candidate served by version.
    let mirror = f.dir.path().join("mirror");
    for (version, extra) in [("2026.11.0", None), ("2026.11.1", Some("--candidate"))] {
        let bundle = f.dir.path().join(format!("{version}.airlock"));
        let args = ["install", s(&bundle), "--trust", s(&f.keys.public), "--root", s(&mirror), "--role", "mirror"];
        run(airlock().args(args).args(extra)).ok();
    }
    let vars = serde_json::json!({
        "airlock_source": format!("file://{}/", mirror.join("public").display()),
        "airlock_release": "2026.11.1",
        "airlock_stage": true,
        "airlock_run_id": "pinned-1",
    });
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.versions(nodes), all("2026.11.1", nodes));
    let status = run(airlock().args(["status", "--root", s(&mirror), "--json"])).ok().json();
    assert_eq!(status["current"]["version"], "2026.11.0", "the mirror's current stays the qualified release");
    // Every node staged the release in this run before any node changed.
    let stage = r.stdout.find("Stage the release on every node").expect("the stage play runs");
    let canaries = r.stdout.find("Canaries, one per hardware tuple").unwrap();
    assert!(stage < canaries, "{}", r.stdout);
    for (node, _) in nodes {
        let records = std::fs::read_dir(f.root(node).join("records")).unwrap();
        let staged = records
            .map(|e| serde_json::from_slice::<serde_json::Value>(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
            .filter(|r| r["outcome"] == "staged" && r["run_id"] == "pinned-1")
            .count();
        assert_eq!(staged, 1, "{node} staged once in the run");
    }
    let report = run(airlock().args(["report", "--fleet", s(&f.dir.path().join("evidence")), "--json"])).ok().json();
    assert_eq!((report["verdict"].as_str(), report["bundle"]["version"].as_str()), (Some("green"), Some("2026.11.1")));
}

#[test]
fn the_first_rollout_adopts_the_baseline_each_node_runs_before_it_changes_any() {
    let f = Fleet::new();
    let nodes = &GREEN[..3];
    let inventory = f.inventory("adopt.ini", nodes);
    // The baseline: the stack as the nodes run it before airlock (here the demo's files at an
    // earlier version, no packages to check), built from its own spec.
    let p = f.dir.path().join("project");
    let spec = std::fs::read_to_string(p.join("airlock.toml")).unwrap();
    let version = spec.lines().find(|l| l.starts_with("version")).unwrap().to_owned();
    std::fs::write(p.join("base.toml"), spec.replacen(&version, "version = \"0.0.0-baseline\"", 1)).unwrap();
    let base = f.dir.path().join("base.airlock");
    run(airlock().current_dir(&p).args(["build", "base.toml", "--key", s(&f.keys.private), "--out", s(&base)])).ok();
    let vars = serde_json::json!({ "airlock_adopt": base, "airlock_run_id": "first-1" });
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes));
    for (node, _) in nodes {
        let status = run(airlock().args(["status", "--root", s(&f.root(node)), "--json"])).ok().json();
        assert_eq!(status["previous"]["version"], "0.0.0-baseline", "{node}: the baseline is kept to go back to");
        let mut records: Vec<PathBuf> =
            std::fs::read_dir(f.root(node).join("records")).unwrap().map(|e| e.unwrap().path()).collect();
        records.sort();
        let actions: Vec<String> = records
            .iter()
            .map(|p| serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).unwrap()).unwrap())
            .map(|r| format!("{} {}", r["action"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
            .collect();
        assert_eq!(actions, ["adopt activated", "apply activated"], "{node}");
    }
    // The adoption is not the run's change: the page judges the release.
    let report = run(airlock().args(["report", "--fleet", s(&f.dir.path().join("evidence")), "--json"])).ok().json();
    assert_eq!((report["verdict"].as_str(), report["bundle"]["version"].as_str()), (Some("green"), Some("2026.11.0")));
    // A later run with the same variables adopts nothing: the nodes have a current bundle.
    let vars = serde_json::json!({ "airlock_adopt": base, "airlock_run_id": "second-1" });
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for (node, _) in nodes {
        assert_eq!(f.records(node), 3, "{node}: one apply more, no second adoption");
    }
}

/// The rollout under a real Slurm cluster whose node names are the fleet's.
fn slurm_vars(slurm: &Slurm, run_id: &str, extra: &serde_json::Value) -> String {
    let mut vars = serde_json::json!({
        "airlock_scheduler": "slurm",
        "airlock_scheduler_environment": { "SLURM_CONF": slurm.conf },
        "airlock_slurm_poll": 0.5,
        "airlock_run_id": run_id,
    });
    vars.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    vars.to_string()
}

/// A record's time, to the second, as Slurm writes its (UTC, on this machine) times.
fn second(at: &serde_json::Value) -> String {
    at.as_str().unwrap()[..19].to_owned()
}

#[test]
#[allow(clippy::too_many_lines, reason = "two runs under one Slurm cluster, each node's fate checked")]
fn under_slurm_jobs_end_before_a_change_green_nodes_resume_red_ones_stay_drained_and_capacity_comes_from_sinfo() {
    let f = Fleet::new();
    // n5, alone in its tuple, is its canary: an admin drained it. n1 is the canary of the
    // MI300X pair and runs a job; n3, the CPX canary, runs an RVS that fails.
    let nodes: &[(&str, &str)] = &[("n5", "guest"), ("n1", "mi300x"), ("n2", "mi300x"), ("n3", "mi300x-cpx")];
    let slurm = Slurm::start(&["n5", "n1", "n2", "n3"]);
    slurm.cmd("scontrol", &["update", "NodeName=n5", "State=DRAIN", "Reason=bad DIMM, ticket 4711"]);
    let long_job = slurm.submit("n1", "sleep 20");
    slurm.wait_job(&long_job, "RUNNING");
    let inventory = f.inventory_with("slurm.ini", nodes, &["n3"]);
    let vars = slurm_vars(&slurm, "slurm-1", &serde_json::json!({}));
    let mut rollout = f.rollout_command(&inventory, "2026.11.0", "evidence", &["-e", &vars]);
    let log = f.dir.path().join("slurm-1.log");
    let to_log =
        || std::process::Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap());
    let mut child = rollout.stdout(to_log()).stderr(to_log()).spawn().unwrap();
    // A job submitted while n1 drains waits until airlock resumes it.
    let start = std::time::Instant::now();
    while slurm.state("n1").0 != "draining" {
        let ended = child.try_wait().unwrap();
        let output = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            ended.is_none() && start.elapsed().as_secs() < 120,
            "n1 never drained ({:?}): {}",
            slurm.state("n1"),
            output()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (_, reason) = slurm.state("n1");
    assert!(
        reason.starts_with("airlock ") && reason.contains("2026.11.0") && reason.contains("run slurm-1"),
        "{reason}"
    );
    let later_job = slurm.submit("n1", "true");
    let status = child.wait().unwrap();
    let stdout = std::fs::read_to_string(&log).unwrap();
    assert_ne!(status.code(), Some(0), "the red canary stops the run: {stdout}");
    let n1 = f.root("n1");
    let applied = std::fs::read_dir(n1.join("records"))
        .unwrap()
        .map(|e| serde_json::from_slice::<serde_json::Value>(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .find(|r| r["action"] == "apply")
        .expect("n1 applied");
    assert_eq!(applied["outcome"], "activated");
    // The running job ended before airlock changed n1; the later one started after.
    let ended = slurm.job(&long_job)["EndTime"].clone();
    assert!(ended <= second(&applied["at"]), "job ended {ended}, n1 applied {}", applied["at"]);
    slurm.wait_job(&later_job, "COMPLETED");
    let started = slurm.job(&later_job)["StartTime"].clone();
    assert!(started >= second(&applied["at"]), "job started {started}, n1 applied {}", applied["at"]);
    // Green ends idle; red stays drained, its reason naming airlock, red and the record; the
    // admin's node keeps its state and reason, and the node after the stop is untouched.
    assert_eq!(slurm.state("n1").0, "idle");
    let (state, reason) = slurm.state("n3");
    assert_eq!(state, "drained", "{reason}");
    assert!(reason.starts_with("airlock red ") && reason.contains("record ") && reason.contains(".json"), "{reason}");
    assert_eq!(slurm.state("n5"), ("drained".to_owned(), "bad DIMM, ticket 4711".to_owned()));
    assert_eq!(slurm.state("n2").0, "idle");
    assert!(!f.root("n5").join("records").exists(), "the admin's node was not touched");
    assert!(slurm.log().contains("update_node: node n1 reason set to: airlock"), "slurmctld recorded the drain");

    // After the rollout n1's stack turns red under it (its RVS fails now): Slurm's health check
    // (the shipped HealthCheckProgram, run as slurmd runs it) drains it, airlock's line the reason.
    let probes = repo("testdata/probes");
    let health = Command::new("sh")
        .arg(repo("ansible/examples/airlock-healthcheck.sh"))
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/sbin:/usr/bin:/sbin:/bin",
                probes.join("rvs-fail/bin").display(),
                probes.join("mi300x/bin").display()
            ),
        )
        .env("AIRLOCK_HOST_ROOT", probes.join("mi300x/root"))
        .env("AIRLOCK_ROOT", &n1)
        .env("AIRLOCK", env!("CARGO_BIN_EXE_airlock"))
        .env("SLURM_CONF", &slurm.conf)
        .env("SLURMD_NODENAME", "n1")
        .output()
        .unwrap();
    assert!(health.status.success(), "{}", String::from_utf8_lossy(&health.stderr));
    let (state, reason) = slurm.state("n1");
    assert!(state == "drained" && reason.starts_with("airlock: red rocm10-demo 2026.11.0"), "{state}: {reason}");
    assert!(reason.contains("record "), "{reason}");

    // NHC's drain is not the rollout's: n1 stays out of a run until its admin resumes it
    // (here, the RVS is mended). Second run: n3 is healthy again. Before the first expansion batch (n2) the capacity rule
    // takes total and reserved from sinfo: 4 nodes, n5 reserved by its admin, n2 about to
    // change: 2 available, below a demand of 3. The run stops, naming every number.
    slurm.cmd("scontrol", &["update", "NodeName=n1", "State=RESUME"]);
    let inventory = f.inventory("slurm-2.ini", nodes);
    let vars = slurm_vars(
        &slurm,
        "slurm-2",
        &serde_json::json!({ "airlock_capacity": { "total": 999, "reserved": 0, "demand": 3 } }),
    );
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", &vars]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("available 4 total - 1 in change x 1 - 1 reserved = 2 is below demand 3 + headroom 0 = 3")
            && r.stdout.contains("from sinfo, partitions gpu")
            && r.stdout.contains("reserved: n5 (drained: bad DIMM, ticket 4711)"),
        "{}",
        r.stdout
    );
    assert_eq!(slurm.state("n3").0, "idle", "the red node, green now, is back in service");
    assert_eq!(slurm.state("n2").0, "idle");
    assert_eq!(f.versions(&nodes[2..3]), all("-", &nodes[2..3]), "n2 was not changed");
    let report =
        run(airlock().args(["report", "--fleet", s(&f.dir.path().join("evidence")), "--run", "slurm-2", "--json"]))
            .ok()
            .json();
    let capacity = &report["capacity"][0];
    assert_eq!(
        (capacity["total"].as_i64(), capacity["reserved"].as_i64(), capacity["ok"].as_bool()),
        (Some(4), Some(1), Some(false))
    );
    assert_eq!(capacity["source"], "sinfo, partitions gpu", "{capacity}");
}

#[test]
fn a_red_canary_stops_the_rollout_before_any_expansion() {
    let f = Fleet::new();
    // n7 and n8 are alike, and their firmware is below the bundle's floor. n7 ran 2026.11.0
    // before its firmware was (recorded as) downgraded.
    let nodes = [GREEN[0], GREEN[1], GREEN[2], GREEN[3], ("n7", "mi300x-old"), ("n8", "mi300x-old")];
    let good = f.inventory("before.ini", &[("n7", "mi300x")]);
    assert_eq!(f.rollout(&good, "2026.11.0", "evidence-before", &[]).code, 0);
    let before: BTreeMap<String, usize> = nodes.iter().map(|(n, _)| ((*n).to_owned(), f.records(n))).collect();

    let inventory = f.inventory("red.ini", &nodes);
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &[]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("PLDM_BUNDLE"), "the canary's red reason: {}", r.stdout);
    let versions = f.versions(&nodes);
    assert_eq!(versions["n7"], "2026.11.0", "the red canary is back on its old bundle");
    for n in ["n2", "n4", "n8"] {
        assert_eq!(f.records(n), before[n], "{n}, not a canary, was not touched");
    }
    // Evidence for every touched node, and the red reason on the fleet page.
    let evidence = f.dir.path().join("evidence");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    let run_dir = Path::new(report["dir"].as_str().unwrap());
    for n in ["n1", "n3", "n7"] {
        assert!(run_dir.join("nodes").join(n).join("records").is_dir(), "evidence for {n}");
    }
    assert_eq!(report["verdict"], "red");
    // Only this run: n7's records of the earlier run stay out of it.
    let n7 = report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "n7").unwrap();
    assert_eq!((n7["verdict"].as_str(), n7["version"].as_str()), (Some("red"), Some("2026.11.0")), "{report}");
    assert!(n7["restored_s"].is_null(), "refused at its pre-flight, nothing to restore: {report}");
    let n8 = report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "n8").unwrap();
    assert_eq!((n8["state"].as_str(), n8["verdict"].as_str()), (Some("not reached"), Some("untouched")), "{report}");
    assert_eq!(
        report["problems"].as_array().unwrap().len(),
        2,
        "n7's refusal and the stop, nothing of untouched nodes: {report}"
    );
    let n7_records = std::fs::read_dir(run_dir.join("nodes/n7/records")).unwrap().count();
    assert_eq!(n7_records, f.records("n7") - before["n7"], "n7's records of this run only");
    let reasons: Vec<&str> =
        report["problems"].as_array().unwrap().iter().map(|p| p["reason"].as_str().unwrap()).collect();
    assert!(reasons.iter().any(|r| r.contains("PLDM_BUNDLE")), "{reasons:?}");
}

#[test]
fn under_kubernetes_each_node_is_drained_before_its_change_and_only_a_good_one_uncordoned() {
    // kubectl here is a stand-in that writes down what it was asked (no cluster on this machine):
    // the wiring of the playbook's drain and resume items is what is tested.
    let f = Fleet::new();
    let bin = f.dir.path().join("kubectl-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = f.dir.path().join("kubectl.log");
    std::fs::write(bin.join("kubectl"), format!("#!/bin/sh\necho \"$*\" >> {}\n", log.display())).unwrap();
    std::fs::set_permissions(bin.join("kubectl"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let nodes = [("n1", "mi300x"), ("n2", "mi300x")];
    let inventory = f.inventory_with("k8s.ini", &nodes, &["n2"]);
    let vars =
        serde_json::json!({ "airlock_scheduler": "kubernetes", "airlock_run_id": "k8s-1", "airlock_batches": [1] });
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let r = run(f.rollout_command(&inventory, "2026.11.0", "evidence", &["-e", &vars.to_string()]).env("PATH", path));
    assert_ne!(r.code, 0, "n2 is red: {}", r.stdout);
    let asked = std::fs::read_to_string(&log).unwrap();
    let asked: Vec<&str> = asked.lines().map(|l| l.split(" --").next().unwrap()).collect();
    assert_eq!(asked, ["drain n1", "uncordon n1", "drain n2"], "n2, red, stays cordoned: {}", r.stdout);
    let journal = journal_of(&f.dir.path().join("evidence"), "k8s-1");
    let resumed: Vec<&str> =
        journal.iter().filter(|l| l["event"] == "resumed").map(|l| l["node"].as_str().unwrap()).collect();
    assert_eq!(resumed, ["n1"], "the uncordon is journaled as n1's resume");
}

#[test]
fn a_failed_batch_is_rolled_back_and_stops_the_rollout() {
    let f = Fleet::new();
    let inventory = f.inventory("green.ini", &GREEN);
    assert_eq!(f.rollout(&inventory, "2026.11.0", "evidence-first", &[]).code, 0);
    // n2's RVS now fails: its canary (n1, same tuple) passes, and n2 fails in the expansion
    // batch it shares with n4 and n6.
    let inventory = f.inventory_with("n2-fails.ini", &GREEN, &["n2"]);
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", r#"{"airlock_batches": [3]}"#]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    let versions = f.versions(&GREEN);
    assert_eq!(versions["n2"], "2026.11.0", "the failed node was put back by airlock");
    for n in ["n4", "n6"] {
        assert_eq!(versions[n], "2026.11.0", "{n}, in the failed batch, was rolled back");
    }
    for n in ["n1", "n3", "n5"] {
        assert_eq!(versions[n], "2026.11.1", "{n}, a canary, keeps the new bundle (scope batch)");
    }
    let evidence = f.dir.path().join("evidence");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(rolled_back(&report), ["n4", "n6"], "{report}");
    let n2 = report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "n2").unwrap();
    assert!(n2["restored_s"].as_f64().is_some(), "the red node's restore time: {report}");
    assert_eq!(n2["state"], "restored", "{report}");
    assert!(report["tuples"].as_array().unwrap().iter().any(|t| t["rollbacks"]["count"] == 1), "{report}");
    assert_final_state(&f, &report, &GREEN);

    // The rollback to a named bundle is idempotent: n4 is on it already, so nothing runs (a
    // plain rollback would go forward again); a bundle that is not n4's previous is refused.
    let status = |n: &str| run(airlock().args(["status", "--root", s(&f.root(n)), "--json"])).ok().json();
    let before = status("n4");
    let back_to = before["current"]["id"].as_str().unwrap().to_owned();
    let rb = f.module(&inventory, "n4", "rollback", &serde_json::json!({ "to": back_to }), &[]);
    assert!(
        rb.code == 0 && rb.stdout.contains("is current already") && !rb.stdout.contains("CHANGED"),
        "{}",
        rb.stdout
    );
    assert_eq!(status("n4")["current"], before["current"]);
    let rb = f.module(&inventory, "n4", "rollback", &serde_json::json!({ "to": "0000000000000000" }), &[]);
    assert!(rb.code != 0 && rb.stdout.contains("it is not this node's previous"), "{}", rb.stdout);
    assert!(rb.stdout.contains(before["previous"]["id"].as_str().unwrap()), "names the previous: {}", rb.stdout);

    // n2 is mended and the same release rolls out again: the new run is green, whatever red
    // history the nodes' roots and the evidence directory hold; the red run is history.
    let inventory = f.inventory("green-again.ini", &GREEN);
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(report["verdict"], "green", "{report}");
    assert_eq!(report["problems"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["earlier"][0]["verdict"], "red", "{report}");
    assert_final_state(&f, &report, &GREEN);
    // The earlier run can still be judged by its id.
    let earlier = report["earlier"][0]["id"].as_str().unwrap();
    let again = run(airlock().args(["report", "--fleet", s(&evidence), "--run", earlier, "--json"])).ok().json();
    assert_eq!(again["verdict"], "red");
    let page = f.dir.path().join("again.html");
    run(airlock().args(["report", "--fleet", s(&evidence), "--out", s(&page)])).ok();
    let dom = chromium_dom(&page);
    assert!(dom.contains("GREEN") && dom.contains("Earlier runs in this evidence directory"), "{dom}");
}

/// The nodes the report shows as rolled back in its run.
fn rolled_back(report: &serde_json::Value) -> Vec<&str> {
    let mut rolled: Vec<&str> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["rolled_back_s"].as_f64().is_some())
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    rolled.sort_unstable();
    rolled
}

/// Every node of the report shows the version its `status` says now, and its waves fall inside
/// the run's window.
fn assert_final_state(f: &Fleet, report: &serde_json::Value, nodes: &[(&str, &str)]) {
    let versions = f.versions(nodes);
    for n in report["nodes"].as_array().unwrap() {
        let node = n["node"].as_str().unwrap();
        assert_eq!(n["version"].as_str().unwrap_or("-"), versions[node], "{node}: {report}");
    }
    let (started, ended) = (report["run"]["started"].as_str().unwrap(), report["run"]["ended"].as_str().unwrap());
    for w in report["waves"].as_array().unwrap() {
        let (from, to) = (w["from"].as_str().unwrap(), w["to"].as_str().unwrap());
        assert!(started <= from && from <= to && to <= ended, "wave outside the run {started}..{ended}: {w}");
    }
}

#[test]
fn with_rollback_scope_all_an_abort_takes_back_every_node_the_run_changed() {
    let f = Fleet::new();
    let inventory = f.inventory("green.ini", &GREEN);
    assert_eq!(f.rollout(&inventory, "2026.11.0", "evidence-first", &[]).code, 0);
    let inventory = f.inventory_with("n2-fails.ini", &GREEN, &["n2"]);
    let vars = r#"{"airlock_batches": [3], "airlock_rollback_scope": "all"}"#;
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", vars]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    // The canaries changed earlier in this run are rolled back too: the fleet is as it was.
    assert_eq!(f.versions(&GREEN), all("2026.11.0", &GREEN), "{}", r.stdout);
    // The evidence was collected after those rollbacks: every node's final version is its
    // status, the canaries are shown rolled back with their seconds, the failed node red.
    let evidence = f.dir.path().join("evidence");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert_eq!((report["verdict"].as_str(), report["run"]["aborted"].as_bool()), (Some("red"), Some(true)));
    assert_eq!(report["bundle"]["version"], "2026.11.1", "{report}");
    assert_final_state(&f, &report, &GREEN);
    assert_eq!(rolled_back(&report), ["n1", "n3", "n4", "n5", "n6"], "{report}");
    let n2 = report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "n2").unwrap();
    assert_eq!((n2["verdict"].as_str(), n2["version"].as_str()), (Some("red"), Some("2026.11.0")), "{report}");
}

#[test]
fn a_drain_task_file_one_node_names_runs_for_that_node_alone() {
    let f = Fleet::new();
    let nodes = &GREEN[..3];
    let hook = f.dir.path().join("drain-hook.yml");
    let marks = f.dir.path().join("drained");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::write(
        &hook,
        format!(
            "- name: Mark the drain\n  ansible.builtin.copy:\n    dest: \"{}/{{{{ inventory_hostname }}}}\"\n    content: drained\n    mode: \"0644\"\n",
            marks.display()
        ),
    )
    .unwrap();
    // The task file is n2's own host variable: the plan sees it (a step around a change), so
    // the waves are wave.yml's, and only n2 runs it.
    let inventory = f.inventory("hook.ini", nodes);
    let text = std::fs::read_to_string(&inventory).unwrap();
    let text = text.replace("\nn2 ", &format!("\nn2 airlock_drain_tasks='[\"{}\"]' ", hook.display()));
    std::fs::write(&inventory, text).unwrap();
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Drain the node"), "{}", r.stdout);
    let marked: Vec<String> =
        std::fs::read_dir(&marks).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(marked, ["n2"]);
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes));
}

#[test]
fn the_collection_passes_ansible_lint() {
    let dir = tempfile::tempdir().unwrap();
    let collections = collection(dir.path());
    let r = run(Command::new("ansible-lint")
        .current_dir(repo("ansible"))
        .env("ANSIBLE_COLLECTIONS_PATH", &collections)
        .env("ANSIBLE_HOME", dir.path().join("home"))
        .args(["--nocolor", "--offline", "--profile", "production"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // ansible-lint reports a module whose documentation is not YAML without failing
    // (`ansible-doc` then shows nothing of it): that fails here.
    let unparsed = format!("{}{}", r.stdout, r.stderr);
    assert!(!unparsed.contains("Unable to parse documentation"), "{unparsed}");
}

/// Issue 78: the fleet page leads with its counts per tuple and state (each of `tuples` tuples
/// with `green` green nodes), every node still listed below it with its page.
fn counts_lead(page: &Path, tuples: usize, green: usize) {
    let html = std::fs::read_to_string(page).unwrap();
    let counts = html.find("id=\"counts\"").expect("a counts table");
    let listed = html.find("class=\"nodes\"").expect("the nodes");
    assert!(counts < listed, "the counts lead");
    let table = &html[counts..listed];
    assert_eq!(table.matches(&format!("<td class=\"green\">{green}</td>")).count(), tuples, "{table}");
    assert_eq!(html.matches("report.html</a>").count(), tuples * green, "every node still listed");
}

/// The page as Chromium renders it (headless, offline).
fn chromium_dom(page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let r = run(Command::new("chromium").args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        &format!("--user-data-dir={}", profile.path().display()),
        "--dump-dom",
        &format!("file://{}", page.display()),
    ]));
    r.stdout
}

/// `airlock rollout` on stdin, as the collection's `rollout` module calls it.
fn rollout_step(args: &[&str], input: &serde_json::Value) -> Run {
    use std::io::Write as _;
    let mut child = airlock()
        .args(["rollout"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A plan over `nodes` (one tuple, nothing current) for run `run` under `evidence`.
fn planned(evidence: &Path, run: &str, nodes: &[&str]) -> Run {
    let facts: Vec<serde_json::Value> =
        nodes.iter().map(|n| serde_json::json!({"node": n, "probe": {"tuple": "A", "current": null}})).collect();
    let input = serde_json::json!({
        "source": "/srv/b.airlock",
        "bundle": {"id": "0123456789abcdef", "name": "rocm10-demo", "version": "2026.11.0"},
        "batches": [2],
        "nodes": facts,
    });
    rollout_step(&["plan", "--evidence", s(evidence), "--run", run], &input)
}

#[test]
fn the_playbook_stops_at_its_plan_on_a_run_id_that_climbs_out() {
    let f = Fleet::new();
    let inventory = f.inventory("escape.ini", &GREEN[..2]);
    // A run id that would climb out of the evidence directory stops the playbook at its plan,
    // before anything is written on the controller or a node.
    let r = f.rollout(&inventory, "2026.11.0", "escape-evidence", &["-e", "airlock_run_id=../../escaped"]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("is not a run id"), "{}", r.stdout);
    assert!(!f.dir.path().join("escape-evidence").exists() && !f.dir.path().join("escaped").exists());
    assert!(GREEN[..2].iter().all(|(n, _)| f.records(n) == 0));
}

#[test]
fn a_run_id_that_climbs_out_is_refused_before_any_controller_write() {
    let dir = tempfile::tempdir().unwrap();
    let evidence = dir.path().join("evidence");
    for bad in ["../../escaped", "a/b", ".hidden", ""] {
        let r = planned(&evidence, bad, &["n1"]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("is not a run id"), "{bad}: {}", r.stderr);
    }
    assert!(!evidence.exists() && !dir.path().join("escaped").exists(), "nothing written anywhere");
}

#[test]
fn a_node_returning_garbage_spoils_only_its_own_evidence_and_its_page_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let evidence = dir.path().join("evidence");
    let nodes = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let r = planned(&evidence, "r1", &nodes);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let record = serde_json::json!({
        "action": "apply", "outcome": "refused", "at": "2026-12-06T10:00:00Z", "run_id": "r1",
        "reason": "<script>document.title='PWNED'</script>",
    });
    let good = serde_json::json!({
        "current": {"id": "fedcba9876543210", "name": "rocm10-demo", "version": "2026.10.0"},
        "run_records": {"20261206T100000.000Z-apply.json": record.to_string()},
    });
    let many: serde_json::Map<String, serde_json::Value> = (0..20_000)
        .map(|i| (format!("20261206T100000.{:03}Z-apply-{}.json", i % 1000, i % 100), serde_json::json!("{}")))
        .collect();
    let answers = serde_json::json!({"nodes": [
        {"node": "n1", "text": good.to_string()},
        {"node": "n2", "text": serde_json::json!({"run_records": {"a": {"b": 1}}}).to_string()},
        {"node": "n3", "text": serde_json::json!({"run_records": {"": "x"}}).to_string()},
        {"node": "n4", "text": "{\"run_records\": {\"20261206T100000.000Z-apply.json\": \"\u{0}\"}}"},
        {"node": "n5", "text": serde_json::json!({"run_records": many}).to_string()},
        {"node": "n6", "text": {"a": "dict, not text"}},
    ]});
    let r = rollout_step(&["evidence", "--evidence", s(&evidence), "--run", "r1"], &answers);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let refused: Vec<String> = serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(refused, ["n2", "n3", "n4", "n5", "n6"], "{}", r.stdout);
    let run_dir = evidence.join("runs/r1");
    assert!(run_dir.join("nodes/n1/records/20261206T100000.000Z-apply.json").is_file());
    assert!(run_dir.join("nodes/n1/status.json").is_file());
    for n in &nodes[1..] {
        assert!(run_dir.join("nodes").join(n).join("node.json").is_file(), "{n}");
        assert!(!run_dir.join("nodes").join(n).join("records").exists(), "{n}: nothing of its answer kept");
    }
    // The node's page is the controller's: its record's script is text, and nothing runs.
    let page = std::fs::read_to_string(run_dir.join("nodes/n1/report.html")).unwrap();
    assert!(!page.contains("<script"), "{page}");
    let dom = chromium_dom(&run_dir.join("nodes/n1/report.html"));
    assert!(!dom.contains("<title>PWNED") && dom.contains("&lt;script&gt;"), "{dom}");
    // The plan and every journal line are what their schemas say.
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(run_dir.join("plan.json")).unwrap()).unwrap();
    assert_eq!(schema_errors(&validator("rollout-plan.v1.json"), &plan), Vec::<String>::new());
    // The run still ends, and the page accounts for every node: n1's refusal, the others' evidence refused.
    let r = rollout_step(&["end", "--evidence", s(&evidence), "--run", "r1"], &serde_json::json!({}));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines = journal_of(&evidence, "r1");
    assert!(lines.iter().any(|l| l["event"] == "ended") && lines.len() == 7, "{lines:?}");
    for line in &lines {
        assert_eq!(schema_errors(&validator("rollout-journal-line.v1.json"), line), Vec::<String>::new());
    }
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert_eq!(report["verdict"], "red");
    assert!(report["run"]["ended"].is_string(), "{report}");
    let states: Vec<(String, String)> = report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap().to_owned(), n["state"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(states.len(), 6, "{report}");
    assert!(states[1..].iter().all(|(_, s)| s == "evidence refused"), "{states:?}");
    let fleet_page = dir.path().join("fleet.html");
    run(airlock().args(["report", "--fleet", s(&evidence), "--out", s(&fleet_page)])).ok();
    let dom = chromium_dom(&fleet_page);
    assert!(!dom.contains("<title>PWNED") && dom.contains("n6"), "{dom}");
}

/// The run's journal lines as JSON.
fn journal_of(evidence: &Path, run: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(evidence.join("runs").join(run).join("journal.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Each node's state on the run's page, by name.
fn states(report: &serde_json::Value) -> BTreeMap<String, String> {
    report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap().to_owned(), n["state"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one Slurm cluster through a dry run, a run, a re-run and a rollback")]
fn under_slurm_a_re_run_drains_nothing_a_dry_run_changes_nothing_and_scope_all_drains_nodes_in_service_first() {
    let f = Fleet::new();
    let nodes: &[(&str, &str)] = &[("n1", "mi300x"), ("n2", "mi300x"), ("n3", "mi300x-cpx"), ("n4", "mi300x-cpx")];
    let slurm = Slurm::start(&["n1", "n2", "n3", "n4"]);
    let inventory = f.inventory("slurm.ini", nodes);
    let evidence = f.dir.path().join("evidence");
    let capacity = serde_json::json!({ "airlock_capacity": { "demand": 1 } });

    // --check --diff on Slurm with a capacity rule: the plan on stdout, nothing changed.
    let vars = slurm_vars(&slurm, "dry-1", &capacity);
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars, "--check", "--diff"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("n1: canary") && r.stdout.contains("n2: batch 1"), "the plan is printed: {}", r.stdout);
    assert!(nodes.iter().all(|(n, _)| f.records(n) == 0), "a dry run writes no record");
    assert!(!evidence.join("runs/dry-1").exists(), "nor any evidence");
    assert!(!slurm.log().contains("reason set to"), "nor drains a node");

    let vars = slurm_vars(&slurm, "green-1", &capacity);
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes));

    // The same release again while n2 runs a job: nothing is drained, the job runs on, and
    // every node's recap says changed=0.
    let job = slurm.submit("n2", "sleep 120");
    slurm.wait_job(&job, "RUNNING");
    let drains_before = slurm.log().matches("reason set to").count();
    let vars = slurm_vars(&slurm, "green-2", &capacity);
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for (host, counts) in recap(&r.stdout).iter().filter(|(h, _)| *h != "localhost") {
        assert!(counts.contains("changed=0") && counts.contains("failed=0"), "{host}: {counts}");
    }
    assert_eq!(slurm.log().matches("reason set to").count(), drains_before, "a re-run drains nothing");
    assert_eq!(slurm.job(&job)["JobState"], "RUNNING", "the job on a current node runs undisturbed");
    assert_eq!(slurm.state("n2").0, "allocated", "n2 was never drained");
    slurm.cmd("scancel", &[&job]);
    slurm.wait_job(&job, "CANCELLED");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--run", "green-2", "--json"])).ok().json();
    assert_eq!(report["verdict"], "green", "{report}");
    assert!(states(&report).values().all(|s| s == "skipped"), "{report}");

    // 2026.11.1 with n4's RVS failing, scope all: n4 (batch 1 with n2) is red. n2, still
    // drained from its change, is rolled back and resumed; the canaries n1 and n3, back in
    // service, are drained again first (a job on n1 ends before its packages change).
    // The run waits, once n1 is back in Slurm after its canary change (a site resume task), until
    // the test's job runs there: the rollback's drain then has a running job to wait for.
    let inventory = f.inventory_with("slurm-red.ini", nodes, &["n4"]);
    let (back, job_runs) = (f.dir.path().join("n1-back"), f.dir.path().join("n1-job-runs"));
    let hook = f.dir.path().join("wait-for-n1-job.yml");
    std::fs::write(
        &hook,
        format!(
            "- name: n1 is back in service; wait until the test's job runs there\n  \
             when: inventory_hostname == 'n1' and airlock_wave_kind | default('') == 'canary'\n  block:\n    \
             - ansible.builtin.file: {{path: {}, state: touch, mode: '0644'}}\n    \
             - ansible.builtin.wait_for: {{path: {}, timeout: 120}}\n",
            back.display(),
            job_runs.display()
        ),
    )
    .unwrap();
    let vars = slurm_vars(
        &slurm,
        "red-1",
        &serde_json::json!({ "airlock_rollback_scope": "all", "airlock_batches": [2], "airlock_resume_tasks": [hook] }),
    );
    let mut child = f.rollout_command(&inventory, "2026.11.1", "evidence", &["-e", &vars]);
    let log = f.dir.path().join("red-1.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = child.stdout(out.try_clone().unwrap()).stderr(out).spawn().unwrap();
    let start = std::time::Instant::now();
    while !back.exists() {
        assert!(child.try_wait().unwrap().is_none() && start.elapsed().as_secs() < 120, "n1 never resumed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(slurm.state("n1").0, "idle", "n1 is back in service");
    let job = slurm.submit("n1", "sleep 4");
    slurm.wait_job(&job, "RUNNING");
    std::fs::write(&job_runs, "").unwrap();
    let status = child.wait().unwrap();
    let stdout = std::fs::read_to_string(&log).unwrap();
    assert_ne!(status.code(), Some(0), "{stdout}");
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes), "{stdout}");
    for n in ["n1", "n2", "n3"] {
        assert_eq!(slurm.state(n).0, "idle", "{n} is back in service after its green restore");
    }
    let (state, reason) = slurm.state("n4");
    assert!(state == "drained" && reason.starts_with("airlock red rocm10-demo-2026.11.1 run red-1"), "{reason}");
    let rollback_at = std::fs::read_dir(f.root("n1").join("records"))
        .unwrap()
        .map(|e| serde_json::from_slice::<serde_json::Value>(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .find(|r| r["action"] == "rollback" && r["run_id"] == "red-1")
        .expect("n1 rolled back")["at"]
        .clone();
    slurm.wait_job(&job, "COMPLETED");
    assert!(slurm.job(&job)["EndTime"] <= second(&rollback_at), "n1's job ended before its rollback: {stdout}");
    let journal = journal_of(&evidence, "red-1");
    for line in &journal {
        assert_eq!(schema_errors(&validator("rollout-journal-line.v1.json"), line), Vec::<String>::new(), "{line}");
    }
    let drained: Vec<&str> =
        journal.iter().filter(|l| l["event"] == "drained").map(|l| l["node"].as_str().unwrap()).collect();
    assert_eq!(drained.iter().filter(|n| **n == "n1").count(), 2, "n1 drained for its change and its rollback");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(report["verdict"], "red");
    let by_node = states(&report);
    assert_eq!(
        (by_node["n1"].as_str(), by_node["n2"].as_str(), by_node["n3"].as_str(), by_node["n4"].as_str()),
        ("rolled back", "rolled back", "rolled back", "held"),
        "{report}"
    );
}

#[test]
#[allow(clippy::too_many_lines, reason = "two runs from one mirror, each node's fate checked")]
fn from_a_mirror_a_stopped_adoption_keeps_its_evidence_and_a_promotion_mid_run_changes_nothing_the_run_applies() {
    let f = Fleet::new();
    // The baseline the nodes run before airlock, and two releases, on a mirror: 2026.11.0 its
    // current, the baseline and 2026.11.1 candidates.
    let p = f.dir.path().join("project");
    let spec = std::fs::read_to_string(p.join("airlock.toml")).unwrap();
    let version = spec.lines().find(|l| l.starts_with("version")).unwrap().to_owned();
    std::fs::write(p.join("base.toml"), spec.replacen(&version, "version = \"0.0.0-baseline\"", 1)).unwrap();
    let base = f.dir.path().join("base.airlock");
    run(airlock().current_dir(&p).args(["build", "base.toml", "--key", s(&f.keys.private), "--out", s(&base)])).ok();
    let mirror = f.dir.path().join("mirror");
    for (bundle, candidate) in [
        (base.clone(), true),
        (f.dir.path().join("2026.11.0.airlock"), false),
        (f.dir.path().join("2026.11.1.airlock"), true),
    ] {
        let args = ["install", s(&bundle), "--trust", s(&f.keys.public), "--root", s(&mirror), "--role", "mirror"];
        run(airlock().args(args).args(candidate.then_some("--candidate"))).ok();
    }
    let url = format!("file://{}/", mirror.join("public").display());
    let evidence = f.dir.path().join("evidence");

    // The first rollout adopts the baseline by its release on the mirror, then its first
    // canary (n1, whose RVS fails) is red: the run stops, and still every node's adoption,
    // the red record and the run's end are in the evidence.
    let nodes: &[(&str, &str)] = &[("n1", "mi300x"), ("n2", "mi300x"), ("n3", "mi300x-cpx")];
    let inventory = f.inventory_with("adopt.ini", nodes, &["n1"]);
    let vars = serde_json::json!({
        "airlock_source": url, "airlock_adopt": url, "airlock_adopt_release": "0.0.0-baseline",
        "airlock_run_id": "adopt-1",
    });
    // The dry run first, adopting and staging: the plan on stdout, nothing changed anywhere.
    let mut check = vars.clone();
    check["airlock_stage"] = serde_json::json!(true);
    check["airlock_run_id"] = serde_json::json!("adopt-check");
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &check.to_string(), "--check", "--diff"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("n2: batch 1, adopts the baseline first"), "{}", r.stdout);
    assert!(nodes.iter().all(|(n, _)| f.records(n) == 0) && !evidence.exists(), "{}", r.stdout);
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars.to_string()]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert_eq!(f.versions(nodes), all("0.0.0-baseline", nodes), "{}", r.stdout);
    let run_dir = evidence.join("runs/adopt-1");
    for (n, _) in nodes {
        let kept: Vec<serde_json::Value> = std::fs::read_dir(run_dir.join("nodes").join(n).join("records"))
            .unwrap_or_else(|e| panic!("{n}'s evidence: {e}"))
            .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
            .collect();
        assert!(kept.iter().any(|r| r["action"] == "adopt" && r["outcome"] == "activated"), "{n}: {kept:?}");
    }
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert!(report["run"]["ended"].is_string() && report["run"]["aborted"] == true, "{report}");
    let by_node = states(&report);
    assert_eq!(
        (by_node["n1"].as_str(), by_node["n2"].as_str(), by_node["n3"].as_str()),
        ("restored", "not reached", "not reached"),
        "{report}"
    );

    // n1 is mended. A second run follows the mirror's current (2026.11.0), pinned at its start;
    // the mirror promotes 2026.11.1 right after the first canary: every later wave still takes
    // 2026.11.0, the release the canaries qualified.
    let promote = f.dir.path().join("promote.yml");
    std::fs::write(
        &promote,
        format!(
            "- name: The mirror promotes a release mid-run\n  ansible.builtin.command:\n    argv: [{bin}, promote, --root, {root}, 2026.11.1]\n  \
             delegate_to: localhost\n  changed_when: true\n  when: inventory_hostname == 'n1'\n",
            bin = env!("CARGO_BIN_EXE_airlock"),
            root = mirror.display()
        ),
    )
    .unwrap();
    let inventory = f.inventory("mirror.ini", nodes);
    let vars = serde_json::json!({
        "airlock_source": url, "airlock_run_id": "pinned-2", "airlock_batches": [1],
        "airlock_resume_tasks": [promote],
    });
    let r = f.rollout(&inventory, "2026.11.0", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let mirror_status = run(airlock().args(["status", "--root", s(&mirror), "--json"])).ok().json();
    assert_eq!(mirror_status["current"]["version"], "2026.11.1", "the mirror promoted mid-run");
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes), "every wave took the pinned release: {}", r.stdout);
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!((report["verdict"].as_str(), report["bundle"]["version"].as_str()), (Some("green"), Some("2026.11.0")));
}

/// Issue 77, attack 5: an `environment` key of a module run on the controller cannot run a
/// shell command on the node (the values were quoted, the names were not).
#[test]
fn an_environment_name_cannot_inject_a_shell_command() {
    let dir = tempfile::tempdir().unwrap();
    let collections = collection(dir.path());
    let pwned = dir.path().join("PWNED");
    let inventory = dir.path().join("one.ini");
    std::fs::write(&inventory, "n1 ansible_connection=local\n").unwrap();
    let key = format!("X=1; touch {}; Y", pwned.display());
    let args = serde_json::json!({
        "root": dir.path().join("root"),
        "binary": env!("CARGO_BIN_EXE_airlock"),
        "environment": { key: "v" },
    });
    let r = run(Command::new("ansible")
        .env("ANSIBLE_COLLECTIONS_PATH", &collections)
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_LOCAL_TEMP", dir.path().join("ansible-tmp"))
        .env("ANSIBLE_HOME", dir.path().join("ansible-home"))
        .args(["n1", "-i", s(&inventory), "-m", "airlock.site.status", "-a", &args.to_string()])
        .args(["-e", &format!("ansible_python_interpreter={}", python())]));
    assert!(!pwned.exists(), "the environment's name ran a command: {}", r.stdout);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("is not an environment variable name"), "{}", r.stdout);
}

/// Through the playbook: a node whose airlock answers `status --run` with records that are not
/// text (a dict) spoils only its own evidence; the other node's evidence and the run's end are
/// written, and the playbook fails naming the node.
#[test]
fn through_the_playbook_a_node_returning_garbage_spoils_only_its_own_evidence() {
    let f = Fleet::new();
    let wrapper = f.dir.path().join("lying-airlock");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --run ] && {{ echo '{{\"current\": null, \"run_records\": {{\"20261206T100000.000Z-apply.json\": {{\"a\": 1}}}}}}'; exit 0; }}; done\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_airlock")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let nodes: &[(&str, &str)] = &[("n1", "mi300x"), ("n3", "mi300x-cpx")];
    let inventory = f.inventory("lying.ini", nodes);
    let text = std::fs::read_to_string(&inventory).unwrap().replace(
        "n3 ansible_connection=local",
        &format!("n3 airlock_binary={} ansible_connection=local", wrapper.display()),
    );
    std::fs::write(&inventory, text).unwrap();
    // n3's own `airlock_binary` (a host variable) must win: the run's binary goes in as the
    // inventory's group variable, not as an extra variable (which would override it).
    let mut c = f.rollout_command(&inventory, "2026.11.0", "evidence", &["-e", r#"{"airlock_run_id": "lying-1"}"#]);
    let vars_file = f.dir.path().join("evidence.vars.json");
    let mut vars: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&vars_file).unwrap()).unwrap();
    vars.as_object_mut().unwrap().remove("airlock_binary");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let mut text = std::fs::read_to_string(&inventory).unwrap();
    let _ = write!(text, "\n[all:vars]\nairlock_binary={}\n", env!("CARGO_BIN_EXE_airlock"));
    std::fs::write(&inventory, text).unwrap();
    let r = run(&mut c);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("n3: evidence refused"), "{}", r.stdout);
    let run_dir = f.dir.path().join("evidence/runs/lying-1");
    assert!(run_dir.join("nodes/n1/records").is_dir() && run_dir.join("nodes/n1/report.html").is_file());
    assert!(run_dir.join("nodes/n3/node.json").is_file() && !run_dir.join("nodes/n3/records").exists());
    let report = run(airlock().args(["report", "--fleet", s(&f.dir.path().join("evidence")), "--json"])).ok().json();
    assert!(report["run"]["ended"].is_string(), "{report}");
    let by_node = states(&report);
    assert_eq!((by_node["n1"].as_str(), by_node["n3"].as_str()), ("canary", "evidence refused"), "{report}");
}

/// An independent check of an approval: securesystemslib's DSSE verifier with the approvers'
/// public keys (their key ids computed here, as the sha256 of the SPKI DER), and the statement
/// read with the in-toto attestation bindings (the VSA predicate's own fields).
const INDEPENDENT_VERIFIER: &str = r#"
import base64, hashlib, json, sys
from cryptography.hazmat.primitives.serialization import load_pem_public_key, Encoding, PublicFormat
from securesystemslib.signer import SSlibKey
from securesystemslib.dsse import Envelope
from google.protobuf import json_format
from in_toto_attestation.v1.statement import Statement
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
env_json = json.load(open(sys.argv[1]))
threshold = int(sys.argv[2])
keys = []
for pem in sys.argv[3:]:
    pub = load_pem_public_key(open(pem, "rb").read())
    keyid = hashlib.sha256(pub.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)).hexdigest()
    keys.append(SSlibKey.from_crypto(pub, keyid=keyid, scheme="ecdsa-sha2-nistp256"))
env = Envelope.from_dict(env_json)
env.verify(keys, threshold)
pb = json_format.Parse(env.payload.decode(), statement_pb2.Statement())
stmt = Statement.copy_from_pb(pb)
stmt.validate()
predicate = json.loads(env.payload)["predicate"]
# The bindings (0.9.3) declare verifiedLevels one string; the VSA v1 specification an array.
levels = predicate.pop("verifiedLevels")
assert isinstance(levels, list) and all(isinstance(l, str) for l in levels), levels
vsa = json_format.ParseDict(predicate, vsa_pb2.VerificationSummary(), ignore_unknown_fields=True)
assert pb.predicate_type == "https://slsa.dev/verification_summary/v1", pb.predicate_type
assert vsa.verification_result == "PASSED", vsa.verification_result
print(pb.subject[0].digest["sha256"], len(vsa.input_attestations))
"#;

/// Issue 75: the canaries' evidence becomes an approval two of three approvers sign (checked by
/// an independent verifier too); the mirror promotes only on it, signs the promotion, and a node
/// behind a real nginx follows only that signed promotion.
#[test]
#[allow(clippy::too_many_lines, reason = "one decision from the canary's evidence to a node that follows it")]
fn the_canary_evidence_becomes_a_signed_approval_that_gates_promotion_and_nodes_follow_only_signed_promotions() {
    use base64::Engine as _;
    let f = Fleet::new();
    let k = f.dir.path().join("decision-keys");
    let [root, a1, a2, a3, promo] = ["root", "a1", "a2", "a3", "promotion"].map(|n| keygen(&k, n));
    let mirror = f.dir.path().join("mirror");
    airlock_run(&[
        "trust",
        "init",
        "--root",
        s(&mirror),
        "--root-key",
        s(&root.public),
        "--role",
        &format!("build={}:1", s(&f.keys.public)),
        "--role",
        &format!("approvers={},{},{}:2", s(&a1.public), s(&a2.public), s(&a3.public)),
        "--role",
        &format!("promotion={}:1", s(&promo.public)),
        "--expires",
        "1y",
        "--sign",
        s(&root.private),
    ])
    .ok();
    let shown = airlock_run(&["trust", "show", "--root", s(&mirror)]).ok();
    assert!(shown.stdout.contains("decision roles") && shown.stdout.contains("approvers 2 of 3"), "{}", shown.stdout);
    for version in ["2026.11.0", "2026.11.1"] {
        let bundle = f.dir.path().join(format!("{version}.airlock"));
        airlock_run(&["install", s(&bundle), "--root", s(&mirror), "--role", "mirror", "--candidate"]).ok();
    }
    let promote = |args: &[&str]| airlock_run(&[&["promote", "--root", s(&mirror)][..], args].concat());
    // The site's first release: no run qualified it; promoted as the recorded exception.
    let r = promote(&["2026.11.0", "--sign", s(&promo.private)]).code(3);
    assert!(r.stderr.contains("needs an approval"), "{}", r.stderr);
    promote(&["2026.11.0", "--without-approval", "--reason", "the site's first release", "--sign", s(&promo.private)])
        .ok();
    let url = format!("file://{}/", mirror.join("public").display());

    // The canaries (one per tuple) take the candidate by its id; the batch waits for approval.
    let nodes: &[(&str, &str)] = &[("n1", "mi300x"), ("n3", "mi300x-cpx"), ("n2", "mi300x")];
    let inventory = f.inventory("approval.ini", nodes);
    let vars = serde_json::json!({
        "airlock_source": url, "airlock_release": "2026.11.1", "airlock_run_id": "canary-1",
        "airlock_approval_required": true,
    });
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "a pause for approval is not a failure: {}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("awaiting approval"), "{}", r.stdout);
    let versions = f.versions(nodes);
    assert_eq!(
        (versions["n1"].as_str(), versions["n3"].as_str(), versions["n2"].as_str()),
        ("2026.11.1", "2026.11.1", "-")
    );
    let evidence = f.dir.path().join("evidence");
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--json"])).ok().json();
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert_eq!(
        (report["approval"]["awaiting"].as_bool(), report["run"]["aborted"].as_bool()),
        (Some(true), Some(false))
    );

    // One approver signs: below the role's threshold, refused by verify-approval and promote.
    let approve = |args: &[&str]| airlock_run(&[&["approve", "--fleet", s(&evidence)][..], args].concat());
    let first = approve(&["--run", "canary-1", "--key", s(&a1.private), "--approver", "alice", "--json"]).ok().json();
    let approval = PathBuf::from(first["approval"].as_str().unwrap());
    assert_eq!((first["canaries"].as_u64(), first["bundle"]["version"].as_str()), (Some(2), Some("2026.11.1")));
    let verify =
        |extra: &[&str]| airlock_run(&[&["verify-approval", s(&approval), "--root", s(&mirror)][..], extra].concat());
    let r = verify(&[]).code(3);
    assert!(r.stderr.contains("signed by 1 of the 2 approver(s)"), "{}", r.stderr);
    let r = promote(&["2026.11.1", "--approval", s(&approval), "--sign", s(&promo.private)]).code(3);
    assert!(r.stderr.contains("1 of the 2"), "{}", r.stderr);
    // A second approver co-signs the same statement: two of three.
    approve(&["--add-to", s(&approval), "--key", s(&a2.private)]).ok();
    let ok = verify(&["--evidence", s(&evidence), "--json"]).ok().json();
    assert_eq!((ok["signers"].as_array().unwrap().len(), ok["records_checked"].as_u64()), (2, Some(2)), "{ok}");

    // The independent verifier agrees, and refuses the statement edited after signing.
    let independent = |file: &Path| {
        run(Command::new(python()).args([
            "-c",
            INDEPENDENT_VERIFIER,
            s(file),
            "2",
            s(&a1.public),
            s(&a2.public),
            s(&a3.public),
        ]))
    };
    let out = independent(&approval).ok();
    assert!(out.stdout.starts_with(first["bundle"]["manifest_sha256"].as_str().unwrap()), "{}", out.stdout);
    let mut envelope: serde_json::Value = serde_json::from_slice(&std::fs::read(&approval).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload = String::from_utf8(b64.decode(envelope["payload"].as_str().unwrap()).unwrap()).unwrap();
    envelope["payload"] = b64.encode(payload.replacen("\"green\"", "\"amber\"", 1)).into();
    let edited = f.dir.path().join("edited.dsse.json");
    std::fs::write(&edited, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let r = independent(&edited);
    assert_ne!(r.code, 0, "securesystemslib refuses the edited statement: {}", r.stdout);
    assert!(r.stderr.contains("VerificationError") || r.stderr.contains("Verification"), "{}", r.stderr);
    airlock_run(&["verify-approval", s(&edited), "--root", s(&mirror)]).code(3);
    // A record changed after the approval is named.
    let record = evidence.join(first_input(&approval));
    let kept = std::fs::read(&record).unwrap();
    std::fs::write(&record, [kept.as_slice(), b" "].concat()).unwrap();
    let r = verify(&["--evidence", s(&evidence)]).code(3);
    assert!(r.stderr.contains("changed after") && r.stderr.contains("records/"), "{}", r.stderr);
    std::fs::write(&record, &kept).unwrap();

    // Promotion: refused without an approval, with one for another bundle, and without the
    // promotion key; taken on the approval, which the mirror keeps.
    promote(&["2026.11.1", "--sign", s(&promo.private)]).code(3);
    let r =
        promote(&["2026.11.0", "--approval", s(&approval), "--sign", s(&promo.private), "--allow-downgrade"]).code(3);
    assert!(r.stderr.contains("approves rocm10-demo 2026.11.1"), "{}", r.stderr);
    promote(&["2026.11.1", "--approval", s(&approval)]).code(2);
    // The second run expands on the approval: checked when planned, the mirror promoted, the
    // batch changed (the canaries, on the bundle already, skipped).
    let vars = serde_json::json!({
        "airlock_source": url, "airlock_release": "2026.11.1", "airlock_run_id": "expand-2",
        "airlock_approval_required": true, "airlock_approval": approval, "airlock_approval_root": mirror,
        "airlock_promote_root": mirror, "airlock_promotion_key": promo.private,
    });
    let r = f.rollout(&inventory, "2026.11.1", "evidence", &["-e", &vars.to_string()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(f.versions(nodes), all("2026.11.1", nodes));
    let report = run(airlock().args(["report", "--fleet", s(&evidence), "--run", "expand-2", "--json"])).ok().json();
    assert_eq!(schema_errors(&validator("fleet-report.v1.json"), &report), Vec::<String>::new());
    assert_eq!(report["approval"]["expanded_on"]["run"], "canary-1", "{report}");
    let last = std::fs::read_dir(mirror.join("records")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(last).unwrap()).unwrap();
    assert_eq!(
        (record["action"].as_str(), record["outcome"].as_str()),
        (Some("promote"), Some("activated")),
        "{record}"
    );
    let done = serde_json::json!({"id": record["bundle"]["id"]});
    assert_eq!(schema_errors(&validator("record.v1.json"), &record), Vec::<String>::new());
    assert_eq!(record["decision"]["run"], "canary-1", "{record}");
    assert_eq!(record["decision"]["approvers"].as_array().unwrap().len(), 2, "{record}");
    assert_eq!(record["decision"]["promotion"], 2, "{record}");
    let id = done["id"].as_str().unwrap();
    assert_eq!(
        std::fs::read(mirror.join("approvals").join(format!("{id}.dsse.json"))).unwrap(),
        std::fs::read(&approval).unwrap()
    );
    airlock_run(&["check", "--root", s(&mirror)]).ok();
    // The mirror's approval pack shows each decision: the exception red, the approval by
    // whom on which run, and that the first promotion was replaced.
    let page = f.dir.path().join("mirror-pack.html");
    let pack = airlock_run(&["report", "--root", s(&mirror), "--out", s(&page), "--json"]).ok().json();
    let decisions = pack["site"]["decisions"].as_array().expect("decisions in the pack");
    assert_eq!(decisions.len(), 2, "{pack}");
    assert_eq!(decisions[0]["decision"]["without_approval"], "the site's first release", "{pack}");
    assert!(decisions[0]["replaced_by"].as_str().is_some_and(|r| r.starts_with("promote")), "{pack}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("WITHOUT APPROVAL") && html.contains("approved on run canary-1 by 2 approver(s)"), "{html}");

    // A revoked approver no longer counts; a third approver's signature brings it back.
    airlock_run(&["trust", "revoke", "--root", s(&mirror), "--key", s(&a2.public), "--sign", s(&root.private)]).ok();
    verify(&[]).code(3);
    approve(&["--add-to", s(&approval), "--key", s(&a3.private)]).ok();
    verify(&[]).ok();

    // A node behind nginx follows only the signed promotion.
    let public = mirror.join("public");
    let server = nginx::Nginx::serve(&public);
    let web = format!("{}/", server.url);
    let node = |name: &str, env: &[(&str, &str)]| {
        let root = f.dir.path().join("fresh").join(name);
        if !root.join("trust").exists() {
            std::fs::create_dir_all(root.join("trust")).unwrap();
            for file in ["1.root.json", "targets.json"] {
                std::fs::copy(mirror.join("trust").join(file), root.join("trust").join(file)).unwrap();
            }
        }
        let mut c = airlock();
        c.args(["apply", &web, "--root", s(&root), "--download-only", "--json"]).envs(env.iter().copied());
        (run(&mut c), root)
    };
    let (took, _) = node("a", &[]);
    let took = took.ok().json();
    assert_eq!(took["version"], "2026.11.1", "{took}");
    let applied: serde_json::Value =
        serde_json::from_slice(&std::fs::read(took["record"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(
        (applied["decision"]["promotion"].as_u64(), applied["decision"]["run"].as_str()),
        (Some(2), Some("canary-1"))
    );
    assert_eq!(schema_errors(&validator("record.v1.json"), &applied), Vec::<String>::new());
    // `current` swapped to the release the promotion does not name: refused, nothing fetched.
    let current = public.join("current");
    let promoted_target = std::fs::read_link(&current).unwrap();
    let old_id = record["previous"].as_str().unwrap().trim_start_matches("bundles/").to_owned();
    std::os::unix::fs::symlink(format!("../bundles/{old_id}"), public.join(".swap")).unwrap();
    std::fs::rename(public.join(".swap"), &current).unwrap();
    let (r, root_b) = node("b", &[]);
    let r = r.code(3);
    assert!(
        r.stderr.contains("signed promotion (number 2)") && r.stderr.contains("nothing downloaded"),
        "{}",
        r.stderr
    );
    assert!(!root_b.join("downloads").exists() || std::fs::read_dir(root_b.join("downloads")).unwrap().count() == 0);
    std::os::unix::fs::symlink(&promoted_target, public.join(".swap")).unwrap();
    std::fs::rename(public.join(".swap"), &current).unwrap();
    // An older promotion replayed after a newer one this node took.
    let number2 = std::fs::read(public.join("promotion.json")).unwrap();
    let renewed = promote(&["--renew", "--sign", s(&promo.private), "--json"]).ok().json();
    assert_eq!(renewed["number"], 3, "{renewed}");
    node("a", &[]).0.ok();
    std::fs::write(public.join("promotion.json"), &number2).unwrap();
    let r = node("a", &[]).0.code(3);
    assert!(r.stderr.contains("number 2, below number 3"), "{}", r.stderr);
    promote(&["--renew", "--sign", s(&promo.private)]).ok();
    // An expired promotion (the node's clock 8 days on; it holds 7).
    let r = node("c", &[("AIRLOCK_TEST_CLOCK_AHEAD", "691200")]).0.code(3);
    assert!(r.stderr.contains("expired at"), "{}", r.stderr);
    // Signed by a key that is not the promotion role's: refused.
    let r = promote(&["--renew", "--sign", s(&a1.private)]).code(2);
    assert!(r.stderr.contains("not a key of the site's `promotion` role"), "{}", r.stderr);
}

/// The first record an approval names (its path under the evidence directory).
fn first_input(approval: &Path) -> String {
    use base64::Engine as _;
    let envelope: serde_json::Value = serde_json::from_slice(&std::fs::read(approval).unwrap()).unwrap();
    let payload = base64::engine::general_purpose::STANDARD.decode(envelope["payload"].as_str().unwrap()).unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    statement["predicate"]["inputAttestations"][0]["uri"].as_str().unwrap().to_owned()
}

/// Issue 78: relays in the inventory (group `airlock_relays`) take the run's release tier by
/// tier (a rack relay after the hall relay it reads, whatever the inventory's order) before any
/// node reads it; each node reads its rack's relay (`airlock_mirror`) and applies there exactly
/// the bundle the run pinned at the site mirror. Relays are neither probed nor planned.
#[test]
fn relays_take_the_release_tier_by_tier_before_the_nodes_that_read_them() {
    let f = Fleet::new();
    let mirror = f.dir.path().join("mirror");
    let bundle = f.dir.path().join("2026.11.0.airlock");
    let install = ["install", s(&bundle), "--trust", s(&f.keys.public), "--root", s(&mirror), "--role", "mirror"];
    let id = run(airlock().args(install).arg("--json")).ok().json()["id"].as_str().unwrap().to_owned();
    let url = |root: &Path| format!("file://{}/", root.join("public").display());
    let (hall, rack) = (f.dir.path().join("hall"), f.dir.path().join("rack"));
    let nodes: &[(&str, &str)] = &[("n1", "mi300x"), ("n2", "mi300x-cpx")];
    let inventory = f.inventory("relays.ini", nodes);
    let mut text: String = std::fs::read_to_string(&inventory)
        .unwrap()
        .lines()
        .map(|l| if l.starts_with('n') { format!("{l} airlock_mirror={}\n", url(&rack)) } else { format!("{l}\n") })
        .collect();
    let _ = write!(
        text,
        "[airlock_relays]\nrack ansible_connection=local airlock_relay_root={} airlock_relay_tier=2 \
         airlock_relay_upstream={}\nhall ansible_connection=local airlock_relay_root={}\n",
        rack.display(),
        url(&hall),
        hall.display()
    );
    std::fs::write(&inventory, text).unwrap();
    let vars = serde_json::json!({ "airlock_source": url(&mirror), "airlock_run_id": "relayed-1" });
    // Every node's evidence in a part of its own (a 1,024-node run passed airlock's 64 MiB bound
    // on one input): each part checked and written, the answers joined.
    let mut c = f.rollout_command(&inventory, "2026.11.0", "evidence", &["-e", &vars.to_string()]);
    let r = run(c.env("AIRLOCK_EVIDENCE_PART_BYTES", "1"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for (n, _) in nodes {
        let kept = f.dir.path().join("evidence/runs/relayed-1/nodes").join(n).join("status.json");
        assert!(kept.is_file(), "{n}'s evidence written in its own part");
    }
    assert_eq!(f.versions(nodes), all("2026.11.0", nodes), "{}", r.stdout);
    for (relay, upstream) in [(&hall, url(&mirror)), (&rack, url(&hall))] {
        let status = run(airlock().args(["status", "--root", s(relay), "--json"])).ok().json();
        let retained: Vec<&str> =
            status["retained"].as_array().unwrap().iter().filter_map(|b| b["id"].as_str()).collect();
        assert!(retained.contains(&id.as_str()), "{}: {status}", relay.display());
        let record = newest_record(relay);
        assert_eq!(
            (record["role"].as_str(), record["bundle"]["file"].as_str()),
            (Some("relay"), Some(upstream.as_str()))
        );
    }
    for (n, _) in nodes {
        let record = newest_record(&f.root(n));
        let (read, took) = (record["bundle"]["file"].as_str().unwrap_or_default(), &record["bundle"]["id"]);
        assert_eq!(took, id.as_str(), "{n}");
        assert_eq!(read, format!("{} --release {id}", url(&rack)), "{n} read its rack's relay for the pinned release");
    }
}

/// The newest record under `root/records/`.
fn newest_record(root: &Path) -> serde_json::Value {
    let last = std::fs::read_dir(root.join("records")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    serde_json::from_slice(&std::fs::read(last).unwrap()).unwrap()
}
