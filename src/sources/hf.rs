//! `[[model]]` entries: a repository on a Hugging Face hub-compatible endpoint at a pinned
//! revision. The revision resolves to a commit (`/api/models/{repo}/revision/{rev}`), the file
//! list comes from the tree at that commit, filtered by the spec's globs, and each file is
//! downloaded from `/{repo}/resolve/{commit}/{path}`: LFS files are verified against their
//! `lfs.oid` (a sha256); every file's sha256 is pinned in the lock. `HF_TOKEN` is sent as a
//! bearer token when set.

use serde::Deserialize;

use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, ModelArtifact};
use crate::bundle::pins::model_member;
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Wanted, blocking};
use crate::spec::ModelSpec;
use crate::spec::lock::{LockFile, LockedModel, LockedModelFile};

const MAX_API: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{hub}: `{repo}`: {detail}")]
    Hub { hub: String, repo: String, detail: String },
    #[error("{hub}: `{repo}` at {commit}: no file matches {globs:?} (it has {available})")]
    NoFiles { hub: String, repo: String, commit: String, globs: Vec<String>, available: String },
    #[error("{hub}: `{repo}` file `{path}`: the tree says {expected} bytes, the hub sent {actual}")]
    SizeMismatch { hub: String, repo: String, path: String, expected: u64, actual: u64 },
}

impl Classify for ModelError {
    fn class(&self) -> Class {
        match self {
            ModelError::Hub { .. } | ModelError::NoFiles { .. } => Class::Runtime,
            ModelError::SizeMismatch { .. } => Class::Verification,
        }
    }
}

#[derive(Deserialize)]
struct Revision {
    sha: String,
}

#[derive(Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    oid: String,
    size: u64,
}

fn token() -> Option<String> {
    std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty())
}

fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `path` matches one of the globs (fnmatch semantics, as `huggingface_hub` uses:
/// `*` also crosses `/`). No globs: every file.
fn wanted(path: &str, globs: &[glob::Pattern]) -> bool {
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    globs.is_empty() || globs.iter().any(|g| g.matches_with(path, opts))
}

pub async fn resolve(sources: &Sources<'_>) -> Result<Vec<LockedModel>, SourceError> {
    let mut out = Vec::new();
    for entry in &sources.spec.spec.model {
        out.push(resolve_model(sources, entry.get_ref()).await?);
    }
    Ok(out)
}

async fn resolve_model(sources: &Sources<'_>, entry: &ModelSpec) -> Result<LockedModel, SourceError> {
    let (http, fetch) = (sources.fetch.http, &sources.fetch);
    let hub = entry.hub.trim_end_matches('/');
    let err = |detail: String| ModelError::Hub { hub: hub.to_owned(), repo: entry.repo.clone(), detail };
    let token = token();
    let json = "application/json";
    let url = format!("{hub}/api/models/{}/revision/{}", entry.repo, entry.revision);
    let (body, _) = http.fetch_small(&url, json, token.as_deref(), MAX_API).await?;
    let commit = serde_json::from_slice::<Revision>(&body).map_err(|e| err(format!("revision answer: {e}")))?.sha;
    if !is_commit(&commit) {
        return Err(err(format!("revision `{}` resolved to `{commit}`, not a commit sha", entry.revision)).into());
    }
    let url = format!("{hub}/api/models/{}/tree/{commit}?recursive=true", entry.repo);
    let (body, _) = http.fetch_small(&url, json, token.as_deref(), MAX_API).await?;
    let tree: Vec<TreeEntry> = serde_json::from_slice(&body).map_err(|e| err(format!("tree answer: {e}")))?;
    let globs = entry
        .files
        .iter()
        .map(|g| glob::Pattern::new(g).map_err(|e| err(format!("bad glob `{g}`: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let chosen: Vec<&TreeEntry> = tree.iter().filter(|e| e.kind == "file" && wanted(&e.path, &globs)).collect();
    if chosen.is_empty() {
        let available =
            tree.iter().filter(|e| e.kind == "file").map(|e| e.path.as_str()).collect::<Vec<_>>().join(", ");
        return Err(ModelError::NoFiles {
            hub: hub.to_owned(),
            repo: entry.repo.clone(),
            commit,
            globs: entry.files.clone(),
            available,
        }
        .into());
    }
    let mut files = Vec::new();
    for f in chosen {
        model_member(&entry.repo, &commit, &f.path).map_err(|e| err(e.to_string()))?;
        let url = format!("{hub}/{}/resolve/{commit}/{}", entry.repo, f.path);
        let what = format!("model {} file {}", entry.repo, f.path);
        // LFS: the hub names the sha256, verified while downloading. A small git file: its
        // sha256 is measured once here and pinned by the lock.
        let (sha256, size, lfs) = if let Some(lfs) = &f.lfs {
            let digest: Sha256 = lfs.oid.parse().map_err(|e: crate::digest::DigestParseError| err(e.to_string()))?;
            http.download(&url, digest, Some(lfs.size), token.as_deref(), fetch, &what).await?;
            (digest, lfs.size, true)
        } else {
            let (bytes, _) = http.fetch_small(&url, "*/*", token.as_deref(), MAX_API).await?;
            if let Some(expected) = f.size.filter(|s| *s != bytes.len() as u64) {
                let (hub, repo, path) = (hub.to_owned(), entry.repo.clone(), f.path.clone());
                return Err(ModelError::SizeMismatch { hub, repo, path, expected, actual: bytes.len() as u64 }.into());
            }
            let (digest, size) = (Sha256::of_bytes(&bytes), bytes.len() as u64);
            let cache = fetch.cache.clone();
            blocking(move || cache.put(digest, Some(size), &what, bytes.as_slice())).await?;
            (digest, size, false)
        };
        files.push(LockedModelFile { path: f.path.clone(), sha256, size, lfs });
    }
    Ok(LockedModel {
        hub: entry.hub.clone(),
        repo: entry.repo.clone(),
        revision: entry.revision.clone(),
        commit,
        files,
    })
}

pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let token = token();
    let mut wanted = Vec::new();
    for m in &lock.lock.model {
        let hub = m.hub.trim_end_matches('/');
        for f in &m.files {
            wanted.push(Wanted {
                url: format!("{hub}/{}/resolve/{}/{}", m.repo, m.commit, f.path),
                sha256: f.sha256,
                size: Some(f.size),
                bearer: token.clone(),
                what: format!("model {} file {}", m.repo, f.path),
            });
        }
    }
    if wanted.is_empty() {
        return Ok(Plan::default());
    }
    let mut origins = sources.fetch.http.download_all(&wanted, &sources.fetch).await?.into_iter().zip(wanted);
    let mut plan = Plan::default();
    for m in &lock.lock.model {
        let artifact = ModelArtifact::try_from(m).map_err(|e| ModelError::Hub {
            hub: m.hub.clone(),
            repo: m.repo.clone(),
            detail: e.to_string(),
        })?;
        for f in &artifact.files {
            let (origin, want) = origins.next().expect("one download per file");
            let path = artifact.member(f).map_err(|e| ModelError::Hub {
                hub: m.hub.clone(),
                repo: m.repo.clone(),
                detail: e.to_string(),
            })?;
            plan.members.push(Member {
                path,
                size: f.size,
                sha256: f.sha256,
                origin: origin.into(),
                what: want.what.into(),
            });
        }
        plan.artifacts.push(Artifact::Model(artifact));
    }
    Ok(plan)
}
