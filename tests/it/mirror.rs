//! A mirror at a site's scale, served by a real nginx: only its public tree is served; a
//! candidate release is served by version and id while the qualified one stays current until
//! it is promoted; nodes stage releases ahead of their window (`--download-only`), fetch only
//! the package files they do not hold, resume a cut transfer with `Range`, and give up a mirror
//! slower than the rate floor. Nothing here changes this host's packages (the node tests in a
//! Debian system apply them: `tests/it/node.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::apt::signed_repo;
use crate::common::nginx::Nginx;
use crate::common::*;

/// Two releases of a bundle from the signed test archive: 1.0.0 with hello-airlock 2.10-3,
/// 2.0.0 with 2.11-1; both carry airlock-docs 1.0, unchanged.
struct Releases {
    t: tempfile::TempDir,
    keys: Keys,
    v1: PathBuf,
    v2: PathBuf,
    mirror: PathBuf,
    _repo: apt::Repo,
}

fn releases() -> Releases {
    let repo = signed_repo();
    let t = tempfile::tempdir().unwrap();
    let keys = keygen(&t.path().join("keys"), "build");
    let build = |version: &str, hello: &str| {
        let dir = t.path().join(format!("p-{version}"));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = format!(
            "[bundle]\nname = \"stack\"\nversion = \"{version}\"\n\n[[deb]]\nrepo = \"{}\"\nsuite = \"stable\"\n\
             components = [\"main\"]\narch = \"amd64\"\npackages = [\"hello-airlock={hello}\", \"airlock-docs\"]\n\
             keyring = \"{}\"\n",
            repo.server.url,
            repo.dir.path().join("keyring.gpg").display()
        );
        std::fs::write(dir.join("airlock.toml"), spec).unwrap();
        let out = t.path().join(format!("stack-{version}.airlock"));
        airlock_in(t.path(), &["lock", s(&dir.join("airlock.toml"))]).ok();
        let key = s(&keys.private);
        airlock_in(t.path(), &["build", s(&dir.join("airlock.toml")), "--key", key, "--out", s(&out)]).ok();
        out
    };
    let (v1, v2) = (build("1.0.0", "2.10-3"), build("2.0.0", "2.11-1"));
    let mirror = t.path().join("mirror");
    Releases { keys, v1, v2, mirror, t, _repo: repo }
}

impl Releases {
    fn install(&self, bundle: &Path, extra: &[&str]) -> Run {
        let base = ["install", s(bundle), "--trust", s(&self.keys.public), "--root", s(&self.mirror)];
        run(airlock().args(base).args(["--role", "mirror", "--json"]).args(extra))
    }

    /// `airlock apply URL ARGS --root NODE` as a node would run it (on this host: only what
    /// changes no package, `--download-only` and `--dry-run`).
    fn node(&self, url: &str, node: &str, args: &[&str]) -> Run {
        let root = self.t.path().join(node);
        let base = ["apply", url, "--trust", s(&self.keys.public), "--root", s(&root), "--json"];
        run(airlock().args(base).args(args))
    }
}

/// Every name directly under `dir`.
fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// The package files requested (`.deb`), in order.
fn debs(server: &Nginx) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| Path::new(&r.uri).extension().is_some_and(|x| x == "deb"))
        .map(|r| r.uri)
        .collect()
}

/// Every file under `dir` with its bytes, links as their targets: a tree compared before and
/// after.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        let bytes = if e.path_is_symlink() {
            std::fs::read_link(e.path()).unwrap().into_os_string().into_encoded_bytes()
        } else if e.file_type().is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.push((e.path().strip_prefix(dir).unwrap().to_owned(), bytes));
    }
    out
}

