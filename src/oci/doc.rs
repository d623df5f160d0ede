//! The parts of OCI and Docker schema-2 documents airlock needs: media types, descriptors,
//! manifests and indexes, platform selection, and the image layout's `index.json`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// What airlock asks registries for, and carries.
pub const ACCEPTED: [&str; 4] = [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST];
/// The annotation naming an image in an OCI layout's `index.json`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Names, in the bundle's layout, the image an untagged referrer refers to; install pushes the
/// referrer by digest into that image's repository.
pub const REFERRER_OF: &str = "dev.airlock.referrer-of";
/// Largest manifest or index accepted (the distribution spec suggests registries cap at 4 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Descriptor {
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(rename = "artifactType", default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
}

/// A manifest or an index, reduced to what refers to other content.
#[derive(Debug, Clone)]
pub struct Document {
    pub media_type: String,
    /// Index entries (empty for a manifest).
    pub children: Vec<Descriptor>,
    /// Config and layers (empty for an index).
    pub blobs: Vec<Descriptor>,
    /// What an artifact manifest holds: its `artifactType`, else its config's media type when
    /// that is not a plain image config (OCI image spec 1.1, "artifact usage").
    pub artifact_type: Option<String>,
}

impl Document {
    pub fn is_index(&self) -> bool {
        is_index(&self.media_type)
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(rename = "artifactType", default)]
    artifact_type: Option<String>,
}

/// Why a manifest, an index or a layout's `index.json` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    #[error("not {expected}: {detail}")]
    NotJson { expected: &'static str, detail: String },
    #[error("schemaVersion {0} is not supported (schema 2 only)")]
    Schema(u32),
    #[error("media type `{0}` is not supported")]
    MediaType(String),
    #[error("nested index `sha256:{0}` is not supported")]
    Nested(Sha256),
    #[error("index without `manifests`")]
    NoManifests,
    #[error("platform `{want}` is not in the index (it has {})", .have.join(", "))]
    NoPlatform { want: String, have: Vec<String> },
    /// One of the two indexes `listed_in` compares.
    #[error("the {which} index: {source}")]
    Of {
        which: &'static str,
        #[source]
        source: Box<DocError>,
    },
    #[error("a platform-filtered image must be an index filtered from an index")]
    NotFromAnIndex,
    #[error("platform manifest sha256:{0} is not listed in the upstream index the signature is over")]
    NotListed(Sha256),
}

impl crate::failure::Classify for DocError {
    fn class(&self) -> crate::failure::Class {
        match self {
            // The publisher's signature is over an index that does not list it.
            DocError::NotListed(_) | DocError::NotFromAnIndex => crate::failure::Class::Verification,
            DocError::Of { source, .. } => source.class(),
            DocError::NotJson { .. }
            | DocError::Schema(_)
            | DocError::MediaType(_)
            | DocError::Nested(_)
            | DocError::NoManifests
            | DocError::NoPlatform { .. } => crate::failure::Class::Runtime,
        }
    }
}

/// Parse a manifest or index. An OCI document may omit `mediaType`; its shape decides.
pub fn parse(bytes: &[u8]) -> Result<Document, DocError> {
    let raw: Raw = serde_json::from_slice(bytes)
        .map_err(|e| DocError::NotJson { expected: "a manifest or index", detail: e.to_string() })?;
    if raw.schema_version != 2 {
        return Err(DocError::Schema(raw.schema_version));
    }
    let media_type = match (raw.media_type, &raw.manifests) {
        (Some(mt), _) => mt,
        (None, Some(_)) => OCI_INDEX.to_owned(),
        (None, None) => OCI_MANIFEST.to_owned(),
    };
    if !ACCEPTED.contains(&media_type.as_str()) {
        return Err(DocError::MediaType(media_type));
    }
    if is_index(&media_type) {
        let children = raw.manifests.unwrap_or_default();
        if let Some(nested) = children.iter().find(|c| is_index(&c.media_type)) {
            return Err(DocError::Nested(nested.digest));
        }
        return Ok(Document { media_type, children, blobs: Vec::new(), artifact_type: raw.artifact_type });
    }
    let plain_configs = ["application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json"];
    let artifact_type = raw
        .artifact_type
        .or_else(|| raw.config.as_ref().map(|c| c.media_type.clone()).filter(|t| !plain_configs.contains(&t.as_str())));
    let mut blobs: Vec<Descriptor> = raw.config.into_iter().collect();
    blobs.extend(raw.layers.unwrap_or_default());
    Ok(Document { media_type, children: Vec::new(), blobs, artifact_type })
}

