//! `airlock rollback --root DIR [--trust PUB … [--threshold N]] [--wait SECONDS] [--json]`;
//! `airlock promote --root MIRROR VERSION|ID [--allow-downgrade] [--json]`, the same switch to
//! a mirror's retained release.

use std::io::Write;

use crate::cli::RollbackArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;
use crate::sign::KeyId;
use crate::site::rollback::{RolledBack, Switch, Trust, rollback, switch};

pub fn run(args: &RollbackArgs) -> Result<Exit> {
    let expiry = crate::site::trust::ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let trust = if args.trust.trust.is_empty() {
        Trust::Site(expiry.clone())
    } else {
        let keys = super::load_trusted(&args.trust.trust)?;
        Trust::Given { keys, threshold: usize::try_from(args.trust.threshold).unwrap_or(usize::MAX) }
    };
    let apt_key = args.apt_signing_key.as_deref().map(super::install::load_apt_key).transpose()?;
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.net.options())?;
    let writer = crate::site::Writer { wait: std::time::Duration::from_secs(args.site.wait), run: args.run.id.clone() };
    let done = rollback(&args.root, trust, &expiry, apt_key.as_ref(), &writer, &net, &reporter)?;
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    print("rolled back to", &done)
}

pub fn promote(args: &crate::cli::PromoteArgs) -> Result<Exit> {
    if args.reason.is_some() && !args.allow_expired && !args.without_approval {
        return Err(super::UsageError("--reason goes with --allow-expired or --without-approval".into()).into());
    }
    let expiry = crate::site::trust::ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.net.options())?;
    let writer = crate::site::Writer { wait: std::time::Duration::from_secs(args.site.wait), run: args.run.id.clone() };
    let downgrade = if args.allow_downgrade { crate::site::Downgrade::Allow } else { crate::site::Downgrade::Refuse };
    let site_trust =
        crate::trust::SiteTrust::exists(&args.root).then(|| crate::trust::SiteTrust::load(&args.root)).transpose()?;
    let signing = signing(args, site_trust.as_ref())?;
    let Some(release) = args.release.clone() else {
        let signing = signing.ok_or_else(|| {
            super::UsageError(
                "--renew re-signs a signed promotion: the site's trust root has no `promotion` role".into(),
            )
        })?;
        let renewed = crate::site::promotion::renew(&args.root, &signing, writer.wait)?;
        if args.json {
            super::print_json(&renewed)?;
        } else {
            writeln!(
                std::io::stdout(),
                "promotion {} of {} {} ({}) signed again, expires {}",
                renewed.number,
                renewed.bundle.name,
                renewed.bundle.version,
                renewed.bundle.id,
                renewed.expires
            )?;
        }
        return Ok(Exit::Ok);
    };
    let decided = decided(args, site_trust.as_ref(), &release)?;
    if already(args, &release, &decided, signing.as_ref())? {
        return Ok(Exit::Ok);
    }
    let to = Switch::Promote { release, downgrade, decided: Box::new(decided), signing };
    let apt_key = args.apt_signing_key.as_deref().map(super::install::load_apt_key).transpose()?;
    let trust = Trust::Site(expiry.clone());
    let done = switch(&args.root, &to, trust, &expiry, apt_key.as_ref(), &writer, &net, &reporter)?;
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    print("promoted", &done)
}

/// The release current already: nothing to switch, said so (`true`), unless the approval given
/// is for another bundle (the switch refuses it, naming both), or the site signs promotions and
/// its promotion does not name it yet (promoting it again is how it gets one).
fn already(
    args: &crate::cli::PromoteArgs,
    release: &str,
    decided: &crate::site::promotion::Decided,
    signing: Option<&crate::site::promotion::Signing>,
) -> Result<bool> {
    let Some((id, name, version)) = crate::site::rollback::already_current(&args.root, release) else {
        return Ok(false);
    };
    if let crate::site::promotion::Decided::Approved { manifest_sha256, .. } = decided
        && crate::site::BundleId::of(manifest_sha256) != id
    {
        return Ok(false);
    }
    let promoted = crate::site::promotion::current(&args.root.join("public")).map(|p| p.bundle.id);
    if signing.is_some() && promoted.as_ref() != Some(&id) {
        return Ok(false);
    }
    if args.json {
        super::print_json(&serde_json::json!({ "already_current": true, "id": id, "name": name, "version": version }))?;
    } else {
        writeln!(
            std::io::stdout(),
            "{name} {version} (bundles/{id}) is the mirror's current already: nothing changed"
        )?;
    }
    Ok(true)
}

