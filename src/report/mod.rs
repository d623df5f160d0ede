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

mod assemble;
pub mod bom;
pub mod fleet;
pub mod html;
mod read;

use assemble::assemble;
use read::{policy_failure, read, read_kept, read_kept_unverified, read_manifest};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::digest::Sha256;
use crate::progress::Reporter;
use crate::sign::Policy;

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