/// The entries of an OCI image layout's `index.json`, which may name indexes as well as
/// manifests (unlike an image index, where airlock refuses nesting).
pub fn parse_layout_index(bytes: &[u8]) -> Result<Vec<Descriptor>, DocError> {
    #[derive(Deserialize)]
    struct LayoutIndex {
        #[serde(rename = "schemaVersion")]
        schema_version: u32,
        manifests: Vec<Descriptor>,
    }
    let index: LayoutIndex = serde_json::from_slice(bytes)
        .map_err(|e| DocError::NotJson { expected: "an image layout index", detail: e.to_string() })?;
    if index.schema_version != 2 {
        return Err(DocError::Schema(index.schema_version));
    }
    Ok(index.manifests)
}

/// The index entries for the wanted platforms (`os/arch[/variant]`; a want without a variant
/// matches any variant). No wants: every entry. A want no entry matches is an error listing
/// what the index has.
pub fn select_platforms<'a>(children: &'a [Descriptor], wanted: &[String]) -> Result<Vec<&'a Descriptor>, DocError> {
    if wanted.is_empty() {
        return Ok(children.iter().collect());
    }
    let matches = |want: &str, d: &Descriptor| {
        d.platform.as_ref().is_some_and(|p| {
            let full = p.to_string();
            full == want || (want.matches('/').count() == 1 && format!("{}/{}", p.os, p.architecture) == want)
        })
    };
    for want in wanted {
        if !children.iter().any(|d| matches(want, d)) {
            let have: Vec<String> =
                children.iter().filter_map(|d| d.platform.as_ref().map(ToString::to_string)).collect();
            return Err(DocError::NoPlatform { want: want.clone(), have });
        }
    }
    Ok(children.iter().filter(|d| wanted.iter().any(|w| matches(w, d))).collect())
}

/// The index with only the entries whose digests are kept, other fields untouched (key order
/// preserved), so the result is deterministic for the same upstream index.
pub fn filter_index(bytes: &[u8], keep: &[Sha256]) -> Result<Vec<u8>, DocError> {
    let not_json = |e: serde_json::Error| DocError::NotJson { expected: "an index", detail: e.to_string() };
    let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(not_json)?;
    let entries = value.get_mut("manifests").and_then(|m| m.as_array_mut()).ok_or(DocError::NoManifests)?;
    entries.retain(|e| {
        e.get("digest")
            .and_then(|d| d.as_str())
            .and_then(|d| crate::digest::prefixed::parse(d).ok())
            .is_some_and(|d| keep.contains(&d))
    });
    serde_json::to_vec(&value).map_err(not_json)
}

/// That an index filtered to some platforms (`carried`, and the platform manifests `platforms`
/// named beside it) lists only what the `upstream` index lists: the upstream index is what a
/// publisher signs, so a platform manifest it does not list is not the publisher's.
pub fn listed_in(upstream: &[u8], carried: &[u8], platforms: &[Sha256]) -> Result<(), DocError> {
    let of = |which| move |e| DocError::Of { which, source: Box::new(e) };
    let upstream = parse(upstream).map_err(of("upstream"))?;
    let carried = parse(carried).map_err(of("carried"))?;
    if !upstream.is_index() || !carried.is_index() {
        return Err(DocError::NotFromAnIndex);
    }
    let listed: std::collections::BTreeSet<Sha256> = upstream.children.iter().map(|c| c.digest).collect();
    let named = carried.children.iter().map(|c| c.digest).chain(platforms.iter().copied());
    match named.into_iter().find(|d| !listed.contains(d)) {
        Some(d) => Err(DocError::NotListed(d)),
        None => Ok(()),
    }
}

