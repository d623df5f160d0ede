//! `airlock report`: the approval pack. One self-contained HTML page (and the same data as
//! JSON) that answers what the upgrade guide's change-approval meeting asks: what the bundle
//! carries, who signed it against which threshold, what changed since the release running
//! today, the firmware and its floors, the support matrix; and on a site, the current-state
//! record, each matrix row's verdict with its reasons, every check's result, the install and
//! rollback records with their phase times (the rehearsed rollback), and the verdict's colour.
//!
//! Every value comes from a bundle verified here (or, labelled so, one read unverified) or
//! from the site's records. Nothing depends on the time it is made: the same inputs give the
//! same bytes.

pub mod bom;
pub mod fleet;
pub mod html;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bundle::Manifest;
use crate::bundle::manifest::{Artifact, FileArtifact, MAX_MANIFEST_BYTES, SBOM};
use crate::bundle::reader::{Discard, MemberSink, OnProblem, Report as Read_, leading_members, read_bundle};
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::progress::Reporter;
use crate::sign::Policy;
use crate::sign::policy::{Outcome, Source};

use crate::site::records::{Action, Outcome as RecordOutcome, Record};
use crate::site::root::Link;
use crate::site::{BundleId, SiteRoot};

pub const SCHEMA: &str = "airlock.report/v1";

/// The whole report: what the page shows, as data.
#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// `bundle` (the build host's view) or `site` (a site root's active bundle and records).
    pub kind: &'static str,
    pub bundle: BundleFacts,
    pub signatures: Signatures,
    pub contents: Vec<KindTotal>,
    pub artifacts: Vec<Line>,
    pub firmware: Vec<Firmware>,
    /// The bundle's `[validation]` section: the matrix it claims and the checks it declares.
    pub matrix: crate::bundle::manifest::Validation,
    pub sbom: Option<SbomFacts>,
    pub diff: Option<DiffFacts>,
    pub site: Option<SiteFacts>,
}

