//! As-built evidence: every install, rollback and validate writes `ROOT/records/TIME-ACTION.json`
//! (never rewritten), whatever its outcome: what was activated or refused and why, who signed
//! it, which keys were trusted, what validation found, what was published, how long each
//! phase took. One typed `Record` is written by the site and `validate` and read back by
//! `report` and the anti-downgrade guard; its schema is `schemas/record.v1.json`.

use serde::{Deserialize, Serialize};

use super::root::BundleId;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::KeyId;

mod phases;
mod store;

pub use phases::{Phase, PhaseTimes, Phases};
pub use store::{Activation, activations, of_run, open_acceptance, read_all, trust_versions, write};

pub const SCHEMA: &str = "airlock.record/v1";
/// The largest record read back: a record with long check outputs is a few megabytes at most.
pub const MAX_RECORD_BYTES: u64 = 16 << 20;

/// One record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Absent in records written before the schema was named.
    #[serde(default = "schema")]
    pub schema: String,
    pub action: Action,
    /// Absent in records written before refusals were recorded: those were all activations
    /// (install, rollback) or validations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub at: Timestamp,
    /// The rollout run it was part of (`--run-id`): the fleet report judges one run's records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// What the action was about; for a refusal before verification, only the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<RecordBundle>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<KeyId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustUsed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdicts>,
    /// The validation evidence (probe, matrix rows, checks), or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_amber: Option<String>,
    /// The amber acceptance whole: its reason, the owner who accepted it and until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amber: Option<Acceptance>,
    /// The bundle that was current before (install: now previous; rollback: the one left).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "from", with = "super::root::as_link")]
    pub previous: Option<BundleId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<super::registry::Pushed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_not_published: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<BundleId>,
    /// The host role it acted as: `mirror` (no validation), `node` (`apply`: packages
    /// applied, the new stack validated). Absent: `install` on a host judged as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The host packages an apply changed (or, for a rollback on a node, put back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<super::packages::Changes>,
    /// After a red verdict or a failed change: what was done to put the host back.
    /// `--adopt`: the baseline's pinned dependencies the node runs newer (before: the
    /// baseline's version, after: the node's), accepted because the stack still accepts them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newer_than_baseline: Vec<super::packages::Change>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<super::packages::Changes>,
    /// The validation of the host once restored, against the bundle it went back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_validation: Option<Validation>,
    /// A node's pre-flight: the matrix judged on what the probe knows before anything changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Validation>,
    /// What a node fetched from its mirror and what it took from what it already held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<Transfer>,
    /// The signed decision the change rested on: a mirror's approval and promotion, a node's
    /// promotion (or that it took a release by id, unpromoted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionUsed>,
    /// Why it was refused or failed: the whole error, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a refusal or failure: the phase it was in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_in: Option<String>,
    /// Seconds per phase that ended, in order.
    #[serde(default, skip_serializing_if = "PhaseTimes::is_empty")]
    pub phases: PhaseTimes,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// What a promotion or an apply from a mirror rested on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionUsed {
    /// The signed promotion's number (issued by a mirror's `promote`, accepted by a node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<u64>,
    /// The approval's sha256 (the file kept as `approvals/ID.dsse.json` on the mirror).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Sha256>,
    /// The rollout run the approval decided on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The approvers whose signatures counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<KeyId>,
    /// `promote --without-approval --reason TEXT`: the exception, shown red.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_approval: Option<String>,
    /// Why there is no signed decision: the site has no such role, or a node took a release
    /// by id (`--release`, a rollout's canary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsigned: Option<String>,
}

/// What a node's apply from a mirror fetched, and what it took from what it already held (the
/// packages of a release it retains, or fetched ahead): files and bytes of each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub fetched: Tally,
    pub reused: Tally,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub files: u64,
    pub bytes: u64,
}

impl Tally {
    pub fn add(&mut self, bytes: u64) {
        self.files += 1;
        self.bytes += bytes;
    }
}

