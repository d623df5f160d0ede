//! An rpm-md repository as an entry names it, fetched and verified: `repodata/repomd.xml`
//! against `repomd.xml.asc` and the entry's keyring, each metadata file by the checksum
//! `repomd.xml` gives it (kept in the cache while it names it), its module streams, and the
//! packages of its `primary` for the entry's architecture.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::Digest as _;

use super::RpmError;
use super::closure::Pkg;
use crate::fetch::{HttpError, blocking};
use crate::rpmmd as repodata;
use crate::sources::index::{Compression, Index, ReadError};
use crate::sources::keyring::Keyring;
use crate::sources::{SourceError, Sources};
use crate::spec::RpmSpec;
use repodata::{Checksum, RepoData, Repomd};

/// The most `repomd.xml` may be.
const MAX_REPOMD: u64 = 4 << 20;
/// The most a metadata file may be as fetched.
const MAX_INDEX: u64 = 256 << 20;
/// The most a metadata file may decompress to (a distribution's primary is ~150 MB).
const MAX_PLAIN: u64 = 2 << 30;

/// A metadata file's compression, by its name.
pub(super) fn compression(location: &str) -> Compression {
    match location.rsplit('.').next() {
        Some("gz") => Compression::Gz,
        Some("xz") => Compression::Xz,
        Some("zst") => Compression::Zst,
        Some("bz2") => Compression::Bz2,
        _ => Compression::Plain,
    }
}

/// The SHA-2 digest `kind` of `bytes`, hex.
pub(super) fn hex_digest(kind: &str, bytes: &[u8]) -> Option<String> {
    Some(match kind {
        "sha256" => hex::encode(sha2::Sha256::digest(bytes)),
        "sha384" => hex::encode(sha2::Sha384::digest(bytes)),
        "sha512" => hex::encode(sha2::Sha512::digest(bytes)),
        _ => return None,
    })
}

/// A verified repository: its `repomd.xml`, and the keyring it was verified with.
pub(super) struct Repo {
    pub(super) url: String,
    pub(super) repomd: Repomd,
    pub(super) keyring: Option<Arc<Keyring>>,
}

/// `repodata/repomd.xml`, verified with `repomd.xml.asc` (or, with `allow_unsigned`, not).
pub(super) async fn repo(sources: &Sources<'_>, entry: &RpmSpec) -> Result<Repo, SourceError> {
    let http = sources.fetch.http;
    let url = entry.url();
    let keyring = match &entry.keyring {
        Some(k) => {
            let path = sources.spec.base_dir().join(k);
            Some(Arc::new(Keyring::load(&path).await.map_err(|e| RpmError::Keyring { path, detail: e.to_string() })?))
        }
        None => None,
    };
    let md_url = format!("{url}/repodata/repomd.xml");
    let (bytes, _) = http.fetch_small(&md_url, "*/*", None, MAX_REPOMD).await?;
    let sig_url = format!("{md_url}.asc");
    if let Some(k) = &keyring {
        let sig = match http.fetch_small(&sig_url, "*/*", None, 1 << 20).await {
            Ok((b, _)) => b,
            Err(HttpError::Status { status: 404, .. }) => return Err(RpmError::Unsigned { url: md_url }.into()),
            Err(e) => return Err(e.into()),
        };
        let ok = k
            .verifies_detached(&bytes, &sig)
            .map_err(|e| RpmError::Metadata { url: sig_url.clone(), detail: e.to_string() })?;
        if !ok {
            return Err(RpmError::Signature { url: sig_url, keyring: k.path.clone() }.into());
        }
    } else {
        tracing::warn!("{md_url}: allow_unsigned = true: the repomd.xml signature is NOT checked");
    }
    let repomd = repodata::repomd(&bytes).map_err(|detail| RpmError::Repodata { url: md_url.clone(), detail })?;
    Ok(Repo { url, repomd, keyring })
}

