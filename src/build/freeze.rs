//! `airlock freeze NODE.json --spec SPEC --out BASE.toml`: the upgrade guide's first step on a
//! cluster that predates airlock. A node's inventory (`airlock probe --json`) and the spec that
//! names the stack give a baseline spec and its lock: every `[[deb]]` and `[[rpm]]` package the
//! spec names, and every installed package of their closure (`sources::apt::freeze`,
//! `sources::rpm::freeze`), pinned at exactly the node's version in the spec's repositories. The spec's `[[wheel]]`, `[[file]]`, `[validation]`
//! and `[[impact]]` carry over; `[[image]]` and `[[model]]` do not (they are the release's, not
//! what the node runs). Nothing is written when a version cannot be found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::BuildError;
use super::lock::{Outcome, Refresh, ensure, lock_path};
use crate::failure::{Class, Classify};
use crate::fetch::Net;
use crate::sources::Sources;
use crate::sources::apt::debian_security;
use crate::sources::apt::freeze::Frozen;
use crate::sources::rpm::freeze::Frozen as FrozenRpms;

/// A node's installed packages: by manager (`dpkg`, `rpm`), then architecture, then name →
/// version.
pub type Installed = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;
use crate::spec::lock::LockFile;

/// The baseline's version when none is given: below any release of the stack.
pub const BASELINE_VERSION: &str = "0.0.0-baseline";

#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    #[error(
        "`{}` is not beside the spec `{}`: the spec's relative paths (keyrings, files) are relative to its directory; \
         write the baseline there",
        out.display(),
        spec.display()
    )]
    NotBeside { out: PathBuf, spec: PathBuf },
    #[error("`{}` lists no dpkg package: {detail}", node.display())]
    NoInventory { node: PathBuf, detail: String },
    #[error("`{}`: {detail}", spec.display())]
    Spec { spec: PathBuf, detail: String },
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Build(#[from] BuildError),
}

impl Classify for FreezeError {
    fn class(&self) -> Class {
        match self {
            FreezeError::NotBeside { .. } | FreezeError::NoInventory { .. } | FreezeError::Spec { .. } => Class::Usage,
            FreezeError::Write { .. } => Class::Runtime,
            FreezeError::Build(e) => e.class(),
        }
    }
}

impl From<crate::sources::SourceError> for FreezeError {
    fn from(e: crate::sources::SourceError) -> Self {
        FreezeError::Build(e.into())
    }
}

/// What was frozen and written.
#[derive(Debug, serde::Serialize)]
pub struct Baseline {
    pub spec: PathBuf,
    pub lock: PathBuf,
    pub version: String,
    /// `name=version` by entry (`REPO SUITE`): the stack and its dependencies.
    pub pinned: BTreeMap<String, Vec<String>>,
    /// Which of the pinned are the stack's dependencies (`[[deb]] dependencies`): the
    /// distribution may patch them without blocking adoption.
    pub dependencies: Vec<String>,
    /// Installed packages the stack depends on that the operating system's base covers (`name
    /// version`): left to the distribution, not in the baseline.
    pub left_to_os: Vec<String>,
    /// Named by the spec, not installed on the node: not in the baseline.
    pub absent: Vec<String>,
    /// The lock's digest.
    pub lock_sha256: String,
}

