//! The dependency closure of requested packages over the loaded indexes, minus what the target
//! already has (its base).
//!
//! Hand-written, because no crate models apt's rules: `pubgrub` and `resolvo` solve one version
//! per name with version ranges, not ordered alternatives, virtual packages through `Provides`,
//! `Multi-Arch` qualifiers or a pre-installed base. The algorithm is apt's own greedy one, with
//! no backtracking: each dependency group already satisfied by the base or by a chosen package
//! costs nothing; otherwise the first alternative, in order, that has a candidate is taken —
//! the newest version of a real package satisfying the relation, else the first provider of a
//! virtual one. `Conflicts` and `Breaks` are then checked within the closure. A request apt
//! would need backtracking for is refused with the chain that led there, never half-solved.
//! Parsing (`deb822-fast`), relations (`debian-control`) and version order (`debversion`) are
//! crates.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use debian_control::lossy::Relation;
use debian_control::relations::VersionConstraint;
use debversion::Version;

use super::index::{MultiArch, Pkg, relations, show};

/// Every candidate of the loaded indexes, newest first per name, and who provides what.
pub struct Universe {
    pub pkgs: Vec<Pkg>,
    by_name: HashMap<String, Vec<usize>>,
    providers: HashMap<String, Vec<usize>>,
}

impl Universe {
    pub fn new(pkgs: Vec<Pkg>) -> Self {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        let mut providers: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, p) in pkgs.iter().enumerate() {
            by_name.entry(p.name.clone()).or_default().push(i);
            for v in &p.provides {
                providers.entry(v.name.clone()).or_default().push(i);
            }
        }
        // Newest first; among equal versions, the index loaded first (the spec's order).
        for list in by_name.values_mut() {
            list.sort_by(|&a, &b| pkgs[b].version.cmp(&pkgs[a].version).then(a.cmp(&b)));
        }
        for list in providers.values_mut() {
            list.sort_by(|&a, &b| (&pkgs[a].name, &pkgs[b].version, a).cmp(&(&pkgs[b].name, &pkgs[a].version, b)));
        }
        Self { pkgs, by_name, providers }
    }

    /// The candidates named `name`, newest first.
    pub fn named(&self, name: &str) -> impl Iterator<Item = usize> + '_ {
        self.by_name.get(name).into_iter().flatten().copied()
    }

    /// The base when the target's status file is not given: only what every minimal
    /// installation of the suite (`debootstrap --variant=minbase`) has — the newest
    /// `Priority: required` (or `Essential: yes`) package of each name and the dependencies
    /// they pull in whichever way an installer resolves them (in Debian 12, `libc6` is
    /// `optional` and there only because required packages depend on it). A dependency with
    /// alternatives (`usrmerge | usr-is-merged`) or naming a virtual package is not assumed:
    /// debootstrap took `usr-is-merged`, so `usrmerge`'s `perl` is not on a minbase system.
    pub fn required(&self, arch: &str) -> Vec<Pkg> {
        self.priority_base(arch, false)
    }

    /// The operating system as `freeze` leaves it to the distribution: the required packages,
    /// the `Priority: important` ones (a standard installation's: systemd, kmod, iproute2),
    /// and their certain closure.
    pub fn standard(&self, arch: &str) -> Vec<Pkg> {
        self.priority_base(arch, true)
    }

    fn priority_base(&self, arch: &str, important: bool) -> Vec<Pkg> {
        let mut names: Vec<&String> = self.by_name.keys().collect();
        names.sort();
        let roots: Vec<(usize, bool)> = names
            .into_iter()
            .filter_map(|n| self.named(n).next())
            .filter(|&i| self.pkgs[i].required || (important && self.pkgs[i].important))
            .map(|i| (i, true))
            .collect();
        let direct = || roots.iter().map(|&(i, _)| self.pkgs[i].clone()).collect();
        match resolve(self, &Request { roots: roots.clone(), base: &[], arch, certain_only: true }) {
            Ok(chosen) => chosen.into_iter().map(|c| self.pkgs[c.pkg].clone()).collect(),
            Err(e) => {
                tracing::warn!("the required packages' own closure cannot be made ({e}); the base is them alone");
                direct()
            }
        }
    }
}

/// Why a closure cannot be made.
#[derive(Debug, PartialEq, Eq)]
pub enum Unsolvable {
    /// `chain` runs from the requested package to the dependency that has no candidate.
    NoCandidate {
        chain: Vec<String>,
        detail: String,
    },
    Conflict {
        package: String,
        relation: String,
        with: String,
        chain: Vec<String>,
    },
    BadField {
        package: String,
        detail: String,
    },
}

