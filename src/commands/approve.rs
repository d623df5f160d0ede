//! `airlock approve --fleet DIR --run ID --key KEY [--approver NAME] [--out FILE]`, `airlock
//! approve --add-to FILE --key KEY [--fleet DIR]` and `airlock verify-approval FILE --root DIR
//! [--evidence DIR]`: the signed decision a run's canaries support (`approval`).

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::approval::{self, ApprovalError, Statement};
use crate::cli::{ApproveArgs, VerifyApprovalArgs};
use crate::failure::{Exit, Result};

/// What `approve` and `verify-approval` print with `--json`.
#[derive(Serialize)]
struct Shown<'a> {
    approval: &'a Path,
    sha256: String,
    bundle: &'a approval::decision::DecidedBundle,
    run: &'a str,
    canaries: usize,
    tuples: Vec<&'a str>,
    exceptions: usize,
    /// Key ids whose signature is on it (`approve`) or counted (`verify-approval`).
    signers: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    need: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    records_checked: Option<usize>,
}

pub fn run(args: &ApproveArgs) -> Result<Exit> {
    let key = crate::sign::SigningKey::load(&args.key, super::key_password().as_deref())?;
    let (path, statement, bytes) = if let Some(path) = &args.add_to {
        let old = read(path)?;
        let (statement, bytes) = approval::cosign(path, &old, &key)?;
        if let Some(dir) = &args.fleet {
            approval::check_evidence(&statement, dir)?;
        }
        (path.clone(), statement, bytes)
    } else {
        let (Some(dir), Some(run)) = (&args.fleet, &args.run) else {
            return Err(super::UsageError("approve takes --fleet DIR --run ID, or --add-to FILE".into()).into());
        };
        let now = crate::clock::Timestamp::started();
        let statement = approval::decide(dir, run, args.approver.clone(), now)?;
        let path = args.out.clone().unwrap_or_else(|| dir.join("runs").join(run.as_str()).join("approval.dsse.json"));
        let bytes = approval::seal(&statement, &key);
        (path, statement, bytes)
    };
    crate::atomic::write_durable(&path, &bytes).map_err(|source| ApprovalError::Io { path: path.clone(), source })?;
    let signers = crate::sign::dsse::named_keyids(&bytes).unwrap_or_default();
    let shown = shown(&path, &bytes, &statement, signers, None, None);
    if args.json {
        super::print_json(&shown)?;
        return Ok(Exit::Ok);
    }
    print(&shown, "signed by")?;
    writeln!(
        std::io::stdout(),
        "another approver co-signs it with `airlock approve --add-to {} --key KEY`; check it with `airlock \
         verify-approval {} --root SITE`",
        path.display(),
        path.display()
    )?;
    Ok(Exit::Ok)
}

pub fn verify(args: &VerifyApprovalArgs) -> Result<Exit> {
    let trust = crate::trust::SiteTrust::load(&args.root)?;
    let role = trust.decision_role(crate::trust::APPROVERS_ROLE).ok_or_else(|| ApprovalError::NoApprovers {
        dir: trust.dir.clone(),
        what: "nothing to verify an approval against".into(),
    })?;
    let bytes = read(&args.approval)?;
    let verified = approval::verify(&args.approval, &bytes, &role)?;
    let checked = args.evidence.as_deref().map(|dir| approval::check_evidence(&verified.statement, dir)).transpose()?;
    let signers = verified.signers.iter().map(ToString::to_string).collect();
    let shown = shown(&args.approval, &bytes, &verified.statement, signers, Some(verified.need), checked);
    if args.json {
        super::print_json(&shown)?;
        return Ok(Exit::Ok);
    }
    print(&shown, "verified: approved by")?;
    Ok(Exit::Ok)
}

fn read(path: &Path) -> Result<Vec<u8>, ApprovalError> {
    approval::read(path, approval::MAX_APPROVAL_BYTES)?
        .ok_or_else(|| ApprovalError::Format { path: path.to_owned(), detail: "no such file".into() })
}

fn shown<'a>(
    path: &'a Path,
    bytes: &[u8],
    statement: &'a Statement,
    signers: Vec<String>,
    need: Option<usize>,
    records_checked: Option<usize>,
) -> Shown<'a> {
    let d = &statement.predicate.decision;
    Shown {
        approval: path,
        sha256: crate::digest::Sha256::of_bytes(bytes).to_string(),
        bundle: &d.bundle,
        run: &d.run,
        canaries: d.tuples.iter().map(|t| t.canaries.len()).sum(),
        tuples: d.tuples.iter().map(|t| t.tuple.as_str()).collect(),
        exceptions: d.exceptions.len(),
        signers,
        need,
        records_checked,
    }
}

fn print(s: &Shown<'_>, signed: &str) -> Result<()> {
    use crate::escape::value;
    let mut out = std::io::stdout().lock();
    let b = s.bundle;
    writeln!(
        out,
        "approval of {} {} ({}) on run {}: {} canar{} on {} tuple(s) ({}), {} amber exception(s)",
        value(&b.name),
        value(&b.version),
        value(&b.id),
        value(s.run),
        s.canaries,
        if s.canaries == 1 { "y" } else { "ies" },
        s.tuples.len(),
        s.tuples.iter().map(|t| value(t).to_string()).collect::<Vec<_>>().join(", "),
        s.exceptions
    )?;
    let short: Vec<&str> = s.signers.iter().map(|k| k.get(..16).unwrap_or(k)).collect();
    let need = s.need.map(|n| format!(" ({n} needed)")).unwrap_or_default();
    writeln!(out, "{signed} {}{need}: {} (sha256 {})", short.join(", "), s.approval.display(), s.sha256)?;
    if let Some(n) = s.records_checked {
        writeln!(out, "{n} record(s) checked against the evidence: each unchanged")?;
    }
    Ok(())
}
