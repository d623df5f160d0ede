//! Command-line arguments (clap derive, no I/O) and the terminal progress reporter.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::progress::Reporter;

#[derive(Debug, Parser)]
#[command(name = "airlock", version = env!("AIRLOCK_VERSION"), about = "Carry a GPU software stack across an air gap", long_about = None)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); `RUST_LOG` overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Whether the command was asked for `--json`: its failure is then one JSON document too.
    pub fn wants_json(&self) -> bool {
        match &self.command {
            Command::Keygen(a) => a.json,
            Command::Lock(a) => a.json,
            Command::Freeze(a) => a.json,
            Command::Build(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Sign(a) => a.json,
            Command::Rebuild(a) => a.json,
            Command::Inspect(a) => a.json,
            Command::Install(a) => a.json,
            Command::Apply(a) => a.json,
            Command::Diff(a) => a.json,
            Command::Rollback(a) => a.json,
            Command::Promote(a) => a.json,
            Command::Approve(a) => a.json,
            Command::VerifyApproval(a) => a.json,
            Command::Status(a) => a.json,
            Command::Check(a) => a.json,
            Command::Probe(a) => a.json,
            Command::Validate(a) => a.json,
            Command::Provenance(a) => a.json,
            Command::Sbom(a) => a.json,
            Command::Push(a) => a.json,
            Command::Pull(a) => a.json,
            Command::Copy(a) => a.json,
            Command::Report(a) => a.json,
            Command::Outdated(a) => a.json,
            Command::Version(a) => a.json,
            Command::SelfUpgrade(a) => a.json,
            Command::Trust(a) => a.json(),
            Command::Rollout(_) => true,
            Command::VerifyBlob(a) | Command::Sigstore(SigstoreCommand::Verify(a)) => a.json,
            Command::Completions(_) | Command::Man(_) => false,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate an ECDSA P-256 signing key pair (cosign-compatible).
    Keygen(KeygenArgs),
    /// Resolve every input of the spec to a digest and write the lock.
    Lock(LockArgs),
    /// A node's running stack as a baseline: from its inventory (`airlock probe --json`) and the
    /// spec that names the stack, a spec and lock pinning every named package and its installed
    /// closure at exactly the node's versions (exit 3 naming each version no archive serves).
    Freeze(FreezeArgs),
    /// Build a signed bundle from the spec and its lock.
    Build(BuildArgs),
    /// Verify a bundle offline against trusted public keys.
    Verify(VerifyArgs),
    /// Co-sign a bundle: write a detached signature `BUNDLE.KEYID.sig` beside it.
    Sign(SignArgs),
    /// On a second build host: build the bundle again from its spec and lock, compare it with
    /// BUNDLE, and only when they are the same bytes co-sign it (a `rebuilders` role's key).
    Rebuild(RebuildArgs),
    /// Show what a bundle holds without extracting it (nothing is verified).
    Inspect(InspectArgs),
    /// Verify a bundle while staging it under a site root, then activate it.
    Install(InstallArgs),
    /// On a GPU node: verify a bundle, install its packages with the host's package manager,
    /// validate the new stack, and commit it or put the host back (exit 4; 5: reboot pending).
    Apply(ApplyArgs),
    /// What changed between two bundles or two locks: added, removed, changed.
    Diff(DiffArgs),
    /// Make the retained previous bundle current again, verified and republished.
    Rollback(RollbackArgs),
    /// A mirror: make a retained release (a candidate, `install --candidate`) its current,
    /// verified again; nodes that follow the mirror's current then take it.
    Promote(PromoteArgs),
    /// Sign the decision a rollout run's canary evidence supports (an in-toto statement with
    /// the SLSA verification-summary predicate, in a DSSE envelope) as an approver, or co-sign one.
    Approve(ApproveArgs),
    /// Check an approval offline against a site trust root's `approvers` role and threshold,
    /// and each record it names against the evidence when given.
    VerifyApproval(VerifyApprovalArgs),
    /// What a site root has: current, previous, retained bundles, history, the last rollback.
    Status(StatusArgs),
    /// Verify every retained bundle again and compare each staged tree with it, file by file
    /// (exit 3 on any damage).
    Check(CheckArgs),
    /// The current-state record of this host's GPU stack (tools on PATH, files under
    /// `AIRLOCK_HOST_ROOT`).
    Probe(ProbeArgs),
    /// Compare this host's GPU stack with the active bundle's support matrix (exit 4 on red).
    Validate(ValidateArgs),
    /// Print the bundle's in-toto provenance statement (its DSSE signature checked with `--trust`).
    Provenance(ProvenanceArgs),
    /// Write the bundle's SBOM (`CycloneDX` JSON), byte for byte (nothing is verified: use `verify`).
    Sbom(SbomArgs),
    /// Store a bundle (file or parts) and its co-signatures in a registry as an OCI artifact.
    Push(PushArgs),
    /// Fetch a bundle from a registry, verify it, and only then write it (with its co-signatures).
    Pull(PullArgs),
    /// Copy a bundle artifact and its co-signatures between registries or through a layout
    /// directory, digests unchanged.
    Copy(CopyArgs),
    /// The approval pack: one self-contained HTML page (and `--json`) for a bundle or a site.
    Report(ReportArgs),
    /// What moved upstream since the lock, by layer (exit 10 when something did).
    Outdated(OutdatedArgs),
    /// Shell completions on stdout: `airlock completions bash > /etc/bash_completion.d/airlock`.
    Completions(CompletionsArgs),
    /// The version, the commit and date it was built from, and the target.
    Version(VersionArgs),
    /// Replace this airlock with the one a bundle carries for this target (verified first; the
    /// old binary is kept as PATH.previous).
    SelfUpgrade(SelfUpgradeArgs),
    /// The site trust root: who may sign what a site activates (TUF root and targets metadata
    /// under `ROOT/trust/`): init, rotate, role, revoke, renew, update, show.
    #[command(subcommand)]
    Trust(TrustCommand),
    /// Verify a Sigstore bundle (v0.1 to v0.3; a message signature or a DSSE envelope) over a
    /// file or its sha256, offline: the certificate chain at the signing time, SCTs, the
    /// transparency log entry with its inclusion proof and checkpoint, SETs and RFC 3161
    /// timestamps, against the shipped public-good trusted root, `--trusted-root` or the
    /// site's. Exit 3 when it does not verify.
    VerifyBlob(SigstoreVerifyArgs),
    /// The earlier spelling of `verify-blob` (`airlock sigstore verify`), kept for scripts.
    #[command(subcommand, hide = true)]
    Sigstore(SigstoreCommand),
    /// Write the man pages (airlock.1 and one per subcommand) into a directory.
    #[command(hide = true)]
    Man(ManArgs),
    /// The rollout's decisions, for the Ansible collection's playbook on its controller: the
    /// release a run pins, its plan, whether each wave starts, what each wave's results mean
    /// and what to roll back, the run journal and the nodes' evidence (`docs/fleet.md`).
    #[command(subcommand)]
    Rollout(RolloutCommand),
}

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

#[derive(Debug, clap::Subcommand)]
pub enum SigstoreCommand {
    /// `airlock verify-blob`, as it was first spelled.
    Verify(SigstoreVerifyArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("signer").required(true).args(["identity", "identity_regexp", "key"])))]
pub struct SigstoreVerifyArgs {
    /// The Sigstore bundle (`*.sigstore.json`).
    #[arg(long, value_name = "FILE")]
    pub bundle: PathBuf,
    /// The signer's identity: the certificate's SAN, exactly.
    #[arg(long, value_name = "IDENTITY", requires = "issuer", alias = "certificate-identity")]
    pub identity: Option<String>,
    /// The signer's identity as a regular expression that must match the whole SAN.
    #[arg(
        long,
        value_name = "REGEX",
        requires = "issuer",
        conflicts_with = "identity",
        alias = "certificate-identity-regexp"
    )]
    pub identity_regexp: Option<String>,
    /// The OIDC issuer that vouched for the identity (`https://token.actions.githubusercontent.com`).
    #[arg(long, value_name = "URL", alias = "certificate-oidc-issuer")]
    pub issuer: Option<String>,
    /// A managed key's PEM public key, instead of a keyless identity.
    #[arg(long, value_name = "PEM", conflicts_with_all = ["identity", "identity_regexp", "issuer"])]
    pub key: Option<PathBuf>,
    /// A private Sigstore instance's `trusted_root.json` [default: the public-good instance's,
    /// shipped with airlock].
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    pub trusted_root: Option<PathBuf>,
    /// Use this site's Sigstore root: its trust root's `sigstore/trusted_root.json` target,
    /// else the public-good one.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The signed file (always a file: a digest goes in `--digest`).
    #[arg(value_name = "FILE", required_unless_present = "digest", conflicts_with = "digest")]
    pub subject: Option<String>,
    /// The signed file's digest instead of the file, `sha256:HEX`.
    #[arg(long, value_name = "sha256:HEX", value_parser = parse_digest)]
    pub digest: Option<crate::digest::Sha256>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum TrustCommand {
    /// Write root version 1 and targets version 1: the root keys and threshold, the targets
    /// keys, and the signing roles a bundle must satisfy.
    Init(TrustInitArgs),
    /// Write root version N+1 (signed by a threshold of version N's root keys and of its own):
    /// add or remove root or targets keys, change thresholds, renew the root's expiry.
    Rotate(TrustRotateArgs),
    /// Write a new targets version that sets or removes signing roles.
    Role(TrustRoleArgs),
    /// Write a new targets version without a key: no bundle counts its signature any more,
    /// retained ones included.
    Revoke(TrustRevokeArgs),
    /// Extend the expiry of the root and the targets metadata.
    Renew(TrustRenewArgs),
    /// Adopt newer metadata from files (`N.root.json` one version at a time, `targets.json`),
    /// each verified against what the site has.
    Update(TrustUpdateArgs),
    /// Write a new targets version whose `sigstore/trusted_root.json` target is FILE: the
    /// site's Sigstore trusted root (a private instance's), which `sigstore verify --root` uses.
    SigstoreRoot(TrustSigstoreRootArgs),
    /// The versions, roles, keys, thresholds and expiry.
    Show(TrustShowArgs),
}

