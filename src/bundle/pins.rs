//! From the lock's pins to the manifest's artifacts. The lock (`spec::lock`) and the manifest
//! are two contracts with two schemas; these conversions are the one place where a pinned
//! input becomes what a bundle says it carries, and where its member path is chosen.

use super::manifest::{DebArtifact, FileArtifact, ModelArtifact, ModelFile, RpmArtifact, WheelArtifact};
use crate::member_path::{MemberPath, MemberPathError};
use crate::spec::FileSpec;
use crate::spec::lock::{LockedDeb, LockedFile, LockedModel, LockedRpm, LockedWheel};

/// Where a model file lives in a bundle: `models/ORG/NAME/COMMIT/PATH`.
pub fn model_member(repo: &str, commit: &str, path: &str) -> Result<MemberPath, MemberPathError> {
    MemberPath::new(format!("models/{repo}/{commit}/{path}"))
}

/// Where a wheel lives in a bundle: `wheels/FILENAME`.
fn wheel_member(filename: &str) -> Result<MemberPath, MemberPathError> {
    MemberPath::new(format!("wheels/{filename}"))
}

/// Where a Debian package lives in a bundle: `debs/` and its upstream `Filename` (`pool/…`).
pub fn deb_member(filename: &str) -> Result<MemberPath, MemberPathError> {
    MemberPath::new(format!("debs/{filename}"))
}

/// Where an rpm lives in a bundle: `rpms/` and its repository `location` (never under
/// `rpms/repodata/`, which the site's view writes).
pub fn rpm_member(location: &str) -> Result<MemberPath, MemberPathError> {
    let path = MemberPath::new(format!("rpms/{location}"))?;
    if location.starts_with("repodata/")
        || !std::path::Path::new(location).extension().is_some_and(|e| e.eq_ignore_ascii_case("rpm"))
    {
        return Err(MemberPathError {
            path: path.to_string(),
            reason: "an rpm location must end in `.rpm` and lie outside `repodata/`",
        });
    }
    Ok(path)
}

impl TryFrom<&LockedRpm> for RpmArtifact {
    type Error = MemberPathError;

    fn try_from(r: &LockedRpm) -> Result<Self, Self::Error> {
        Ok(Self {
            name: r.name.clone(),
            epoch: r.epoch,
            version: r.version.clone(),
            release: r.release.clone(),
            architecture: r.architecture.clone(),
            repo: r.url.clone(),
            sha256: r.sha256,
            size: r.size,
            path: rpm_member(&r.location)?,
            module: r.module.clone(),
            vendor: r.vendor.clone(),
            distro: r.distro.clone(),
            required_by: r.required_by.clone(),
        })
    }
}

impl TryFrom<&LockedWheel> for WheelArtifact {
    type Error = MemberPathError;

    fn try_from(w: &LockedWheel) -> Result<Self, Self::Error> {
        Ok(Self {
            name: w.name.clone(),
            version: w.version.clone(),
            filename: w.filename.clone(),
            url: w.url.clone(),
            sha256: w.sha256,
            size: w.size,
            path: wheel_member(&w.filename)?,
            dependencies: w.dependencies.clone(),
            signature: w.signature.clone(),
        })
    }
}

impl TryFrom<&LockedDeb> for DebArtifact {
    type Error = MemberPathError;

    fn try_from(d: &LockedDeb) -> Result<Self, Self::Error> {
        Ok(Self {
            name: d.package.name.clone(),
            version: d.version().to_owned(),
            architecture: d.architecture.clone(),
            repo: d.repo.clone(),
            suite: d.suite.clone(),
            sha256: d.sha256,
            size: d.size,
            path: deb_member(&d.filename)?,
            origin: d.origin.clone(),
            codename: d.codename.clone(),
            required_by: d.required_by.clone(),
        })
    }
}

impl TryFrom<&LockedModel> for ModelArtifact {
    type Error = MemberPathError;

    fn try_from(m: &LockedModel) -> Result<Self, Self::Error> {
        let files = m
            .files
            .iter()
            .map(|f| {
                // Not held (`ModelArtifact::member`), but it must be a member path.
                model_member(&m.repo, &m.commit, &f.path)?;
                Ok(ModelFile { path: MemberPath::new(f.path.clone())?, sha256: f.sha256, size: f.size })
            })
            .collect::<Result<_, MemberPathError>>()?;
        Ok(Self {
            hub: m.hub.clone(),
            repo: MemberPath::new(m.repo.clone())?,
            revision: MemberPath::new(m.revision.clone())?,
            commit: MemberPath::new(m.commit.clone())?,
            files,
        })
    }
}

impl FileArtifact {
    /// A `[[file]]` entry as its lock pinned it (the spec adds its kind and notes); a
    /// directory's files, moved out of the pin, each at `files/NAME/PATH`.
    pub fn new(entry: &FileSpec, locked: LockedFile) -> Result<Self, MemberPathError> {
        let path = entry.name.member_path();
        let files = locked
            .files
            .into_iter()
            .map(|f| {
                // Not held (`FileArtifact::member`), but it must be a member path.
                MemberPath::new(format!("{path}/{}", f.path))?;
                Ok(ModelFile { path: MemberPath::new(f.path)?, sha256: f.sha256, size: f.size })
            })
            .collect::<Result<_, MemberPathError>>()?;
        Ok(Self {
            name: entry.name.clone(),
            source: entry.source.clone(),
            sha256: locked.sha256,
            size: locked.size,
            path,
            file_kind: entry.kind,
            notes: entry.notes.clone(),
            files,
            tree: None,
            signature: locked.signature,
        })
    }
}