#[test]
#[allow(clippy::too_many_lines, reason = "one mirror's public tree, its nodes and its promotion, checked in turn")]
fn a_mirror_serves_only_its_public_tree_and_its_candidate_waits_for_promotion() {
    let r = releases();
    let one = r.install(&r.v1, &[]).ok().json();
    let two = r.install(&r.v2, &["--candidate"]).ok().json();
    assert_eq!(two["candidate"], true, "{two}");
    let (id1, id2) = (one["id"].as_str().unwrap().to_owned(), two["id"].as_str().unwrap().to_owned());
    // The public tree: the qualified release as current, every retained one by version and id.
    let public = r.mirror.join("public");
    assert_eq!(
        names(&public),
        BTreeSet::from(["current".to_owned(), "releases".to_owned(), "releases.json".to_owned()])
    );
    assert_eq!(
        names(&public.join("releases")),
        BTreeSet::from(["1.0.0".into(), "2.0.0".into(), id1.clone(), id2.clone()])
    );
    assert_eq!(std::fs::read_link(public.join("current")).unwrap(), Path::new(&format!("../bundles/{id1}")));
    let status = airlock_run(&["status", "--root", s(&r.mirror), "--json"]).ok().json();
    assert_eq!(status["current"]["version"], "1.0.0", "{status}");
    // Issue 76: a mirror's status lists its candidates.
    assert_eq!(status["candidates"][0]["version"], "2.0.0", "{status}");
    let text = airlock_run(&["status", "--root", s(&r.mirror)]).ok().stdout;
    assert!(text.contains("candidates: stack 2.0.0"), "{text}");
    let last = std::fs::read_dir(r.mirror.join("records")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(last).unwrap()).unwrap();
    assert_eq!(record["outcome"], "staged", "{record}");

    // nginx serving public/: the releases, and nothing of the mirror's own.
    let server = Nginx::serve(&public);
    assert_eq!(server.status_of("/current/airlock/manifest.json"), 200);
    assert_eq!(server.status_of("/releases/2.0.0/airlock/manifest.json"), 200);
    assert_eq!(server.status_of(&format!("/releases/{id1}/airlock/manifest.json")), 200);
    for private in ["/state.json", "/records/", "/staging/", "/.lock", "/downloads/", "/trust/", "/../state.json"] {
        let status = server.status_of(private);
        assert!(status == 404 || status == 400, "{private} is answered {status}");
    }

    // A node pinned to the candidate takes it; one that follows current takes the qualified.
    let url = format!("{}/", server.url);
    let pinned = r.node(&url, "pinned", &["--release", "2.0.0", "--download-only"]).ok().json();
    assert_eq!(pinned["version"], "2.0.0", "{pinned}");
    let by_id = r.node(&url, "by-id", &["--release", &id2, "--download-only"]).ok().json();
    assert_eq!(by_id["id"], id2.as_str());
    let follows = r.node(&url, "follows", &["--download-only"]).ok().json();
    assert_eq!(follows["version"], "1.0.0");
    // Issue 76: a node asks only for the co-signatures the mirror's index lists (here none: it
    // asked for one per trusted key, each answered 404).
    let missing: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|q| q.status == 404 && Path::new(&q.uri).extension().is_some_and(|x| x == "sig"))
        .map(|q| q.uri)
        .collect();
    assert!(missing.is_empty(), "co-signatures asked for that the mirror does not hold: {missing:?}");
    // A mirror that serves another release where one is asked for is refused (exit 3).
    std::fs::remove_file(public.join("releases/2.0.0")).unwrap();
    std::os::unix::fs::symlink(format!("../../bundles/{id1}"), public.join("releases/2.0.0")).unwrap();
    let lied = r.node(&url, "lied", &["--release", "2.0.0", "--download-only"]).code(3);
    assert!(
        lied.stderr.contains("is release 1.0.0") && lied.stderr.contains("not the 2.0.0 asked for"),
        "{}",
        lied.stderr
    );
    // Issue 76: a release the mirror does not serve is a usage error listing what it serves.
    let unknown = r.node(&url, "unknown", &["--release", "9.9.9", "--download-only"]).code(2);
    assert!(
        unknown.stderr.contains("serves no release `9.9.9`")
            && unknown.stderr.contains("1.0.0 (")
            && unknown.stderr.contains("2.0.0 ("),
        "{}",
        unknown.stderr
    );
    // … and a node's status shows its last refused attempt.
    let lied_status = airlock_run(&["status", "--root", s(&r.t.path().join("lied"))]).ok();
    assert!(
        lied_status.stdout.contains("last attempt: apply") && lied_status.stdout.contains("refused"),
        "{}",
        lied_status.stdout
    );
    let r2 = r.node(&url, "bad-name", &["--release", "../state.json"]);
    assert_eq!(r2.code, 2, "{}", r2.stderr);

    // Promotion: verified again, recorded; current and the public tree follow; going back down
    // is a downgrade, refused without --allow-downgrade.
    let promoted = airlock_run(&["promote", "--root", s(&r.mirror), "2.0.0", "--json"]).ok().json();
    assert_eq!(promoted["version"], "2.0.0", "{promoted}");
    assert_eq!(std::fs::read_link(public.join("current")).unwrap(), Path::new(&format!("../bundles/{id2}")));
    assert_eq!(
        std::fs::read_link(public.join("releases/2.0.0")).unwrap(),
        Path::new(&format!("../../bundles/{id2}")),
        "the public tree is made again from the root"
    );
    let last = std::fs::read_dir(r.mirror.join("records")).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(last).unwrap()).unwrap();
    assert_eq!((record["action"].as_str(), record["outcome"].as_str()), (Some("promote"), Some("activated")));
    // Issue 76: promoting the current release again says so and changes nothing (it verified
    // again and wrote a second record).
    let records = std::fs::read_dir(r.mirror.join("records")).unwrap().count();
    let again = airlock_run(&["promote", "--root", s(&r.mirror), "2.0.0"]).ok();
    assert!(again.stdout.contains("is the mirror's current already: nothing changed"), "{}", again.stdout);
    assert_eq!(std::fs::read_dir(r.mirror.join("records")).unwrap().count(), records, "no record written");
    let down = airlock_run(&["promote", "--root", s(&r.mirror), "1.0.0"]).code(3);
    assert!(
        down.stderr.contains("refusing to promote stack 1.0.0") && down.stderr.contains("--allow-downgrade"),
        "issue 76: a promotion says it is one (it said \"refusing to install\"): {}",
        down.stderr
    );
    airlock_run(&["promote", "--root", s(&r.mirror), "1.0.0", "--allow-downgrade"]).ok();
    let missing = airlock_run(&["promote", "--root", s(&r.mirror), "9.9.9"]).code(2);
    assert!(missing.stderr.contains("retains no release `9.9.9`"), "{}", missing.stderr);
    airlock_run(&["check", "--root", s(&r.mirror)]).ok();
}