/// A record's outcome; records written before outcomes were are activations or validations.
fn outcome_of(action: Action, outcome: Option<Outcome>) -> Outcome {
    outcome.unwrap_or(match action {
        Action::Install | Action::Apply | Action::Rollback | Action::Promote | Action::Adopt => Outcome::Activated,
        Action::Validate => Outcome::Validated,
    })
}

/// The fields of a `Record` the anti-downgrade guard reads (the rest, validation evidence
/// with check output included, is skipped over, not kept): every install reads every record.
#[derive(Debug, Deserialize)]
struct RecordHead {
    action: Action,
    #[serde(default)]
    outcome: Option<Outcome>,
    #[serde(default)]
    bundle: Option<RecordBundle>,
    #[serde(default)]
    trust: Option<TrustUsed>,
}

fn schema() -> String {
    SCHEMA.to_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Install,
    /// A node: the bundle's packages applied and the new stack validated.
    Apply,
    Rollback,
    Validate,
    /// A mirror: a retained release made its current (`airlock promote`).
    Promote,
    /// A node: the stack it already ran recorded as its current bundle (`apply --adopt`, a
    /// baseline from `airlock freeze`); no package changed.
    Adopt,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Install => "install",
            Action::Apply => "apply",
            Action::Rollback => "rollback",
            Action::Validate => "validate",
            Action::Promote => "promote",
            Action::Adopt => "adopt",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The bundle became current.
    Activated,
    /// Refused: verification, policy, downgrade, or a validation verdict that does not activate.
    Refused,
    /// Failed on the site's side (I/O, space, publishing); nothing was activated.
    Failed,
    /// `validate` ran and recorded its verdict.
    Validated,
    /// Applied; the change needs a reboot before the stack can be judged
    /// (`validate --commit` after it).
    PendingReboot,
    /// The new stack was red, or the change failed: the host's packages were put back.
    Restored,
    /// Verified and kept ahead, not made current: a mirror's candidate release (`install
    /// --candidate`), a node's packages fetched before its window (`apply --download-only`).
    Staged,
}

impl Record {
    /// What the record says happened, for records written before outcomes were.
    pub fn outcome(&self) -> Outcome {
        outcome_of(self.action, self.outcome)
    }

    /// A record of `action` started now, about `bundle`.
    pub fn new(action: Action, outcome: Outcome, bundle: Option<RecordBundle>) -> Self {
        Self {
            schema: SCHEMA.to_owned(),
            action,
            outcome: Some(outcome),
            at: Timestamp::now(),
            run_id: None,
            bundle,
            signers: Vec::new(),
            trust: None,
            verdict: None,
            validation: None,
            accepted_amber: None,
            amber: None,
            previous: None,
            published: Vec::new(),
            images_not_published: None,
            pruned: Vec::new(),
            role: None,
            packages: None,
            newer_than_baseline: Vec::new(),
            restored: None,
            restored_validation: None,
            preflight: None,
            transfer: None,
            decision: None,
            reason: None,
            failed_in: None,
            phases: PhaseTimes::default(),
            seconds: None,
        }
    }
}

/// A rollout run's name (`--run-id`, `airlock_run_id`): the Ansible collection gives each run
/// one (`20261204T101500Z-3f9c2a`) and passes it to every airlock call of that run. Checked when
/// built: it names a directory of the fleet's evidence and is matched in records.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest_ok = value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if first_ok && rest_ok && value.len() <= 64 {
            Ok(Self(value))
        } else {
            Err(format!("`{value}` is not a run id: 1 to 64 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"))
        }
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

