//! `[[wheel]]` entries: exact pins (`name==version`) resolved against a simple index — PEP 691
//! JSON when the server offers it, else PEP 503 HTML — filtered by the wheel filename's tags,
//! each file's sha256 taken from the index and verified while downloading.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{Content, SourceError};
use crate::bundle::MemberPath;
use crate::bundle::manifest::{Artifact, WheelArtifact};
use crate::digest::Sha256;
use crate::fetch::{Fetch, Http, Wanted, runtime};
use crate::spec::lock::{LockFile, LockedWheel};
use crate::spec::{SpecFile, WheelSpec};

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
}

/// PEP 503 normalisation: lower case, runs of `-`, `_`, `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
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

/// The parts of a wheel filename (`{name}-{ver}(-{build})?-{python}-{abi}-{platform}.whl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    pub name: String,
    pub version: String,
    pub python: Vec<String>,
    pub abi: String,
    pub platforms: Vec<String>,
}

pub fn parse_wheel_filename(filename: &str) -> Option<WheelName> {
    let stem = filename.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    let (name, version, rest) = match parts.as_slice() {
        [n, v, _build, p, a, pl] => (n, v, [p, a, pl]),
        [n, v, p, a, pl] => (n, v, [p, a, pl]),
        _ => return None,
    };
    Some(WheelName {
        name: normalize(name),
        version: (*version).to_owned(),
        python: rest[0].split('.').map(str::to_owned).collect(),
        abi: (*rest[1]).to_owned(),
        platforms: rest[2].split('.').map(str::to_owned).collect(),
    })
}

/// Versions compare after the light normalisation wheel names need (case, a leading `v`).
fn same_version(a: &str, b: &str) -> bool {
    let norm = |v: &str| v.trim_start_matches(['v', 'V']).to_ascii_lowercase().replace('_', "-");
    norm(a) == norm(b)
}

/// Whether a wheel's python tags run on `CPython` `python` (`3.12`): `py3`, `py312`, `cp312`,
/// or a stable-ABI (`abi3`) build for `cp3X` with X at most the minor version.
pub fn python_matches(w: &WheelName, python: &str) -> bool {
    let Some((major, minor)) = python.split_once('.') else {
        return w.python.iter().any(|t| t == &format!("py{python}"));
    };
    let Ok(minor_n) = minor.parse::<u32>() else { return false };
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
                Ok(Offered { url: resolve(&f.url)?, filename: f.filename, sha256, size: f.size })
            })
            .collect();
    }
    // PEP 503: anchors whose text is the filename and whose href may end in `#sha256=HEX`.
    // Hand-written: the pages are a flat list of `<a>` elements and no maintained crate parses
    // just this without a whole HTML engine.
    let text = String::from_utf8_lossy(body);
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(start) = lower[at..].find("<a ").map(|i| at + i) {
        let Some(tag_end) = lower[start..].find('>').map(|i| start + i) else { break };
        let Some(close) = lower[tag_end..].find("</a>").map(|i| tag_end + i) else { break };
        let tag = &text[start..tag_end];
        let filename = html_unescape(text[tag_end + 1..close].trim());
        at = close + 4;
        let Some(href) = attribute(tag, "href") else { continue };
        let href = html_unescape(&href);
        let (link, fragment) = href.split_once('#').unwrap_or((&href, ""));
        let sha256 =
            fragment.strip_prefix("sha256=").map(str::parse::<Sha256>).transpose().map_err(|e| bad(e.to_string()))?;
        out.push(Offered { url: resolve(link)?, filename, sha256, size: None });
    }
    Ok(out)
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let i = lower.find(&format!("{name}="))? + name.len() + 1;
    let rest = &tag[i..];
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let end = rest[1..].find(quote)?;
    Some(rest[1..=end].to_owned())
}

fn html_unescape(s: &str) -> String {
    s.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'")
}

/// Resolve every `[[wheel]]` requirement to the files it pins.
pub fn resolve(spec: &SpecFile, fetch: &Fetch<'_>) -> Result<Vec<LockedWheel>, SourceError> {
    if spec.spec.wheel.is_empty() {
        return Ok(Vec::new());
    }
    let http = Http::new()?;
    let rt = runtime().map_err(SourceError::Runtime)?;
    let mut out = Vec::new();
    for entry in &spec.spec.wheel {
        let entry = entry.get_ref();
        for req in &entry.requirements {
            out.extend(rt.block_on(resolve_requirement(&http, entry, req, fetch))?);
        }
    }
    Ok(out)
}

