//! A relay: a mirror fed from another mirror (`airlock install URL --role relay`). It reads the
//! upstream's public tree as a node does — the signed promotion first where its trust root has
//! a `promotion` role, then the signed manifest and co-signatures under its own policy, then
//! each member it keeps, bounded by the verified size and checked against its sha256 — and
//! publishes its own `ROOT/public/` exactly as a mirror does, with the upstream's signed
//! promotion served again as it verified. It keeps a node's part of each release and the
//! trust metadata the release carries (`Kept::Relay`), or every member (`--all`, `Kept::All`).
//!
//! A relay verifies each byte once and serves it to every node of its rack; each node still
//! verifies all it takes. Run again (a timer), it follows the upstream: an unchanged upstream
//! costs the promotion, the index and the manifest (no record is written); a renewed
//! promotion is served again; a new release is fetched, only the members it does not hold
//! already crossing the network. An upstream that cannot be reached fails the run and leaves
//! what the relay serves as it was. Relays chain: a relay's public tree is a mirror's.

use std::path::{Path, PathBuf};

use super::activate::{activate, prune};
use super::install::{Attempt, Trip, check_downgrade, raise_mark, remember_retained};
use super::mirror::{Fetching, Held, Release, SignedPromotion};
use super::records::{self, Phase, Transfer};
use super::retain::retain;
use super::root::{BundleId, Link, SiteRoot};
use super::stage::{Staged, write_views};
use super::state::Kept;
use super::transaction::{Step, Transaction};
use super::{CrashPoint, Downgrade, Options, SiteError, crash_point, io_err};
use crate::digest::Sha256;
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::Policy;

/// How a relay follows its upstream.
pub struct RelayOptions {
    /// The upstream's `current` (followed), or one release it serves by version or id, kept
    /// as a candidate (served by version and id, `current` unchanged).
    pub release: Release,
    /// A node's part and the trust metadata, or every member (`--all`).
    pub kept: Kept,
    /// The relay's trust root's `promotion` role: `current` is followed only as it signs.
    pub promotion: Option<crate::trust::DecisionRole>,
    /// `keep`, `downgrade`, `wait`, `expiry`, `run`, `apt_key` as a mirror's install takes them.
    pub site: Options,
}

/// What a relay's run did.
#[derive(Debug, serde::Serialize)]
pub struct Relayed {
    pub upstream: String,
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub manifest_sha256: Sha256,
    pub kept: Kept,
    /// The upstream's release was current here already (or, for `--release`, retained):
    /// nothing was fetched but the head, and no record written.
    pub up_to_date: bool,
    /// Kept as a candidate (`--release`), not made current.
    pub candidate: bool,
    /// The upstream's signed promotion served again (its number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promotion: Option<u64>,
    pub transfer: Transfer,
    #[serde(with = "super::root::as_link")]
    pub previous: Option<BundleId>,
    pub pruned: Vec<BundleId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<PathBuf>,
    pub seconds: f64,
}

