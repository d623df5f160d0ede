//! `[[validation.check]]` commands, run after probing (`bounded`: a timeout kills everything a
//! check started), and red when they time out. Results are not read
//! from exit codes alone: RVS exits 0 when a test fails, so its `met: TRUE|FALSE` lines, its
//! `| … | PASS |` table and its `"pass": "true"` JSON decide; `dcgmi diag -j` JSON is read test
//! by test (dcgmi exits non-zero even for warnings); anything else is judged by its exit code.

use std::io::Read as _;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::matrix::Verdict;

/// A check as the manifest carries it: the spec's `[[validation.check]]`, verbatim.
pub use crate::spec::Check;

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub name: String,
    pub verdict: Verdict,
    pub exit_code: Option<i32>,
    pub duration_s: f64,
    pub summary: String,
    /// What it printed (stdout and stderr, at most 1 MiB), as evidence.
    pub output: String,
    /// Its metrics, the current stack's value beside the candidate's, each decided.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<super::metrics::MetricResult>,
}

const DEFAULT_TIMEOUT: u64 = 900;
const MAX_OUTPUT: u64 = 1 << 20;

/// Run every check that declares metrics and read them: the current side (`metrics` reads and
/// decides; running the checks is this module's).
pub fn baseline(checks: &[Check], under: Option<String>) -> super::metrics::Baseline {
    let mut values = std::collections::BTreeMap::new();
    for c in checks.iter().filter(|c| !c.metric.is_empty()) {
        let (_, stdout) = execute(c);
        let read: std::collections::BTreeMap<String, Option<f64>> =
            c.metric.iter().map(|m| (m.name.clone(), super::metrics::read(m, &stdout).ok())).collect();
        values.insert(c.name.clone(), read);
    }
    super::metrics::Baseline { taken_at: Some(crate::clock::Timestamp::now()), under, values }
}

/// Run `check` on the candidate stack and decide it, its metrics against `baseline`: a metric
/// that misses its threshold, or cannot be read, makes the check red.
pub fn run(check: &Check, baseline: Option<&super::metrics::Baseline>) -> CheckResult {
    let (mut result, stdout) = execute(check);
    result.metrics = super::metrics::decide(check, &stdout, baseline);
    let worst = result
        .metrics
        .iter()
        .map(|m| {
            (
                if m.decision == "no-baseline" {
                    Verdict::Amber
                } else if m.decision == "pass" {
                    Verdict::Green
                } else {
                    Verdict::Red
                },
                m,
            )
        })
        .max_by_key(|(v, _)| *v);
    if let Some((verdict, m)) = worst.filter(|(v, _)| *v > Verdict::Green) {
        result.verdict = result.verdict.max(verdict);
        result.summary = format!("metric `{}`: {} ({})", m.name, m.reason, result.summary);
    }
    result
}

/// Run `check` and judge it by what it printed; with its standard output.
pub fn execute(check: &Check) -> (CheckResult, String) {
    let started = Instant::now();
    let timeout = Duration::from_secs(check.timeout_s.unwrap_or(DEFAULT_TIMEOUT));
    let result = |verdict, exit_code, summary: String, output: String| CheckResult {
        name: check.name.clone(),
        verdict,
        exit_code,
        duration_s: started.elapsed().as_secs_f64(),
        summary,
        output,
        metrics: Vec::new(),
    };
    let Some((program, args)) = check.run.split_first() else {
        return (result(Verdict::Red, None, "an empty command".into(), String::new()), String::new());
    };
    let finished = match super::bounded::run(program, args, timeout, MAX_OUTPUT) {
        Ok(f) => f,
        Err(e) => {
            return (result(Verdict::Red, None, format!("cannot run `{program}`: {e}"), String::new()), String::new());
        }
    };
    let stdout = String::from_utf8_lossy(&finished.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&finished.stderr).into_owned();
    let output = if stderr.is_empty() { stdout.clone() } else { format!("{stdout}\n--- stderr ---\n{stderr}") };
    let Some(status) = finished.status else {
        return (
            result(Verdict::Red, None, format!("timed out after {} s and was killed", timeout.as_secs()), output),
            stdout,
        );
    };
    let code = status.code();
    let (verdict, summary) = match check.expect {
        Some(crate::spec::Expect::Exit0) => exit_code(code),
        None => judge(&with_rvs_json(&stdout), code),
    };
    (result(verdict, code, summary, output), stdout)
}

/// The verdict from what a check printed, its exit code last.
pub fn judge(stdout: &str, code: Option<i32>) -> (Verdict, String) {
    if let Some(v) = dcgmi(stdout) {
        return v;
    }
    let failed = stdout.lines().find(|l| {
        l.contains("met: FALSE")
            || l.contains("\"pass\": \"false\"")
            || l.contains("\"pass\":\"false\"")
            || is_table_row(l, "FAIL")
    });
    if let Some(line) = failed {
        return (Verdict::Red, format!("RVS reports a failure (exit {}): {}", code.unwrap_or(-1), line.trim()));
    }
    let passed = stdout.lines().filter(|l| l.contains("met: TRUE") || is_table_row(l, "PASS")).count();
    if passed > 0 {
        return (Verdict::Green, format!("RVS: {passed} result(s) passed"));
    }
    exit_code(code)
}

fn exit_code(code: Option<i32>) -> (Verdict, String) {
    match code {
        Some(0) => (Verdict::Green, "exit 0".into()),
        Some(c) => (Verdict::Red, format!("exit {c}")),
        None => (Verdict::Red, "killed by a signal".into()),
    }
}