#[test]
fn nodes_stage_ahead_fetch_only_what_changed_resume_cut_transfers_and_give_up_slow_mirrors() {
    let r = releases();
    r.install(&r.v1, &[]).ok();
    let public = r.mirror.join("public");
    let server = Nginx::serve(&public);
    let url = format!("{}/", server.url);
    let package_files = |v: &serde_json::Value| v["transfer"]["fetched"]["files"].as_u64().unwrap();

    // Twelve nodes stage the release at once: each fetches every package file once.
    let nodes: Vec<String> = (0..12).map(|n| format!("node-{n}")).collect();
    let staged: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = nodes.iter().map(|n| scope.spawn(|| r.node(&url, n, &["--download-only"]))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (n, run) in nodes.iter().zip(staged) {
        let v = run.ok().json();
        assert!(v["staged"].as_str().unwrap().contains("downloads"), "{n}: {v}");
        assert_eq!(v["transfer"]["reused"]["files"], 0, "{n}: {v}");
        let root = r.t.path().join(n);
        assert!(!root.join("current").exists(), "{n}: staging activates nothing");
    }
    let requested = debs(&server);
    assert_eq!(requested.len(), 2 * 12, "two package files, once per node: {requested:?}");

    // The release on one of them again: nothing more is fetched (its staged copy is taken).
    server.clear();
    let again = r.node(&url, "node-0", &["--download-only"]).ok().json();
    assert_eq!((package_files(&again), again["transfer"]["reused"]["files"].as_u64()), (0, Some(3)), "{again}");
    assert_eq!(debs(&server), Vec::<String>::new());

    // Release 2 changes one package: a node that holds release 1 fetches exactly that one.
    r.install(&r.v2, &["--candidate"]).ok();
    server.clear();
    let update = r.node(&url, "node-1", &["--release", "2.0.0", "--download-only"]).ok().json();
    let fetched = debs(&server);
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert!(fetched[0].contains("hello-airlock_2.11-1"), "{fetched:?}");
    assert_eq!(update["transfer"]["reused"]["files"], 1, "airlock-docs is taken from what the node holds: {update}");
    let changed = std::fs::metadata(
        walkdir::WalkDir::new(r.mirror.join("bundles"))
            .into_iter()
            .map(|e| e.unwrap().into_path())
            .find(|p| p.to_string_lossy().ends_with("hello-airlock_2.11-1_amd64.deb"))
            .unwrap(),
    )
    .unwrap()
    .len();
    let bytes_sent: u64 = server.requests().iter().map(|q| q.bytes).sum();
    let index_and_head = bytes_sent - changed;
    assert!(
        index_and_head < 16 << 10,
        "beyond the changed package, only the manifest, signatures and index: {bytes_sent}"
    );

    // A dry run fetches no package and leaves the node's root as it was.
    let before = tree(&r.t.path().join("node-2"));
    server.clear();
    let dry = r.node(&url, "node-2", &["--release", "2.0.0", "--dry-run"]).ok().json();
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert!(dry["packages"]["installed"].as_array().is_some_and(|a| !a.is_empty()), "{dry}");
    assert_eq!(debs(&server), Vec::<String>::new(), "a dry run fetches no package");
    assert_eq!(tree(&r.t.path().join("node-2")), before, "a dry run changes nothing under the root");

    // A transfer cut half-way resumes from the byte it reached (nginx answers the range).
    let proxy = http::HttpServer::spawn(&public, |port| {
        vec![
            helper("fault_proxy.py"),
            port.to_string(),
            server.url.clone(),
            "--truncate".into(),
            "hello-airlock".into(),
        ]
    });
    server.clear();
    let resumed = r.node(&format!("{}/", proxy.url), "fresh", &["--release", "2.0.0", "--download-only"]).ok().json();
    assert_eq!(package_files(&resumed), 3, "two packages and their index: {resumed}");
    let ranged: Vec<_> = server.requests().into_iter().filter(|q| q.uri.contains("hello-airlock")).collect();
    assert!(
        ranged.iter().any(|q| q.status == 206 && q.range.starts_with("bytes=") && q.range != "bytes=0-"),
        "the second request asks for the rest: {ranged:?}"
    );
    airlock_run(&["check", "--root", s(&r.mirror)]).ok();
}

/// Issue 77: a mirror that answers a resumed request with a 206, no Content-Range and the
/// whole body was taken as starting at the byte asked for (and the overrun then named a
/// made-up sha256, the empty string's); one that sends past a member's size was reported with
/// that same invented digest. Both failed this way on the old code.
#[test]
fn a_resume_without_a_content_range_and_a_member_past_its_size_are_refused_by_name() {
    let r = releases();
    r.install(&r.v1, &[]).ok();
    r.install(&r.v2, &["--candidate"]).ok();
    let public = r.mirror.join("public");
    let server = Nginx::serve(&public);
    // A mirror that answers the resumed request with a 206, no Content-Range and the
    // whole body is refused for it (it was taken as starting at the byte asked for, and the
    // overrun then named a made-up sha256); one that sends past a member's size is refused
    // naming the size, never an invented digest.
    let proxy = |extra: &[&str]| {
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        http::HttpServer::spawn(&public, |port| {
            [vec![helper("fault_proxy.py"), port.to_string(), server.url.clone()], extra].concat()
        })
    };
    let no_range = proxy(&["--truncate", "hello-airlock", "--ignore-range", "--fake-206"]);
    let refused = r.node(
        &format!("{}/", no_range.url),
        "fresh-206",
        &["--release", "2.0.0", "--download-only", "--retries", "1"],
    );
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("206 without a Content-Range"), "{}", refused.stderr);
    let endless = proxy(&["--endless", "hello-airlock"]);
    let over =
        r.node(&format!("{}/", endless.url), "fresh-endless", &["--release", "2.0.0", "--download-only"]).code(3);
    assert!(over.stderr.contains("more than") && !over.stderr.contains("e3b0c442"), "{}", over.stderr);
}

