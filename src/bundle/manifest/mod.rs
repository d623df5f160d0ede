//! `airlock/manifest.json`, bundle format v1: what the bundle is, what the user asked for, and
//! the size and sha256 of every content member. Signed as RFC 8785 canonical JSON.

mod artifacts;
mod canonical;
mod check;
#[cfg(test)]
mod tests;
mod verified;

pub use artifacts::*;
pub use check::{ArtifactRule, ByPath, ManifestError, TagMismatch};
pub use verified::VerifiedManifest;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::sign::KeyId;
use crate::spec::BundleName;

pub const SCHEMA_V1: &str = "airlock.bundle/v1";
/// Member 1: the manifest.
pub const MANIFEST: &str = "airlock/manifest.json";
/// Member 2: the cosign `sign-blob` signature over the manifest's bytes.
pub const SIGNATURE: &str = "airlock/manifest.json.sig";
/// Reserved names under `airlock/` that later members may use.
pub const SBOM: &str = "airlock/sbom.cdx.json";
pub const PROVENANCE: &str = "airlock/provenance.dsse.json";
/// Where a bundle carries its site trust root's metadata (`build --trust-root`).
pub const TRUST_PREFIX: &str = "airlock/trust/";

/// `airlock/trust/N.root.json`, `airlock/trust/targets.json`, or the Sigstore trusted root
/// the targets list (`airlock/trust/trusted_root.json`).
pub fn is_carried_trust(path: &str) -> bool {
    path.strip_prefix(TRUST_PREFIX).is_some_and(|name| {
        name == "targets.json"
            || name == "trusted_root.json"
            || name.strip_suffix(".root.json").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}
/// Top-level areas a content member may live in.
pub const AREAS: [&str; 8] = ["airlock", "images", "wheels", "debs", "rpms", "models", "files", "sigstore"];
/// The largest manifest a reader accepts before it has checked the signature.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// The largest signature member a reader accepts.
pub const MAX_SIGNATURE_BYTES: u64 = crate::sign::MAX_SIGNATURE_BYTES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub name: BundleName,
    pub version: semver::Version,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created: Timestamp,
    pub builder: Builder,
    pub spec_sha256: Sha256,
    pub lock_sha256: Sha256,
    pub artifacts: Vec<Artifact>,
    pub entries: Vec<Entry>,
    /// A delta bundle's base: the entries marked `from_base` are not in this bundle but in
    /// that one, which the site must have retained (`build --base`, `--base-lock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    /// The spec's `[validation]` section and `[[impact]]` register.
    #[serde(default, deserialize_with = "validation_section")]
    pub validation: Validation,
    /// The spec's `[bundle] expires`: a site refuses the bundle after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
}

/// The manifest's `validation`: the spec's `[validation]` section (where the stack's version
/// is read, the support matrix's rows, the acceptance checks) and its `[[impact]]` register,
/// in the spec's one shape. Typed: a field this airlock does not know (a newer airlock's)
/// refuses the manifest when it is read, naming the field, instead of reaching code that would
/// judge a stack without it.
pub type Validation = crate::spec::Validation<crate::spec::Check, crate::spec::Impact>;

impl Validation {
    /// What a bundle built from `spec` carries.
    pub fn of_spec(spec: &crate::spec::Spec) -> Self {
        spec.validation.with(|c| c.get_ref().clone(), spec.impact.iter().map(|i| i.get_ref().clone()).collect())
    }
}

/// `validation` as written (`null` reads as none), with what a field this airlock does not know
/// means said in the error.
fn validation_section<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Validation, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    if value.is_null() {
        return Ok(Validation::default());
    }
    serde_json::from_value(value).map_err(|e| {
        serde::de::Error::custom(format!(
            "the bundle's `validation` section cannot be read by airlock {}: {e} (a newer airlock's field?)",
            env!("CARGO_PKG_VERSION")
        ))
    })
}

/// Who built the bundle: the tool and the key id of the build key (a claim; only the
/// signature check proves which key signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Builder {
    pub tool: String,
    pub key_id: KeyId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub path: MemberPath,
    pub size: u64,
    pub sha256: Sha256,
    /// Not carried: the base bundle holds these bytes (a delta bundle's entry).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_base: bool,
}

/// The bundle a delta was built against. `build --base OLD.airlock` records which bundle
/// (its manifest's sha256, name and version); `build --base-lock OLD.lock` knows only the
/// lock, and any bundle built from that lock serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<Sha256>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<BundleName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<semver::Version>,
    pub lock_sha256: Sha256,
}

impl std::fmt::Display for BaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => write!(f, "{n} {v}")?,
            (Some(n), None) => write!(f, "{n}")?,
            _ => f.write_str("the bundle")?,
        }
        match &self.manifest_sha256 {
            Some(m) => write!(f, " (id {}, manifest sha256 {m})", m.short(16)),
            None => write!(f, " built from lock sha256 {}", self.lock_sha256),
        }
    }
}

