//! `airlock install URL --role relay --root DIR [--all] [--release VERSION|ID] [--trust PUB …]
//! [--keep N] [--json]`: a mirror fed from another mirror's public tree (`site::relay`).

use std::io::Write;

use crate::cli::InstallArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;
use crate::site::mirror::is_mirror;
use crate::site::records::Action;
use crate::site::state::Kept;
use crate::site::trust::ExpiryRule;
use crate::site::{Downgrade, Options, RelayOptions, Role, relay};

pub fn run(args: &InstallArgs) -> Result<Exit> {
    if args.candidate {
        let why = "--candidate is a mirror's: a relay keeps an upstream's candidate with --release VERSION|ID";
        return Err(super::UsageError(why.to_owned()).into());
    }
    let Some(source) = args.bundle.to_str().filter(|s| is_mirror(s)) else {
        return Err(super::UsageError(format!(
            "a relay follows a mirror's public tree: name it as http(s)://HOST/PATH/ or file:///PATH/, not `{}`",
            args.bundle.display()
        ))
        .into());
    };
    if args.registry.is_some() {
        let why = "--registry is a mirror's: a relay serves files; its nodes pull images from the site registry";
        return Err(super::UsageError(why.to_owned()).into());
    }
    let redirects = crate::fetch::Redirects::SameOrigin { also: args.allow_redirect_host.clone() };
    let net = std::sync::Arc::new(Net::for_mirror(args.net.options(), redirects)?);
    let expiry = ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let release = args.release.clone().unwrap_or_default();
    let wait = std::time::Duration::from_secs(args.site.wait);
    // The upstream's current bundle brings its trust metadata, adopted as a node adopts it.
    let carried = || {
        let Ok(have) = crate::trust::SiteTrust::load(&args.root) else { return Vec::new() };
        crate::site::mirror::carried_trust(source, &release, &have.root, &net).unwrap_or_else(|e| {
            tracing::warn!("cannot read the trust metadata of the upstream's release: {e}");
            Vec::new()
        })
    };
    let policy = super::site_policy(&args.root, &args.trust, Vec::new(), carried, &expiry, wait, super::Writes::Yes);
    if let Err(e) = &policy {
        super::record_early(&args.root, Action::Install, &args.bundle, args.run.id.as_ref(), e);
    }
    let policy = policy?;
    // Under a site trust root with a `promotion` role, `current` is followed only as it signs.
    let promotion = if args.trust.trust.is_empty() {
        crate::trust::SiteTrust::load(&args.root).ok().and_then(|t| t.decision_role(crate::trust::PROMOTION_ROLE))
    } else {
        None
    };
    let opts = RelayOptions {
        release,
        kept: if args.all { Kept::All } else { Kept::Relay },
        promotion,
        site: Options {
            role: Role::Mirror,
            apt_key: args.apt_signing_key.as_deref().map(super::install::load_apt_key).transpose()?,
            keep: usize::from(args.kept()),
            downgrade: if args.allow_downgrade { Downgrade::Allow } else { Downgrade::Refuse },
            wait,
            expiry,
            run: args.run.id.clone(),
            ..Options::default()
        },
    };
    let reporter = TerminalReporter::new(args.json);
    let done = relay(source, &policy, &args.root, &opts, &net, &reporter)?;
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    print(&done)?;
    Ok(Exit::Ok)
}

fn print(done: &crate::site::Relayed) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let what = format!("{} {} ({})", done.name, done.version, done.id);
    let part = match done.kept {
        Kept::All => "every member",
        Kept::Relay | Kept::Packages => "packages and trust metadata",
    };
    if done.up_to_date {
        let at = if done.candidate { "retained here" } else { "current here" };
        writeln!(out, "up to date: {what}, what {} serves, is {at} (nothing fetched)", done.upstream)?;
    } else {
        let (f, r) = (done.transfer.fetched, done.transfer.reused);
        writeln!(out, "relayed {what} from {} ({part})", done.upstream)?;
        writeln!(
            out,
            "{} file(s) fetched ({}), {} taken from what this relay holds ({}), each verified",
            f.files,
            super::size(f.bytes),
            r.files,
            super::size(r.bytes)
        )?;
    }
    if let Some(n) = done.promotion {
        writeln!(out, "serving the upstream's signed promotion {n}")?;
    }
    if done.candidate {
        writeln!(out, "kept as a candidate: served as public/releases/{} and /{}", done.version, done.id)?;
    } else if !done.up_to_date {
        let previous = done.previous.as_ref().map_or_else(String::new, |p| format!(" (was {p})"));
        writeln!(out, "current -> bundles/{}{previous}", done.id)?;
    }
    for id in &done.pruned {
        writeln!(out, "pruned bundles/{id}")?;
    }
    if let Some(record) = &done.record {
        writeln!(out, "record: {}", record.display())?;
    }
    Ok(())
}