#[test]
fn a_mirror_that_sends_a_package_a_byte_a_second_is_given_up_at_the_floor_tries_included() {
    let r = releases();
    let id = r.install(&r.v1, &[]).ok().json()["id"].as_str().unwrap().to_owned();
    let public = r.mirror.join("public");
    // A mirror that sends a package a byte a second is given up at the floor, tries included
    // (a node reads a member by the release's id).
    let deb = public.join("current").canonicalize().unwrap();
    let rel = walkdir::WalkDir::new(&deb)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .unwrap();
    let slow = format!("/releases/{id}/{}", rel.strip_prefix(&deb).unwrap().display());
    let trickle =
        http::HttpServer::spawn(&public, |port| vec![helper("trickle_http.py"), port.to_string(), slow.clone()]);
    let started = std::time::Instant::now();
    let mut c = std::process::Command::new("timeout");
    let root = r.t.path().join("slow");
    c.args(["90", env!("CARGO_BIN_EXE_airlock"), "apply", &format!("{}/", trickle.url), "--download-only"])
        .args(["--trust", s(&r.keys.public), "--root", s(&root)])
        .args(["--min-rate", "1K", "--min-rate-window", "2", "--retries", "2"]);
    let given_up = run(&mut c);
    assert_ne!(given_up.code, 124, "the apply waited on a byte a second");
    assert_eq!(given_up.code, 1, "{}", given_up.stderr);
    assert!(given_up.stderr.contains("below the floor of 1024 B/s"), "{}", given_up.stderr);
    assert!(given_up.stderr.contains("after 3 tries"), "{}", given_up.stderr);
    assert!(started.elapsed().as_secs() < 60, "3 tries of a 2 s window and their waits: {:?}", started.elapsed());
}

