//! What is installed that the stack is made of: every `ROCm`-family package (by the names AMD's
//! packages use, `lib` prefix or not: `rocm*`, `roc*`, `hip*`, `hsa*`, `amdrocm-*`, `amd-smi*`,
//! `rccl*`, `miopen*`, `migraphx*`, `amdgpu*`, `amdhip*`, and NVIDIA's driver packages) and every
//! package the bundle carries — or, for `airlock probe` (`Scope::everything`), every installed
//! package: the node's inventory `freeze` pins — with version, architecture and source package,
//! from dpkg's status file and, on an rpm host, `rpm -qa`; the Python environments configured
//! (`pip list --format json`); the container images present with their digests (`crictl` or
//! `docker`, where installed). Keyed by name (`name:arch` where a name is installed for several
//! architectures), so `probe --diff` shows each package's change on a path of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::HostRoot;

/// The most of dpkg's status file read (a full desktop's is ~5 MB).
const MAX_STATUS: u64 = 64 << 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    /// By package name.
    #[serde(default)]
    pub packages: BTreeMap<String, Installed>,
    /// By environment (its directory), then package name: the version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub python: BTreeMap<String, BTreeMap<String, String>>,
    /// By image reference (`repo:tag`, or `repo@sha256:…` for an untagged one): its digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, String>,
}

impl Inventory {
    /// The packages of `manager` (`dpkg`, `rpm`) by architecture, each `name → version` (the
    /// architecture-free ones, `all` and `noarch`, and those of a record that kept no
    /// architecture, under each of `arches`): what `freeze` pins.
    pub fn by_arch(&self, manager: &str, arches: &[&str]) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (key, p) in self.packages.iter().filter(|(_, p)| p.manager == manager) {
            let name = key.split_once(':').map_or(key.as_str(), |(n, _)| n);
            let any = matches!(p.architecture.as_str(), "all" | "noarch" | "");
            for arch in arches.iter().filter(|a| any || p.architecture == **a) {
                out.entry((*arch).to_owned()).or_default().insert(name.to_owned(), p.version.clone());
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub version: String,
    /// The source package (dpkg's `Source`, rpm's source rpm), or the package's own name.
    pub source: String,
    /// `dpkg` or `rpm`.
    pub manager: String,
    /// The package's architecture (`amd64`, `all`, `x86_64`, `noarch`); empty in a record
    /// written before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub architecture: String,
    /// The bundle carries a package of this name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub carried: bool,
}

/// The name patterns of the `ROCm` family and the GPU drivers (each a prefix; also matched
/// without a `lib` prefix: `libamdhip64-6`, `libhsa-runtime64-1`).
const FAMILY: [&str; 16] = [
    "rocm",
    "roc",
    "hip",
    "hsa",
    "amdrocm-",
    "amd-smi",
    "rccl",
    "miopen",
    "migraphx",
    "amdgpu",
    "amdhip",
    "nvidia-driver",
    "nvidia-kernel",
    "nvidia-compute",
    "cuda-drivers",
    "datacenter-gpu-manager",
];

/// Whether a package belongs to the GPU stack by its name.
pub fn family(name: &str) -> bool {
    let bare = name.strip_prefix("lib").unwrap_or(name);
    FAMILY.iter().any(|p| name.starts_with(p) || bare.starts_with(p))
}

/// What to look for beyond the family: the packages a bundle carries, the Python environments
/// to list.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub carried: BTreeSet<String>,
    pub venvs: Vec<PathBuf>,
    /// `[validation] rocm_from`: the package whose version is the stack's, after the version
    /// file and `rocm-core`.
    pub rocm_from: Option<String>,
    /// `[validation] cuda_from`: the package whose version is the CUDA toolkit's, after its
    /// version file.
    pub cuda_from: Option<String>,
    /// Every installed package, not only the stack's (`airlock probe`: the inventory `freeze`
    /// and `probe --inventory-diff` read).
    pub everything: bool,
}

impl Scope {
    fn wants(&self, name: &str) -> bool {
        self.everything || family(name) || self.carried.contains(name)
    }
}

impl Scope {
    /// `AIRLOCK_PROBE_VENVS` (paths separated by `:`), and the packages `carried`.
    pub fn from_env(carried: BTreeSet<String>) -> Self {
        let venvs =
            std::env::var_os("AIRLOCK_PROBE_VENVS").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default();
        Self { carried, venvs, rocm_from: None, cuda_from: None, everything: false }
    }
}

pub fn collect(root: &HostRoot, scope: &Scope) -> Inventory {
    let mut packages = BTreeMap::new();
    let status = root.path().join("var/lib/dpkg/status");
    let mut bytes = Vec::new();
    let read = std::fs::File::open(&status)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_STATUS), &mut bytes));
    if read.is_ok() {
        dpkg(&String::from_utf8_lossy(&bytes), scope, &mut packages);
    }
    rpm(root.path(), scope, &mut packages);
    Inventory { packages, python: python(&scope.venvs), images: images() }
}

