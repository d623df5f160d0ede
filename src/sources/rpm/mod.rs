//! `[[rpm]]` entries: packages from rpm-md (dnf/yum/zypper) repositories. `repodata/repomd.xml`
//! is verified with its detached signature `repomd.xml.asc` against the spec's keyring; every
//! metadata file it names is verified by its checksum (SHA-2 only: a repository with sha1 or
//! md5 sums alone is refused by name) and, decompressed, by its open-checksum, and read as a
//! stream (`repodata`); the requested packages, and with `resolve = true` their dependency
//! closure (`closure`), are downloaded and verified by sha256 and size, and each package's own
//! header signature is checked with the same keyring when it has one (`header`). A modular
//! package (an `AppStream` module stream) is carried only when the entry names its stream.

mod closure;
pub mod freeze;
mod header;
mod news;
mod repository;

use repository::{Repo, packages, repo};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::rpmmd as repodata;
use closure::{BasePkg, Pkg, Request, Universe};
use repodata::{Dep, Package};

use super::keyring::Keyring;
use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, RpmArtifact};
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Wanted, blocking};
use crate::member_path::MemberPath;
use crate::spec::lock::{LockFile, LockedBase, LockedRpm};
use crate::spec::{RpmPin, RpmSpec};

pub use closure::{BadRich, Unsolvable, cmp_evr};
pub use header::{Header, HeaderError};
pub use news::{RpmNews, newer};

/// The members a bundle's rpms come with: the rpm-md entries of exactly those packages, which
/// a site's view compresses and lists in its own signed `repomd.xml`.
pub const PRIMARY: &str = "rpms/primary.xml";
pub const FILELISTS: &str = "rpms/filelists.xml";
pub const OTHER: &str = "rpms/other.xml";

#[derive(Debug, thiserror::Error)]
pub enum RpmError {
    #[error("keyring `{}`: {detail}", path.display())]
    Keyring { path: PathBuf, detail: String },
    #[error("{url}: the signature does not verify with keyring `{}`", keyring.display())]
    Signature { url: String, keyring: PathBuf },
    #[error(
        "{url}: the repository is unsigned (no `repomd.xml.asc`) and the spec does not say `allow_unsigned = true`"
    )]
    Unsigned { url: String },
    #[error("{url}: {detail}")]
    Metadata { url: String, detail: String },
    /// Metadata at `url` that does not read as rpm-md (shown, not chained).
    #[error("{url}: {detail}")]
    Repodata { url: String, detail: crate::rpmmd::MetadataError },
    #[error("{url}: only {kind} checksums are offered; airlock accepts sha256, sha384 or sha512")]
    WeakChecksum { url: String, kind: String },
    #[error("{url}: expected {what} {expected}, got {actual}")]
    Mismatch { url: String, what: &'static str, expected: String, actual: String },
    #[error("{url}: `{package}` for {arch} is not in the repository ({available})")]
    NotFound { url: String, package: String, arch: String, available: String },
    /// `detail` is shown in this message, not chained as a source (the message would say it twice).
    #[error("`{}` ({nevra}): {detail}", path.display())]
    Package { path: PathBuf, nevra: String, detail: HeaderError },
    #[error("base rpmdb `{}`: {detail}", path.display())]
    Base { path: PathBuf, detail: String },
    #[error("the {arch} dependency closure cannot be made: {detail}")]
    Unsolvable { arch: String, detail: String },
}

impl Classify for RpmError {
    fn class(&self) -> Class {
        match self {
            RpmError::Signature { .. }
            | RpmError::Unsigned { .. }
            | RpmError::Mismatch { .. }
            | RpmError::WeakChecksum { .. } => Class::Verification,
            // A package that cannot be read from the cache is the host's failure; one whose
            // header does not hold is the repository's.
            RpmError::Package { detail, .. } => detail.class(),
            RpmError::Repodata { detail, .. } => detail.class(),
            RpmError::Keyring { .. }
            | RpmError::Metadata { .. }
            | RpmError::NotFound { .. }
            | RpmError::Base { .. }
            | RpmError::Unsolvable { .. } => Class::Runtime,
        }
    }
}

