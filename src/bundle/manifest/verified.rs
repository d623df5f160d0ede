//! A manifest whose signatures met a trust policy and whose check passed.

use super::artifacts::Artifact;
use super::check::ManifestError;
use super::{Entry, Manifest};
use crate::digest::Sha256;
use crate::sign::KeyId;

/// A manifest whose signatures met a trust policy over its exact bytes and whose
/// [`Manifest::check`] passed: the form every piece of code that acts on a bundle takes
/// (stage, validate, views, packages, publish, apply). tough's way: an unchecked manifest
/// cannot reach that code, because the only way to make one is `VerifiedManifest::establish`,
/// which is handed the policy and the signers found over those bytes and runs the check itself.
/// A manifest read without verifying (`inspect`, `status`, a report of an unverified file)
/// stays a [`Manifest`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedManifest {
    manifest: Manifest,
    sha256: Sha256,
}

impl VerifiedManifest {
    /// `manifest`, parsed from bytes whose sha256 is `sha256`, over which `signers` are the
    /// trusted keys whose signatures verified under `policy`: verified when they meet the
    /// policy and the manifest passes its check.
    pub(crate) fn establish(
        manifest: Manifest,
        sha256: Sha256,
        policy: &crate::sign::Policy,
        signers: &[KeyId],
    ) -> Result<Self, ManifestError> {
        if let Some(short) = policy.shortfall(signers) {
            return Err(ManifestError::Unsigned { role: short.role, need: short.need, have: short.have.len() });
        }
        manifest.check()?;
        Ok(VerifiedManifest { manifest, sha256 })
    }

    /// The manifest, no longer vouched for (to show it).
    pub fn into_manifest(self) -> Manifest {
        self.manifest
    }

    /// The sha256 of the manifest's bytes: what its signatures are over, and the bundle's id.
    pub fn sha256(&self) -> Sha256 {
        self.sha256
    }

    /// The same verified manifest listing only the entries and artifacts `entry` and
    /// `artifact` keep (what a node keeps, `site::mirror::kept`): it can only lose what it lists.
    #[must_use]
    pub fn narrowed(&self, entry: impl Fn(&Entry) -> bool, artifact: impl Fn(&Artifact) -> bool) -> Self {
        let mut manifest = self.manifest.clone();
        manifest.entries.retain(entry);
        manifest.artifacts.retain(artifact);
        VerifiedManifest { manifest, sha256: self.sha256 }
    }
}

impl std::ops::Deref for VerifiedManifest {
    type Target = Manifest;

    fn deref(&self) -> &Manifest {
        &self.manifest
    }
}
