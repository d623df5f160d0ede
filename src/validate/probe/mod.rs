//! `airlock probe`: the current-state record of a host's GPU stack, from the real tools' real
//! formats (`reference/gpu-probes.md`): amd-smi (`static`, `firmware`, `version` with
//! `--json`), rocminfo, legacy rocm-smi as a fallback, nvidia-smi, and host files. Tools are
//! found on `PATH`; host files are read under `AIRLOCK_HOST_ROOT`. A field a tool reports as
//! `N/A`, or not at all, is "unknown" in the record, never a guess.

pub mod amdsmi;
pub mod diff;
pub mod host;
pub mod inventory;
pub mod nvidia;
pub mod rocminfo;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use host::{Host, HostRoot};

/// What a record says where it has nothing to say.
pub const UNKNOWN: &str = "unknown";

/// "unknown", for a field a record written before it existed does not have.
pub fn unknown() -> String {
    UNKNOWN.to_owned()
}

/// A value, or "unknown" when the tool gave none (or `N/A`).
pub fn unknown_if_absent(v: Option<String>) -> String {
    match v {
        Some(s) if !s.trim().is_empty() && s.trim() != "N/A" => s.trim().to_owned(),
        _ => UNKNOWN.to_owned(),
    }
}

/// One GPU, AMD or NVIDIA, as the record shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Gpu {
    pub vendor: String,
    pub index: u64,
    pub market_name: String,
    /// The LLVM target (`gfx942`); for NVIDIA, "unknown".
    pub gfx: String,
    pub device_id: String,
    pub bdf: String,
    pub compute_units: String,
    /// `fw_id` → version.
    pub firmware: BTreeMap<String, String>,
    /// vbios / IFWI version.
    pub vbios: String,
    pub compute_partition: String,
    pub memory_partition: String,
    /// `baremetal`, `passthrough`, `sriov` or `unknown`.
    pub virtualization: String,
    #[serde(default)]
    pub health: amdsmi::Health,
    /// NVIDIA only.
    pub uuid: String,
    pub driver: String,
    pub compute_cap: String,
    pub memory: String,
    pub mig: String,
}

impl Gpu {
    fn blank(vendor: &str, index: u64) -> Self {
        let u = || UNKNOWN.to_owned();
        Self {
            vendor: vendor.to_owned(),
            index,
            market_name: u(),
            gfx: u(),
            device_id: u(),
            bdf: u(),
            compute_units: u(),
            firmware: BTreeMap::new(),
            vbios: u(),
            compute_partition: u(),
            memory_partition: u(),
            virtualization: u(),
            health: amdsmi::Health {
                temperature_c: u(),
                power_w: u(),
                ecc_correctable: u(),
                ecc_uncorrectable: u(),
                processes: u(),
            },
            uuid: u(),
            driver: u(),
            compute_cap: u(),
            memory: u(),
            mig: u(),
        }
    }
}

/// How a tool fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Tool {
    pub path: Option<PathBuf>,
    /// `ok`, `missing`, or why it failed.
    pub status: String,
}

/// The current-state record.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Probe {
    pub host: Host,
    pub gpus: Vec<Gpu>,
    pub amd_smi_version: String,
    pub tools: BTreeMap<String, Tool>,
    /// The installed stack: ROCm-family and carried packages, Python environments, images.
    #[serde(default)]
    pub inventory: inventory::Inventory,
}

/// What running a tool gave.
struct Ran {
    stdout: String,
    success: bool,
}

/// A tool on `PATH`, run with `args`, bounded in time (probes must never hang an install).
fn run(tools: &mut BTreeMap<String, Tool>, name: &str, args: &[&str]) -> Option<Ran> {
    let Some(path) = find_on_path(name) else {
        tools.entry(name.to_owned()).or_insert(Tool { path: None, status: "missing".into() });
        return None;
    };
    // One entry per subcommand: a recorded host without `partition` does not hide a good `static`.
    let key =
        args.first().filter(|a| !a.starts_with('-')).map_or_else(|| name.to_owned(), |sub| format!("{name} {sub}"));
    let mut record = |status: String| {
        tools.insert(key.clone(), Tool { path: Some(path.clone()), status });
    };
    let finished = match super::bounded::run(&path, args, Duration::from_secs(60), 16 << 20) {
        Ok(f) => f,
        Err(e) => {
            record(format!("cannot run: {e}"));
            return None;
        }
    };
    let Some(status) = finished.status else {
        record(format!("`{name} {}` did not finish in 60 s", args.join(" ")));
        return None;
    };
    let code = status.code().map_or_else(|| "by a signal".to_owned(), |c| format!("with {c}"));
    record(if status.success() { "ok".into() } else { format!("`{name} {}` exited {code}", args.join(" ")) });
    Some(Ran { stdout: String::from_utf8_lossy(&finished.stdout).into_owned(), success: status.success() })
}

