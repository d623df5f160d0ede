//! The fleet's verbs: `rollout` (the decisions an Ansible run asks of airlock), `approve`,
//! `verify-approval` and `promote`.

use std::path::PathBuf;

use clap::Args;

use super::shared::{NetArgs, RunArgs, SiteArgs, parse_release};

#[derive(Debug, clap::Subcommand)]
pub enum RolloutCommand {
    /// The bundle id a source serves (a mirror's current or `--release`, or a bundle file):
    /// what a run pins once at its start. Read, not verified: each node verifies what it takes.
    Resolve(RolloutResolveArgs),
    /// Plan the run from every node's facts (JSON on stdin): each node skip, reserved,
    /// unavailable, canary or in a batch; write `plan.json` and start the journal.
    Plan(RolloutArgs),
    /// Whether `--wave` starts now (JSON on stdin: `batch`, the scheduler's `rows`): the run
    /// still going, Ansible's batch the plan's, the capacity rule met.
    Next(RolloutWaveArgs),
    /// Judge `--wave` from its nodes' results (JSON on stdin): go on, or stop with the nodes
    /// to roll back; journaled.
    Judge(RolloutWaveArgs),
    /// Journal a step's results (JSON on stdin): adopt, stage, after (resume or hold),
    /// rollback.
    Note(RolloutNoteArgs),
    /// Check and write every node's evidence (JSON on stdin: each node's `status --run` text),
    /// one node's bad answer refused for that node alone.
    Evidence(RolloutArgs),
    /// End the run: `run.json` gets its end, the journal its last line.
    End(RolloutArgs),
}

#[derive(Debug, Args)]
pub struct RolloutResolveArgs {
    /// A mirror's public tree (`http(s)://…/`, `file:///…/`) or a bundle file.
    pub source: String,
    /// The mirror's release by version or id instead of its current.
    #[arg(long, value_name = "VERSION|ID", value_parser = parse_release)]
    pub release: Option<crate::site::mirror::Release>,
    /// The node's site root: where its trust root has a `promotion` role, a mirror's current
    /// is pinned only as its signed promotion names it.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub net: NetArgs,
    /// Print one JSON document on stdout (always; accepted for symmetry).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The evidence directory on the controller (`airlock_evidence_dir`); the run's own is
    /// `DIR/runs/RUN/`.
    #[arg(long, value_name = "DIR")]
    pub evidence: PathBuf,
    /// The run's id (1 to 64 of `A-Z a-z 0-9 . _ : -`), checked before any path is built.
    #[arg(long, value_name = "ID")]
    pub run: crate::site::records::RunId,
    /// Decide and print, write nothing (the playbook's `--check`).
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON document on stdout (always; accepted for symmetry).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RolloutWaveArgs {
    #[command(flatten)]
    pub run: RolloutArgs,
    /// The wave: `canary` or `batch N` [default for `next`: the wave of the batch's first
    /// node in the plan].
    #[arg(long, default_value = "")]
    pub wave: String,
}

#[derive(Debug, Args)]
pub struct RolloutNoteArgs {
    #[command(flatten)]
    pub run: RolloutArgs,
    /// What the results are of.
    #[arg(long, value_enum)]
    pub step: RolloutStep,
    /// A rollback longer than this stops the run too (seconds).
    #[arg(long, value_name = "SECONDS")]
    pub max_seconds: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RolloutStep {
    Adopt,
    Stage,
    After,
    Rollback,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The rollout evidence (`airlock_evidence_dir`): the run's records are read and hashed there.
    #[arg(long, value_name = "DIR")]
    pub fleet: Option<PathBuf>,
    /// The run decided on (`report --fleet DIR` names it).
    #[arg(long = "run", value_name = "ID", required_unless_present = "add_to", requires = "fleet")]
    pub run: Option<crate::site::records::RunId>,
    /// The approver's private key: a key of the site's `approvers` role.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// The approver's name, kept in the decision (their identity is their key).
    #[arg(long, value_name = "NAME")]
    pub approver: Option<String>,
    /// Where the approval is written [default: `DIR/runs/ID/approval.dsse.json`].
    #[arg(long, value_name = "FILE", conflicts_with = "add_to")]
    pub out: Option<PathBuf>,
    /// Co-sign this approval (its statement unchanged); with `--fleet`, its records are
    /// checked against the evidence first.
    #[arg(long, value_name = "FILE", conflicts_with = "run")]
    pub add_to: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyApprovalArgs {
    /// The approval (`airlock approve`).
    #[arg(value_name = "FILE")]
    pub approval: PathBuf,
    /// The site root whose trust root (`ROOT/trust/`) holds the `approvers` role.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// The rollout evidence: every record the approval names is checked there by sha256.
    #[arg(long, value_name = "DIR")]
    pub evidence: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct PromoteArgs {
    /// The mirror's site root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// The retained release: its version, or its bundle id (`airlock status`).
    #[arg(value_name = "VERSION|ID", required_unless_present = "renew")]
    pub release: Option<String>,
    /// The approval the promotion rests on (`airlock approve`): checked against the site's
    /// `approvers` role and this exact bundle, and kept as `ROOT/approvals/ID.dsse.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "without_approval")]
    pub approval: Option<PathBuf>,
    /// Promote with no approval on a site whose trust root has an `approvers` role: the
    /// exception, recorded with `--reason` and shown red.
    #[arg(long, requires = "reason")]
    pub without_approval: bool,
    /// A private key of the site's `promotion` role: signs `public/promotion.json` (repeat for
    /// a threshold above 1). Needed where the trust root has that role.
    #[arg(long = "sign", value_name = "KEY")]
    pub sign: Vec<PathBuf>,
    /// How long the signed promotion holds (`7d`, `12h`): nodes refuse it after.
    #[arg(long, value_name = "DURATION", default_value = crate::site::promotion::DEFAULT_EXPIRES)]
    pub promotion_expires: String,
    /// Re-sign the current promotion with the next number and a new expiry (no release named):
    /// what the mirror host's timer runs well within `--promotion-expires`.
    #[arg(long, conflicts_with_all = ["release", "approval", "without_approval"])]
    pub renew: bool,
    /// Promote a lower version than the mirror has had current (logged and recorded).
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Sign the restaged apt and rpm views with this armored `OpenPGP` secret key, as at install.
    #[arg(long, value_name = "KEY.asc")]
    pub apt_signing_key: Option<PathBuf>,
    /// Use expired trust metadata or an expired bundle anyway; needs `--reason`.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Why the expired metadata or bundle (`--allow-expired`) or the promotion without an
    /// approval (`--without-approval`) is acceptable here; the record keeps it.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
