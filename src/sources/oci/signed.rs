//! `[[image]] verify`: the image's upstream Sigstore signature, found among what `attachments`
//! found (OCI referrers whose artifact type is a Sigstore bundle, cosign's bundle format; the
//! legacy `sha256-HEX.sig` tag's layers) and verified at lock time against the spec's policy
//! and the build host's trusted root. The first that verifies is the one the lock and the
//! bundle record; when none does, the image is refused (exit 3), naming each one found and
//! why it failed.

use futures_util::StreamExt as _;

use super::ImageError;
use crate::digest::Sha256;
use crate::oci::Store;
use crate::oci::doc::{self, Descriptor};
use crate::sign::sigstore::upstream::{is_bundle_media_type, record, verify_cosign_sig, verify_over_digest};
use crate::sign::sigstore::{MAX_DOCUMENT_BYTES, Root, Signer};
use crate::sources::Unsigned;
use crate::spec::lock::LockedAttachment;
use crate::spec::{SignatureForm, UpstreamSignature, UpstreamSigner};

/// How many referrer manifests and signatures `lock` fetches and tries for one image before it
/// gives up: a registry listing thousands of Sigstore-typed referrers cannot make it fetch
/// without end (each is bounded to `MAX_DOCUMENT_BYTES`, their number was not).
pub const MAX_TRIED: usize = 16;

/// What is left of [`MAX_TRIED`] for one image, and how many were passed over once it ran out.
struct Tries {
    left: usize,
    untried: usize,
}

impl Tries {
    /// Whether one more may be fetched and tried.
    fn take(&mut self) -> bool {
        if self.left == 0 {
            self.untried += 1;
            return false;
        }
        self.left -= 1;
        true
    }
}

/// The image's signature under `policy`, from its `attached` documents at `origin`.
pub(super) async fn verify_image(
    origin: &Store,
    reference: &str,
    digest: Sha256,
    attached: &[LockedAttachment],
    policy: &UpstreamSigner,
    root: &Root,
) -> Result<UpstreamSignature, ImageError> {
    let signer = Signer::upstream(policy);
    let mut found = Vec::new();
    let mut tries = Tries { left: MAX_TRIED, untried: 0 };
    for a in attached {
        // Cosign's tags are `sha256-HEX.sig`, `.att`, `.sbom` (lower case, as cosign writes them).
        let suffix = a.tag.as_deref().and_then(|t| t.rsplit_once('.')).map(|(_, s)| s);
        let is_sig_tag = suffix == Some("sig");
        if matches!(suffix, Some("att" | "sbom")) || (a.tag.is_none() && !tries.take()) {
            continue;
        }
        let bytes = match origin.manifest(Some(a.digest)).await {
            Ok((bytes, _)) => bytes,
            Err(e) => {
                found.push(format!("sha256:{}: {e}", a.digest));
                continue;
            }
        };
        let Ok(document) = doc::parse(&bytes) else { continue };
        if is_sig_tag {
            for layer in &document.blobs {
                if layer.annotations.is_empty() || !tries.take() {
                    continue;
                }
                let from = format!("`.sig` layer sha256:{}", layer.digest);
                let outcome = match small_blob(origin, layer).await {
                    Ok(payload) => verify_cosign_sig(&from, &layer.annotations, &payload, digest, &signer, root)
                        .map_err(|e| e.as_found()),
                    Err(e) => Err(format!("{from}: {e}")),
                };
                match outcome {
                    Ok(v) => return Ok(cosign_record(a.digest, layer.digest, policy, v)),
                    Err(e) => found.push(e),
                }
            }
            continue;
        }
        // A referrer manifest (the API's), or the referrers tag schema's index of them.
        let referrers: Vec<(Sha256, Vec<u8>)> = if document.is_index() {
            let mut out = Vec::new();
            for child in &document.children {
                if child.artifact_type.as_deref().is_some_and(|t| !is_bundle_media_type(t)) || !tries.take() {
                    continue;
                }
                match origin.manifest(Some(child.digest)).await {
                    Ok((bytes, d)) => out.push((d, bytes)),
                    Err(e) => found.push(format!("referrer sha256:{}: {e}", child.digest)),
                }
            }
            out
        } else {
            vec![(a.digest, bytes)]
        };
        for (manifest_digest, bytes) in referrers {
            let Ok(referrer) = doc::parse(&bytes) else { continue };
            if !referrer.artifact_type.as_deref().is_some_and(is_bundle_media_type) {
                continue;
            }
            for layer in referrer.blobs.iter().filter(|l| is_bundle_media_type(&l.media_type)) {
                let from = format!("referrer sha256:{manifest_digest}'s bundle sha256:{}", layer.digest);
                let outcome = match small_blob(origin, layer).await {
                    Ok(json) => verify_over_digest(&from, &json, digest, &signer, root).map_err(|e| e.as_found()),
                    Err(e) => Err(format!("{from}: {e}")),
                };
                match outcome {
                    Ok(v) => return Ok(record(SignatureForm::Referrer, layer.digest, policy, v)),
                    Err(e) => found.push(e),
                }
            }
        }
    }
    if tries.untried > 0 {
        found.push(format!(
            "{} more not fetched or tried (at most {MAX_TRIED} referrers and signatures are, for one image)",
            tries.untried
        ));
    }
    Err(Unsigned::new(reference.to_owned(), digest, policy, root, found).into())
}

/// A legacy `.sig` signature's record: its manifest, and the layer that verified.
fn cosign_record(
    manifest: Sha256,
    layer: Sha256,
    policy: &UpstreamSigner,
    v: crate::sign::sigstore::Verified,
) -> UpstreamSignature {
    let payload = Some(crate::digest::Prefixed(layer));
    UpstreamSignature { payload, ..record(SignatureForm::CosignSig, manifest, policy, v) }
}

/// A small blob (a Sigstore bundle, a simple-signing payload), checked against its digest.
async fn small_blob(origin: &Store, d: &Descriptor) -> Result<Vec<u8>, String> {
    if d.size > MAX_DOCUMENT_BYTES {
        return Err(format!("{} bytes, more than a signature has ({MAX_DOCUMENT_BYTES})", d.size));
    }
    let mut stream = origin.blob_stream(d).await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
    }
    let actual = Sha256::of_bytes(&out);
    if actual != d.digest {
        return Err(format!("expected sha256 {}, got {actual}", d.digest));
    }
    Ok(out)
}