pub(super) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Probe this host (tools on `PATH`, files under `root`), its inventory within `scope`.
pub fn probe(root: &HostRoot, scope: &inventory::Scope) -> Probe {
    let mut tools = BTreeMap::new();
    let host = host::collect(root);
    let (mut gpus, amd_smi_version) = amd_gpus(&mut tools);
    if gpus.is_empty() {
        gpus = rocm_fallback(&mut tools);
    }
    // With an inbox driver the tools report the kernel release as the driver's version: that
    // is not a driver version, so the record says unknown.
    for g in gpus.iter_mut().filter(|g| g.driver == host.kernel) {
        UNKNOWN.clone_into(&mut g.driver);
    }
    gpus.extend(nvidia_gpus(&mut tools));
    for g in &mut gpus {
        g.virtualization = virtualization(&host, g);
    }
    let inventory = inventory::collect(root, scope);
    let mut host = host;
    if host.rocm == UNKNOWN
        && let Some(found) = stack_version(&inventory, Some("rocm-core"), scope.rocm_from.as_deref(), "rocm_from")
    {
        (host.rocm, host.rocm_source) = found;
    }
    if host.cuda == UNKNOWN
        && let Some(found) = stack_version(&inventory, None, scope.cuda_from.as_deref(), "cuda_from")
    {
        (host.cuda, host.cuda_source) = found;
    }
    host.packages = inventory
        .packages
        .iter()
        .filter(|(name, _)| inventory::family(name))
        .map(|(name, i)| format!("{name}={}", i.version))
        .collect();
    Probe { host, gpus, amd_smi_version, tools, inventory }
}

/// A stack's version from what is installed, where its version file is not there: `core`'s
/// (`rocm-core`), else the package the spec names (`rocm_from`, `cuda_from`: a distribution's
/// build), as its upstream version (`10.0.0.100000-42~24.04` is 10.0.0, Debian's `5.2.3-3` is
/// 5.2.3), with its source.
fn stack_version(
    inventory: &inventory::Inventory,
    core: Option<&str>,
    named: Option<&str>,
    key: &str,
) -> Option<(String, String)> {
    let named = named.map(|n| (n, format!(", {key}")));
    let candidates = core.map(|c| (c, String::new())).into_iter().chain(named);
    candidates.into_iter().find_map(|(name, why)| {
        let installed = inventory.packages.get(name)?;
        let version = upstream_version(&installed.version)?;
        Some((version, format!("{name} {} ({}{why})", installed.version, installed.manager)))
    })
}

/// A package version's upstream part as the stack's version: the epoch and the packaging
/// revision dropped (`1:6.4.1-1.el9` is 6.4.1), and AMD's build number after the third
/// component too (`10.0.0.100000` is 10.0.0).
fn upstream_version(package: &str) -> Option<String> {
    let v = package.split_once(':').map_or(package, |(_, v)| v);
    let v = v.rsplit_once('-').map_or(v, |(v, _)| v);
    let parts: Vec<&str> = v.split('.').take(3).collect();
    let numeric = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (!parts.is_empty() && parts.iter().all(numeric)).then(|| parts.join("."))
}

