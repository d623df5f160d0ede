//! `airlock install`: verify a bundle while staging it under the site root, refuse what the
//! site must not run (a downgrade, a tag naming another version, a red or unaccepted amber
//! stack), record the policy it verified under, retain it, publish its images, make it
//! current, prune. Every outcome once the root's lock is held is on record (`Attempt`).

use std::path::{Path, PathBuf};

use super::activate::{activate, prune};
use super::records::{self, Phase, Phases};
use super::registry::{self, publish_images};
use super::retain::retain;
use super::root::{BundleId, SiteRoot};
use super::stage::{Staged, Verified, stage, would_share_blocks, write_views};
use super::state::{self, RegistryMemo, State};
use super::transaction::{Step, Transaction};
use super::{Amber, CrashPoint, Downgrade, Options, Role, SiteError, base, crash_point, io_err, views};
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::parts::{Input, Opened};
use crate::bundle::reader::read_outline;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::{KeyId, Policy};

/// What an install did.
#[derive(Debug, serde::Serialize)]
pub struct Installed {
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub manifest_sha256: Sha256,
    pub signers: Vec<KeyId>,
    pub path: PathBuf,
    /// Co-signatures that counted, retained beside the bundle file.
    pub cosignatures: Vec<PathBuf>,
    #[serde(with = "super::root::as_link")]
    pub previous: Option<BundleId>,
    /// A delta's base, which supplied the members it leaves out.
    pub base: Option<BundleId>,
    /// The same bundle was already retained; it was restaged from the verified file and activated.
    pub already_present: bool,
    /// Retained and served as a candidate release (`--candidate`), not made current.
    pub candidate: bool,
    /// Installed below the site's high-water version, with `--allow-downgrade`.
    pub downgrade: bool,
    /// Images pushed to the site registry.
    pub images: Vec<registry::Pushed>,
    /// Images the bundle carries that were not published (no `--registry`).
    pub images_not_published: usize,
    /// Older bundles removed under `--keep`.
    pub pruned: Vec<BundleId>,
    pub record: PathBuf,
    pub seconds: f64,
    /// The validation evidence, when the bundle names targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::validate::Evidence>,
}

/// Verify `bundle` while staging it under `root`, then make it `current`.
pub fn install(
    input: &Input,
    trust: &Policy,
    root: &Path,
    opts: &Options,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let opened = input.open_for_reading(&trust.keys)?;
    let root = &SiteRoot::new(root);
    let lock = root.open_for_writing("install", opts.wait)?;
    let mut attempt = Attempt::new(records::Action::Install, Phase::Verify, input.display().to_string(), Some(trust));
    attempt.record.run_id.clone_from(&opts.run);
    let installed = Transaction::writing(root, &lock).and_then(|mut tx| {
        install_locked(input, opened, trust, net, &mut Trip { tx: &mut tx, opts, reporter, attempt: &mut attempt })
    });
    // Once the lock is held, every outcome is on record: a refused or failed install too.
    installed.inspect_err(|e| attempt.record_failure(root, e))
}

/// One writer's trip through the root: its transaction, the command's options, the attempt
/// its record is made from, and where progress goes. The phases of an install, a relay and an
/// apply take it whole.
pub(super) struct Trip<'t, 'r> {
    pub tx: &'t mut Transaction<'r>,
    pub opts: &'t Options,
    pub reporter: &'t dyn Reporter,
    pub attempt: &'t mut Attempt,
}

/// What an install or rollback has established so far, for the record of its failure.
pub(super) struct Attempt {
    pub record: records::Record,
    pub phases: Phases,
    /// The step that failed, where it is not the phase running when the error came back (a
    /// red verdict found in `validate`, returned after the `restore` phase).
    pub failed_in: Option<Phase>,
}

impl Attempt {
    pub(super) fn new(action: records::Action, first: Phase, file: String, trust: Option<&Policy>) -> Self {
        let bundle = records::RecordBundle { file: Some(file), ..records::RecordBundle::default() };
        let record = records::Record::new(action, records::Outcome::Failed, Some(bundle));
        let mut attempt = Self { record, phases: Phases::start(first), failed_in: None };
        if let Some(trust) = trust {
            attempt.trusted(trust);
        }
        attempt
    }

