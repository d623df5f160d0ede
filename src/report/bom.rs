//! The bill-of-materials diff between two releases (bundles or locks): what was added,
//! removed and changed, by kind and name. `airlock diff` prints it; the report shows it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bundle::manifest::{Artifact, Validation};
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

/// What changed in the support matrix and what goes with it (the manifest's `validation`
/// section): target rows by their `gpu`, checks by name, their metrics by check and name, the
/// impact register by component, and any other field of the section. A row added or removed
/// is one item; a row in both is compared field by field (`MI300X: firmware.PLDM_BUNDLE`
/// `>=01.23` -> `>=01.24`).
pub fn compare_validation(old: &Validation, new: &Validation) -> Diff {
    // Compared field by field whatever the fields are: a field added to the matrix is diffed
    // without a change here.
    let as_value = |v: &Validation| serde_json::to_value(v).unwrap_or_default();
    let (old, new) = (&as_value(old), &as_value(new));
    let mut diff = Diff::default();
    // A check's metrics are compared as rows of their own.
    for (section, key, skip) in
        [("target", "gpu", &[][..]), ("check", "name", &["metric"][..]), ("impact", "component", &[][..])]
    {
        rows_diff(&mut diff, section, &rows(&old[section], key, skip), &rows(&new[section], key, skip));
    }
    rows_diff(&mut diff, "metric", &metrics(old), &metrics(new));
    let others = |v: &serde_json::Value| -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (k, v) in v.as_object().into_iter().flatten() {
            if !["target", "check", "impact"].contains(&k.as_str()) {
                flatten(k, v, &mut out);
            }
        }
        out
    };
    let (o, n) = (others(old), others(new));
    fields_diff(&mut diff, "validation", "[validation]", &o, &n);
    diff
}

/// A section's rows by their key (`gpu`, `name`, `component`; `KEY #N` for the Nth row with
/// the same key), each flattened to its fields, without the fields named in `skip`.
fn rows(section: &serde_json::Value, key: &str, skip: &[&str]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for row in section.as_array().into_iter().flatten() {
        let base = row[key].as_str().map_or_else(|| row[key].to_string(), str::to_owned);
        let mut name = base.clone();
        let mut n = 1;
        while out.contains_key(&name) {
            n += 1;
            name = format!("{base} #{n}");
        }
        let mut fields = BTreeMap::new();
        for (k, v) in row.as_object().into_iter().flatten() {
            if !skip.contains(&k.as_str()) {
                flatten(k, v, &mut fields);
            }
        }
        out.insert(name, fields);
    }
    out
}

/// Every check's metrics, named `CHECK/METRIC`.
fn metrics(validation: &serde_json::Value) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for check in validation["check"].as_array().into_iter().flatten() {
        let name = check["name"].as_str().unwrap_or("?");
        for (metric, fields) in rows(&check["metric"], "name", &[]) {
            out.insert(format!("{name}/{metric}"), fields);
        }
    }
    out
}

/// `value` as dotted field paths (`firmware.PLDM_BUNDLE`); lists and scalars as their text.
fn flatten(path: &str, value: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{path}.{k}"), v, out);
            }
        }
        serde_json::Value::Array(items) if items.iter().all(serde_json::Value::is_string) => {
            let items: Vec<&str> = items.iter().filter_map(serde_json::Value::as_str).collect();
            out.insert(path.to_owned(), items.join(" | "));
        }
        serde_json::Value::String(s) => {
            out.insert(path.to_owned(), s.clone());
        }
        other => {
            out.insert(path.to_owned(), other.to_string());
        }
    }
}

fn rows_diff(
    diff: &mut Diff,
    kind: &str,
    old: &BTreeMap<String, BTreeMap<String, String>>,
    new: &BTreeMap<String, BTreeMap<String, String>>,
) {
    let summary = |fields: &BTreeMap<String, String>| {
        fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
    };
    for (name, fields) in new {
        match old.get(name) {
            None => diff.added.push(Item { kind: kind.to_owned(), name: name.clone(), version: summary(fields) }),
            Some(before) => fields_diff(diff, kind, name, before, fields),
        }
    }
    for (name, fields) in old {
        if !new.contains_key(name) {
            diff.removed.push(Item { kind: kind.to_owned(), name: name.clone(), version: summary(fields) });
        }
    }
}

/// One row's fields compared: each field that differs, appeared or went is a change.
fn fields_diff(diff: &mut Diff, kind: &str, row: &str, old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) {
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for k in keys {
        let (from, to) = (old.get(k), new.get(k));
        if from != to {
            diff.changed.push(Change {
                kind: kind.to_owned(),
                name: format!("{row}: {k}"),
                from: from.cloned().unwrap_or_else(|| "(none)".to_owned()),
                to: to.cloned().unwrap_or_else(|| "(none)".to_owned()),
            });
        }
    }
}

impl Diff {
    /// `other`'s added, removed and changed after this one's.
    pub fn extend(&mut self, other: Diff) {
        self.added.extend(other.added);
        self.removed.extend(other.removed);
        self.changed.extend(other.changed);
    }
}

#[cfg(test)]
mod tests {
    /// A manifest's `validation` section, as a spec's `[validation]` is carried.
    fn section(text: &str) -> crate::bundle::manifest::Validation {
        serde_json::from_str(text).expect("a test section")
    }

    #[test]
    fn a_raised_firmware_floor_is_a_change_of_that_field() {
        let old = section(
            r#"{"target": [{"gpu": "MI300X", "firmware": {"PLDM_BUNDLE": ">=01.23"}, "os": ["ubuntu 24.04"]}],
                "check": [{"name": "rvs", "run": ["rvs"], "metric": [{"name": "ttft", "from": "json:/t", "better": "lower",
                           "threshold": "<= 250"}]}]}"#,
        );
        let new = section(
            r#"{"target": [{"gpu": "MI300X", "firmware": {"PLDM_BUNDLE": ">=01.24"}, "os": ["ubuntu 24.04"]},
                           {"gpu": "MI325X", "gfx": "gfx942"}],
                "check": [{"name": "rvs", "run": ["rvs"], "metric": [{"name": "ttft", "from": "json:/t", "better": "lower",
                           "threshold": "<= 200"}]}],
                "impact": [{"component": "amd-smi", "old": "a", "new": "b", "test": "rvs", "owner": "o", "decision": "accept"}]}"#,
        );
        let d = super::compare_validation(&old, &new);
        let changed: Vec<(&str, &str, &str, &str)> =
            d.changed.iter().map(|c| (c.kind.as_str(), c.name.as_str(), c.from.as_str(), c.to.as_str())).collect();
        assert_eq!(
            changed,
            [
                ("target", "MI300X: firmware.PLDM_BUNDLE", ">=01.23", ">=01.24"),
                ("metric", "rvs/ttft: threshold", "<= 250", "<= 200")
            ]
        );
        let added: Vec<(&str, &str)> = d.added.iter().map(|i| (i.kind.as_str(), i.name.as_str())).collect();
        assert_eq!(added, [("target", "MI325X"), ("impact", "amd-smi")]);
        assert!(super::compare_validation(&new, &new).changed.is_empty());
    }
}