async fn resolve_requirement(
    http: &Http,
    entry: &WheelSpec,
    req: &str,
    fetch: &Fetch<'_>,
) -> Result<Vec<LockedWheel>, SourceError> {
    let (name, version) = parse_requirement(req)?;
    let index = entry.index.trim_end_matches('/');
    let page_url = format!("{index}/{name}/");
    let (body, content_type) = http.fetch_small(&page_url, ACCEPT, None, MAX_PAGE).await?;
    let offered = parse_page(&page_url, &body, &content_type)?;
    let wheels: Vec<(Offered, WheelName)> = offered
        .into_iter()
        .filter_map(|o| parse_wheel_filename(&o.filename).map(|w| (o, w)))
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
    let chosen: Vec<&&(Offered, WheelName)> = of_version
        .iter()
        .filter(|(_, w)| entry.python.as_deref().is_none_or(|p| python_matches(w, p)))
        .filter(|(_, w)| entry.platforms.is_empty() || w.platforms.iter().any(|p| entry.platforms.contains(p)))
        .collect();
    if chosen.is_empty() {
        let filter =
            format!("python {:?} and platforms {:?}", entry.python.as_deref().unwrap_or("any"), entry.platforms);
        let available = of_version.iter().map(|(o, _)| o.filename.as_str()).collect::<Vec<_>>().join(", ");
        return Err(WheelError::NoMatchingWheel { index: index.to_owned(), name, version, filter, available }.into());
    }
    let mut out = Vec::new();
    for (offered, _) in chosen {
        let sha256 = offered.sha256.ok_or_else(|| WheelError::Index {
            url: page_url.clone(),
            detail: format!(
                "`{}` has no sha256 in the index; airlock only carries files with a digest",
                offered.filename
            ),
        })?;
        // The index's digest is checked now, while downloading once into the cache.
        let what = format!("wheel {}", offered.filename);
        let path = http.download(&offered.url, sha256, offered.size, None, fetch, &what).await?;
        let size = std::fs::metadata(&path).map_err(|source| SourceError::Read { what, path, source })?.len();
        out.push(LockedWheel {
            index: entry.index.clone(),
            requirement: req.to_owned(),
            name: name.clone(),
            version: version.clone(),
            filename: offered.filename.clone(),
            url: offered.url.clone(),
            sha256,
            size,
        });
    }
    Ok(out)
}

/// Every locked wheel, downloaded into the cache if needed, as content and artifacts.
pub fn plan(spec: &SpecFile, lock: &LockFile, fetch: &Fetch<'_>) -> Result<(Vec<Artifact>, Vec<Content>), SourceError> {
    if spec.spec.wheel.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let http = Http::new()?;
    let rt = runtime().map_err(SourceError::Runtime)?;
    let wanted: Vec<Wanted> = lock
        .lock
        .wheel
        .iter()
        .map(|w| Wanted {
            url: w.url.clone(),
            sha256: w.sha256,
            size: Some(w.size),
            bearer: None,
            what: format!("wheel {}", w.filename),
        })
        .collect();
    let origins = rt.block_on(http.download_all(&wanted, fetch))?;
    let mut artifacts = Vec::new();
    let mut contents = Vec::new();
    for ((w, origin), want) in lock.lock.wheel.iter().zip(origins).zip(wanted) {
        let path = MemberPath::new(format!("wheels/{}", w.filename))
            .map_err(|e| WheelError::Index { url: w.url.clone(), detail: e.to_string() })?;
        artifacts.push(Artifact::Wheel(WheelArtifact {
            name: w.name.clone(),
            version: w.version.clone(),
            filename: w.filename.clone(),
            url: w.url.clone(),
            sha256: w.sha256,
            size: w.size,
            path: path.clone(),
        }));
        contents.push(Content { path, size: w.size, sha256: w.sha256, origin, what: want.what });
    }
    Ok((artifacts, contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_names_and_parses_pins() {
        assert_eq!(normalize("Friendly_Bard..x-Y"), "friendly-bard-x-y");
        assert_eq!(parse_requirement("Six==1.16.0").unwrap(), ("six".into(), "1.16.0".into()));
        for bad in ["six", "six>=1", "six==", "==1", "six==1.*"] {
            assert!(parse_requirement(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_wheel_filenames_and_matches_tags() {
        let w = parse_wheel_filename("torch-2.9.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!((w.name.as_str(), w.version.as_str()), ("torch", "2.9.0+rocm7.0"));
        assert!(python_matches(&w, "3.12") && !python_matches(&w, "3.11"));
        let any = parse_wheel_filename("six-1.16.0-py2.py3-none-any.whl").unwrap();
        assert!(python_matches(&any, "3.12") && any.platforms == ["any"]);
        let abi3 = parse_wheel_filename("cryptography-44.0.0-cp39-abi3-manylinux_2_28_x86_64.whl").unwrap();
        assert!(python_matches(&abi3, "3.12") && !python_matches(&abi3, "3.8"));
        assert!(parse_wheel_filename("six-1.16.0.tar.gz").is_none());
        let build = parse_wheel_filename("pkg-1.0-1-py3-none-any.whl").unwrap();
        assert_eq!(build.version, "1.0");
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
    }
}