    /// The policy the bundle is verified under.
    pub(super) fn trusted(&mut self, trust: &Policy) {
        self.record.trust = Some(records::TrustUsed::of(trust));
    }

    /// A verified bundle past its expiry: refused, or its waiver added to the record.
    fn check_expiry(&mut self, manifest: &VerifiedManifest, rule: &super::trust::ExpiryRule) -> Result<(), SiteError> {
        if let Some(waiver) = super::trust::check_bundle_expiry(manifest, rule)? {
            let trust = self.record.trust.get_or_insert_with(|| records::TrustUsed {
                keys: Vec::new(),
                threshold: 0,
                roles: Vec::new(),
                trust_root: None,
                expired_accepted: None,
            });
            match &mut trust.expired_accepted {
                Some(w) => w.expired.extend(waiver.expired),
                None => trust.expired_accepted = Some(waiver),
            }
        }
        Ok(())
    }

    /// The bundle verified: what the record says it is; refused when past its expiry (or the
    /// waiver recorded).
    pub(super) fn verified(&mut self, verified: &Verified, expiry: &super::trust::ExpiryRule) -> Result<(), SiteError> {
        let file = self.record.bundle.take().and_then(|b| b.file);
        self.record.bundle =
            Some(records::RecordBundle { file, ..verified.record(&BundleId::of(&verified.manifest_sha256)) });
        self.record.signers.clone_from(&verified.signers);
        self.record.verdict = Some(records::Verdicts { verified: true, downgrade: None, validation: None });
        self.check_expiry(&verified.manifest, expiry)
    }

    /// The record of an action that made a bundle current (`event`): the bundle it replaced,
    /// what was published, the phases. The caller adds what only its action has.
    pub(super) fn activated(
        &mut self,
        event: &super::state::Event,
        previous: Option<&BundleId>,
        published: &[registry::Pushed],
    ) -> &mut records::Record {
        let r = &mut self.record;
        r.outcome = Some(records::Outcome::Activated);
        r.at = event.at;
        r.previous = previous.cloned();
        r.published = published.to_vec();
        r.phases = self.phases.times();
        r.seconds = Some(event.seconds);
        r
    }

    /// Write the record of a refusal (the bundle's fault, or the host's verdict) or a failure
    /// (the site's). A record that cannot be written is warned about: the error that stopped
    /// the action is the one reported.
    pub(super) fn record_failure(&mut self, root: &SiteRoot, e: &SiteError) {
        let r = &mut self.record;
        r.outcome = Some(match e.class() {
            // A node that put its packages back after a red verdict or a failed change.
            _ if r.restored.is_some() => records::Outcome::Restored,
            Class::Runtime => records::Outcome::Failed,
            Class::Usage | Class::Verification | Class::ValidationRed => records::Outcome::Refused,
        });
        r.reason = Some(crate::failure::chain(e));
        r.failed_in = Some(self.failed_in.unwrap_or(self.phases.running).name().to_owned());
        r.phases = self.phases.times();
        r.seconds = Some(self.phases.total());
        r.at = Timestamp::now();
        if let Err(w) = records::write(root, r) {
            tracing::warn!("the record of this failure could not be written: {w}");
        }
    }
}

