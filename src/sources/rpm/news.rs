//! What moved upstream since the lock (`airlock outdated`): a newer EVR of each locked rpm in
//! its repository, and the security advisories that fix something newer.

use super::RpmError;
use crate::fetch::blocking;
use crate::rpmmd as repodata;
use crate::sources::index::Index;
use crate::sources::{SourceError, Sources};
use crate::spec::lock::{LockFile, LockedRpm};
use repodata::Advisory;

use super::repository::{metadata, packages, read_error, repo};
use super::{cmp_evr, own};

/// A newer EVR of a locked package in its repository (`airlock outdated`), and the security
/// advisories of the repository's `updateinfo.xml` that fix something newer than the lock.
#[derive(Debug, Clone)]
pub struct RpmNews {
    pub name: String,
    pub architecture: String,
    pub locked: String,
    pub newest: String,
    pub repo: String,
    /// Security advisories (`updateinfo.xml` `type="security"`) naming a newer EVR: id and severity.
    pub advisories: Vec<String>,
}

pub async fn newer(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<RpmNews>, SourceError> {
    let mut out = Vec::new();
    for (i, entry) in sources.spec.spec.rpm.iter().map(toml::Spanned::get_ref).enumerate() {
        let locked: Vec<&LockedRpm> =
            lock.lock.rpm.iter().filter(|r| r.baseurl == entry.baseurl && r.arch == entry.arch).collect();
        if locked.is_empty() {
            continue;
        }
        let repo = repo(sources, entry).await?;
        let pkgs = packages(sources, entry, &repo, i).await?;
        let advisories = match repo.repomd.get("updateinfo") {
            Some(data) => updateinfo(metadata(sources, &repo, data).await?).await?,
            None => Vec::new(),
        };
        for r in locked {
            let mine = (r.epoch, r.version.clone(), r.release.clone());
            let newest = pkgs
                .iter()
                .filter(|p| p.package.name == r.name && p.package.arch == r.architecture)
                .map(|p| &p.package)
                .max_by(|a, b| cmp_evr(&own(a), &own(b)));
            let Some(newest) = newest.filter(|n| cmp_evr(&own(n), &mine).is_gt()) else { continue };
            let fixes: Vec<String> = advisories
                .iter()
                .filter(|a| a.kind == "security")
                .filter(|a| {
                    a.packages.iter().any(|f| {
                        f.name == r.name && cmp_evr(&(f.epoch, f.version.clone(), f.release.clone()), &mine).is_gt()
                    })
                })
                .map(|a| match &a.severity {
                    Some(s) if !s.is_empty() => format!("{} ({s})", a.id),
                    _ => a.id.clone(),
                })
                .collect();
            out.push(RpmNews {
                name: r.name.clone(),
                architecture: r.architecture.clone(),
                locked: r.evr(),
                newest: newest.evr(),
                repo: repo.url.clone(),
                advisories: fixes,
            });
        }
    }
    Ok(out)
}

pub(super) async fn updateinfo(index: Index) -> Result<Vec<Advisory>, RpmError> {
    blocking(move || {
        let mut out = Vec::new();
        index.stream(|r| repodata::updateinfo(r, |a| out.push(a))).map_err(|e| read_error(&index.url, e))?;
        Ok(out)
    })
    .await
}