/// What the promotion rests on: an approval verified under the site's `approvers` role, the
/// recorded exception, or nothing on a site without the role (said so).
fn decided(
    args: &crate::cli::PromoteArgs,
    trust: Option<&crate::trust::SiteTrust>,
    release: &str,
) -> Result<crate::site::promotion::Decided> {
    use crate::site::promotion::{ApprovedBy, Decided, PromotionError};
    let approvers = trust.and_then(|t| t.decision_role(crate::trust::APPROVERS_ROLE));
    Ok(match (&args.approval, &approvers) {
        (Some(path), Some(role)) => {
            let bytes = crate::approval::read(path, crate::approval::MAX_APPROVAL_BYTES)?.ok_or_else(|| {
                crate::approval::ApprovalError::Format { path: path.clone(), detail: "no such file".into() }
            })?;
            let approval = crate::approval::verify(path, &bytes, role)?;
            let d = &approval.statement.predicate.decision;
            Decided::Approved {
                by: ApprovedBy { sha256: approval.sha256, run: d.run.clone(), approvers: approval.signers.clone() },
                manifest_sha256: d.bundle.manifest_sha256,
                label: format!("{} {} ({})", d.bundle.name, d.bundle.version, d.bundle.id),
                path: path.clone(),
                bytes,
            }
        }
        (Some(_), None) => {
            return Err(crate::approval::ApprovalError::NoApprovers {
                dir: args.root.join(crate::trust::TRUST_DIR),
                what: "an approval cannot be checked against it; add one with `airlock trust role --role \
                       approvers=A.pub,B.pub:2`"
                    .into(),
            }
            .into());
        }
        (None, _) if args.without_approval => Decided::Without { reason: args.reason.clone().unwrap_or_default() },
        (None, Some(_)) => return Err(PromotionError::NeedsApproval { release: release.to_owned() }.into()),
        (None, None) => {
            tracing::warn!("the site's trust root has no approvers role: the promotion rests on no approval");
            Decided::NoRole
        }
    })
}

/// The site's `promotion` role and the keys that sign for it (`--sign`), when it has one.
fn signing(
    args: &crate::cli::PromoteArgs,
    trust: Option<&crate::trust::SiteTrust>,
) -> Result<Option<crate::site::promotion::Signing>> {
    let role = trust.and_then(|t| t.decision_role(crate::trust::PROMOTION_ROLE));
    let Some(role) = role else {
        if !args.sign.is_empty() {
            return Err(super::UsageError(
                "--sign signs the site's promotions, and its trust root has no `promotion` role".into(),
            )
            .into());
        }
        tracing::warn!("the site's trust root has no promotion role: nodes follow `current` unsigned");
        return Ok(None);
    };
    if args.sign.is_empty() {
        return Err(super::UsageError(
            "the site's trust root has a `promotion` role: sign the promotion with --sign KEY (its private key)".into(),
        )
        .into());
    }
    let password = super::key_password();
    let keys = args
        .sign
        .iter()
        .map(|p| crate::sign::SigningKey::load(p, password.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let now = crate::clock::Timestamp::started();
    let expires = crate::clock::Timestamp::parse_expires_after(&args.promotion_expires, now)
        .map_err(|e| super::UsageError(format!("--promotion-expires: {e}")))?;
    Ok(Some(crate::site::promotion::Signing { role, keys, expires }))
}

fn print(verb: &str, done: &RolledBack) -> Result<Exit> {
    let mut out = std::io::stdout().lock();
    let signers: Vec<_> = done.signers.iter().map(KeyId::short).collect();
    writeln!(
        out,
        "{verb} {} {} (bundles/{}), verified, signed by {}",
        done.name,
        done.version,
        done.id,
        signers.join(", ")
    )?;
    for image in &done.images {
        writeln!(out, "republished {} -> {} (sha256:{})", image.reference, image.target, image.digest.0)?;
    }
    writeln!(
        out,
        "current -> bundles/{}{} in {:.2} s; record {}",
        done.id,
        done.from.as_ref().map(|p| format!(" (was bundles/{p})")).unwrap_or_default(),
        done.seconds,
        done.record.display()
    )?;
    if let Some(line) = super::apply::phases(&done.phases) {
        writeln!(out, "{line}")?;
    }
    Ok(Exit::Ok)
}
