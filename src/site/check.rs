//! `airlock check`: a site root checked against what was verified, like fsck. Every retained
//! bundle file is verified again from its first byte under the policy `state.json` recorded for
//! it, and must be the bundle its directory is named for; then its staged tree is compared file
//! by file with what that verified manifest says it holds: each member by its sha256, each
//! view (pip index, apt repository, Hugging Face cache) by what the manifest makes of it.
//! Whatever is missing, altered, or not the bundle's is named. Nothing is changed.
//!
//! `validate` and `report --root` run the same check on the active bundle before they use it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::retained::{self, Trust};
use super::root::{BundleId, Link, RETAINED_BUNDLE, SiteRoot, TRUST_DIR};
use super::stage::write_views;
use super::state::State;
use super::{SiteError, io_err, views};
use crate::bundle::Manifest;
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::manifest::{MANIFEST, MAX_MANIFEST_BYTES};
use crate::bundle::reader::{MemberSink, OnProblem, read_bundle};
use crate::digest::{Sha256, hash_reader};
use crate::member_path::MemberPath;
use crate::progress::Reporter;

/// What `check` found.
#[derive(Debug, Serialize)]
pub struct Checked {
    pub root: PathBuf,
    /// Nothing damaged anywhere.
    pub ok: bool,
    pub bundles: Vec<BundleCheck>,
    /// Names under `bundles/` that are not bundle ids: nothing airlock made.
    pub strays: Vec<String>,
}

/// One retained bundle, checked.
#[derive(Debug, Serialize)]
pub struct BundleCheck {
    pub id: BundleId,
    /// `current`, `previous`, or neither.
    pub links: Vec<&'static str>,
    /// From the verified manifest (absent when the file did not verify).
    pub name: Option<String>,
    pub version: Option<String>,
    /// The retained file verified under the recorded policy and is the bundle of this id.
    pub verified: bool,
    pub signers: Vec<crate::sign::KeyId>,
    /// Files of the staged tree compared with the verified manifest.
    pub files_checked: usize,
    pub damage: Vec<Damage>,
}

/// One thing that is not as verified.
#[derive(Debug, Clone, Serialize)]
pub struct Damage {
    /// Relative to `bundles/ID/`.
    pub path: String,
    pub problem: String,
    /// Not damaged bytes but the site's policy: the signers no longer meet what its trust
    /// root or recorded keys require now (a revoked key, a raised threshold).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub policy: bool,
}

impl BundleCheck {
    /// Nothing established yet about bundle `id`.
    fn unchecked(id: &BundleId) -> Self {
        Self {
            id: id.clone(),
            links: Vec::new(),
            name: None,
            version: None,
            verified: false,
            signers: Vec::new(),
            files_checked: 0,
            damage: Vec::new(),
        }
    }

    pub fn ok(&self) -> bool {
        self.verified && self.damage.is_empty()
    }
}

/// Check every retained bundle of `root`, holding the root's lock (waiting up to `wait`), so
/// that no writer moves a tree while it is compared.
pub fn check(root: &Path, wait: std::time::Duration, reporter: &dyn Reporter) -> Result<Checked, SiteError> {
    let root = &SiteRoot::new(root);
    let _lock = root.lock_for_reading("check", wait)?;
    let state = State::load(root)?;
    let links = [(Link::Current, root.link(Link::Current)), (Link::Previous, root.link(Link::Previous))];
    let mut bundles = Vec::new();
    for id in root.retained() {
        let (mut checked, _) = bundle(root, &state, &id, reporter)?;
        checked.links = links.iter().filter(|(_, l)| l.as_ref() == Some(&id)).map(|(n, _)| n.name()).collect();
        bundles.push(checked);
    }
    // A link that names no retained bundle is damage too.
    for (link, target) in &links {
        let dangling = match target {
            Some(id) => !bundles.iter().any(|b| &b.id == id),
            None => std::fs::symlink_metadata(root.link_path(*link)).is_ok(),
        };
        if dangling {
            let what =
                target.as_ref().map_or_else(|| "no bundle".to_owned(), |id| format!("bundles/{id}, which is gone"));
            stray(&mut bundles, target.clone(), *link, format!("`{}` names {what}", link.name()));
        }
    }
    let strays = strays(root);
    let ok = bundles.iter().all(BundleCheck::ok) && strays.is_empty();
    Ok(Checked { root: root.path().to_owned(), ok, bundles, strays })
}