/// Issue 76: the mirror's index lists each release's co-signatures; a node whose policy needs
/// one fetches exactly those it lists, and asks for no co-signature the mirror does not hold.
#[test]
fn a_node_fetches_the_co_signatures_the_mirrors_index_lists_and_no_other() {
    let r = releases();
    let sec = keygen(&r.t.path().join("keys"), "sec");
    let other = keygen(&r.t.path().join("keys"), "other");
    airlock_run(&["sign", s(&r.v1), "--key", s(&sec.private)]).ok();
    let two = ["--trust", s(&sec.public), "--threshold", "2"];
    r.install(&r.v1, &two).ok();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.mirror.join("public/releases.json")).unwrap()).unwrap();
    let listed = index["releases"][0]["cosignatures"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{index}");
    let server = Nginx::serve(&r.mirror.join("public"));
    let url = format!("{}/", server.url);
    let trust = ["--trust", s(&sec.public), "--trust", s(&other.public), "--threshold", "2", "--download-only"];
    let took = r.node(&url, "n", &trust).ok().json();
    assert_eq!(took["version"], "1.0.0", "{took}");
    let sigs: Vec<(String, u16)> = server
        .requests()
        .into_iter()
        .filter(|q| Path::new(&q.uri).extension().is_some_and(|x| x == "sig") && !q.uri.ends_with("manifest.json.sig"))
        .map(|q| (q.uri, q.status))
        .collect();
    assert_eq!(sigs.len(), 1, "the one co-signature listed, nothing for `other`: {sigs:?}");
    assert_eq!(sigs[0].1, 200, "{sigs:?}");
    assert!(sigs[0].0.contains(listed[0].as_str().unwrap()), "{sigs:?}");
}

