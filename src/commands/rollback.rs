//! `airlock rollback --root DIR [--trust PUB … [--threshold N]] [--wait SECONDS] [--json]`;
//! `airlock promote --root MIRROR VERSION|ID [--allow-downgrade] [--json]`, the same switch to
//! a mirror's retained release.

use crate::failure::Exit;
use std::io::Write;

use crate::cli::{RollbackArgs, TerminalReporter};
use crate::fetch::Net;
use crate::sign::KeyId;
use crate::site::rollback::{RolledBack, Switch, Trust, rollback, switch};

pub fn run(args: &RollbackArgs) -> anyhow::Result<Exit> {
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

pub fn promote(args: &crate::cli::PromoteArgs) -> anyhow::Result<Exit> {
    let expiry = crate::site::trust::ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.net.options())?;
    let writer = crate::site::Writer { wait: std::time::Duration::from_secs(args.site.wait), run: args.run.id.clone() };
    let downgrade = if args.allow_downgrade { crate::site::Downgrade::Allow } else { crate::site::Downgrade::Refuse };
    let to = Switch::Promote { release: args.release.clone(), downgrade };
    let apt_key = args.apt_signing_key.as_deref().map(super::install::load_apt_key).transpose()?;
    let trust = Trust::Site(expiry.clone());
    let done = switch(&args.root, &to, trust, &expiry, apt_key.as_ref(), &writer, &net, &reporter)?;
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    print("promoted", &done)
}

fn print(verb: &str, done: &RolledBack) -> anyhow::Result<Exit> {
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