fn stray(bundles: &mut Vec<BundleCheck>, id: Option<BundleId>, link: Link, problem: String) {
    bundles.push(BundleCheck {
        id: id.unwrap_or_else(|| BundleId::parse("0000000000000000").expect("a valid id")),
        links: vec![link.name()],
        name: None,
        version: None,
        verified: false,
        signers: Vec::new(),
        files_checked: 0,
        damage: vec![Damage { path: String::new(), problem, policy: false }],
    });
}

/// Entries under `bundles/` that are not named like a bundle id: no install made them.
fn strays(root: &SiteRoot) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root.bundles()) else { return Vec::new() };
    let mut names: Vec<String> = dir
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| BundleId::parse(n).is_none())
        .collect();
    names.sort();
    names
}

/// The active bundle's verified manifest, once its file verified under the recorded policy
/// and its tree matched it; otherwise the damage, as an error that names `airlock check`.
/// The caller holds the root's lock.
pub fn active(
    root: &SiteRoot,
    reporter: &dyn Reporter,
) -> Result<(BundleId, VerifiedManifest, BundleCheck), SiteError> {
    let id = root.link(Link::Current).ok_or_else(|| SiteError::NoCurrent { root: root.path().to_owned() })?;
    let state = State::load(root)?;
    let (manifest, checked) = verified(root, &state, &id, reporter)?;
    Ok((id, manifest, checked))
}

/// A retained bundle's verified manifest, once its file verified under the recorded policy
/// and its tree matched it; otherwise the damage, as an error. The caller holds the lock.
pub fn verified(
    root: &SiteRoot,
    state: &State,
    id: &BundleId,
    reporter: &dyn Reporter,
) -> Result<(VerifiedManifest, BundleCheck), SiteError> {
    let (checked, manifest) = bundle(root, state, id, reporter)?;
    match manifest {
        Some(m) if checked.ok() => Ok((m, checked)),
        _ => Err(SiteError::Damaged { root: root.path().to_owned(), id: id.clone(), damage: checked.damage }),
    }
}

/// The active bundle checked (without the lock: a report reads while writers may wait), and
/// its id.
pub fn current(root: &SiteRoot, reporter: &dyn Reporter) -> Result<(BundleId, BundleCheck), SiteError> {
    let id = root.link(Link::Current).ok_or_else(|| SiteError::NoCurrent { root: root.path().to_owned() })?;
    let state = State::load(root)?;
    let (mut checked, _) = bundle(root, &state, &id, reporter)?;
    checked.links = vec![Link::Current.name()];
    Ok((id, checked))
}

/// A kept part checked: what `check` found, and its manifest and digest when they verified.
pub type KeptPart = (BundleCheck, Option<(VerifiedManifest, Sha256)>);

/// What a node keeps of a bundle it applied from a mirror (`None` for a bundle retained
/// whole): the check of that part under `policy`, and its verified manifest and digest.
pub fn kept_part(root: &SiteRoot, id: &BundleId, policy: &crate::sign::Policy) -> Result<Option<KeptPart>, SiteError> {
    let Some(kept) = State::load(root)?.bundles.get(id).filter(|b| b.partial).map(|b| b.kept) else {
        return Ok(None);
    };
    partial(root, id, policy, BundleCheck::unchecked(id), kept).map(Some)
}

