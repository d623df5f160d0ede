//! The upgrade guide's decision rule, applied to one probed host and a bundle's
//! `[[validation.target]]` rows. Per field: **green** it matches; **amber** the row is silent
//! about it, or it cannot be determined on a live, detected device (an inbox driver without a
//! version file); **red** it conflicts, or the evidence is missing (no GPU detected, a tool
//! failing). A row is its worst field. A GPU is as good as the best row that names it (by
//! market name and, when the row gives one, its gfx target): support never transfers from one
//! GPU to another, so a GPU no row names is red. The host is its worst GPU.

use serde::Serialize;

use super::probe::{Gpu, Probe, UNKNOWN};
use super::version::{Radix, Requirement, Version};
use crate::spec::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Green,
    Amber,
    Red,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FieldResult {
    pub field: String,
    pub expected: String,
    pub actual: String,
    pub verdict: Verdict,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RowResult {
    /// The row's index among the bundle's targets, and its `gpu`.
    pub target: usize,
    pub gpu: String,
    /// Which detected GPU it was compared with (`amd 0`).
    pub detected: String,
    pub verdict: Verdict,
    pub fields: Vec<FieldResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub verdict: Verdict,
    /// The GPUs found, as `vendor index market_name (gfx)`.
    pub detected: Vec<String>,
    pub rows: Vec<RowResult>,
    /// Why the verdict is what it is, in a sentence.
    pub summary: String,
}

fn field(
    field: &str,
    expected: impl Into<String>,
    actual: &str,
    verdict: Verdict,
    reason: impl Into<String>,
) -> FieldResult {
    FieldResult {
        field: field.into(),
        expected: expected.into(),
        actual: actual.into(),
        verdict,
        reason: reason.into(),
    }
}

/// Whether a row's `gpu` names this GPU: its market name contains it as a word
/// (`MI300X` names `AMD Instinct MI300X`, not `MI300XL`).
fn names(row_gpu: &str, market_name: &str) -> bool {
    let want = row_gpu.to_ascii_lowercase();
    market_name.to_ascii_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == want)
        || market_name.eq_ignore_ascii_case(row_gpu)
}

/// `*` and `?` globs, as kernel rows are written (`6.8.*`).
fn glob(pattern: &str, value: &str) -> bool {
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches(value))
}

fn version_field(name: &str, want: Option<&String>, actual: &str, radix: Radix, live: bool) -> FieldResult {
    let Some(want) = want else {
        return field(name, "", actual, Verdict::Amber, "the row is silent about it");
    };
    let req = match Requirement::parse(want, radix) {
        Ok(r) => r,
        Err(e) => return field(name, want.as_str(), actual, Verdict::Red, e.to_string()),
    };
    match Version::parse(actual, radix) {
        None if actual == UNKNOWN && live => {
            field(name, want.as_str(), actual, Verdict::Amber, "cannot be determined on this live device")
        }
        None => field(name, want.as_str(), actual, Verdict::Red, "no evidence of it on this host"),
        Some(v) if req.matches(&v) => {
            field(name, want.as_str(), actual, Verdict::Green, format!("{actual} satisfies {req}"))
        }
        Some(_) => field(name, want.as_str(), actual, Verdict::Red, format!("{actual} does not satisfy {req}")),
    }
}

/// What a row writes for the kernel's own GPU driver (`amdgpu = "inbox"`).
pub const INBOX: &str = "inbox";

/// The GPU driver: a version requirement, or `inbox`: the kernel's own driver, which has no
/// version of its own (a distribution's `ROCm` runs on it), so the row's `kernel` field is what
/// qualifies it. A versioned (`DKMS`) driver where the row names the inbox one is another driver.
fn amdgpu_field(want: Option<&String>, host: &super::probe::Host, live: bool) -> FieldResult {
    if !want.is_some_and(|w| w.trim().eq_ignore_ascii_case(INBOX)) {
        return version_field("amdgpu", want, &host.amdgpu, Radix::Decimal, live);
    }
    if host.amdgpu == UNKNOWN && live {
        let actual = format!("inbox, kernel {}", host.kernel);
        return field(
            "amdgpu",
            INBOX,
            &actual,
            Verdict::Green,
            "the kernel's own driver: judged by the row's `kernel`",
        );
    }
    if host.amdgpu == UNKNOWN {
        return field("amdgpu", INBOX, UNKNOWN, Verdict::Red, "no amdgpu module is loaded on this host");
    }
    field(
        "amdgpu",
        INBOX,
        &host.amdgpu,
        Verdict::Red,
        format!("a versioned driver ({}), not the kernel's own the row was qualified with", host.amdgpu),
    )
}

