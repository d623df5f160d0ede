//! Host facts read from files under `AIRLOCK_HOST_ROOT` (default `/`), so that a recorded host
//! replays in tests: `/etc/os-release`, `/proc/sys/kernel/osrelease` (what `uname -r` prints),
//! `/sys/module/amdgpu/{version,initstate}`, `/opt/rocm/.info/version`, the `hypervisor` flag
//! in `/proc/cpuinfo`, `/sys/hypervisor/type` and the DMI strings systemd reads.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::unknown_if_absent;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Host {
    /// `/etc/os-release` `ID` and `VERSION_ID` (`ubuntu`, `24.04`).
    pub os_id: String,
    pub os_version: String,
    pub kernel: String,
    /// The amdgpu module's own version; "unknown" for an inbox driver (never the kernel's).
    pub amdgpu: String,
    /// `/sys/module/amdgpu/initstate` is `live`.
    pub amdgpu_live: bool,
    pub rocm: String,
    /// Where `rocm` comes from: `/opt/rocm/.info/version`, `rocm-core 10.0.0.100000-42~24.04
    /// (dpkg)`, or the `rocm_from` package; empty when nothing evidences it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rocm_source: String,
    /// The CUDA toolkit's version (`/usr/local/cuda/version.json`, `version.txt`, or the
    /// `cuda_from` package), and where it comes from; absent on hosts recorded before.
    #[serde(default = "super::unknown")]
    pub cuda: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cuda_source: String,
    pub virtualization: Virtualization,
    /// DMI `sys_vendor` and `product_name`.
    pub vendor: String,
    pub product: String,
    /// `/proc/cmdline`.
    pub boot_parameters: String,
    /// `enabled (N groups)` from `/sys/kernel/iommu_groups`, `no groups` when it is empty.
    pub iommu: String,
    /// `/sys/kernel/security/lsm` (comma-separated; `capability` first).
    pub security_modules: String,
    /// Installed `ROCm`, amdgpu and NVIDIA driver packages, `name=version` (the inventory's
    /// family, from dpkg's status and on an rpm host `rpm -qa`).
    pub packages: Vec<String>,
}

/// The CUDA toolkit's version from its own files: `/usr/local/cuda/version.json` (11.1 and
/// newer: `{"cuda": {"version": "12.8.1"}}`), else `version.txt` (`CUDA Version 11.0.228`).
fn cuda_version(root: &HostRoot) -> Option<(String, String)> {
    if let Some(text) = root.read("/usr/local/cuda/version.json")
        && let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(v) = doc["cuda"]["version"].as_str()
    {
        return Some((v.to_owned(), "/usr/local/cuda/version.json".to_owned()));
    }
    let text = root.read("/usr/local/cuda/version.txt")?;
    let v = text.trim().strip_prefix("CUDA Version ")?.trim();
    (!v.is_empty()).then(|| (v.to_owned(), "/usr/local/cuda/version.txt".to_owned()))
}