impl std::fmt::Display for Unsolvable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsolvable::NoCandidate { chain, detail } => write!(f, "{}: no candidate ({detail})", chain.join(" → ")),
            Unsolvable::Conflict { package, relation, with, chain } => write!(
                f,
                "{package} conflicts with `{relation}`, which {with} satisfies (brought in by {})",
                chain.join(" → ")
            ),
            Unsolvable::BadField { package, detail } => write!(f, "{package}: {detail}"),
        }
    }
}

/// A package of the closure: why it is there.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub pkg: usize,
    /// The packages whose dependencies it satisfies; empty for a requested one.
    pub required_by: BTreeSet<String>,
    /// From a requested package down to this one, as relations.
    pub chain: Vec<String>,
}

/// What one resolution is asked: the packages requested (already picked from their entry's
/// own index), whether to follow each one's dependencies, and the target's base.
pub struct Request<'a> {
    pub roots: Vec<(usize, bool)>,
    pub base: &'a [Pkg],
    pub arch: &'a str,
    /// Follow only the dependencies every installer resolves the same way: a group of one
    /// relation that names a real package. Groups with alternatives, or naming a virtual
    /// package, are left out (what the default base may assume).
    pub certain_only: bool,
}

/// Whether every installer satisfies `group` with the same package: one relation, naming a
/// package that exists under that name.
fn is_certain(universe: &Universe, group: &[Relation]) -> bool {
    matches!(group, [only] if universe.named(&only.name).next().is_some())
}

/// Whether `p` satisfies `r`: by name (with `r`'s architecture qualifier) or through a
/// `Provides` (a versioned relation only through a versioned `Provides`).
pub(super) fn satisfies(p: &Pkg, r: &Relation, arch: &str) -> bool {
    let arch_ok = match r.archqual.as_deref() {
        None | Some("native") => true,
        // `:any` is for packages that declare they can serve any architecture.
        Some("any") => p.multi_arch == MultiArch::Allowed,
        Some(q) => p.architecture == q || (p.architecture == "all" && q == arch),
    };
    if !arch_ok {
        return false;
    }
    let holds = |v: &Version, (op, want): &(VersionConstraint, Version)| match op {
        VersionConstraint::LessThan => v < want,
        VersionConstraint::LessThanEqual => v <= want,
        VersionConstraint::Equal => v == want,
        VersionConstraint::GreaterThanEqual => v >= want,
        VersionConstraint::GreaterThan => v > want,
    };
    if p.name == r.name && r.version.as_ref().is_none_or(|c| holds(&p.version, c)) {
        return true;
    }
    p.provides.iter().any(|v| {
        v.name == r.name
            && match &r.version {
                None => true,
                Some(c) => v.version.as_ref().is_some_and(|pv| holds(pv, c)),
            }
    })
}

/// Resolve the closure. Returns the chosen packages, requested ones first in request order,
/// then the rest by name.
pub fn resolve(universe: &Universe, request: &Request<'_>) -> Result<Vec<Chosen>, Unsolvable> {
    let arch = request.arch;
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for &(pkg, follow) in &request.roots {
        let name = &universe.pkgs[pkg].name;
        if by_name.contains_key(name) {
            continue;
        }
        by_name.insert(name.clone(), chosen.len());
        chosen.push(Chosen { pkg, required_by: BTreeSet::new(), chain: vec![universe.pkgs[pkg].label()] });
        if follow {
            queue.push_back(chosen.len() - 1);
        }
    }
    let requested = chosen.len();
    let bad = |p: &Pkg, e: String| Unsolvable::BadField { package: p.label(), detail: e };
    while let Some(at) = queue.pop_front() {
        let parent = &universe.pkgs[chosen[at].pkg];
        let mut groups = relations(&parent.pre_depends).map_err(|e| bad(parent, format!("bad Pre-Depends: {e}")))?.0;
        groups.extend(relations(&parent.depends).map_err(|e| bad(parent, format!("bad Depends: {e}")))?.0);
        for group in groups {
            if request.certain_only && !is_certain(universe, &group) {
                continue;
            }
            let in_closure =
                chosen.iter().position(|c| group.iter().any(|r| satisfies(&universe.pkgs[c.pkg], r, arch)));
            if let Some(c) = in_closure {
                if c != at {
                    chosen[c].required_by.insert(parent.name.clone());
                }
                continue;
            }
            if request.base.iter().any(|b| group.iter().any(|r| satisfies(b, r, arch))) {
                continue;
            }
            let pick = group.iter().find_map(|r| {
                // A name already in the closure at a version that does not do is not replaced:
                // one version per name, as on an installed system.
                let provided = universe.providers.get(&r.name).into_iter().flatten().copied();
                universe
                    .named(&r.name)
                    .chain(provided)
                    .filter(|&i| !by_name.contains_key(&universe.pkgs[i].name))
                    .find(|&i| satisfies(&universe.pkgs[i], r, arch))
                    .map(|i| (i, r))
            });
            let mut chain = chosen[at].chain.clone();
            let Some((pkg, r)) = pick else {
                chain.push(group.iter().map(show).collect::<Vec<_>>().join(" | "));
                return Err(Unsolvable::NoCandidate {
                    chain,
                    detail: nearest(universe, request, &by_name, &chosen, &group),
                });
            };
            chain.push(show(r));
            by_name.insert(universe.pkgs[pkg].name.clone(), chosen.len());
            chosen.push(Chosen { pkg, required_by: BTreeSet::from([parent.name.clone()]), chain });
            queue.push_back(chosen.len() - 1);
        }
    }
    check_conflicts(universe, &chosen, arch)?;
    chosen[requested..].sort_by(|a, b| universe.pkgs[a.pkg].name.cmp(&universe.pkgs[b.pkg].name));
    Ok(chosen)
}