/// Freeze the node's `installed` packages (read from `node`) with `sources`' spec into `out`
/// and its lock.
pub fn freeze(
    sources: &Sources<'_>,
    net: &Net,
    node: &Path,
    installed: &Installed,
    out: &Path,
    version: Option<&semver::Version>,
) -> Result<Baseline, FreezeError> {
    let spec = sources.spec;
    let beside = |p: &Path| {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::canonicalize(dir).ok()
    };
    if beside(out).is_none() || beside(out) != beside(&spec.path) {
        return Err(FreezeError::NotBeside { out: out.to_owned(), spec: spec.path.clone() });
    }
    let empty = BTreeMap::new();
    let (debs, rpms) = (installed.get("dpkg").unwrap_or(&empty), installed.get("rpm").unwrap_or(&empty));
    let wanted = [(!spec.spec.deb.is_empty(), debs, "dpkg"), (!spec.spec.rpm.is_empty(), rpms, "rpm")];
    if let Some((_, _, manager)) = wanted.iter().find(|(named, have, _)| *named && have.is_empty()) {
        let detail = format!(
            "the spec names {manager} packages; probe the node with this airlock (`airlock probe --json` lists every \
             installed package)"
        );
        return Err(FreezeError::NoInventory { node: node.to_owned(), detail });
    }
    // Both kinds looked up before anything is said: every version no repository serves, at once.
    let (deb, rpm) = net.block_on(async {
        let deb = if spec.spec.deb.is_empty() {
            Ok(Frozen::default())
        } else {
            crate::sources::apt::freeze::freeze(sources, debs).await
        };
        let rpm = if spec.spec.rpm.is_empty() {
            Ok(FrozenRpms::default())
        } else {
            crate::sources::rpm::freeze::freeze(sources, rpms).await
        };
        (deb, rpm)
    });
    let (frozen, frozen_rpms) = match (deb, rpm) {
        (Ok(d), Ok(r)) => (d, r),
        (
            Err(crate::sources::SourceError::Unserved { packages: mut a, archives: mut x }),
            Err(crate::sources::SourceError::Unserved { packages: b, archives: y }),
        ) => {
            a.extend(b);
            x.extend(y);
            return Err(crate::sources::SourceError::Unserved { packages: a, archives: x }.into());
        }
        (Err(e), _) | (_, Err(e)) => return Err(e.into()),
    };
    let version = version.map_or_else(|| BASELINE_VERSION.to_owned(), ToString::to_string);
    let text = baseline_spec(spec.text(), &frozen, &frozen_rpms, &version, node)
        .map_err(|detail| FreezeError::Spec { spec: spec.path.clone(), detail })?;
    crate::atomic::write(out, text.as_bytes()).map_err(|source| FreezeError::Write { path: out.to_owned(), source })?;
    let lock = lock_path(out, None);
    let locked = lock_baseline(sources, net, out, &lock);
    let locked = match locked {
        Ok(l) => l,
        Err(e) => {
            // Nothing half-written: a baseline spec without its lock is not one.
            let _ = std::fs::remove_file(out);
            return Err(e);
        }
    };
    let mut pinned: BTreeMap<String, Vec<String>> = frozen
        .entries
        .iter()
        .map(|e| {
            let archive = format!("{} {}", e.spec.repo.trim_end_matches('/'), e.spec.suite);
            (archive, e.stack.iter().chain(&e.dependencies).map(ToString::to_string).collect())
        })
        .collect();
    let dependencies =
        frozen.entries.iter().flat_map(|e| e.dependencies.iter().map(|p| p.name.clone())).collect::<Vec<_>>();
    pinned
        .extend(frozen_rpms.entries.iter().map(|(e, pins)| (e.url(), pins.iter().map(ToString::to_string).collect())));
    let mut absent = frozen.absent;
    absent.extend(frozen_rpms.absent);
    Ok(Baseline {
        spec: out.to_owned(),
        lock,
        version,
        pinned,
        dependencies,
        left_to_os: frozen.left_to_os.into_iter().map(|(name, version)| format!("{name} {version}")).collect(),
        absent,
        lock_sha256: locked.sha256.to_string(),
    })
}

/// `airlock lock` on the baseline spec just written.
fn lock_baseline(sources: &Sources<'_>, net: &Net, spec: &Path, lock: &Path) -> Result<LockFile, FreezeError> {
    let loaded = crate::spec::SpecFile::load(spec)
        .map_err(|e| FreezeError::Spec { spec: spec.to_owned(), detail: e.to_string() })?;
    let f = &sources.fetch;
    let fetch = crate::fetch::Fetch { cache: f.cache, jobs: f.jobs, http: f.http, reporter: f.reporter };
    let base = Sources::new(&loaded, fetch);
    let (locked, outcome) = ensure(&base, net, lock, Refresh::Always)?;
    tracing::info!("{}: {}", lock.display(), if outcome == Outcome::Written { "written" } else { "up to date" });
    Ok(locked)
}