#[derive(Debug, Serialize)]
pub struct BundleFacts {
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub id: String,
    pub manifest_sha256: Sha256,
    pub created: String,
    pub tool: String,
    /// Whether the whole bundle verified here (signatures, threshold, every member).
    pub verified: bool,
    /// Why not, when it did not.
    pub problems: Vec<String>,
    /// A delta's base, as its manifest names it.
    pub base: Option<String>,
    pub source: String,
    /// On a node that applied from a mirror: the part it holds (its packages), verified in
    /// place, and what stayed on the mirror. Absent where the whole bundle is held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// The part of a bundle a node fed from a mirror holds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Held {
    /// Members kept here (the manifest, its signature, `debs/` and `rpms/`), and their bytes.
    pub entries: usize,
    pub bytes: u64,
    /// Members that stayed on the mirror (images, wheels, models, files), and their bytes.
    pub on_mirror_entries: usize,
    pub on_mirror_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct Signatures {
    pub threshold: usize,
    /// The rules the signers had to meet (`1 of 1 trusted key(s)`, or the site's signing roles).
    pub required: String,
    /// Every rule met.
    pub met: bool,
    /// The site trust root's metadata versions the rules came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_root: Option<crate::sign::policy::Origin>,
    /// Distinct trusted keys whose signature over the manifest verified.
    pub signers: Vec<String>,
    pub checked: Vec<SignatureLine>,
    /// Trusted keys that signed the provenance (empty: not verified).
    pub provenance: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct SignatureLine {
    pub source: String,
    pub key_id: Option<String>,
    pub status: String,
    /// The site's roles the key signs for (`build`, `security`, `rebuilders`: who built, who
    /// reviewed, who rebuilt the same bytes), when a site trust root decided.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct KindTotal {
    pub kind: String,
    pub entries: usize,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct Line {
    pub kind: String,
    pub name: String,
    pub version: String,
    /// Its upstream Sigstore signature: "signed by IDENTITY (ISSUER), logged at TIME" (checked
    /// again by this read, or as the lock recorded it where this read could not), or "unsigned
    /// upstream". Absent for packages, which their archives' signed indexes vouch for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Firmware {
    pub name: String,
    pub sha256: Sha256,
    pub size: u64,
    /// `min_version` from its notes: the floor the board must reach.
    pub floor: Option<String>,
    pub notes: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub struct SbomFacts {
    pub sha256: Sha256,
    pub spec_version: String,
    pub components: usize,
    pub with_purl: usize,
    pub by_type: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
pub struct DiffFacts {
    /// The release it is compared with, and whether that one verified.
    pub base: String,
    pub base_verified: bool,
    #[serde(flatten)]
    pub diff: bom::Diff,
}

#[derive(Debug, Serialize)]
pub struct SiteFacts {
    pub root: PathBuf,
    pub current: Option<BundleId>,
    pub previous: Option<BundleId>,
    /// The current bundle's latest verdict, with its record: from its install, apply or
    /// validate, or — after a candidate was restored — the restored stack's, judged as it is now.
    pub validation: Option<Validation>,
    /// The last apply, when it did not commit (restored or refused) and was of another bundle:
    /// this node's history, shown beside the current stack's own verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<RecordLine>,
    /// Every install, rollback and validate record, oldest first.
    pub records: Vec<RecordLine>,
    /// How long the last rollback took (the rehearsed rollback time), and when.
    pub rollback: Option<RecordLine>,
    /// Every rollback's duration: median and worst (the guide's rehearsed rollback figure).
    pub rollbacks: Option<crate::site::status::Rehearsals>,
    /// The amber acceptance the current bundle was activated under (reason, owner, expiry),
    /// flagged when expired.
    pub accepted_amber: Option<crate::site::status::OpenAcceptance>,
    /// What was checked of the active bundle on disk, how, and what was found.
    pub check: SiteCheck,
    /// The stack this node ran before airlock changed it (the guide's first step, the freeze):
    /// the latest baseline adopted (`apply --adopt`), and whether it is still retained for a
    /// restore or a rollback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineLine>,
    /// Every promotion (a mirror's) and every apply from a mirror (a node's) with the signed
    /// decision it rested on, oldest first; a promoted release later replaced says when.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionLine>,
}

/// One change and the decision it rested on.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionLine {
    pub record: String,
    pub action: String,
    pub at: String,
    pub bundle: String,
    pub decision: crate::site::records::DecisionUsed,
    /// A later promotion or rollback made another release current (the record that did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
}

/// The decisions on record: each change that rested on one, and what replaced a promotion.
fn decisions(records: &[(RecordLine, Record)]) -> Vec<DecisionLine> {
    let activated = |r: &Record| r.outcome() == RecordOutcome::Activated;
    let mut out = Vec::new();
    for (i, (line, r)) in records.iter().enumerate() {
        let Some(decision) = r.decision.clone() else { continue };
        let id = r.bundle.as_ref().and_then(|b| b.id.clone());
        let replaced_by = (r.action == Action::Promote && activated(r))
            .then(|| {
                records[i + 1..].iter().find(|(_, later)| {
                    matches!(later.action, Action::Promote | Action::Rollback)
                        && activated(later)
                        && later.bundle.as_ref().and_then(|b| b.id.clone()) != id
                })
            })
            .flatten()
            .map(|(l, later)| format!("{} {} ({})", later.action.as_str(), l.bundle, l.at));
        out.push(DecisionLine {
            record: line.file.clone(),
            action: line.action.clone(),
            at: line.at.clone(),
            bundle: line.bundle.clone(),
            decision,
            replaced_by,
        });
    }
    out
}

/// The baseline a node adopted.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineLine {
    pub record: String,
    pub at: String,
    pub name: String,
    pub version: String,
    pub id: Option<BundleId>,
    /// Still under `bundles/`: what it pins can be put back.
    pub retained: bool,
}

/// The active bundle checked as `airlock check` does.
#[derive(Debug, Serialize)]
pub struct SiteCheck {
    /// How, in words.
    pub how: String,
    pub ok: bool,
    pub files_checked: usize,
    pub damage: Vec<crate::site::check::Damage>,
    /// When every finding is the site's policy, not damaged bytes: which keys no longer count
    /// and under which trust metadata (a revocation), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Validation {
    /// The record it was read from.
    pub record: String,
    /// Verdict, summary, detected GPUs, rows, checks and probe, as the record has them.
    #[serde(flatten)]
    pub evidence: crate::validate::Evidence,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecordLine {
    pub file: String,
    pub action: String,
    /// `activated`, `refused`, `failed` or `validated`.
    pub outcome: String,
    pub at: String,
    pub bundle: String,
    pub seconds: Option<f64>,
    pub phases: crate::site::records::PhaseTimes,
    /// Why it was refused or failed.
    pub reason: Option<String>,
}

/// A bundle's report: verified under `policy` (a `None` policy reads it unverified and says
/// so), with the BOM diff against `base` when given.
pub fn bundle(
    input: &crate::bundle::parts::Input,
    policy: Option<&Policy>,
    base: Option<(&crate::bundle::parts::Input, Option<&Policy>)>,
    reporter: &dyn Reporter,
) -> Result<Report, ReportError> {
    let read = read(input, policy, reporter)?;
    let diff = match base {
        None => None,
        Some((b, p)) => {
            let old = read_manifest(b, p, reporter)?;
            Some(DiffFacts {
                base: format!("{} {}", old.0.name, old.0.version),
                base_verified: old.1,
                diff: {
                    let mut d = bom::compare(
                        &bom::from_artifacts(&old.0.artifacts),
                        &bom::from_artifacts(&read.manifest.artifacts),
                    );
                    d.extend(bom::compare_validation(&old.0.validation, &read.manifest.validation));
                    d
                },
            })
        }
    };
    Ok(assemble("bundle", &read, diff, None))
}

/// A site's report: its active bundle verified again under the policy it was installed with,
/// and its records.
pub fn site(path: &Path, reporter: &dyn Reporter) -> Result<Report, ReportError> {
    let root = &SiteRoot::new(path);
    if root.link(Link::Current).is_none() {
        return Err(ReportError::NoCurrent(path.to_owned()));
    }
    let (current, checked) = crate::site::check::current(root, reporter)?;
    let policy = crate::site::retained_policy(root, &current)?;
    let kept = crate::site::check::kept_part(root, &current, &policy)?;
    let how = if kept.is_some() {
        format!(
            "`airlock check`: the manifest this node kept in bundles/{current} (it applied from a mirror and holds \
             only the package part) verified again under the keys and threshold state.json recorded at apply, its \
             digest matched the id bundles/{current}, and every member it keeps was compared with it (sha256)"
        )
    } else {
        format!(
            "`airlock check`: bundles/{current}/bundle.airlock verified again from its first byte under the keys and \
             threshold state.json recorded at install, its manifest digest matched the id bundles/{current}, and its \
             staged tree was compared file by file (sha256 of every member, views made again from the verified \
             manifest)"
        )
    };
    let read = match kept {
        // A node fed from a mirror holds only the package part: verified in place.
        Some((kept, Some((manifest, manifest_sha256)))) => {
            read_kept(root, &kept, manifest.into_manifest(), manifest_sha256, &policy)
        }
        Some((kept, None)) => read_kept_unverified(root, &kept, &policy)?,
        None => read(&crate::bundle::parts::Input::Whole(root.retained_file(&current)), Some(&policy), reporter)?,
    };
    let records = records(root)?;
    let policy_only = !checked.ok() && checked.damage.iter().all(|d| d.policy);
    let check = SiteCheck {
        how,
        ok: checked.ok(),
        files_checked: checked.files_checked,
        damage: checked.damage,
        policy: if policy_only { policy_failure(root, &current, &policy, &records) } else { None },
    };
    let validation = current_verdict(&records, &current);
    // An apply that did not commit since: the node's history, not its current stack's verdict.
    let attempt = records
        .last()
        .filter(|(_, r)| matches!(r.outcome(), RecordOutcome::Restored | RecordOutcome::Refused))
        .filter(|(_, r)| r.bundle.as_ref().and_then(|b| b.id.as_ref()) != Some(&current))
        .map(|(l, _)| l.clone());
    let accepted_amber = crate::site::status::OpenAcceptance::of(root, &current, crate::clock::Timestamp::started());
    let rolled_back = |r: &Record| r.action == Action::Rollback && r.outcome() == RecordOutcome::Activated;
    let rollback = records.iter().rev().find(|(_, r)| rolled_back(r)).map(|(l, _)| l.clone());
    let rollbacks = crate::site::status::Rehearsals::of_seconds(
        records.iter().filter(|(_, r)| rolled_back(r)).filter_map(|(_, r)| r.seconds).collect(),
    );
    let baseline =
        records.iter().rev().find(|(_, r)| r.action == Action::Adopt && r.outcome() == RecordOutcome::Activated).map(
            |(line, r)| {
                let b = r.bundle.clone().unwrap_or_default();
                BaselineLine {
                    record: line.file.clone(),
                    at: line.at.clone(),
                    name: b.name.unwrap_or_default(),
                    version: b.version.unwrap_or_default(),
                    retained: b.id.as_ref().is_some_and(|id| root.retained().contains(id)),
                    id: b.id,
                }
            },
        );
    let decisions = decisions(&records);
    let site = SiteFacts {
        root: path.to_owned(),
        attempt,
        baseline,
        decisions,
        current: Some(current),
        previous: root.link(Link::Previous),
        validation,
        records: records.into_iter().map(|(l, _)| l).collect(),
        rollback,
        rollbacks,
        accepted_amber,
        check,
    };
    Ok(assemble("site", &read, None, Some(site)))
}

/// The verdict on the current bundle's stack: the newest record that judged it — its own
/// install, apply or validate, or the validation after a candidate's restore put it back.
fn current_verdict(records: &[(RecordLine, Record)], current: &BundleId) -> Option<Validation> {
    records.iter().rev().find_map(|(line, record)| {
        let about_current = record.bundle.as_ref().and_then(|b| b.id.as_ref()) == Some(current);
        let judged = match (&record.restored_validation, about_current) {
            (Some(restored), false) => restored,
            (_, true) => record.validation.as_ref()?,
            (None, false) => return None,
        };
        Some(Validation { record: line.file.clone(), evidence: judged.evidence()?.clone() })
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Parts(#[from] crate::bundle::parts::PartsError),
    #[error("`{0}` cannot be read: {1}")]
    Bundle(String, String),
    #[error("`{}` has no current bundle: install one first", .0.display())]
    NoCurrent(PathBuf),
    #[error(transparent)]
    Site(#[from] crate::site::SiteError),
    #[error("`{}`: {detail}", path.display())]
    Records { path: PathBuf, detail: String },
}

impl crate::failure::Classify for ReportError {
    fn class(&self) -> crate::failure::Class {
        match self {
            ReportError::Parts(e) => e.class(),
            ReportError::Bundle(..) => crate::failure::Class::Verification,
            ReportError::Site(e) => e.class(),
            ReportError::NoCurrent(_) | ReportError::Records { .. } => crate::failure::Class::Runtime,
        }
    }
}

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
struct ReadBundle {
    manifest: Manifest,
    manifest_sha256: Sha256,
    report: Option<Read_>,
    /// The part a node fed from a mirror keeps, checked in place (then `report` is `None`).
    kept: Option<Kept>,
    threshold: usize,
    required: String,
    /// The rules the signers had to meet (a site's roles), to name each signer's role.
    rules: Vec<crate::sign::policy::Rule>,
    met: bool,
    trust_root: Option<crate::sign::policy::Origin>,
    source: String,
    sbom: Option<Vec<u8>>,
}

fn read(
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
struct Kept {
    ok: bool,
    signers: Vec<crate::sign::KeyId>,
    problems: Vec<String>,
    held: Held,
}

/// The report's view of the part a node keeps: its manifest verified under `policy` and its
/// kept members compared with it (`check`); no SBOM or provenance, which stayed on the mirror.
fn read_kept(
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
fn read_kept_unverified(
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
fn policy_failure(root: &SiteRoot, id: &BundleId, policy: &Policy, records: &[(RecordLine, Record)]) -> Option<String> {
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
fn read_manifest(
    input: &crate::bundle::parts::Input,
    policy: Option<&Policy>,
    reporter: &dyn Reporter,
) -> Result<(Manifest, bool), ReportError> {
    let read = read(input, policy, reporter)?;
    let verified = read.report.as_ref().is_some_and(Read_::verified);
    Ok((read.manifest, verified))
}

fn assemble(kind: &'static str, read: &ReadBundle, diff: Option<DiffFacts>, site: Option<SiteFacts>) -> Report {
    let m = &read.manifest;
    let verified = match &read.kept {
        Some(k) => k.ok,
        None => read.report.as_ref().is_some_and(Read_::verified),
    };
    let problems = match (&read.report, &read.kept) {
        (Some(r), _) => r.problems.iter().map(ToString::to_string).collect(),
        (None, Some(k)) => k.problems.clone(),
        (None, None) => vec!["no --trust key was given, so this is what the bundle claims".to_owned()],
    };
    let signatures = signatures(read);
    let mut contents: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for e in &m.entries {
        let total = contents.entry(e.path.area()).or_default();
        total.0 += 1;
        total.1 += e.size;
    }
    let checked = read.report.as_ref().map(|r| r.upstream.as_slice());
    let artifacts = m.artifacts.iter().map(|a| line(a, checked)).collect();
    let firmware = m
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::File(f) if f.file_kind == crate::spec::FileKind::Firmware => Some(firmware(f)),
            _ => None,
        })
        .collect();
    Report {
        schema: SCHEMA,
        kind,
        bundle: BundleFacts {
            name: m.name.to_string(),
            version: m.version.to_string(),
            description: m.description.clone(),
            id: read.manifest_sha256.short(16),
            manifest_sha256: read.manifest_sha256,
            created: m.created.to_string(),
            tool: m.builder.tool.clone(),
            verified,
            problems,
            base: m.base.as_ref().map(ToString::to_string),
            source: read.source.clone(),
            held: read.kept.as_ref().map(|k| k.held),
        },
        signatures,
        contents: contents
            .into_iter()
            .map(|(kind, (entries, bytes))| KindTotal { kind: kind.to_owned(), entries, bytes })
            .collect(),
        artifacts,
        firmware,
        matrix: m.validation.clone(),
        sbom: read.sbom.as_deref().and_then(|b| sbom_facts(m, b)),
        diff,
        site,
    }
}

/// The roles a key signs for, by name (a site's; none for `--trust` keys).
fn roles_of(rules: &[crate::sign::policy::Rule], key_id: &str) -> Vec<String> {
    rules
        .iter()
        .filter(|r| r.role != crate::sign::policy::GIVEN_ROLE && r.keys.iter().any(|k| k.as_str() == key_id))
        .map(|r| r.role.clone())
        .collect()
}

fn signatures(read: &ReadBundle) -> Signatures {
    let m = &read.manifest;
    if let Some(k) = &read.kept {
        let signers: Vec<String> = k.signers.iter().map(ToString::to_string).collect();
        return Signatures {
            threshold: read.threshold,
            required: read.required.clone(),
            met: read.met,
            trust_root: read.trust_root,
            checked: signers
                .iter()
                .map(|s| SignatureLine {
                    source: crate::bundle::manifest::SIGNATURE.to_owned(),
                    key_id: Some(s.clone()),
                    status: "valid".to_owned(),
                    roles: roles_of(&read.rules, s),
                })
                .collect(),
            signers,
            provenance: Vec::new(),
        };
    }
    match &read.report {
        Some(r) => Signatures {
            threshold: read.threshold,
            required: read.required.clone(),
            met: read.met,
            trust_root: read.trust_root,
            signers: r.signers.iter().map(ToString::to_string).collect(),
            checked: r
                .signatures
                .iter()
                .map(|c| SignatureLine {
                    source: match &c.source {
                        Source::Embedded => crate::bundle::manifest::SIGNATURE.to_owned(),
                        Source::CoSignature(p) => {
                            p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                        }
                    },
                    key_id: c.key_id.as_ref().map(ToString::to_string),
                    roles: c.key_id.as_ref().map(|k| roles_of(&read.rules, &k.to_string())).unwrap_or_default(),
                    status: match &c.outcome {
                        Outcome::Valid => "valid".to_owned(),
                        Outcome::Untrusted => "untrusted".to_owned(),
                        Outcome::Invalid { detail } => format!("invalid: {detail}"),
                    },
                })
                .collect(),
            provenance: r.provenance.clone().unwrap_or_default().iter().map(ToString::to_string).collect(),
        },
        None => Signatures {
            threshold: 0,
            required: String::new(),
            met: false,
            trust_root: None,
            signers: Vec::new(),
            checked: vec![SignatureLine {
                source: crate::bundle::manifest::SIGNATURE.to_owned(),
                key_id: Some(m.builder.key_id.to_string()),
                status: "not checked (claimed by the manifest)".to_owned(),
                roles: Vec::new(),
            }],
            provenance: Vec::new(),
        },
    }
}

/// An artifact's line; `checked`: the upstream signatures this read verified again (`None`
/// when it could not: read unverified, or a node's kept part).
fn line(a: &Artifact, checked: Option<&[crate::bundle::reader::UpstreamCheck]>) -> Line {
    let recorded = match a {
        Artifact::Image(i) => Some(i.signature.as_ref()),
        Artifact::File(f) => Some(f.signature.as_ref()),
        Artifact::Wheel(w) => Some(w.signature.as_ref()),
        Artifact::Model(_) => Some(None),
        Artifact::Deb(_) | Artifact::Rpm(_) => None,
    };
    let (kind, name, version) = match a {
        Artifact::Image(i) => ("image", i.reference.clone(), format!("sha256:{}", i.digest)),
        Artifact::Wheel(w) => ("wheel", w.filename.clone(), w.version.clone()),
        Artifact::Deb(d) => ("deb", format!("{}:{}", d.name, d.architecture), d.version.clone()),
        Artifact::Rpm(r) => ("rpm", format!("{}.{}", r.name, r.architecture), r.evr()),
        Artifact::Model(m) => ("model", m.repo.to_string(), m.commit.to_string()),
        Artifact::File(f) => ("file", f.name.to_string(), format!("{} sha256:{}", f.file_kind, f.sha256.short(16))),
    };
    let upstream = recorded.map(|signature| match (signature, checked) {
        (None, _) => "unsigned upstream".to_owned(),
        (Some(s), Some(checked)) => match checked.iter().find(|c| c.artifact == name) {
            Some(c) => {
                let logged = c.logged_at.as_deref().map(|t| format!(", logged at {t}")).unwrap_or_default();
                format!("signed by {} ({}){logged}; verified here under {}", c.identity, c.issuer, c.root)
            }
            None => format!("{}, as recorded at lock: it does NOT verify here", s.describe()),
        },
        (Some(s), None) => format!("{}, as recorded at lock (not checked by this read)", s.describe()),
    });
    Line { kind: kind.to_owned(), name, version, upstream }
}

fn firmware(f: &FileArtifact) -> Firmware {
    Firmware {
        name: f.name.to_string(),
        sha256: f.sha256,
        size: f.size,
        floor: f.notes.get("min_version").cloned(),
        notes: f.notes.clone(),
    }
}

fn sbom_facts(m: &Manifest, bytes: &[u8]) -> Option<SbomFacts> {
    let entry = m.entries.iter().find(|e| e.path.as_str() == SBOM)?;
    let doc: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut by_type = BTreeMap::new();
    let (mut components, mut with_purl) = (0, 0);
    let mut stack: Vec<&serde_json::Value> =
        doc["components"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    while let Some(c) = stack.pop() {
        components += 1;
        with_purl += usize::from(c.get("purl").is_some());
        *by_type.entry(c["type"].as_str().unwrap_or("?").to_owned()).or_insert(0) += 1;
        stack.extend(c["components"].as_array().into_iter().flatten());
    }
    Some(SbomFacts {
        sha256: entry.sha256,
        spec_version: doc["specVersion"].as_str().unwrap_or_default().to_owned(),
        components,
        with_purl,
        by_type,
    })
}

/// Every record, oldest first (their names sort by time), with its summary line.
fn records(root: &SiteRoot) -> Result<Vec<(RecordLine, Record)>, ReportError> {
    let mut out = Vec::new();
    for (path, record) in crate::site::records::read_all(root)? {
        let b = record.bundle.clone().unwrap_or_default();
        let line = RecordLine {
            file: path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            action: record.action.as_str().to_owned(),
            outcome: outcome_word(record.outcome()).to_owned(),
            at: record.at.to_string(),
            bundle: format!(
                "{} {} ({})",
                b.name.as_deref().unwrap_or("?"),
                b.version.as_deref().unwrap_or("?"),
                b.id.as_ref().map(BundleId::as_str).or(b.file.as_deref()).unwrap_or("?")
            ),
            seconds: record.seconds,
            phases: record.phases.clone(),
            reason: record.reason.clone(),
        };
        out.push((line, record));
    }
    Ok(out)
}

fn outcome_word(o: RecordOutcome) -> &'static str {
    match o {
        RecordOutcome::Activated => "activated",
        RecordOutcome::Refused => "refused",
        RecordOutcome::Failed => "failed",
        RecordOutcome::Validated => "validated",
        RecordOutcome::PendingReboot => "pending reboot",
        RecordOutcome::Restored => "restored",
        RecordOutcome::Staged => "staged",
    }
}