fn install_locked(
    input: &Input,
    opened: Opened,
    trust: &Policy,
    net: &Net,
    trip: &mut Trip<'_, '_>,
) -> Result<Installed, SiteError> {
    let root = trip.tx.root();
    let state = &mut trip.tx.state;
    preflight(input, &opened, root, state)?;
    tracing::info!("stage: verifying `{}` into `{}`", input.display(), root.staging().display());
    let staged = stage(input.bundle(), opened, trust, root, state, trip.reporter);
    let Staged { dir, verified } = staged.map_err(|e| name_damaged_part(e, input))?;
    if let Some(split) = input.split() {
        split.check_manifest(&verified.manifest_sha256)?;
    }
    if let Some(tag) = &trip.opts.tag_version {
        verified.manifest.check_tag(tag)?;
    }
    trip.attempt.verified(&verified, &trip.opts.expiry)?;
    trip.attempt.phases.mark(Phase::Validate);
    crash_point(CrashPoint::Verified);
    let downgrade = check_downgrade(root, state, &verified.manifest, trip.opts.downgrade)?;
    let validation = judge_here(&verified.manifest, root, trip.opts, trip.attempt)?;
    trip.attempt.phases.mark(Phase::Stage);
    tracing::info!("views: {}", views::describe(&verified.manifest));
    write_views(dir.path(), &verified.manifest, trip.opts.apt_key.as_ref())?;
    // What rollback and anti-downgrade rely on is durable before the tree is named under
    // `bundles/` (and so long before `current` moves): a retained bundle always has its policy.
    remember_retained(state, &verified, &BundleId::of(&verified.manifest_sha256), trust, trip.opts);
    // A candidate has not run here yet: it raises the mark when it is promoted.
    if !trip.opts.candidate {
        raise_mark(state, &verified.manifest);
    }
    trip.tx.save(Step::Remembered)?;
    let retained = retain(dir, &verified, trust, root)?;
    tracing::info!("retain: bundles/{}", retained.id);
    trip.attempt.phases.mark(Phase::Publish);
    crash_point(CrashPoint::Retained);
    if trip.opts.candidate {
        return keep_candidate(trip.tx, &verified, retained, trip.opts, trip.attempt);
    }
    let (images, images_not_published) =
        publish_images(&retained.id, &retained.path, trip.opts.registry.as_ref(), net)?;
    trip.attempt.phases.mark(Phase::Switch);
    crash_point(CrashPoint::Published);
    let previous = activate(root, &retained.id)?;
    crash_point(CrashPoint::Activated);
    let pruned = keep_releases(root, &mut trip.tx.state, trip.opts)?;
    trip.attempt.phases.mark(Phase::Record);

    let m = &verified.manifest;
    let event = verified.event("install", &retained.id, trip.attempt.phases.total());
    trip.tx.state.history.push(event.clone());
    trip.tx.save(Step::Saved)?;
    let verdict = validation.as_ref().map(|e| e.verdict);
    let r = trip.attempt.activated(&event, previous.as_ref(), &images);
    r.verdict =
        Some(records::Verdicts { verified: true, downgrade: Some(downgrade), validation: Some(verdict.into()) });
    r.accept(&trip.opts.amber, verdict);
    r.images_not_published = Some(images_not_published);
    r.pruned.clone_from(&pruned);
    let record = records::write(root, r)?;
    Ok(Installed {
        id: retained.id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        manifest_sha256: verified.manifest_sha256,
        signers: verified.signers,
        path: retained.path,
        cosignatures: retained.cosignatures,
        previous,
        base: verified.base.clone(),
        already_present: retained.already_present,
        candidate: false,
        downgrade,
        images,
        images_not_published,
        pruned,
        record,
        seconds: event.seconds,
        validation,
    })
}

/// The gate on this host (`--role host`), or none on a mirror (recorded as skipped).
fn judge_here(
    manifest: &VerifiedManifest,
    root: &SiteRoot,
    opts: &Options,
    attempt: &mut Attempt,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    Ok(match opts.role {
        Role::Host => gate(manifest, &opts.amber, &mut attempt.record, super::load_baseline(root.path()).as_ref())?,
        Role::Mirror => {
            // A mirror serves the views; its nodes judge their own stacks (`apply`).
            tracing::info!("validate: not on a mirror; the matrix is kept for the nodes");
            attempt.record.role = Some("mirror".to_owned());
            attempt.record.validation = Some(records::Validation::Skipped {
                verdict: records::ValidationVerdict::Skipped,
                reason: "installed with --role mirror: the nodes validate their own stacks".to_owned(),
            });
            None
        }
    })
}

/// The newest `--keep` bundles kept (never `current` and `previous`), and a mirror's public tree
/// made to say so.
fn keep_releases(root: &SiteRoot, state: &mut State, opts: &Options) -> Result<Vec<BundleId>, SiteError> {
    let pruned = prune(root, state, opts.keep.max(2))?;
    if opts.role == Role::Mirror || super::public::served(root) {
        super::public::refresh(root, state)?;
    }
    Ok(pruned)
}

