//! `[[wheel]]` entries: exact pins (`name==version`), or the packages of a lock file
//! (`pylock`), resolved against a simple index — PEP 691 JSON when the server offers it, else
//! PEP 503 HTML — filtered by the wheel filename's tags, each file's sha256 taken from the index
//! (and, for a lock file, checked against the hash the file lists) and verified while
//! downloading.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::pylock::{self, Listed, Pinned};
use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::Artifact;
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::Wanted;
use crate::spec::WheelSpec;
use crate::spec::lock::{LockFile, LockedWheel};
use crate::wheel::{PythonVersion, WheelName, normalize};

const ACCEPT: &str = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1";
/// Largest project page accepted.
const MAX_PAGE: u64 = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error("invalid requirement `{0}`: expected an exact pin `name==version`")]
    Requirement(String),
    #[error("{index}: `{name}=={version}` is not in the index (it has {available})")]
    NoSuchVersion { index: String, name: String, version: String, available: String },
    #[error("{index}: no wheel of `{name}=={version}` matches {filter} (it has {available})")]
    NoMatchingWheel { index: String, name: String, version: String, filter: String, available: String },
    #[error("{url}: {detail}")]
    Index { url: String, detail: String },
    #[error("lock file `{}`: {detail}", path.display())]
    Lockfile { path: std::path::PathBuf, detail: String },
    #[error("`{filename}` ({index}): lock file `{}` lists sha256 {expected}, the index has {actual}", lockfile.display())]
    HashMismatch { filename: String, index: String, lockfile: std::path::PathBuf, expected: String, actual: String },
    #[error("`{filename}`, which lock file `{}` lists, is not in the index {index} (it has {available})", lockfile.display())]
    NotInIndex { filename: String, index: String, lockfile: std::path::PathBuf, available: String },
}

impl Classify for WheelError {
    fn class(&self) -> Class {
        match self {
            WheelError::Requirement(_)
            | WheelError::NoSuchVersion { .. }
            | WheelError::NoMatchingWheel { .. }
            | WheelError::NotInIndex { .. }
            | WheelError::Index { .. } => Class::Runtime,
            WheelError::Lockfile { .. } => Class::Usage,
            // The lock file and the index disagree about a file's bytes.
            WheelError::HashMismatch { .. } => Class::Verification,
        }
    }
}

pub fn parse_requirement(req: &str) -> Result<(String, String), WheelError> {
    let (name, version) = req.split_once("==").ok_or_else(|| WheelError::Requirement(req.to_owned()))?;
    let (name, version) = (name.trim(), version.trim());
    let ok_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok_name || version.is_empty() || version.contains(['=', ' ', ',', ';', '*']) {
        return Err(WheelError::Requirement(req.to_owned()));
    }
    Ok((normalize(name), version.to_owned()))
}

/// Versions compare after the light normalisation wheel names need (case, a leading `v`).
fn same_version(a: &str, b: &str) -> bool {
    let norm = |v: &str| v.trim_start_matches(['v', 'V']).to_ascii_lowercase().replace('_', "-");
    norm(a) == norm(b)
}

/// Whether a wheel's python tags run on `CPython` `python` (`3.12`): `py3`, `py312`, `cp312`,
/// or a stable-ABI (`abi3`) build for `cp3X` with X at most the minor version.
pub fn python_matches(w: &WheelName, python: &str) -> bool {
    let Some(PythonVersion { major, minor, .. }) = PythonVersion::parse(python) else {
        return w.python.iter().any(|t| t == &format!("py{python}"));
    };
    let minor_n = minor;
    w.python.iter().any(|t| {
        t == &format!("py{major}")
            || t == &format!("py{major}{minor}")
            || t == &format!("cp{major}{minor}")
            || (w.abi == "abi3"
                && t.strip_prefix(&format!("cp{major}"))
                    .and_then(|m| m.parse::<u32>().ok())
                    .is_some_and(|m| m <= minor_n))
    })
}