/// The package files a node staged in `downloads/`, by name, with their bytes.
fn staged_debs(node: &Path) -> BTreeSet<(String, Vec<u8>)> {
    walkdir::WalkDir::new(node.join("downloads"))
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "deb"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

impl Releases {
    /// `airlock install URL --role relay --root ROOT ARGS --json`.
    fn relay(&self, url: &str, root: &str, extra: &[&str]) -> Run {
        let root = self.t.path().join(root);
        let base = ["install", url, "--role", "relay", "--trust", s(&self.keys.public), "--root", s(&root), "--json"];
        run(airlock().args(base).args(extra))
    }
}

/// Issue 78: a relay (a mirror fed from a mirror) over a real nginx verifies what it takes and
/// serves its own public tree; nodes take from it exactly what they take from the mirror; it
/// follows the mirror fetching only what changed, chains (site → hall → rack), keeps serving
/// when its upstream is down, and refuses a tampered member keeping its verified release.
#[test]
#[allow(clippy::too_many_lines, reason = "one relay's life, step by step")]
fn a_relay_verifies_once_serves_its_rack_follows_its_upstream_and_survives_its_loss() {
    let r = releases();
    let one = r.install(&r.v1, &[]).ok().json();
    let id1 = one["id"].as_str().unwrap().to_owned();
    let site = Nginx::serve(&r.mirror.join("public"));
    let site_url = format!("{}/", site.url);
    let relayed = r.relay(&site_url, "hall", &[]).ok().json();
    assert_eq!((relayed["id"].as_str(), relayed["up_to_date"].as_bool()), (Some(id1.as_str()), Some(false)));
    assert_eq!(relayed["kept"], "relay", "{relayed}");
    assert_eq!(relayed["transfer"]["fetched"]["files"], 3, "two packages and their index: {relayed}");
    let hall = r.t.path().join("hall");
    // Its public tree is a mirror's: the same signed manifest, served by version and by id.
    assert_eq!(
        std::fs::read(hall.join("public/current/airlock/manifest.json")).unwrap(),
        std::fs::read(r.mirror.join("public/current/airlock/manifest.json")).unwrap()
    );
    assert!(hall.join(format!("public/releases/{id1}/airlock/manifest.json.sig")).exists());
    assert!(hall.join("public/releases/1.0.0").exists());
    airlock_run(&["check", "--root", s(&hall)]).ok();
    let promote = airlock_run(&["promote", "--root", s(&hall), "1.0.0"]).code(2);
    assert!(promote.stderr.contains("is a relay's root: it follows its upstream's promotions"), "{}", promote.stderr);
    let record = std::fs::read(relayed["record"].as_str().unwrap()).unwrap();
    let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
    assert_eq!((record["role"].as_str(), record["outcome"].as_str()), (Some("relay"), Some("activated")), "{record}");
    assert_eq!(schema_errors(&validator("record.v1.json"), &record), Vec::<String>::new());

    // A node takes from the relay what it takes from the mirror: the same bundle, the same bytes.
    let hall_server = Nginx::serve(&hall.join("public"));
    let hall_url = format!("{}/", hall_server.url);
    let direct = r.node(&site_url, "direct", &["--download-only"]).ok().json();
    let via = r.node(&hall_url, "via-hall", &["--download-only"]).ok().json();
    assert_eq!(direct["id"], via["id"]);
    assert_eq!(staged_debs(&r.t.path().join("direct")), staged_debs(&r.t.path().join("via-hall")));
    assert_eq!(staged_debs(&r.t.path().join("via-hall")).len(), 2);
    // Members are read by id (immutable paths a cache keeps), not under `current/`.
    assert!(
        debs(&hall_server).iter().all(|u| u.starts_with(&format!("/releases/{id1}/debs/"))),
        "{:?}",
        debs(&hall_server)
    );

    // Run again with nothing new upstream: only the head is read, nothing written.
    site.clear();
    let records = std::fs::read_dir(hall.join("records")).unwrap().count();
    let again = r.relay(&site_url, "hall", &[]).ok().json();
    assert_eq!(again["up_to_date"], true, "{again}");
    assert_eq!(debs(&site), Vec::<String>::new());
    assert_eq!(
        std::fs::read_dir(hall.join("records")).unwrap().count(),
        records,
        "no record for a run that changed nothing"
    );

    // A chain: a rack relay over the hall relay; a node under it.
    let rack = r.relay(&hall_url, "rack", &[]).ok().json();
    assert_eq!((rack["id"].as_str(), rack["kept"].as_str()), (Some(id1.as_str()), Some("relay")), "{rack}");
    airlock_run(&["check", "--root", s(&r.t.path().join("rack"))]).ok();
    // Every member (`--all`) comes from the mirror (or a relay with --all), not a relay's part.
    let part = r.relay(&hall_url, "all", &["--all"]).code(1);
    assert!(
        part.stderr.contains("a relay keeps only a part of each release unless it runs with --all"),
        "{}",
        part.stderr
    );
    let all = r.relay(&site_url, "all", &["--all"]).ok().json();
    assert_eq!(all["kept"], "all", "{all}");
    assert!(r.t.path().join("all/public/current/airlock/sbom.cdx.json").exists());
    airlock_run(&["check", "--root", s(&r.t.path().join("all"))]).ok();
    let rack_url = format!("file://{}/", r.t.path().join("rack/public").display());
    let via_rack = r.node(&rack_url, "via-rack", &["--download-only"]).ok().json();
    assert_eq!(via_rack["id"], direct["id"]);
    assert_eq!(staged_debs(&r.t.path().join("via-rack")), staged_debs(&r.t.path().join("direct")));

    // The mirror moves to release 2, one of whose members is tampered with on the way: refused
    // by name (exit 3); the relay keeps serving the release it verified.
    r.install(&r.v2, &[]).ok();
    let hello = walkdir::WalkDir::new(r.mirror.join("public/current/debs"))
        .follow_links(true)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.to_string_lossy().ends_with("hello-airlock_2.11-1_amd64.deb"))
        .unwrap();
    let good = std::fs::read(&hello).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    std::fs::write(&hello, &bad).unwrap();
    let before = tree(&hall.join("public"));
    let tampered = r.relay(&site_url, "hall", &[]).code(3);
    assert!(tampered.stderr.contains("hello-airlock_2.11-1_amd64.deb"), "{}", tampered.stderr);
    assert_eq!(tree(&hall.join("public")), before, "the relay serves what it verified");
    assert_eq!(std::fs::read_link(hall.join("current")).unwrap(), Path::new(&format!("bundles/{id1}")));
    airlock_run(&["check", "--root", s(&hall)]).ok();

    // Put right, the relay follows, fetching only the package that changed.
    std::fs::write(&hello, &good).unwrap();
    site.clear();
    let two = r.relay(&site_url, "hall", &[]).ok().json();
    assert_eq!((two["version"].as_str(), two["up_to_date"].as_bool()), (Some("2.0.0"), Some(false)), "{two}");
    let fetched = debs(&site);
    assert!(fetched.len() == 1 && fetched[0].contains("hello-airlock_2.11-1"), "{fetched:?}");
    assert_eq!(two["transfer"]["reused"]["files"], 1, "{two}");
    let id2 = two["id"].as_str().unwrap().to_owned();

    // The upstream is down: the relay's run fails, and it still serves its rack.
    drop(site);
    let down = r.relay(&site_url, "hall", &[]);
    assert_eq!(down.code, 1, "an upstream out of reach is a runtime failure: {}", down.stderr);
    let status = airlock_run(&["status", "--root", s(&hall)]).ok().stdout;
    assert!(status.contains("last attempt: install") && status.contains("failed"), "{status}");
    let served = r.node(&hall_url, "after-loss", &["--download-only"]).ok().json();
    assert_eq!(served["id"], id2.as_str(), "{served}");
}