impl TrustCommand {
    pub fn json(&self) -> bool {
        match self {
            TrustCommand::Init(a) => a.common.json,
            TrustCommand::Rotate(a) => a.common.json,
            TrustCommand::Role(a) => a.common.json,
            TrustCommand::Revoke(a) => a.common.json,
            TrustCommand::Renew(a) => a.common.json,
            TrustCommand::Update(a) => a.common.json,
            TrustCommand::SigstoreRoot(a) => a.common.json,
            TrustCommand::Show(a) => a.json,
        }
    }
}

/// What every `trust` change takes.
#[derive(Debug, Args)]
pub struct TrustCommon {
    /// Site state root (the metadata is `ROOT/trust/`).
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// A private key to sign the new metadata with (passphrase from `AIRLOCK_KEY_PASSWORD`);
    /// repeat until every threshold the change needs is met.
    #[arg(long = "sign", value_name = "KEY")]
    pub sign: Vec<PathBuf>,
    #[command(flatten)]
    pub site: SiteArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrustInitArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// A root key (SPKI PEM); repeat for several. Keep their private halves offline.
    #[arg(long = "root-key", value_name = "PUB", required = true)]
    pub root_key: Vec<PathBuf>,
    /// Root keys that must sign every new root version.
    #[arg(long, default_value_t = 1)]
    pub root_threshold: u64,
    /// A key of the targets role, which signs the signing roles [default: the root keys].
    #[arg(long = "targets-key", value_name = "PUB")]
    pub targets_key: Vec<PathBuf>,
    /// Targets keys that must sign every targets version [default: the root threshold with
    /// the root keys, else 1].
    #[arg(long)]
    pub targets_threshold: Option<u64>,
    /// A signing role: `NAME=PUB[,PUB…]:THRESHOLD` (`build=build.pub:1`,
    /// `security=sec1.pub,sec2.pub:1`); every role must be met for a bundle to be accepted.
    #[arg(long = "role", value_name = "NAME=PUB[,PUB…]:N", required = true)]
    pub role: Vec<String>,
    /// When the metadata expires: a duration (`365d`, `1y`, `12h`) or a date (`2027-12-31`).
    #[arg(long, default_value = "1y")]
    pub expires: String,
}