/// Whether `rpm` runs here and `root` has an rpm database where rpm's `%_dbpath` says.
pub fn has_rpmdb(root: &Path) -> bool {
    let dbpath =
        std::process::Command::new("rpm").args(["--eval", "%_dbpath"]).stdin(std::process::Stdio::null()).output();
    let Ok(dbpath) = dbpath else { return false };
    let dbpath = String::from_utf8_lossy(&dbpath.stdout).trim().to_owned();
    let db = root.join(dbpath.trim_start_matches('/'));
    ["rpmdb.sqlite", "Packages"].iter().any(|f| db.join(f).is_file())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Virtualization {
    /// `baremetal` or `guest` (the CPU's `hypervisor` flag); `unknown` without `/proc/cpuinfo`.
    pub mode: String,
    /// systemd's names from DMI (`kvm`, `qemu`, `vmware`, `microsoft`, `xen`, `amazon`, …).
    pub hypervisor: String,
}

/// Files of the host being probed.
pub struct HostRoot(PathBuf);

impl HostRoot {
    /// `$AIRLOCK_HOST_ROOT`, else `/`.
    pub fn from_env() -> Self {
        Self(std::env::var_os("AIRLOCK_HOST_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from))
    }

    pub fn at(dir: &Path) -> Self {
        Self(dir.to_owned())
    }

    /// A small text file of the host, trimmed; `None` when absent or unreadable.
    pub fn read(&self, path: &str) -> Option<String> {
        let full = self.0.join(path.trim_start_matches('/'));
        let text = std::fs::read(&full).ok()?;
        let text = String::from_utf8_lossy(&text[..text.len().min(1 << 20)]).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// `KEY=value` lines, values optionally quoted.
fn os_release(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').trim_matches('\'').to_owned())
    })
}

/// systemd's DMI vendor table (`src/basic/virt.c`), matched with `startswith`.
fn dmi_hypervisor(values: &[String]) -> Option<&'static str> {
    const TABLE: [(&str, &str); 12] = [
        ("KVM", "kvm"),
        ("Amazon EC2", "amazon"),
        ("QEMU", "qemu"),
        ("VMware", "vmware"),
        ("VMW", "vmware"),
        ("Hyper-V", "microsoft"),
        ("OpenStack", "kvm"),
        ("KubeVirt", "kvm"),
        ("innotek GmbH", "oracle"),
        ("VirtualBox", "oracle"),
        ("Xen", "xen"),
        ("Google Compute Engine", "google"),
    ];
    values.iter().find_map(|v| TABLE.iter().find(|(p, _)| v.starts_with(p)).map(|(_, name)| *name))
}

pub fn collect(root: &HostRoot) -> Host {
    let os = root.read("/etc/os-release").unwrap_or_default();
    let cuda = cuda_version(root);
    let dmi: Vec<String> = ["product_name", "sys_vendor", "board_vendor", "bios_vendor", "product_version"]
        .iter()
        .filter_map(|f| root.read(&format!("/sys/class/dmi/id/{f}")))
        .collect();
    let mode = match root.read("/proc/cpuinfo") {
        Some(cpuinfo)
            if cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor")) =>
        {
            "guest"
        }
        Some(_) => "baremetal",
        None => "unknown",
    };
    let hypervisor = match (mode, dmi_hypervisor(&dmi), root.read("/sys/hypervisor/type")) {
        ("baremetal", _, _) => "none".to_owned(),
        (_, Some(name), _) => name.to_owned(),
        (_, None, Some(kind)) => kind,
        (_, None, None) => "unknown".to_owned(),
    };
    Host {
        os_id: unknown_if_absent(os_release(&os, "ID")),
        os_version: unknown_if_absent(os_release(&os, "VERSION_ID")),
        kernel: unknown_if_absent(root.read("/proc/sys/kernel/osrelease")),
        amdgpu: unknown_if_absent(root.read("/sys/module/amdgpu/version")),
        amdgpu_live: root.read("/sys/module/amdgpu/initstate").as_deref() == Some("live"),
        rocm: unknown_if_absent(root.read("/opt/rocm/.info/version")),
        rocm_source: if root.read("/opt/rocm/.info/version").is_some() {
            "/opt/rocm/.info/version".to_owned()
        } else {
            String::new()
        },
        cuda: unknown_if_absent(cuda.as_ref().map(|(v, _)| v.clone())),
        cuda_source: cuda.map(|(_, s)| s).unwrap_or_default(),
        virtualization: Virtualization { mode: mode.to_owned(), hypervisor },
        vendor: unknown_if_absent(root.read("/sys/class/dmi/id/sys_vendor")),
        product: unknown_if_absent(root.read("/sys/class/dmi/id/product_name")),
        boot_parameters: unknown_if_absent(root.read("/proc/cmdline")),
        iommu: match std::fs::read_dir(root.path().join("sys/kernel/iommu_groups")) {
            Ok(groups) => match groups.count() {
                0 => "no groups".to_owned(),
                n => format!("enabled ({n} groups)"),
            },
            Err(_) => super::UNKNOWN.to_owned(),
        },
        security_modules: unknown_if_absent(root.read("/sys/kernel/security/lsm")),
        // Filled by `probe` from its inventory: dpkg's status and `rpm -qa` are read once.
        packages: Vec::new(),
    }
}