/// Issue 78: a relay under the site's trust root follows `current` only as the site's
/// `promotion` role signs it, and serves that signed promotion again, byte for byte, for its
/// nodes to verify; a renewal upstream reaches them through it; a `current` the promotion does
/// not name is refused and the relay keeps serving what it had.
#[test]
fn a_relay_follows_and_serves_the_signed_promotion_and_refuses_a_current_it_does_not_name() {
    let r = releases();
    let k = r.t.path().join("decision-keys");
    let [root_key, promo] = ["root", "promotion"].map(|n| keygen(&k, n));
    let build = format!("build={}:1", s(&r.keys.public));
    let promotion = format!("promotion={}:1", s(&promo.public));
    let init = ["trust", "init", "--root", s(&r.mirror), "--root-key", s(&root_key.public), "--role", &build];
    airlock_run(&[&init[..], &["--role", &promotion, "--expires", "1y", "--sign", s(&root_key.private)]].concat()).ok();
    let with_trust = |name: &str| {
        let root = r.t.path().join(name);
        std::fs::create_dir_all(root.join("trust")).unwrap();
        for file in ["1.root.json", "targets.json"] {
            std::fs::copy(r.mirror.join("trust").join(file), root.join("trust").join(file)).unwrap();
        }
        root
    };
    for bundle in [&r.v1, &r.v2] {
        airlock_run(&["install", s(bundle), "--root", s(&r.mirror), "--role", "mirror", "--candidate"]).ok();
    }
    let promote = |args: &[&str]| airlock_run(&[&["promote", "--root", s(&r.mirror)][..], args].concat());
    promote(&["1.0.0", "--sign", s(&promo.private)]).ok();
    let public = r.mirror.join("public");
    let site = Nginx::serve(&public);
    let url = format!("{}/", site.url);
    let relay_root = with_trust("relay");
    let relay = || run(airlock().args(["install", &url, "--role", "relay", "--root", s(&relay_root), "--json"]));
    let first = relay().ok().json();
    assert_eq!((first["version"].as_str(), first["promotion"].as_u64()), (Some("1.0.0"), Some(1)), "{first}");
    assert_eq!(
        std::fs::read(relay_root.join("public/promotion.json")).unwrap(),
        std::fs::read(public.join("promotion.json")).unwrap(),
        "the signed promotion is served as it was signed"
    );
    let relay_server = Nginx::serve(&relay_root.join("public"));
    let node = |name: &str| {
        let root = with_trust(name);
        let web = format!("{}/", relay_server.url);
        run(airlock().args(["apply", &web, "--root", s(&root), "--download-only", "--json"]))
    };
    let took = node("n1").ok().json();
    assert_eq!(took["version"], "1.0.0", "{took}");

    // A renewal upstream: nothing to fetch, the new promotion served.
    promote(&["--renew", "--sign", s(&promo.private)]).ok();
    let renewed = relay().ok().json();
    assert_eq!((renewed["up_to_date"].as_bool(), renewed["promotion"].as_u64()), (Some(true), Some(2)), "{renewed}");
    assert_eq!(
        std::fs::read(relay_root.join("public/promotion.json")).unwrap(),
        std::fs::read(public.join("promotion.json")).unwrap()
    );

    // The mirror's `current` moved to the candidate with no promotion naming it: refused.
    let id2 = std::fs::read_link(public.join("releases/2.0.0")).unwrap();
    let id2 = id2.file_name().unwrap().to_string_lossy().into_owned();
    std::os::unix::fs::symlink(format!("../bundles/{id2}"), public.join(".swap")).unwrap();
    std::fs::rename(public.join(".swap"), public.join("current")).unwrap();
    let before = tree(&relay_root.join("public"));
    let refused = relay().code(3);
    assert!(refused.stderr.contains("signed promotion (number 2)"), "{}", refused.stderr);
    assert_eq!(tree(&relay_root.join("public")), before);
    assert_eq!(node("n2").ok().json()["version"], "1.0.0");
}