/// The build key a manifest's bytes name, read without trusting them (for saying who a bundle
/// claims signed it when no trusted key did): `None` unless it is a well-formed key id.
pub fn claimed_builder(bytes: impl std::io::Read) -> Option<KeyId> {
    #[derive(Deserialize)]
    struct Claim {
        builder: ClaimedBuilder,
    }
    #[derive(Deserialize)]
    struct ClaimedBuilder {
        key_id: String,
    }
    let claim: Claim = serde_json::from_reader(bytes).ok()?;
    KeyId::parse(&claim.builder.key_id)
}

/// What a site needs to know before it unpacks a bundle (the space it takes, the base a delta
/// needs), read from the manifest as it streams past: the entries are summed, not kept. Not
/// verified; `None` sizes when they are absurd (`check` would refuse them).
#[derive(Debug, Deserialize)]
pub struct Outline {
    #[serde(default)]
    pub base: Option<BaseRef>,
    #[serde(rename = "entries", deserialize_with = "sum_sizes")]
    pub content_bytes: Option<u64>,
}

fn sum_sizes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Sizes;
    #[derive(Deserialize)]
    struct Sized {
        size: u64,
    }
    impl<'de> serde::de::Visitor<'de> for Sizes {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of entries")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u64>, A::Error> {
            let mut total = Some(0u64);
            while let Some(Sized { size }) = seq.next_element()? {
                total = total.filter(|_| size <= MAX_ENTRY_BYTES).and_then(|t| t.checked_add(size));
            }
            Ok(total.filter(|t| *t <= MAX_TOTAL_BYTES))
        }
    }
    d.deserialize_seq(Sizes)
}

/// The largest entry a manifest may list (1 PiB) and the largest total (4 PiB): far past any
/// medium, far below where `u64` arithmetic on sizes, padding and budgets could overflow.
pub const MAX_ENTRY_BYTES: u64 = 1 << 50;
pub const MAX_TOTAL_BYTES: u64 = 1 << 52;

impl Manifest {
    /// The sum of the entries' sizes (saturating: `check` refuses a manifest whose sum does
    /// not fit, but callers that show an unverified manifest must not panic either).
    pub fn content_bytes(&self) -> u64 {
        self.entries.iter().fold(0u64, |sum, e| sum.saturating_add(e.size))
    }

    /// The entries this bundle carries (all but a delta's `from_base` ones).
    pub fn carried(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| !e.from_base)
    }

    /// The bytes of the entries this bundle carries.
    pub fn carried_bytes(&self) -> u64 {
        self.carried().fold(0u64, |sum, e| sum.saturating_add(e.size))
    }

    /// A manifest that was read holds a directory's files once, as its entries
    /// (`FileArtifact::tree`): list them in the directory's `files` again, for output that
    /// shows them (`inspect --json`) or writes the manifest.
    pub fn list_tree_files(&mut self) {
        for a in &mut self.artifacts {
            let Artifact::File(f) = a else { continue };
            if f.tree.take().is_some() {
                f.files = tree_files(&self.entries, &f.path);
            }
        }
    }

    /// Hold each directory's files once, as its entries (`FileArtifact::tree`), as a manifest
    /// that was read does: `build` does so once the SBOM, the last reader of the list, is
    /// written. At 200,000 files the list was 18 MB of `build`'s memory.
    pub fn hold_trees_as_entries(&mut self) {
        for a in &mut self.artifacts {
            if let Artifact::File(f) = a
                && !f.files.is_empty()
            {
                let mut sum = TreeSum::default();
                for t in std::mem::take(&mut f.files) {
                    sum.add(t.path.as_str(), t.sha256, t.size);
                }
                f.tree = Some(sum.finish());
            }
        }
    }

    /// Give back what parsing over-allocated: JSON arrays arrive without a length, so a list
    /// of 100,000 entries grew by doubling, up to twice its size.
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        for a in &mut self.artifacts {
            match a {
                Artifact::File(f) => f.files.shrink_to_fit(),
                Artifact::Model(m) => m.files.shrink_to_fit(),
                _ => {}
            }
        }
    }
}

/// The entries under `dir/` as a directory's files, in path order.
fn tree_files(entries: &[Entry], dir: &MemberPath) -> Vec<ModelFile> {
    let dir = format!("{dir}/");
    let mut files: Vec<ModelFile> = entries
        .iter()
        .filter_map(|e| {
            // The tail of a member path after a `/` is a member path itself.
            let path = MemberPath::new(e.path.as_str().strip_prefix(&dir)?).ok()?;
            Some(ModelFile { path, sha256: e.sha256, size: e.size })
        })
        .collect();
    files.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    files
}