impl std::str::FromStr for RunId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::try_from(s.to_owned())
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecordBundle {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<BundleId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<Sha256>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BundleId>,
    /// Where it came from: a file, parts, or `oci://…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrustUsed {
    pub keys: Vec<KeyId>,
    /// Distinct signers needed at the least (`--threshold`, or the largest role's threshold).
    pub threshold: usize,
    /// The rules every signer set had to meet: one per signing role of the site's trust root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<crate::sign::policy::Rule>,
    /// The trust root's metadata versions the policy came from (none: `--trust`).
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub trust_root: Option<crate::sign::policy::Origin>,
    /// Expired metadata or an expired bundle used anyway (`--allow-expired`), with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_accepted: Option<crate::sign::policy::Waiver>,
}

impl TrustUsed {
    pub fn of(policy: &crate::sign::Policy) -> Self {
        let roles = if policy.origin.is_some() { policy.rules.clone() } else { Vec::new() };
        Self {
            keys: policy.key_ids(),
            threshold: policy.least_signers(),
            roles,
            trust_root: policy.origin,
            expired_accepted: policy.waiver.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdicts {
    pub verified: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downgrade: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationVerdict>,
}

/// The validation verdict an install recorded: the matrix's, or none asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValidationVerdict {
    Green,
    Amber,
    Red,
    /// The bundle names no `[[validation.target]]`.
    Skipped,
}

impl From<Option<crate::validate::matrix::Verdict>> for ValidationVerdict {
    fn from(v: Option<crate::validate::matrix::Verdict>) -> Self {
        use crate::validate::matrix::Verdict;
        match v {
            Some(Verdict::Green) => Self::Green,
            Some(Verdict::Amber) => Self::Amber,
            Some(Verdict::Red) => Self::Red,
            None => Self::Skipped,
        }
    }
}

/// Validation evidence, or a word on why there is none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Validation {
    Evidence(Box<crate::validate::Evidence>),
    Skipped { verdict: ValidationVerdict, reason: String },
}

impl Validation {
    pub fn skipped() -> Self {
        let reason = "the bundle names no [[validation.target]]".into();
        Validation::Skipped { verdict: ValidationVerdict::Skipped, reason }
    }

    pub fn evidence(&self) -> Option<&crate::validate::Evidence> {
        match self {
            Validation::Evidence(e) => Some(e),
            Validation::Skipped { .. } => None,
        }
    }
}

impl Record {
    /// The acceptance an amber verdict was activated under, kept (nothing for another verdict).
    pub fn accept(&mut self, amber: &super::Amber, verdict: Option<crate::validate::matrix::Verdict>) {
        if let super::Amber::Accept(a) = amber
            && verdict == Some(crate::validate::matrix::Verdict::Amber)
        {
            (self.accepted_amber, self.amber) = (Some(a.reason.clone()), Some(a.clone()));
        }
    }
}

/// An accepted amber verdict: why, who owns the acceptance, and until when it holds (the
/// guide: amber names the accepting owner and an expiry date).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acceptance {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
}

impl Acceptance {
    /// `by OWNER, until DATE` (or `no owner named`, `no expiry`), as status, the report and the
    /// fleet page word it.
    pub fn terms(&self) -> String {
        let owner = self.owner.as_deref().map_or_else(|| "no owner named".to_owned(), |o| format!("by {o}"));
        let until = self.expires.map_or_else(|| "no expiry".to_owned(), |e| format!("until {e}"));
        format!("{owner}, {until}")
    }

    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires.is_some_and(|e| e <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::RunId;

    #[test]
    fn a_run_id_is_a_short_plain_name() {
        for good in ["20261204T101500Z-3f9c2a", "rollout-2026.12.4", "a", "x:y_z"] {
            assert_eq!(good.parse::<RunId>().unwrap().as_str(), good);
        }
        let long = "a".repeat(65);
        for bad in ["", "-leading", "../etc", "a/b", "with space", "é", long.as_str()] {
            assert!(bad.parse::<RunId>().is_err(), "{bad}");
        }
        // A record naming a bad id does not parse (evidence is read, never trusted).
        assert!(serde_json::from_str::<RunId>("\"../../x\"").is_err());
    }
}