/// Every `[[rpm]]` entry pinned, entries of one architecture resolved together (a vendor
/// repository's packages depend on the distribution's).
pub async fn resolve(sources: &Sources<'_>) -> Result<(Vec<LockedRpm>, Vec<LockedBase>), SourceError> {
    let entries: Vec<&RpmSpec> = sources.spec.spec.rpm.iter().map(toml::Spanned::get_ref).collect();
    let mut repos = Vec::new();
    let mut all = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let r = repo(sources, entry).await?;
        all.push(packages(sources, entry, &r, i).await?);
        repos.push(r);
    }
    let arches: BTreeSet<&str> = entries.iter().map(|e| e.arch.as_str()).collect();
    let (mut out, mut bases) = (Vec::new(), Vec::new());
    for arch in arches {
        let group: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].arch == arch).collect();
        let pkgs: Vec<Pkg> = group.iter().flat_map(|&i| all[i].iter().cloned()).collect();
        let (locked, base) = resolve_arch(sources, &entries, &repos, Universe::new(pkgs), &group).await?;
        out.extend(locked);
        bases.extend(base);
    }
    bases.sort_by(|a: &LockedBase, b| a.path.cmp(&b.path));
    bases.dedup();
    Ok((out, bases))
}

/// The package an entry asks for: from its own repository, at the pinned EVR or the newest.
fn root(universe: &Universe, entry: &RpmSpec, source: usize, wanted: &RpmPin) -> Result<usize, RpmError> {
    let evr_of = |p: &Package| p.evr();
    let same = |p: &Package, want: &str| evr_of(p) == want || format!("0:{}", evr_of(p)) == want;
    let candidates: Vec<usize> = universe.named(&wanted.name).filter(|&i| universe.pkgs[i].source == source).collect();
    let pick = candidates
        .iter()
        .copied()
        .filter(|&i| wanted.evr.as_deref().is_none_or(|v| same(&universe.pkgs[i].package, v)))
        .max_by(|&a, &b| closure::cmp_evr(&own(&universe.pkgs[a].package), &own(&universe.pkgs[b].package)));
    pick.ok_or_else(|| {
        let versions: BTreeSet<String> = candidates.iter().map(|&i| universe.pkgs[i].package.evr()).collect();
        let available = if versions.is_empty() {
            "no such package".to_owned()
        } else {
            format!("it has {}", versions.into_iter().collect::<Vec<_>>().join(", "))
        };
        RpmError::NotFound { url: entry.url(), package: wanted.to_string(), arch: entry.arch.clone(), available }
    })
}

pub(super) fn own(p: &Package) -> (u32, String, String) {
    (p.epoch, p.version.clone(), p.release.clone())
}

async fn resolve_arch(
    sources: &Sources<'_>,
    entries: &[&RpmSpec],
    repos: &[Repo],
    universe: Universe,
    group: &[usize],
) -> Result<(Vec<LockedRpm>, Vec<LockedBase>), SourceError> {
    let arch = entries[group[0]].arch.clone();
    let mut roots = Vec::new();
    for &i in group {
        for wanted in &entries[i].packages {
            roots.push((root(&universe, entries[i], i, wanted)?, entries[i].resolve, wanted.clone()));
        }
    }
    let resolving: Vec<&RpmSpec> = group.iter().map(|&i| entries[i]).filter(|e| e.resolve).collect();
    let (base, base_files) = base(sources, &resolving, &universe).await?;
    let modules: BTreeSet<String> = group.iter().flat_map(|&i| entries[i].modules.iter().cloned()).collect();
    let request = Request {
        roots: roots.iter().map(|(p, follow, _)| (*p, *follow)).collect(),
        base: &base,
        weak: resolving.iter().any(|e| e.weak),
        modules: &modules,
    };
    let mut chosen = closure::resolve(&universe, &request)
        .map_err(|e| RpmError::Unsolvable { arch: arch.clone(), detail: e.to_string() })?;
    chosen.sort_by(|a, b| universe.pkgs[a.pkg].package.name.cmp(&universe.pkgs[b.pkg].package.name));
    if !resolving.is_empty() {
        tracing::info!(
            "{arch}: {} packages requested, {} in the closure, {} in the base",
            roots.len(),
            chosen.len(),
            base.len()
        );
    }
    let mut out = Vec::new();
    for c in &chosen {
        let p = &universe.pkgs[c.pkg];
        let entry = entries[p.source];
        let package = match roots.iter().find(|(i, _, _)| *i == c.pkg) {
            Some((_, _, wanted)) => wanted.clone(),
            None => RpmPin { name: p.package.name.clone(), evr: Some(p.package.evr()) },
        };
        out.push(locked(entry, &repos[p.source].url, p, package, c.required_by.iter().cloned().collect())?);
    }
    // Every package into the cache, verified by sha256 and size; then its header signature.
    let wanted: Vec<Wanted> = out.iter().map(wanted).collect();
    let paths = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    for ((r, path), c) in out.iter().zip(paths).zip(&chosen) {
        let keyring = repos[universe.pkgs[c.pkg].source].keyring.clone();
        check_header(path, r, keyring).await?;
    }
    Ok((out, base_files))
}

