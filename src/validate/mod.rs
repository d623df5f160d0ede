//! GPU validation on the site: probe the host's stack (`probe`), compare it with the bundle's
//! support matrix field by field (`matrix`, versions compared as numbers by `version`), and run
//! the bundle's acceptance checks (`checks`). The verdict is the worst of the matrix and the
//! checks; `install` activates on green, on amber only when the operator accepts it, never on
//! red.

mod bounded;
pub mod checks;
pub mod matrix;
pub mod metrics;
pub mod probe;
pub mod version;

use serde::Serialize;

use matrix::{RowResult, Verdict};

/// What validation found, kept as evidence in the site's records.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Evidence {
    pub verdict: Verdict,
    pub summary: String,
    pub detected: Vec<String>,
    pub rows: Vec<RowResult>,
    pub checks: Vec<checks::CheckResult>,
    pub probe: probe::Probe,
}

/// A manifest's `validation` section that this airlock cannot read: the stack cannot be shown
/// to be supported, so it is red (exit 4).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreadable(pub String);

impl crate::failure::Classify for Unreadable {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::ValidationRed
    }
}

/// Validate this host against a manifest's `validation` section; `None` when it names no
/// targets (nothing to decide; the record says validation was skipped). A section this airlock
/// cannot read (a newer airlock's fields) is an error, never a silent skip.
pub fn validate(
    validation: &serde_json::Value,
    host: &probe::HostRoot,
    baseline: Option<&metrics::Baseline>,
    scope: &probe::inventory::Scope,
) -> Result<Option<Evidence>, Unreadable> {
    let section = |name: &str| validation.get(name).cloned().unwrap_or_else(|| serde_json::json!([]));
    let targets: Vec<crate::spec::Target> = serde_json::from_value(section("target"))
        .map_err(|e| Unreadable(format!("the bundle's `validation.target` cannot be read: {e}")))?;
    let specs: Vec<checks::Check> = serde_json::from_value(section("check"))
        .map_err(|e| Unreadable(format!("the bundle's `validation.check` cannot be read: {e}")))?;
    let probed = probe::probe(host, scope);
    let Some(outcome) = matrix::classify(&targets, &probed) else { return Ok(None) };
    let results: Vec<checks::CheckResult> = specs.iter().map(|c| checks::run(c, baseline)).collect();
    let (mut verdict, mut summary) = (outcome.verdict, outcome.summary);
    if let Some(worst) = results.iter().filter(|c| c.verdict > verdict).max_by_key(|c| c.verdict) {
        verdict = worst.verdict;
        summary = format!("{}: check `{}`: {}", word(verdict), worst.name, worst.summary);
    }
    Ok(Some(Evidence {
        verdict,
        summary,
        detected: outcome.detected,
        rows: outcome.rows,
        checks: results,
        probe: probed,
    }))
}

/// The pre-flight: this host against the matrix before anything changes, on every field the
/// probe can already answer (GPU, gfx, device, OS, kernel, firmware, partition modes,
/// virtualization, and the driver when `manifest` does not carry one). The fields its
/// packages decide (`deferred`) and its checks wait for the stack they install. `None` when
/// it names no targets.
pub fn preflight(manifest: &crate::bundle::Manifest, host: &probe::HostRoot) -> Result<Option<Evidence>, Unreadable> {
    let targets: Vec<crate::spec::Target> =
        serde_json::from_value(manifest.validation.get("target").cloned().unwrap_or_else(|| serde_json::json!([])))
            .map_err(|e| Unreadable(format!("the bundle's `validation.target` cannot be read: {e}")))?;
    let deferred = deferred(manifest);
    let probed = probe::probe(host, &scope_of(manifest));
    let Some(outcome) = matrix::classify_without(&targets, &probed, &|f| deferred.contains(&f)) else {
        return Ok(None);
    };
    Ok(Some(Evidence {
        verdict: outcome.verdict,
        summary: format!("pre-flight {}", outcome.summary),
        detected: outcome.detected,
        rows: outcome.rows,
        checks: Vec::new(),
        probe: probed,
    }))
}

