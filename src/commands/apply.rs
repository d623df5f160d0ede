//! `airlock apply SOURCE --root DIR [--trust PUB … --threshold N] [--accept-amber --reason TEXT]
//! [--accept-unrestorable --reason TEXT] [--dry-run] [--json]`: a node installs a bundle's
//! packages, validates the new stack, and commits or restores (exit 4), or waits for a
//! reboot (exit 5).

use std::io::Write;

use super::install::{Opened, Source, WithReferrers};
use crate::cli::ApplyArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;
use crate::site::records::Action;
use crate::site::trust::ExpiryRule;
use crate::site::{Arrival, Downgrade, Mode, NodeOptions, Options, apply};

pub fn run(args: &ApplyArgs) -> Result<Exit> {
    refuse_unprivileged(args)?;
    let (mirror, release) = mirror_of(args)?;
    // A mirror's redirects stay on its origin (or go to the hosts named on purpose).
    let net = std::sync::Arc::new(match mirror {
        Some(_) => {
            let redirects = crate::fetch::Redirects::SameOrigin { also: args.allow_redirect_host.clone() };
            Net::for_mirror(args.net.options(), redirects)?
        }
        None => Net::new(args.net.options())?,
    });
    // A mirror's root: its co-signatures are the mirror's, found once its manifest is read.
    let expiry = ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let wait = std::time::Duration::from_secs(args.site.wait);
    let writes = if args.dry_run { super::Writes::No } else { super::Writes::Yes };
    let opened = (|| -> Result<_> {
        Ok(if let Some(source) = mirror {
            // A mirror's current bundle brings its trust metadata too (read only on a node that has
            // a trust root; an unreachable one is warned about, and the node's own decides).
            let carried = || {
                let Ok(have) = crate::trust::SiteTrust::load(&args.root) else { return Vec::new() };
                crate::site::mirror::carried_trust(source, &release, &have.root, &net).unwrap_or_else(|e| {
                    tracing::warn!("cannot read the trust metadata of the mirror's current bundle: {e}");
                    Vec::new()
                })
            };
            let policy = super::site_policy(&args.root, &args.trust, Vec::new(), carried, &expiry, wait, writes)?;
            (None, policy, None, None)
        } else {
            let from = Source {
                bundle: &args.source,
                trust: &args.trust,
                root: &args.root,
                expiry: &expiry,
                wait,
                insecure: args.insecure_registry,
                ca: args.registry_ca.as_ref(),
                net: &args.net,
                writes,
            };
            let Opened { input, policy, tag_version, referrers } = from.open(&net)?;
            (Some(input), policy, tag_version, referrers)
        })
    })();
    // A refusal before the root's lock (its trust root, the metadata carried, the bundle
    // unreadable) is on record too, on a site; a dry run writes nothing.
    if let Err(e) = &opened
        && writes == super::Writes::Yes
    {
        super::record_early(&args.root, Action::Apply, &args.source, args.run.id.as_ref(), e);
    }
    let (input, policy, tag_version, referrers) = opened?;
    let (source, promotion) = (mirror.unwrap_or_default(), promotion_role(args, mirror.is_some()));
    let mirrored = Arrival::Mirror { source, release: &release, net: &net, promotion: promotion.as_ref() };
    let arrival = input.as_ref().map_or(mirrored, Arrival::Bundle);
    let reason = args.reason.clone().unwrap_or_default();
    let opts = Options {
        amber: super::amber(args.accept_amber, args.reason.as_ref(), &args.amber)?,
        keep: usize::from(args.keep),
        downgrade: if args.allow_downgrade { Downgrade::Allow } else { Downgrade::Refuse },
        wait,
        tag_version,
        expiry,
        run: args.run.id.clone(),
        ..Options::default()
    };
    let node = node_options(args, reason);
    let reporter = TerminalReporter::new(args.json);
    let done = apply(&arrival, &policy, &args.root, &opts, &node, &reporter)?;
    let code = if done.pending_reboot.is_some() { Exit::PendingReboot } else { Exit::Ok };
    if args.json {
        super::print_json(&WithReferrers { done: &done, cosignature_referrers: referrers })?;
        return Ok(code);
    }
    print(args, &done)?;
    if let Some(r) = referrers {
        writeln!(std::io::stdout(), "{r}")?;
    }
    Ok(code)
}

/// What the node does with the bundle, as the flags say (clap keeps the modes apart).
fn node_options(args: &ApplyArgs, reason: String) -> NodeOptions {
    let mode = match (args.dry_run, args.download_only, args.adopt) {
        (true, _, _) => Mode::DryRun,
        (_, true, _) => Mode::DownloadOnly,
        (_, _, true) => Mode::Adopt,
        _ => Mode::Change,
    };
    NodeOptions {
        accept_unrestorable: args.accept_unrestorable.then_some(reason),
        mode,
        unless_current: args.unless_current,
        lock_timeout: args.lock_timeout,
    }
}

/// A change of the host's packages needs root: said before anything is read or written (as
/// another user, the package manager failed half-way and the message blamed the bundle). A dry
/// run and a fetch ahead change no package.
fn refuse_unprivileged(args: &ApplyArgs) -> Result<(), super::UsageError> {
    if args.dry_run || args.download_only || rustix::process::geteuid().is_root() {
        return Ok(());
    }
    Err(super::UsageError(
        "apply changes the host's packages: run it as root (`--dry-run` shows what it would change, \
         `--download-only` fetches a mirror's release ahead, as any user)"
            .into(),
    ))
}

