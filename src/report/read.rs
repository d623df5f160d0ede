//! The bundle a report is about, read: verified under a policy or read unverified (and said
//! so), or the part a node fed from a mirror keeps, checked in place.

use std::io::Read;

use super::{Held, RecordLine, ReportError};
use crate::bundle::Manifest;
use crate::bundle::manifest::{MAX_MANIFEST_BYTES, SBOM};
use crate::bundle::reader::{Discard, MemberSink, OnProblem, Report as Read_, leading_members, read_bundle};
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::progress::Reporter;
use crate::sign::Policy;
use crate::site::records::{Outcome as RecordOutcome, Record};
use crate::site::{BundleId, SiteRoot};

/// A member sink that keeps the SBOM (bounded like any leading member) and drops the rest.
struct KeepSbom(Option<Vec<u8>>);

impl MemberSink for KeepSbom {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> std::io::Result<()> {
        if path.as_str() != SBOM {
            return Discard.member(path, data);
        }
        let mut bytes = Vec::new();
        data.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes)?;
        std::io::copy(data, &mut std::io::sink())?;
        self.0 = Some(bytes);
        Ok(())
    }
}

/// A bundle read for the report.
pub(super) struct ReadBundle {
    pub(super) manifest: Manifest,
    pub(super) manifest_sha256: Sha256,
    pub(super) report: Option<Read_>,
    /// The part a node fed from a mirror keeps, checked in place (then `report` is `None`).
    pub(super) kept: Option<Kept>,
    pub(super) threshold: usize,
    pub(super) required: String,
    /// The rules the signers had to meet (a site's roles), to name each signer's role.
    pub(super) rules: Vec<crate::sign::policy::Rule>,
    pub(super) met: bool,
    pub(super) trust_root: Option<crate::sign::policy::Origin>,
    pub(super) source: String,
    pub(super) sbom: Option<Vec<u8>>,
}

pub(super) fn read(
    input: &crate::bundle::parts::Input,
    policy: Option<&Policy>,
    reporter: &dyn Reporter,
) -> Result<ReadBundle, ReportError> {
    let source = input.display().to_string();
    let unreadable = |detail: String| ReportError::Bundle(source.clone(), detail);
    let head = crate::bundle::reader::read_head(input.open()?).map_err(|p| unreadable(p.to_string()))?;
    let (report, sbom) = match policy {
        Some(policy) => {
            // The SBOM is kept from the verifying read: one pass, and the bytes shown are checked.
            let (stream, _) = input.open_trusted(&policy.keys)?;
            let mut keep = KeepSbom(None);
            let r = read_bundle(stream, policy, &mut keep, OnProblem::Continue, reporter)
                .map_err(|e| unreadable(e.to_string()))?;
            if r.manifest_sha256.is_some_and(|d| d != head.manifest_sha256) {
                return Err(unreadable("its manifest changed while it was read".into()));
            }
            (Some(r), keep.0)
        }
        None => (None, leading_members(input.open()?, &[SBOM]).ok().and_then(|mut m| m.remove(SBOM))),
    };
    let threshold = policy.map_or(0, Policy::least_signers);
    let required = policy.map(Policy::describe).unwrap_or_default();
    let met = policy.zip(report.as_ref()).is_some_and(|(p, r)| p.shortfall(&r.signers).is_none());
    let trust_root = policy.and_then(|p| p.origin);
    Ok(ReadBundle {
        manifest: head.manifest,
        manifest_sha256: head.manifest_sha256,
        report,
        kept: None,
        threshold,
        required,
        rules: policy.map(|p| p.rules.clone()).unwrap_or_default(),
        met,
        trust_root,
        source,
        sbom,
    })
}

/// The part of a bundle a node fed from a mirror keeps, as `check` found it.
pub(super) struct Kept {
    pub(super) ok: bool,
    pub(super) signers: Vec<crate::sign::KeyId>,
    pub(super) problems: Vec<String>,
    pub(super) held: Held,
}

