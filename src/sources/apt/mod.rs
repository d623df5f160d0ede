//! `[[deb]]` entries: packages from apt repositories. `InRelease` (or `Release` +
//! `Release.gpg`) is verified against the spec's keyring with `OpenPGP` (the `pgp` crate); each
//! `Packages` index is verified by the Release's SHA256 and size, compressed and decompressed,
//! and read as a stream (`index`); the requested packages, and with `resolve = true` their
//! dependency closure (`closure`), are downloaded and verified by their SHA256 and Size. An
//! unsigned repository is refused unless the spec says `allow_unsigned = true`.

mod closure;
pub mod freeze;
mod index;

pub use index::{BadRelations, BadStanza};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use closure::{Chosen, Request, Universe};
use deb822_fast::Paragraph;
use index::{Compression, Index, Pkg, ReadError};

use pgp::composed::CleartextSignedMessage;

use super::keyring::Keyring;
use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, DebArtifact};
use crate::bundle::pins::deb_member;
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Http, HttpError, Wanted, blocking};
use crate::member_path::MemberPath;
use crate::spec::lock::{LockFile, LockedBase, LockedDeb};
use crate::spec::{DebPin, DebSpec};

const MAX_INDEX: u64 = 256 << 20;

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

/// The first paragraph of a `Release` file.
fn release_fields(url: &str, text: &str) -> Result<Paragraph, DebError> {
    let doc: deb822_fast::Deb822 = text
        .parse()
        .map_err(|e| DebError::Index { url: url.to_owned(), detail: format!("not a Release file: {e}") })?;
    doc.into_iter().next().ok_or_else(|| DebError::Index { url: url.to_owned(), detail: "empty Release file".into() })
}

