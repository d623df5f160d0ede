//! `[[deb]]` entries: packages from apt repositories. `InRelease` (or `Release` +
//! `Release.gpg`) is verified against the spec's keyring with `OpenPGP` (the `pgp` crate); each
//! `Packages` index is verified by the Release's SHA256 and size, compressed and decompressed,
//! and read as a stream (`index`); the requested packages, and with `resolve = true` their
//! dependency closure (`closure`), are downloaded and verified by their SHA256 and Size. An
//! unsigned repository is refused unless the spec says `allow_unsigned = true`.

mod archive;
mod closure;
pub mod freeze;
mod index;
mod news;

use archive::{Distro, load, read_error};

pub use index::{BadRelations, BadStanza};
pub(crate) use news::debian_security;
pub use news::{DebNews, DebScan, newer};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use closure::{Chosen, Request, Universe};
use deb822_fast::Paragraph;
use index::{Index, Pkg};

use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, DebArtifact};
use crate::bundle::pins::deb_member;
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Wanted, blocking};
use crate::member_path::MemberPath;
use crate::spec::lock::{LockFile, LockedBase, LockedDeb};
use crate::spec::{DebPin, DebSpec};

#[derive(Debug, thiserror::Error)]
pub enum DebError {
    #[error("keyring `{}`: {detail}", path.display())]
    Keyring { path: PathBuf, detail: String },
    #[error("{url}: the signature does not verify with keyring `{}` ({detail})", keyring.display())]
    Signature { url: String, keyring: PathBuf, detail: String },
    #[error("{repo}: suite `{suite}` is unsigned and the spec does not say `allow_unsigned = true`")]
    Unsigned { repo: String, suite: String },
    #[error("{repo}: `[[deb]]` needs `keyring` to verify the repository (or `allow_unsigned = true`)")]
    NoKeyring { repo: String },
    #[error("{url}: {detail}")]
    Index { url: String, detail: String },
    /// A paragraph of the index at `url` that cannot be read (shown, not chained).
    #[error("{url}: {stanza}")]
    Stanza { url: String, stanza: index::BadStanza },
    #[error("{url}: expected {what} {expected}, got {actual}")]
    Mismatch { url: String, what: &'static str, expected: String, actual: String },
    #[error(
        "{repo} {suite}: the Release expired at {until} (a stale or replayed archive); `allow_expired = true` accepts it"
    )]
    Expired { repo: String, suite: String, until: String },
    #[error("{repo} {suite}: `{package}` for {arch} is not in the repository ({available})")]
    NotFound { repo: String, suite: String, package: String, arch: String, available: String },
    #[error("base status file `{}`: {detail}", path.display())]
    Base { path: PathBuf, detail: String },
    #[error("the {arch} dependency closure cannot be made: {detail}")]
    Unsolvable { arch: String, detail: String },
}

impl Classify for DebError {
    fn class(&self) -> Class {
        match self {
            // A signature or digest that does not hold.
            DebError::Signature { .. }
            | DebError::Unsigned { .. }
            | DebError::Mismatch { .. }
            | DebError::Expired { .. } => Class::Verification,
            DebError::NoKeyring { .. }
            | DebError::Keyring { .. }
            | DebError::Index { .. }
            | DebError::Stanza { .. }
            | DebError::NotFound { .. }
            | DebError::Base { .. }
            | DebError::Unsolvable { .. } => Class::Runtime,
        }
    }
}

/// Every `[[deb]]` entry pinned. Entries of one architecture are resolved together: a vendor
/// repository's packages may depend on the distribution archive's, and a package one entry
/// carries satisfies another's dependency.
pub async fn resolve(sources: &Sources<'_>) -> Result<(Vec<LockedDeb>, Vec<LockedBase>), SourceError> {
    let entries: Vec<&DebSpec> = sources.spec.spec.deb.iter().map(toml::Spanned::get_ref).collect();
    let (mut loaded, mut distros) = (Vec::new(), Vec::new());
    for entry in &entries {
        let (indexes, distro) = load(sources, entry).await?;
        loaded.push(Arc::new(indexes));
        distros.push(distro);
    }
    let arches: BTreeSet<&str> = entries.iter().map(|e| e.arch.as_str()).collect();
    let (mut out, mut bases) = (Vec::new(), Vec::new());
    for arch in arches {
        let group: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].arch == arch).collect();
        let (locked, base) = resolve_arch(sources, &entries, &loaded, &distros, &group).await?;
        out.extend(locked);
        bases.extend(base);
    }
    bases.sort_by(|a: &LockedBase, b| a.path.cmp(&b.path));
    bases.dedup();
    Ok((out, bases))
}

