//! `airlock diff OLD NEW [--json]`: what changed between two bundles (their signed manifests,
//! read without extracting anything) or two locks — the change-approval BOM diff.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use super::VerificationFailed;
use crate::bundle::manifest::Artifact;
use crate::bundle::reader::read_head;
use crate::cli::DiffArgs;
use crate::spec::lock::{Lock, LockFile};

/// `(kind, name)` → what it resolved to (a version, digest or commit).
type Inventory = BTreeMap<(String, String), String>;

#[derive(Debug, Serialize, PartialEq, Eq)]
struct Item {
    kind: String,
    name: String,
    version: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct Change {
    kind: String,
    name: String,
    from: String,
    to: String,
}

#[derive(Debug, Serialize, Default)]
struct Diff {
    added: Vec<Item>,
    removed: Vec<Item>,
    changed: Vec<Change>,
}

fn push(inv: &mut Inventory, kind: &str, name: &str, value: String) {
    // Several files per name (wheels for several platforms): list every distinct value.
    inv.entry((kind.to_owned(), name.to_owned()))
        .and_modify(|v| {
            if !v.split(", ").any(|x| x == value) {
                v.push_str(", ");
                v.push_str(&value);
            }
        })
        .or_insert(value);
}

fn from_artifacts(artifacts: &[Artifact]) -> Inventory {
    let mut inv = Inventory::new();
    for a in artifacts {
        match a {
            Artifact::Image(i) => push(&mut inv, "image", &i.reference, format!("sha256:{}", i.digest)),
            Artifact::Wheel(w) => push(&mut inv, "wheel", &w.name, w.version.clone()),
            Artifact::Deb(d) => push(&mut inv, "deb", &format!("{}:{}", d.name, d.architecture), d.version.clone()),
            Artifact::Model(m) => push(&mut inv, "model", &m.repo, m.commit.clone()),
            Artifact::File(f) => push(&mut inv, "file", f.name.as_str(), format!("sha256:{}", f.sha256)),
        }
    }
    inv
}

fn from_lock(lock: &Lock) -> Inventory {
    let mut inv = Inventory::new();
    for i in &lock.image {
        push(&mut inv, "image", &i.reference, format!("sha256:{}", i.digest));
    }
    for w in &lock.wheel {
        push(&mut inv, "wheel", &w.name, w.version.clone());
    }
    for d in &lock.deb {
        let (name, version) = d.package.split_once('=').unwrap_or((&d.package, ""));
        push(&mut inv, "deb", &format!("{name}:{}", d.architecture), version.to_owned());
    }
    for m in &lock.model {
        push(&mut inv, "model", &m.repo, m.commit.clone());
    }
    for f in &lock.file {
        push(&mut inv, "file", f.name.as_str(), format!("sha256:{}", f.sha256));
    }
    inv
}

/// A lock (TOML that parses as one) or a bundle.
fn inventory(path: &Path) -> anyhow::Result<Inventory> {
    if let Ok(Some(lock)) = LockFile::load(path) {
        return Ok(from_lock(&lock.lock));
    }
    let file = File::open(path).with_context(|| format!("cannot open `{}`", path.display()))?;
    let head = read_head(BufReader::new(file))
        .map_err(|p| VerificationFailed(format!("`{}` is neither a lock nor a bundle: {p}", path.display())))?;
    Ok(from_artifacts(&head.manifest.artifacts))
}

fn compare(old: &Inventory, new: &Inventory) -> Diff {
    let mut diff = Diff::default();
    for ((kind, name), version) in new {
        match old.get(&(kind.clone(), name.clone())) {
            None => diff.added.push(Item { kind: kind.clone(), name: name.clone(), version: version.clone() }),
            Some(from) if from != version => {
                diff.changed.push(Change {
                    kind: kind.clone(),
                    name: name.clone(),
                    from: from.clone(),
                    to: version.clone(),
                });
            }
            Some(_) => {}
        }
    }
    for ((kind, name), version) in old {
        if !new.contains_key(&(kind.clone(), name.clone())) {
            diff.removed.push(Item { kind: kind.clone(), name: name.clone(), version: version.clone() });
        }
    }
    diff
}

pub fn run(args: &DiffArgs) -> anyhow::Result<u8> {
    let diff = compare(&inventory(&args.old)?, &inventory(&args.new)?);
    if args.json {
        super::print_json(&diff)?;
        return Ok(super::EXIT_OK);
    }
    let mut out = std::io::stdout().lock();
    for i in &diff.added {
        writeln!(out, "+ {:<6} {}  {}", i.kind, i.name, i.version)?;
    }
    for i in &diff.removed {
        writeln!(out, "- {:<6} {}  {}", i.kind, i.name, i.version)?;
    }
    for c in &diff.changed {
        writeln!(out, "~ {:<6} {}  {} -> {}", c.kind, c.name, c.from, c.to)?;
    }
    let (a, r, c) = (diff.added.len(), diff.removed.len(), diff.changed.len());
    writeln!(out, "{a} added, {r} removed, {c} changed")?;
    Ok(super::EXIT_OK)
}