fn list_field(name: &str, wanted: &[String], actual: &str, matches: impl Fn(&str, &str) -> bool) -> FieldResult {
    if wanted.is_empty() {
        return field(name, "", actual, Verdict::Amber, "the row is silent about it");
    }
    let expected = wanted.join(" | ");
    if actual == UNKNOWN {
        return field(name, expected, actual, Verdict::Red, "no evidence of it on this host");
    }
    match wanted.iter().find(|w| matches(w, actual)) {
        Some(w) => field(name, expected, actual, Verdict::Green, format!("matches `{w}`")),
        None => field(name, expected, actual, Verdict::Red, "not one the row was qualified on"),
    }
}

/// A mode field (`partition.compute`, `virtualization`): one of the modes the row names.
fn mode_field(name: &str, wanted: &[String], actual: &str, live: bool) -> FieldResult {
    if wanted.is_empty() {
        return field(
            name,
            "",
            actual,
            Verdict::Amber,
            "the row is silent about it: support never transfers across modes",
        );
    }
    let expected = wanted.join(" | ");
    if actual == UNKNOWN {
        let (verdict, reason) = if live {
            (Verdict::Amber, "cannot be determined on this live device")
        } else {
            (Verdict::Red, "no evidence of it on this host")
        };
        return field(name, expected, actual, verdict, reason);
    }
    match wanted.iter().find(|w| w.eq_ignore_ascii_case(actual)) {
        Some(w) => field(name, expected, actual, Verdict::Green, format!("`{w}` is a mode the row was qualified in")),
        None => {
            field(name, expected, actual, Verdict::Red, "a mode the row was not qualified in: support never transfers")
        }
    }
}

/// `virtualization`: a mode (`baremetal`, `passthrough`, `sriov`), or a mode and the hypervisor
/// it was qualified under where that matters (`passthrough:kvm`).
fn virtualization_field(wanted: &[String], mode: &str, hypervisor: &str) -> FieldResult {
    let qualified = wanted.iter().any(|w| w.contains(':'));
    let actual = if qualified && mode != UNKNOWN && mode != "baremetal" {
        format!("{mode}:{hypervisor}")
    } else {
        mode.to_owned()
    };
    let matches = |w: &String| match w.split_once(':') {
        Some((m, h)) => m.eq_ignore_ascii_case(mode) && h.eq_ignore_ascii_case(hypervisor),
        None => w.eq_ignore_ascii_case(mode),
    };
    let mut f = mode_field("virtualization", wanted, &actual, false);
    if f.verdict == Verdict::Red && mode != UNKNOWN && wanted.iter().any(matches) {
        f.verdict = Verdict::Green;
        f.reason = "a mode (and hypervisor) the row was qualified in".into();
    }
    f
}

/// The fields only AMD GPUs have.
fn amd_fields(t: &Target, gpu: &Gpu, probe: &Probe, fields: &mut Vec<FieldResult>) {
    let (host, live) = (&probe.host, probe.host.amdgpu_live);
    fields.push(match &t.gfx {
        None => field("gfx", "", &gpu.gfx, Verdict::Amber, "the row is silent about it"),
        Some(g) if g.eq_ignore_ascii_case(&gpu.gfx) => {
            field("gfx", g.as_str(), &gpu.gfx, Verdict::Green, "same target")
        }
        Some(g) => field("gfx", g.as_str(), &gpu.gfx, Verdict::Red, "another LLVM target"),
    });
    fields.push(amdgpu_field(t.amdgpu.as_ref(), host, live));
    let mut rocm = version_field("rocm", t.rocm.as_ref(), &host.rocm, Radix::Decimal, false);
    if !host.rocm_source.is_empty() {
        rocm.reason = format!("{} (from {})", rocm.reason, host.rocm_source);
    } else if rocm.verdict == Verdict::Red && host.rocm == UNKNOWN {
        "no evidence of it on this host: no /opt/rocm/.info/version, no rocm-core installed, and the bundle \
         names no `[validation] rocm_from` package"
            .clone_into(&mut rocm.reason);
    }
    fields.push(rocm);
    for (fw_id, want) in &t.firmware {
        let actual = gpu.firmware.get(fw_id).map_or(UNKNOWN, String::as_str);
        let mut f = version_field(&format!("firmware.{fw_id}"), Some(want), actual, Radix::of_firmware(fw_id), false);
        if actual == UNKNOWN {
            f.reason = format!("this GPU reports no {fw_id}");
        }
        fields.push(f);
    }
    let modes = t.partition.clone().unwrap_or_default();
    fields.push(mode_field("partition.compute", &modes.compute, &gpu.compute_partition, live));
    fields.push(mode_field("partition.memory", &modes.memory, &gpu.memory_partition, live));
}

