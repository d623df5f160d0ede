//! `airlock freeze` for `[[rpm]]` entries: a node's installed rpms pinned in the spec's
//! repositories, as `apt::freeze` does for debs. From the packages each entry names, the node's
//! installed EVRs, and — for an entry that resolves — every installed package that satisfies
//! their `Requires` (a name, a provide, a file; each alternative of a rich dependency), the
//! base excepted as `lock` excepts it (`base`, `base_rpmdb`). Each EVR is looked up in the
//! entries' verified `primary` metadata.
//!
//! Written here, not by the solver: nothing is chosen; what is followed is which installed
//! package satisfies a requirement.

use std::collections::{BTreeMap, BTreeSet};

use super::closure::{BasePkg, Rich, Universe, parse_rich};
use super::{base, packages, repo};
use crate::rpmmd::{Dep, Package};
use crate::sources::{Found, SourceError, Sources, installed_closure};
use crate::spec::{RpmPin, RpmSpec};

/// A node's installed EVR (`[EPOCH:]VERSION-RELEASE`, as `rpm -q` writes it) by name.
pub type Installed = BTreeMap<String, String>;

/// The pins: for each entry, the packages it serves at the node's EVRs.
#[derive(Debug, Default)]
pub struct Frozen {
    pub entries: Vec<(RpmSpec, Vec<RpmPin>)>,
    /// Named by the spec but not installed on the node: not in the baseline.
    pub absent: Vec<String>,
}

/// Every `[[rpm]]` entry frozen at the node's EVRs; `installed` by architecture.
pub async fn freeze(sources: &Sources<'_>, installed: &BTreeMap<String, Installed>) -> Result<Frozen, SourceError> {
    let entries: Vec<&RpmSpec> = sources.spec.spec.rpm.iter().map(toml::Spanned::get_ref).collect();
    let mut all = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let r = repo(sources, entry).await?;
        all.push(packages(sources, entry, &r, i).await?);
    }
    let arches: BTreeSet<&str> = entries.iter().map(|e| e.arch.as_str()).collect();
    let empty = Installed::new();
    let mut pins: BTreeMap<usize, BTreeSet<RpmPin>> = BTreeMap::new();
    let (mut absent, mut unserved) = (Vec::new(), Vec::new());
    for arch in arches {
        let group: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].arch == arch).collect();
        let universe = Universe::new(group.iter().flat_map(|&i| all[i].iter().cloned()).collect());
        let resolving: Vec<&RpmSpec> = group.iter().map(|&i| entries[i]).filter(|e| e.resolve).collect();
        let base = if resolving.is_empty() { Vec::new() } else { base(sources, &resolving, &universe).await?.0 };
        let walk = Walk { universe: &universe, on_node: installed.get(arch).unwrap_or(&empty), arch, base: &base };
        let roots: Vec<(String, bool)> = group
            .iter()
            .flat_map(|&i| {
                let entry = entries[i];
                entry.packages.iter().map(move |p| (p.name.clone(), entry.resolve))
            })
            .collect();
        let found = walk.closure(&roots);
        absent.extend(found.absent);
        unserved.extend(found.unserved);
        for p in found.served {
            let pkg = &universe.pkgs[p];
            pins.entry(pkg.source)
                .or_default()
                .insert(RpmPin { name: pkg.package.name.clone(), evr: Some(pkg.package.evr()) });
        }
    }
    if !unserved.is_empty() {
        unserved.sort();
        let archives = entries.iter().map(|e| e.url()).collect();
        return Err(SourceError::Unserved { packages: unserved, archives });
    }
    let entries = pins.into_iter().map(|(i, pins)| (entries[i].clone(), pins.into_iter().collect())).collect();
    Ok(Frozen { entries, absent })
}

struct Walk<'a> {
    universe: &'a Universe,
    on_node: &'a Installed,
    arch: &'a str,
    base: &'a [BasePkg],
}

/// `rpm -q`'s EVR and the metadata's: `1:6.4.1-1.el9` both, `0:` spelled or not.
fn same_evr(p: &Package, installed: &str) -> bool {
    let evr = p.evr();
    evr == installed || installed.strip_prefix("0:") == Some(evr.as_str())
}

/// Every plain dependency a rich one names, each an alternative worth following when installed.
fn plain(rich: &Rich, out: &mut Vec<Dep>) {
    match rich {
        Rich::Plain(d) => out.push(d.clone()),
        Rich::And(v) | Rich::Or(v) | Rich::With(v) => v.iter().for_each(|r| plain(r, out)),
        // `(a if b)`: `a` is needed only when `b` is installed; both are followed when they are.
        Rich::If { then, cond, otherwise, .. } => {
            plain(then, out);
            plain(cond, out);
            if let Some(o) = otherwise {
                plain(o, out);
            }
        }
    }
}

impl Walk<'_> {
    /// The served package of `name` at the node's EVR, if the node has it.
    fn served(&self, name: &str) -> Option<Result<usize, (String, String)>> {
        let evr = self.on_node.get(name)?;
        let hit = self.universe.named(name).find(|&i| same_evr(&self.universe.pkgs[i].package, evr));
        Some(hit.ok_or_else(|| {
            let served: std::collections::BTreeSet<String> =
                self.universe.named(name).map(|i| self.universe.pkgs[i].package.evr()).collect();
            (evr.clone(), served.into_iter().collect::<Vec<_>>().join(", "))
        }))
    }

    fn in_base(&self, dep: &Dep) -> bool {
        self.base
            .iter()
            .any(|b| b.name == dep.name || b.provides.iter().any(|p| p.name == dep.name) || b.files.contains(&dep.name))
    }

    /// The installed package that satisfies `dep`: by name, else the first by name of those
    /// that provide it (a provide or a file) at their installed EVR.
    fn installed_for(&self, dep: &Dep) -> Option<String> {
        if self.on_node.contains_key(&dep.name) {
            return Some(dep.name.clone());
        }
        self.universe
            .providers(dep)
            .into_iter()
            .map(|i| &self.universe.pkgs[i].package)
            .filter(|p| self.on_node.get(&p.name).is_some_and(|evr| same_evr(p, evr)))
            .map(|p| p.name.clone())
            .min()
    }

    fn closure(&self, roots: &[(String, bool)]) -> Found {
        let found = installed_closure(
            roots,
            self.arch,
            |name| self.served(name),
            |p| {
                let parent = &self.universe.pkgs[p].package;
                let mut names = Vec::new();
                for req in parent.requires.iter().filter(|d| !d.name.starts_with("rpmlib(")) {
                    let mut deps = Vec::new();
                    match parse_rich(req) {
                        Ok(rich) => plain(&rich, &mut deps),
                        Err(e) => tracing::warn!("{}: requirement `{}` not read: {e}", parent.name, req.name),
                    }
                    for dep in deps.iter().filter(|d| !self.in_base(d)) {
                        names.extend(self.installed_for(dep));
                    }
                }
                Ok::<_, std::convert::Infallible>((parent.name.clone(), names))
            },
        );
        match found {
            Ok(found) => found,
            Err(never) => match never {},
        }
    }
}