/// AMD GPUs from amd-smi, with their firmware.
fn amd_gpus(tools: &mut BTreeMap<String, Tool>) -> (Vec<Gpu>, String) {
    let version = run(tools, "amd-smi", &["version", "--json"])
        .filter(|r| r.success)
        .map_or_else(|| UNKNOWN.to_owned(), |r| amdsmi::parse_version(&r.stdout).0);
    let Some(ran) = run(tools, "amd-smi", &["static", "--json"]) else { return (Vec::new(), version) };
    let items = match (ran.success, amdsmi::envelope(&ran.stdout)) {
        (true, Ok(items)) => items,
        (_, Err(why)) => {
            tools.insert("amd-smi static".into(), Tool { path: find_on_path("amd-smi"), status: why.to_string() });
            return (Vec::new(), version);
        }
        (false, Ok(_)) => return (Vec::new(), version),
    };
    let firmware = run(tools, "amd-smi", &["firmware", "--json"])
        .filter(|r| r.success)
        .and_then(|r| amdsmi::envelope(&r.stdout).ok())
        .map(|items| amdsmi::parse_firmware(&items))
        .unwrap_or_default();
    // Partition modes are in `static` up to 6.x; from 7.0 only `amd-smi partition` has them.
    let partitions = if amdsmi::parse_static(&items).iter().all(|s| s.compute_partition == UNKNOWN) {
        run(tools, "amd-smi", &["partition", "--json"])
            .filter(|r| r.success)
            .map(|r| amdsmi::parse_partition(&r.stdout))
    } else {
        None
    }
    .unwrap_or_default();
    let json = |tools: &mut BTreeMap<String, Tool>, sub: &str| {
        run(tools, "amd-smi", &[sub, "--json"]).filter(|r| r.success).and_then(|r| amdsmi::envelope(&r.stdout).ok())
    };
    let metric = json(tools, "metric").map(|items| amdsmi::parse_metric(&items)).unwrap_or_default();
    let processes = json(tools, "process").map(|items| amdsmi::parse_process(&items)).unwrap_or_default();
    let uuids = json(tools, "list").map(|items| amdsmi::parse_list(&items)).unwrap_or_default();
    let gpus = amdsmi::parse_static(&items)
        .into_iter()
        .map(|s| {
            let mut g = Gpu::blank("amd", s.gpu);
            g.firmware = firmware.get(&s.gpu).cloned().unwrap_or_default();
            (g.market_name, g.gfx, g.device_id, g.bdf) = (s.market_name, s.gfx, s.device_id, s.bdf);
            (g.compute_units, g.vbios, g.driver) = (s.compute_units, s.ifwi_version, s.driver_version);
            (g.compute_partition, g.memory_partition) = (s.compute_partition, s.memory_partition);
            if let Some((compute, memory)) = partitions.get(&s.gpu) {
                (g.compute_partition, g.memory_partition) = (compute.clone(), memory.clone());
            }
            if let Some(h) = metric.get(&s.gpu) {
                g.health = h.clone();
            }
            if let Some(n) = processes.get(&s.gpu) {
                g.health.processes = n.to_string();
            }
            if let Some(uuid) = uuids.get(&s.gpu) {
                g.uuid.clone_from(uuid);
            }
            g
        })
        .collect();
    (gpus, version)
}

/// Without amd-smi: rocminfo's GPU agents, else legacy rocm-smi's product names.
fn rocm_fallback(tools: &mut BTreeMap<String, Tool>) -> Vec<Gpu> {
    if let Some(ran) = run(tools, "rocminfo", &[]).filter(|r| r.success) {
        let (agents, _) = rocminfo::parse(&ran.stdout);
        if !agents.is_empty() {
            return agents
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    let mut g = Gpu::blank("amd", i as u64);
                    (g.market_name, g.gfx, g.compute_units, g.device_id) =
                        (a.market_name, a.gfx, a.compute_units, a.chip_id);
                    g
                })
                .collect();
        }
    }
    run(tools, "rocm-smi", &["--showproductname", "--json"])
        .filter(|r| r.success)
        .and_then(|r| rocminfo::parse_legacy(&r.stdout).ok())
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, (series, gfx))| {
            let mut g = Gpu::blank("amd", i as u64);
            (g.market_name, g.gfx) = (series, gfx);
            g
        })
        .collect()
}

/// A GPU's virtualization mode, by amd-smi's own rule: bare metal without the CPU's hypervisor
/// flag; in a guest, an AMD device whose ID is a physical function's (`7460`, `73c8`, `74a0`,
/// `74a1`, `74a2`) is passed through, any other AMD device is an SR-IOV virtual function.
fn virtualization(host: &Host, gpu: &Gpu) -> String {
    const PASSTHROUGH: [&str; 5] = ["7460", "73c8", "74a0", "74a1", "74a2"];
    match (host.virtualization.mode.as_str(), gpu.vendor.as_str()) {
        ("baremetal", _) => "baremetal".into(),
        ("guest", "amd") => {
            let id = gpu.device_id.trim_start_matches("0x").to_ascii_lowercase();
            if id == UNKNOWN {
                UNKNOWN.into()
            } else if PASSTHROUGH.contains(&id.as_str()) {
                "passthrough".into()
            } else {
                "sriov".into()
            }
        }
        _ => UNKNOWN.into(),
    }
}