/// Follow the mirror at `source` (its public tree, `http(s)://` or `file://`) into `root`.
pub fn relay(
    source: &str,
    trust: &Policy,
    root: &Path,
    opts: &RelayOptions,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Relayed, SiteError> {
    let root = &SiteRoot::new(root);
    let lock = root.open_for_writing("install --role relay", opts.site.wait)?;
    let mut attempt = Attempt::new(records::Action::Install, Phase::Verify, source.to_owned(), Some(trust));
    attempt.record.run_id.clone_from(&opts.site.run);
    attempt.record.role = Some("relay".to_owned());
    let relayed = Transaction::writing(root, &lock).and_then(|mut tx| match up_to_date(source, &mut tx, opts, net)? {
        Some(done) => Ok(done),
        None => relay_locked(
            source,
            trust,
            opts,
            net,
            &mut Trip { tx: &mut tx, opts: &opts.site, reporter, attempt: &mut attempt },
        ),
    });
    // An upstream out of reach is on record too (`status` shows the last attempt); what the
    // relay serves is as it was.
    relayed.inspect_err(|e| attempt.record_failure(root, e))
}

/// The upstream's release, read unverified: when this relay holds it already (its `current`,
/// or a candidate retained), only the signed promotion can be new. It is verified as a node
/// verifies it, checked to name the manifest this relay verified when it kept the release, and
/// served again; nothing else is written. `None`: the release is new here.
fn up_to_date(
    source: &str,
    tx: &mut Transaction<'_>,
    opts: &RelayOptions,
    net: &Net,
) -> Result<Option<Relayed>, SiteError> {
    let started = std::time::Instant::now();
    let (sha256, manifest) = super::mirror::served_manifest(source, &opts.release, net)?;
    let root = tx.root();
    let id = BundleId::of(&sha256);
    let held = tx.state.bundles.get(&id).is_some_and(|b| b.partial && b.kept == opts.kept);
    let here = match opts.release {
        Release::Current => root.link(Link::Current).as_ref() == Some(&id),
        Release::Named(_) => root.retained().contains(&id),
    };
    // Compared with the manifest this relay kept, byte for byte: the id is a prefix only.
    let kept = super::root::read_bounded(
        &root.bundle_dir(&id).join(crate::bundle::manifest::MANIFEST),
        crate::bundle::manifest::MAX_MANIFEST_BYTES,
    )?;
    if !(held && here && kept.is_some_and(|b| Sha256::of_bytes(&b) == sha256)) {
        return Ok(None);
    }
    let promotion = match (&opts.release, &opts.promotion) {
        (Release::Current, Some(role)) => {
            let signed = super::mirror::check_promoted(source, role, tx.state.promotion, &sha256, &manifest, net)?;
            Some(serve_promotion(tx, &signed)?)
        }
        _ => None,
    };
    tracing::info!("up to date: {} {} ({id}) is what the upstream serves", manifest.name, manifest.version);
    Ok(Some(Relayed {
        upstream: source.to_owned(),
        id,
        name: manifest.name.to_string(),
        version: manifest.version.to_string(),
        manifest_sha256: sha256,
        kept: opts.kept,
        up_to_date: true,
        candidate: opts.release != Release::Current,
        promotion,
        transfer: Transfer::default(),
        previous: None,
        pruned: Vec::new(),
        record: None,
        seconds: started.elapsed().as_secs_f64(),
    }))
}

fn relay_locked(
    source: &str,
    trust: &Policy,
    relay: &RelayOptions,
    net: &Net,
    trip: &mut Trip<'_, '_>,
) -> Result<Relayed, SiteError> {
    let root = trip.tx.root();
    let promotion = relay.promotion.as_ref().map(|role| (role, trip.tx.state.promotion));
    let from = Fetching { source, release: &relay.release, net, packages: true, kept: relay.kept, promotion };
    let held = Held::of(root, relay.kept);
    let got = super::mirror::stage_packages(&from, trust, root, &held, trip.reporter, &mut |_, _| Ok(()))?;
    let Staged { dir, verified } = got.staged;
    trip.attempt.trusted(&got.policy);
    trip.attempt.record.transfer = Some(got.transfer);
    trip.attempt.verified(&verified, &trip.opts.expiry)?;
    trip.attempt.phases.mark(Phase::Stage);
    crash_point(CrashPoint::Verified);
    let id = BundleId::of(&verified.manifest_sha256);
    let candidate = relay.release != Release::Current;
    // A release the site's promotion role signed is the site's decision, a step back included
    // (`promote --allow-downgrade` upstream); one followed unsigned is held to the mark.
    let downgrade = if got.promotion.is_some() { Downgrade::Allow } else { trip.opts.downgrade };
    let downgrade = !candidate && check_downgrade(root, &trip.tx.state, &verified.manifest, downgrade)?;
    let view = super::mirror::kept(&verified.manifest, relay.kept);
    tracing::info!("views: {}", super::views::describe(&view));
    write_views(dir.path(), &view, trip.opts.apt_key.as_ref())?;
    remember_retained(&mut trip.tx.state, &verified, &id, &got.policy, trip.opts);
    if let Some(entry) = trip.tx.state.bundles.get_mut(&id) {
        (entry.partial, entry.kept) = (true, relay.kept);
    }
    if !candidate {
        raise_mark(&mut trip.tx.state, &verified.manifest);
    }
    trip.tx.save(Step::Remembered)?;
    let retained = retain(dir, &verified, &got.policy, root)?;
    tracing::info!("retain: bundles/{} ({:?} of it)", retained.id, relay.kept);
    trip.attempt.phases.mark(Phase::Switch);
    crash_point(CrashPoint::Retained);
    let previous = if candidate { None } else { activate(root, &retained.id)? };
    crash_point(CrashPoint::Activated);
    let pruned = prune(root, &mut trip.tx.state, trip.opts.keep.max(2))?;
    super::public::refresh(root, &trip.tx.state)?;
    let promotion = got.promotion.as_ref().map(|p| serve_promotion(trip.tx, p)).transpose()?;
    trip.attempt.phases.mark(Phase::Record);
    let m = &verified.manifest;
    let event = verified.event("relay", &retained.id, trip.attempt.phases.total());
    if !candidate {
        trip.tx.state.history.push(event.clone());
    }
    trip.tx.save(if candidate { Step::Candidate } else { Step::Saved })?;
    let r = trip.attempt.activated(&event, previous.as_ref(), &[]);
    r.verdict = Some(records::Verdicts { verified: true, downgrade: Some(downgrade), validation: None });
    r.validation = Some(records::Validation::Skipped {
        verdict: records::ValidationVerdict::Skipped,
        reason: "installed with --role relay: the nodes validate their own stacks".to_owned(),
    });
    if candidate {
        r.outcome = Some(records::Outcome::Staged);
    }
    r.pruned.clone_from(&pruned);
    let record = records::write(root, r)?;
    Ok(Relayed {
        upstream: source.to_owned(),
        id: retained.id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        manifest_sha256: verified.manifest_sha256,
        kept: relay.kept,
        up_to_date: false,
        candidate,
        promotion,
        transfer: got.transfer,
        previous,
        pruned,
        record: Some(record),
        seconds: event.seconds,
    })
}

/// The upstream's signed promotion, as it verified, served beside the relay's `current` (after
/// it moved: a node refuses a `current` its promotion does not name, so a crash between the two
/// fails closed), and remembered as the highest this relay accepted. One already served is
/// left as it is.
fn serve_promotion(tx: &mut Transaction<'_>, signed: &SignedPromotion) -> Result<u64, SiteError> {
    let number = signed.promotion.version;
    let root = tx.root();
    let public = root.public();
    let path = public.join(super::promotion::FILE);
    let served = super::root::read_bounded(&path, super::promotion::MAX_BYTES).ok().flatten();
    if served.as_deref() != Some(signed.bytes.as_slice()) {
        std::fs::create_dir_all(&public).map_err(io_err(&public))?;
        crate::atomic::write_durable(&path, &signed.bytes).map_err(io_err(&path))?;
        root.commit_dir(&public)?;
        tracing::info!("promotion {number} of {} served again", signed.promotion.bundle.id);
    }
    if number > tx.state.promotion {
        tx.state.promotion = number;
        tx.save(Step::Promoted)?;
    }
    Ok(number)
}
