//! A site's decision to take a release fleet-wide, signed: `airlock approve` turns a rollout
//! run's canary evidence into an **approval** that the site's `approvers` role signs, and
//! `airlock verify-approval` and `airlock promote` check it offline.
//!
//! The approval is an in-toto Statement v1 in a DSSE envelope (payload type
//! `application/vnd.in-toto+json`), one signature per approver, ordered by key id:
//!
//! - `subject`: the bundle, its manifest's sha256 (what every signature and id of a bundle is
//!   over);
//! - `predicateType`: the SLSA Verification Summary Attestation v1, whose fields carry what they
//!   can: `verifier.id` (airlock's), `timeVerified` (when the decision was prepared),
//!   `resourceUri` (`airlock:bundle/ID`), `policy` (the decision record's own URI and the
//!   sha256 of its canonical JSON), `inputAttestations` (every record the decision rests on,
//!   by its path in the evidence directory and sha256), `verificationResult` (`PASSED`: approve
//!   refuses a run whose canaries are not green or accepted amber), `verifiedLevels`;
//! - `airlockDecision` beside them (in-toto consumers ignore fields they do not know): the
//!   decision record the VSA has no room for — the run, each tuple with its canaries, their
//!   verdicts and records, the paired metrics with their thresholds, the amber exceptions with
//!   owner and expiry, the planned waves, the capacity rule and the abort triggers.
//!
//! An approver's identity is their key in the `approvers` role (`trust show` lists the role);
//! a co-signer signs the same statement, unchanged. Nothing is taken on its word: `verify`
//! counts only signatures by the role's keys, distinct, and checks the decision's digest; the
//! records it names are checked against an evidence directory when one is given.

pub mod decision;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use decision::{Decision, decide};

use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::{KeyId, SigningKey, dsse};
use crate::trust::DecisionRole;

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const VSA_TYPE: &str = "https://slsa.dev/verification_summary/v1";
/// The decision record's URI (the VSA's `policy.uri`).
pub const DECISION_URI: &str = "https://github.com/airlock/airlock/blob/main/docs/fleet.md#approvals";
pub const VERIFIER_ID: &str = "https://github.com/airlock/airlock/approve";
/// The one level an approval states: the canary qualified the bundle on every tuple it ran.
pub const LEVEL: &str = "AIRLOCK_CANARY_QUALIFIED";
/// The largest approval read: a decision over a few thousand records is well under a MiB.
pub const MAX_APPROVAL_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("cannot read or write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not an approval: {detail}", path.display())]
    Format { path: PathBuf, detail: String },
    #[error(
        "`{}` is signed by {got} of the {need} approver(s) the site's `approvers` role needs{}; \
         have another approver co-sign it with `airlock approve --add-to {} --key KEY`",
        path.display(), if signers.is_empty() { String::new() } else { format!(" ({})", signers.join(", ")) },
        path.display()
    )]
    Threshold { path: PathBuf, need: usize, got: usize, signers: Vec<String> },
    #[error("`{}` approves {approved}, not {expected}: refused", path.display())]
    OtherBundle { path: PathBuf, approved: String, expected: String },
    #[error("the site's trust root `{}` has no `approvers` role: {what}", dir.display())]
    NoApprovers { dir: PathBuf, what: String },
    #[error("the evidence's `{}` {detail}", path.display())]
    Evidence { path: PathBuf, detail: String },
    #[error("run {run}: {detail}")]
    NotQualified { run: String, detail: String },
    #[error("run {run}: {detail}")]
    Red { run: String, detail: String },
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
}

impl crate::failure::Classify for ApprovalError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            ApprovalError::Io { .. } => Class::Runtime,
            ApprovalError::NoApprovers { .. } | ApprovalError::NotQualified { .. } => Class::Usage,
            ApprovalError::Red { .. } => Class::ValidationRed,
            ApprovalError::Report(e) => e.class(),
            ApprovalError::Format { .. }
            | ApprovalError::Threshold { .. }
            | ApprovalError::OtherBundle { .. }
            | ApprovalError::Evidence { .. } => Class::Verification,
        }
    }
}

