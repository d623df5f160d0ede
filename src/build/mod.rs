//! The build side's phases, called in order by `airlock build`: lock (resolve what the lock
//! does not cover, `lock::ensure`) → plan (every member's bytes into the cache, but image
//! blobs, which need only their digests and sizes to be listed) → SBOM (a listed member, so
//! the manifest's signature covers it) → manifest → provenance → pack, with the image blobs
//! downloading beside it.
//! Nothing here parses arguments or prints; `commands::build` is the glue.

pub mod base;
pub mod freeze;
pub mod lock;
pub mod outdated;

use std::path::Path;

use crate::attest::sbom::{self, SbomError};
use crate::bundle::Manifest;
use crate::bundle::manifest::{Artifact, BaseRef, Builder, Entry, MAX_MANIFEST_BYTES, SBOM, SCHEMA_V1};
use crate::bundle::writer::{Arrivals, Compression, Layout, Member, Origin, Origins, PackError, Packed, pack};
use crate::cache::{Cache, CacheError};
use crate::clock::{ClockError, Timestamp};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Fetch, Net};
use crate::member_path::MemberPath;
use crate::progress::{Reporter, Silent};
use crate::sign::SigningKey;
use crate::sources::oci::{BlobRoute, PendingBlob, fetch_blobs};
use crate::sources::{Plan, SourceError, Sources};
use crate::spec::SpecFile;
use crate::spec::lock::{LockError, LockFile};

/// The `builder.tool` a manifest records.
pub const TOOL: &str = concat!("airlock/", env!("CARGO_PKG_VERSION"));

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error(transparent)]
    Sbom(#[from] SbomError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Pack(#[from] PackError),
    #[error(
        "the manifest would be {bytes} bytes for {entries} entries; a bundle's manifest is at most {limit} bytes \
         (readers bound it before its signature is checked, about 250,000 entries){largest}: split the \
         content into several bundles"
    )]
    ManifestTooLarge { bytes: u64, limit: u64, entries: usize, largest: String },
}

impl Classify for BuildError {
    fn class(&self) -> Class {
        match self {
            BuildError::Lock(e) => e.class(),
            BuildError::Source(e) => e.class(),
            BuildError::Cache(e) => e.class(),
            BuildError::Pack(e) => e.class(),
            BuildError::Clock(e) => e.class(),
            BuildError::Sbom(_) => Class::Runtime,
            BuildError::ManifestTooLarge { .. } => Class::Usage,
        }
    }
}

/// What a build wrote.
#[derive(Debug)]
pub struct Built {
    pub manifest: Manifest,
    pub packed: Packed,
}

/// How a build lays out its bundle, and what it may leave out.
#[derive(Debug, Default)]
pub struct Options {
    pub layout: Layout,
    /// Build a delta: leave out the content this base holds.
    pub base: Option<base::Base>,
    /// The `CycloneDX` version of the SBOM member.
    pub sbom_spec: sbom::SbomSpec,
    /// A site trust root's metadata to carry as `airlock/trust/NAME` (`build --trust-root`),
    /// already verified by the caller: file name and bytes.
    pub carried_trust: Vec<(String, Vec<u8>)>,
    /// Where the image blobs not in the cache go: into it, or straight into the bundle.
    pub blobs: BlobRoute,
    /// A rebuild (`airlock rebuild`): the manifest names the original's builder key and its
    /// creation time, so the same inputs give the same manifest, byte for byte, whoever signs.
    pub reproduce: Option<Reproduce>,
}

/// What a rebuild takes over from the bundle it rebuilds (the fields a builder's key and clock
/// decide, not its content).
#[derive(Debug, Clone)]
pub struct Reproduce {
    pub builder_key_id: crate::sign::KeyId,
    pub created: Timestamp,
}

