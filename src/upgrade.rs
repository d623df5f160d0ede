//! `airlock self-upgrade BUNDLE`: the airlock a bundle carries (a `[[file]]` of kind `airlock`
//! whose `notes.target` is this build's target) installed over this one. The bundle is verified
//! whole while only that member is written, into a temporary file beside the binary it
//! replaces; the new binary must run (`--version`) before it is renamed into place, and the
//! old one is kept beside it as `PATH.previous`.

use std::io::{self, Read, Write as _};
use std::path::{Path, PathBuf};

use crate::bundle::Manifest;
use crate::bundle::manifest::{Artifact, FileArtifact};
use crate::bundle::parts::{Input, PartsError};
use crate::bundle::reader::{MemberSink, OnProblem, read_bundle, read_head};
use crate::failure::{Class, Classify};
use crate::member_path::MemberPath;
use crate::progress::Reporter;
use crate::sign::Policy;

/// This build's target (`x86_64-unknown-linux-gnu`).
pub const TARGET: &str = env!("AIRLOCK_TARGET");

#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error("`{}` carries no airlock for {target} (it carries: {offered})", path.display())]
    NoBinary { path: PathBuf, target: String, offered: String },
    #[error(
        "`{}` carries {} airlocks for {target} (`{}`): which one to install is not the order of its manifest \
         to say; nothing was replaced",
        path.display(),
        members.len(),
        members.join("`, `")
    )]
    Ambiguous { path: PathBuf, target: String, members: Vec<String> },
    #[error("`{}` failed verification; nothing was replaced: {detail}", path.display())]
    Rejected { path: PathBuf, detail: String },
    #[error("the airlock `{}` carries does not run here (`--version`: {detail}); nothing was replaced", path.display())]
    NotRunnable { path: PathBuf, detail: String },
    #[error(
        "`{}` expired at {expires} (this command started at {now}): an old bundle replayed is refused, as \
         `install` refuses it; nothing was replaced (--allow-expired --reason TEXT to use it on purpose)",
        path.display()
    )]
    Expired { path: PathBuf, expires: crate::clock::Timestamp, now: crate::clock::Timestamp },
    #[error(
        "`{}` carries airlock {new}, older than the {current} at `{}`: refused; nothing was replaced \
         (--allow-downgrade --reason TEXT to go back on purpose)",
        path.display(),
        to.display()
    )]
    Older { path: PathBuf, to: PathBuf, new: semver::Version, current: semver::Version },
    #[error("`{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Classify for UpgradeError {
    fn class(&self) -> Class {
        match self {
            UpgradeError::Parts(e) => e.class(),
            UpgradeError::Rejected { .. }
            | UpgradeError::Ambiguous { .. }
            | UpgradeError::Expired { .. }
            | UpgradeError::Older { .. } => Class::Verification,
            UpgradeError::NoBinary { .. } | UpgradeError::NotRunnable { .. } | UpgradeError::Io { .. } => {
                Class::Runtime
            }
        }
    }
}

/// What `self-upgrade` did.
#[derive(Debug, serde::Serialize)]
pub struct Upgraded {
    pub path: PathBuf,
    /// What the new binary says (`airlock --version`).
    pub version: String,
    /// The binary it replaced, kept.
    pub previous: Option<PathBuf>,
    pub member: String,
}

/// The carried binary for this target, in `manifest`. Two or more are refused (their members
/// given back): which one is installed is not the manifest's order to say, and `build` never
/// writes such a bundle (`SpecFile::check`).
fn carried(manifest: &Manifest) -> Result<Option<&FileArtifact>, Vec<String>> {
    let found: Vec<&FileArtifact> = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::File(f) if f.airlock_target() == Some(TARGET) => Some(f),
            _ => None,
        })
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => Err(many.iter().map(|f| f.path.to_string()).collect()),
    }
}

/// Writes one member (the carried binary) and discards the rest; the reader hashes all.
struct Capture {
    want: MemberPath,
    file: std::fs::File,
    found: bool,
}