/// The spec's text with its `[[deb]]` and `[[rpm]]` entries replaced by the frozen pins (exact,
/// no closure resolved again), `[[image]]` and `[[model]]` dropped, and the bundle's version set.
fn baseline_spec(text: &str, frozen: &Frozen, rpms: &FrozenRpms, version: &str, node: &Path) -> Result<String, String> {
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let rpm_originals: Vec<toml::Table> = match doc.remove("rpm") {
        Some(toml::Value::Array(a)) => a.into_iter().filter_map(|v| v.as_table().cloned()).collect(),
        _ => Vec::new(),
    };
    let mut rpm_entries = Vec::new();
    for (entry, pins) in &rpms.entries {
        let field = |t: &toml::Table, k: &str| t.get(k).and_then(toml::Value::as_str).unwrap_or_default().to_owned();
        let original = rpm_originals
            .iter()
            .find(|t| field(t, "baseurl") == entry.baseurl && field(t, "arch") == entry.arch)
            .ok_or_else(|| format!("no [[rpm]] entry for {}", entry.baseurl))?;
        let mut table = original.clone();
        let pins = pins.iter().map(|p| toml::Value::String(p.to_string())).collect();
        table.insert("packages".into(), toml::Value::Array(pins));
        table.insert("resolve".into(), toml::Value::Boolean(false));
        table.remove("base");
        table.remove("base_rpmdb");
        rpm_entries.push(toml::Value::Table(table));
    }
    if !rpm_entries.is_empty() {
        doc.insert("rpm".into(), toml::Value::Array(rpm_entries));
    }
    let originals: Vec<toml::Table> = match doc.remove("deb") {
        Some(toml::Value::Array(a)) => a.into_iter().filter_map(|v| v.as_table().cloned()).collect(),
        _ => Vec::new(),
    };
    doc.remove("image");
    doc.remove("model");
    let bundle = doc.get_mut("bundle").and_then(toml::Value::as_table_mut).ok_or("no [bundle] table")?;
    bundle.insert("version".into(), toml::Value::String(version.to_owned()));
    let node_name = node.file_name().map_or_else(|| node.display().to_string(), |n| n.to_string_lossy().into_owned());
    bundle.insert(
        "description".into(),
        toml::Value::String(format!("baseline: the stack {node_name} ran when it was frozen (airlock freeze)")),
    );
    let mut entries = Vec::new();
    for frozen_entry in &frozen.entries {
        let entry = &frozen_entry.spec;
        let field = |t: &toml::Table, k: &str| t.get(k).and_then(toml::Value::as_str).unwrap_or_default().to_owned();
        let same = |t: &toml::Table, repo: &str, suite: &str| {
            field(t, "repo") == repo && field(t, "suite") == suite && field(t, "arch") == entry.arch
        };
        // A security twin takes its configured entry's settings (keyring, components); Debian's
        // is an archive of its own beside the configured one.
        let configured = entry.suite.strip_suffix("-security").unwrap_or(&entry.suite);
        let original = originals
            .iter()
            .find(|t| same(t, &entry.repo, &entry.suite))
            .or_else(|| originals.iter().find(|t| same(t, &entry.repo, configured)))
            .or_else(|| {
                originals.iter().find(|t| {
                    debian_security(&field(t, "repo")).as_deref() == Some(entry.repo.as_str())
                        && same(t, &field(t, "repo"), configured)
                })
            })
            .ok_or_else(|| format!("no [[deb]] entry for {} {}", entry.repo, entry.suite))?;
        let mut table = original.clone();
        table.insert("repo".into(), toml::Value::String(entry.repo.clone()));
        table.insert("suite".into(), toml::Value::String(entry.suite.clone()));
        let list = |pins: &[crate::spec::DebPin]| {
            toml::Value::Array(pins.iter().map(|p| toml::Value::String(p.to_string())).collect())
        };
        table.insert("packages".into(), list(&frozen_entry.stack));
        table.remove("dependencies");
        if !frozen_entry.dependencies.is_empty() {
            table.insert("dependencies".into(), list(&frozen_entry.dependencies));
        }
        table.insert("resolve".into(), toml::Value::Boolean(false));
        table.remove("base_status");
        entries.push(toml::Value::Table(table));
    }
    if !entries.is_empty() {
        doc.insert("deb".into(), toml::Value::Array(entries));
    }
    let body = toml::to_string(&doc).map_err(|e| e.to_string())?;
    // The inventory's file name is the user's: escaped (a line break in it would end the
    // comment and open a table of its own in a spec that gets signed).
    let node = crate::escape::value(&node.display().to_string()).into_owned();
    Ok(format!(
        "# Written by `airlock freeze {node}`: the packages this node ran, pinned exactly (resolve = false).\n\
         # Adopt it with `airlock apply BASE.airlock --adopt`; a newer `dependencies` pin the stack still meets is accepted (docs/site/distribution-stacks.md).\n{body}"
    ))
}