/// The fields only NVIDIA GPUs have.
fn nvidia_fields(t: &Target, gpu: &Gpu, host: &super::probe::Host, fields: &mut Vec<FieldResult>) {
    fields.push(version_field("driver", t.driver.as_ref(), &gpu.driver, Radix::Decimal, true));
    fields.push(version_field("compute_cap", t.compute_cap.as_ref(), &gpu.compute_cap, Radix::Decimal, true));
    let mig: Vec<String> = t.mig.iter().cloned().collect();
    fields.push(mode_field("mig", &mig, &gpu.mig, true));
    if t.cuda.is_some() {
        let mut cuda = version_field("cuda", t.cuda.as_ref(), &host.cuda, Radix::Decimal, false);
        if !host.cuda_source.is_empty() {
            cuda.reason = format!("{} (from {})", cuda.reason, host.cuda_source);
        } else if cuda.verdict == Verdict::Red {
            "no evidence of it on this host: no /usr/local/cuda/version.json, and the bundle names no \
             `[validation] cuda_from` package"
                .clone_into(&mut cuda.reason);
        }
        fields.push(cuda);
    }
}

/// One row against one GPU of the host, without the fields `defer` names (judged later).
fn row(index: usize, t: &Target, gpu: &Gpu, probe: &Probe, defer: &dyn Fn(&str) -> bool) -> RowResult {
    let host = &probe.host;
    let mut fields = vec![if names(&t.gpu, &gpu.market_name) {
        field("gpu", t.gpu.as_str(), &gpu.market_name, Verdict::Green, "named by the row")
    } else {
        field("gpu", t.gpu.as_str(), &gpu.market_name, Verdict::Red, "another GPU: support never transfers")
    }];
    let os = format!("{} {}", host.os_id, host.os_version);
    let os = if host.os_id == UNKNOWN { UNKNOWN.to_owned() } else { os };
    fields.push(list_field("os", &t.os, &os, str::eq_ignore_ascii_case));
    fields.push(list_field("kernel", &t.kernel, &host.kernel, glob));
    fields.push(virtualization_field(&t.virtualization, &gpu.virtualization, &host.virtualization.hypervisor));
    match gpu.vendor.as_str() {
        "nvidia" => nvidia_fields(t, gpu, host, &mut fields),
        _ => amd_fields(t, gpu, probe, &mut fields),
    }
    fields.retain(|f| !defer(&f.field));
    let verdict = fields.iter().map(|f| f.verdict).max().unwrap_or(Verdict::Red);
    RowResult { target: index, gpu: t.gpu.clone(), detected: format!("{} {}", gpu.vendor, gpu.index), verdict, fields }
}

/// The site verdict for `probe` under `targets` (`None` when the bundle has no targets).
pub fn classify(targets: &[Target], probe: &Probe) -> Option<Outcome> {
    classify_without(targets, probe, &|_| false)
}