/// The packages of every index of `group`'s entries for the entries' architecture (and
/// `all`), read as a stream on the blocking pool.
async fn universe(entries: &[&DebSpec], loaded: &[Arc<Vec<Index>>], group: &[usize]) -> Result<Universe, DebError> {
    let arch = entries[group[0]].arch.clone();
    let work: Vec<(usize, Arc<Vec<Index>>)> = group.iter().map(|&i| (i, loaded[i].clone())).collect();
    let pkgs = blocking(move || {
        let mut pkgs = Vec::new();
        for (source, indexes) in work {
            for index in indexes.iter() {
                index::paragraphs(index, |p| {
                    if let Some(pkg) = Pkg::from_paragraph(&p, source)?
                        && (pkg.architecture == arch || pkg.architecture == "all")
                    {
                        pkgs.push(pkg);
                    }
                    Ok(())
                })
                .map_err(|e| read_error(&index.url, e))?;
            }
        }
        Ok::<_, DebError>(pkgs)
    })
    .await?;
    Ok(Universe::new(pkgs))
}

/// The target's base: its dpkg status files (with their digests, for the lock), or with
/// none the suites' `Priority: required`.
async fn base(
    sources: &Sources<'_>,
    entries: &[&DebSpec],
    universe: &Universe,
    standard: bool,
) -> Result<(Vec<Pkg>, Vec<LockedBase>), DebError> {
    let mut base = Vec::new();
    let mut files = Vec::new();
    let named: BTreeSet<&PathBuf> = entries.iter().filter_map(|e| e.base_status.as_ref()).collect();
    if named.is_empty() {
        let arch = &entries[0].arch;
        return Ok((if standard { universe.standard(arch) } else { universe.required(arch) }, files));
    }
    for name in named {
        let path = sources.spec.base_dir().join(name);
        let status = path.clone();
        let read = blocking(move || {
            let file = std::fs::File::open(&status).map_err(|e| e.to_string())?;
            let mut hashing = crate::digest::HashingReader::new(file);
            let pkgs = index::read_status(&mut hashing).map_err(|e| e.to_string())?;
            std::io::copy(&mut hashing, &mut std::io::sink()).map_err(|e| e.to_string())?;
            Ok::<_, String>((pkgs, hashing.finish().0))
        })
        .await;
        let (pkgs, sha256) = read.map_err(|detail| DebError::Base { path, detail })?;
        base.extend(pkgs);
        files.push(LockedBase { path: name.display().to_string(), sha256 });
    }
    Ok((base, files))
}