impl MemberSink for Capture {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        if *path == self.want {
            io::copy(data, &mut self.file)?;
            self.found = true;
        } else {
            io::copy(data, &mut io::sink())?;
        }
        Ok(())
    }
}

/// What `self-upgrade` lets through on purpose, each on the operator's word (`--reason`).
#[derive(Debug, Clone, Default)]
pub struct Waivers {
    /// `--allow-expired`: a bundle past its `expires`.
    pub expired: Option<String>,
    /// `--allow-downgrade`: an airlock older than the one it replaces.
    pub downgrade: Option<String>,
}

pub fn self_upgrade(
    input: &Input,
    policy: &Policy,
    to: &Path,
    waivers: &Waivers,
    reporter: &dyn Reporter,
) -> Result<Upgraded, UpgradeError> {
    let bundle = input.bundle().to_owned();
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| UpgradeError::Io { path, source }
    };
    // Which member to keep: named by the (not yet verified) manifest, confirmed by the verified one.
    let head =
        read_head(input.open()?).map_err(|p| UpgradeError::Rejected { path: bundle.clone(), detail: p.to_string() })?;
    let ambiguous = |members| UpgradeError::Ambiguous { path: bundle.clone(), target: TARGET.to_owned(), members };
    let Some(wanted) = carried(&head.manifest).map_err(ambiguous)? else {
        let offered: Vec<&str> = head
            .manifest
            .artifacts
            .iter()
            .filter_map(|a| match a {
                Artifact::File(f) => f.airlock_target(),
                _ => None,
            })
            .collect();
        let offered = if offered.is_empty() { "no airlock at all".to_owned() } else { offered.join(", ") };
        return Err(UpgradeError::NoBinary { path: bundle, target: TARGET.to_owned(), offered });
    };
    let member = wanted.path.clone();
    let mut tmp = crate::atomic::temp_beside(to).map_err(io_err(to))?;
    let mut sink = Capture { want: member.clone(), file: tmp.as_file().try_clone().map_err(io_err(to))?, found: false };
    let (stream, _) = input.open_trusted(&policy.keys)?;
    let report = read_bundle(stream, policy, &mut sink, OnProblem::Stop, reporter)
        .map_err(|e| UpgradeError::Io { path: e.path.under(Path::new("")), source: e.source })?;
    let confirmed = match report.manifest.as_deref().map(carried) {
        Some(Ok(Some(f))) => f.path == member,
        Some(Err(members)) => return Err(ambiguous(members)),
        Some(Ok(None)) | None => false,
    };
    if !report.verified() || !confirmed || !sink.found {
        let detail = report.problems.first().map_or_else(
            || format!("the verified manifest does not carry `{member}` as the airlock for {TARGET}"),
            ToString::to_string,
        );
        return Err(UpgradeError::Rejected { path: bundle, detail });
    }
    // The same policy as `install`: an expired bundle is refused unless waived on purpose.
    let now = crate::clock::Timestamp::started();
    if let Some(expires) = report.manifest.as_ref().and_then(|m| m.expires).filter(|e| *e <= now) {
        match &waivers.expired {
            None => return Err(UpgradeError::Expired { path: bundle, expires, now }),
            Some(reason) => tracing::warn!("--allow-expired ({reason}): the bundle expired at {expires}"),
        }
    }
    tmp.flush().map_err(io_err(to))?;
    tmp.as_file().sync_all().map_err(io_err(to))?;
    // Every handle open for writing is closed before the file is run (else: text file busy).
    drop(sink);
    let tmp = tmp.into_temp_path();
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(io_err(&tmp))?;
    let version = runs(&tmp).map_err(|detail| UpgradeError::NotRunnable { path: bundle.clone(), detail })?;
    // Never an older airlock over a newer one, unless on purpose: the one there now says its
    // version (`airlock X.Y.Z …`); one that says none is replaced.
    if let (Some(new), Some(current)) = (semver_of(&version), runs(to).ok().as_deref().and_then(semver_of))
        && new < current
    {
        match &waivers.downgrade {
            None => return Err(UpgradeError::Older { path: bundle, to: to.to_owned(), new, current }),
            Some(reason) => tracing::warn!("--allow-downgrade ({reason}): airlock {new} replaces {current}"),
        }
    }
    let previous = keep_previous(to).map_err(io_err(to))?;
    tmp.persist(to).map_err(|e| io_err(to)(e.error))?;
    crate::atomic::sync_dir(to.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
        .map_err(io_err(to))?;
    Ok(Upgraded { path: to.to_owned(), version, previous, member: member.to_string() })
}