/// Build the bundle for the sources' spec, pinned by `lock`, signed by `key`, into `out`. The
/// lock is let go once the plan is made: the plan holds what packing needs of it (a lock of
/// 200,000 files held 19 MB).
pub fn build(
    sources: &Sources<'_>,
    net: &Net,
    mut lock: LockFile,
    key: &SigningKey,
    out: &Path,
    options: &Options,
    reporter: &dyn Reporter,
) -> Result<Built, BuildError> {
    tracing::info!("fetch: every pinned input into the cache (image blobs while packing)");
    let mut plan = net.block_on(sources.plan(&mut lock))?;
    let created = match &options.reproduce {
        Some(r) => r.created,
        None => Timestamp::source_date_epoch()?.unwrap_or(lock.lock.resolved_at),
    };
    let lock_sha256 = lock.sha256;
    drop(lock);
    tracing::info!("sbom: {} artifacts", plan.artifacts.len());
    add_sbom(&mut plan, sources.spec, created, options.sbom_spec, sources.fetch.cache)?;
    add_carried_trust(&mut plan, &options.carried_trust, sources.fetch.cache)?;
    let (base, omitted) = omit(options.base.as_ref(), &plan.members);
    // Blobs the base holds are neither packed nor downloaded.
    let blobs: Vec<PendingBlob> = plan.blobs.drain(..).filter(|b| !omitted.contains(&b.digest())).collect();
    let Plan { artifacts, mut members, .. } = plan;
    if options.blobs == BlobRoute::Stream {
        // Their origin is the registry or layout, not a cache file: messages name it.
        let sources: std::collections::BTreeMap<MemberPath, String> =
            blobs.iter().map(|b| (b.member(), b.describe())).collect();
        for m in &mut members {
            if let Some(origin) = sources.get(&m.path) {
                m.origin = Origin::File(origin.into());
            }
        }
    }
    // The members become the manifest's entries, and what is kept beside them is where their
    // bytes are: a directory of 50,000 files is one origin, not 50,000 members (13 MiB).
    let (entries, origins) = Origins::split(members);
    let mut manifest = assemble(sources.spec, lock_sha256, key, created, artifacts, entries);
    if let Some(r) = &options.reproduce {
        manifest.builder.key_id = r.builder_key_id.clone();
    }
    // After `add_sbom`, the last reader of a directory's `files` list (`sbom::write`).
    manifest.hold_trees_as_entries();
    for entry in &mut manifest.entries {
        entry.from_base = entry.path.area() != "airlock" && omitted.contains(&entry.sha256);
    }
    manifest.base = base;
    let compression = options.layout.compression;
    tracing::info!("sign: manifest and provenance with key {}", key.key_id().short());
    let (manifest_sha256, manifest_bytes) = manifest.canonical_digest();
    if manifest_bytes > MAX_MANIFEST_BYTES {
        return Err(too_large(&manifest, manifest_bytes));
    }
    let envelope = provenance(&manifest, manifest_sha256, sources.spec, key, compression);
    tracing::info!("pack: {} entries into `{}`", manifest.entries.len(), out.display());
    let arrivals = Arrivals::expect(blobs.iter().map(PendingBlob::member));
    let cache = sources.fetch.cache;
    let jobs = sources.fetch.jobs;
    let packed = std::thread::scope(|scope| {
        // Image blobs download on a thread of their own while the members before them are
        // packed: the bundle is done about when the last blob is in, not a packing time later.
        let fetching = scope.spawn(|| {
            // Packing reports the progress: it follows the downloads in bundle order.
            let fetch = Fetch { cache, jobs, http: net.http(), reporter: &Silent };
            let fetched = net.block_on(fetch_blobs(&blobs, &fetch, options.blobs, &arrivals));
            if fetched.is_err() {
                arrivals.abandon();
            }
            fetched
        });
        let packed = pack(out, &manifest, key, &origins, Some(&envelope), options.layout, &arrivals, reporter);
        if packed.is_err() {
            arrivals.abandon();
        }
        let fetched = fetching.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // A failed download is why packing stopped: it is the error to report.
        fetched.map_err(|e| BuildError::Source(e.into()))?;
        packed.map_err(BuildError::Pack)
    })?;
    // What the build stored (the SBOM, layers, carried files) stays for the next one, offline.
    cache.sync()?;
    Ok(Built { manifest, packed })
}

/// The content digests a delta leaves out (those its base holds; never an `airlock/` member),
/// and the base to record: none when the base holds nothing this bundle carries.
fn omit(base: Option<&base::Base>, members: &[Member]) -> (Option<BaseRef>, std::collections::BTreeSet<Sha256>) {
    let Some(base) = base else { return (None, std::collections::BTreeSet::default()) };
    let omitted: std::collections::BTreeSet<Sha256> = members
        .iter()
        .filter(|m| m.path.area() != "airlock" && base.holds.contains(&m.sha256))
        .map(|m| m.sha256)
        .collect();
    if omitted.is_empty() {
        tracing::warn!("the base ({}) holds none of this bundle's content: building a full bundle", base.reference);
        return (None, omitted);
    }
    let bytes: u64 = members.iter().filter(|m| omitted.contains(&m.sha256)).map(|m| m.size).sum();
    tracing::info!("delta: {} members ({bytes} bytes) left to the base {}", omitted.len(), base.reference);
    (Some(base.reference.clone()), omitted)
}

