//! A node's packages: the bundle's packages applied with the host's package manager, the
//! installed set before and after, and the way back.
//!
//! The bundle's set for this host is every package it carries for the host's architecture (or
//! `all`), each at exactly its locked version: what the build resolved and tested is what is
//! installed, dependencies included. Before anything changes the installed set is snapshotted
//! and every package the change would upgrade, downgrade or remove must have its
//! before-version in a view this root retains (else the change could not be undone; refused
//! unless accepted). After the change the installed versions must equal the lock. A restore
//! puts every changed package back at its before-version and removes what was new, from the
//! retained views, and checks the result against the snapshot.
//!
//! apt (Debian, Ubuntu: `apt`), dnf (RHEL and its rebuilds) and zypper (SLES: both in `rpm`);
//! the bundle decides which (its debs or its rpms), and a node uses the views of that kind.

mod apt;
mod rpm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::bundle::manifest::Artifact;
use crate::bundle::manifest::VerifiedManifest;
use crate::failure::{Class, Classify};
pub use apt::Apt;

/// Seconds to wait for the dpkg lock another package manager holds, unless told otherwise
/// (`apply --lock-timeout`; a rollback and `validate --commit` always wait this long).
pub const DEFAULT_LOCK_TIMEOUT: u64 = 300;

/// Installed packages by name, with their versions.
pub type PackageSet = BTreeMap<String, String>;

#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("cannot run `{tool}` (is it installed?)")]
    Spawn {
        tool: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed ({}):\n{output}", status.map_or_else(|| "killed".to_owned(), |c| format!("exit {c}")))]
    Apt { what: String, status: Option<i32>, output: String },
    /// apt found dependencies of the bundle's packages that nothing it can see provides: the
    /// bundle does not carry them and the host does not have them.
    #[error(
        "{what}: the bundle's packages depend on what it does not carry and this host does not have: {}; lock the \
         `[[deb]]` entry with `resolve = true` to carry their dependency closure (or name the missing packages), then \
         build again. apt said:\n{output}",
        missing.join(", ")
    )]
    Missing { what: String, missing: Vec<String>, output: String },
    #[error("`{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A view's index that its format's parser cannot read.
    #[error("`{}` cannot be read: {detail}", path.display())]
    Index { path: PathBuf, detail: String },
    #[error(
        "after the change, installed versions differ from the lock: {}",
        mismatches.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    NotExact { mismatches: Vec<Change> },
    #[error(
        "these packages could not be put back as they were: {}",
        mismatches.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    NotRestored { mismatches: Vec<Change> },
}

impl Classify for PackageError {
    fn class(&self) -> Class {
        match self {
            PackageError::Spawn { .. }
            | PackageError::Apt { .. }
            | PackageError::Missing { .. }
            | PackageError::Io { .. }
            | PackageError::Index { .. }
            | PackageError::NotExact { .. }
            | PackageError::NotRestored { .. } => Class::Runtime,
        }
    }
}

/// One package to reach: at `version`, or removed (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub version: Option<String>,
    /// Carried only as what another carried package depends on: installed as automatic (as
    /// apt marks what it pulls in), so `apt autoremove` treats it as apt would.
    pub dependency: bool,
}

impl Wanted {
    /// `name` at `version` (or removed), as the host had it: no mark changes.
    pub fn put_back(name: &str, version: Option<&String>) -> Self {
        Self { name: name.to_owned(), version: version.cloned(), dependency: false }
    }
}

/// A package's version before and after (`None`: not installed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let before = self.before.as_deref().unwrap_or("(new)");
        let after = self.after.as_deref().unwrap_or("(removed)");
        write!(f, "{} {before} → {after}", self.name)
    }
}

/// Changes as a record lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installed: Vec<Change>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgraded: Vec<Change>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downgraded: Vec<Change>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<Change>,
}

impl Changes {
    pub fn of(list: &[Change]) -> Self {
        let mut out = Self::default();
        for c in list {
            let bucket = match (&c.before, &c.after) {
                (None, Some(_)) => &mut out.installed,
                (Some(_), None) => &mut out.removed,
                (Some(b), Some(a)) if newer(a, b) => &mut out.upgraded,
                (Some(_), Some(_)) => &mut out.downgraded,
                (None, None) => continue,
            };
            bucket.push(c.clone());
        }
        out
    }

    pub fn all(&self) -> impl Iterator<Item = &Change> {
        self.installed.iter().chain(&self.upgraded).chain(&self.downgraded).chain(&self.removed)
    }

    pub fn is_empty(&self) -> bool {
        self.all().next().is_none()
    }