async fn resolve_arch(
    sources: &Sources<'_>,
    entries: &[&DebSpec],
    loaded: &[Arc<Vec<Index>>],
    distros: &[Distro],
    group: &[usize],
) -> Result<(Vec<LockedDeb>, Vec<LockedBase>), SourceError> {
    let universe = universe(entries, loaded, group).await?;
    let arch = entries[group[0]].arch.as_str();
    // What each entry asks for, from its own repository's indexes.
    let mut roots = Vec::new();
    for &i in group {
        let entry = entries[i];
        for wanted in entry.packages.iter().chain(&entry.dependencies) {
            let pick = universe.named(&wanted.name).find(|&p| {
                universe.pkgs[p].source == i
                    && wanted.version.as_ref().is_none_or(|v| universe.pkgs[p].version.to_string() == *v)
            });
            let Some(pick) = pick else {
                let versions: BTreeSet<String> = universe
                    .named(&wanted.name)
                    .filter(|&p| universe.pkgs[p].source == i)
                    .map(|p| universe.pkgs[p].version.to_string())
                    .collect();
                let available = if versions.is_empty() {
                    "no such package".to_owned()
                } else {
                    format!("it has {}", versions.into_iter().collect::<Vec<_>>().join(", "))
                };
                return Err(DebError::NotFound {
                    repo: entry.repo.trim_end_matches('/').to_owned(),
                    suite: entry.suite.clone(),
                    package: wanted.to_string(),
                    arch: entry.arch.clone(),
                    available,
                }
                .into());
            };
            roots.push((pick, entry.resolve, wanted));
        }
    }
    let resolving: Vec<&DebSpec> = group.iter().map(|&i| entries[i]).filter(|e| e.resolve).collect();
    let (base, base_files) = if resolving.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        base(sources, &resolving, &universe, false).await?
    };
    let request = Request {
        roots: roots.iter().map(|&(p, follow, _)| (p, follow)).collect(),
        base: &base,
        arch,
        certain_only: false,
    };
    let chosen = closure::resolve(&universe, &request)
        .map_err(|e| DebError::Unsolvable { arch: arch.to_owned(), detail: e.to_string() })?;
    if !resolving.is_empty() {
        tracing::info!(
            "{arch}: {} packages requested, {} in the closure, {} in the base",
            roots.len(),
            chosen.len(),
            base.len()
        );
    }
    let stanzas = stanzas(entries, loaded, &universe, &chosen).await?;
    let mut out = Vec::new();
    for (c, stanza) in chosen.iter().zip(stanzas) {
        let pkg = &universe.pkgs[c.pkg];
        let entry = entries[pkg.source];
        // The spec's own words for a requested package; the exact pin for a dependency.
        let package = match roots.iter().find(|(p, _, _)| *p == c.pkg) {
            Some((_, _, wanted)) => (*wanted).clone(),
            None => DebPin { name: pkg.name.clone(), version: Some(pkg.version.to_string()) },
        };
        // A baseline's pinned dependency lists what it is carried for, as a closure's does.
        let required_by = if entry.dependencies.iter().any(|d| d.name == pkg.name) {
            dependents(&universe, &chosen, c.pkg, arch)
        } else {
            c.required_by.iter().cloned().collect()
        };
        let mut pinned = locked(entry, package, &stanza, required_by)?;
        (pinned.origin, pinned.codename) = (distros[pkg.source].origin.clone(), distros[pkg.source].codename.clone());
        out.push(pinned);
    }
    // Every package of the closure into the cache, verified, `--jobs` at a time with progress.
    let wanted: Vec<Wanted> = out.iter().map(wanted).collect();
    sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    Ok((out, base_files))
}

/// Where a locked package is downloaded from, and what it must be.
fn wanted(d: &LockedDeb) -> Wanted {
    Wanted {
        url: format!("{}/{}", d.repo.trim_end_matches('/'), d.filename),
        sha256: d.sha256,
        size: Some(d.size),
        bearer: None,
        what: format!("deb {}", d.package),
    }
}

/// The upstream stanzas of the chosen packages, from a second streaming pass over the
/// indexes they came from (cheaper than keeping 60 000 stanzas for the few hundred chosen).
/// The chosen packages whose `Pre-Depends` or `Depends` `dep` satisfies, by name.
fn dependents(universe: &Universe, chosen: &[Chosen], dep: usize, arch: &str) -> Vec<String> {
    let target = &universe.pkgs[dep];
    let mut out: BTreeSet<String> = BTreeSet::new();
    for parent in chosen.iter().map(|c| &universe.pkgs[c.pkg]).filter(|p| p.name != target.name) {
        let groups = [&parent.pre_depends, &parent.depends]
            .into_iter()
            .filter_map(|text| index::relations(text).ok())
            .flat_map(|r| r.0);
        if groups.into_iter().any(|g| g.iter().any(|r| closure::satisfies(target, r, arch))) {
            out.insert(parent.name.clone());
        }
    }
    out.into_iter().collect()
}