/// A mirror's candidate release: retained and served under `public/releases/` by version and
/// id, `current` unchanged (nodes pinned to it with `apply --release` take it; `airlock
/// promote` makes it current), and on record as staged. Its images wait for the promotion:
/// the registry's tags stay those of the qualified release.
fn keep_candidate(
    tx: &mut Transaction<'_>,
    verified: &Verified,
    retained: super::retain::Retained,
    opts: &Options,
    attempt: &mut Attempt,
) -> Result<Installed, SiteError> {
    let root = tx.root();
    let pruned = keep_releases(root, &mut tx.state, opts)?;
    tx.save(Step::Candidate)?;
    attempt.phases.mark(Phase::Record);
    let m = &verified.manifest;
    let r = &mut attempt.record;
    r.outcome = Some(records::Outcome::Staged);
    r.pruned.clone_from(&pruned);
    r.phases = attempt.phases.times();
    r.seconds = Some(attempt.phases.total());
    r.at = Timestamp::now();
    let record = records::write(root, r)?;
    tracing::info!("candidate: {} {} served as public/releases/{} and /{}", m.name, m.version, m.version, retained.id);
    Ok(Installed {
        id: retained.id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        manifest_sha256: verified.manifest_sha256,
        signers: verified.signers.clone(),
        path: retained.path,
        cosignatures: retained.cosignatures,
        previous: None,
        base: verified.base.clone(),
        already_present: retained.already_present,
        candidate: true,
        downgrade: false,
        images: Vec::new(),
        images_not_published: 0,
        pruned,
        record,
        seconds: attempt.phases.total(),
        validation: None,
    })
}

/// The state before the bundle is retained: its policy (what verifies it later), and the
/// registry to publish to.
pub(super) fn remember_retained(state: &mut State, verified: &Verified, id: &BundleId, trust: &Policy, opts: &Options) {
    let m = &verified.manifest;
    let retained = state::Retained {
        name: m.name.to_string(),
        version: m.version.clone(),
        installed_at: Timestamp::now(),
        signers: verified.signers.clone(),
        trust: trust.key_ids(),
        threshold: trust.least_signers(),
        base: verified.base.clone(),
        applied: Vec::new(),
        partial: false,
        kept: super::state::Kept::Packages,
    };
    state.bundles.insert(id.clone(), retained);
    if let Some(site) = &opts.registry {
        state.registry = Some(RegistryMemo { host: site.host.clone(), insecure: site.is_insecure() });
    }
}

/// The high-water mark raised to the bundle's version (by a bundle that will activate).
pub(super) fn raise_mark(state: &mut State, m: &VerifiedManifest) {
    let mark = state.high_water.entry(m.name.to_string()).or_insert_with(|| m.version.clone());
    if m.version > *mark {
        *mark = m.version.clone();
    }
}

/// A split bundle that failed verification: if a part is damaged, that is the first problem
/// (the member or stream problem it caused is only its symptom).
pub(super) fn name_damaged_part(e: SiteError, input: &Input) -> SiteError {
    match (e, input.split()) {
        (SiteError::Rejected { path, mut problems }, Some(split)) => {
            split.name_damage(&mut problems);
            SiteError::Rejected { path, problems }
        }
        (e, _) => e,
    }
}

