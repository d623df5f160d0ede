//! `airlock freeze`: a node's installed packages pinned in the spec's archives. From the
//! packages each `[[deb]]` entry names, the node's installed versions, and — for an entry that
//! resolves — every installed package their `Pre-Depends` and `Depends` reach, the base
//! excepted as `lock` excepts it (the entry's `base_status`, else the suite's `Priority:
//! required`): the same closure `lock` would carry, at the versions the node runs instead of
//! the newest. Each version is looked up in the entries' verified indexes and in each suite's
//! security twin (`SUITE-security`, where served: a by-hand install often came from there).
//!
//! Written here, not by a solver: nothing is chosen, every package is the one installed; what
//! is followed is which installed package satisfies a dependency.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use debversion::Version;

use super::archive::load;
use super::closure::{Universe, satisfies};
use super::index::relations;
use super::news::with_security_twins;
use super::{DebError, base, universe};
use crate::sources::{Found, SourceError, Sources, installed_closure};
use crate::spec::{DebPin, DebSpec};

/// A node's installed version of a package, by name, for one architecture (`all` included).
pub type Installed = BTreeMap<String, String>;

/// The pins: for each entry (the spec's, then any security twin a version was found in only),
/// the stack's packages it serves at the node's versions, and the dependencies of the stack it
/// serves (`dependencies`: the distribution's to patch).
#[derive(Debug, Default)]
pub struct Frozen {
    pub entries: Vec<FrozenEntry>,
    /// Named by the spec but not installed on the node: not in the baseline.
    pub absent: Vec<String>,
    /// Installed packages the stack depends on that the operating system's base covers, with
    /// the version the node runs: left to the distribution's updates, not pinned.
    pub left_to_os: Vec<(String, String)>,
}

#[derive(Debug)]
pub struct FrozenEntry {
    pub spec: DebSpec,
    /// The spec's named packages.
    pub stack: Vec<DebPin>,
    /// What they depend on, above the operating system's base.
    pub dependencies: Vec<DebPin>,
}

/// Every `[[deb]]` entry frozen at the node's versions; `installed` by architecture.
pub async fn freeze(sources: &Sources<'_>, installed: &BTreeMap<String, Installed>) -> Result<Frozen, SourceError> {
    let suites = with_security_twins(sources);
    let (mut entries, mut loaded) = (Vec::new(), Vec::new());
    for (entry, configured) in suites {
        match load(sources, &entry).await {
            Ok((indexes, _)) => {
                entries.push((entry, configured));
                loaded.push(Arc::new(indexes));
            }
            Err(e) if !configured => tracing::debug!("{} {}: not read ({e})", entry.repo, entry.suite),
            Err(e) => return Err(e),
        }
    }
    let specs: Vec<&DebSpec> = entries.iter().map(|(e, _)| e).collect();
    let arches: BTreeSet<&str> = specs.iter().map(|e| e.arch.as_str()).collect();
    let archives: Vec<String> = specs.iter().map(|e| format!("{} {}", e.repo.trim_end_matches('/'), e.suite)).collect();
    let empty = Installed::new();
    let mut pins: BTreeMap<usize, (BTreeSet<DebPin>, BTreeSet<DebPin>)> = BTreeMap::new();
    let (mut absent, mut unserved, mut left) = (Vec::new(), Vec::new(), BTreeSet::new());
    for arch in arches {
        let group: Vec<usize> = (0..specs.len()).filter(|&i| specs[i].arch == arch).collect();
        let universe = universe(&specs, &loaded, &group).await?;
        let resolving: Vec<&DebSpec> = group.iter().map(|&i| specs[i]).filter(|e| e.resolve).collect();
        // The operating system's part: what a standard installation has (or the spec's base).
        let base = if resolving.is_empty() { Vec::new() } else { base(sources, &resolving, &universe, true).await?.0 };
        let on_node = installed.get(arch).unwrap_or(&empty);
        let walk =
            Walk { universe: &universe, on_node, arch, base: &base, left: RefCell::default(), archives: &archives };
        let roots: Vec<(String, bool)> = group
            .iter()
            .filter(|&&i| entries[i].1)
            .flat_map(|&i| {
                let entry = specs[i];
                entry.packages.iter().map(move |p| (p.name.clone(), entry.resolve))
            })
            .collect();
        let found = walk.closure(&roots)?;
        absent.extend(found.absent);
        unserved.extend(found.unserved);
        let named: BTreeSet<&str> = roots.iter().map(|(n, _)| n.as_str()).collect();
        for p in found.served {
            let pkg = &universe.pkgs[p];
            let (stack, dependencies) = pins.entry(pkg.source).or_default();
            let pin = DebPin { name: pkg.name.clone(), version: Some(pkg.version.to_string()) };
            if named.contains(pkg.name.as_str()) { stack } else { dependencies }.insert(pin);
        }
        left.extend(walk.left.into_inner().into_iter().map(|n| {
            let version = on_node.get(&n).cloned().unwrap_or_default();
            (n, version)
        }));
    }
    if !unserved.is_empty() {
        unserved.sort();
        return Err(SourceError::Unserved { packages: unserved, archives });
    }
    let entries: Vec<FrozenEntry> = pins
        .into_iter()
        .map(|(i, (stack, dependencies))| FrozenEntry {
            spec: specs[i].clone(),
            stack: stack.into_iter().collect(),
            dependencies: dependencies.into_iter().collect(),
        })
        .collect();
    // A package the stack reaches both ways is pinned, not the OS's.
    let pinned: BTreeSet<&str> = entries
        .iter()
        .flat_map(|e: &FrozenEntry| e.stack.iter().chain(&e.dependencies))
        .map(|p| p.name.as_str())
        .collect();
    let left_to_os = left.into_iter().filter(|(name, _)| !pinned.contains(name.as_str())).collect();
    Ok(Frozen { entries, absent, left_to_os })
}

