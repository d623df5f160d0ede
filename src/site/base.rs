//! A delta bundle's omitted members (`from_base` entries), taken from its base bundle retained
//! on this site. The base is found by what the delta records (its manifest's sha256, or the
//! lock it was built from), verified again from its retained file under the policy it was
//! installed with, and only the members the delta needs are copied into the delta's staged
//! tree, by digest: the result is the tree the full bundle would have staged. A base that is
//! itself a delta hands on what it does not carry to its own base.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::retained::{self, Trust};
use super::root::{BundleId, Link, RETAINED_BUNDLE, SiteRoot};
use super::sink::StageSink;
use super::state::State;
use super::{SiteError, io_err};
use crate::bundle::Manifest;
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::manifest::{BaseRef, MANIFEST, MAX_MANIFEST_BYTES};
use crate::bundle::reader::{MemberSink, OnProblem, read_bundle};
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::progress::Reporter;

/// Bases of bases followed at most.
const MAX_CHAIN: usize = 16;

/// The retained bundle `base` names: by manifest digest when the delta records it, else the
/// newest retained bundle built from the same lock. Current and previous are looked at first.
pub(super) fn find(root: &SiteRoot, state: &State, base: &BaseRef) -> Result<BundleId, SiteError> {
    let mut candidates: Vec<BundleId> =
        [Link::Current, Link::Previous].into_iter().filter_map(|l| root.link(l)).collect();
    let mut others: Vec<(&BundleId, _)> = state.bundles.iter().map(|(id, b)| (id, b.installed_at)).collect();
    others.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (id, _) in others {
        if !candidates.contains(id) {
            candidates.push(id.clone());
        }
    }
    for id in &candidates {
        let dir = root.bundle_dir(id);
        if !dir.join(RETAINED_BUNDLE).is_file() {
            continue;
        }
        // Read unverified, only to choose: the chosen bundle is verified whole before use.
        let Some((sha256, manifest)) = retained_manifest(&dir) else { continue };
        let matches = match &base.manifest_sha256 {
            Some(want) => *want == sha256,
            None => manifest.lock_sha256 == base.lock_sha256 && base.name.as_ref().is_none_or(|n| *n == manifest.name),
        };
        if matches {
            return Ok(id.clone());
        }
    }
    let retained =
        state.bundles.iter().map(|(id, b)| format!("{id} ({} {})", b.name, b.version)).collect::<Vec<_>>().join(", ");
    Err(SiteError::NoBase {
        base: base.to_string(),
        retained: if retained.is_empty() { "none".to_owned() } else { retained },
    })
}

/// The manifest in a retained tree and its digest, if it reads and parses.
fn retained_manifest(dir: &Path) -> Option<(Sha256, Manifest)> {
    let mut bytes = Vec::new();
    File::open(dir.join(MANIFEST)).ok()?.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes).ok()?;
    Some((Sha256::of_bytes(&bytes), serde_json::from_slice(&bytes).ok()?))
}

/// Fill the `from_base` entries of the verified delta `manifest` staged in `dir` from its base
/// (and its base's base). Returns the id of the base, or `None` for a full bundle.
pub(super) fn fill(
    root: &SiteRoot,
    state: &State,
    manifest: &VerifiedManifest,
    dir: &Path,
    reporter: &dyn Reporter,
) -> Result<Option<BundleId>, SiteError> {
    let Some(first) = &manifest.base else { return Ok(None) };
    let mut wanted: BTreeMap<Sha256, Vec<MemberPath>> = BTreeMap::new();
    for e in manifest.entries.iter().filter(|e| e.from_base) {
        wanted.entry(e.sha256).or_default().push(e.path.clone());
    }
    let first_id = find(root, state, first)?;
    let mut id = first_id.clone();
    for _ in 0..MAX_CHAIN {
        let base = take_from(root, state, &id, &mut wanted, dir, reporter)?;
        if wanted.is_empty() {
            return Ok(Some(first_id));
        }
        // What this base does not carry must be what its own base holds.
        let passed_on = base.entries.iter().any(|e| e.from_base && wanted.contains_key(&e.sha256));
        match &base.base {
            Some(next) if passed_on => id = find(root, state, next)?,
            _ => break,
        }
    }
    let (sha256, paths) = wanted.into_iter().next().expect("not empty");
    Err(SiteError::NotInBase { id: first_id, path: paths[0].to_string(), sha256 })
}