/// The matrix fields a bundle's packages decide, judged only after they are installed: the
/// stack's version (`rocm`, `cuda`) always, and the driver (`amdgpu`, NVIDIA's `driver`) when it carries one.
pub fn deferred(manifest: &crate::bundle::Manifest) -> Vec<&'static str> {
    use crate::bundle::manifest::Artifact;
    let names: Vec<&str> = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::Deb(d) => Some(d.name.as_str()),
            Artifact::Rpm(r) => Some(r.name.as_str()),
            _ => None,
        })
        .collect();
    let mut out = vec!["rocm", "cuda"];
    if names.iter().any(|n| n.starts_with("amdgpu") || n.starts_with("kmod-amdgpu")) {
        out.push("amdgpu");
    }
    if names.iter().any(|n| {
        ["nvidia-driver", "nvidia-kernel", "nvidia-open", "kmod-nvidia", "cuda-drivers"]
            .iter()
            .any(|p| n.starts_with(p))
    }) {
        out.push("driver");
    }
    out
}

pub fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Green => "green",
        Verdict::Amber => "amber",
        Verdict::Red => "red",
    }
}

/// The fields of an outcome that are not green, as lines for a person: the same finding on
/// several GPUs (8× MI300X) is one line with their count. Untrusted text: escape it to show it.
pub fn not_green(rows: &[RowResult]) -> Vec<String> {
    let mut lines: Vec<(String, usize)> = Vec::new();
    for f in rows.iter().flat_map(|r| r.fields.iter()).filter(|f| f.verdict != Verdict::Green) {
        let line = format!(
            "  {:<22} {}: {} (expected `{}`, found `{}`)",
            f.field,
            word(f.verdict),
            f.reason,
            f.expected,
            f.actual
        );
        match lines.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => lines.push((line, 1)),
        }
    }
    lines.into_iter().map(|(l, n)| if n > 1 { format!("{l} on {n} GPUs") } else { l }).collect()
}

/// The inventory's scope for a bundle: the packages it carries, the environments configured.
pub fn scope_of(manifest: &crate::bundle::Manifest) -> probe::inventory::Scope {
    use crate::bundle::manifest::Artifact;
    let carried = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::Deb(d) => Some(d.name.clone()),
            Artifact::Rpm(r) => Some(r.name.clone()),
            _ => None,
        })
        .collect();
    let mut scope = probe::inventory::Scope::from_env(carried);
    let named = |key: &str| manifest.validation.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    (scope.rocm_from, scope.cuda_from) = (named("rocm_from"), named("cuda_from"));
    for name in scope.rocm_from.iter().chain(&scope.cuda_from) {
        scope.carried.insert(name.clone());
    }
    scope
}

/// The checks a manifest's `validation` section declares (for a baseline run).
pub fn declared_checks(validation: &serde_json::Value) -> Result<Vec<checks::Check>, Unreadable> {
    serde_json::from_value(validation.get("check").cloned().unwrap_or_else(|| serde_json::json!([])))
        .map_err(|e| Unreadable(format!("the bundle's `validation.check` cannot be read: {e}")))
}

#[cfg(test)]
mod tests {
    use super::probe::HostRoot;

    #[test]
    fn a_section_this_airlock_cannot_read_is_an_error_not_a_skip() {
        let host = HostRoot::at(std::path::Path::new("/nonexistent"));
        // A newer airlock's field in a target: before, this parsed as "no targets" and skipped.
        let newer = serde_json::json!({ "target": [{ "gpu": "MI300X", "rocm": ">=7.0", "pcie_gen": "5" }] });
        let err =
            super::validate(&newer, &host, None, &super::probe::inventory::Scope::default()).unwrap_err().to_string();
        assert!(err.contains("validation.target") && err.contains("pcie_gen"), "{err}");
        let bad_check = serde_json::json!({ "target": [{ "gpu": "MI300X" }], "check": [{ "name": "rvs" }] });
        let err = super::validate(&bad_check, &host, None, &super::probe::inventory::Scope::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("validation.check") && err.contains("run"), "{err}");
        // No section at all: nothing to decide.
        assert!(
            super::validate(&serde_json::Value::Null, &host, None, &super::probe::inventory::Scope::default())
                .unwrap()
                .is_none()
        );
    }
}