struct Walk<'a> {
    universe: &'a Universe,
    on_node: &'a Installed,
    arch: &'a str,
    base: &'a [super::index::Pkg],
    /// Installed packages reached through a dependency the base covers: the OS's.
    left: RefCell<BTreeSet<String>>,
    /// Each loaded entry as `REPO SUITE`, by the universe's source index.
    archives: &'a [String],
}

impl Walk<'_> {
    /// The served package of `name` at the node's version, if the node has it.
    fn served(&self, name: &str) -> Option<Result<usize, (String, String)>> {
        let version = self.on_node.get(name)?;
        let parsed: Option<Version> = version.parse().ok();
        let hit = self.universe.named(name).find(|&i| Some(&self.universe.pkgs[i].version) == parsed.as_ref());
        Some(hit.ok_or_else(|| (version.clone(), self.versions(name))))
    }

    /// The versions of `name` each archive serves: `bookworm 3.0.20-1~deb12u2; …`.
    fn versions(&self, name: &str) -> String {
        let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for i in self.universe.named(name) {
            let pkg = &self.universe.pkgs[i];
            by.entry(self.archives[pkg.source].as_str()).or_default().push(pkg.version.to_string());
        }
        by.into_iter().map(|(a, v)| format!("{a} {}", v.join(", "))).collect::<Vec<_>>().join("; ")
    }

    /// The installed packages that satisfy one dependency group: by name, else through an
    /// installed package's `Provides`.
    fn installed_for(&self, group: &[debian_control::lossy::Relation]) -> Option<String> {
        for r in group {
            if self.on_node.contains_key(&r.name) {
                return Some(r.name.clone());
            }
        }
        // The first installed package, by name, whose installed version provides it.
        self.on_node
            .iter()
            .find(|(name, version)| {
                let Ok(version) = version.parse::<Version>() else { return false };
                self.universe
                    .named(name)
                    .filter(|&i| self.universe.pkgs[i].version == version)
                    .any(|i| group.iter().any(|r| satisfies(&self.universe.pkgs[i], r, self.arch)))
            })
            .map(|(name, _)| name.clone())
    }

    fn closure(&self, roots: &[(String, bool)]) -> Result<Found, DebError> {
        installed_closure(
            roots,
            self.arch,
            |name| self.served(name),
            |p| {
                let parent = &self.universe.pkgs[p];
                let bad = |e: super::BadRelations| DebError::Unsolvable {
                    arch: self.arch.to_owned(),
                    detail: format!("{}: {e}", parent.name),
                };
                let mut groups = relations(&parent.pre_depends).map_err(bad)?.0;
                groups.extend(relations(&parent.depends).map_err(bad)?.0);
                // A group the base satisfies is not carried; one nothing installed satisfies (a
                // broken node, a provider outside dpkg) has nothing to pin.
                let (os, above): (Vec<_>, Vec<_>) =
                    groups.iter().partition(|g| self.base.iter().any(|b| g.iter().any(|r| satisfies(b, r, self.arch))));
                self.left.borrow_mut().extend(os.iter().filter_map(|g| self.installed_for(g)));
                let names = above.iter().filter_map(|g| self.installed_for(g)).collect();
                Ok((parent.name.clone(), names))
            },
        )
    }
}