/// Verify retained bundle `id` and copy the members `wanted` names into `dir`; returns its
/// verified manifest. Every digest it supplied leaves `wanted`.
fn take_from(
    root: &SiteRoot,
    state: &State,
    id: &BundleId,
    wanted: &mut BTreeMap<Sha256, Vec<MemberPath>>,
    dir: &Path,
    reporter: &dyn Reporter,
) -> Result<VerifiedManifest, SiteError> {
    let bundle = root.retained_file(id);
    let trust = retained::policy(root, state, id, Trust::Site(super::trust::ExpiryRule::Ignore))?;
    tracing::info!("base: verifying bundles/{id} again and taking {} members from it", wanted.len());
    let open = || File::open(&bundle).map_err(|source| SiteError::Open { path: bundle.clone(), source });
    // Which member goes where, from the manifest as read now; verification below reads the
    // same manifest again and must find the same bytes.
    let head = crate::bundle::reader::read_head(BufReader::new(open()?))
        .map_err(|p| SiteError::BaseRejected { id: id.clone(), problems: vec![p] })?;
    let mut routes = BTreeMap::new();
    let mut chosen = BTreeSet::new();
    for e in head.manifest.carried() {
        if let Some(dests) = wanted.get(&e.sha256)
            && chosen.insert(e.sha256)
        {
            routes.insert(e.path.clone(), (e.sha256, dests[0].clone()));
        }
    }
    let mut sink = Route { stage: StageSink::new(dir), routes, written: Vec::new() };
    let input = BufReader::with_capacity(1 << 20, open()?);
    let report = read_bundle(input, &trust, &mut sink, OnProblem::Stop, reporter)
        .map_err(|e| SiteError::Io { path: e.path.under(dir), source: e.source })?;
    let (Some(verified), true) = (report.manifest, report.problems.is_empty()) else {
        return Err(SiteError::BaseRejected { id: id.clone(), problems: report.problems });
    };
    retained::check_id(id, &head.manifest_sha256, || format!("{} {}", verified.name, verified.version))?;
    if report.manifest_sha256 != Some(head.manifest_sha256) {
        let problem = crate::bundle::reader::Problem {
            member: Some(MANIFEST.into()),
            reason: crate::bundle::reader::Rejection::ManifestInvalid("it changed while it was read".into()),
        };
        return Err(SiteError::BaseRejected { id: id.clone(), problems: vec![problem] });
    }
    // Verified: each digest is in place at its first path; copy it to any others.
    for (sha256, first) in sink.written {
        let dests = wanted.remove(&sha256).unwrap_or_default();
        for dest in dests.iter().filter(|d| **d != first) {
            copy_member(&first.under(dir), &dest.under(dir))?;
        }
    }
    Ok(verified)
}

fn copy_member(from: &Path, to: &Path) -> Result<(), SiteError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    // Synced with the whole tree before it is retained (`stage::sync_tree`).
    std::fs::copy(from, to).map(drop).map_err(io_err(to))
}

/// A sink that keeps only the routed members, each staged at its path in the delta's tree.
struct Route {
    stage: StageSink,
    routes: BTreeMap<MemberPath, (Sha256, MemberPath)>,
    written: Vec<(Sha256, MemberPath)>,
}

impl MemberSink for Route {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        let Some((sha256, dest)) = self.routes.get(path) else {
            return io::copy(data, &mut io::sink()).map(drop);
        };
        self.stage.member(dest, data)?;
        self.written.push((*sha256, dest.clone()));
        Ok(())
    }

    fn spool(&mut self) -> io::Result<std::fs::File> {
        self.stage.spool()
    }
}