/// The version in `airlock X.Y.Z (…)`.
fn semver_of(version: &str) -> Option<semver::Version> {
    version.strip_prefix("airlock ")?.split_whitespace().next()?.parse().ok()
}

/// `PATH --version`, which must succeed and name airlock.
fn runs(path: &Path) -> Result<String, String> {
    let out = std::process::Command::new(path).arg("--version").output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && text.starts_with("airlock ") {
        Ok(text)
    } else {
        Err(format!("{} {}", out.status, crate::escape::value(&text)))
    }
}

/// The binary about to be replaced, kept as `PATH.previous` (a hard link, or a copy across
/// file systems), so that it can be put back.
fn keep_previous(to: &Path) -> io::Result<Option<PathBuf>> {
    if !to.exists() {
        return Ok(None);
    }
    let mut name = to.file_name().unwrap_or_default().to_owned();
    name.push(".previous");
    let previous = to.with_file_name(name);
    match std::fs::remove_file(&previous) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if std::fs::hard_link(to, &previous).is_err() {
        std::fs::copy(to, &previous)?;
    }
    Ok(Some(previous))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{Artifact, FileArtifact, Manifest, TARGET, carried};
    use crate::digest::Sha256;
    use crate::member_path::MemberPath;
    use crate::spec::{FileKind, FileName};

    fn airlock(name: &str, target: &str, kind: FileKind) -> Artifact {
        Artifact::File(FileArtifact {
            name: FileName::new(name).unwrap(),
            source: name.into(),
            sha256: Sha256::of_bytes(name.as_bytes()),
            size: 1,
            path: MemberPath::new(format!("files/{name}")).unwrap(),
            file_kind: kind,
            notes: BTreeMap::from([("target".to_owned(), target.to_owned())]),
            files: Vec::new(),
            tree: None,
            signature: None,
        })
    }

    fn with(artifacts: Vec<Artifact>) -> Manifest {
        let d = Sha256::of_bytes(b"");
        Manifest {
            schema: crate::bundle::manifest::SCHEMA_V1.into(),
            name: crate::spec::BundleName::new("tools").unwrap(),
            version: semver::Version::new(1, 0, 0),
            description: None,
            created: crate::clock::Timestamp::from_unix(0),
            builder: crate::bundle::manifest::Builder {
                tool: "airlock/test".into(),
                key_id: crate::sign::KeyId::of_spki_der(b"k"),
            },
            spec_sha256: d,
            lock_sha256: d,
            artifacts,
            entries: Vec::new(),
            base: None,
            validation: crate::bundle::manifest::Validation::default(),
            expires: None,
        }
    }

    #[test]
    fn the_one_airlock_for_this_target_is_taken_and_two_are_refused() {
        let other = if TARGET.starts_with("x86_64") { "aarch64-unknown-linux-gnu" } else { "x86_64-unknown-linux-gnu" };
        let one = with(vec![
            airlock("other", other, FileKind::Airlock),
            airlock("here", TARGET, FileKind::Airlock),
            // A note that says a target on a file of another kind selects nothing.
            airlock("doc", TARGET, FileKind::Document),
        ]);
        assert_eq!(carried(&one).unwrap().map(|f| f.path.as_str()), Some("files/here"));
        assert_eq!(carried(&with(vec![airlock("other", other, FileKind::Airlock)])).unwrap(), None);
        let two = with(vec![airlock("a", TARGET, FileKind::Airlock), airlock("b", TARGET, FileKind::Airlock)]);
        assert_eq!(carried(&two).unwrap_err(), ["files/a", "files/b"]);
    }
}