#[derive(Debug, Args)]
pub struct TrustRotateArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// A public key (SPKI PEM) that becomes a root key; repeat for several. The new root
    /// version is signed by a threshold of the old root keys and of the new ones.
    #[arg(long = "add-root-key", value_name = "PUB")]
    pub add_root_key: Vec<PathBuf>,
    /// A root key that stops being one (lost, retired); repeat for several.
    #[arg(long = "remove-root-key", value_name = "PUB")]
    pub remove_root_key: Vec<PathBuf>,
    /// How many root keys must sign the next root version [default: unchanged].
    #[arg(long, value_name = "N")]
    pub root_threshold: Option<u64>,
    /// A public key that may sign the targets metadata (the signing roles); repeat for several.
    #[arg(long = "add-targets-key", value_name = "PUB")]
    pub add_targets_key: Vec<PathBuf>,
    /// A targets key that may no longer sign the targets metadata; repeat for several.
    #[arg(long = "remove-targets-key", value_name = "PUB")]
    pub remove_targets_key: Vec<PathBuf>,
    /// How many targets keys must sign the targets metadata [default: unchanged].
    #[arg(long, value_name = "N")]
    pub targets_threshold: Option<u64>,
    /// The new root version's expiry (a duration or a date) [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustRoleArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// Set a signing role: `NAME=PUB[,PUB…]:THRESHOLD` (replaces a role of that name).
    #[arg(long = "role", value_name = "NAME=PUB[,PUB…]:N")]
    pub role: Vec<String>,
    /// Remove a signing role.
    #[arg(long = "remove-role", value_name = "NAME")]
    pub remove_role: Vec<String>,
    /// The new targets version's expiry [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustRevokeArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The public key (SPKI PEM) to revoke; repeat for several.
    #[arg(long = "key", value_name = "PUB", required = true)]
    pub key: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TrustRenewArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The new expiry: a duration from now (`1y`, `90d`) or a date.
    #[arg(long)]
    pub expires: String,
    /// Renew only this metadata [default: both].
    #[arg(long, value_parser = ["root", "targets"])]
    pub only: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustSigstoreRootArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The Sigstore instance's `trusted_root.json` (checked to be one before it is written).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The new targets version's expiry [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustUpdateArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// `N.root.json` and `targets.json` files (from another site root, or the provisioning media),
    /// and the Sigstore `trusted_root.json` the new targets list, when they list one.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TrustShowArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SelfUpgradeArgs {
    /// The bundle (file, parts file or first part) carrying a `[[file]]` of kind `airlock`.
    pub bundle: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// The binary to replace [default: this one].
    #[arg(long, value_name = "PATH")]
    pub to: Option<PathBuf>,
    /// The site root whose trust root (`ROOT/trust/`), when it has one, decides, as for
    /// `install` (then no `--trust`).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Use a bundle past its `expires` anyway; needs `--reason`.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Replace a newer airlock with this older one; needs `--reason`.
    #[arg(long, requires = "reason")]
    pub allow_downgrade: bool,
    /// Why a waiver holds here (logged).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Where the pages go (made if missing).
    pub out_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct OutdatedArgs {
    /// The spec whose lock is compared with upstream now.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Lock file [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    /// Download files named by URL and hash them (otherwise their size is compared).
    #[arg(long)]
    pub deep: bool,
    /// A site root too: an amber acceptance its current bundle runs under that has expired is a
    /// finding (a requalification is due). Without a spec at SPEC, only the site is looked at.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A bundle (file, parts file or first part): what it carries, who signed, what changed.
    #[arg(required_unless_present_any = ["root", "fleet"], conflicts_with_all = ["root", "fleet"])]
    pub bundle: Option<PathBuf>,
    /// The release it replaces: the BOM diff is against it.
    #[arg(long, value_name = "OLD.airlock", requires = "bundle")]
    pub base: Option<PathBuf>,
    /// A site root: its active bundle (verified again), validation evidence and records.
    #[arg(long, conflicts_with = "fleet")]
    pub root: Option<PathBuf>,
    /// A fleet's evidence directory (the Ansible collection's `airlock_evidence_dir`): one page
    /// for one rollout run.
    #[arg(long, value_name = "DIR")]
    pub fleet: Option<PathBuf>,
    /// With `--fleet`: the run to judge (its id, as the records and `DIR/runs/` name it)
    /// [default: the newest].
    #[arg(long, value_name = "ID", requires = "fleet")]
    pub run: Option<crate::site::records::RunId>,
    /// Verify the bundle (and the base) with these keys; without, the page says NOT verified.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Write the HTML page here (atomically) instead of stdout.
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
    /// Print the report's data as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How to reach the registries a command names: `[registries."HOST"]` of a spec, for bundles.
#[derive(Debug, Args)]
pub struct ReachArgs {
    /// Talk plain HTTP to the registries named here; `--insecure-registry=HOST[:PORT]` to that
    /// one only (repeat for several). Never implied, not even for loopback.
    #[arg(long, value_name = "HOST", num_args = 0..=1, default_missing_value = "*")]
    pub insecure_registry: Vec<String>,
    /// An extra CA bundle (PEM) for the TLS registries named here.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    #[command(flatten)]
    pub net: NetArgs,
}

impl ReachArgs {
    pub fn reach(&self) -> crate::oci::Reach {
        crate::oci::Reach {
            insecure: self.insecure_registry.clone(),
            ca: self.registry_ca.clone(),
            options: self.net.options(),
        }
    }
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The bundle: a file, a parts file or a first part.
    pub bundle: PathBuf,
    /// Where: `oci://HOST/REPO:TAG` (or `oci-layout:DIR[:TAG]`).
    #[arg(value_name = "oci://HOST/REPO:TAG")]
    pub target: String,
    /// Upload the bundle's layers in chunks of SIZE (`16M`; smaller behind a proxy that caps
    /// request bodies). A failed chunk is resumed from what the registry holds.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::bundle::parts::parse_size)]
    pub chunk_size: u64,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(mut_arg("trust", |a| a.required(true)))]
pub struct PullArgs {
    /// `oci://HOST/REPO:TAG`, `oci://HOST/REPO@sha256:HEX` or `oci-layout:DIR[:TAG]`.
    #[arg(value_name = "oci://HOST/REPO:TAG|@DIGEST")]
    pub source: String,
    /// The bundle file to write (it appears only once the bundle verified).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Where layers download to (resumed from there when a pull is run again) [default:
    /// `$AIRLOCK_CACHE`, else `~/.cache/airlock`].
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// `oci://HOST/REPO:TAG|@DIGEST` or `oci-layout:DIR[:TAG]`.
    pub from: String,
    /// `oci://HOST/REPO[:TAG]` or `oci-layout:DIR[:TAG]` (the source's tag when none is given).
    pub to: String,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Who must have signed a bundle: shared by every verb that verifies one.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// A trusted public key (SPKI PEM); repeat for several.
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    /// Distinct trusted keys that must have signed the manifest; the embedded signature and the
    /// co-signatures beside the bundle (`BUNDLE.KEYID.sig`, from `airlock sign`) count.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threshold: u32,
    /// A private Sigstore instance's `trusted_root.json` to check the bundle's upstream
    /// signatures against again (without it: a site trust root's Sigstore target, else the
    /// public-good instance's, shipped with airlock).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

/// Where downloads go and how many run at once: shared by `lock` and `build`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Content-addressed download cache [default: `$AIRLOCK_CACHE`, else `~/.cache/airlock`].
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Downloads in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    #[command(flatten)]
    pub net: NetArgs,
}

/// How requests are retried and timed out.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// Tries after the first for every request (registry, index, hub, blob) that fails with a
    /// 5xx, a 429 or a dropped connection; waits double from 0.25 s (up to 30 s, with jitter),
    /// or follow `Retry-After` (up to 120 s).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    /// Seconds without data before a response is given up (then tried again).
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Seconds to wait for a connection.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout: u64,
    /// Give up a mirror or index transfer averaging fewer bytes a second (K, M, G: 1024s; 0: none).
    #[arg(long, value_name = "RATE", default_value = "64K", value_parser = parse_rate)]
    pub min_rate: u64,
    /// Seconds a transfer runs before `--min-rate` is judged.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_rate_window: u64,
}

fn parse_digest(value: &str) -> Result<crate::digest::Sha256, String> {
    crate::digest::prefixed::parse(value)
}

fn parse_release(value: &str) -> Result<crate::site::mirror::Release, String> {
    crate::site::mirror::Release::parse(value)
}

/// A rate in bytes per second: a number, with K, M or G for powers of 1024 (`64K`).
fn parse_rate(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let (digits, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KIB" => 10,
        "M" | "MIB" => 20,
        "G" | "GIB" => 30,
        _ => return Err(format!("`{value}` is not a rate: a number of bytes per second, with K, M or G (`64K`)")),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{value}` is not a rate: bytes per second, such as `64K`"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{value}` is too large a rate"))
}

impl NetArgs {
    pub fn options(&self) -> crate::fetch::NetOptions {
        crate::fetch::NetOptions {
            attempts: self.retries.saturating_add(1),
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout),
            read_timeout: std::time::Duration::from_secs(self.timeout),
            min_rate: self.min_rate,
            rate_window: std::time::Duration::from_secs(self.min_rate_window),
            ..crate::fetch::NetOptions::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A bundle or a lock file.
    pub old: PathBuf,
    /// A bundle or a lock file.
    pub new: PathBuf,
    /// Verify both bundles with these keys first; without it, diff compares what the bundles
    /// claim, unverified.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProvenanceArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Check the envelope's signature with these public keys (and that it names this manifest).
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    /// Print `{verified, signers, statement}` instead of the bare statement.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SbomArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Write here instead of stdout (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With `--out`: print `{sbom, sha256, bytes}` for what was written (without `--out`, the
    /// SBOM itself is the JSON on stdout).
    #[arg(long, requires = "out")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory for NAME.key and NAME.pub (created if missing; existing keys are never overwritten).
    #[arg(long)]
    pub out_dir: PathBuf,
    /// The key's file names: NAME.key (private) and NAME.pub (public).
    #[arg(long, default_value = "airlock")]
    pub name: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// The spec: what to carry.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Lock file to write [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The Sigstore trusted root upstream signatures (`verify = …`) are checked against at lock time.
#[derive(Debug, Args)]
pub struct UpstreamRootArgs {
    /// A private Sigstore instance's `trusted_root.json` for the spec's `verify` policies
    /// (without it: the public-good instance's, shipped with airlock).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// The node's inventory: `airlock probe --json > NODE.json` on the node.
    #[arg(value_name = "NODE.json")]
    pub node: PathBuf,
    /// The spec that names the stack: its `[[deb]]` entries and their archives.
    #[arg(long, value_name = "SPEC")]
    pub spec: PathBuf,
    /// The baseline spec to write, beside SPEC; its lock is written beside it (`BASE.lock`).
    #[arg(long, value_name = "BASE.toml")]
    pub out: PathBuf,
    /// The baseline's bundle version (below every release of the stack).
    #[arg(long, default_value = crate::build::freeze::BASELINE_VERSION)]
    pub version: semver::Version,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The spec: what to carry.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Private signing key (PEM); its passphrase comes from `AIRLOCK_KEY_PASSWORD`.
    #[arg(long)]
    pub key: PathBuf,
    /// The bundle file to write (written beside it first, renamed when complete).
    #[arg(long)]
    pub out: PathBuf,
    /// Fail if the lock is missing or does not cover the spec, instead of updating it.
    #[arg(long)]
    pub locked: bool,
    /// Lock file [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Image blobs not in the cache go from their registry (or layout) straight into the
    /// bundle as they download, and are not kept: each layer is written once, and the build
    /// host needs room for the bundle alone. A dropped connection resumes with `Range`; the
    /// next build downloads them again. Everything else is cached as always.
    #[arg(long)]
    pub no_blob_cache: bool,
    #[command(flatten)]
    pub compression: CompressionArgs,
    /// Write the bundle as parts of SIZE bytes (`4G`, `4095M`, `700M`; K/M/G/T are powers of
    /// 1024, KB/MB/GB/TB of 1000): `OUT.001`, `OUT.002`, … and the signed `OUT.parts.json`.
    /// `cat OUT.0*` gives the ordinary bundle. FAT32 holds files up to 4095M and a bit.
    #[arg(long, value_name = "SIZE", value_parser = crate::bundle::parts::parse_size)]
    pub split_size: Option<u64>,
    /// Build a delta against this earlier bundle (file, parts file or first part): content
    /// it holds is listed as `from_base` and left out. The site must have the base retained.
    #[arg(long, value_name = "OLD.airlock", conflicts_with = "base_lock")]
    pub base: Option<PathBuf>,
    /// Build a delta against whatever bundle was built from this lock (image layers are
    /// looked up in the cache's image manifests).
    #[arg(long, value_name = "OLD.lock")]
    pub base_lock: Option<PathBuf>,
    /// Carry this site root's trust metadata (`DIR/trust/N.root.json`, `targets.json`, verified
    /// first) as `airlock/trust/`: a site or node behind on rotations or revocations catches up
    /// when it installs or applies the bundle.
    #[arg(long, value_name = "DIR")]
    pub trust_root: Option<PathBuf>,
    /// The `CycloneDX` version of the bundle's SBOM: 1.5, or 1.6.
    #[arg(long, value_name = "1.5|1.6", default_value = "1.5")]
    pub sbom_spec: crate::attest::sbom::SbomSpec,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How `build` compresses the bundle (`docs/performance.md` has the measurements).
#[derive(Debug, Args)]
pub struct CompressionArgs {
    /// zstd level, 1 (fastest) to 19 (smallest). Content that does not compress (weights,
    /// gzipped layers) costs little at any level; text and wheels gain a few percent per step
    /// above 3 at a large cost in time.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub compression_level: i32,
    /// Long-distance matching with a window of 2^LOG bytes (20 to 27; 27 if no value): finds
    /// content repeated far apart, e.g. the same libraries in wheels for several Pythons. Every
    /// reader of the bundle must then hold the whole window in memory (128 MiB at 27).
    #[arg(long, value_name = "LOG", num_args = 0..=1, default_missing_value = "27",
          value_parser = clap::value_parser!(u32).range(20..=27))]
    pub long: Option<u32>,
}

impl CompressionArgs {
    pub fn compression(&self) -> crate::bundle::writer::Compression {
        crate::bundle::writer::Compression { level: self.compression_level, long_window_log: self.long }
    }
}

#[derive(Debug, Args)]
#[command(mut_arg("trust", |a| a.required_unless_present("root")))]
pub struct VerifyArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Verify under this site root's trust root (`ROOT/trust/`: its signing roles, revocations
    /// and expiry) instead of `--trust`.
    #[arg(long, value_name = "DIR", conflicts_with = "trust")]
    pub root: Option<PathBuf>,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Why the expired metadata or bundle is acceptable for this check.
    #[arg(long, value_name = "TEXT", requires = "allow_expired")]
    pub reason: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Private key (PEM) to co-sign with; its passphrase comes from `AIRLOCK_KEY_PASSWORD`.
    #[arg(long)]
    pub key: PathBuf,
    /// Verify the whole bundle with these keys first, and refuse to co-sign if it fails.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("acceptance").multiple(true)))]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct InstallArgs {
    /// The bundle: a file, a parts file or first part, or `oci://HOST/REPO:TAG|@DIGEST`
    /// (streamed from the registry; its co-signature referrers count).
    pub bundle: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Push the bundle's images to this registry (credentials from the docker config).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub registry: Option<String>,
    /// Talk plain HTTP to `--registry` and to an `oci://` bundle's registry (never implied).
    #[arg(long)]
    pub insecure_registry: bool,
    /// An extra CA bundle (PEM) for an `oci://` bundle's registry.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Sign the site's apt view with this armored `OpenPGP` secret key (passphrase, if any,
    /// from `AIRLOCK_APT_KEY_PASSWORD`).
    #[arg(long, value_name = "KEY.asc")]
    pub apt_signing_key: Option<PathBuf>,
    /// Bundles kept under the root: the newest N, and never fewer than current and previous
    /// (default 2; 3 for a mirror, which serves every one it keeps as a release).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub keep: Option<u16>,
    /// A mirror's candidate release (`--role mirror`): retained and served by version and id
    /// (`public/releases/`), not made current; nodes pinned to it (`apply URL --release`) take
    /// it, and `airlock promote` makes it the mirror's current.
    #[arg(long)]
    pub candidate: bool,
    /// Install a lower version than this site has already activated for that bundle name
    /// (logged and recorded); `airlock rollback` is the usual way back.
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Activate even when validation is amber (the matrix is silent about a field, or one
    /// cannot be determined); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_amber: bool,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub allow_expired: bool,
    /// Why the acceptance holds here (a documented exception, a ticket); the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "acceptance")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub amber: AmberArgs,
    /// `host`: this host is judged as it is against the bundle's matrix. `mirror`: a host
    /// without GPUs that serves the views to nodes (no validation; nodes run `airlock apply`).
    /// `relay`: a mirror fed from the mirror whose URL is BUNDLE (a hall's, a rack's).
    #[arg(long, value_enum, default_value = "host")]
    pub role: RoleArg,
    /// A relay's (`--role relay`): keep every member of the release (wheels, models, images'
    /// blobs, files), not only what nodes install from (packages, trust metadata).
    #[arg(long)]
    pub all: bool,
    /// A relay's (`--role relay`): the upstream's release by version or id, kept as a candidate
    /// (served by version and id, `current` unchanged), instead of following its current.
    #[arg(long, value_name = "VERSION|ID", value_parser = parse_release)]
    pub release: Option<crate::site::mirror::Release>,
    /// A relay's: the host its upstream may redirect to besides its own (repeat).
    #[arg(long, value_name = "HOST")]
    pub allow_redirect_host: Vec<String>,
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

impl InstallArgs {
    /// `--keep`, or its default for the role.
    pub fn kept(&self) -> u16 {
        self.keep.unwrap_or(match self.role {
            RoleArg::Host => 2,
            RoleArg::Mirror | RoleArg::Relay => 3,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    Host,
    Mirror,
    Relay,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("acceptance").multiple(true)))]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct ApplyArgs {
    /// What to apply: a bundle file (or its parts file or first part),
    /// `oci://HOST/REPO:TAG|@DIGEST` (streamed; its co-signature referrers count), or a
    /// mirror's site root served by any web server (`http(s)://HOST/PATH/`) or mounted
    /// (`file:///PATH/`): its current bundle, whose signed manifest is checked before the
    /// bundle is downloaded.
    pub source: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// This node's state root (its retained bundles are the views it can restore from).
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Talk plain HTTP to an `oci://` source's registry (never implied).
    #[arg(long)]
    pub insecure_registry: bool,
    /// An extra CA bundle (PEM) for an `oci://` source's registry.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Bundles kept under the root: the newest N, and never fewer than current and previous.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub keep: u16,
    /// Apply a lower version than this node has already activated (logged and recorded).
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Commit even when the new stack validates amber; needs `--reason`.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_amber: bool,
    /// Change packages even when some could not be put back (their before-version is in no
    /// view this root retains); needs `--reason`.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_unrestorable: bool,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub allow_expired: bool,

    /// Why the acceptance holds here (a documented exception, a ticket); the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "acceptance")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub amber: AmberArgs,
    /// Verify and say what would change (with apt's own simulation); change nothing. From a
    /// mirror only the package indexes are fetched, no package.
    #[arg(long, conflicts_with = "download_only")]
    pub dry_run: bool,
    /// A mirror's release by version or bundle id (its `releases/VERSION|ID/`), instead of its
    /// current: a canary takes the candidate while the mirror's current stays the qualified one.
    #[arg(long, value_name = "VERSION|ID", value_parser = parse_release)]
    pub release: Option<crate::site::mirror::Release>,
    /// Fetch and verify the release's packages into `ROOT/downloads/` ahead of the maintenance
    /// window (no package manager call, nothing activated; recorded as staged): the later apply
    /// of that release fetches nothing.
    #[arg(long)]
    pub download_only: bool,
    /// Adopt the stack this node already runs: verify the bundle (a baseline from `airlock
    /// freeze`), check that every package it pins is installed at exactly that version (exit 3
    /// naming each difference, nothing changed), then retain it as the node's current bundle
    /// without calling the package manager or judging the stack. Later releases restore those
    /// packages from it.
    #[arg(long, conflicts_with_all = ["dry_run", "download_only"])]
    pub adopt: bool,
    /// Leave a node that already runs this bundle as it is when none of its packages would
    /// change: exit 0 with `unchanged` in `--json`, no record, nothing validated (what a
    /// configuration tool's re-run wants). Without it, applying the current bundle again
    /// validates the stack again, on record.
    #[arg(long, conflicts_with_all = ["download_only", "adopt"])]
    pub unless_current: bool,
    /// Let a mirror (`http(s)://…`) redirect to this other host (`HOST` or `HOST:PORT`); again
    /// for more. Without it a mirror's redirects stay on its own origin.
    #[arg(long, value_name = "HOST")]
    pub allow_redirect_host: Vec<String>,
    /// Seconds to wait for the dpkg lock held by another package manager.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::site::packages::DEFAULT_LOCK_TIMEOUT)]
    pub lock_timeout: u64,
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

/// The rollout run a command that writes a record belongs to.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The rollout run this action is part of, kept in its record (`airlock report --fleet
    /// DIR --run ID` judges one run); the Ansible collection passes its own.
    #[arg(long = "run-id", value_name = "ID", env = "AIRLOCK_RUN_ID")]
    pub id: Option<crate::site::records::RunId>,
}

/// How a command shares the site root: `install`, `rollback`, `validate` and `check` take its lock.
#[derive(Debug, Args)]
pub struct SiteArgs {
    /// Wait up to SECONDS for another airlock writing this root, instead of failing at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Verify the retained bundle with these keys [default: the keys it was installed with].
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Sign the restaged apt view with this armored `OpenPGP` secret key, as at install.
    #[arg(long, value_name = "KEY.asc")]
    pub apt_signing_key: Option<PathBuf>,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Why the expired metadata or bundle is acceptable here; the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "allow_expired")]
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

#[derive(Debug, Args)]
pub struct RebuildArgs {
    /// The bundle to rebuild and, when the rebuild is the same, co-sign.
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// The spec it was built from (its sha256 must be the one the bundle's manifest names).
    #[arg(long, default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// The lock [default: `airlock.lock` beside the spec]; never resolved again.
    #[arg(long)]
    pub lock: Option<PathBuf>,
    /// The rebuilder's private key: what the co-signature is made with.
    #[arg(long)]
    pub key: PathBuf,
    /// The site trust root the bundle carries (`build --trust-root`), when it carries one.
    #[arg(long, value_name = "DIR")]
    pub trust_root: Option<PathBuf>,
    /// The `CycloneDX` version the bundle's SBOM was written in.
    #[arg(long, value_name = "1.5|1.6", default_value = "1.5")]
    pub sbom_spec: crate::attest::sbom::SbomSpec,
    /// Keep the rebuilt bundle here (by default it is removed once compared).
    #[arg(long, value_name = "FILE")]
    pub keep: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
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

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Compare with an earlier record (`airlock probe --json > OLD.json`), field by field.
    #[arg(long, value_name = "OLD.json")]
    pub diff: Option<PathBuf>,
    /// Compare the installed packages of two nodes' records (`airlock probe --json`), this host
    /// not probed: exit 0 when they run the same set (one baseline per tuple is enough), 10
    /// when they differ.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"], conflicts_with = "diff")]
    pub inventory_diff: Vec<PathBuf>,
    /// A site root: the packages its active bundle carries are listed too, whatever their names.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A Python environment whose packages are listed (`pip list`); again for more. Also
    /// `AIRLOCK_PROBE_VENVS` (paths separated by `:`), which install and apply read too.
    #[arg(long, value_name = "DIR")]
    pub venv: Vec<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct ValidateArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// After the reboot an `apply` waited for (exit 5): judge the stack now running and
    /// commit the bundle, or put the host's packages back (exit 4).
    #[arg(long)]
    pub commit: bool,
    /// Measure the current stack's metrics (the checks of the active bundle that declare
    /// `[[validation.check.metric]]`) and keep them as `ROOT/baseline.json`: the current side
    /// `install` compares the candidate with.
    #[arg(long, conflicts_with = "commit")]
    pub baseline: bool,
    /// For Node Health Check and Slurm's `HealthCheckProgram`: one line on stdout (`airlock:
    /// green …`, `airlock: red NAME VERSION (bundles/ID) record FILE: SUMMARY`) and exit 0 healthy, 1 red or not
    /// judgeable; the line is the node's drain reason (docs/fleet.md, "Slurm").
    #[arg(long, conflicts_with_all = ["commit", "baseline", "json"])]
    pub nhc: bool,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    #[command(flatten)]
    pub site: SiteArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// With `--json`: also the records this run wrote (`run_records`: file name → its exact
    /// text), what a rollout's evidence gathers from each node in the same call.
    #[arg(long, value_name = "ID", requires = "json")]
    pub run: Option<crate::site::records::RunId>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Draws progress on stderr when stderr is a terminal (a total bar per phase, and a bar per
/// item in flight, such as each blob being downloaded); silent otherwise.
pub struct TerminalReporter {
    enabled: bool,
    multi: MultiProgress,
    bar: RefCell<Option<ProgressBar>>,
    items: RefCell<HashMap<String, ProgressBar>>,
}

impl TerminalReporter {
    pub fn new(json: bool) -> Self {
        Self {
            enabled: !json && std::io::stderr().is_terminal(),
            multi: MultiProgress::new(),
            bar: RefCell::new(None),
            items: RefCell::new(HashMap::new()),
        }
    }

    fn style(template: &str) -> ProgressStyle {
        ProgressStyle::with_template(template)
            .map_or_else(|_| ProgressStyle::default_bar(), |s| s.progress_chars("=> "))
    }
}

/// A phase that ended in an error never said `finish`: its bar is cleared, not left behind.
impl Drop for TerminalReporter {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.get_mut().take() {
            bar.finish_and_clear();
        }
        for (_, bar) in self.items.get_mut().drain() {
            bar.finish_and_clear();
        }
    }
}

impl Reporter for TerminalReporter {
    fn start(&self, phase: &str, total_bytes: u64) {
        // Nothing to show for nothing to move (a files-only lock fetches 0 bytes).
        if !self.enabled || total_bytes == 0 {
            return;
        }
        let bar = ProgressBar::new(total_bytes);
        let style =
            ProgressStyle::with_template("{msg:>10} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                .map_or_else(|_| ProgressStyle::default_bar(), |s| s.progress_chars("=> "));
        bar.set_style(style);
        bar.set_message(phase.to_owned());
        *self.bar.borrow_mut() = Some(bar);
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar.borrow().as_ref() {
            bar.inc(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            // A phase that finished is whole, whatever its estimate counted.
            bar.set_position(bar.length().unwrap_or(0));
            bar.finish_and_clear();
        }
    }

    fn item_start(&self, key: &str, total_bytes: u64) {
        if !self.enabled || total_bytes == 0 {
            return;
        }
        let bar = self.multi.add(ProgressBar::new(total_bytes));
        bar.set_style(Self::style("  {msg:>20} [{bar:30}] {bytes}/{total_bytes}"));
        bar.set_message(key.to_owned());
        self.items.borrow_mut().insert(key.to_owned(), bar);
    }

    fn item_advance(&self, key: &str, bytes: u64) {
        if let Some(bar) = self.items.borrow().get(key) {
            bar.inc(bytes);
        }
    }

    fn item_finish(&self, key: &str) {
        if let Some(bar) = self.items.borrow_mut().remove(key) {
            bar.finish_and_clear();
        }
    }
}

/// What a word is, for its colour: cargo's colours (`error:` and failures red, success green,
/// warnings yellow), for a person at a terminal only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Bad,
    Good,
    Warn,
}

/// Which stream a word is written to: colour depends on that stream being a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether `stream` gets colour: a terminal, and no `NO_COLOR` (no-color.org).
pub fn colour_on(stream: Stream) -> bool {
    use std::io::IsTerminal as _;
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `word` in its colour when `stream` gets colour, else as it is.
pub fn paint(word: &str, paint: Paint, stream: Stream) -> String {
    if !colour_on(stream) {
        return word.to_owned();
    }
    let code = match paint {
        Paint::Bad => "1;31",
        Paint::Good => "1;32",
        Paint::Warn => "1;33",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

/// A validation verdict's word in its colour.
pub fn paint_verdict(verdict: crate::validate::matrix::Verdict, stream: Stream) -> String {
    use crate::validate::matrix::Verdict;
    let how = match verdict {
        Verdict::Green => Paint::Good,
        Verdict::Amber => Paint::Warn,
        Verdict::Red => Paint::Bad,
    };
    paint(crate::validate::word(verdict), how, stream)
}

/// A validation summary (`green: amd 0 … matches row …`) for a terminal: its verdict word in
/// colour, the rest (tools' words: untrusted) escaped.
pub fn painted_summary(evidence: &crate::validate::Evidence, stream: Stream) -> String {
    let word = crate::validate::word(evidence.verdict);
    let rest = evidence.summary.strip_prefix(word).unwrap_or(&evidence.summary);
    format!("{}{}", paint_verdict(evidence.verdict, stream), crate::escape::value(rest))
}

/// Who owns an amber acceptance and until when (`status`, `report` and `outdated --root` flag
/// it once expired).
#[derive(Debug, Clone, Args)]
pub struct AmberArgs {
    /// The person or team accepting the amber verdict; the record keeps it.
    #[arg(long, value_name = "NAME", requires = "accept_amber")]
    pub owner: Option<String>,
    /// Until when the acceptance holds: a date (`2027-03-31`), an RFC 3339 time, or a duration
    /// from now (`90d`).
    #[arg(long, value_name = "DATE", requires = "accept_amber")]
    pub expires: Option<String>,
}

/// The right flag for a slip clap cannot guess (`install --site`, `verify --key`, `--bundle`,
/// `--out-dir`), for the subcommand that was given: `None` where clap's own tip stands.
pub fn slip_hint(e: &clap::Error) -> Option<String> {
    use clap::CommandFactory as _;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(given)) = e.get(ContextKind::InvalidArg) else { return None };
    let flag = given.split('=').next().unwrap_or(given).trim_start_matches('-');
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = Cli::command();
    let sub = args.iter().find_map(|a| command.find_subcommand(a))?;
    let has = |long: &str| sub.get_arguments().any(|a| a.get_long() == Some(long));
    let name = sub.get_name();
    match flag {
        "site" | "site-root" | "dir" if has("root") => {
            Some(format!("the site is `--root DIR` (`airlock {name} … --root /srv/airlock`)"))
        }
        "key" | "pubkey" | "public-key" | "trusted-key" if has("trust") => {
            let site = if has("root") { "; a site root's own trust needs none" } else { "" };
            Some(format!(
                "the key a bundle is checked with is `--trust KEY.pub` (`airlock {name} … --trust KEY.pub`){site}"
            ))
        }
        "bundle" | "file" => {
            let positional = sub.get_positionals().next().map(|a| a.get_id().as_str().to_uppercase())?;
            Some(format!(
                "the {} is the first argument, without a flag: `airlock {name} {positional} …`",
                positional.to_lowercase()
            ))
        }
        "out-dir" | "output" | "output-dir" if has("out") => {
            Some(format!("the output is `--out PATH` (`airlock {name} … --out PATH`)"))
        }
        _ => None,
    }
}