/// What there is for a group that has no candidate, for the error.
fn nearest(
    universe: &Universe,
    request: &Request<'_>,
    by_name: &BTreeMap<String, usize>,
    chosen: &[Chosen],
    group: &[Relation],
) -> String {
    let mut seen = Vec::new();
    for r in group {
        if let Some(&c) = by_name.get(&r.name) {
            seen.push(format!("{} is already in the closure", universe.pkgs[chosen[c].pkg].label()));
        }
        let versions: Vec<String> = universe.named(&r.name).map(|i| universe.pkgs[i].version.to_string()).collect();
        if !versions.is_empty() {
            seen.push(format!("{} has {}", r.name, versions.join(", ")));
        }
        if let Some(b) = request.base.iter().find(|b| b.name == r.name) {
            seen.push(format!("the base has {}", b.label()));
        }
    }
    if seen.is_empty() { "no package has or provides it".to_owned() } else { seen.join("; ") }
}

/// `Conflicts` and `Breaks` between packages of the closure (a package's conflict with what
/// it provides itself is how Debian says "only one provider at a time", not a conflict).
fn check_conflicts(universe: &Universe, chosen: &[Chosen], arch: &str) -> Result<(), Unsolvable> {
    for c in chosen {
        let p = &universe.pkgs[c.pkg];
        for field in [&p.conflicts, &p.breaks] {
            let rels =
                relations(field).map_err(|e| Unsolvable::BadField { package: p.label(), detail: e.to_string() })?;
            for r in rels.0.iter().flatten() {
                if let Some(other) =
                    chosen.iter().filter(|o| o.pkg != c.pkg).find(|o| satisfies(&universe.pkgs[o.pkg], r, arch))
                {
                    return Err(Unsolvable::Conflict {
                        package: p.label(),
                        relation: show(r),
                        with: universe.pkgs[other.pkg].label(),
                        chain: other.chain.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(stanza: &str) -> Pkg {
        let p: deb822_fast::Paragraph = stanza.parse().unwrap();
        Pkg::from_paragraph(&p, 0).unwrap().unwrap()
    }

    fn universe() -> Universe {
        Universe::new(
            [
                "Package: app\nVersion: 1.0\nArchitecture: amd64\nPre-Depends: py:any\nDepends: libfoo (>= 1.2), missing | libbar, java (>= 2), base (>= 1)",
                "Package: libfoo\nVersion: 1.1\nArchitecture: amd64\nMulti-Arch: same",
                "Package: libfoo\nVersion: 1.3\nArchitecture: amd64\nMulti-Arch: same",
                "Package: libfoo\nVersion: 2.0~rc1\nArchitecture: amd64",
                "Package: libbar\nVersion: 1\nArchitecture: amd64\nDepends: libfoo",
                "Package: jre\nVersion: 9\nArchitecture: amd64\nProvides: java (= 2.5)",
                "Package: oldjre\nVersion: 9\nArchitecture: amd64\nProvides: java",
                "Package: py\nVersion: 3.11\nArchitecture: amd64\nMulti-Arch: allowed",
                "Package: base\nVersion: 1.5\nArchitecture: all\nPriority: required",
                "Package: clash\nVersion: 1\nArchitecture: all\nConflicts: libbar",
                "Package: wants-clash\nVersion: 1\nArchitecture: all\nDepends: app, clash",
                "Package: deep\nVersion: 1\nArchitecture: all\nDepends: app, needs-new",
                "Package: needs-new\nVersion: 1\nArchitecture: all\nDepends: libfoo (>= 9) | nothing",
                "Package: self\nVersion: 1\nArchitecture: all\nProvides: mta\nConflicts: mta",
                "Package: noany\nVersion: 1\nArchitecture: all\nDepends: libbar:any",
            ]
            .into_iter()
            .map(pkg)
            .collect(),
        )
    }

    fn solve(u: &Universe, names: &[&str], base: &[Pkg]) -> Result<Vec<String>, Unsolvable> {
        let roots = names.iter().map(|n| (u.named(n).next().unwrap(), true)).collect();
        let chosen = resolve(u, &Request { roots, base, arch: "amd64", certain_only: false })?;
        Ok(chosen
            .iter()
            .map(|c| {
                let by: Vec<&str> = c.required_by.iter().map(String::as_str).collect();
                format!("{} <- {}", u.pkgs[c.pkg].label(), by.join(","))
            })
            .collect())
    }

    #[test]
    fn closure_takes_alternatives_in_order_virtuals_and_versions() {
        let u = universe();
        let base = u.required("amd64");
        assert_eq!(base.iter().map(Pkg::label).collect::<Vec<_>>(), ["base 1.5"]);
        let got = solve(&u, &["app"], &base).unwrap();
        assert_eq!(
            got,
            [
                "app 1.0 <- ",
                "jre 9 <- app",                 // versioned virtual: only the versioned Provides does
                "libbar 1 <- app",              // `missing | libbar`: the first with a candidate
                "libfoo 2.0~rc1 <- app,libbar", // newest satisfying (>= 1.2); `~` sorts before 2.0
                "py 3.11 <- app",               // `:any` through Multi-Arch: allowed
            ]
        );
        // Without the base, the base package is carried too.
        assert!(solve(&u, &["app"], &[]).unwrap().contains(&"base 1.5 <- app".to_owned()));
        // A base too old for the relation does not count: the newer one is carried.
        let old = [pkg("Package: base\nVersion: 0.9\nArchitecture: all")];
        assert!(solve(&u, &["app"], &old).unwrap().contains(&"base 1.5 <- app".to_owned()));
    }

    #[test]
    fn the_default_base_assumes_only_what_every_minimal_system_has() {
        // Debian 12's shape: a required package's dependency with alternatives, the first of
        // which pulls in perl; debootstrap --variant=minbase takes usr-is-merged instead.
        let u = Universe::new(
            [
                "Package: init-system-helpers\nVersion: 1.65\nArchitecture: all\nPriority: required\nDepends: usrmerge | usr-is-merged, perl-base",
                "Package: usrmerge\nVersion: 35\nArchitecture: all\nDepends: perl",
                "Package: usr-is-merged\nVersion: 35\nArchitecture: all",
                "Package: perl\nVersion: 5.36\nArchitecture: amd64",
                "Package: perl-base\nVersion: 5.36\nArchitecture: amd64\nPriority: required",
                "Package: dpkg\nVersion: 1.21\nArchitecture: amd64\nPriority: required\nDepends: tar, awk",
                "Package: tar\nVersion: 1.34\nArchitecture: amd64\nDepends: libacl1",
                "Package: libacl1\nVersion: 2.3\nArchitecture: amd64",
                "Package: mawk\nVersion: 1.3\nArchitecture: amd64\nProvides: awk",
            ]
            .into_iter()
            .map(pkg)
            .collect(),
        );
        let mut base: Vec<String> = u.required("amd64").iter().map(|p| p.name.clone()).collect();
        base.sort();
        // Certain: tar and what it needs. Not assumed: either alternative, perl, a provider of awk.
        assert_eq!(base, ["dpkg", "init-system-helpers", "libacl1", "perl-base", "tar"]);
    }

    #[test]
    fn failures_name_the_chain() {
        let u = universe();
        let base = u.required("amd64");
        let err = solve(&u, &["deep"], &base).unwrap_err();
        assert_eq!(
            err.to_string(),
            "deep 1 → needs-new → libfoo (>= 9) | nothing: no candidate \
             (libfoo 2.0~rc1 is already in the closure; libfoo has 2.0~rc1, 1.3, 1.1)"
        );
        let err = solve(&u, &["wants-clash"], &base).unwrap_err();
        assert!(
            matches!(&err, Unsolvable::Conflict { package, with, .. } if package == "clash 1" && with == "libbar 1"),
            "{err}"
        );
        let err = solve(&u, &["noany"], &base).unwrap_err();
        assert!(err.to_string().starts_with("noany 1 → libbar:any: no candidate"), "{err}");
        // A package conflicting with what it provides itself is fine.
        assert_eq!(solve(&u, &["self"], &base).unwrap(), ["self 1 <- "]);
    }
}
