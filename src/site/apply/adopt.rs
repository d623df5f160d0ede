//! `apply --adopt`: the stack a node already runs recorded as its current bundle, package by
//! package checked against a baseline, nothing changed.

use std::path::Path;

use super::commit::Commit;
use super::downloads::drop_downloaded;
use super::{Applied, Candidate, outcome};
use crate::bundle::manifest::VerifiedManifest;
use crate::site::install::{Trip, remember_retained};
use crate::site::packages::{Change, Changes, Node};
use crate::site::records::Phase;
use crate::site::retain::retain;
use crate::site::root::BundleId;
use crate::site::transaction::Step;
use crate::site::{SiteError, packages};

/// `--adopt`: every package the baseline pins is installed at exactly its version (else exit 3
/// naming each difference, nothing written but the refusal's record), then the baseline is
/// retained and made current as an apply would, with no package changed and no gate: the node's
/// stack is what it is; from now on a release's changes to those packages can be put back from
/// the baseline's view.
pub(super) fn adopt(
    trip: &mut Trip<'_, '_>,
    node: &Node,
    wanted: &[packages::Wanted],
    dir: tempfile::TempDir,
    candidate: &Candidate<'_>,
) -> Result<Applied, SiteError> {
    let Candidate { verified, trust, partial, downgrade } = *candidate;
    let installed = node.installed()?;
    let differences: Vec<Change> = wanted
        .iter()
        .filter(|w| installed.get(&w.name) != w.version.as_ref())
        .map(|w| Change { name: w.name.clone(), before: installed.get(&w.name).cloned(), after: w.version.clone() })
        .collect();
    let (newer, differences) =
        patched_dependencies(node, &dir.path().join(node.area()), &verified.manifest, differences)?;
    if !differences.is_empty() {
        return Err(SiteError::NotAdoptable { differences });
    }
    for c in &newer {
        let (pinned, running) = (c.after.as_deref().unwrap_or("?"), c.before.as_deref().unwrap_or("?"));
        tracing::info!(
            "adopt: {} {running} is newer than the baseline's {pinned}; the stack's dependencies on it are met",
            c.name
        );
    }
    trip.attempt.record.newer_than_baseline =
        newer.into_iter().map(|c| Change { name: c.name, before: c.after, after: c.before }).collect();
    // Installed at the version is not enough: a package dpkg left half-configured is not a
    // stack to record as this node's own.
    let unsettled: Vec<(String, String)> =
        node.unsettled()?.into_iter().filter(|(name, _)| wanted.iter().any(|w| &w.name == name)).collect();
    if !unsettled.is_empty() {
        return Err(SiteError::Unsettled { packages: unsettled });
    }
    tracing::info!("adopt: the {} package(s) the baseline pins are installed at its versions", wanted.len());
    trip.attempt.phases.mark(Phase::Stage);
    let id = BundleId::of(&verified.manifest_sha256);
    remember_retained(&mut trip.tx.state, verified, &id, trust, trip.opts);
    if let Some(entry) = trip.tx.state.bundles.get_mut(&id) {
        entry.partial = partial;
    }
    trip.tx.save(Step::Remembered)?;
    let root = trip.tx.root();
    let retained = retain(dir, verified, trust, root)?;
    drop_downloaded(root, &retained.id);
    trip.attempt.phases.mark(Phase::Validate);
    let m = &verified.manifest;
    let commit = Commit { id: &retained.id, manifest: m, changes: &[], downgrade, keep: trip.opts.keep };
    let (previous, pruned, record) = commit.run(trip.tx, None, &trip.opts.amber, trip.attempt)?;
    Ok(Applied {
        previous,
        pruned,
        record: Some(record),
        phases: trip.attempt.phases.times(),
        ..outcome(m, retained.id.clone(), verified.signers.clone(), Changes::default(), trip.attempt.phases.total())
    })
}

/// Of the differences between a baseline and the node (`before`: the node's, `after`: the
/// baseline's), those a distribution's update explains: a pinned dependency of the stack
/// (`[[deb]] dependencies`, carried with what requires it) that the node runs newer, where
/// every carried package's dependency on it is still met. Returns them, and the rest.
pub(super) fn patched_dependencies(
    node: &Node,
    view: &Path,
    manifest: &VerifiedManifest,
    differences: Vec<Change>,
) -> Result<(Vec<Change>, Vec<Change>), SiteError> {
    let mut newer = Vec::new();
    let mut rest = Vec::new();
    // The carried packages each pinned dependency serves, looked up once for every difference.
    let dependents: std::collections::HashMap<&str, &Vec<String>> = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            crate::bundle::manifest::Artifact::Deb(d) if !d.required_by.is_empty() => {
                Some((d.name.as_str(), &d.required_by))
            }
            _ => None,
        })
        .collect();
    for c in differences {
        let parents = dependents.get(c.name.as_str()).map(|p| (*p).clone());
        let ahead = match (&c.before, &c.after, &parents) {
            (Some(running), Some(pinned), Some(_)) => packages::newer(running, pinned),
            _ => false,
        };
        match (ahead, parents) {
            (true, Some(parents)) => {
                let running = c.before.as_deref().unwrap_or_default();
                let unmet = node.unmet(view, &parents, &c.name, running)?;
                if unmet.is_empty() {
                    newer.push(c);
                } else {
                    tracing::warn!("adopt: {} {running} does not meet {}", c.name, unmet.join("; "));
                    rest.push(c);
                }
            }
            _ => rest.push(c),
        }
    }
    Ok((newer, rest))
}