/// One file offered for a project.
#[derive(Debug, Clone)]
struct Offered {
    filename: String,
    url: String,
    sha256: Option<Sha256>,
    size: Option<u64>,
    /// PEP 592 / 691: the file is yanked, with the reason given (possibly empty).
    yanked: Option<String>,
    /// PEP 740: where its provenance object is (JSON `provenance`, HTML `data-provenance`).
    provenance: Option<String>,
}

#[derive(Deserialize)]
struct JsonPage {
    files: Vec<JsonFile>,
}

#[derive(Deserialize)]
struct JsonFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    size: Option<u64>,
    /// `false`, `true`, or the reason (a string means yanked).
    #[serde(default)]
    yanked: serde_json::Value,
    /// PEP 740: the URL of the file's provenance object, or null.
    #[serde(default)]
    provenance: Option<String>,
}

/// The files a project page offers, from PEP 691 JSON or PEP 503 HTML.
fn parse_page(page_url: &str, body: &[u8], content_type: &str) -> Result<Vec<Offered>, WheelError> {
    let bad = |detail: String| WheelError::Index { url: page_url.to_owned(), detail };
    let base = reqwest::Url::parse(page_url).map_err(|e| bad(e.to_string()))?;
    let resolve =
        |href: &str| base.join(href).map(|u| u.to_string()).map_err(|e| bad(format!("bad link `{href}`: {e}")));
    if content_type.starts_with("application/vnd.pypi.simple.v1+json") {
        let page: JsonPage = serde_json::from_slice(body).map_err(|e| bad(format!("not PEP 691 JSON: {e}")))?;
        return page
            .files
            .into_iter()
            .map(|f| {
                let sha256 =
                    f.hashes.get("sha256").map(|h| h.parse::<Sha256>()).transpose().map_err(|e| bad(e.to_string()))?;
                let yanked = match f.yanked {
                    serde_json::Value::Bool(true) => Some(String::new()),
                    serde_json::Value::String(reason) => Some(reason),
                    _ => None,
                };
                let provenance = f.provenance.as_deref().map(resolve).transpose()?;
                Ok(Offered { url: resolve(&f.url)?, filename: f.filename, sha256, size: f.size, yanked, provenance })
            })
            .collect();
    }
    // PEP 503: `<a>` elements whose text is the filename and whose href, relative to the
    // page (or to its `<base href>`), may end in `#sha256=HEX`.
    let text = String::from_utf8_lossy(body);
    let dom = tl::parse(&text, tl::ParserOptions::default()).map_err(|e| bad(format!("not HTML: {e}")))?;
    let tags = || dom.nodes().iter().filter_map(tl::Node::as_tag);
    let named = |tag: &tl::HTMLTag<'_>, name: &str| tag.name().as_utf8_str().eq_ignore_ascii_case(name);
    let base = match tags().find(|t| named(t, "base")).and_then(|t| attribute(t, "href")) {
        Some(href) => base.join(&href).map_err(|e| bad(format!("bad <base href> `{href}`: {e}")))?,
        None => base,
    };
    let mut out = Vec::new();
    for tag in tags().filter(|t| named(t, "a")) {
        let Some(href) = attribute(tag, "href") else { continue };
        let (link, fragment) = href.split_once('#').unwrap_or((&href, ""));
        let url = base.join(link).map_err(|e| bad(format!("bad link `{href}`: {e}")))?;
        let sha256 =
            fragment.strip_prefix("sha256=").map(str::parse::<Sha256>).transpose().map_err(|e| bad(e.to_string()))?;
        let inner = tag.inner_text(dom.parser());
        let filename = html_escape::decode_html_entities(inner.trim()).into_owned();
        // PEP 592: `data-yanked` (its value, possibly empty, is the reason).
        let yanked =
            tag.attributes().iter().find(|(key, _)| key.eq_ignore_ascii_case("data-yanked")).map(|(_, value)| {
                value.map(|v| html_escape::decode_html_entities(&v).into_owned()).unwrap_or_default()
            });
        let provenance = attribute(tag, "data-provenance")
            .map(|p| base.join(&p).map(|u| u.to_string()).map_err(|e| bad(format!("bad data-provenance `{p}`: {e}"))))
            .transpose()?;
        out.push(Offered { url: url.to_string(), filename, sha256, size: None, yanked, provenance });
    }
    Ok(out)
}

