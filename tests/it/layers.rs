//! The architecture, checked (issue 79): every `crate::` and `super::` path in `src/` read, and
//! held to what `src/lib.rs` and `docs/architecture.md` say — a module imports only from its
//! own layer and the layers below (values < formats and transports < phases < edge), no two
//! top-level modules import each other (directly or round a circle), no two files of one
//! directory do, every top-level module is in a layer, and every module file is named in the
//! architecture page's map.
//!
//! What is wrong today and not mended yet is listed in `DEBTS`, each entry exactly as the test
//! finds it: a new violation fails, and so does a debt that is paid but still listed (the list
//! only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Known violations, each to be mended (issue 79), exactly as `violations()` words them.
const DEBTS: &[&str] = &[];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The layers `src/lib.rs`'s documentation lists, lowest first: module name -> rank.
fn layers() -> BTreeMap<String, usize> {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    let mut doc = String::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//!")) {
        doc.push_str(line.trim_start());
        doc.push('\n');
    }
    let mut rank = BTreeMap::new();
    for (n, (layer, name)) in [
        ("values", "- values:"),
        ("formats", "- formats and transports:"),
        ("phases", "- phases:"),
        ("edge", "- edge:"),
    ]
    .into_iter()
    .enumerate()
    {
        let start = doc.find(name).unwrap_or_else(|| panic!("src/lib.rs names no {layer} layer"));
        let rest = &doc[start + name.len()..];
        let end = rest.find("\n- ").unwrap_or(rest.len());
        for part in rest[..end].split('`').skip(1).step_by(2) {
            rank.insert(part.to_owned(), n);
        }
    }
    rank
}

/// Rust source without comments (doc text names modules it does not import).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") { "" } else { l.split(" // ").next().unwrap_or(l) }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every identifier after `prefix` in `text` (`crate::site::mirror` -> `site`, then `mirror`).
fn paths_after<'a>(text: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let segs: Vec<&str> = rest
            .split("::")
            .take(2)
            .map(|s| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""))
            .take_while(|s| !s.is_empty())
            .collect();
        out.push(segs);
    }
    out
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The strongly connected parts of `edges` with more than one member, each sorted.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn reach(from: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
        let (mut seen, mut todo) = (BTreeSet::new(), vec![from.to_owned()]);
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    }
    let nodes: BTreeSet<String> = edges.keys().cloned().collect();
    let reached: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (n, reach(n, edges))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in &nodes {
        if out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let part: Vec<String> =
            nodes.iter().filter(|m| *m == n || (reached[n].contains(*m) && reached[*m].contains(n))).cloned().collect();
        if part.len() > 1 {
            out.push(part);
        }
    }
    out
}

