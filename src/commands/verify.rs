//! `airlock verify BUNDLE --trust PUB [--trust PUB…] [--threshold N] [--json]`

use std::io::Write;

use serde::Serialize;

use super::ReadError;
use super::VerificationFailed;
use crate::bundle::manifest::{BaseRef, SBOM, SIGNATURE};
use crate::bundle::parts::{Input, PartsError};
use crate::bundle::reader::{OnProblem, Problem, Rejection, Report};
use crate::cli::VerifyArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Classify, Exit, Result};
use crate::sign::KeyId;
use crate::sign::policy::{GIVEN_ROLE, Outcome, SignatureCheck, Source};
use crate::site::trust::ExpiryRule;

/// `2 of 2 required`, or `required: build 1 of 1, security 1 of 2`.
fn required(policy: &crate::sign::Policy, signers: usize) -> String {
    match policy.rules.as_slice() {
        [rule] if rule.role == GIVEN_ROLE => format!("{signers} of {} required", rule.threshold),
        _ => format!("required: {}", policy.describe()),
    }
}

/// One signature in `--json`: where it came from, which key, and how it fared.
#[derive(Serialize)]
struct SignatureJson<'a> {
    /// `airlock/manifest.json.sig` for the embedded signature, else the co-signature's path.
    source: String,
    key_id: Option<&'a KeyId>,
    #[serde(flatten)]
    outcome: &'a Outcome,
}

impl<'a> From<&'a SignatureCheck> for SignatureJson<'a> {
    fn from(c: &'a SignatureCheck) -> Self {
        let source = match &c.source {
            Source::Embedded => SIGNATURE.to_owned(),
            Source::CoSignature(path) => path.display().to_string(),
        };
        Self { source, key_id: c.key_id.as_ref(), outcome: &c.outcome }
    }
}

#[derive(Serialize)]
struct VerifyJson<'a> {
    verified: bool,
    name: Option<String>,
    version: Option<String>,
    manifest_sha256: Option<String>,
    /// Distinct trusted keys with a valid signature (embedded or co-signature).
    signers: &'a [KeyId],
    /// Distinct signers needed at the least (`--threshold`, or the largest role's).
    threshold: usize,
    /// Every rule the signers had to meet: `trusted` for `--trust`, else the site's signing roles.
    required: &'a [crate::sign::policy::Rule],
    /// The site trust root's metadata versions (`--root`).
    #[serde(skip_serializing_if = "Option::is_none")]
    trust_root: Option<crate::sign::policy::Origin>,
    /// The bundle's `expires`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires: Option<String>,
    /// Expired metadata or an expired bundle accepted with `--allow-expired --reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    expired_accepted: Option<&'a crate::sign::policy::Waiver>,
    /// Members read and verified (the entries, manifest, signature and provenance).
    members: usize,
    /// Every signature considered, with `status` `valid`, `untrusted` or `invalid`.
    signatures: Vec<SignatureJson<'a>>,
    entries: usize,
    /// `{sha256, verified}` for the SBOM the manifest lists, or null when it lists none.
    sbom: Option<serde_json::Value>,
    /// `{verified, signers}` for the DSSE provenance, or null when the bundle has none.
    provenance: Option<serde_json::Value>,
    /// Upstream Sigstore signatures the manifest records, each verified again here.
    upstream_signatures: &'a [crate::bundle::reader::UpstreamCheck],
    problems: &'a [Problem],
    /// `{file, count, bytes, signed_by}` for a split bundle, read from its parts.
    parts: Option<serde_json::Value>,
    /// A delta's base (its `from_base` entries are not in this bundle; install takes them from it).
    base: Option<&'a BaseRef>,
    from_base: Option<usize>,
}

