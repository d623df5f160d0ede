//! `airlock outdated`: what moved upstream since the lock, per input, without touching the
//! lock. The upgrade guide asks for a focused requalification when a pinned base gets a
//! security patch, an engine or framework image digest changes, a model revision moves, or a
//! vendor publishes new firmware: each finding names the layer it touches, so the operator
//! knows which one.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::fetch::Net;
use crate::sources::{SourceError, Sources};
use crate::spec::lock::LockFile;

/// One upstream event.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// `image`, `image-attachment`, `wheel`, `deb`, `rpm`, `model`, `file`.
    pub kind: &'static str,
    pub name: String,
    pub locked: String,
    pub upstream: String,
    pub layer: Layer,
    /// A security update (a deb from a security suite, an rpm a security advisory of its
    /// repository's `updateinfo.xml` names), or a yanked wheel.
    pub security: bool,
    pub detail: String,
}

/// Which part of the stack a change touches: the guide requalifies by layer.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    DriverFirmware,
    RocmCore,
    Framework,
    Engine,
    Model,
    Other,
}

impl Layer {
    pub fn title(self) -> &'static str {
        match self {
            Layer::DriverFirmware => "driver/firmware",
            Layer::RocmCore => "ROCm core",
            Layer::Framework => "framework",
            Layer::Engine => "engine",
            Layer::Model => "model",
            Layer::Other => "other",
        }
    }

    /// The layer a name belongs to, by the words the ecosystems use for them (written here:
    /// no list of GPU stack packages exists as a crate).
    fn of(kind: &str, name: &str) -> Self {
        let n = name.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| n.contains(w));
        if kind == "model" {
            return Layer::Model;
        }
        if kind == "firmware" || has(&["amdgpu", "firmware", "linux-image", "linux-modules", "dkms", "nvidia-driver"]) {
            return Layer::DriverFirmware;
        }
        if has(&["vllm", "sglang", "text-generation", "tgi", "tensorrt", "triton-server", "tritonserver", "deepspeed"])
        {
            return Layer::Engine;
        }
        if has(&["torch", "pytorch", "jax", "tensorflow", "onnxruntime", "triton", "flash-attn", "flash_attn"]) {
            return Layer::Framework;
        }
        if has(&[
            "rocm", "hip", "hsa", "rocblas", "hipblas", "miopen", "rccl", "amd-smi", "amdsmi", "rocminfo", "comgr",
            "cuda",
        ]) {
            return Layer::RocmCore;
        }
        Layer::Other
    }
}

/// Compare the lock with upstream now. `deep`: download URL files and hash them (otherwise
/// their size is compared).
/// What moved, and where security updates could not be looked for.
#[derive(Debug, Default)]
pub struct Outdated {
    pub findings: Vec<Finding>,
    /// Deb sources (`REPO SUITE`) with no security suite read: "no security update" there
    /// means "not checked".
    pub security_unchecked: Vec<String>,
}

pub fn outdated(sources: &Sources<'_>, net: &Net, lock: &LockFile, deep: bool) -> Result<Outdated, SourceError> {
    net.block_on(async {
        let mut out = images(sources, lock).await?;
        out.extend(wheels(sources, lock).await?);
        let (debs, security_unchecked) = debs(sources, lock).await?;
        out.extend(debs);
        out.extend(rpms(sources, lock).await?);
        out.extend(models(sources, lock).await?);
        out.extend(files(sources, lock, deep).await?);
        out.sort_by(|a, b| (a.layer, a.kind, &a.name).cmp(&(b.layer, b.kind, &b.name)));
        Ok(Outdated { findings: out, security_unchecked })
    })
}

