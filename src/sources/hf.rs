//! `[[model]]` entries: a repository on a Hugging Face hub-compatible endpoint at a pinned
//! revision. The revision resolves to a commit (`/api/models/{repo}/revision/{rev}`), the file
//! list comes from the tree at that commit, filtered by the spec's globs, and each file is
//! downloaded from `/{repo}/resolve/{commit}/{path}`: LFS files are verified against their
//! `lfs.oid` (a sha256); every file's sha256 is pinned in the lock. `HF_TOKEN` is sent as a
//! bearer token when set.

use serde::Deserialize;

use super::{Content, SourceError};
use crate::bundle::MemberPath;
use crate::bundle::manifest::{Artifact, ModelArtifact, ModelFile};
use crate::digest::Sha256;
use crate::fetch::{Fetch, Http, Wanted, runtime};
use crate::spec::lock::{LockFile, LockedModel, LockedModelFile};
use crate::spec::{ModelSpec, SpecFile};

const MAX_API: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{hub}: `{repo}`: {detail}")]
    Hub { hub: String, repo: String, detail: String },
    #[error("{hub}: `{repo}` at {commit}: no file matches {globs:?} (it has {available})")]
    NoFiles { hub: String, repo: String, commit: String, globs: Vec<String>, available: String },
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

pub fn resolve(spec: &SpecFile, fetch: &Fetch<'_>) -> Result<Vec<LockedModel>, SourceError> {
    if spec.spec.model.is_empty() {
        return Ok(Vec::new());
    }
    let http = Http::new()?;
    let rt = runtime().map_err(SourceError::Runtime)?;
    spec.spec.model.iter().map(|m| rt.block_on(resolve_model(&http, m.get_ref(), fetch))).collect()
}

async fn resolve_model(http: &Http, entry: &ModelSpec, fetch: &Fetch<'_>) -> Result<LockedModel, SourceError> {
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
        MemberPath::new(format!("models/{}/{commit}/{}", entry.repo, f.path)).map_err(|e| err(e.to_string()))?;
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
            if f.size.is_some_and(|s| s != bytes.len() as u64) {
                let detail =
                    format!("`{}`: the tree says {} bytes, the hub sent {}", f.path, f.size.unwrap_or(0), bytes.len());
                return Err(err(detail).into());
            }
            let digest = Sha256::of_bytes(&bytes);
            fetch.cache.put(digest, Some(bytes.len() as u64), &what, bytes.as_slice())?;
            (digest, bytes.len() as u64, false)
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

pub fn plan(spec: &SpecFile, lock: &LockFile, fetch: &Fetch<'_>) -> Result<(Vec<Artifact>, Vec<Content>), SourceError> {
    if spec.spec.model.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let http = Http::new()?;
    let rt = runtime().map_err(SourceError::Runtime)?;
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
    let mut origins = rt.block_on(http.download_all(&wanted, fetch))?.into_iter();
    let mut artifacts = Vec::new();
    let mut contents = Vec::new();
    for m in &lock.lock.model {
        let mut files = Vec::new();
        for f in &m.files {
            let path = MemberPath::new(format!("models/{}/{}/{}", m.repo, m.commit, f.path))
                .map_err(|e| ModelError::Hub { hub: m.hub.clone(), repo: m.repo.clone(), detail: e.to_string() })?;
            let origin = origins.next().expect("one download per file");
            let what = format!("model {} file {}", m.repo, f.path);
            contents.push(Content { path: path.clone(), size: f.size, sha256: f.sha256, origin, what });
            files.push(ModelFile { path: f.path.clone(), member: path, sha256: f.sha256, size: f.size });
        }
        artifacts.push(Artifact::Model(ModelArtifact {
            hub: m.hub.clone(),
            repo: m.repo.clone(),
            revision: m.revision.clone(),
            commit: m.commit.clone(),
            files,
        }));
    }
    Ok((artifacts, contents))
}