/// The package's own header: its NEVRA must be the one metadata gave, and its signature, when
/// it has one, a keyring key's.
async fn check_header(path: PathBuf, r: &LockedRpm, keyring: Option<Arc<Keyring>>) -> Result<(), RpmError> {
    let nevra = format!("{}-{}.{}", r.name, r.evr(), r.architecture);
    let expect = (r.name.clone(), r.epoch, r.version.clone(), r.release.clone(), r.architecture.clone());
    let file = path.clone();
    let checked = blocking(move || {
        let h = Header::read(&file)?;
        let m = &h.meta;
        let got = (
            m.get_name().unwrap_or_default().to_owned(),
            m.get_epoch().unwrap_or(0),
            m.get_version().unwrap_or_default().to_owned(),
            m.get_release().unwrap_or_default().to_owned(),
            if m.is_source_package() { "src".to_owned() } else { m.get_arch().unwrap_or_default().to_owned() },
        );
        if got != expect {
            return Err(HeaderError::NotAsListed { got: format!("{}-{}:{}-{}.{}", got.0, got.1, got.2, got.3, got.4) });
        }
        match &keyring {
            Some(k) => h.verify(k),
            None => Ok(false),
        }
    })
    .await;
    match checked {
        Ok(true) => Ok(()),
        Ok(false) => {
            tracing::warn!("{nevra}: the package carries no header signature (repomd.xml's signature covers it)");
            Ok(())
        }
        Err(detail) => Err(RpmError::Package { path: PathBuf::from(&r.location), nevra, detail }),
    }
}

/// The target's base: the packages `base` names (from the repositories) and the rpm database
/// `base_rpmdb` names (read with the build host's `rpm --dbpath`), with its digest for the lock.
async fn base(
    sources: &Sources<'_>,
    resolving: &[&RpmSpec],
    universe: &Universe,
) -> Result<(Vec<BasePkg>, Vec<LockedBase>), RpmError> {
    let mut base = Vec::new();
    let mut files = Vec::new();
    for name in resolving.iter().flat_map(|e| e.base.iter()).collect::<BTreeSet<_>>() {
        let Some(i) = universe.newest(name) else {
            tracing::warn!("`base` names `{name}`, which no `[[rpm]]` repository has: it provides nothing");
            continue;
        };
        let p = &universe.pkgs[i].package;
        base.push(BasePkg {
            name: p.name.clone(),
            evr: own(p),
            provides: p.provides.clone(),
            files: p.files.iter().cloned().collect(),
        });
    }
    for rel in resolving.iter().filter_map(|e| e.base_rpmdb.as_ref()).collect::<BTreeSet<_>>() {
        let path = sources.spec.base_dir().join(rel);
        let db = path.clone();
        let read = blocking(move || rpmdb(&db)).await;
        let (pkgs, sha256) = read.map_err(|detail| RpmError::Base { path, detail })?;
        base.extend(pkgs);
        files.push(LockedBase { path: rel.display().to_string(), sha256 });
    }
    Ok((base, files))
}

