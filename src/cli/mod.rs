//! Command-line arguments (clap derive, no I/O), one file per group of verbs; what they print
//! is `commands::terminal`'s.

mod build;
mod fleet;
mod oci;
mod shared;
mod site;
mod trust;

pub use build::*;
pub use fleet::*;
pub use oci::*;
pub use shared::*;
pub use site::*;
pub use trust::*;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