/// Issue 78: nginx's `proxy_cache` as a rack cache, configured as docs/examples documents it:
/// nodes behind it take what they take from the mirror, each member crosses from the mirror
/// once however many nodes ask, and a changed `current` is seen at once (never cached).
#[test]
fn an_nginx_cache_in_front_of_the_mirror_serves_nodes_once_per_member_and_never_caches_current() {
    let r = releases();
    let one = r.install(&r.v1, &[]).ok().json();
    let site = Nginx::serve(&r.mirror.join("public"));
    let cache = Nginx::cache_in_front_of(&site.url);
    let url = format!("{}/", cache.url);
    let direct = r.node(&format!("{}/", site.url), "direct", &["--download-only"]).ok().json();
    site.clear();
    let nodes: Vec<String> = (0..4).map(|n| format!("rack-{n}")).collect();
    let staged: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = nodes.iter().map(|n| scope.spawn(|| r.node(&url, n, &["--download-only"]))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (n, run) in nodes.iter().zip(staged) {
        assert_eq!(run.ok().json()["id"], one["id"], "{n}");
        assert_eq!(staged_debs(&r.t.path().join(n)), staged_debs(&r.t.path().join("direct")), "{n}");
    }
    assert_eq!(direct["id"], one["id"]);
    let upstream = debs(&site);
    assert_eq!(upstream.len(), 2, "each package crossed from the mirror once for four nodes: {upstream:?}");
    let hits = cache
        .cache_log()
        .into_iter()
        .filter(|(u, c)| Path::new(u).extension().is_some_and(|x| x == "deb") && c == "HIT")
        .count();
    assert_eq!(hits, 6, "the other three nodes' packages came from the cache: {:?}", cache.cache_log());
    assert!(
        cache.cache_log().iter().filter(|(u, _)| !u.starts_with("/releases/")).all(|(_, c)| c == "-"),
        "current, releases.json and the rest are passed through: {:?}",
        cache.cache_log()
    );

    // The mirror moves: a node behind the cache sees the new current at once.
    let two = r.install(&r.v2, &[]).ok().json();
    let after = r.node(&url, "rack-0", &["--download-only"]).ok().json();
    assert_eq!(after["id"], two["id"], "{after}");
    assert_eq!(after["transfer"]["fetched"]["files"], 2, "the changed package and its index: {after}");
}
