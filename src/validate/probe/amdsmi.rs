//! amd-smi's JSON, as `reference/gpu-probes.md` describes it: `static` and `metric` print
//! `{"gpu_data": [...]}` from 26 on and a bare list before; `list`, `firmware` and `version`
//! print a bare list always. Failure is a non-zero exit, stdout that is not JSON (newer
//! versions may print `amdsmi_cli_exceptions....Exception: {json}`), or an `"error"` key (24.x
//! prints `{"error": ..., "code": -3}` and exits 0). Unavailable values are `"N/A"`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::unknown_if_absent;

/// A tool's JSON answer that is not what the probe reads: why, in the tool's words where it
/// gave them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not JSON: the parser's words and the answer's first line (escaped, at most 120
    /// characters).
    #[error("not JSON ({detail}){}", .first_line.as_ref().map(|l| format!(": {l}")).unwrap_or_default())]
    NotJson { detail: String, first_line: Option<String> },
    /// amd-smi's own `{"error": …}`.
    #[error("amd-smi reported an error: {0}")]
    Reported(String),
    #[error("{0}")]
    Shape(&'static str),
}

impl crate::failure::Classify for AnswerError {
    /// What a host's tool answered: recorded as the tool's status, decided by the matrix.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

/// The per-GPU objects of an amd-smi JSON answer, whichever envelope it came in.
pub fn envelope(stdout: &str) -> Result<Vec<Value>, AnswerError> {
    let text = stdout.trim();
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let first = text.lines().next().unwrap_or_default();
        let first_line = Some(crate::escape::value(&first.chars().take(120).collect::<String>()).to_string());
        AnswerError::NotJson { detail: e.to_string(), first_line }
    })?;
    if let Some(err) = value.get("error") {
        return Err(AnswerError::Reported(err.to_string()));
    }
    let shape = AnswerError::Shape("neither a list nor a `gpu_data` list");
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(mut map) => match map.remove("gpu_data") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(shape),
        },
        _ => Err(shape),
    }
}

/// One AMD GPU from `amd-smi static --json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Static {
    pub gpu: u64,
    pub market_name: String,
    pub gfx: String,
    pub device_id: String,
    pub bdf: String,
    pub compute_units: String,
    /// The `vbios` block, named `ifwi` from 7.1.0.
    pub ifwi_version: String,
    pub driver_version: String,
    /// `accelerator_partition` (from 6.4.2) or `compute_partition`.
    pub compute_partition: String,
    pub memory_partition: String,
}

fn text(v: Option<&Value>) -> String {
    unknown_if_absent(v.and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }))
}

pub fn parse_static(items: &[Value]) -> Vec<Static> {
    items
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let firmware_block = g.get("ifwi").or_else(|| g.get("vbios"));
            let partition = g.get("partition");
            Static {
                gpu: g.get("gpu").and_then(Value::as_u64).unwrap_or(i as u64),
                market_name: text(g.pointer("/asic/market_name")),
                gfx: text(g.pointer("/asic/target_graphics_version")),
                device_id: text(g.pointer("/asic/device_id")),
                bdf: text(g.pointer("/bus/bdf")),
                compute_units: text(g.pointer("/asic/num_compute_units")),
                ifwi_version: text(firmware_block.and_then(|b| b.get("version"))),
                driver_version: text(g.pointer("/driver/version")),
                compute_partition: text(
                    partition.and_then(|p| p.get("accelerator_partition").or_else(|| p.get("compute_partition"))),
                ),
                memory_partition: text(partition.and_then(|p| p.get("memory_partition"))),
            }
        })
        .collect()
}

/// `gpu` → `fw_id` → version, from `amd-smi firmware --json`.
pub fn parse_firmware(items: &[Value]) -> BTreeMap<u64, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (i, g) in items.iter().enumerate() {
        let gpu = g.get("gpu").and_then(Value::as_u64).unwrap_or(i as u64);
        let list = g.get("fw_list").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let fw = list
            .iter()
            .filter_map(|f| Some((f.get("fw_id")?.as_str()?.to_owned(), text(f.get("fw_version")))))
            .collect();
        out.insert(gpu, fw);
    }
    out
}

