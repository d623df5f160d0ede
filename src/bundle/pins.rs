//! From the lock's pins to the manifest's artifacts. The lock (`spec::lock`) and the manifest
//! are two contracts with two schemas; these conversions are the one place where a pinned
//! input becomes what a bundle says it carries, and where its member path is chosen.

use super::manifest::{DebArtifact, FileArtifact, ModelArtifact, ModelFile, WheelArtifact};
use crate::member_path::{MemberPath, MemberPathError};
use crate::spec::FileSpec;
use crate::spec::lock::{LockedDeb, LockedFile, LockedModel, LockedWheel};

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
                let member = model_member(&m.repo, &m.commit, &f.path)?;
                Ok(ModelFile { path: MemberPath::new(f.path.clone())?, member, sha256: f.sha256, size: f.size })
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
    /// A `[[file]]` entry as its lock pinned it (the spec adds its kind and notes).
    pub fn new(entry: &FileSpec, locked: &LockedFile) -> Self {
        Self {
            name: entry.name.clone(),
            source: entry.source.clone(),
            sha256: locked.sha256,
            size: locked.size,
            path: entry.name.member_path(),
            file_kind: entry.kind,
            notes: entry.notes.clone(),
        }
    }
}