/// On a node under a site trust root, following a mirror's `current` takes only what its
/// `promotion` role signed.
fn promotion_role(args: &ApplyArgs, from_mirror: bool) -> Option<crate::trust::DecisionRole> {
    if !args.trust.trust.is_empty() || !from_mirror {
        return None;
    }
    crate::trust::SiteTrust::load(&args.root).ok()?.decision_role(crate::trust::PROMOTION_ROLE)
}

/// The mirror `SOURCE` names, if it is one, and the release asked of it (`--release` and
/// `--download-only` are a mirror's).
fn mirror_of(args: &ApplyArgs) -> Result<(Option<&str>, crate::site::mirror::Release), super::UsageError> {
    let mirror = args.source.to_str().filter(|s| crate::site::mirror::is_mirror(s));
    if mirror.is_none() && (args.release.is_some() || args.download_only) {
        return Err(super::UsageError(format!(
            "--release and --download-only take a mirror's URL (http(s)://HOST/PATH/ or file:///PATH/), not `{}`",
            args.source.display()
        )));
    }
    Ok((mirror, args.release.clone().unwrap_or_default()))
}

fn print(args: &ApplyArgs, done: &crate::site::Applied) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let what = format!("{} {} ({})", done.name, done.version, done.id);
    if let Some(t) = &done.transfer {
        writeln!(
            out,
            "from the mirror: {} file(s) fetched ({}), {} taken from what this node holds ({})",
            t.fetched.files,
            super::size(t.fetched.bytes),
            t.reused.files,
            super::size(t.reused.bytes)
        )?;
    }
    if let Some(dir) = &done.staged {
        writeln!(out, "staged {what} in `{}`: its apply fetches nothing more", dir.display())?;
        return Ok(());
    }
    if done.unchanged {
        let how = if done.dry_run { "would be left" } else { "left" };
        writeln!(out, "this node already runs {what} and none of its packages would change: {how} as it is")?;
        return Ok(());
    }
    if done.dry_run {
        if let Some(p) = &done.preflight {
            // `pre-flight amber: …`: what the probe already knows, before any change.
            writeln!(out, "{}", crate::escape::value(&p.summary))?;
            for line in crate::validate::not_green(&p.rows) {
                writeln!(out, "{}", crate::escape::value(&line))?;
            }
        }
        writeln!(out, "dry run: applying {what} would change: {}", done.packages.summary())?;
    } else if args.adopt {
        writeln!(
            out,
            "adopted {what}: the stack this node runs, every package it pins installed at its version; no package changed"
        )?;
    } else {
        writeln!(out, "applied {what}: {}", done.packages.summary())?;
    }
    for c in done.packages.all() {
        writeln!(out, "  {}", crate::escape::value(&c.to_string()))?;
    }
    for c in &done.unrestorable {
        writeln!(
            out,
            "cannot be put back (its version now is in no retained view): {}",
            crate::escape::value(&c.to_string())
        )?;
    }
    if let Some(simulation) = &done.simulation {
        writeln!(out, "the package manager's simulation:")?;
        for line in simulation.lines().filter(|l| !l.trim().is_empty()) {
            writeln!(out, "  {}", crate::escape::value(line))?;
        }
        return Ok(());
    }
    if let Some(reason) = &done.pending_reboot {
        writeln!(out, "pending reboot: {}", crate::escape::value(reason))?;
        writeln!(out, "reboot, then run `airlock validate --root {} --commit`", args.root.display())?;
        return Ok(());
    }
    if let Some(v) = &done.validation {
        let summary = crate::commands::terminal::painted_summary(v, crate::commands::terminal::Stream::Stdout);
        writeln!(out, "validation of the new stack {summary}")?;
        for line in crate::validate::not_green(&v.rows) {
            writeln!(out, "{}", crate::escape::value(&line))?;
        }
    }
    for id in &done.pruned {
        writeln!(out, "pruned bundles/{id} (--keep {})", args.keep)?;
    }
    if let Some(record) = &done.record {
        writeln!(out, "{}", super::switched(&done.id, done.previous.as_ref(), done.seconds, record))?;
        if let Some(line) = phases(&done.phases) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// `phases: verify 0.01 s, … ; airlock's own 0.05 s`: each phase's time, as the record has
/// it, and what airlock itself took (not the package manager's simulation and change, `plan`
/// and `packages`, nor the baseline's and the gate's probes and checks).
pub(super) fn phases(times: &crate::site::records::PhaseTimes) -> Option<String> {
    if times.is_empty() {
        return None;
    }
    let mut own = 0.0;
    let mut parts = Vec::new();
    for (name, seconds) in &times.0 {
        if !matches!(name.as_str(), "preflight" | "plan" | "packages" | "baseline" | "validate" | "restore") {
            own += seconds;
        }
        parts.push(format!("{name} {seconds:.2} s"));
    }
    Some(format!("phases: {}; airlock's own {own:.2} s", parts.join(", ")))
}