/// `oci-layout` and `index.json` of the bundle's image layout: one entry per image, named by
/// its reference, sorted by name.
pub fn layout_index(mut entries: Vec<Descriptor>) -> Vec<u8> {
    let key = |d: &Descriptor| (d.annotations.get(REF_NAME).or(d.annotations.get(REFERRER_OF)).cloned(), d.digest);
    entries.sort_by_key(key);
    let index = serde_json::json!({ "schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries });
    serde_json_canonicalizer::to_vec(&index).expect("descriptors serialise")
}

pub const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_index_lists_only_what_the_upstream_index_lists() {
        let index = |digests: &[Sha256]| {
            let manifests: Vec<_> = digests
                .iter()
                .map(|d| serde_json::json!({"mediaType": OCI_MANIFEST, "digest": format!("sha256:{d}"), "size": 1}))
                .collect();
            serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}))
                .unwrap()
        };
        let (amd, arm, evil) = (Sha256::of_bytes(b"amd64"), Sha256::of_bytes(b"arm64"), Sha256::of_bytes(b"evil"));
        let upstream = index(&[amd, arm]);
        listed_in(&upstream, &index(&[amd]), &[amd]).unwrap();
        // A platform manifest the publisher's index never listed, named in the manifest or in
        // the carried index: refused.
        let e = listed_in(&upstream, &index(&[amd]), &[evil]).unwrap_err();
        assert_eq!(e, DocError::NotListed(evil));
        assert!(e.to_string().contains(&evil.to_string()) && e.to_string().contains("not listed"), "{e}");
        listed_in(&upstream, &index(&[evil]), &[amd]).unwrap_err();
    }

    fn d(n: u8) -> String {
        format!("sha256:{}", Sha256::of_bytes(&[n]))
    }

    fn index() -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": d(1), "size": 10, "platform": {"os": "linux", "architecture": "amd64"}},
                {"mediaType": OCI_MANIFEST, "digest": d(2), "size": 11, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            ],
        }))
        .unwrap()
    }

    #[test]
    fn parses_indexes_and_manifests_by_shape() {
        let doc = parse(&index()).unwrap();
        assert!(doc.is_index());
        assert_eq!(doc.children[1].platform.as_ref().unwrap().to_string(), "linux/arm64/v8");
        let manifest = serde_json::json!({"schemaVersion": 2, "config": {"mediaType": "c", "digest": d(3), "size": 1}, "layers": [{"mediaType": "l", "digest": d(4), "size": 2}]});
        let doc = parse(&serde_json::to_vec(&manifest).unwrap()).unwrap();
        assert_eq!(doc.media_type, OCI_MANIFEST);
        assert_eq!(doc.blobs.len(), 2);
        assert_eq!(parse(b"{\"schemaVersion\": 1}").unwrap_err(), DocError::Schema(1));
        assert!(parse(b"[]").is_err());
    }

    #[test]
    fn selects_platforms_and_explains_a_missing_one() {
        let doc = parse(&index()).unwrap();
        assert_eq!(select_platforms(&doc.children, &[]).unwrap().len(), 2);
        let arm = select_platforms(&doc.children, &["linux/arm64".into()]).unwrap();
        assert_eq!(arm.len(), 1);
        assert_eq!(arm[0].size, 11);
        let err = select_platforms(&doc.children, &["linux/s390x".into()]).unwrap_err();
        assert!(err.to_string().contains("linux/amd64, linux/arm64/v8"), "{err}");
    }

    #[test]
    fn filtering_keeps_order_and_other_fields() {
        let keep = [crate::digest::prefixed::parse(&d(2)).unwrap()];
        let filtered = filter_index(&index(), &keep).unwrap();
        let doc = parse(&filtered).unwrap();
        assert_eq!(doc.children.len(), 1);
        assert_eq!(doc.media_type, OCI_INDEX);
        assert_eq!(filtered, filter_index(&index(), &keep).unwrap());
    }
}