/// Check one retained bundle; its verified manifest when the file verified.
fn bundle(
    root: &SiteRoot,
    state: &State,
    id: &BundleId,
    reporter: &dyn Reporter,
) -> Result<(BundleCheck, Option<VerifiedManifest>), SiteError> {
    let dir = root.bundle_dir(id);
    let mut out = BundleCheck::unchecked(id);
    let policy = match retained::policy(root, state, id, Trust::Site(super::trust::ExpiryRule::Ignore)) {
        Ok(p) => p,
        Err(e) => {
            out.damage.push(out_damage(RETAINED_BUNDLE, e.to_string()));
            return Ok((out, None));
        }
    };
    if let Some(kept) = state.bundles.get(id).filter(|b| b.partial).map(|b| b.kept) {
        let (checked, kept) = partial(root, id, &policy, out, kept)?;
        return Ok((checked, kept.map(|(m, _)| m)));
    }
    let file = dir.join(RETAINED_BUNDLE);
    let input = match crate::sign::policy::open_regular(&file) {
        Ok(Some(f)) => f,
        Ok(None) => {
            out.damage.push(out_damage(RETAINED_BUNDLE, "not a regular file".into()));
            return Ok((out, None));
        }
        Err(e) => {
            out.damage.push(out_damage(RETAINED_BUNDLE, format!("cannot be read: {e}")));
            return Ok((out, None));
        }
    };
    let mut sink = Hashes::default();
    let report =
        read_bundle(BufReader::with_capacity(1 << 20, input), &policy, &mut sink, OnProblem::Continue, reporter)
            .map_err(|e| SiteError::Io { path: file.clone(), source: e.source })?;
    let (Some(manifest), Some(sha256)) = (report.manifest, report.manifest_sha256) else {
        for p in &report.problems {
            out.damage.push(verification_damage(p));
        }
        return Ok((out, None));
    };
    for p in &report.problems {
        out.damage.push(verification_damage(p));
    }
    if let Err(e) = retained::check_id(id, &sha256, || format!("{} {}", manifest.name, manifest.version)) {
        out.damage.push(out_damage(RETAINED_BUNDLE, e.to_string()));
        return Ok((out, None));
    }
    out.verified = out.damage.is_empty();
    out.signers = report.signers;
    out.name = Some(manifest.name.to_string());
    out.version = Some(manifest.version.to_string());
    if !out.verified {
        return Ok((out, None));
    }
    let expected = expected_tree(&dir, &manifest, sink.0)?;
    let (files, damage) = compare(&dir, &expected);
    out.files_checked = files;
    out.damage.extend(damage);
    Ok((out, Some(manifest)))
}

/// A bundle a node kept in part, verified again under `policy` for a rollback: its manifest,
/// that manifest's sha256, and who signed it; damage is an error (exit 3).
pub(super) fn verify_kept(
    root: &SiteRoot,
    id: &BundleId,
    policy: &crate::sign::Policy,
) -> Result<(VerifiedManifest, Sha256, Vec<crate::sign::KeyId>), SiteError> {
    let out = BundleCheck::unchecked(id);
    let part = State::load(root)?.bundles.get(id).map(|b| b.kept).unwrap_or_default();
    let (checked, kept) = partial(root, id, policy, out, part)?;
    match kept {
        Some((m, sha256)) if checked.ok() => Ok((m, sha256, checked.signers)),
        _ => Err(SiteError::Damaged { root: root.path().to_owned(), id: id.clone(), damage: checked.damage }),
    }
}