    /// `3 installed, 1 upgraded, …`: the counts that are not zero.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = [
            (self.installed.len(), "installed"),
            (self.upgraded.len(), "upgraded"),
            (self.downgraded.len(), "downgraded"),
            (self.removed.len(), "removed"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
        if parts.is_empty() { "no package changed".to_owned() } else { parts.join(", ") }
    }
}

/// Whether version `a` sorts after `b`: as Debian orders versions, or where one is not a
/// Debian version (rpm's `^`), as rpm does (`rpmvercmp` on `[EPOCH:]VERSION-RELEASE`).
pub fn newer(a: &str, b: &str) -> bool {
    match (a.parse::<debversion::Version>(), b.parse::<debversion::Version>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => rpm_version::Evr::parse(a) > rpm_version::Evr::parse(b),
    }
}

/// The changes from `before` to `after`.
pub fn diff(before: &PackageSet, after: &PackageSet) -> Vec<Change> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    names
        .into_iter()
        .filter(|n| before.get(*n) != after.get(*n))
        .map(|n| Change { name: n.clone(), before: before.get(n).cloned(), after: after.get(n).cloned() })
        .collect()
}

/// The packages a bundle carries for `arch`, each at its locked version.
pub fn carried(manifest: &VerifiedManifest, arch: &str) -> Vec<Wanted> {
    let mut out: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for a in &manifest.artifacts {
        match a {
            Artifact::Deb(d) if d.architecture == arch || d.architecture == "all" => {
                out.insert(d.name.clone(), (d.version.clone(), !d.required_by.is_empty()));
            }
            Artifact::Rpm(r) if r.architecture == arch || r.architecture == "noarch" => {
                out.insert(r.name.clone(), (r.evr(), !r.required_by.is_empty()));
            }
            _ => {}
        }
    }
    out.into_iter().map(|(name, (version, dependency))| Wanted { name, version: Some(version), dependency }).collect()
}

/// A change that failed: why, and what putting the host back did (or why it failed too).
pub struct Failed {
    pub error: PackageError,
    pub restored: Result<Vec<Change>, PackageError>,
}

/// What applying would do, and whether it can be undone.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub changes: Changes,
    /// Changed packages whose before-version is in no view this root retains.
    pub unrestorable: Vec<Change>,
    /// The package manager's own simulation (`apt-get -s`, dnf's test transaction, `zypper
    /// --dry-run`).
    #[serde(skip)]
    pub simulation: String,
}

/// What airlock asks of a node's package manager: apt and dpkg (`packages/apt`), dnf or zypper
/// and rpm (`packages/rpm`), each with its own tools and the index parser its format has
/// (`deb822-fast` for `Packages`, `rpmmd` for `primary.xml`).
trait PackageManager {
    /// The area of a bundle tree whose views it installs from: `debs` or `rpms`.
    fn area(&self) -> &'static str;

    /// Every installed package of `arch` (or of no architecture), by name, with its version.
    fn installed(&self, arch: &str) -> Result<PackageSet, PackageError>;

    /// Packages present but not settled (dpkg's half-installed, unpacked, half-configured,
    /// awaiting or pending triggers, or marked for reinstallation), by name, with the state in
    /// words: what `--adopt` must not take as installed. rpm has no such states.
    fn unsettled(&self, _arch: &str) -> Result<Vec<(String, String)>, PackageError> {
        Ok(Vec::new())
    }

    /// The manager's own simulation of reaching `wanted` from `views`, and the changes it makes.
    fn simulate(&self, views: &[PathBuf], wanted: &[Wanted], arch: &str)
    -> Result<(String, Vec<Change>), PackageError>;

    /// Install, upgrade, downgrade or remove to reach `wanted` from `views`: the manager's words.
    fn apply(&self, views: &[PathBuf], wanted: &[Wanted], arch: &str) -> Result<String, PackageError>;

    /// `(name, version)` of every package the views hold, read from their indexes.
    fn available(&self, views: &[PathBuf]) -> Result<BTreeSet<(String, String)>, PackageError>;

    /// The installed packages marked as installed automatically (apt's `extended_states`).
    fn automatic(&self) -> Result<BTreeSet<String>, PackageError> {
        Ok(BTreeSet::new())
    }

    /// Mark `names` as installed automatically (as dependencies).
    fn mark_automatic(&self, _names: &[String]) -> Result<(), PackageError> {
        Ok(())
    }

    /// The dependencies of `parents` (packages of `view`) on `name` that `version` would not
    /// meet, as `PARENT: RELATION`. A manager without the check names that it has none.
    fn unmet(
        &self,
        _view: &Path,
        _parents: &[String],
        name: &str,
        _version: &str,
    ) -> Result<Vec<String>, PackageError> {
        Ok(vec![format!("{name}: this package manager's dependencies are not checked here")])
    }
}

