//! What moved upstream since the lock (`airlock outdated`): a newer version of each locked
//! package in its suite or the suite's security twin.

use std::collections::{BTreeMap, BTreeSet};

use super::DebError;
use super::archive::{is_flat, load, read_error};
use super::index::{self, Pkg};
use crate::fetch::{HttpError, blocking};
use crate::sources::{SourceError, Sources};
use crate::spec::DebSpec;
use crate::spec::lock::LockFile;

/// A newer version of a locked package (`airlock outdated`): in a configured suite, or in the
/// suite's security twin (`SUITE-security` in the same repository, as Ubuntu and Debian
/// mirrors lay them out; one not served is skipped).
#[derive(Debug, Clone)]
pub struct DebNews {
    pub name: String,
    pub architecture: String,
    pub locked: String,
    pub newest: String,
    pub repo: String,
    pub suite: String,
    /// Found in a security suite (its name says `security`).
    pub security: bool,
}

/// The configured suites (`true`), each followed by its security twin (`SUITE-security` in
/// the same repository; `false`: read if served).
pub(super) fn with_security_twins(sources: &Sources<'_>) -> Vec<(DebSpec, bool)> {
    let mut suites = Vec::new();
    for entry in sources.spec.spec.deb.iter().map(toml::Spanned::get_ref) {
        suites.push((entry.clone(), true));
        if !is_flat(entry) && !entry.suite.contains("security") {
            let mut twin = entry.clone();
            twin.suite = format!("{}-security", entry.suite);
            // Debian serves it from an archive of its own beside the main one
            // (`…/debian-security`); Ubuntu from the same archive.
            if let Some(debian) = debian_security(&entry.repo) {
                let mut other = twin.clone();
                other.repo = debian;
                suites.push((other, false));
            }
            suites.push((twin, false));
        }
    }
    suites
}

/// Debian's security archive beside `repo` when `repo` is a Debian archive (its path ends in
/// `/debian`): `http://deb.debian.org/debian` → `http://deb.debian.org/debian-security`.
pub(crate) fn debian_security(repo: &str) -> Option<String> {
    let trimmed = repo.trim_end_matches('/');
    trimmed.ends_with("/debian").then(|| format!("{trimmed}-security"))
}

/// The configured suites (`REPO SUITE`) not checked for security updates: a suite is checked
/// when it is a security suite itself, or a security suite of its name (its twin, or another
/// archive's `SUITE-security`) was read.
fn security_unchecked(sources: &Sources<'_>, security_read: &BTreeSet<String>) -> Vec<String> {
    sources
        .spec
        .spec
        .deb
        .iter()
        .map(toml::Spanned::get_ref)
        .filter(|e| !is_flat(e) && !e.suite.contains("security"))
        .filter(|e| !security_read.contains(&format!("{}-security", e.suite)))
        .map(|e| format!("{} {}", e.repo.trim_end_matches('/'), e.suite))
        .collect()
}

/// What `newer` found, and the configured suites for which no security suite could be read
/// (`REPO SUITE`): for those, "no security update" means "not checked".
#[derive(Debug, Default)]
pub struct DebScan {
    pub news: Vec<DebNews>,
    pub security_unchecked: Vec<String>,
}

pub async fn newer(sources: &Sources<'_>, lock: &LockFile) -> Result<DebScan, SourceError> {
    let suites = with_security_twins(sources);
    let mut done = BTreeSet::new();
    // Security suites read: (repository, suite).
    let mut security_read: BTreeSet<String> = BTreeSet::new();
    // (name, architecture) -> the newest version seen, where.
    let mut best: BTreeMap<(String, String), (debversion::Version, String, String, bool)> = BTreeMap::new();
    let wanted: BTreeSet<(String, String)> =
        lock.lock.deb.iter().map(|d| (d.package.name.clone(), d.architecture.clone())).collect();
    for (entry, configured) in suites {
        if !done.insert((entry.repo.clone(), entry.suite.clone(), entry.arch.clone())) {
            continue;
        }
        let indexes = match load(sources, &entry).await {
            Ok((indexes, _)) => indexes,
            Err(SourceError::Http(HttpError::Status { status: 404, .. })) if !configured => {
                tracing::debug!("{} {}: no such suite", entry.repo, entry.suite);
                continue;
            }
            Err(e) if !configured => {
                tracing::warn!(
                    "{} {}: the security suite beside the configured one cannot be read: {e}",
                    entry.repo,
                    entry.suite
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        let wanted = wanted.clone();
        let found = blocking(move || {
            let mut found = Vec::new();
            for index in &indexes {
                index::paragraphs(index, |p| {
                    if let Some(pkg) = Pkg::from_paragraph(&p, 0)?
                        && wanted.contains(&(pkg.name.clone(), pkg.architecture.clone()))
                    {
                        found.push(pkg);
                    }
                    Ok(())
                })
                .map_err(|e| read_error(&index.url, e))?;
            }
            Ok::<_, DebError>(found)
        })
        .await?;
        let security = entry.suite.contains("security");
        if security {
            security_read.insert(entry.suite.clone());
        }
        for pkg in found {
            let key = (pkg.name.clone(), pkg.architecture.clone());
            if best.get(&key).is_none_or(|(v, ..)| pkg.version > *v) {
                best.insert(key, (pkg.version, entry.repo.clone(), entry.suite.clone(), security));
            }
        }
    }
    let mut out = Vec::new();
    for d in &lock.lock.deb {
        let Some((newest, repo, suite, security)) = best.get(&(d.package.name.clone(), d.architecture.clone())) else {
            continue;
        };
        let Ok(locked) = d.version().parse::<debversion::Version>() else { continue };
        if *newest > locked {
            out.push(DebNews {
                name: d.package.name.clone(),
                architecture: d.architecture.clone(),
                locked: d.version().to_owned(),
                newest: newest.to_string(),
                repo: repo.clone(),
                suite: suite.clone(),
                security: *security,
            });
        }
    }
    Ok(DebScan { news: out, security_unchecked: security_unchecked(sources, &security_read) })
}

#[cfg(test)]
mod tests {
    #[test]
    fn debians_security_archive_stands_beside_its_main_one() {
        let twin = super::debian_security;
        assert_eq!(twin("http://deb.debian.org/debian/").as_deref(), Some("http://deb.debian.org/debian-security"));
        assert_eq!(twin("http://mirror.site/debian").as_deref(), Some("http://mirror.site/debian-security"));
        // Ubuntu serves `SUITE-security` in the same archive; other paths are not guessed at.
        assert_eq!(twin("http://archive.ubuntu.com/ubuntu"), None);
        assert_eq!(twin("http://mirror.site/debian-ports"), None);
    }
}