/// Fail early, before anything is written, when the bundle will not fit (its file is kept and
/// its content unpacked once) or is a delta whose base this site does not have. The kept file
/// takes no new space where its copy will share the bundle file's blocks (`stage`).
pub(super) fn preflight(input: &Input, opened: &Opened, root: &SiteRoot, state: &State) -> Result<(), SiteError> {
    let file_bytes = input.bytes()?;
    // The head is read unverified, only to refuse early; a lie there fails verification later
    // (a manifest that does not parse or claims absurd sizes is left to verification too).
    // Its outline only: the entries are summed as they stream past, not held.
    let Ok(outline) = read_outline(input.open()?) else { return Ok(()) };
    let Some(content_bytes) = outline.content_bytes else { return Ok(()) };
    if let Some(b) = &outline.base {
        base::find(root, state, b)?;
    }
    let shares = matches!(opened, Opened::File { file, .. } if would_share_blocks(file, &root.staging()));
    let needed = if shares { content_bytes } else { file_bytes.saturating_add(content_bytes) };
    // The space where the bundle is staged: the root's own `staging/` (a dry run's is elsewhere).
    let staging = root.staging();
    let stat = rustix::fs::statvfs(&staging).map_err(|e| io_err(&staging)(e.into()))?;
    let available = stat.f_bavail.saturating_mul(stat.f_frsize);
    if needed > available {
        return Err(SiteError::NoSpace { root: root.path().to_owned(), needed, available, shares });
    }
    Ok(())
}

/// `Ok(true)` when a downgrade is allowed and happening, `Ok(false)` when this is none.
pub(super) fn check_downgrade(
    root: &SiteRoot,
    state: &State,
    manifest: &VerifiedManifest,
    policy: Downgrade,
) -> Result<bool, SiteError> {
    let Some(high_water) = state.high_water(root, manifest.name.as_str())? else { return Ok(false) };
    if manifest.version >= high_water {
        return Ok(false);
    }
    let (name, version) = (manifest.name.to_string(), manifest.version.clone());
    match policy {
        Downgrade::Refuse => Err(SiteError::Downgrade { name, version, high_water }),
        Downgrade::Allow => {
            tracing::warn!("--allow-downgrade: installing {name} {version} below the {high_water} this site has run");
            Ok(true)
        }
    }
}

/// Validate this host against the verified manifest's support matrix before anything becomes
/// visible: green goes on, amber only when accepted, red never (exit 4; the staged bundle is
/// discarded). A bundle with no targets is not validated.
pub(super) fn gate(
    manifest: &VerifiedManifest,
    amber: &Amber,
    record: &mut records::Record,
    baseline: Option<&crate::validate::metrics::Baseline>,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    use crate::validate::matrix::Verdict;
    tracing::info!("validate: probing this host against the bundle's support matrix");
    let host = crate::validate::probe::HostRoot::from_env();
    let evidence =
        crate::validate::validate(&manifest.validation, &host, baseline, &crate::validate::scope_of(manifest));
    let Some(evidence) = evidence else {
        tracing::info!("validate: skipped, the bundle names no [[validation.target]]");
        record.validation = Some(records::Validation::skipped());
        return Ok(None);
    };
    // Evidence first: a verdict that stops the install is on record with what it saw.
    record.validation = Some(records::Validation::Evidence(Box::new(evidence.clone())));
    // The summary starts with its verdict, which the error says already.
    let word = format!("{}: ", crate::validate::word(evidence.verdict));
    let summary = crate::escape::value(evidence.summary.strip_prefix(&word).unwrap_or(&evidence.summary)).into_owned();
    match (evidence.verdict, amber) {
        (Verdict::Green, _) => Ok(Some(evidence)),
        (Verdict::Amber, Amber::Accept(a)) => {
            let owner = a.owner.as_deref().map_or_else(String::new, |o| format!(" by {o}"));
            let until = a.expires.map_or_else(String::new, |e| format!(" until {e}"));
            tracing::warn!("amber accepted{owner}{until} ({}): {summary}", a.reason);
            Ok(Some(evidence))
        }
        (Verdict::Amber, Amber::Refuse) => Err(SiteError::Validation {
            verdict: Verdict::Amber,
            summary,
            hint: match record.action {
                records::Action::Apply => {
                    "; review the verdict above, then run the same `airlock apply` again with --accept-amber --reason \
                     TEXT (--owner NAME --expires DATE) to commit it"
                }
                _ => {
                    "; review the verdict above, then run the same `airlock install` again with --accept-amber \
                     --reason TEXT (--owner NAME --expires DATE) to activate it"
                }
            },
        }),
        (Verdict::Red, _) => {
            Err(SiteError::Validation { verdict: Verdict::Red, summary, hint: "; a red stack never activates" })
        }
    }
}
