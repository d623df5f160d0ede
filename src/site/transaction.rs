//! A writer's trip through the site root (install, apply, rollback and promote, `validate
//! --commit`, trust changes): the root, the lock the trip holds, and `state.json` loaded under
//! it. The state is saved only through [`Transaction::save`], at one of the steps the crash
//! table in `docs/architecture.md` names ([`Step`]), and a test build can stop dead right after
//! each (`AIRLOCK_TEST_CRASH_AT`).

use super::SiteError;
use super::lock::RootLock;
use super::root::SiteRoot;
use super::state::State;

/// The root, the lock held on it and its state, from the state's load to the trip's end.
pub(super) struct Transaction<'r> {
    root: &'r SiteRoot,
    /// The writer's lock, held by the caller for as long as this lives; `None` for a trip that
    /// changes nothing (a dry run), which never saves.
    writer: Option<&'r RootLock>,
    pub state: State,
}

/// The steps at which a writer saves `state.json`: each is a row of the crash table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The bundle's policy (and an install's raised mark) before `retain`: a retained bundle
    /// always has its policy.
    Remembered,
    /// A node's change made final before `current` moves: the mark raised and the changes
    /// applied, which a later rollback restores from.
    Committing,
    /// The history, after `current` moved.
    Saved,
    /// A node waiting for a reboot (`validate --commit` after it).
    Pending,
    /// A node restored after a red `validate --commit`: nothing waits any more.
    Restored,
    /// A bundle retained only for an apply that did not commit, removed again.
    Forgotten,
    /// A mirror's candidate kept beside `current`.
    Candidate,
    /// The site's trust root pinned or changed.
    Trust,
    /// The highest signed promotion a node accepted, raised once it verified (before any
    /// member is kept, so a replay is refused even after an apply that went no further).
    Promoted,
}

impl Step {
    /// The crash point's name (`AIRLOCK_TEST_CRASH_AT`).
    pub fn name(self) -> &'static str {
        match self {
            Step::Remembered => "remembered",
            Step::Committing => "committing",
            Step::Saved => "saved",
            Step::Pending => "pending",
            Step::Restored => "restored",
            Step::Forgotten => "forgotten",
            Step::Candidate => "candidate",
            Step::Trust => "trust",
            Step::Promoted => "promoted",
        }
    }
}

impl<'r> Transaction<'r> {
    /// A writer's trip: `held` is the lock `SiteRoot::open_for_writing` took.
    pub fn writing(root: &'r SiteRoot, held: &'r RootLock) -> Result<Self, SiteError> {
        Ok(Self { root, writer: Some(held), state: State::load_for_writer(root)? })
    }

    /// A trip that changes nothing under the root (a dry run, under the reader's lock where
    /// there is a root): [`Transaction::save`] refuses.
    pub fn reading(root: &'r SiteRoot) -> Result<Self, SiteError> {
        Ok(Self { root, writer: None, state: State::load_for_writer(root)? })
    }

    pub fn root(&self) -> &'r SiteRoot {
        self.root
    }

    /// Save `state.json` (written beside, synced, renamed, the root synced) at `step`.
    pub fn save(&mut self, step: Step) -> Result<(), SiteError> {
        if self.writer.is_none() {
            let detail = format!("a trip that does not hold the writer's lock saves nothing (at `{}`)", step.name());
            return Err(SiteError::State { path: self.root.path().join("state.json"), detail });
        }
        self.state.save(self.root)?;
        super::crash_point(super::CrashPoint::Saved(step));
        Ok(())
    }
}