/// Installed stanzas of a dpkg status file.
pub fn dpkg(status: &str, scope: &Scope, out: &mut BTreeMap<String, Installed>) {
    let mut found = Vec::new();
    for stanza in status.split("\n\n") {
        let field =
            |k: &str| stanza.lines().find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(':'))).map(str::trim);
        let (Some(name), Some(version)) = (field("Package"), field("Version")) else { continue };
        let installed = field("Status").is_some_and(|s| s.ends_with(" installed") && !s.contains("not-installed"));
        if !installed || !scope.wants(name) {
            continue;
        }
        // `Source: hip (6.4.1)` names the source package and, when it differs, its version.
        let source = field("Source").and_then(|s| s.split_whitespace().next()).unwrap_or(name);
        let installed = Installed {
            version: version.to_owned(),
            source: source.to_owned(),
            manager: "dpkg".into(),
            architecture: field("Architecture").unwrap_or_default().to_owned(),
            carried: scope.carried.contains(name),
        };
        found.push((name.to_owned(), installed));
    }
    keyed(found, out);
}

/// Packages keyed by name, or by `name:arch` for a name installed for several architectures
/// (`libc6:amd64` and `libc6:i386`, as dpkg-query names them).
fn keyed(found: Vec<(String, Installed)>, out: &mut BTreeMap<String, Installed>) {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for (name, _) in &found {
        *count.entry(name.clone()).or_default() += 1;
    }
    for (name, installed) in found {
        let key = if count[&name] > 1 { format!("{name}:{}", installed.architecture) } else { name };
        out.insert(key, installed);
    }
}

/// `rpm -qa` under `root`, where rpm runs and its database is there.
fn rpm(root: &Path, scope: &Scope, out: &mut BTreeMap<String, Installed>) {
    if !super::host::has_rpmdb(root) {
        return;
    }
    let format = "%{NAME}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\t%{SOURCERPM}\\t%{ARCH}\\n";
    let root_arg = root.display().to_string();
    let Some(text) = tool("rpm", &["--root", &root_arg, "-qa", "--qf", format]) else { return };
    let mut found = Vec::new();
    for line in text.lines() {
        let mut f = line.split('\t');
        let (Some(name), Some(evr), Some(srpm)) = (f.next(), f.next(), f.next()) else { continue };
        if !scope.wants(name) {
            continue;
        }
        // `hip-6.4.1-1.el9.src.rpm` → `hip`; `gpg-pubkey` has no source rpm (`(none)`).
        let source = srpm.strip_suffix(".src.rpm").and_then(|s| s.rsplitn(3, '-').nth(2)).unwrap_or(name);
        let installed = Installed {
            version: evr.to_owned(),
            source: source.to_owned(),
            manager: "rpm".into(),
            architecture: f.next().unwrap_or_default().trim().to_owned(),
            carried: scope.carried.contains(name),
        };
        found.push((name.to_owned(), installed));
    }
    keyed(found, out);
}

/// A tool's standard output, bounded in time and size; `None` when it is missing or fails.
fn tool(program: &str, args: &[&str]) -> Option<String> {
    let path = super::find_on_path(program)?;
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let done = crate::validate::bounded::run(&path, &args, Duration::from_secs(60), 16 << 20).ok()?;
    done.status.filter(std::process::ExitStatus::success)?;
    Some(String::from_utf8_lossy(&done.stdout).into_owned())
}

#[derive(Deserialize)]
struct PipPackage {
    name: String,
    version: String,
}

/// `pip list --format json` of each environment (`ENV/bin/python -m pip`).
fn python(venvs: &[PathBuf]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for venv in venvs {
        let python = venv.join("bin/python");
        let args = ["-m", "pip", "list", "--format", "json", "--disable-pip-version-check"];
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let listed = crate::validate::bounded::run(&python, &args, Duration::from_secs(60), 16 << 20)
            .ok()
            .filter(|d| d.status.is_some_and(|s| s.success()))
            .and_then(|d| serde_json::from_slice::<Vec<PipPackage>>(&d.stdout).ok());
        let packages = match listed {
            Some(list) => list.into_iter().map(|p| (p.name, p.version)).collect(),
            None => BTreeMap::from([("(pip list failed)".to_owned(), super::UNKNOWN.to_owned())]),
        };
        out.insert(venv.display().to_string(), packages);
    }
    out
}