/// RVS with `-j` writes its results to a JSON file and prints `Json log file created at PATH`:
/// that file's results are judged with the text.
fn with_rvs_json(stdout: &str) -> String {
    let file = stdout.lines().find_map(|l| l.split("Json log file created at ").nth(1)).map(str::trim);
    let Some(json) = file.and_then(|f| std::fs::File::open(f).ok()).and_then(|f| {
        let mut text = String::new();
        f.take(MAX_OUTPUT).read_to_string(&mut text).ok().map(|_| text)
    }) else {
        return stdout.to_owned();
    };
    format!("{stdout}\n{json}")
}

/// `| gst-… | GST | PASS |`.
fn is_table_row(line: &str, word: &str) -> bool {
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    line.trim_start().starts_with('|') && cells.contains(&word)
}

/// `dcgmi diag -j` JSON (3.x root `DCGM GPU Diagnostic`, 4.x `DCGM Diagnostic`): red if any
/// result failed, amber on a warning, green otherwise.
fn dcgmi(stdout: &str) -> Option<(Verdict, String)> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    let root = v.get("DCGM GPU Diagnostic").or_else(|| v.get("DCGM Diagnostic"))?;
    let mut worst = (Verdict::Green, "dcgmi: every test passed".to_owned());
    for cat in root.get("test_categories")?.as_array()? {
        for test in cat.get("tests").and_then(|t| t.as_array()).map(Vec::as_slice).unwrap_or_default() {
            let name = test.get("name").and_then(|n| n.as_str()).unwrap_or("?");
            for r in test.get("results").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default() {
                let status = r.get("status").and_then(|s| s.as_str()).unwrap_or_default();
                let verdict = match status {
                    "Fail" => Verdict::Red,
                    "Warn" => Verdict::Amber,
                    _ => Verdict::Green,
                };
                if verdict > worst.0 {
                    worst = (
                        verdict,
                        format!(
                            "dcgmi: {name} {status} on GPU {}",
                            r.get("gpu_id").unwrap_or(&serde_json::Value::Null)
                        ),
                    );
                }
            }
        }
    }
    Some(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RVS_PASS: &str = "[RESULT] [302017.167195] [gst-1215Tflops-4K4K8K-rand-fp8] [GPU:: 42583] GFLOPS 1263560 Target GFLOPS: 1215000 met: TRUE\n| gst-1215Tflops-4K4K8K-rand-fp8 | GST | PASS |\n";
    const RVS_FAIL: &str = "[RESULT] [302017.167195] [gst-1215Tflops-4K4K8K-rand-fp8] [GPU:: 42583] GFLOPS 1063560 Target GFLOPS: 1215000 met: FALSE\n| gst-1215Tflops-4K4K8K-rand-fp8 | GST | FAIL |\n";

    #[test]
    fn results_are_read_from_the_output_not_the_exit_code() {
        assert_eq!(judge(RVS_PASS, Some(0)).0, Verdict::Green);
        let (v, why) = judge(RVS_FAIL, Some(0));
        assert_eq!(v, Verdict::Red, "RVS exits 0 on FAIL");
        assert!(why.contains("met: FALSE"), "{why}");
        assert_eq!(
            judge(r#"{"version":"1.0","gst":{"a":[{"gpu_index":"0","pass":"false"}]}}"#, Some(0)).0,
            Verdict::Red
        );
        let dcgm = r#"{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name": "Memory", "results": [{"gpu_id": "0", "status": "Warn"}]}]}]}}"#;
        assert_eq!(judge(dcgm, Some(226)).0, Verdict::Amber, "dcgmi exits non-zero on warnings");
        let dcgm4 = r#"{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "PCIe", "results": [{"gpu_id": "1", "status": "Fail"}]}]}]}}"#;
        assert_eq!(judge(dcgm4, Some(0)).0, Verdict::Red);
        assert_eq!(judge("all good", Some(0)).0, Verdict::Green);
        assert_eq!(judge("", Some(1)).0, Verdict::Red);
    }

    #[test]
    fn rvs_json_files_and_exit0_checks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rvs_1.json");
        std::fs::write(&file, r#"{"version":"1.0","gst":{"gst-1215":[{"gpu_index":"0","target":"1215000","gflops":"1063560","pass":"false"}]}}"#).unwrap();
        let printed = format!("Json log file created at {}", file.display());
        let check = Check {
            name: "rvs".into(),
            run: vec!["echo".into(), printed],
            timeout_s: Some(10),
            expect: None,
            metric: Vec::new(),
        };
        assert_eq!(run(&check, None).verdict, Verdict::Red, "the -j file says FAIL though RVS exits 0");
        let exit0 = Check {
            name: "x".into(),
            run: vec!["sh".into(), "-c".into(), "echo 'met: FALSE'; exit 0".into()],
            timeout_s: Some(10),
            expect: Some(crate::spec::Expect::Exit0),
            metric: Vec::new(),
        };
        assert_eq!(run(&exit0, None).verdict, Verdict::Green, "expect = exit0: the exit code alone");
    }

    #[test]
    fn a_check_that_outlives_its_timeout_is_killed_with_its_children() {
        let check = Check {
            name: "slow".into(),
            run: vec!["sh".into(), "-c".into(), "sleep 30 & sleep 30".into()],
            timeout_s: Some(1),
            expect: None,
            metric: Vec::new(),
        };
        let started = Instant::now();
        let r = run(&check, None);
        assert_eq!(r.verdict, Verdict::Red);
        assert!(r.summary.contains("timed out after 1 s"), "{}", r.summary);
        assert!(started.elapsed() < Duration::from_secs(10), "the group was killed, pipes closed");
        let missing = Check {
            name: "m".into(),
            run: vec!["/nonexistent/rvs".into()],
            timeout_s: None,
            expect: None,
            metric: Vec::new(),
        };
        assert!(run(&missing, None).summary.contains("cannot run"));
    }
}