/// The in-toto Statement v1 an approval signs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub kind: String,
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: Predicate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub name: String,
    pub digest: Digests,
}

/// A resource descriptor's digests: airlock writes and reads sha256 only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Digests {
    pub sha256: Sha256,
}

/// The SLSA VSA v1 predicate, with airlock's decision beside its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    pub verifier: Verifier,
    #[serde(rename = "timeVerified")]
    pub time_verified: Timestamp,
    #[serde(rename = "resourceUri")]
    pub resource_uri: String,
    pub policy: Reference,
    #[serde(rename = "inputAttestations")]
    pub input_attestations: Vec<Reference>,
    #[serde(rename = "verificationResult")]
    pub verification_result: String,
    #[serde(rename = "verifiedLevels")]
    pub verified_levels: Vec<String>,
    #[serde(rename = "airlockDecision")]
    pub decision: Decision,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verifier {
    pub id: String,
}

/// A VSA reference: a URI and its sha256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub uri: String,
    pub digest: Digests,
}

impl Statement {
    /// The bundle approved: its manifest's sha256.
    fn bundle(&self) -> Result<&Subject, String> {
        match self.subject.as_slice() {
            [one] => Ok(one),
            other => Err(format!("{} subjects, not one bundle", other.len())),
        }
    }

    /// What the statement must be to count, signatures aside.
    fn check(&self) -> Result<(), String> {
        if self.kind != STATEMENT_TYPE {
            return Err(format!("_type is `{}`, not `{STATEMENT_TYPE}`", self.kind));
        }
        if self.predicate_type != VSA_TYPE {
            return Err(format!("predicateType is `{}`, not `{VSA_TYPE}`", self.predicate_type));
        }
        let subject = self.bundle()?;
        let p = &self.predicate;
        if subject.digest.sha256 != p.decision.bundle.manifest_sha256 {
            return Err("the subject is not the bundle the decision names".to_owned());
        }
        if p.verification_result != "PASSED" {
            return Err(format!("verificationResult is `{}`, not PASSED", p.verification_result));
        }
        if p.policy.uri != DECISION_URI || p.policy.digest.sha256 != p.decision.digest() {
            return Err("the policy digest is not the decision record's".to_owned());
        }
        Ok(())
    }
}

/// A statement sealed in a DSSE envelope by its first approver: the approval file's bytes.
pub fn seal(statement: &Statement, key: &SigningKey) -> Vec<u8> {
    let payload = serde_json_canonicalizer::to_vec(statement).expect("a statement serialises");
    dsse::seal(PAYLOAD_TYPE, &payload, key)
}

/// Another approver's signature added to an approval (its statement unchanged, read first).
pub fn cosign(path: &Path, bytes: &[u8], key: &SigningKey) -> Result<(Statement, Vec<u8>), ApprovalError> {
    let statement = unverified(path, bytes)?;
    let bytes = dsse::cosign(bytes, PAYLOAD_TYPE, key).map_err(|e| format_err(path, &e.to_string()))?;
    Ok((statement, bytes))
}

/// What an approval says, unchecked: for showing and co-signing, never for trusting.
pub fn unverified(path: &Path, bytes: &[u8]) -> Result<Statement, ApprovalError> {
    let payload = dsse::payload_unverified(bytes).map_err(|e| format_err(path, &e.to_string()))?;
    let statement: Statement = serde_json::from_slice(&payload).map_err(|e| format_err(path, &e.to_string()))?;
    statement.check().map_err(|e| format_err(path, &e))?;
    Ok(statement)
}

fn format_err(path: &Path, detail: &str) -> ApprovalError {
    ApprovalError::Format { path: path.to_owned(), detail: detail.to_owned() }
}