/// A bundle a node (or relay) took from a mirror and kept in part (`state::Kept`), with its
/// manifest's sha256, read once: its manifest's signatures verified again under the recorded
/// policy, its id from the manifest's digest, and the files it keeps (and their views) compared
/// with the manifest.
fn partial(
    root: &SiteRoot,
    id: &BundleId,
    policy: &crate::sign::Policy,
    mut out: BundleCheck,
    part: super::state::Kept,
) -> Result<(BundleCheck, Option<(VerifiedManifest, Sha256)>), SiteError> {
    use super::mirror::MAX_SIGNATURE_BYTES;
    use crate::bundle::manifest::SIGNATURE;
    let dir = root.bundle_dir(id);
    let read = |rel: &str, limit: u64| match super::root::read_bounded(&dir.join(rel), limit) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(out_damage(rel, "missing".into())),
        Err(e) => Err(out_damage(rel, e.to_string())),
    };
    let (bytes, signature) = match (read(MANIFEST, MAX_MANIFEST_BYTES), read(SIGNATURE, MAX_SIGNATURE_BYTES)) {
        (Ok(b), Ok(s)) => (b, s),
        (b, s) => {
            out.damage.extend(b.err().into_iter().chain(s.err()));
            return Ok((out, None));
        }
    };
    let checked = policy.check(&Sha256::of_bytes(&bytes), &signature);
    if let Some(short) = policy.shortfall(&checked.signers) {
        let problem = format!(
            "failed verification: signed by {} of the {} key(s) of `{}` its policy needs (a revoked key no longer counts)",
            short.have.len(),
            short.need,
            short.role
        );
        let altered = checked.embedded_error.is_some()
            || checked.signatures.iter().any(|c| matches!(c.outcome, crate::sign::policy::Outcome::Invalid { .. }));
        out.damage.push(Damage { policy: !altered, ..out_damage(MANIFEST, problem) });
        return Ok((out, None));
    }
    let sha256 = Sha256::of_bytes(&bytes);
    let manifest = match serde_json::from_slice::<Manifest>(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|m| VerifiedManifest::establish(m, sha256, policy, &checked.signers).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => {
            out.damage.push(out_damage(MANIFEST, format!("failed verification: {e}")));
            return Ok((out, None));
        }
    };
    if let Err(e) = retained::check_id(id, &sha256, || format!("{} {}", manifest.name, manifest.version)) {
        out.damage.push(out_damage(MANIFEST, e.to_string()));
        return Ok((out, None));
    }
    out.verified = true;
    out.signers = checked.signers;
    out.name = Some(manifest.name.to_string());
    out.version = Some(manifest.version.to_string());
    let kept = super::mirror::kept(&manifest, part);
    let members = BTreeMap::from([
        (
            MemberPath::new(MANIFEST).map_err(|e| SiteError::State { path: dir.clone(), detail: e.to_string() })?,
            (sha256, bytes.len() as u64),
        ),
        (
            MemberPath::new(SIGNATURE).map_err(|e| SiteError::State { path: dir.clone(), detail: e.to_string() })?,
            (Sha256::of_bytes(&signature), signature.len() as u64),
        ),
    ]);
    let expected = expected_tree(&dir, &kept, members)?;
    let (files, damage) = compare(&dir, &expected);
    out.files_checked = files;
    out.damage.extend(damage);
    Ok((out, Some((manifest, sha256))))
}

fn out_damage(path: &str, problem: String) -> Damage {
    Damage { path: path.to_owned(), problem, policy: false }
}

/// A verification problem of a retained bundle file: a refusal by policy (no trusted key, a
/// role not met) is told apart from damaged bytes.
fn verification_damage(p: &crate::bundle::reader::Problem) -> Damage {
    use crate::bundle::reader::Rejection;
    // A signature that a trusted key made and that no longer verifies is altered bytes; a
    // signer the policy does not count (any more) is the policy.
    let policy = match &p.reason {
        Rejection::Untrusted { tried, claimed, .. } => !claimed.as_ref().is_some_and(|k| tried.contains(k)),
        Rejection::Threshold { .. } => true,
        _ => false,
    };
    Damage { policy, ..out_damage(RETAINED_BUNDLE, format!("failed verification: {p}")) }
}

/// What one path of a staged tree must be: a file's size (when known) is compared before it
/// is hashed, so that a huge or sparse file planted in a tree is named at once, not read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    File(Sha256, Option<u64>),
    Link(PathBuf),
}