/// A node's package manager, its private state under the site root.
pub struct Node {
    manager: Box<dyn PackageManager>,
    pub arch: String,
    root: PathBuf,
}

impl Node {
    /// The node for `manifest`: apt for a bundle of debs, dnf or zypper for a bundle of rpms;
    /// one that carries no packages needs no package manager (a bundle of images, models and
    /// files applies on any host), and changes none unless `host_packages` (a rollback that
    /// must put back what the current bundle changed: the host's own manager).
    pub fn for_manifest(root: &Path, lock_timeout: u64, manifest: &VerifiedManifest) -> Result<Self, PackageError> {
        Self::choose(root, lock_timeout, manifest, false)
    }

    /// As `for_manifest`, but a manifest without packages gets the host's package manager
    /// (dpkg's apt where there is one, else dnf or zypper).
    pub fn for_host(root: &Path, lock_timeout: u64, manifest: &VerifiedManifest) -> Result<Self, PackageError> {
        Self::choose(root, lock_timeout, manifest, true)
    }

    fn choose(root: &Path, lock_timeout: u64, manifest: &VerifiedManifest, host: bool) -> Result<Self, PackageError> {
        let debs = manifest.artifacts.iter().any(|a| matches!(a, Artifact::Deb(_)));
        let rpms = manifest.artifacts.iter().any(|a| matches!(a, Artifact::Rpm(_)));
        let here = root.to_owned();
        let apt = || {
            Ok(Self { manager: Box::new(Apt::new(root, lock_timeout)), arch: Apt::architecture()?, root: here.clone() })
        };
        let rpm = || {
            Ok(Self { manager: Box::new(rpm::Rpm::new(root)?), arch: rpm::Rpm::architecture()?, root: here.clone() })
        };
        match (debs, rpms) {
            (true, _) => apt(),
            (false, true) => rpm(),
            (false, false) if host && Apt::architecture().is_ok() => apt(),
            (false, false) if host => rpm(),
            (false, false) => {
                Ok(Self { manager: Box::new(Apt::new(root, lock_timeout)), arch: String::new(), root: here.clone() })
            }
        }
    }