/// One metadata file of `repo`, fetched and verified by its checksum; decompressed (and
/// checked against its open-checksum) only while read.
pub(super) async fn metadata(sources: &Sources<'_>, repo: &Repo, data: &RepoData) -> Result<Index, SourceError> {
    let url = format!("{}/{}", repo.url, data.location);
    let bad = |detail: String| RpmError::Metadata { url: url.clone(), detail };
    if data.location.contains("..") || data.location.starts_with('/') {
        return Err(bad(format!("location `{}` leaves the repository", data.location)).into());
    }
    let sum = data.checksum.as_ref().ok_or_else(|| bad("`repomd.xml` gives it no checksum".into()))?;
    if !sum.strong() {
        return Err(RpmError::WeakChecksum { url, kind: sum.kind.clone() }.into());
    }
    let cache = sources.fetch.cache;
    let sha256 = Some(sum.hex.as_str()).filter(|_| sum.kind == "sha256");
    let hit = sha256.zip(data.size).and_then(|(hex, size)| crate::sources::index::cached(cache, hex, size, MAX_INDEX));
    // A copy from the cache was hashed as it was read (`index::cached`); a fetched one is
    // checked here, then kept.
    let bytes = if let Some(bytes) = hit {
        bytes
    } else {
        let (bytes, _) = sources.fetch.http.fetch_small(&url, "*/*", None, MAX_INDEX).await?;
        let actual = hex_digest(&sum.kind, &bytes).unwrap_or_default();
        if actual != sum.hex || data.size.is_some_and(|s| s != bytes.len() as u64) {
            return Err(RpmError::Mismatch {
                url,
                what: "checksum/size",
                expected: format!("{}:{}/{}", sum.kind, sum.hex, data.size.map_or("?".into(), |s| s.to_string())),
                actual: format!("{}:{actual}/{}", sum.kind, bytes.len()),
            }
            .into());
        }
        if let Some(hex) = sha256 {
            crate::sources::index::keep(cache, hex, &bytes, &data.location).await;
        }
        bytes
    };
    // The decompressed bytes are checked too when the open-checksum is a sha256.
    let plain = match (&data.open_checksum, data.open_size) {
        (Some(Checksum { kind, hex }), Some(size)) if kind == "sha256" => Some((hex.clone(), size)),
        _ => None,
    };
    let compression = compression(&data.location);
    let plain = plain.filter(|_| compression != Compression::Plain);
    let limit = crate::sources::index::plain_limit(data.open_size, MAX_PLAIN);
    Ok(Index { url, bytes, compression, plain, limit })
}

pub(super) fn read_error(url: &str, e: ReadError<crate::rpmmd::MetadataError>) -> RpmError {
    match e {
        ReadError::Mismatch { expected, actual } => {
            RpmError::Mismatch { url: format!("{url} (decompressed)"), what: "sha256/size", expected, actual }
        }
        ReadError::Unreadable(detail) => RpmError::Metadata { url: url.to_owned(), detail },
        ReadError::Refused(detail) => RpmError::Repodata { url: url.to_owned(), detail },
    }
}

/// The module streams of a repository (`modules.yaml`), by the NEVRA of each rpm they hold.
pub(super) async fn modules(sources: &Sources<'_>, repo: &Repo) -> Result<BTreeMap<String, String>, SourceError> {
    let Some(data) = repo.repomd.get("modules") else { return Ok(BTreeMap::new()) };
    let index = metadata(sources, repo, data).await?;
    let url = index.url.clone();
    let streams = blocking(move || {
        let mut text = String::new();
        // A file that does not read as text is not modulemd YAML, and is said so.
        index
            .stream(|r| {
                r.read_to_string(&mut text)
                    .map(drop)
                    .map_err(|e| crate::rpmmd::MetadataError::Syntax { format: "modulemd YAML", detail: e.to_string() })
            })
            .map_err(|e| read_error(&index.url, e))?;
        repodata::modules(&text).map_err(|detail| RpmError::Repodata { url, detail })
    })
    .await?;
    let mut out = BTreeMap::new();
    for s in streams {
        for nevra in &s.rpms {
            // modulemd writes `NAME-EPOCH:VERSION-RELEASE.ARCH`; keys are as `Package::nevra`.
            if let Some((name, epoch, v, r, a)) = repodata::split_nevra(nevra) {
                let evr = if epoch == 0 { format!("{v}-{r}") } else { format!("{epoch}:{v}-{r}") };
                out.insert(format!("{name}-{evr}.{a}"), format!("{}:{}", s.name, s.stream));
            }
        }
    }
    Ok(out)
}

/// Every package of `entry`'s primary for its architecture (and `noarch`), with its stream.
pub(super) async fn packages(
    sources: &Sources<'_>,
    entry: &RpmSpec,
    repo: &Repo,
    source: usize,
) -> Result<Vec<Pkg>, SourceError> {
    let data = repo.repomd.get("primary").ok_or_else(|| RpmError::Metadata {
        url: format!("{}/repodata/repomd.xml", repo.url),
        detail: "lists no `primary` metadata".into(),
    })?;
    let index = metadata(sources, repo, data).await?;
    let streams = modules(sources, repo).await?;
    let arch = entry.arch.clone();
    let pkgs = blocking(move || {
        let mut pkgs = Vec::new();
        index
            .stream(|r| {
                repodata::primary(r, |p| {
                    if p.arch == arch || p.arch == "noarch" {
                        let module = streams.get(&p.nevra()).cloned();
                        pkgs.push(Pkg { package: p, source, module });
                    }
                })
            })
            .map_err(|e| read_error(&index.url, e))?;
        Ok::<_, RpmError>(pkgs)
    })
    .await?;
    Ok(pkgs)
}