/// Records each member's digest as it streams past (verified by the reader against the
/// manifest before the report is clean).
#[derive(Default)]
struct Hashes(BTreeMap<MemberPath, (Sha256, u64)>);

impl MemberSink for Hashes {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        let (sha256, size) = hash_reader(data)?;
        self.0.insert(path.clone(), (sha256, size));
        Ok(())
    }
}

/// Every file and link the tree of `manifest` holds: its members (those the stream carried
/// and, for a delta, those its base supplied) and the views install derives from them, made
/// again here in a scratch directory from the verified manifest.
fn expected_tree(
    dir: &Path,
    manifest: &VerifiedManifest,
    members: BTreeMap<MemberPath, (Sha256, u64)>,
) -> Result<BTreeMap<PathBuf, Expect>, SiteError> {
    let mut expected: BTreeMap<PathBuf, Expect> = BTreeMap::new();
    for (path, (sha256, size)) in members {
        expected.insert(PathBuf::from(path.as_str()), Expect::File(sha256, Some(size)));
    }
    for e in &manifest.entries {
        expected.insert(PathBuf::from(e.path.as_str()), Expect::File(e.sha256, Some(e.size)));
    }
    // The views, written as install writes them over placeholders of the members; the package
    // views need the real carried indexes (their digests are checked as members').
    let scratch = tempfile::tempdir().map_err(|source| SiteError::Scratch { path: std::env::temp_dir(), source })?;
    // Placeholders for every member made 50,000 empty files for a tree of 50,000 files that
    // no view is made from: 15 s of a check of 18 s.
    let viewed = |path: &&PathBuf| views::MADE_FROM.iter().any(|area| path.starts_with(area));
    for path in expected.keys().filter(viewed) {
        let at = scratch.path().join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        File::create(&at).map_err(io_err(&at))?;
    }
    for index in views::CARRIED_INDEXES.map(Path::new) {
        if let Some(Expect::File(want, size)) = expected.get(index)
            && file_size(&dir.join(index)) == *size
            && hash_file(&dir.join(index)).is_ok_and(|got| got == *want)
        {
            std::fs::copy(dir.join(index), scratch.path().join(index)).map_err(io_err(&dir.join(index)))?;
        }
    }
    write_views(scratch.path(), manifest, None)?;
    for entry in walkdir::WalkDir::new(scratch.path()).min_depth(1) {
        let entry = entry.map_err(|e| SiteError::Io { path: scratch.path().to_owned(), source: e.into() })?;
        let rel = entry.path().strip_prefix(scratch.path()).unwrap_or(entry.path()).to_owned();
        if expected.contains_key(&rel) {
            continue;
        }
        let want = if entry.path_is_symlink() {
            Expect::Link(std::fs::read_link(entry.path()).map_err(io_err(entry.path()))?)
        } else if entry.file_type().is_file() {
            // A Hugging Face blob is named by its digest; other views are what was written.
            if let Some(d) = hf_blob_digest(&rel) {
                Expect::File(d, manifest.entries.iter().find(|e| e.sha256 == d).map(|e| e.size))
            } else {
                let size = entry.metadata().ok().map(|m| m.len());
                Expect::File(hash_file(entry.path()).map_err(io_err(entry.path()))?, size)
            }
        } else {
            continue;
        };
        expected.insert(rel, want);
    }
    Ok(expected)
}

/// `models/models--ORG--NAME/blobs/SHA256`: the digest its name gives.
fn hf_blob_digest(rel: &Path) -> Option<Sha256> {
    let parts: Vec<_> = rel.iter().filter_map(|p| p.to_str()).collect();
    match parts.as_slice() {
        ["models", _, "blobs", hex] => hex.parse().ok(),
        _ => None,
    }
}

