//! A node reads a mirror's site root, served by any web server (`http(s)://HOST/PATH/`) or
//! mounted (`file:///PATH/`): the active bundle is `current/bundle.airlock`, its co-signatures
//! `current/bundle.airlock.KEYID.sig` beside it.
//!
//! Over HTTP the mirror is trusted for nothing. Its `current/airlock/manifest.json` and
//! signature are fetched first (bounded) and checked under the node's policy; only then is the
//! bundle file downloaded, bounded by what that verified manifest says its content is (a
//! mirror that serves more is cut off, never a full disk), into a directory under the node's
//! root. The bundle is then verified whole while it is staged, as any other source is.

use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use tokio::io::AsyncWriteExt as _;

use super::{RETAINED_BUNDLE, SiteError};
use crate::bundle::Manifest;
use crate::bundle::manifest::MAX_MANIFEST_BYTES;
use crate::fetch::{HttpError, Net};
use crate::sign::policy::CoSignature;
use crate::sign::{Policy, TrustedKey};

/// The largest signature file read from a mirror: a DER ECDSA signature in base64 is ~100 bytes.
const MAX_SIGNATURE_BYTES: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("`{0}` is not a mirror's site root: name it as http(s)://HOST/PATH/ or file:///PATH/")]
    NotAMirror(String),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("the mirror's current manifest `{url}` is not a manifest: {detail}")]
    Manifest { url: String, detail: String },
    #[error(
        "the mirror's current manifest `{url}` is signed by {signers} trusted key(s), {threshold} needed; \
         nothing was downloaded"
    )]
    Untrusted { url: String, signers: usize, threshold: usize },
    #[error("`{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::failure::Classify for MirrorError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            MirrorError::NotAMirror(_) => Class::Usage,
            MirrorError::Manifest { .. } | MirrorError::Untrusted { .. } => Class::Verification,
            MirrorError::Http(e) => e.class(),
            MirrorError::Io { .. } => Class::Runtime,
        }
    }
}

/// Whether `source` names a mirror's site root.
pub fn is_mirror(source: &str) -> bool {
    ["http://", "https://", "file://"].iter().any(|p| source.starts_with(p))
}

/// The bundle file a mirror's root makes current: a local path for `file://`, else the file
/// downloaded into `work` (a directory the caller removes), with the policy that verified
/// its manifest (the co-signatures the mirror holds counted).
pub fn current(
    source: &str,
    keys: Vec<TrustedKey>,
    threshold: usize,
    net: &Net,
    work: &Path,
) -> Result<(PathBuf, Policy), SiteError> {
    Policy::reachable(&keys, threshold)?;
    if let Some(path) = source.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(MirrorError::NotAMirror(source.to_owned()).into());
        }
        let file = Path::new(path).join("current").join(RETAINED_BUNDLE);
        let cosignatures = crate::sign::policy::cosignatures_beside(&file)
            .map_err(|source| SiteError::Open { path: file.clone(), source })?;
        return Ok((file, Policy::new(keys, threshold, cosignatures)?));
    }
    let base = format!("{}/current/", source.trim_end_matches('/'));
    let http = net.http();
    let (manifest, policy) = net.block_on(async {
        let base = base.as_str();
        let get = |rel: String, limit: u64| async move {
            let url = format!("{base}{rel}");
            http.fetch_small(&url, "*/*", None, limit).await.map(|(bytes, _)| bytes)
        };
        let url = format!("{base}airlock/manifest.json");
        let bytes = get("airlock/manifest.json".to_owned(), MAX_MANIFEST_BYTES).await.map_err(MirrorError::from)?;
        let signature =
            get("airlock/manifest.json.sig".to_owned(), MAX_SIGNATURE_BYTES).await.map_err(MirrorError::from)?;
        let mut cosignatures = Vec::new();
        for key in &keys {
            let name = format!("{RETAINED_BUNDLE}.{}.sig", key.key_id());
            match get(name.clone(), MAX_SIGNATURE_BYTES).await {
                Ok(sig) => cosignatures.push(CoSignature {
                    path: PathBuf::from(format!("{base}{name}")),
                    key_id: key.key_id().clone(),
                    signature: sig,
                }),
                Err(HttpError::Status { status: 404, .. }) => {}
                Err(e) => return Err(SiteError::from(MirrorError::from(e))),
            }
        }
        let policy = Policy::new(keys, threshold, cosignatures)?;
        let checked = policy.check(&bytes, &signature);
        if checked.signers.len() < threshold {
            return Err(MirrorError::Untrusted { url, signers: checked.signers.len(), threshold }.into());
        }
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| MirrorError::Manifest { url: url.clone(), detail: e.to_string() })?;
        Ok::<_, SiteError>((manifest, policy))
    })?;
    let file = work.join(RETAINED_BUNDLE);
    let limit = bundle_limit(&manifest);
    let url = format!("{base}{RETAINED_BUNDLE}");
    net.block_on(save(http, &url, &file, limit)).map_err(MirrorError::from)?;
    for co in &policy.cosignatures {
        let path = crate::sign::policy::cosignature_path(&file, &co.key_id);
        crate::atomic::write(&path, &co.signature).map_err(|source| MirrorError::Io { path, source })?;
    }
    Ok((file, policy))
}

/// The most bytes a bundle with this manifest can be: its content, tar's headers and padding
/// for each member, and zstd's worst case (it never grows data by more than a few bytes per
/// 128 KiB block), with room for the signed members.
fn bundle_limit(m: &Manifest) -> u64 {
    let content = m.content_bytes();
    let members = m.entries.len() as u64 + 8;
    content.saturating_add(content / 64).saturating_add(members.saturating_mul(3 * 512)).saturating_add(64 << 20)
}

/// `url` into `path`, at most `limit` bytes; tried again from the start after a dropped
/// connection, 5xx or 429.
async fn save(http: &crate::fetch::Http, url: &str, path: &Path, limit: u64) -> Result<u64, HttpError> {
    let once = || async {
        let response = http.stream(url).await?;
        let io = |e: std::io::Error| HttpError::Request {
            url: url.to_owned(),
            detail: format!("`{}`: {e}", path.display()),
        };
        // tokio's file writes on the blocking pool.
        let mut file = tokio::fs::File::create(path).await.map_err(io)?;
        let mut body = response.bytes_stream();
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| HttpError::Request { url: url.to_owned(), detail: crate::fetch::with_causes(&e) })?;
            size += chunk.len() as u64;
            if size > limit {
                return Err(HttpError::TooLarge { url: url.to_owned(), limit });
            }
            file.write_all(&chunk).await.map_err(io)?;
        }
        file.sync_all().await.map_err(io)?;
        Ok(size)
    };
    crate::fetch::with_retries(http.options(), &format!("GET {url}"), once, crate::fetch::transient_http).await
}