/// Read the bundle, keeping nothing (`super::verify_discarding`). A split bundle's parts file
/// is checked against the manifest; the key that signed it, if any.
fn read(
    input: &Input,
    policy: &crate::sign::Policy,
    reporter: &TerminalReporter,
) -> Result<(Report, Option<KeyId>), ReadError> {
    let (mut report, signer) = super::verify_discarding(input, policy, OnProblem::Continue, reporter)?;
    if let Some(split) = input.split() {
        let refused = |e: PartsError| Problem { member: None, reason: Rejection::Parts(e.to_string()) };
        if let Some(sha256) = report.manifest_sha256
            && let Err(e) = split.check_manifest(&sha256)
        {
            report.problems.push(refused(e));
        }
        split.name_damage(&mut report.problems);
    }
    Ok((report, signer))
}

pub fn run(args: &VerifyArgs) -> Result<Exit> {
    let input = Input::resolve(&args.bundle)?;
    let rule = ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let mut policy = match &args.root {
        // A site's trust root, read as it stands (nothing adopted: verify changes nothing).
        Some(root) => {
            let site = crate::site::root::SiteRoot::new(root);
            let state = crate::site::state::State::load(&site)?;
            let cosignatures = super::cosignatures_beside(input.bundle());
            crate::site::trust::policy(&site, &state, cosignatures, &rule)?
                .ok_or_else(|| crate::trust::TrustError::Missing { dir: root.join(crate::trust::TRUST_DIR) })?
        }
        None => super::load_policy(&args.trust, input.bundle())?,
    };
    if args.root.is_some() {
        policy = super::with_trusted_root(policy, &args.trust)?;
    }
    let reporter = TerminalReporter::new(args.json);
    let (mut report, parts_signer) = match read(&input, &policy, &reporter) {
        Ok(read) => read,
        // A part missing, damaged or unsigned is the bundle's failure, reported like others.
        Err(ReadError::Parts(e)) if e.class() == Class::Verification => {
            let refused = Problem { member: None, reason: Rejection::Parts(e.to_string()) };
            (Report { problems: vec![refused], ..Report::default() }, None)
        }
        Err(e) => return Err(e.into()),
    };
    check_expiry(&mut report, &mut policy, &rule);
    let verified = report.verified();
    let manifest = report.manifest.as_ref();
    if args.json {
        super::print_json(&VerifyJson {
            verified,
            name: manifest.map(|m| m.name.to_string()),
            version: manifest.map(|m| m.version.to_string()),
            manifest_sha256: report.manifest_sha256.map(|d| d.to_string()),
            signers: &report.signers,
            threshold: policy.least_signers(),
            required: &policy.rules,
            trust_root: policy.origin,
            expires: manifest.and_then(|m| m.expires).map(|t| t.to_string()),
            expired_accepted: policy.waiver.as_ref(),
            members: members(&report),
            signatures: report.signatures.iter().map(SignatureJson::from).collect(),
            entries: report.entries_verified,
            sbom: sbom_status(&report),
            provenance: report
                .provenance
                .as_ref()
                .map(|signers| serde_json::json!({ "verified": !signers.is_empty(), "signers": signers })),
            upstream_signatures: &report.upstream,
            problems: &report.problems,
            parts: input.split().map(|s| {
                serde_json::json!({
                    "file": s.parts_file, "count": s.doc.parts.len(), "bytes": s.doc.bytes, "signed_by": parts_signer,
                })
            }),
            base: manifest.and_then(|m| m.base.as_ref()),
            from_base: manifest.map(|m| m.entries.iter().filter(|e| e.from_base).count()),
        })?;
    } else {
        print_human(args, &input, &report, &policy)?;
    }
    if verified {
        return Ok(Exit::Ok);
    }
    let n = report.problems.len();
    let failed = VerificationFailed(format!(
        "bundle `{}` failed verification ({n} problem{})",
        input.display(),
        if n == 1 { "" } else { "s" }
    ));
    super::after_document(args.json, failed.into())
}

/// Members read and verified: the entries, the manifest and its signature, the provenance.
fn members(report: &Report) -> usize {
    report.entries_verified + 2 + usize::from(report.provenance.as_ref().is_some_and(|s| !s.is_empty()))
}