#[derive(Deserialize)]
struct CrictlImages {
    #[serde(default)]
    images: Vec<CrictlImage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CrictlImage {
    #[serde(default)]
    repo_tags: Vec<String>,
    #[serde(default)]
    repo_digests: Vec<String>,
}

#[derive(Deserialize)]
struct DockerImage {
    #[serde(rename = "Repository")]
    repository: String,
    #[serde(rename = "Tag", default)]
    tag: String,
    #[serde(rename = "Digest", default)]
    digest: String,
}

/// The images the container runtime holds, with their digests: `crictl images --digests -o
/// json` (Kubernetes nodes), else `docker images --digests`.
fn images() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(text) = tool("crictl", &["images", "--digests", "-o", "json"]) {
        for image in serde_json::from_str::<CrictlImages>(&text).map(|c| c.images).unwrap_or_default() {
            let digest = image.repo_digests.first().and_then(|d| d.split_once('@')).map(|(_, d)| d.to_owned());
            let Some(digest) = digest else { continue };
            let names = if image.repo_tags.is_empty() { image.repo_digests.clone() } else { image.repo_tags.clone() };
            for name in names {
                out.insert(name, digest.clone());
            }
        }
        return out;
    }
    if let Some(text) = tool("docker", &["images", "--digests", "--format", "{{json .}}"]) {
        for image in text.lines().filter_map(|l| serde_json::from_str::<DockerImage>(l).ok()) {
            if !image.digest.starts_with("sha256:") {
                continue;
            }
            let name = if image.tag.is_empty() || image.tag == "<none>" {
                format!("{}@{}", image.repository, image.digest)
            } else {
                format!("{}:{}", image.repository, image.tag)
            };
            out.insert(name, image.digest);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rocm_family_by_name_with_or_without_lib() {
        for yes in [
            "amdrocm-core",
            "libamdhip64-6",
            "hipcc",
            "libhsa-runtime64-1",
            "rocblas",
            "miopen-hip",
            "rccl",
            "migraphx",
            "amd-smi-lib",
            "amdgpu-dkms",
            "rocm-core",
        ] {
            assert!(family(yes), "{yes}");
        }
        for no in ["bash", "libc6", "python3", "hello"] {
            assert!(!family(no), "{no}");
        }
    }

    #[test]
    fn dpkg_status_gives_installed_family_and_carried_packages_with_their_source() {
        let status = "Package: libamdhip64-6\nStatus: install ok installed\nVersion: 6.4.1-1\nSource: hip (6.4.1)\n\nPackage: hello\nStatus: install ok installed\nVersion: 2.10-3\n\nPackage: rocblas\nStatus: deinstall ok config-files\nVersion: 4.1-1\n\nPackage: bash\nStatus: install ok installed\nVersion: 5.2\n";
        let mut scope = Scope { carried: ["hello".to_owned()].into(), ..Scope::default() };
        let mut out = BTreeMap::new();
        dpkg(status, &scope, &mut out);
        assert_eq!(out.keys().collect::<Vec<_>>(), ["hello", "libamdhip64-6"]);
        assert_eq!((out["libamdhip64-6"].source.as_str(), out["libamdhip64-6"].carried), ("hip", false));
        assert!(out["hello"].carried);
        // `airlock probe`: every installed package, whatever its name.
        scope.everything = true;
        let mut all = BTreeMap::new();
        dpkg(status, &scope, &mut all);
        assert_eq!(all.keys().collect::<Vec<_>>(), ["bash", "hello", "libamdhip64-6"]);
    }

    #[test]
    fn a_name_installed_for_two_architectures_is_keyed_by_both() {
        let status = "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9\n\nPackage: libc6\nStatus: install ok installed\nArchitecture: i386\nVersion: 2.36-9\n\nPackage: jq\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.6-2.1\n";
        let scope = Scope { everything: true, ..Scope::default() };
        let mut out = BTreeMap::new();
        dpkg(status, &scope, &mut out);
        assert_eq!(out.keys().collect::<Vec<_>>(), ["jq", "libc6:amd64", "libc6:i386"]);
        assert_eq!(out["jq"].architecture, "amd64");
    }
}
