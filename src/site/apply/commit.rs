//! A green (or accepted) apply made final: the mark raised, `current` switched, older bundles
//! pruned, history and the record written.

use std::path::PathBuf;

use crate::bundle::manifest::VerifiedManifest;
use crate::clock::Timestamp;
use crate::site::activate::{activate, prune};
use crate::site::install::{Attempt, raise_mark};
use crate::site::packages::{Change, Changes};
use crate::site::records::Phase;
use crate::site::root::BundleId;
use crate::site::transaction::{Step, Transaction};
use crate::site::{Amber, CrashPoint, SiteError, crash_point, records};

/// A green (or accepted) apply made final: the mark raised, `current` switched, older bundles
/// pruned, history and the record written.
pub(in crate::site) struct Commit<'a> {
    pub id: &'a BundleId,
    pub manifest: &'a VerifiedManifest,
    pub changes: &'a [Change],
    pub downgrade: bool,
    pub keep: usize,
}

impl Commit<'_> {
    pub(in crate::site) fn run(
        &self,
        tx: &mut Transaction<'_>,
        validation: Option<&crate::validate::Evidence>,
        amber: &Amber,
        attempt: &mut Attempt,
    ) -> Result<(Option<BundleId>, Vec<BundleId>, PathBuf), SiteError> {
        attempt.phases.mark(Phase::Switch);
        let root = tx.root();
        raise_mark(&mut tx.state, self.manifest);
        if let Some(entry) = tx.state.bundles.get_mut(self.id) {
            entry.applied = self.changes.to_vec();
        }
        tx.state.pending = None;
        tx.save(Step::Committing)?;
        let previous = activate(root, self.id)?;
        crash_point(CrashPoint::Activated);
        let pruned = prune(root, &mut tx.state, self.keep.max(2))?;
        attempt.phases.mark(Phase::Record);
        let event = crate::site::state::Event {
            action: attempt.record.action.as_str().to_owned(),
            id: self.id.clone(),
            name: self.manifest.name.to_string(),
            version: self.manifest.version.clone(),
            at: Timestamp::now(),
            seconds: attempt.phases.total(),
        };
        tx.state.history.push(event.clone());
        tx.save(Step::Saved)?;
        let verdict = validation.map(|e| e.verdict);
        let r = attempt.activated(&event, previous.as_ref(), &[]);
        r.verdict = Some(records::Verdicts {
            verified: true,
            downgrade: Some(self.downgrade),
            validation: Some(verdict.into()),
        });
        r.accept(amber, verdict);
        r.packages = Some(Changes::of(self.changes));
        r.pruned.clone_from(&pruned);
        let record = records::write(root, r)?;
        Ok((previous, pruned, record))
    }
}

pub(super) fn list(changes: &[Change]) -> String {
    changes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