/// The packages of an rpm database file (`rpmdb.sqlite`, or a BDB `Packages`), read by the
/// build host's `rpm` from a private copy (rpm writes beside the database it opens).
fn rpmdb(path: &Path) -> Result<(Vec<BasePkg>, Sha256), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let name = path.file_name().ok_or("not a file")?;
    // Copied, then the copy hashed as a stream: the lock pins exactly what rpm read.
    std::fs::copy(path, dir.path().join(name)).map_err(|e| e.to_string())?;
    let copy = std::fs::File::open(dir.path().join(name)).map_err(|e| e.to_string())?;
    let (sha256, _) = crate::digest::hash_reader(copy).map_err(|e| e.to_string())?;
    let query = |format: &str| -> Result<String, String> {
        let out = std::process::Command::new("rpm")
            .arg("--dbpath")
            .arg(dir.path())
            .args(["-qa", "--qf", format])
            .output()
            .map_err(|e| format!("cannot run `rpm` to read it (install rpm on the build host): {e}"))?;
        if !out.status.success() {
            return Err(format!("`rpm --dbpath` cannot read it: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut pkgs: BTreeMap<String, BasePkg> = BTreeMap::new();
    // `%{=TAG}` repeats a scalar for every item of the array `[…]` iterates.
    let key = "%{=NAME}\\t%{=EPOCHNUM}\\t%{=VERSION}\\t%{=RELEASE}\\t%{=ARCH}";
    for line in query(&format!("[{key}\\tP\\t%{{PROVIDENAME}}\\t%{{PROVIDEFLAGS:depflags}}\\t%{{PROVIDEVERSION}}\\n]"))?
        .lines()
        .chain(query(&format!("[{key}\\tF\\t%{{FILENAMES}}\\n]"))?.lines())
    {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, epoch, version, release, arch, kind, rest @ ..] = fields.as_slice() else { continue };
        let p = pkgs.entry(format!("{name}.{arch}")).or_insert_with(|| BasePkg {
            name: (*name).to_owned(),
            evr: (epoch.parse().unwrap_or(0), (*version).to_owned(), (*release).to_owned()),
            provides: Vec::new(),
            files: BTreeSet::new(),
        });
        match (*kind, rest) {
            ("P", [dep, flags, evr, ..]) => p.provides.push(provide(dep, flags, evr)),
            ("P", [dep, ..]) => p.provides.push(provide(dep, "", "")),
            ("F", [file, ..]) => {
                p.files.insert((*file).to_owned());
            }
            _ => {}
        }
    }
    Ok((pkgs.into_values().collect(), sha256))
}

/// A provide as `rpm -q --qf '%{PROVIDEFLAGS:depflags}'` prints it (` = `, ` >= `).
fn provide(name: &str, flags: &str, evr: &str) -> Dep {
    let flags = match flags.trim() {
        "=" => Some("EQ"),
        "<" => Some("LT"),
        "<=" => Some("LE"),
        ">" => Some("GT"),
        ">=" => Some("GE"),
        _ => None,
    };
    if flags.is_none() || evr.is_empty() {
        return Dep { name: name.to_owned(), ..Dep::default() };
    }
    let (epoch, vr) = evr.split_once(':').map_or((None, evr), |(e, vr)| (Some(e.to_owned()), vr));
    let (ver, rel) = vr.split_once('-').map_or((vr.to_owned(), None), |(v, r)| (v.to_owned(), Some(r.to_owned())));
    Dep { name: name.to_owned(), flags: flags.map(str::to_owned), epoch, ver: Some(ver), rel }
}

fn locked(
    entry: &RpmSpec,
    url: &str,
    p: &Pkg,
    package: RpmPin,
    required_by: Vec<String>,
) -> Result<LockedRpm, RpmError> {
    let pkg = &p.package;
    let bad =
        |detail: String| RpmError::Metadata { url: url.to_owned(), detail: format!("`{}`: {detail}", pkg.nevra()) };
    let sum = pkg.checksum.as_ref().ok_or_else(|| bad("no checksum".into()))?;
    if !sum.strong() {
        return Err(RpmError::WeakChecksum { url: format!("{url}/{}", pkg.location), kind: sum.kind.clone() });
    }
    if sum.kind != "sha256" {
        return Err(bad(format!("a {} package checksum: airlock pins packages by sha256", sum.kind)));
    }
    let sha256: Sha256 = sum.hex.parse().map_err(|e: crate::digest::DigestParseError| bad(e.to_string()))?;
    crate::bundle::pins::rpm_member(&pkg.location).map_err(|e| bad(e.to_string()))?;
    Ok(LockedRpm {
        baseurl: entry.baseurl.clone(),
        url: url.to_owned(),
        arch: entry.arch.clone(),
        package,
        name: pkg.name.clone(),
        epoch: pkg.epoch,
        version: pkg.version.clone(),
        release: pkg.release.clone(),
        architecture: pkg.arch.clone(),
        location: pkg.location.clone(),
        sha256,
        size: pkg.size,
        module: p.module.clone(),
        required_by,
        vendor: entry.vendor.clone(),
        distro: entry.distro.clone(),
    })
}

fn wanted(r: &LockedRpm) -> Wanted {
    Wanted {
        url: format!("{}/{}", r.url, r.location),
        sha256: r.sha256,
        size: Some(r.size),
        bearer: None,
        what: format!("rpm {}-{}.{}", r.name, r.evr(), r.architecture),
    }
}

/// Every locked rpm (downloaded into the cache if needed), and the rpm-md entries of exactly
/// those packages, made from their headers (`rpms/primary.xml`, `filelists.xml`, `other.xml`).
pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let mut rpms: Vec<&LockedRpm> = lock.lock.rpm.iter().collect();
    if rpms.is_empty() {
        return Ok(Plan::default());
    }
    rpms.sort_by(|a, b| a.location.cmp(&b.location));
    let wanted: Vec<Wanted> = rpms.iter().map(|r| wanted(r)).collect();
    let paths = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    let mut plan = Plan::default();
    let mut work = Vec::new();
    for ((r, path), want) in rpms.iter().zip(&paths).zip(wanted) {
        let artifact = RpmArtifact::try_from(*r)
            .map_err(|e| RpmError::Metadata { url: want.url.clone(), detail: e.to_string() })?;
        plan.members.push(Member {
            path: artifact.path.clone(),
            size: r.size,
            sha256: r.sha256,
            origin: path.clone().into(),
            what: want.what.into(),
        });
        work.push((
            path.clone(),
            r.location.clone(),
            r.sha256.to_string(),
            r.size,
            format!("{}-{}.{}", r.name, r.evr(), r.architecture),
        ));
        plan.artifacts.push(Artifact::Rpm(artifact));
    }
    let docs = blocking(move || {
        let (mut primary, mut filelists, mut other) = (String::new(), String::new(), String::new());
        for (path, location, sha256, size, nevra) in &work {
            let bad = |detail| RpmError::Package { path: PathBuf::from(location), nevra: nevra.clone(), detail };
            let h = Header::read(path).map_err(bad)?;
            primary.push_str(&h.primary(location, sha256, *size).map_err(bad)?);
            filelists.push_str(&h.filelists(sha256).map_err(bad)?);
            other.push_str(&h.other(sha256).map_err(bad)?);
        }
        let n = work.len();
        Ok::<_, RpmError>([
            (PRIMARY, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"{n}\">\n{primary}</metadata>\n")),
            (FILELISTS, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<filelists xmlns=\"http://linux.duke.edu/metadata/filelists\" packages=\"{n}\">\n{filelists}</filelists>\n")),
            (OTHER, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<otherdata xmlns=\"http://linux.duke.edu/metadata/other\" packages=\"{n}\">\n{other}</otherdata>\n")),
        ])
    })
    .await?;
    for (name, text) in docs {
        let (digest, size) = (Sha256::of_bytes(text.as_bytes()), text.len() as u64);
        let cache = sources.fetch.cache.clone();
        let origin = blocking(move || cache.put(digest, Some(size), name, text.as_bytes())).await?;
        let path = MemberPath::new(name).expect("a valid member path");
        plan.members.push(Member { path, size, sha256: digest, origin: origin.into(), what: name.into() });
    }
    Ok(plan)
}