/// The SBOM of the plan's artifacts, kept in the cache and added to the plan as a member.
fn add_sbom(
    plan: &mut Plan,
    spec: &SpecFile,
    created: Timestamp,
    sbom_spec: sbom::SbomSpec,
    cache: &Cache,
) -> Result<(), BuildError> {
    let meta = &spec.spec.bundle;
    let subject = sbom::Subject {
        name: &meta.name,
        version: &meta.version,
        created,
        artifacts: &plan.artifacts,
        spec: sbom_spec,
    };
    // Written into the cache as it is made (a 100,000-file tree's SBOM is 37 MB), hashed once.
    let mut created = cache.create()?;
    sbom::write(&subject, &mut created)?;
    let (sha256, size, origin) = created.commit()?;
    let path = MemberPath::new(SBOM).expect("a valid member path");
    plan.members.push(Member { path, size, sha256, origin: origin.into(), what: SBOM.into() });
    plan.members.sort_unstable_by(Member::order);
    Ok(())
}

/// The site trust root's files as `airlock/trust/` members: a site or node that missed a
/// rotation or a revocation catches up when it installs or applies the bundle.
fn add_carried_trust(plan: &mut Plan, files: &[(String, Vec<u8>)], cache: &Cache) -> Result<(), BuildError> {
    for (name, bytes) in files {
        let member = format!("{}{name}", crate::bundle::manifest::TRUST_PREFIX);
        let (sha256, size) = (Sha256::of_bytes(bytes), bytes.len() as u64);
        let origin = cache.put(sha256, Some(size), &member, bytes.as_slice())?;
        let path = MemberPath::new(&member).expect("trust file names are valid member paths");
        plan.members.push(Member { path, size, sha256, origin: origin.into(), what: member.into() });
    }
    plan.members.sort_unstable_by(Member::order);
    Ok(())
}

/// The manifest: what the spec and lock say, the plan's artifacts, and the members' entries.
fn assemble(
    spec: &SpecFile,
    lock_sha256: Sha256,
    key: &SigningKey,
    created: Timestamp,
    artifacts: Vec<Artifact>,
    entries: Vec<Entry>,
) -> Manifest {
    let meta = &spec.spec.bundle;
    Manifest {
        schema: SCHEMA_V1.to_owned(),
        name: meta.name.clone(),
        version: meta.version.clone(),
        description: meta.description.clone(),
        created,
        builder: Builder { tool: TOOL.to_owned(), key_id: key.key_id().clone() },
        spec_sha256: spec.sha256,
        lock_sha256,
        artifacts,
        entries,
        base: None,
        validation: crate::bundle::manifest::Validation::of_spec(&spec.spec),
        expires: meta.expires,
    }
}

/// A manifest no reader would accept, refused before anything is written, with the input
/// that lists the most files (a `[[file]]` directory or a model).
fn too_large(manifest: &Manifest, bytes: u64) -> BuildError {
    let largest = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::File(f) => Some((f.file_count(), format!("`[[file]]` `{}`", f.name))),
            Artifact::Model(m) => Some((m.files.len(), format!("model `{}`", m.repo))),
            _ => None,
        })
        .max_by_key(|(n, _)| *n)
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("; {what} alone lists {n} files"))
        .unwrap_or_default();
    BuildError::ManifestTooLarge { bytes, limit: MAX_MANIFEST_BYTES, entries: manifest.entries.len(), largest }
}

/// The signed provenance envelope naming the manifest.
fn provenance(
    manifest: &Manifest,
    manifest_sha256: Sha256,
    spec: &SpecFile,
    key: &SigningKey,
    compression: Compression,
) -> Vec<u8> {
    let spec_name = spec.path.file_name().map_or_else(|| "airlock.toml".into(), |n| n.to_string_lossy().into_owned());
    let statement = crate::attest::provenance::statement(manifest, manifest_sha256, &spec_name, compression);
    crate::attest::provenance::envelope(&statement, key)
}