/// The report's view of the part a node keeps: its manifest verified under `policy` and its
/// kept members compared with it (`check`); no SBOM or provenance, which stayed on the mirror.
pub(super) fn read_kept(
    root: &SiteRoot,
    kept: &crate::site::check::BundleCheck,
    manifest: Manifest,
    manifest_sha256: Sha256,
    policy: &Policy,
) -> ReadBundle {
    let (mut held, mut away) = ((0, 0), (0, 0));
    for e in &manifest.entries {
        let side = if crate::site::state::kept_by_node(e.path.as_str()) { &mut held } else { &mut away };
        side.0 += 1;
        side.1 += e.size;
    }
    let problems = kept.damage.iter().map(|d| format!("{}: {}", d.path, d.problem)).collect();
    ReadBundle {
        source: format!(
            "{} (the part this node keeps: the manifest, its signature and the packages; the rest stayed on the mirror)",
            root.bundle_dir(&kept.id).display()
        ),
        manifest,
        manifest_sha256,
        report: None,
        kept: Some(Kept {
            ok: kept.ok(),
            signers: kept.signers.clone(),
            problems,
            held: Held { entries: held.0, bytes: held.1, on_mirror_entries: away.0, on_mirror_bytes: away.1 },
        }),
        threshold: policy.least_signers(),
        required: policy.describe(),
        rules: policy.rules.clone(),
        met: kept.verified,
        trust_root: policy.origin,
        sbom: None,
    }
}

/// A kept part whose manifest no longer verifies (a revoked key, damage): its manifest read
/// as it claims, so that the page can say what it is and why it failed; bounded like any
/// manifest, and never trusted (the page leads with NOT VERIFIED).
pub(super) fn read_kept_unverified(
    root: &SiteRoot,
    kept: &crate::site::check::BundleCheck,
    policy: &Policy,
) -> Result<ReadBundle, ReportError> {
    let path = root.bundle_dir(&kept.id).join(crate::bundle::manifest::MANIFEST);
    let unreadable = |detail: String| ReportError::Bundle(path.display().to_string(), detail);
    let bytes = crate::site::root::read_bounded(&path, MAX_MANIFEST_BYTES)?
        .ok_or_else(|| unreadable("missing: nothing to report on".into()))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
    let mut read = read_kept(root, kept, manifest, Sha256::of_bytes(&bytes), policy);
    read.met = false;
    Ok(read)
}

/// Why the active bundle fails the site's policy now: the keys that signed it and counted when
/// it was installed but count no more, and the trust metadata then and now. `None` when every
/// key that signed it still counts: then its signature no longer verifying is damage.
pub(super) fn policy_failure(
    root: &SiteRoot,
    id: &BundleId,
    policy: &Policy,
    records: &[(RecordLine, Record)],
) -> Option<String> {
    let now: std::collections::BTreeSet<_> = policy.key_ids().into_iter().collect();
    let signers = crate::site::state::State::load(root)
        .ok()
        .and_then(|s| s.bundles.get(id).map(|b| b.signers.clone()))
        .unwrap_or_default();
    let gone: Vec<String> = signers.iter().filter(|k| !now.contains(k)).map(|k| format!("`{}`", k.short())).collect();
    let installed_under = records
        .iter()
        .rev()
        .filter(|(_, r)| {
            r.outcome() == RecordOutcome::Activated && r.bundle.as_ref().and_then(|b| b.id.as_ref()) == Some(id)
        })
        .find_map(|(_, r)| r.trust.as_ref()?.trust_root);
    if gone.is_empty() {
        return None;
    }
    let rule = policy.describe();
    Some(match policy.origin {
        Some(o) => {
            let then = installed_under.map_or_else(String::new, |t| {
                format!(" (it counted under targets version {} when installed)", t.targets_version)
            });
            format!(
                "policy: key {} signed this bundle and was revoked by the site's trust root: targets version {} (root \
                 version {}) no longer lists it{then}; the bundle now fails {rule}",
                gone.join(", "),
                o.targets_version,
                o.root_version
            )
        }
        None => format!(
            "policy: key {} signed this bundle and is no longer among the keys recorded for it; the bundle now fails {rule}",
            gone.join(", ")
        ),
    })
}

/// The manifest of a base release (a bundle or a lock is not needed: a bundle), and whether it
/// verified.
pub(super) fn read_manifest(
    input: &crate::bundle::parts::Input,
    policy: Option<&Policy>,
    reporter: &dyn Reporter,
) -> Result<(Manifest, bool), ReportError> {
    let read = read(input, policy, reporter)?;
    let verified = read.report.as_ref().is_some_and(Read_::verified);
    Ok((read.manifest, verified))
}
