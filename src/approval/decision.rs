//! The decision record a run's evidence supports: read from the fleet report's data
//! (`report --fleet DIR --run ID`) and the run's plan, each canary's record hashed as it lies in
//! the evidence directory.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ApprovalError, DECISION_URI, Digests, LEVEL, Predicate, Reference, STATEMENT_TYPE, Statement, Subject};
use super::{VERIFIER_ID, VSA_TYPE, Verifier};
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::report::fleet::MetricMedian;
use crate::site::records::{Acceptance, Record, RunId};

/// What the approvers decide on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub run: String,
    pub bundle: DecidedBundle,
    /// Where the nodes took it from (the run's source).
    pub source: String,
    /// Each hardware tuple the canaries qualified.
    pub tuples: Vec<DecidedTuple>,
    /// Amber verdicts accepted on a canary: why, by whom, until when.
    pub exceptions: Vec<Exception>,
    /// The waves the run planned, canaries first.
    pub waves: Vec<DecidedWave>,
    /// The capacity rule the run kept (none: no rule).
    pub capacity: Option<crate::fleet::capacity::Rule>,
    /// What stops the rollout.
    pub abort_triggers: Vec<String>,
    /// The name the first approver gave (`--approver`); their identity is their key.
    pub prepared_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecidedBundle {
    pub name: String,
    pub version: String,
    pub id: String,
    pub manifest_sha256: Sha256,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecidedTuple {
    pub tuple: String,
    /// The worst of its canaries' verdicts (green or amber).
    pub verdict: String,
    pub canaries: Vec<Canary>,
    /// The paired metrics (current and candidate medians) with their thresholds.
    pub metrics: Vec<MetricMedian>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Canary {
    pub node: String,
    pub verdict: String,
    /// The record the verdict is in, by its path in the evidence directory (also an input
    /// attestation of the statement, with its sha256).
    pub record: String,
    pub sha256: Sha256,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exception {
    pub node: String,
    pub reason: String,
    pub owner: Option<String>,
    pub expires: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecidedWave {
    pub name: String,
    pub nodes: Vec<String>,
}

impl Decision {
    /// The sha256 of its canonical JSON (RFC 8785): the VSA's `policy.digest`.
    pub fn digest(&self) -> Sha256 {
        Sha256::of_bytes(&serde_json_canonicalizer::to_vec(self).expect("a decision serialises"))
    }
}

/// The statement run `run` of the evidence under `dir` supports: refused (exit 4) when a
/// canary is red, not validated or not done; (exit 2) when the run has no canary that applied
/// one bundle.
pub fn decide(
    dir: &Path,
    run: &RunId,
    prepared_by: Option<String>,
    now: Timestamp,
) -> Result<Statement, ApprovalError> {
    let fleet = crate::report::fleet::fleet(dir, Some(run))?;
    let run_name = run.to_string();
    let not_qualified = |detail: String| ApprovalError::NotQualified { run: run_name.clone(), detail };
    let canaries: Vec<_> = fleet.nodes.iter().filter(|n| n.wave == "canary").collect();
    if canaries.is_empty() {
        return Err(not_qualified("no canary in this run: nothing qualifies a bundle to approve".into()));
    }
    let unqualified: Vec<String> = canaries
        .iter()
        .filter(|n| !matches!(n.verdict.as_str(), "green" | "amber"))
        .map(|n| format!("{} {}", n.node, n.verdict))
        .collect();
    if !unqualified.is_empty() {
        return Err(ApprovalError::Red {
            run: run_name,
            detail: format!(
                "not every canary is green or accepted amber ({}): nothing to approve",
                unqualified.join(", ")
            ),
        });
    }
    let Rested { manifest_sha256, tuples, exceptions, inputs } = rested_on(dir, run, &canaries, &fleet)?;
    let id = crate::site::BundleId::of(&manifest_sha256).to_string();
    let (name, version) = fleet
        .bundle
        .as_ref()
        .map(|b| (b.name.clone(), b.version.clone()))
        .ok_or_else(|| not_qualified("the evidence names no bundle".into()))?;
    let plan = read_plan(&fleet.dir.join("plan.json"))?;
    let decision = Decision {
        run: run_name,
        bundle: DecidedBundle { name: name.clone(), version: version.clone(), id: id.clone(), manifest_sha256 },
        source: fleet.source.clone(),
        tuples,
        exceptions,
        waves: plan
            .as_ref()
            .map(|p| {
                p.waves
                    .iter()
                    .map(|w| DecidedWave {
                        name: w.name.clone(),
                        nodes: w.nodes.iter().map(ToString::to_string).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        capacity: plan.as_ref().and_then(|p| p.capacity.clone()),
        abort_triggers: abort_triggers(plan.as_ref()),
        prepared_by,
    };
    Ok(Statement {
        kind: STATEMENT_TYPE.to_owned(),
        subject: vec![Subject { name: format!("{name}@{version}"), digest: Digests { sha256: manifest_sha256 } }],
        predicate_type: VSA_TYPE.to_owned(),
        predicate: Predicate {
            verifier: Verifier { id: VERIFIER_ID.to_owned() },
            time_verified: now,
            resource_uri: format!("airlock:bundle/{id}"),
            policy: Reference { uri: DECISION_URI.to_owned(), digest: Digests { sha256: decision.digest() } },
            input_attestations: inputs,
            verification_result: "PASSED".to_owned(),
            verified_levels: vec![LEVEL.to_owned()],
            decision,
        },
    })
}

/// What the canaries' records say: the one bundle they applied, their tuples, the amber
/// exceptions, and each record as an input attestation.
struct Rested {
    manifest_sha256: Sha256,
    tuples: Vec<DecidedTuple>,
    exceptions: Vec<Exception>,
    inputs: Vec<Reference>,
}

fn rested_on(
    dir: &Path,
    run: &RunId,
    canaries: &[&crate::report::fleet::NodeLine],
    fleet: &crate::report::fleet::Fleet,
) -> Result<Rested, ApprovalError> {
    let not_qualified = |detail: String| ApprovalError::NotQualified { run: run.to_string(), detail };
    let mut sha = None;
    let mut tuples: Vec<DecidedTuple> = Vec::new();
    let mut exceptions = Vec::new();
    let mut inputs = Vec::new();
    for n in canaries {
        let file = n.record.as_deref().ok_or_else(|| not_qualified(format!("canary {} has no record", n.node)))?;
        let uri = format!("runs/{run}/nodes/{}/records/{file}", n.node);
        let path = dir.join(&uri);
        let limit = crate::fleet::evidence::MAX_RECORD_BYTES as u64;
        let bytes = super::read(&path, limit)?
            .ok_or_else(|| ApprovalError::Evidence { path: path.clone(), detail: "is missing".into() })?;
        let record: Record = serde_json::from_slice(&bytes)
            .map_err(|e| ApprovalError::Evidence { path: path.clone(), detail: format!("is not a record: {e}") })?;
        let manifest = record.bundle.as_ref().and_then(|b| b.manifest_sha256);
        let manifest = manifest.ok_or_else(|| not_qualified(format!("`{uri}` names no bundle")))?;
        match sha {
            None => sha = Some(manifest),
            Some(first) if first != manifest => {
                return Err(not_qualified(format!("the canaries applied two bundles ({first} and {manifest})")));
            }
            Some(_) => {}
        }
        if n.verdict == "amber" {
            let a = record.amber.clone().or_else(|| {
                record.accepted_amber.clone().map(|reason| Acceptance { reason, owner: None, expires: None })
            });
            let a = a.unwrap_or(Acceptance {
                reason: "amber without a recorded acceptance".into(),
                owner: None,
                expires: None,
            });
            exceptions.push(Exception { node: n.node.clone(), reason: a.reason, owner: a.owner, expires: a.expires });
        }
        let sha256 = Sha256::of_bytes(&bytes);
        inputs.push(Reference { uri: uri.clone(), digest: Digests { sha256 } });
        let canary = Canary { node: n.node.clone(), verdict: n.verdict.clone(), record: uri, sha256 };
        match tuples.iter_mut().find(|t| t.tuple == n.tuple) {
            Some(t) => {
                if canary.verdict == "amber" {
                    t.verdict = "amber".into();
                }
                t.canaries.push(canary);
            }
            None => tuples.push(DecidedTuple {
                tuple: n.tuple.clone(),
                verdict: canary.verdict.clone(),
                canaries: vec![canary],
                metrics: fleet
                    .tuples
                    .iter()
                    .find(|t| t.tuple == n.tuple)
                    .map(|t| t.results.clone())
                    .unwrap_or_default(),
            }),
        }
    }
    let manifest_sha256 = sha.ok_or_else(|| not_qualified("no canary".into()))?;
    Ok(Rested { manifest_sha256, tuples, exceptions, inputs })
}

/// The run's plan, when `airlock rollout` planned it.
fn read_plan(path: &Path) -> Result<Option<crate::fleet::plan::Plan>, ApprovalError> {
    let Some(bytes) = super::read(path, 16 << 20)? else { return Ok(None) };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ApprovalError::Evidence { path: path.to_owned(), detail: format!("is not a rollout plan: {e}") })
}

/// The rules `airlock rollout judge` and `next` stop a run by, as the plan sets them.
fn abort_triggers(plan: Option<&crate::fleet::plan::Plan>) -> Vec<String> {
    let mut out = vec![
        "a node red, refused or failed in a wave stops the run before the next wave".to_owned(),
        "an apply that reports another bundle id than the run's is a failure".to_owned(),
        "a rollback that fails or passes airlock_rollback_max_seconds stops the run".to_owned(),
    ];
    if let Some(p) = plan {
        out.push(format!("rollback scope: {:?} (the nodes a stop rolls back)", p.rollback_scope).to_lowercase());
        if p.capacity.is_some() {
            out.push("a wave that would break the capacity rule is not started".to_owned());
        }
    }
    out
}