/// An approval that met the `approvers` role.
#[derive(Debug, Clone)]
pub struct Approval {
    pub path: PathBuf,
    pub statement: Statement,
    /// The approvers whose signature verified, distinct.
    pub signers: Vec<KeyId>,
    pub need: usize,
    /// The approval file's sha256 (what a promotion names).
    pub sha256: Sha256,
}

/// Verify an approval against the site's `approvers` role: the envelope as airlock writes it,
/// the statement whole and consistent, and at least the role's threshold of its distinct keys
/// signed (a key revoked from the role does not count).
pub fn verify(path: &Path, bytes: &[u8], role: &DecisionRole) -> Result<Approval, ApprovalError> {
    let trusted = role.trusted().map_err(|e| format_err(path, &e.to_string()))?;
    let statement = unverified(path, bytes)?;
    let signers = match dsse::open(bytes, PAYLOAD_TYPE, &trusted) {
        Ok(opened) => opened.signers,
        Err(dsse::DsseError::Untrusted) => Vec::new(),
        Err(e) => return Err(format_err(path, &e.to_string())),
    };
    let need = role.threshold();
    if signers.len() < need {
        return Err(ApprovalError::Threshold {
            path: path.to_owned(),
            need,
            got: signers.len(),
            signers: signers.iter().map(|k| k.short().to_owned()).collect(),
        });
    }
    Ok(Approval { path: path.to_owned(), statement, signers, need, sha256: Sha256::of_bytes(bytes) })
}

impl Approval {
    /// Refused unless it approves the bundle whose manifest has `sha256`.
    pub fn require_bundle(&self, sha256: &Sha256, what: &str) -> Result<(), ApprovalError> {
        let approved = &self.statement.predicate.decision.bundle;
        if approved.manifest_sha256 != *sha256 {
            return Err(ApprovalError::OtherBundle {
                path: self.path.clone(),
                approved: format!("{} {} ({})", approved.name, approved.version, approved.id),
                expected: what.to_owned(),
            });
        }
        Ok(())
    }
}

/// Check every record the statement names against the evidence directory `dir`: each present,
/// a regular file, with the sha256 the statement gives it. The number checked.
pub fn check_evidence(statement: &Statement, dir: &Path) -> Result<usize, ApprovalError> {
    for input in &statement.predicate.input_attestations {
        let rel = evidence_path(&input.uri).ok_or_else(|| ApprovalError::Evidence {
            path: PathBuf::from(&input.uri),
            detail: "is not a path under the evidence directory".into(),
        })?;
        let path = dir.join(rel);
        let bytes = read(&path, crate::fleet::evidence::MAX_RECORD_BYTES as u64)?
            .ok_or_else(|| ApprovalError::Evidence { path: path.clone(), detail: "is missing".into() })?;
        let actual = Sha256::of_bytes(&bytes);
        if actual != input.digest.sha256 {
            return Err(ApprovalError::Evidence {
                path,
                detail: format!(
                    "has sha256 {actual}, not the {} the approval names: it changed after",
                    input.digest.sha256
                ),
            });
        }
    }
    Ok(statement.predicate.input_attestations.len())
}

/// A relative path of plain segments (no `..`, no root, nothing hidden).
fn evidence_path(uri: &str) -> Option<&Path> {
    let ok = !uri.is_empty()
        && uri.split('/').all(|s| !s.is_empty() && !s.starts_with('.') && !s.contains('\\'))
        && !uri.starts_with('/');
    ok.then(|| Path::new(uri))
}

/// A file's bytes, at most `limit`, regular files only; `None` when it does not exist.
pub fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, ApprovalError> {
    use crate::sign::policy::Refused;
    crate::sign::policy::read_regular(path, limit).map_err(|e| match e {
        Refused::NotRegular => format_err(path, "not a regular file"),
        Refused::TooLarge => format_err(path, &format!("larger than {limit} bytes")),
        Refused::Io(source) => ApprovalError::Io { path: path.to_owned(), source },
    })
}
