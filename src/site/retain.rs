//! Retention: a verified, staged tree named `bundles/ID`, with the co-signatures that counted
//! and the trust keys beside the bundle file. A tree already there is replaced by the one just
//! verified (it is never trusted as it is), in one exchange where the file system can.

use std::io;
use std::path::{Path, PathBuf};

use super::root::{ASIDE_PREFIX, BundleId, RETAINED_BUNDLE, SiteRoot, TRUST_DIR};
use super::stage::{Verified, publish_mode, sync_tree};
use super::{SiteError, io_err};
use crate::sign::policy::{SignatureCheck, cosignature_path, counted};
use crate::sign::{KeyId, Policy};

/// A bundle kept under `bundles/ID/`.
pub(super) struct Retained {
    pub id: BundleId,
    pub path: PathBuf,
    pub already_present: bool,
    /// Co-signatures that counted, retained beside the bundle file.
    pub cosignatures: Vec<PathBuf>,
}

/// Move the staged tree to `bundles/ID/`, with the co-signatures that counted and the trust
/// keys beside the bundle file. The co-signatures and keys of an earlier copy are carried over
/// (they count again only if they verify, and keys only if `state.json` names them).
pub(super) fn retain(
    staged: tempfile::TempDir,
    verified: &Verified,
    trust: &Policy,
    root: &SiteRoot,
) -> Result<Retained, SiteError> {
    let id = BundleId::of(&verified.manifest_sha256);
    let bundles = root.bundles();
    std::fs::create_dir_all(&bundles).map_err(io_err(&bundles))?;
    let path = root.bundle_dir(&id);
    let dir = staged.path();
    let mut cosignatures = retain_cosignatures(dir, trust, &verified.signatures).map_err(io_err(dir))?;
    retain_trust(dir, trust).map_err(io_err(dir))?;
    let already_present = std::fs::symlink_metadata(&path).is_ok();
    if already_present {
        cosignatures.extend(carry_cosignatures(&path, dir).map_err(io_err(dir))?);
        carry_trust(&path, dir).map_err(io_err(dir))?;
    }
    publish_mode(dir).map_err(io_err(dir))?;
    // The whole tree on disk before it is named under `bundles/`.
    sync_tree(dir).map_err(io_err(dir))?;
    // No longer a temporary directory: moved into place below, or removed if that fails.
    let kept = staged.keep();
    let moved = if already_present { exchange(&kept, &id, root) } else { std::fs::rename(&kept, &path) };
    if let Err(e) = moved {
        let _ = std::fs::remove_dir_all(&kept);
        return Err(io_err(&path)(e));
    }
    root.commit_dir(&bundles)?;
    root.commit_dir(&root.staging())?;
    // After an exchange `kept` holds the old tree.
    if already_present {
        std::fs::remove_dir_all(&kept).map_err(io_err(&kept))?;
    }
    let cosignatures = cosignatures.iter().map(|p| path.join(p.file_name().unwrap_or_default())).collect();
    Ok(Retained { id, path, already_present, cosignatures })
}

/// Swap `new` with `bundles/ID` in one step where the file system can (`renameat2` with
/// `RENAME_EXCHANGE`), so `bundles/ID` never goes missing while `current` may point at it.
/// Where it cannot, the old tree goes to `staging/aside-ID` first: a crash before the new
/// one is in place leaves it there, and the next writer (`SiteRoot::open_for_writing`) moves
/// it back.
fn exchange(new: &Path, id: &BundleId, root: &SiteRoot) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let target = root.bundle_dir(id);
    match renameat_with(CWD, new, CWD, &target, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            let aside = root.staging().join(format!("{ASIDE_PREFIX}{id}"));
            std::fs::rename(&target, &aside)?;
            crate::atomic::sync_dir(&root.staging())?;
            std::fs::rename(new, &target)?;
            crate::atomic::sync_dir(&root.bundles())?;
            std::fs::rename(&aside, new)
        }
        Err(e) => Err(e.into()),
    }
}

/// Copy the co-signatures that counted beside the retained bundle file in `dir`, so that the
/// retained bundle still meets the policy it was installed under.
fn retain_cosignatures(dir: &Path, trust: &Policy, checked: &[SignatureCheck]) -> io::Result<Vec<PathBuf>> {
    let retained = dir.join(RETAINED_BUNDLE);
    let mut written = Vec::new();
    for co in counted(trust, checked) {
        let path = cosignature_path(&retained, &co.key_id);
        crate::atomic::write(&path, &co.signature)?;
        written.push(path);
    }
    Ok(written)
}

/// Co-signature files of an earlier install of the same bundle that the new tree lacks.
fn carry_cosignatures(old: &Path, new: &Path) -> io::Result<Vec<PathBuf>> {
    let mut carried = Vec::new();
    for co in crate::sign::policy::cosignatures_beside(&old.join(RETAINED_BUNDLE))? {
        let path = cosignature_path(&new.join(RETAINED_BUNDLE), &co.key_id);
        if !path.exists() {
            crate::atomic::write(&path, &co.signature)?;
            carried.push(path);
        }
    }
    Ok(carried)
}

/// The largest public key file carried over: a PEM P-256 key is under 200 bytes.
const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// Public keys of an earlier install of the same bundle that the new tree lacks: the policy
/// `state.json` records may still name them (they are used only if it does).
fn carry_trust(old: &Path, new: &Path) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(old.join(TRUST_DIR)) else { return Ok(()) };
    for entry in entries {
        let entry = entry?;
        let to = new.join(TRUST_DIR).join(entry.file_name());
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_key_file = name.strip_suffix(".pub").and_then(KeyId::parse).is_some();
        if is_key_file && !to.exists() && entry.file_type()?.is_file() {
            let bytes = super::root::read_bounded(&entry.path(), MAX_KEY_FILE_BYTES)
                .map_err(|e| io::Error::other(e.to_string()))?
                .unwrap_or_default();
            crate::atomic::write(&to, &bytes)?;
        }
    }
    Ok(())
}

/// Keep the trust keys the bundle was verified with, for the policy `state.json` records.
fn retain_trust(dir: &Path, trust: &Policy) -> io::Result<()> {
    let keys = dir.join(TRUST_DIR);
    std::fs::create_dir_all(&keys)?;
    for key in &trust.keys {
        crate::atomic::write(&keys.join(format!("{}.pub", key.key_id())), key.spki_pem().as_bytes())?;
    }
    Ok(())
}