fn nvidia_gpus(tools: &mut BTreeMap<String, Tool>) -> Vec<Gpu> {
    let query = |tools: &mut BTreeMap<String, Tool>, fields: &str| {
        run(tools, "nvidia-smi", &[&format!("--query-gpu={fields}"), "--format=csv,noheader"]).filter(|r| r.success)
    };
    let (ran, old) = match query(tools, nvidia::QUERY) {
        Some(r) => (Some(r), false),
        None if find_on_path("nvidia-smi").is_some() => (query(tools, nvidia::QUERY_OLD), true),
        None => (None, false),
    };
    if ran.is_none() {
        return Vec::new();
    }
    let health =
        run(tools, "nvidia-smi", &[&format!("--query-gpu={}", nvidia::HEALTH_QUERY), "--format=csv,noheader,nounits"])
            .filter(|r| r.success)
            .map(|r| nvidia::parse_health(&r.stdout))
            .unwrap_or_default();
    ran.map(|r| nvidia::parse(&r.stdout, old))
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            let mut g = Gpu::blank("nvidia", i as u64);
            if let Some(h) = health.get(i) {
                g.health = h.clone();
            }
            (g.market_name, g.uuid, g.driver, g.vbios) = (n.name, n.uuid, n.driver, n.vbios);
            (g.compute_cap, g.memory, g.mig) = (n.compute_cap, n.memory, n.mig);
            g
        })
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_cuda_toolkits_version_from_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let cuda = dir.path().join("usr/local/cuda");
        std::fs::create_dir_all(&cuda).unwrap();
        let host = || super::host::collect(&super::HostRoot::at(dir.path()));
        assert_eq!(host().cuda, super::UNKNOWN);
        std::fs::write(cuda.join("version.txt"), "CUDA Version 11.0.228\n").unwrap();
        assert_eq!((host().cuda.as_str(), host().cuda_source.as_str()), ("11.0.228", "/usr/local/cuda/version.txt"));
        let json = r#"{"cuda": {"name": "CUDA SDK", "version": "12.8.1"}, "cuda_cudart": {"version": "12.8.90"}}"#;
        std::fs::write(cuda.join("version.json"), json).unwrap();
        assert_eq!((host().cuda.as_str(), host().cuda_source.as_str()), ("12.8.1", "/usr/local/cuda/version.json"));
    }

    #[test]
    fn a_packages_upstream_version_is_the_stacks() {
        for (package, stack) in [
            ("10.0.0.100000-42~24.04", Some("10.0.0")),
            ("5.2.3-3", Some("5.2.3")),
            ("1:6.4.1-1.el9", Some("6.4.1")),
            ("7.0.2", Some("7.0.2")),
            ("6.4", Some("6.4")),
            ("5.2.3~rc1-1", None),
            ("", None),
        ] {
            assert_eq!(super::upstream_version(package).as_deref(), stack, "{package}");
        }
    }
    use super::*;

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!("{}/testdata/probes/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn amd_smi_envelopes_old_and_new_parse_alike() {
        let new = amdsmi::parse_static(&amdsmi::envelope(&fixture("mi300x/out/amd-smi-static.json")).unwrap());
        let old = amdsmi::parse_static(&amdsmi::envelope(&fixture("mi300x-old/out/amd-smi-static.json")).unwrap());
        assert_eq!((new.len(), old.len()), (8, 2));
        for g in [&new[0], &old[0]] {
            assert_eq!(
                (g.market_name.as_str(), g.gfx.as_str(), g.device_id.as_str()),
                ("AMD Instinct MI300X", "gfx942", "0x74a1")
            );
            assert_eq!(g.ifwi_version, "022.040.003.042.000001", "vbios and ifwi are aliases");
            assert_eq!(g.compute_units, "304");
        }
        assert_eq!((new[0].compute_partition.as_str(), old[0].compute_partition.as_str()), ("SPX", UNKNOWN));
        let cpx = amdsmi::parse_partition(&fixture("mi300x-cpx/out/amd-smi-partition.json"));
        assert_eq!(cpx[&7], ("CPX".into(), "NPS4".into()), "7.0's `partition` command");
        assert_eq!(new[7].bdf, "0000:75:00.0");
        let fw = amdsmi::parse_firmware(&amdsmi::envelope(&fixture("mi300x-old/out/amd-smi-firmware.json")).unwrap());
        assert_eq!(fw[&1]["PLDM_BUNDLE"], "01.25.03.12");
        assert_eq!(
            amdsmi::parse_version(&fixture("mi300x/out/amd-smi-version.json")),
            ("26.0.2+1d9a2ff".into(), "7.0.2".into())
        );
        let text = "AMDSMI Tool: 25.3.0+ede62f2 | AMDSMI Library version: 25.3.0 | ROCm version: 6.4.0 | amdgpu version: 6.12.12 | amd_hsmp version: N/A";
        assert_eq!(amdsmi::parse_version(text), ("25.3.0+ede62f2".into(), "6.4.0".into()));
    }

    #[test]
    fn amd_smi_failures_are_recognised_whatever_the_exit_code() {
        assert!(matches!(
            amdsmi::envelope(r#"{"error": "AMDSMI_STATUS_NOT_INIT", "code": -3}"#).unwrap_err(),
            amdsmi::AnswerError::Reported(_)
        ));
        let prefixed = r#"amdsmi_cli_exceptions.AmdSmiLibraryException: {"error": "x"}"#;
        assert!(matches!(amdsmi::envelope(prefixed).unwrap_err(), amdsmi::AnswerError::NotJson { .. }));
        let na = amdsmi::parse_static(&[serde_json::json!({"gpu": 0, "asic": {"market_name": "N/A"}, "vbios": "N/A"})]);
        assert_eq!((na[0].market_name.as_str(), na[0].ifwi_version.as_str()), (UNKNOWN, UNKNOWN));
        let partitioned =
            serde_json::json!({"gpu": 0, "partition": {"accelerator_partition": "CPX", "memory_partition": "NPS4"}});
        let p = amdsmi::parse_static(&[partitioned]);
        assert_eq!((p[0].compute_partition.as_str(), p[0].memory_partition.as_str()), ("CPX", "NPS4"));
    }

    #[test]
    fn rocminfo_gpu_agents_despite_padding_and_cpu_agents() {
        let (agents, module) = rocminfo::parse(&fixture("mi300x/out/rocminfo.txt"));
        assert_eq!(module.as_deref(), Some("6.12.12"));
        assert_eq!(agents.len(), 1, "the CPU agent is not a GPU");
        assert_eq!((agents[0].gfx.as_str(), agents[0].market_name.as_str()), ("gfx942", "AMD Instinct MI300X"));
        assert_eq!((agents[0].compute_units.as_str(), agents[0].chip_id.as_str()), ("304", "0x74a1"));
        let (_, inbox) = rocminfo::parse(&fixture("mi300x-inbox/out/rocminfo.txt"));
        assert_eq!(inbox, None, "`ROCk module is loaded` names no version");
        let legacy = r#"{"card0": {"Card Series": "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", "Card Model": "0x7408", "GFX Version": "gfx9010"}}"#;
        assert_eq!(
            rocminfo::parse_legacy(legacy).unwrap(),
            [("AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2".into(), "gfx9010".into())]
        );
    }

    #[test]
    fn nvidia_csv_with_absence_tokens_and_old_drivers() {
        let g = nvidia::parse(&fixture("h200/out/nvidia-smi.csv"), false);
        assert_eq!(
            (g[0].name.as_str(), g[0].driver.as_str(), g[0].compute_cap.as_str()),
            ("NVIDIA H200", "570.86.15", "9.0")
        );
        assert_eq!((g[0].memory.as_str(), g[0].mig.as_str()), ("143771 MiB", "Disabled"));
        let tokens = nvidia::parse("NVIDIA A100, GPU-1, 535.1, [N/A], [Not Supported], 40960 MiB, [N/A]", false);
        assert_eq!(
            (tokens[0].vbios.as_str(), tokens[0].compute_cap.as_str(), tokens[0].mig.as_str()),
            (UNKNOWN, UNKNOWN, UNKNOWN)
        );
        let old = nvidia::parse("Tesla V100, GPU-2, 418.87, 88.00.4F.00.09, 16160 MiB", true);
        assert_eq!((old[0].memory.as_str(), old[0].compute_cap.as_str()), ("16160 MiB", UNKNOWN));
    }

    #[test]
    fn host_facts_from_a_recorded_root() {
        let root = |h: &str| {
            HostRoot::at(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/probes").join(h).join("root"))
        };
        let h = host::collect(&root("mi300x"));
        assert_eq!(
            (h.os_id.as_str(), h.os_version.as_str(), h.kernel.as_str()),
            ("ubuntu", "24.04", "6.8.0-50-generic")
        );
        assert_eq!((h.amdgpu.as_str(), h.amdgpu_live, h.rocm.as_str()), ("6.12.12", true, "7.0.2-56"));
        assert_eq!((h.virtualization.mode.as_str(), h.virtualization.hypervisor.as_str()), ("baremetal", "none"));
        let inbox = host::collect(&root("mi300x-inbox"));
        assert_eq!((inbox.amdgpu.as_str(), inbox.amdgpu_live), (UNKNOWN, true), "never the kernel string");
        let guest = host::collect(&root("guest"));
        assert_eq!((guest.virtualization.mode.as_str(), guest.virtualization.hypervisor.as_str()), ("guest", "qemu"));
    }
}