/// The `SHA256` section of a Release file: path -> (digest, size).
fn release_sha256(release: &Paragraph) -> BTreeMap<String, (String, u64)> {
    release
        .get("SHA256")
        .map(|v| {
            v.lines()
                .filter_map(|l| {
                    let mut it = l.split_whitespace();
                    let (hash, size, path) = (it.next()?, it.next()?.parse().ok()?, it.next()?);
                    Some((path.to_owned(), (hash.to_owned(), size)))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn refuse(k: &Keyring, url: String) -> DebError {
    DebError::Signature { url, keyring: k.path.clone(), detail: "no key in it made this signature".into() }
}

/// The verified text of the suite's Release file: `InRelease` if the repository has it, else
/// `Release` with `Release.gpg`. `allow_unsigned` skips the check (logged loudly).
async fn release(http: &Http, entry: &DebSpec, base: &Path) -> Result<String, SourceError> {
    let repo = entry.repo.trim_end_matches('/');
    let dist = dist_url(entry);
    let keyring = match &entry.keyring {
        Some(k) => Some(
            Keyring::load(&base.join(k))
                .await
                .map_err(|e| DebError::Keyring { path: base.join(k), detail: e.to_string() })?,
        ),
        None if entry.allow_unsigned => None,
        None => return Err(DebError::NoKeyring { repo: repo.to_owned() }.into()),
    };
    let unsigned_warning = || tracing::warn!("{dist}: allow_unsigned = true: the Release signature is NOT checked");
    let in_release = format!("{dist}/InRelease");
    match http.fetch_small(&in_release, "*/*", None, MAX_INDEX).await {
        Ok((bytes, _)) => {
            let bad = |detail: String| DebError::Index { url: in_release.clone(), detail };
            let text = String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
            let (msg, _) =
                CleartextSignedMessage::from_string(&text).map_err(|e| bad(format!("not clearsigned: {e}")))?;
            match &keyring {
                Some(k) if !k.verifies(|p| msg.verify(p).is_ok(), |sk| msg.verify(sk).is_ok()) => {
                    return Err(refuse(k, in_release).into());
                }
                Some(_) => {}
                None => unsigned_warning(),
            }
            Ok(msg.text().to_owned())
        }
        Err(HttpError::Status { status: 404, .. }) => {
            let url = format!("{dist}/Release");
            let (bytes, _) = http.fetch_small(&url, "*/*", None, MAX_INDEX).await?;
            if let Some(k) = &keyring {
                let sig_url = format!("{dist}/Release.gpg");
                let sig_bytes = match http.fetch_small(&sig_url, "*/*", None, 1 << 20).await {
                    Ok((b, _)) => b,
                    Err(HttpError::Status { status: 404, .. }) => {
                        return Err(DebError::Unsigned { repo: repo.to_owned(), suite: entry.suite.clone() }.into());
                    }
                    Err(e) => return Err(e.into()),
                };
                // Archives sign with several keys at once (the current and the next archive key):
                // one valid signature from the keyring is enough.
                let ok = k
                    .verifies_detached(&bytes, &sig_bytes)
                    .map_err(|e| DebError::Index { url: sig_url.clone(), detail: e.to_string() })?;
                if !ok {
                    return Err(refuse(k, sig_url).into());
                }
            } else {
                unsigned_warning();
            }
            String::from_utf8(bytes).map_err(|e| DebError::Index { url, detail: e.to_string() }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// A flat repository (`suite = "./"`, or any suite ending in `/`): `Release` and `Packages`
/// sit in that directory, with no `dists/` tree and no components.
fn is_flat(entry: &DebSpec) -> bool {
    entry.suite.ends_with('/')
}

/// Where the suite's `Release` files are: `REPO/dists/SUITE`, or `REPO/SUITE` for a flat one.
fn dist_url(entry: &DebSpec) -> String {
    let repo = entry.repo.trim_end_matches('/');
    if is_flat(entry) {
        format!("{repo}/{}", entry.suite.trim_end_matches('/'))
    } else {
        format!("{repo}/dists/{}", entry.suite)
    }
}

/// The forms of an index, in the order airlock asks for them (`.xz` and `.gz` are what
/// Debian and Ubuntu archives serve; `.zst` and `.bz2` are asked for when only they are
/// listed). Real archives serve only the compressed ones while their `Release` lists the
/// plain file's hashes too, so "listed" does not mean "served": a listed form that answers
/// 404 is skipped.
const VARIANTS: [(&str, Compression); 5] = [
    (".xz", Compression::Xz),
    (".gz", Compression::Gz),
    (".zst", Compression::Zst),
    (".bz2", Compression::Bz2),
    ("", Compression::Plain),
];

/// The `Release` fields that decide how indexes are fetched.
struct Release {
    sums: BTreeMap<String, (String, u64)>,
    /// `Acquire-By-Hash: yes`: fetch `…/by-hash/SHA256/HEX`, so that a mirror updating while
    /// the lock runs cannot hand over a newer index than this `Release` names.
    by_hash: bool,
}

fn check_sum(url: &str, bytes: &[u8], hash: &str, size: u64) -> Result<(), DebError> {
    let actual = Sha256::of_bytes(bytes).to_string();
    if actual != hash || bytes.len() as u64 != size {
        return Err(DebError::Mismatch {
            url: url.to_owned(),
            what: "sha256/size",
            expected: format!("{hash}/{size}"),
            actual: format!("{actual}/{}", bytes.len()),
        });
    }
    Ok(())
}

/// The Packages index of one component: the first form `Release` lists that is served,
/// verified by the `Release` SHA256 and size as fetched (and, when `Release` lists the plain
/// file too, once decompressed while it is read).
async fn packages(
    (http, cache): (&Http, &crate::cache::Cache),
    entry: &DebSpec,
    release: &Release,
    component: &str,
) -> Result<Index, SourceError> {
    let dist = dist_url(entry);
    let dir = if is_flat(entry) { String::new() } else { format!("{component}/binary-{}/", entry.arch) };
    let base = format!("{dir}Packages");
    let plain = release.sums.get(&base);
    let mut not_served = Vec::new();
    for (suffix, compression) in VARIANTS {
        let name = format!("{base}{suffix}");
        let Some((hash, size)) = release.sums.get(&name) else { continue };
        let url = if release.by_hash && !is_flat(entry) {
            format!("{dist}/{dir}by-hash/SHA256/{hash}")
        } else {
            format!("{dist}/{name}")
        };
        let bytes = match crate::sources::index::cached(cache, hash, *size, MAX_INDEX) {
            Some(bytes) => bytes,
            None => match http.fetch_small(&url, "*/*", None, MAX_INDEX).await {
                Ok((bytes, _)) => {
                    check_sum(&url, &bytes, hash, *size)?;
                    crate::sources::index::keep(cache, hash, &bytes, &name).await;
                    bytes
                }
                Err(HttpError::Status { status: 404, .. }) => {
                    not_served.push(url);
                    continue;
                }
                Err(e) => return Err(e.into()),
            },
        };
        let plain = plain.filter(|_| compression != Compression::Plain).cloned();
        let limit = crate::sources::index::plain_limit(plain.as_ref().map(|(_, size)| *size), MAX_INDEX);
        return Ok(Index { url, bytes, compression, plain, limit });
    }
    let detail = if not_served.is_empty() {
        format!("lists no form of `{base}`")
    } else {
        format!("lists `{base}` but serves none of its forms (tried {})", not_served.join(", "))
    };
    Err(DebError::Index { url: format!("{dist}/Release"), detail }.into())
}

/// Refuse a `Release` past its `Valid-Until` (a replayed, stale archive), unless the entry
/// says `allow_expired = true` (logged).
fn check_valid_until(fields: &Paragraph, entry: &DebSpec) -> Result<(), DebError> {
    let Some(until) = fields.get("Valid-Until") else { return Ok(()) };
    // RFC 2822 as archives write it, with `UTC` for the zone.
    let normalised = until.trim().replace(" UTC", " +0000").replace(" GMT", " +0000");
    let Ok(at) = time::OffsetDateTime::parse(&normalised, &time::format_description::well_known::Rfc2822) else {
        return Err(DebError::Index { url: entry.repo.clone(), detail: format!("unreadable Valid-Until `{until}`") });
    };
    if at >= time::OffsetDateTime::now_utc() {
        return Ok(());
    }
    if entry.allow_expired {
        tracing::warn!("{} {}: Release expired at {until}; accepted (allow_expired = true)", entry.repo, entry.suite);
        return Ok(());
    }
    Err(DebError::Expired { repo: entry.repo.clone(), suite: entry.suite.clone(), until: until.to_owned() })
}

/// Who made a suite: its `Release` `Origin` and `Codename` (the purl's namespace and distro).
#[derive(Debug, Clone, Default)]
struct Distro {
    origin: Option<String>,
    codename: Option<String>,
}

/// The verified indexes of one entry: every component's `Packages`, and its `Release`'s
/// origin and codename.
async fn load(sources: &Sources<'_>, entry: &DebSpec) -> Result<(Vec<Index>, Distro), SourceError> {
    let http = sources.fetch.http;
    let text = release(http, entry, sources.spec.base_dir()).await?;
    let fields = release_fields(&format!("{}/Release", dist_url(entry)), &text)?;
    check_valid_until(&fields, entry)?;
    let release = Release {
        sums: release_sha256(&fields),
        by_hash: fields.get("Acquire-By-Hash").is_some_and(|v| v.trim().eq_ignore_ascii_case("yes")),
    };
    // A flat repository has one index for everything: its components are not looked at.
    let components: Vec<&str> =
        if is_flat(entry) { vec![""] } else { entry.components.iter().map(String::as_str).collect() };
    let mut out = Vec::new();
    for component in components {
        out.push(packages((http, sources.fetch.cache), entry, &release, component).await?);
    }
    let field = |k: &str| fields.get(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    Ok((out, Distro { origin: field("Origin"), codename: field("Codename").or_else(|| field("Suite")) }))
}

fn read_error(url: &str, e: ReadError<index::BadStanza>) -> DebError {
    match e {
        ReadError::Mismatch { expected, actual } => {
            DebError::Mismatch { url: format!("{url} (decompressed)"), what: "sha256/size", expected, actual }
        }
        ReadError::Unreadable(detail) => DebError::Index { url: url.to_owned(), detail },
        ReadError::Refused(stanza) => DebError::Stanza { url: url.to_owned(), stanza },
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

/// A newer version of a locked package (`airlock outdated`): in a configured suite, or in the
/// suite's security twin (`SUITE-security` in the same repository, as Ubuntu and Debian
/// mirrors lay them out; one not served is skipped).
#[derive(Debug, Clone)]
pub struct DebNews {
    pub name: String,
    pub architecture: String,
    pub locked: String,
    pub newest: String,
    pub repo: String,
    pub suite: String,
    /// Found in a security suite (its name says `security`).
    pub security: bool,
}

/// The configured suites (`true`), each followed by its security twin (`SUITE-security` in
/// the same repository; `false`: read if served).
fn with_security_twins(sources: &Sources<'_>) -> Vec<(DebSpec, bool)> {
    let mut suites = Vec::new();
    for entry in sources.spec.spec.deb.iter().map(toml::Spanned::get_ref) {
        suites.push((entry.clone(), true));
        if !is_flat(entry) && !entry.suite.contains("security") {
            let mut twin = entry.clone();
            twin.suite = format!("{}-security", entry.suite);
            // Debian serves it from an archive of its own beside the main one
            // (`…/debian-security`); Ubuntu from the same archive.
            if let Some(debian) = debian_security(&entry.repo) {
                let mut other = twin.clone();
                other.repo = debian;
                suites.push((other, false));
            }
            suites.push((twin, false));
        }
    }
    suites
}

/// Debian's security archive beside `repo` when `repo` is a Debian archive (its path ends in
/// `/debian`): `http://deb.debian.org/debian` → `http://deb.debian.org/debian-security`.
pub(crate) fn debian_security(repo: &str) -> Option<String> {
    let trimmed = repo.trim_end_matches('/');
    trimmed.ends_with("/debian").then(|| format!("{trimmed}-security"))
}

/// The configured suites (`REPO SUITE`) not checked for security updates: a suite is checked
/// when it is a security suite itself, or a security suite of its name (its twin, or another
/// archive's `SUITE-security`) was read.
fn security_unchecked(sources: &Sources<'_>, security_read: &BTreeSet<String>) -> Vec<String> {
    sources
        .spec
        .spec
        .deb
        .iter()
        .map(toml::Spanned::get_ref)
        .filter(|e| !is_flat(e) && !e.suite.contains("security"))
        .filter(|e| !security_read.contains(&format!("{}-security", e.suite)))
        .map(|e| format!("{} {}", e.repo.trim_end_matches('/'), e.suite))
        .collect()
}

/// What `newer` found, and the configured suites for which no security suite could be read
/// (`REPO SUITE`): for those, "no security update" means "not checked".
#[derive(Debug, Default)]
pub struct DebScan {
    pub news: Vec<DebNews>,
    pub security_unchecked: Vec<String>,
}

pub async fn newer(sources: &Sources<'_>, lock: &LockFile) -> Result<DebScan, SourceError> {
    let suites = with_security_twins(sources);
    let mut done = BTreeSet::new();
    // Security suites read: (repository, suite).
    let mut security_read: BTreeSet<String> = BTreeSet::new();
    // (name, architecture) -> the newest version seen, where.
    let mut best: BTreeMap<(String, String), (debversion::Version, String, String, bool)> = BTreeMap::new();
    let wanted: BTreeSet<(String, String)> =
        lock.lock.deb.iter().map(|d| (d.package.name.clone(), d.architecture.clone())).collect();
    for (entry, configured) in suites {
        if !done.insert((entry.repo.clone(), entry.suite.clone(), entry.arch.clone())) {
            continue;
        }
        let indexes = match load(sources, &entry).await {
            Ok((indexes, _)) => indexes,
            Err(SourceError::Http(HttpError::Status { status: 404, .. })) if !configured => {
                tracing::debug!("{} {}: no such suite", entry.repo, entry.suite);
                continue;
            }
            Err(e) if !configured => {
                tracing::warn!(
                    "{} {}: the security suite beside the configured one cannot be read: {e}",
                    entry.repo,
                    entry.suite
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let wanted = wanted.clone();
        let found = blocking(move || {
            let mut found = Vec::new();
            for index in &indexes {
                index::paragraphs(index, |p| {
                    if let Some(pkg) = Pkg::from_paragraph(&p, 0)?
                        && wanted.contains(&(pkg.name.clone(), pkg.architecture.clone()))
                    {
                        found.push(pkg);
                    }
                    Ok(())
                })
                .map_err(|e| read_error(&index.url, e))?;
            }
            Ok::<_, DebError>(found)
        })
        .await?;
        let security = entry.suite.contains("security");
        if security {
            security_read.insert(entry.suite.clone());
        }
        for pkg in found {
            let key = (pkg.name.clone(), pkg.architecture.clone());
            if best.get(&key).is_none_or(|(v, ..)| pkg.version > *v) {
                best.insert(key, (pkg.version, entry.repo.clone(), entry.suite.clone(), security));
            }
        }
    }
    let mut out = Vec::new();
    for d in &lock.lock.deb {
        let Some((newest, repo, suite, security)) = best.get(&(d.package.name.clone(), d.architecture.clone())) else {
            continue;
        };
        let Ok(locked) = d.version().parse::<debversion::Version>() else { continue };
        if *newest > locked {
            out.push(DebNews {
                name: d.package.name.clone(),
                architecture: d.architecture.clone(),
                locked: d.version().to_owned(),
                newest: newest.to_string(),
                repo: repo.clone(),
                suite: suite.clone(),
                security: *security,
            });
        }
    }
    Ok(DebScan { news: out, security_unchecked: security_unchecked(sources, &security_read) })
}

#[cfg(test)]
mod tests {
    #[test]
    fn debians_security_archive_stands_beside_its_main_one() {
        let twin = super::debian_security;
        assert_eq!(twin("http://deb.debian.org/debian/").as_deref(), Some("http://deb.debian.org/debian-security"));
        assert_eq!(twin("http://mirror.site/debian").as_deref(), Some("http://mirror.site/debian-security"));
        // Ubuntu serves `SUITE-security` in the same archive; other paths are not guessed at.
        assert_eq!(twin("http://archive.ubuntu.com/ubuntu"), None);
        assert_eq!(twin("http://mirror.site/debian-ports"), None);
    }
}