async fn images(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<Finding>, SourceError> {
    if sources.spec.spec.image.is_empty() {
        return Ok(Vec::new());
    }
    let now = crate::sources::oci::resolve(sources).await?;
    let mut out = Vec::new();
    for locked in &lock.lock.image {
        let Some(current) = now.iter().find(|n| n.source == locked.source && n.reference == locked.reference) else {
            continue;
        };
        let layer = Layer::of("image", &locked.reference);
        if current.digest != locked.digest {
            let was: BTreeMap<&str, _> = locked.platforms.iter().map(|p| (p.platform.as_str(), p.digest)).collect();
            let changed: Vec<&str> = current
                .platforms
                .iter()
                .filter(|p| was.get(p.platform.as_str()) != Some(&p.digest))
                .map(|p| p.platform.as_str())
                .collect();
            let detail = if changed.is_empty() {
                "the tag points to another digest".to_owned()
            } else {
                format!("the tag points to another digest; platforms changed: {}", changed.join(", "))
            };
            out.push(Finding {
                kind: "image",
                name: locked.reference.clone(),
                locked: format!("sha256:{}", locked.digest),
                upstream: format!("sha256:{}", current.digest),
                layer,
                security: false,
                detail,
            });
            continue;
        }
        let had: BTreeSet<_> = locked.attached.iter().map(|a| a.digest).collect();
        for a in current.attached.iter().filter(|a| !had.contains(&a.digest)) {
            out.push(Finding {
                kind: "image-attachment",
                name: locked.reference.clone(),
                locked: "-".to_owned(),
                upstream: format!("sha256:{}", a.digest),
                layer,
                security: false,
                detail: format!(
                    "new {} attached to the pinned digest{}",
                    a.tag.as_deref().and_then(|t| t.rsplit_once('.')).map_or("referrer", |(_, s)| match s {
                        "sig" => "signature",
                        "att" => "attestation",
                        "sbom" => "SBOM",
                        _ => "artifact",
                    }),
                    a.tag.as_ref().map(|t| format!(" (tag {t})")).unwrap_or_default()
                ),
            });
        }
    }
    Ok(out)
}

async fn wheels(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<Finding>, SourceError> {
    let mut out = Vec::new();
    for n in crate::sources::pypi::newer(sources, lock).await? {
        let layer = Layer::of("wheel", &n.name);
        if let Some(reason) = &n.yanked {
            let why = if reason.is_empty() { String::new() } else { format!(": {reason}") };
            out.push(Finding {
                kind: "wheel",
                name: n.name.clone(),
                locked: n.locked.clone(),
                upstream: n.newest.clone().unwrap_or_else(|| "-".to_owned()),
                layer,
                security: true,
                detail: format!("YANKED: the locked release was yanked from {}{why}", n.index),
            });
        }
        if let Some(newest) = &n.newest {
            let minor =
                n.newest_same_minor.as_ref().map(|m| format!("; newest in the same minor: {m}")).unwrap_or_default();
            out.push(Finding {
                kind: "wheel",
                name: n.name.clone(),
                locked: n.locked.clone(),
                upstream: newest.clone(),
                layer,
                security: false,
                detail: format!("newer release on {}{minor}", n.index),
            });
        } else if let Some(minor) = &n.newest_same_minor {
            out.push(Finding {
                kind: "wheel",
                name: n.name.clone(),
                locked: n.locked.clone(),
                upstream: minor.clone(),
                layer,
                security: false,
                detail: format!("newer release in the same minor on {}", n.index),
            });
        }
    }
    Ok(out)
}

async fn debs(sources: &Sources<'_>, lock: &LockFile) -> Result<(Vec<Finding>, Vec<String>), SourceError> {
    if sources.spec.spec.deb.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let scan = crate::sources::apt::newer(sources, lock).await?;
    let findings = scan
        .news
        .into_iter()
        .map(|n| Finding {
            kind: "deb",
            name: format!("{}:{}", n.name, n.architecture),
            locked: n.locked,
            upstream: n.newest,
            layer: Layer::of("deb", &n.name),
            security: n.security,
            detail: format!(
                "{}newer in {} {}",
                if n.security { "SECURITY update: " } else { "" },
                n.repo.trim_end_matches('/'),
                n.suite
            ),
        })
        .collect();
    Ok((findings, scan.security_unchecked))
}

async fn rpms(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<Finding>, SourceError> {
    if sources.spec.spec.rpm.is_empty() {
        return Ok(Vec::new());
    }
    let news = crate::sources::rpm::newer(sources, lock).await?;
    Ok(news
        .into_iter()
        .map(|n| {
            let security = !n.advisories.is_empty();
            let detail = if security {
                format!("SECURITY update: {} in {}", n.advisories.join(", "), n.repo)
            } else {
                format!("newer in {}", n.repo)
            };
            Finding {
                kind: "rpm",
                name: format!("{}.{}", n.name, n.architecture),
                locked: n.locked,
                upstream: n.newest,
                layer: Layer::of("rpm", &n.name),
                security,
                detail,
            }
        })
        .collect())
}

async fn models(sources: &Sources<'_>, lock: &LockFile) -> Result<Vec<Finding>, SourceError> {
    if sources.spec.spec.model.is_empty() {
        return Ok(Vec::new());
    }
    let now = crate::sources::hf::resolve(sources).await?;
    let mut out = Vec::new();
    for locked in &lock.lock.model {
        let Some(current) =
            now.iter().find(|n| n.hub == locked.hub && n.repo == locked.repo && n.revision == locked.revision)
        else {
            continue;
        };
        if current.commit == locked.commit {
            continue;
        }
        let was: BTreeMap<&str, _> = locked.files.iter().map(|f| (f.path.as_str(), f.sha256)).collect();
        let is: BTreeMap<&str, _> = current.files.iter().map(|f| (f.path.as_str(), f.sha256)).collect();
        let changed: Vec<&str> = is.iter().filter(|(p, d)| was.get(*p) != Some(*d)).map(|(p, _)| *p).collect();
        let removed: Vec<&str> = was.keys().filter(|p| !is.contains_key(*p)).copied().collect();
        let mut detail = format!("revision `{}` moved", locked.revision);
        if !changed.is_empty() {
            let _ = write!(detail, "; files changed: {}", changed.join(", "));
        }
        if !removed.is_empty() {
            let _ = write!(detail, "; files gone: {}", removed.join(", "));
        }
        if changed.is_empty() && removed.is_empty() {
            detail.push_str("; the chosen files are the same");
        }
        out.push(Finding {
            kind: "model",
            name: locked.repo.clone(),
            locked: locked.commit.clone(),
            upstream: current.commit.clone(),
            layer: Layer::Model,
            security: false,
            detail,
        });
    }
    Ok(out)
}

async fn files(sources: &Sources<'_>, lock: &LockFile, deep: bool) -> Result<Vec<Finding>, SourceError> {
    let mut out = Vec::new();
    for f in &lock.lock.file {
        if !(f.source.starts_with("http://") || f.source.starts_with("https://")) {
            continue;
        }
        let kind = sources
            .spec
            .spec
            .file
            .iter()
            .map(toml::Spanned::get_ref)
            .find(|e| e.name == f.name)
            .map_or("file", |e| if e.kind == crate::spec::FileKind::Firmware { "firmware" } else { "file" });
        let layer = Layer::of(kind, f.name.as_str());
        let http = sources.fetch.http;
        let (moved, upstream, detail) = if deep {
            let (sha256, size) = http.hash(&f.source).await?;
            (
                sha256 != f.sha256,
                format!("sha256:{sha256}"),
                format!("{} now serves {size} bytes with another sha256", f.source),
            )
        } else {
            match http.length(&f.source).await? {
                Some(size) if size != f.size => (
                    true,
                    format!("{size} bytes"),
                    format!("{} now serves {size} bytes, {} were locked (--deep hashes it)", f.source, f.size),
                ),
                _ => (false, String::new(), String::new()),
            }
        };
        if moved {
            out.push(Finding {
                kind: "file",
                name: f.name.to_string(),
                locked: if deep { format!("sha256:{}", f.sha256) } else { format!("{} bytes", f.size) },
                upstream,
                layer,
                security: false,
                detail,
            });
        }
    }
    Ok(out)
}