/// The listed SBOM's digest, and whether its member matched it.
fn sbom_status(report: &Report) -> Option<serde_json::Value> {
    let entry = report.manifest.as_ref()?.entries.iter().find(|e| e.path.as_str() == SBOM)?;
    let rejected = report.problems.iter().any(|p| p.member.as_deref() == Some(SBOM));
    Some(serde_json::json!({ "sha256": entry.sha256, "verified": !rejected }))
}

/// A bundle past its `expires` is refused like any verification failure, unless accepted.
fn check_expiry(report: &mut Report, policy: &mut crate::sign::Policy, rule: &ExpiryRule) {
    let Some(m) = report.manifest.as_ref().filter(|_| report.verified()) else { return };
    match crate::site::trust::check_bundle_expiry(m, rule) {
        Ok(None) => {}
        Ok(Some(waiver)) => match &mut policy.waiver {
            Some(w) => w.expired.extend(waiver.expired),
            None => policy.waiver = Some(waiver),
        },
        Err(e) => report.problems.push(Problem { member: None, reason: Rejection::Parts(e.to_string()) }),
    }
}

fn print_human(args: &VerifyArgs, input: &Input, report: &Report, policy: &crate::sign::Policy) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for p in &report.problems {
        let rejected = crate::commands::terminal::paint(
            "REJECTED",
            crate::commands::terminal::Paint::Bad,
            crate::commands::terminal::Stream::Stdout,
        );
        writeln!(out, "{rejected} {}", crate::escape::lines(&p.to_string()))?;
    }
    for s in &report.signatures {
        let Source::CoSignature(path) = &s.source else { continue };
        let (path, id) = (path.display(), s.key_id.as_ref().map_or("?", KeyId::short));
        match &s.outcome {
            Outcome::Valid => {}
            Outcome::Untrusted => writeln!(out, "  co-signature {path} by key {id} does not count: not trusted")?,
            Outcome::Invalid { detail } => {
                writeln!(out, "  co-signature {path} does not count: {detail} (stale or tampered)")?;
            }
        }
    }
    let (true, Some(m)) = (report.verified(), report.manifest.as_ref()) else {
        return Ok(());
    };
    let signers: Vec<_> = report.signers.iter().map(KeyId::short).collect();
    writeln!(
        out,
        "verified {} {} {}: {} artifacts in {} members ({} entries), signed by {} ({})",
        args.bundle.display(),
        m.name,
        m.version,
        m.artifacts.len(),
        members(report),
        report.entries_verified,
        signers.join(", "),
        required(policy, signers.len())
    )?;
    if let Some(o) = policy.origin {
        writeln!(
            out,
            "  under the site trust root: root version {}, targets version {}",
            o.root_version, o.targets_version
        )?;
    }
    if let Some(w) = &policy.waiver {
        for e in &w.expired {
            writeln!(out, "  accepted although expired: {e} (--reason {})", crate::escape::value(&w.reason))?;
        }
    }
    if let Some(sbom) = sbom_status(report) {
        writeln!(out, "  sbom {SBOM} sha256:{} verified", sbom["sha256"].as_str().unwrap_or_default())?;
    }
    let provenance = match &report.provenance {
        Some(signers) if !signers.is_empty() => "provenance verified",
        Some(_) => "provenance NOT verified",
        None => "no provenance in the bundle",
    };
    writeln!(out, "  {provenance}")?;
    for u in &report.upstream {
        let logged = u.logged_at.as_deref().map(|t| format!(", logged at {t}")).unwrap_or_default();
        writeln!(out, "  upstream signature of {}: signed by {} ({}){logged}", u.artifact, u.identity, u.issuer)?;
    }
    if let Some(split) = input.split() {
        writeln!(
            out,
            "  read from {} parts listed in {} (signed by a trusted key)",
            split.doc.parts.len(),
            split.parts_file.display()
        )?;
    }
    if let Some(base) = &m.base {
        let left: Vec<_> = m.entries.iter().filter(|e| e.from_base).collect();
        let bytes: u64 = left.iter().map(|e| e.size).sum();
        writeln!(
            out,
            "  delta: {} entries ({bytes} bytes) are not in this bundle but in its base {base}; install takes them from \
             the base retained on the site, verified again",
            left.len()
        )?;
    }
    Ok(())
}