/// Paths in a retained directory that are not the bundle's tree: the file itself, its
/// co-signatures, the trust keys kept beside it, and the package views' `InRelease` and
/// `repomd.xml.asc` (signed with the site key at install; apt and dnf check them).
fn beside_the_tree(rel: &Path) -> bool {
    let name = rel.to_string_lossy();
    rel.starts_with(TRUST_DIR)
        || name == RETAINED_BUNDLE
        || (name.starts_with(&format!("{RETAINED_BUNDLE}.")) && name.ends_with(".sig") && !name.contains('/'))
        || views::SIGNED.iter().any(|signed| rel == Path::new(signed))
}

/// Compare the tree under `dir` with `expected`: the number of files compared, and the damage.
fn compare(dir: &Path, expected: &BTreeMap<PathBuf, Expect>) -> (usize, Vec<Damage>) {
    let mut damage = Vec::new();
    let mut seen = 0;
    // Hard links (a Hugging Face blob and its member) are hashed once.
    let mut by_inode: BTreeMap<(u64, u64), Sha256> = BTreeMap::new();
    let mut found: BTreeSet<PathBuf> = BTreeSet::new();
    for entry in walkdir::WalkDir::new(dir).min_depth(1).follow_links(false).sort_by_file_name() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                damage.push(out_damage(&e.path().map(|p| p.display().to_string()).unwrap_or_default(), e.to_string()));
                continue;
            }
        };
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path()).to_owned();
        if beside_the_tree(&rel) || entry.file_type().is_dir() {
            continue;
        }
        let shown = rel.display().to_string();
        found.insert(rel.clone());
        let Some(want) = expected.get(&rel) else {
            damage.push(out_damage(&shown, "is not part of the bundle".into()));
            continue;
        };
        seen += 1;
        match want {
            Expect::Link(target) => match std::fs::read_link(entry.path()) {
                Ok(t) if t == *target => {}
                Ok(t) => damage
                    .push(out_damage(&shown, format!("links to `{}`, expected `{}`", t.display(), target.display()))),
                Err(_) => damage.push(out_damage(&shown, format!("is not a link to `{}`", target.display()))),
            },
            Expect::File(sha256, size) => {
                if !entry.file_type().is_file() {
                    damage.push(out_damage(&shown, "is not a regular file".into()));
                    continue;
                }
                // The size first: a file of the wrong size is damage without reading a byte.
                let found = entry.metadata().ok().map(|m| m.len());
                if let (Some(want), Some(found)) = (size, found)
                    && *want != found
                {
                    damage.push(out_damage(&shown, format!("wrong size: expected {want} bytes, found {found}")));
                    continue;
                }
                let inode = entry.metadata().ok().map(|m| {
                    use std::os::unix::fs::MetadataExt as _;
                    (m.dev(), m.ino())
                });
                let got = match inode.and_then(|i| by_inode.get(&i).copied()) {
                    Some(d) => Ok(d),
                    None => hash_file(entry.path()),
                };
                match got {
                    Ok(got) => {
                        if let Some(i) = inode {
                            by_inode.insert(i, got);
                        }
                        if got != *sha256 {
                            damage.push(out_damage(&shown, format!("expected sha256 {sha256}, found {got}")));
                        }
                    }
                    Err(e) => damage.push(out_damage(&shown, format!("cannot be read: {e}"))),
                }
            }
        }
    }
    for path in expected.keys().filter(|p| !found.contains(*p)) {
        damage.push(out_damage(&path.display().to_string(), "is missing".into()));
    }
    (seen, damage)
}

/// A file's size, as `symlink_metadata` says (`None` when it cannot be read).
fn file_size(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.len())
}

fn hash_file(path: &Path) -> io::Result<Sha256> {
    let file = crate::sign::policy::open_regular(path)?.ok_or_else(|| io::Error::other("not a regular file"))?;
    // 64 KiB, under glibc's mmap threshold: a 1 MiB buffer allocated and freed for each file
    // hashed was a mapping each once that threshold is fixed (docs/performance.md).
    Ok(hash_reader(BufReader::with_capacity(64 << 10, file))?.0)
}