    /// The site root the node keeps its state under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The area of a bundle tree whose view this node installs from: `debs` or `rpms`.
    pub fn area(&self) -> &'static str {
        self.manager.area()
    }

    pub fn installed(&self) -> Result<PackageSet, PackageError> {
        self.manager.installed(&self.arch)
    }

    pub fn unsettled(&self) -> Result<Vec<(String, String)>, PackageError> {
        self.manager.unsettled(&self.arch)
    }

    /// The dependencies of `parents` (carried in `view`) on `name` that the installed
    /// `version` does not meet (empty: all met).
    pub fn unmet(
        &self,
        view: &Path,
        parents: &[String],
        name: &str,
        version: &str,
    ) -> Result<Vec<String>, PackageError> {
        self.manager.unmet(view, parents, name, version)
    }

    fn run(&self, views: &[PathBuf], wanted: &[Wanted]) -> Result<String, PackageError> {
        self.manager.apply(views, wanted, &self.arch)
    }

    /// What reaching `wanted` from `view` would change, and what of that no retained view
    /// (`restore_views`) could put back.
    pub fn plan(&self, view: &Path, wanted: &[Wanted], restore_views: &[PathBuf]) -> Result<Plan, PackageError> {
        if wanted.is_empty() {
            return Ok(Plan { changes: Changes::default(), unrestorable: Vec::new(), simulation: String::new() });
        }
        let (simulation, changes) = self.manager.simulate(&[view.to_owned()], wanted, &self.arch)?;
        let available = self.manager.available(restore_views)?;
        let unrestorable = changes
            .iter()
            .filter(|c| c.before.as_ref().is_some_and(|b| !available.contains(&(c.name.clone(), b.clone()))))
            .cloned()
            .collect();
        Ok(Plan { changes: Changes::of(&changes), unrestorable, simulation })
    }

    /// Reach `wanted` from `views`: the changes made. When apt fails, or the versions then
    /// installed are not the ones wanted, the before set is put back from `restore_views`
    /// and the error says what went wrong (and, if the restore failed too, that).
    pub fn apply(
        &self,
        views: &[PathBuf],
        wanted: &[Wanted],
        restore_views: &[PathBuf],
    ) -> Result<Vec<Change>, Failed> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let unchanged = |error| Failed { error, restored: Ok(Vec::new()) };
        let before = self.installed().map_err(unchanged)?;
        let automatic = self.manager.automatic().unwrap_or_else(|e| {
            tracing::warn!("which packages are installed automatically cannot be read: {e}");
            BTreeSet::new()
        });
        let applied = self.run(views, wanted);
        let after = self.installed().map_err(unchanged)?;
        let changes = diff(&before, &after);
        if applied.is_ok() {
            self.keep_automatic(wanted, &before, &automatic);
        }
        let failure = if let Err(e) = applied {
            Some(e)
        } else {
            let mismatches: Vec<Change> = wanted
                .iter()
                .filter(|w| after.get(&w.name) != w.version.as_ref())
                .map(|w| Change { name: w.name.clone(), before: w.version.clone(), after: after.get(&w.name).cloned() })
                .collect();
            (!mismatches.is_empty()).then_some(PackageError::NotExact { mismatches })
        };
        match failure {
            None => Ok(changes),
            Some(e) => {
                tracing::warn!("{e}; restoring the packages as they were");
                Err(Failed { error: e, restored: self.restore(&changes, restore_views) })
            }
        }
    }

    /// The carried dependencies new here or automatic before marked automatic again: naming
    /// each package to reach its exact version made it manual, which apt would not have.
    fn keep_automatic(&self, wanted: &[Wanted], before: &PackageSet, automatic: &BTreeSet<String>) {
        let names: Vec<String> = wanted
            .iter()
            .filter(|w| w.dependency && w.version.is_some())
            .filter(|w| !before.contains_key(&w.name) || automatic.contains(&w.name))
            .map(|w| w.name.clone())
            .collect();
        if let Err(e) = self.manager.mark_automatic(&names) {
            tracing::warn!("the carried dependencies could not be marked as installed automatically: {e}");
        }
    }

    /// Put every package `changes` touched back at its before-version (removing what was
    /// new), from `views`; then check the installed set says so.
    pub fn restore(&self, changes: &[Change], views: &[PathBuf]) -> Result<Vec<Change>, PackageError> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let before = self.installed()?;
        let wanted: Vec<Wanted> = changes.iter().map(|c| Wanted::put_back(&c.name, c.before.as_ref())).collect();
        self.run(views, &wanted)?;
        let after = self.installed()?;
        let mismatches: Vec<Change> = changes
            .iter()
            .filter(|c| after.get(&c.name) != c.before.as_ref())
            .map(|c| Change { name: c.name.clone(), before: c.before.clone(), after: after.get(&c.name).cloned() })
            .collect();
        if !mismatches.is_empty() {
            return Err(PackageError::NotRestored { mismatches });
        }
        Ok(diff(&before, &after))
    }
}

/// Each view's index file `name` that exists, opened (a view without one holds no packages of
/// that kind).
fn indexes<'a>(
    views: &'a [PathBuf],
    name: &'a str,
) -> impl Iterator<Item = Result<(PathBuf, std::io::BufReader<std::fs::File>), PackageError>> + 'a {
    views.iter().filter_map(move |view| {
        let path = view.join(name);
        match std::fs::File::open(&path) {
            Ok(f) => Some(Ok((path, std::io::BufReader::new(f)))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => Some(Err(PackageError::Io { path, source })),
        }
    })
}

/// An I/O error at `path`, as a package error.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError {
    let path = path.to_owned();
    move |source| PackageError::Io { path, source }
}

/// A tool's standard output; its exit status and the last lines of what it said on failure.
pub(super) fn output(tool: &str, command: &mut Command) -> Result<String, PackageError> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| PackageError::Spawn { tool: tool.to_owned(), source })?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(PackageError::Apt { what: tool.to_owned(), status: out.status.code(), output: tail(&text) });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last lines of a tool's output: where apt, dpkg, dnf and zypper say what went wrong.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> PackageSet {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn changes_are_sorted_by_what_they_do_in_debian_version_order() {
        let before = set(&[("a", "1.0"), ("b", "2.0~rc1"), ("c", "1:0.9"), ("gone", "1")]);
        let after = set(&[("a", "1.0"), ("b", "2.0"), ("c", "5.0"), ("new", "3")]);
        let changes = Changes::of(&diff(&before, &after));
        let names = |v: &[Change]| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&changes.installed), ["new"]);
        // `~` sorts before the release; an epoch outranks any upstream version.
        assert_eq!(names(&changes.upgraded), ["b"]);
        assert_eq!(names(&changes.downgraded), ["c"]);
        assert_eq!(names(&changes.removed), ["gone"]);
        assert_eq!(changes.summary(), "1 installed, 1 upgraded, 1 downgraded, 1 removed");
    }
}
