//! The bill-of-materials diff between two releases (bundles or locks): what was added,
//! removed and changed, by kind and name. `airlock diff` prints it; the report shows it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bundle::manifest::Artifact;
use crate::spec::lock::Lock;

/// `(kind, name)` → what it resolved to (a version, digest or commit).
pub type Inventory = BTreeMap<(String, String), String>;

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Item {
    pub kind: String,
    pub name: String,
    pub version: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Change {
    pub kind: String,
    pub name: String,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Serialize, Default)]
pub struct Diff {
    pub added: Vec<Item>,
    pub removed: Vec<Item>,
    pub changed: Vec<Change>,
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

pub fn from_artifacts(artifacts: &[Artifact]) -> Inventory {
    let mut inv = Inventory::new();
    for a in artifacts {
        match a {
            Artifact::Image(i) => push(&mut inv, "image", &i.reference, format!("sha256:{}", i.digest)),
            Artifact::Wheel(w) => push(&mut inv, "wheel", &w.name, w.version.clone()),
            Artifact::Deb(d) => push(&mut inv, "deb", &format!("{}:{}", d.name, d.architecture), d.version.clone()),
            Artifact::Rpm(r) => push(&mut inv, "rpm", &format!("{}.{}", r.name, r.architecture), r.evr()),
            Artifact::Model(m) => push(&mut inv, "model", &m.repo, m.commit.to_string()),
            Artifact::File(f) => push(&mut inv, "file", f.name.as_str(), format!("sha256:{}", f.sha256)),
        }
    }
    inv
}

pub fn from_lock(lock: &Lock) -> Inventory {
    let mut inv = Inventory::new();
    for i in &lock.image {
        push(&mut inv, "image", &i.reference, format!("sha256:{}", i.digest));
    }
    for w in &lock.wheel {
        push(&mut inv, "wheel", &w.name, w.version.clone());
    }
    for d in &lock.deb {
        push(&mut inv, "deb", &format!("{}:{}", d.package.name, d.architecture), d.version().to_owned());
    }
    for r in &lock.rpm {
        push(&mut inv, "rpm", &format!("{}.{}", r.name, r.architecture), r.evr());
    }
    for m in &lock.model {
        push(&mut inv, "model", &m.repo, m.commit.clone());
    }
    for f in &lock.file {
        push(&mut inv, "file", f.name.as_str(), format!("sha256:{}", f.sha256));
    }
    inv
}

/// What was added, removed and changed from `old` to `new`.
pub fn compare(old: &Inventory, new: &Inventory) -> Diff {
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