/// An attribute's value, its name matched without regard to case (`HREF=` is `href=`) and its
/// entities decoded; `data-href=` is another attribute.
fn attribute(tag: &tl::HTMLTag<'_>, name: &str) -> Option<String> {
    tag.attributes()
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .and_then(|(_, value)| value)
        .map(|value| html_escape::decode_html_entities(&value).into_owned())
}

/// What an index offers now beside a locked release (`airlock outdated`).
#[derive(Debug, Clone)]
pub struct WheelNews {
    pub index: String,
    pub name: String,
    pub locked: String,
    /// The newest release with wheels, when newer than the locked one.
    pub newest: Option<String>,
    /// The newest release of the locked one's major.minor, when newer.
    pub newest_same_minor: Option<String>,
    /// A locked file is yanked now, with the reason given.
    pub yanked: Option<String>,
}

/// For every locked project (by index, name and version): newer releases on its index, and
/// whether a locked file has been yanked.
pub async fn newer(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<WheelNews>, SourceError> {
    use pep508_rs::pep440_rs::Version;
    use std::str::FromStr as _;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for w in &lock.lock.wheel {
        if !seen.insert((w.index.clone(), w.name.clone(), w.version.clone())) {
            continue;
        }
        let index = w.index.trim_end_matches('/');
        let page_url = format!("{index}/{}/", w.name);
        let (body, content_type) = sources.fetch.http.fetch_small(&page_url, ACCEPT, None, MAX_PAGE).await?;
        let offered = parse_page(&page_url, &body, &content_type)?;
        let locked_files: BTreeSet<&str> = lock
            .lock
            .wheel
            .iter()
            .filter(|l| l.index == w.index && l.name == w.name && l.version == w.version)
            .map(|l| l.filename.as_str())
            .collect();
        let yanked = offered
            .iter()
            .find(|o| locked_files.contains(o.filename.as_str()) && o.yanked.is_some())
            .and_then(|o| o.yanked.clone());
        let Ok(locked) = Version::from_str(&w.version) else { continue };
        let minor = |v: &Version| v.release().iter().take(2).copied().collect::<Vec<u64>>();
        let mut releases: Vec<Version> = offered
            .iter()
            .filter(|o| o.yanked.is_none())
            .filter_map(|o| WheelName::parse(&o.filename))
            .filter(|n| n.name == w.name)
            .filter_map(|n| Version::from_str(&n.version).ok())
            .filter(|v| !v.any_prerelease())
            .collect();
        releases.sort();
        let newest = releases.last().filter(|v| **v > locked).map(ToString::to_string);
        let newest_same_minor =
            releases.iter().rfind(|v| minor(v) == minor(&locked)).filter(|v| **v > locked).map(ToString::to_string);
        if newest.is_some() || newest_same_minor.is_some() || yanked.is_some() {
            out.push(WheelNews {
                index: w.index.clone(),
                name: w.name.clone(),
                locked: w.version.clone(),
                newest,
                newest_same_minor,
                yanked,
            });
        }
    }
    Ok(out)
}

/// Resolve every `[[wheel]]` requirement, or every package of its lock file, to the files
/// it pins.
pub async fn resolve(sources: &Sources<'_>) -> Result<Vec<LockedWheel>, SourceError> {
    let mut pinned = Vec::new();
    for entry in &sources.spec.spec.wheel {
        let entry = entry.get_ref();
        if let Some(lockfile) = &entry.lockfile {
            pinned.extend(resolve_lockfile(sources, entry, lockfile).await?);
            continue;
        }
        for req in &entry.requirements {
            let (name, version) = parse_requirement(req)?;
            let pin = Pin { name, version, requirement: req.clone(), listed: None };
            pinned.extend(resolve_pin(sources, entry, &pin).await?);
        }
    }
    // Every chosen wheel into the cache, verified by the digest it must have, `--jobs` at a
    // time with progress; the lock records the size of what arrived.
    let wanted: Vec<Wanted> = pinned.iter().map(|(w, size)| wanted(w, *size)).collect();
    let paths = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    let mut out = Vec::new();
    for ((mut locked, _), (path, want)) in pinned.into_iter().zip(paths.into_iter().zip(wanted)) {
        let read = tokio::fs::metadata(&path).await;
        locked.size = read.map_err(|source| SourceError::Read { what: want.what, path, source })?.len();
        out.push(locked);
    }
    Ok(out)
}

/// Where a wheel is downloaded from and what it must be (`size` when the index says).
fn wanted(w: &LockedWheel, size: Option<u64>) -> Wanted {
    Wanted { url: w.url.clone(), sha256: w.sha256, size, bearer: None, what: format!("wheel {}", w.filename) }
}

/// A lock file's packages for the entry's targets, each resolved like a pin, with the file's
/// digest recorded so that a changed file makes the lock stale.
async fn resolve_lockfile(
    sources: &Sources<'_>,
    entry: &WheelSpec,
    lockfile: &std::path::Path,
) -> Result<Vec<(LockedWheel, Option<u64>)>, SourceError> {
    let path = sources.spec.base_dir().join(lockfile);
    let bad = |detail: String| WheelError::Lockfile { path: path.clone(), detail };
    let text = tokio::fs::read_to_string(&path).await.map_err(|e| bad(e.to_string()))?;
    let targets = pylock::targets(&entry.python, &entry.platforms).map_err(|e| bad(e.to_string()))?;
    let pinned = pylock::read(&path, &text, &targets).map_err(|e| bad(e.to_string()))?;
    let digest = Sha256::of_bytes(text.as_bytes());
    let mut out = Vec::new();
    for Pinned { name, version, listed, dependencies } in pinned {
        let requirement = format!("{name}=={version}");
        let pin = Pin { name, version, requirement, listed: Some((path.clone(), listed)) };
        for (mut locked, size) in resolve_pin(sources, entry, &pin).await? {
            locked.lockfile = Some(lockfile.display().to_string());
            locked.lockfile_sha256 = Some(digest);
            locked.dependencies.clone_from(&dependencies);
            out.push((locked, size));
        }
    }
    Ok(out)
}

/// One package to resolve: a spec's pin, or a lock file's package with what the file lists.
struct Pin {
    name: String,
    version: String,
    requirement: String,
    listed: Option<(std::path::PathBuf, Listed)>,
}

/// The wheels `pin` chooses from the index, each with the size the index gives (if any);
/// `size` in the lock is set once the file has arrived.
async fn resolve_pin(
    sources: &Sources<'_>,
    entry: &WheelSpec,
    pin: &Pin,
) -> Result<Vec<(LockedWheel, Option<u64>)>, SourceError> {
    let http = sources.fetch.http;
    let (name, version) = (pin.name.clone(), pin.version.clone());
    let index = entry.index.trim_end_matches('/');
    let page_url = format!("{index}/{name}/");
    let (body, content_type) = http.fetch_small(&page_url, ACCEPT, None, MAX_PAGE).await?;
    let offered = parse_page(&page_url, &body, &content_type)?;
    let wheels: Vec<(Offered, WheelName)> = offered
        .into_iter()
        .filter_map(|o| WheelName::parse(&o.filename).map(|w| (o, w)))
        .filter(|(_, w)| w.name == name)
        .collect();
    let of_version: Vec<&(Offered, WheelName)> =
        wheels.iter().filter(|(_, w)| same_version(&w.version, &version)).collect();
    if of_version.is_empty() {
        let versions: BTreeSet<&str> = wheels.iter().map(|(_, w)| w.version.as_str()).collect();
        let available = if versions.is_empty() {
            "no wheels".to_owned()
        } else {
            versions.into_iter().collect::<Vec<_>>().join(", ")
        };
        return Err(WheelError::NoSuchVersion { index: index.to_owned(), name, version, available }.into());
    }
    let fits = |w: &WheelName| {
        (entry.python.is_empty() || entry.python.iter().any(|p| python_matches(w, p)))
            && (entry.platforms.is_empty() || w.platforms.iter().any(|p| entry.platforms.contains(p)))
    };
    let chosen = choose(&of_version, pin.listed.as_ref(), fits, &page_url, index)?;
    if chosen.is_empty() {
        let filter = format!("python {:?} and platforms {:?}", entry.python, entry.platforms);
        let available = of_version.iter().map(|(o, _)| o.filename.as_str()).collect::<Vec<_>>().join(", ");
        return Err(WheelError::NoMatchingWheel { index: index.to_owned(), name, version, filter, available }.into());
    }
    let mut out = Vec::new();
    for (offered, sha256) in chosen {
        let signature = match &entry.verify {
            Some(policy) => Some(verify_provenance(sources, offered, sha256, policy).await?),
            None => None,
        };
        let w = LockedWheel {
            index: entry.index.clone(),
            requirement: pin.requirement.clone(),
            name: name.clone(),
            version: version.clone(),
            filename: offered.filename.clone(),
            url: offered.url.clone(),
            sha256,
            size: 0, // what arrives, set by `resolve`
            lockfile: None,
            lockfile_sha256: None,
            dependencies: Vec::new(),
            signature,
        };
        out.push((w, offered.size));
    }
    Ok(out)
}

/// A wheel's PEP 740 attestation under the spec's `verify`: its provenance object fetched
/// (bounded, kept in the cache for the build) and verified against the build host's trusted
/// root, or the wheel refused (exit 3) — also when the index offers no provenance for it.
async fn verify_provenance(
    sources: &Sources<'_>,
    offered: &Offered,
    sha256: Sha256,
    policy: &crate::spec::UpstreamSigner,
) -> Result<crate::spec::UpstreamSignature, SourceError> {
    use crate::sign::sigstore::{MAX_DOCUMENT_BYTES, Signer, upstream::verify_pep740};
    let reference = format!("wheel {}", offered.filename);
    let unsigned =
        |detail: String| super::Unsigned::new(reference.clone(), sha256, policy, &sources.sigstore_root, vec![detail]);
    let Some(url) = &offered.provenance else {
        return Err(unsigned("the index offers no PEP 740 provenance for it".into()).into());
    };
    let (bytes, _) = sources
        .fetch
        .http
        .fetch_small(url, "application/vnd.pypi.integrity.v1+json, application/json", None, MAX_DOCUMENT_BYTES)
        .await?;
    let signer = Signer::upstream(policy);
    let verified =
        verify_pep740(&format!("`{url}`"), &bytes, &offered.filename, sha256, &signer, &sources.sigstore_root)
            .map_err(|e| unsigned(e.as_found()))?;
    let (_, digest) = super::keep(sources.fetch.cache, &format!("provenance of {}", offered.filename), bytes).await?;
    let recorded =
        crate::sign::sigstore::upstream::record(crate::spec::SignatureForm::Pep740, digest, policy, verified);
    Ok(crate::spec::UpstreamSignature { url: Some(url.clone()), ..recorded })
}

/// The wheels of the version that fit the targets, each with the digest it must have: for a
/// spec pin every fitting wheel by the index's digest; for a requirements file every fitting
/// wheel, whose index digest the file must list; for a `pylock.toml` the fitting wheels it
/// lists, found in the index by filename (the index's digest, when it gives one, must be the
/// file's).
fn choose<'a>(
    of_version: &[&'a (Offered, WheelName)],
    listed: Option<&(std::path::PathBuf, Listed)>,
    fits: impl Fn(&WheelName) -> bool,
    page_url: &str,
    index: &str,
) -> Result<Vec<(&'a Offered, Sha256)>, WheelError> {
    // Each chosen file with the digest it must have.
    let mut chosen: Vec<(&Offered, Sha256)> = Vec::new();
    let no_digest = |o: &Offered| WheelError::Index {
        url: page_url.to_owned(),
        detail: format!("`{}` has no sha256 in the index; airlock only carries files with a digest", o.filename),
    };
    match listed {
        // A spec pin: every fitting wheel of the version, by the index's digest.
        None => {
            for (o, _) in of_version.iter().filter(|(_, w)| fits(w)) {
                chosen.push((o, o.sha256.ok_or_else(|| no_digest(o))?));
            }
        }
        // A requirements file: every fitting wheel, whose index digest the file must list.
        Some((lockfile, Listed::Hashes(hashes))) => {
            for (o, _) in of_version.iter().filter(|(_, w)| fits(w)) {
                let actual = o.sha256.ok_or_else(|| no_digest(o))?;
                if !hashes.contains(&actual) {
                    return Err(WheelError::HashMismatch {
                        filename: o.filename.clone(),
                        index: index.to_owned(),
                        lockfile: lockfile.clone(),
                        expected: hashes.iter().map(ToString::to_string).collect::<Vec<_>>().join(" or "),
                        actual: actual.to_string(),
                    });
                }
                chosen.push((o, actual));
            }
        }
        // A pylock.toml: the fitting wheels it lists, found in the index by filename; the
        // index's digest, when it gives one, must be the file's.
        Some((lockfile, Listed::Wheels(listed))) => {
            for (filename, expected) in listed.iter().filter(|(f, _)| WheelName::parse(f).is_some_and(|w| fits(&w))) {
                let Some((o, _)) = of_version.iter().find(|(o, _)| o.filename == *filename) else {
                    return Err(WheelError::NotInIndex {
                        filename: filename.clone(),
                        index: index.to_owned(),
                        lockfile: lockfile.clone(),
                        available: of_version.iter().map(|(o, _)| o.filename.as_str()).collect::<Vec<_>>().join(", "),
                    });
                };
                if let Some(actual) = o.sha256.filter(|a| a != expected) {
                    return Err(WheelError::HashMismatch {
                        filename: filename.clone(),
                        index: index.to_owned(),
                        lockfile: lockfile.clone(),
                        expected: expected.to_string(),
                        actual: actual.to_string(),
                    });
                }
                chosen.push((o, *expected));
            }
        }
    }
    Ok(chosen)
}

/// Every locked wheel, downloaded into the cache if needed, as content and artifacts.
pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let wanted: Vec<Wanted> = lock.lock.wheel.iter().map(|w| wanted(w, Some(w.size))).collect();
    if wanted.is_empty() {
        return Ok(Plan::default());
    }
    let origins = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    let mut plan = Plan::default();
    for ((w, origin), want) in lock.lock.wheel.iter().zip(origins).zip(wanted) {
        let artifact = crate::bundle::manifest::WheelArtifact::try_from(w)
            .map_err(|e| WheelError::Index { url: w.url.clone(), detail: e.to_string() })?;
        plan.members.push(Member {
            path: artifact.path.clone(),
            size: w.size,
            sha256: w.sha256,
            origin: origin.into(),
            what: want.what.into(),
        });
        if let Some(signature) = &w.signature {
            let url = signature.url.as_deref().unwrap_or_default();
            let path = crate::spec::upstream::provenance_member(signature.bundle);
            let refetch = async {
                let limit = crate::sign::sigstore::MAX_DOCUMENT_BYTES;
                Ok(sources.fetch.http.fetch_small(url, "application/json", None, limit).await?.0)
            };
            let what = (format!("provenance of {}", w.filename), url);
            plan.members.push(super::carried_document(sources, path, signature.bundle, what, refetch).await?);
        }
        plan.artifacts.push(Artifact::Wheel(artifact));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pins() {
        assert_eq!(parse_requirement("Six==1.16.0").unwrap(), ("six".into(), "1.16.0".into()));
        for bad in ["six", "six>=1", "six==", "==1", "six==1.*"] {
            assert!(parse_requirement(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn matches_python_tags() {
        let w = WheelName::parse("torch-2.9.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl").unwrap();
        assert!(python_matches(&w, "3.12") && !python_matches(&w, "3.11"));
        let any = WheelName::parse("six-1.16.0-py2.py3-none-any.whl").unwrap();
        assert!(python_matches(&any, "3.12"));
        let abi3 = WheelName::parse("cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl").unwrap();
        assert!(python_matches(&abi3, "3.12") && !python_matches(&abi3, "3.8"));
    }

    #[test]
    fn pep503_links_resolve_against_base_href_and_ignore_data_href() {
        let html = br#"<!DOCTYPE html><html><head><base href="https://files.example/pkgs/"></head><body>
            <a data-href="https://evil.example/six.whl" href="six-1.16.0-py2.py3-none-any.whl#sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855">six-1.16.0-py2.py3-none-any.whl</a>
            <a data-href="only-data.whl">only-data-1.0-py3-none-any.whl</a>
            <a href="a%2Bb/x.whl?x=1&amp;y=2">x&#45;1.0-py3-none-any.whl</a></body></html>"#;
        let files = parse_page("http://127.0.0.1:1/simple/six/", html, "text/html").unwrap();
        assert_eq!(files.len(), 2, "an anchor with only data-href is no link: {files:?}");
        assert_eq!(files[0].url, "https://files.example/pkgs/six-1.16.0-py2.py3-none-any.whl");
        assert!(files[0].sha256.is_some());
        assert_eq!(files[1].url, "https://files.example/pkgs/a%2Bb/x.whl?x=1&y=2", "entities decoded in href");
        assert_eq!(files[1].filename, "x-1.0-py3-none-any.whl", "entities decoded in text");
    }

    #[test]
    fn reads_pep503_html_and_pep691_json() {
        let html = br#"<html><body><a href="/packages/six-1.16.0-py2.py3-none-any.whl#sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855">six-1.16.0-py2.py3-none-any.whl</a><br>
            <A HREF='../../files/six-1.16.0.tar.gz'>six-1.16.0.tar.gz</A></body></html>"#;
        let files = parse_page("http://127.0.0.1:1/simple/six/", html, "text/html").unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].url, "http://127.0.0.1:1/packages/six-1.16.0-py2.py3-none-any.whl");
        assert!(files[0].sha256.is_some() && files[1].sha256.is_none());
        assert_eq!(files[1].url, "http://127.0.0.1:1/files/six-1.16.0.tar.gz");
        let json = br#"{"meta":{"api-version":"1.1"},"name":"six","files":[{"filename":"six-1.16.0-py2.py3-none-any.whl","url":"../../p/six.whl","hashes":{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},"size":11}]}"#;
        let files = parse_page("http://h/simple/six/", json, "application/vnd.pypi.simple.v1+json").unwrap();
        assert_eq!((files[0].url.as_str(), files[0].size), ("http://h/p/six.whl", Some(11)));
        assert_eq!(files[0].provenance, None);
    }

    #[test]
    fn pep740_provenance_urls_resolve_against_the_page() {
        let json = br#"{"meta":{"api-version":"1.3"},"name":"six","files":[{"filename":"six-1.16.0-py2.py3-none-any.whl","url":"../../p/six.whl","hashes":{},"provenance":"https://pypi.example/integrity/six/1.16.0/six-1.16.0-py2.py3-none-any.whl/provenance"},{"filename":"six-1.16.0.tar.gz","url":"../../p/six.tgz","hashes":{},"provenance":null}]}"#;
        let files = parse_page("http://h/simple/six/", json, "application/vnd.pypi.simple.v1+json").unwrap();
        assert_eq!(
            files[0].provenance.as_deref(),
            Some("https://pypi.example/integrity/six/1.16.0/six-1.16.0-py2.py3-none-any.whl/provenance")
        );
        assert_eq!(files[1].provenance, None);
        let html = br#"<a href="../../p/six.whl" data-provenance="../../integrity/six.whl/provenance">six-1.16.0-py2.py3-none-any.whl</a>"#;
        let files = parse_page("http://h/simple/six/", html, "text/html").unwrap();
        assert_eq!(files[0].provenance.as_deref(), Some("http://h/integrity/six.whl/provenance"));
    }
}