/// `(tool version, ROCm version)` from `amd-smi version --json`, or its plain-text form
/// (`AMDSMI Tool: 25.3.0+ede62f2 | AMDSMI Library version: 25.3.0 | ROCm version: 6.4.0 | …`).
pub fn parse_version(stdout: &str) -> (String, String) {
    if let Ok(items) = envelope(stdout)
        && let Some(first) = items.first()
    {
        return (text(first.get("version")), text(first.get("rocm_version")));
    }
    let field =
        |label: &str| stdout.split('|').find_map(|part| part.trim().strip_prefix(label).map(|v| v.trim().to_owned()));
    (unknown_if_absent(field("AMDSMI Tool:")), unknown_if_absent(field("ROCm version:")))
}

/// `gpu` → `(compute, memory)` partition modes from `amd-smi partition --json` (one object:
/// `current_partition: [{gpu_id, accelerator_type, …}]` with `*` marking the current profile,
/// `memory_partition: [{gpu_id, current_memory_partition, …}]`; a key only when non-empty).
pub fn parse_partition(stdout: &str) -> BTreeMap<u64, (String, String)> {
    let Ok(v) = serde_json::from_str::<Value>(stdout.trim()) else { return BTreeMap::new() };
    let id = |e: &Value| e.get("gpu_id").and_then(|g| g.as_u64().or_else(|| g.as_str().and_then(|s| s.parse().ok())));
    let mut out: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for e in v.get("current_partition").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        if let Some(gpu) = id(e) {
            let mode = text(e.get("accelerator_type")).trim_end_matches('*').to_owned();
            out.entry(gpu).or_insert_with(|| (super::UNKNOWN.into(), super::UNKNOWN.into())).0 = mode;
        }
    }
    for e in v.get("memory_partition").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        if let Some(gpu) = id(e) {
            let mode = text(e.get("current_memory_partition")).trim_end_matches('*').to_owned();
            out.entry(gpu).or_insert_with(|| (super::UNKNOWN.into(), super::UNKNOWN.into())).1 = mode;
        }
    }
    out
}

/// A GPU's health baseline: the same record before and after a canary shows what changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    /// Hotspot (AMD) or GPU (NVIDIA) temperature, degrees C.
    pub temperature_c: String,
    pub power_w: String,
    pub ecc_correctable: String,
    pub ecc_uncorrectable: String,
    /// GPU processes running when the record was taken.
    pub processes: String,
}

/// A `{"value": N, "unit": U}` (or a bare number) as text; `N/A` and absence are unknown.
fn measured(v: Option<&Value>) -> String {
    text(v.map(|v| v.get("value").unwrap_or(v)))
}

/// `gpu` → health from `amd-smi metric --json` (either envelope).
pub fn parse_metric(items: &[Value]) -> BTreeMap<u64, Health> {
    items
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let gpu = g.get("gpu").and_then(Value::as_u64).unwrap_or(i as u64);
            let health = Health {
                temperature_c: measured(g.pointer("/temperature/hotspot").or_else(|| g.pointer("/temperature/edge"))),
                power_w: measured(g.pointer("/power/socket_power")),
                ecc_correctable: measured(g.pointer("/ecc/total_correctable_count")),
                ecc_uncorrectable: measured(g.pointer("/ecc/total_uncorrectable_count")),
                processes: super::UNKNOWN.to_owned(),
            };
            (gpu, health)
        })
        .collect()
}

/// `gpu` → running process count from `amd-smi process --json` (a bare list; an idle GPU's
/// `process_info` is the string `No running processes detected`).
pub fn parse_process(items: &[Value]) -> BTreeMap<u64, usize> {
    items
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let gpu = g.get("gpu").and_then(Value::as_u64).unwrap_or(i as u64);
            let list = g.get("process_list").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            (gpu, list.iter().filter(|p| p.get("process_info").is_some_and(Value::is_object)).count())
        })
        .collect()
}

/// `gpu` → uuid from `amd-smi list --json` (`[{gpu, bdf, uuid, kfd_id, node_id, partition_id}]`).
pub fn parse_list(items: &[Value]) -> BTreeMap<u64, String> {
    items
        .iter()
        .enumerate()
        .map(|(i, g)| (g.get("gpu").and_then(Value::as_u64).unwrap_or(i as u64), text(g.get("uuid"))))
        .collect()
}