async fn stanzas(
    entries: &[&DebSpec],
    loaded: &[Arc<Vec<Index>>],
    universe: &Universe,
    chosen: &[Chosen],
) -> Result<Vec<Paragraph>, DebError> {
    let keys: Vec<(usize, String, String, String)> = chosen
        .iter()
        .map(|c| &universe.pkgs[c.pkg])
        .map(|p| (p.source, p.name.clone(), p.version.to_string(), p.architecture.clone()))
        .collect();
    let wanted: BTreeSet<(usize, String, String, String)> = keys.iter().cloned().collect();
    let sources: BTreeSet<usize> = keys.iter().map(|k| k.0).collect();
    let work: Vec<(usize, Arc<Vec<Index>>)> = sources.into_iter().map(|i| (i, loaded[i].clone())).collect();
    let found = blocking(move || {
        let mut found: BTreeMap<(usize, String, String, String), Paragraph> = BTreeMap::new();
        for (source, indexes) in work {
            for index in indexes.iter() {
                index::paragraphs(index, |p| {
                    let field = |k: &str| p.get(k).unwrap_or_default().trim().to_owned();
                    let Ok(version) = field("Version").parse::<debversion::Version>() else { return Ok(()) };
                    let key = (source, field("Package"), version.to_string(), field("Architecture"));
                    if wanted.contains(&key) {
                        found.entry(key).or_insert(p);
                    }
                    Ok(())
                })
                .map_err(|e| read_error(&index.url, e))?;
            }
        }
        Ok::<_, DebError>((found, keys))
    })
    .await?;
    let (mut found, keys) = found;
    keys.into_iter()
        .map(|k| {
            found.remove(&k).ok_or_else(|| DebError::Index {
                url: entries[k.0].repo.clone(),
                detail: format!("`{} {}` changed between two reads of the same index", k.1, k.2),
            })
        })
        .collect()
}

/// One chosen package pinned by its stanza's Filename, SHA256 and Size (downloaded and
/// verified by the caller).
fn locked(
    entry: &DebSpec,
    package: DebPin,
    stanza: &Paragraph,
    required_by: Vec<String>,
) -> Result<LockedDeb, DebError> {
    let repo = entry.repo.trim_end_matches('/');
    let field = |k: &str| {
        stanza
            .get(k)
            .map(|v| v.trim().to_owned())
            .ok_or_else(|| DebError::Index { url: repo.to_owned(), detail: format!("`{package}` has no `{k}` field") })
    };
    // Relative to the repository's root; flat repositories often write `./name.deb`.
    let filename = field("Filename")?.trim_start_matches("./").to_owned();
    let size: u64 = field("Size")?
        .parse()
        .map_err(|_| DebError::Index { url: repo.to_owned(), detail: format!("`{package}`: bad Size") })?;
    let sha256: Sha256 = field("SHA256")?.parse().map_err(|e: crate::digest::DigestParseError| DebError::Index {
        url: repo.to_owned(),
        detail: format!("`{package}`: {e}"),
    })?;
    deb_member(&filename).map_err(|e| DebError::Index { url: repo.to_owned(), detail: e.to_string() })?;
    Ok(LockedDeb {
        repo: entry.repo.clone(),
        suite: entry.suite.clone(),
        arch: entry.arch.clone(),
        architecture: field("Architecture")?,
        package,
        filename,
        sha256,
        size,
        stanza: stanza.to_string(),
        required_by,
        origin: None,
        codename: None,
    })
}

/// Every locked package (downloaded into the cache if needed) and `debs/Packages` with the
/// upstream stanzas of exactly those files.
pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let mut debs: Vec<&LockedDeb> = lock.lock.deb.iter().collect();
    if debs.is_empty() {
        return Ok(Plan::default());
    }
    debs.sort_by(|a, b| a.filename.cmp(&b.filename));
    let wanted: Vec<Wanted> = debs.iter().map(|d| wanted(d)).collect();
    let origins = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    let mut plan = Plan::default();
    for ((d, origin), want) in debs.iter().zip(origins).zip(wanted) {
        let artifact =
            DebArtifact::try_from(*d).map_err(|e| DebError::Index { url: want.url.clone(), detail: e.to_string() })?;
        plan.members.push(Member {
            path: artifact.path.clone(),
            size: d.size,
            sha256: d.sha256,
            origin: origin.into(),
            what: want.what.into(),
        });
        plan.artifacts.push(Artifact::Deb(artifact));
    }
    let index: String = debs.iter().map(|d| d.stanza.as_str()).collect::<Vec<_>>().join("\n");
    let (digest, size) = (Sha256::of_bytes(index.as_bytes()), index.len() as u64);
    let cache = sources.fetch.cache.clone();
    let origin = blocking(move || cache.put(digest, Some(size), "debs/Packages", index.as_bytes())).await?;
    let path = MemberPath::new("debs/Packages").expect("a valid member path");
    plan.members.push(Member { path, size, sha256: digest, origin: origin.into(), what: "debs/Packages".into() });
    Ok(plan)
}