fn violations() -> BTreeSet<String> {
    let rank = layers();
    let src = repo().join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut found = BTreeSet::new();
    for m in lib.lines().filter_map(|l| l.strip_prefix("pub mod ")).map(|l| l.trim_end_matches(';')) {
        if !rank.contains_key(m) {
            found.insert(format!("unlayered: {m} is in no layer of src/lib.rs"));
        }
    }
    let map = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for path in rust_files(&src) {
        let rel = path.strip_prefix(&src).unwrap().with_extension("");
        let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
            continue;
        }
        let top = parts[0].clone();
        let stem = parts.last().unwrap().clone();
        if stem != "mod"
            && stem != "tests"
            && parts.len() > 1
            && !map.contains(&format!("`{stem}`"))
            && !map.contains(&format!("{stem}`"))
        {
            found.insert(format!("unmapped: src/{} is not named in docs/architecture.md", rel.display()));
        }
        let text = code(&std::fs::read_to_string(&path).unwrap());
        modules.entry(top.clone()).or_default();
        for segs in paths_after(&text, "crate::") {
            let Some(target) = segs.first() else { continue };
            if *target == top {
                continue;
            }
            modules.entry(top.clone()).or_default().insert((*target).to_owned());
            if let (Some(a), Some(b)) = (rank.get(&top), rank.get(*target))
                && b > a
            {
                found.insert(format!("upward: {top} imports {target}"));
            }
        }
        let dir = path.parent().unwrap().to_owned();
        for t in sibling_imports(&src, &dir, &stem, &text) {
            files.entry(dir.clone()).or_default().entry(stem.clone()).or_default().insert(t);
        }
        // A file in a subdirectory (`site/apply/gate.rs`, `site/apply/mod.rs`) speaks for that
        // subdirectory among the files of the module it is in: its `crate::site::NAME` imports
        // are the subdirectory's (a file split into a directory keeps its edges).
        if parts.len() > 2 {
            let outer = src.join(&top);
            let sub = parts[1].clone();
            let siblings: BTreeSet<String> = std::fs::read_dir(&outer)
                .unwrap()
                .filter_map(|e| e.unwrap().path().file_stem().map(|n| n.to_string_lossy().into_owned()))
                .collect();
            for segs in paths_after(&text, &format!("crate::{top}::")) {
                if let Some(t) = segs.first().filter(|t| siblings.contains(**t) && **t != sub && **t != "mod") {
                    files.entry(outer.clone()).or_default().entry(sub.clone()).or_default().insert((*t).to_owned());
                }
            }
        }
    }
    for circle in circles(&modules) {
        found.insert(format!("circle of modules: {}", circle.join(" -> ")));
    }
    for (dir, edges) in &files {
        let mut edges = edges.clone();
        for targets in edges.clone().values() {
            for t in targets {
                edges.entry(t.clone()).or_default();
            }
        }
        for circle in circles(&edges) {
            let dir = dir.strip_prefix(repo()).unwrap().display();
            found.insert(format!("circle of files in {dir}: {}", circle.join(" -> ")));
        }
    }
    found
}

/// The files of `dir` that the file `stem` there imports: `super::NAME` from a file,
/// `crate::DIR::NAME` from anywhere in it (a `mod.rs` is the directory itself: not counted).
fn sibling_imports(src: &Path, dir: &Path, stem: &str, text: &str) -> Vec<String> {
    if stem == "mod" || dir == src {
        return Vec::new();
    }
    let siblings: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(name)
        })
        .filter(|n| n != "mod")
        .collect();
    let own: Vec<String> = dir.strip_prefix(src).unwrap().iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let mut targets: Vec<String> =
        paths_after(text, "super::").into_iter().filter_map(|s| s.first().map(|t| (*t).to_owned())).collect();
    if own.len() == 1 {
        let prefix = format!("crate::{}::", own[0]);
        targets.extend(paths_after(text, &prefix).into_iter().filter_map(|s| s.first().map(|t| (*t).to_owned())));
    }
    targets.into_iter().filter(|t| siblings.contains(t) && t != stem).collect()
}

#[test]
fn the_code_keeps_the_layers_and_the_map_that_src_lib_rs_and_the_architecture_page_state() {
    let found = violations();
    let debts: BTreeSet<String> = DEBTS.iter().map(|d| (*d).to_owned()).collect();
    let new: Vec<&String> = found.difference(&debts).collect();
    let paid: Vec<&String> = debts.difference(&found).collect();
    assert!(new.is_empty(), "against the architecture (mend it, or say why in DEBTS):\n{}", join(&new));
    assert!(paid.is_empty(), "paid: remove these from DEBTS:\n{}", join(&paid));
}

fn join(items: &[&String]) -> String {
    items.iter().map(|s| format!("  {s}")).collect::<Vec<_>>().join("\n")
}

/// The checker itself finds what it is for: an upward import, a circle, an unlayered module.
#[test]
fn the_layer_checker_finds_a_circle_and_an_upward_path() {
    let edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(circles(&edges), vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]);
    let text = code("use crate::site::mirror;\n// crate::fleet in a comment\nlet x = crate::oci::ImageRef::parse(s);");
    assert_eq!(paths_after(&text, "crate::"), vec![vec!["site", "mirror"], vec!["oci", "ImageRef"]]);
    assert_eq!(layers().get("spec"), Some(&0));
    assert_eq!(layers().get("commands"), Some(&3));
}