/// The verdict on the fields `defer` does not name: what the probe can already answer before
/// a bundle's packages change the stack (the guide's "intersect"), the rest judged after.
pub fn classify_without(targets: &[Target], probe: &Probe, defer: &dyn Fn(&str) -> bool) -> Option<Outcome> {
    if targets.is_empty() {
        return None;
    }
    let detected: Vec<String> =
        probe.gpus.iter().map(|g| format!("{} {} {} ({})", g.vendor, g.index, g.market_name, g.gfx)).collect();
    if probe.gpus.is_empty() {
        let tools: Vec<String> = probe.tools.iter().map(|(name, t)| format!("{name}: {}", t.status)).collect();
        let summary = format!("red: no GPU detected ({})", tools.join("; "));
        return Some(Outcome { verdict: Verdict::Red, detected, rows: Vec::new(), summary });
    }
    let mut rows = Vec::new();
    let mut host_verdict = Verdict::Green;
    let mut deciding: Option<(String, RowResult)> = None;
    for gpu in &probe.gpus {
        let results: Vec<RowResult> = targets.iter().enumerate().map(|(i, t)| row(i, t, gpu, probe, defer)).collect();
        let best = results.iter().min_by_key(|r| r.verdict).cloned();
        if let Some(best) = best
            && (deciding.is_none() || best.verdict > host_verdict)
        {
            host_verdict = host_verdict.max(best.verdict);
            deciding = Some((format!("GPU {} ({})", gpu.index, gpu.market_name), best));
        }
        rows.extend(results);
    }
    let word = super::word(host_verdict);
    let summary = match deciding {
        Some((gpu, best)) if host_verdict != Verdict::Green => {
            let why: Vec<String> = best
                .fields
                .iter()
                .filter(|f| f.verdict == host_verdict)
                .map(|f| format!("{}: {}", f.field, f.reason))
                .collect();
            format!("{word}: {gpu}, best row `{}`: {}", best.gpu, why.join("; "))
        }
        Some((gpu, best)) => format!("green: {gpu} matches row `{}`", best.gpu),
        None => format!("{word}: no row"),
    };
    Some(Outcome { verdict: host_verdict, detected, rows, summary })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::validate::probe::{HostRoot, amdsmi, host};

    /// A recorded AMD host, parsed without running anything.
    fn recorded(name: &str) -> Probe {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/probes").join(name);
        let host = host::collect(&HostRoot::at(&dir.join("root")));
        let read = |f: &str| std::fs::read_to_string(dir.join("out").join(f)).ok();
        let firmware = read("amd-smi-firmware.json")
            .map(|t| amdsmi::parse_firmware(&amdsmi::envelope(&t).unwrap()))
            .unwrap_or_default();
        let gpus = read("amd-smi-static.json")
            .map(|t| amdsmi::parse_static(&amdsmi::envelope(&t).unwrap()))
            .unwrap_or_default()
            .into_iter()
            .map(|s| {
                let mut g: Gpu = serde_json::from_value(serde_json::json!({
                    "vendor": "amd", "index": s.gpu, "market_name": s.market_name, "gfx": s.gfx, "device_id": s.device_id,
                    "bdf": s.bdf, "compute_units": s.compute_units, "firmware": {}, "vbios": s.ifwi_version,
                    "compute_partition": s.compute_partition, "memory_partition": s.memory_partition,
                    "virtualization": "baremetal", "uuid": UNKNOWN,
                    "driver": s.driver_version, "compute_cap": UNKNOWN, "memory": UNKNOWN, "mig": UNKNOWN
                }))
                .unwrap();
                g.firmware = firmware.get(&s.gpu).cloned().unwrap_or_default();
                g
            })
            .collect();
        Probe {
            host,
            gpus,
            amd_smi_version: UNKNOWN.into(),
            tools: BTreeMap::new(),
            inventory: crate::validate::probe::inventory::Inventory::default(),
        }
    }

    fn row(gpu: &str) -> Target {
        serde_json::from_value(serde_json::json!({
            "gpu": gpu, "gfx": "gfx942", "os": ["ubuntu 24.04", "ubuntu 22.04"], "kernel": ["6.8.*", "6.14.*"],
            "amdgpu": ">=6.12", "rocm": "7.0.*", "firmware": {"PLDM_BUNDLE": ">=01.25.05.00"},
            "partition": {"compute": ["SPX"], "memory": ["NPS1"]}, "virtualization": ["baremetal"]
        }))
        .unwrap()
    }

    fn field<'a>(o: &'a Outcome, name: &str) -> &'a FieldResult {
        o.rows[0].fields.iter().find(|f| f.field == name).unwrap()
    }

    #[test]
    fn virtualization_can_name_the_hypervisor() {
        let f = |wanted: &[&str], mode, hv| {
            virtualization_field(&wanted.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(), mode, hv).verdict
        };
        assert_eq!(f(&["passthrough:kvm"], "passthrough", "kvm"), Verdict::Green);
        assert_eq!(f(&["passthrough:kvm"], "passthrough", "vmware"), Verdict::Red, "another hypervisor");
        assert_eq!(f(&["passthrough"], "passthrough", "vmware"), Verdict::Green, "any hypervisor when none is named");
        assert_eq!(f(&["baremetal", "passthrough:kvm"], "baremetal", "none"), Verdict::Green);
        assert_eq!(f(&["baremetal"], "sriov", "kvm"), Verdict::Red);
    }

    #[test]
    fn every_field_matching_is_green() {
        let o = classify(&[row("MI300X")], &recorded("mi300x")).unwrap();
        assert_eq!(o.verdict, Verdict::Green, "{o:#?}");
        assert_eq!(o.detected.len(), 8);
    }

    #[test]
    fn what_is_not_green_is_each_gpus_best_row_counted_once_per_gpu() {
        let mut older = row("MI300X");
        older.os = vec!["ubuntu 20.04".into()];
        let other = row("MI250X");
        let o = classify(&[older, other], &recorded("mi300x")).unwrap();
        let lines = crate::validate::not_green(&o.rows);
        assert!(lines.iter().all(|l| !l.contains("another GPU")), "a row for another GPU is not the reason: {lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("  os") && l.ends_with("on 8 GPUs")), "{lines:?}");
        assert!(lines.iter().all(|l| !l.contains("on 16 GPUs")), "counted per GPU, not per row: {lines:?}");
    }

    #[test]
    fn a_row_naming_the_inbox_driver_is_green_on_the_kernels_own_and_red_on_a_dkms_driver() {
        let mut inbox = row("MI300X");
        inbox.amdgpu = Some(INBOX.into());
        let o = classify(std::slice::from_ref(&inbox), &recorded("mi300x-inbox")).unwrap();
        let f = field(&o, "amdgpu");
        assert_eq!(f.verdict, Verdict::Green, "{o:#?}");
        assert!(f.actual.starts_with("inbox, kernel "), "{f:?}");
        let o = classify(&[inbox], &recorded("mi300x")).unwrap();
        assert_eq!(field(&o, "amdgpu").verdict, Verdict::Red, "a DKMS driver is another driver");
    }

    #[test]
    fn silence_and_an_undeterminable_live_driver_are_amber() {
        let o = classify(&[row("MI300X")], &recorded("mi300x-inbox")).unwrap();
        assert_eq!(o.verdict, Verdict::Amber);
        assert_eq!(field(&o, "amdgpu").reason, "cannot be determined on this live device");
        let mut silent = row("MI300X");
        silent.os.clear();
        let o = classify(&[silent], &recorded("mi300x")).unwrap();
        assert_eq!((o.verdict, field(&o, "os").verdict), (Verdict::Amber, Verdict::Amber));
    }

    #[test]
    fn a_conflict_another_gpu_or_no_gpu_is_red_and_support_never_transfers() {
        let o = classify(&[row("MI300X")], &recorded("mi300x-old")).unwrap();
        assert_eq!(o.verdict, Verdict::Red);
        assert_eq!(field(&o, "firmware.PLDM_BUNDLE").reason, "01.25.03.12 does not satisfy >=01.25.05.00");
        let o = classify(&[row("MI355X")], &recorded("mi300x")).unwrap();
        assert_eq!(
            (o.verdict, field(&o, "gpu").reason.as_str()),
            (Verdict::Red, "another GPU: support never transfers")
        );
        let mut kernel = row("MI300X");
        kernel.kernel = vec!["6.14.*".into()];
        assert_eq!(classify(&[kernel], &recorded("mi300x")).unwrap().verdict, Verdict::Red);
        let o = classify(&[row("MI300X")], &recorded("nogpu")).unwrap();
        assert!(o.verdict == Verdict::Red && o.summary.contains("no GPU detected"), "{}", o.summary);
        assert!(classify(&[], &recorded("mi300x")).is_none(), "no targets: nothing to decide");
        // The best row wins: a red row beside a green one leaves the GPU green.
        assert_eq!(classify(&[row("MI355X"), row("MI300X")], &recorded("mi300x")).unwrap().verdict, Verdict::Green);
    }
}
