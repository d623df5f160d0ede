//! What the playbook passes back of a node's steps: each task's result as Ansible registered
//! it (the collection's modules' return values, or `skipped`, `failed`, `unreachable`). Read
//! leniently field by field — a node's values are whatever its airlock printed — and never
//! trusted beyond their type: a result that cannot be read is the node's failure.

use serde::Deserialize;

use super::NodeName;

/// One task's registered result; absent fields are their defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[allow(clippy::struct_excessive_bools, reason = "the flags of Ansible's result dictionary, as it names them")]
pub struct TaskResult {
    #[serde(default, deserialize_with = "lenient_bool")]
    pub changed: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub failed: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub skipped: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub unreachable: bool,
    #[serde(default, deserialize_with = "lenient_text")]
    pub msg: Option<String>,
    /// `apply`: the bundle id the node took.
    #[serde(default, deserialize_with = "lenient_text")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub verdict: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub pending_reboot: Option<String>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub record: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub seconds: Option<f64>,
    /// `slurm drain`: the node is someone else's and was left alone.
    #[serde(default, deserialize_with = "lenient_bool")]
    pub held: bool,
    /// `slurm drain`: this call drained it.
    #[serde(default, deserialize_with = "lenient_bool")]
    pub drained: bool,
    #[serde(default, deserialize_with = "lenient_number")]
    pub waited: Option<f64>,
    #[serde(default, deserialize_with = "lenient_text")]
    pub reason: Option<String>,
    /// `apply` on failure: airlock's JSON document, whose validation verdict says red or amber.
    #[serde(default)]
    pub result: Option<serde_json::Value>,
}

impl TaskResult {
    /// Whether the task ran and did not fail (a skipped task did not run).
    pub fn ran_ok(&self) -> bool {
        !self.skipped && !self.failed && !self.unreachable
    }

    pub fn went_wrong(&self) -> bool {
        self.failed || self.unreachable
    }

    /// Why it went wrong, in one line.
    pub fn why(&self, what: &str) -> String {
        let msg = self.msg.clone().unwrap_or_else(|| "failed".into());
        if self.unreachable { format!("{what}: unreachable: {msg}") } else { format!("{what}: {msg}") }
    }

    /// The verdict a failed apply reached, when its error document says (`red` or `amber`).
    pub fn failed_verdict(&self) -> Option<String> {
        let v = self.result.as_ref()?.get("error")?.get("verdict")?.as_str()?;
        matches!(v, "red" | "amber").then(|| v.to_owned())
    }
}

/// One node's results of one step, as the playbook gathers them; `None` when the task never
/// ran for it. A part that is not a result object becomes the node's failure.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeResults {
    pub node: NodeName,
    #[serde(default)]
    pub drain: Option<serde_json::Value>,
    #[serde(default)]
    pub apply: Option<serde_json::Value>,
    #[serde(default)]
    pub commit: Option<serde_json::Value>,
    #[serde(default)]
    pub rollback: Option<serde_json::Value>,
    #[serde(default)]
    pub resume: Option<serde_json::Value>,
    #[serde(default)]
    pub hold: Option<serde_json::Value>,
    /// `adopt` or `stage`: the node's `apply --adopt` or `--download-only`.
    #[serde(default)]
    pub step: Option<serde_json::Value>,
    /// The message of a step that failed inside the change's block (its rescue).
    #[serde(default, deserialize_with = "lenient_text")]
    pub failure: Option<String>,
}

/// A node's task result that cannot be read: which task, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("its {task} result cannot be read: {detail}")]
    Fields { task: &'static str, detail: String },
    #[error("its {task} result is not an object: {kind}")]
    NotAnObject { task: &'static str, kind: &'static str },
}

impl crate::failure::Classify for Unreadable {
    /// What a node returned: that node is judged red, the run goes on.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// A result read as a [`TaskResult`]: `Ok(None)` when the task never ran, `Err` naming what
/// could not be read.
pub fn read(value: Option<&serde_json::Value>, task: &'static str) -> Result<Option<TaskResult>, Unreadable> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::Object(_)) => {
            serde_json::from_value(v.clone()).map(Some).map_err(|e| Unreadable::Fields { task, detail: e.to_string() })
        }
        Some(other) => Err(Unreadable::NotAnObject { task, kind: kind(other) }),
    }
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Text as one escaped line, at most 2,000 characters: what a node says may hold anything.
pub fn one_line(s: &str) -> String {
    let escaped = crate::escape::value(s).into_owned();
    if escaped.chars().count() > 2000 {
        let mut cut: String = escaped.chars().take(2000).collect();
        cut.push('…');
        cut
    } else {
        escaped
    }
}

fn lenient_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => b,
        serde_json::Value::String(s) => matches!(s.to_ascii_lowercase().as_str(), "true" | "yes" | "1"),
        serde_json::Value::Number(n) => n.as_i64().is_some_and(|n| n != 0),
        _ => false,
    })
}

fn lenient_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(one_line(&s)),
        other => Some(one_line(&other.to_string())),
    })
}

fn lenient_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_whatever_a_node_put_in_them() {
        let r = read(Some(&serde_json::json!({"changed": "yes", "msg": ["a", 1], "id": 7, "seconds": "1.5"})), "apply")
            .unwrap()
            .unwrap();
        assert!(r.changed && r.ran_ok());
        assert_eq!((r.msg.as_deref(), r.id.as_deref(), r.seconds), (Some("[\"a\",1]"), Some("7"), Some(1.5)));
        assert_eq!(
            read(Some(&serde_json::json!("x")), "apply").unwrap_err(),
            Unreadable::NotAnObject { task: "apply", kind: "a string" }
        );
        assert!(read(None, "apply").unwrap().is_none());
        let nl = read(Some(&serde_json::json!({"msg": "a\nforged line"})), "apply").unwrap().unwrap();
        assert!(!nl.msg.unwrap().contains('\n'));
        let skipped = read(Some(&serde_json::json!({"skipped": true, "changed": false})), "x").unwrap().unwrap();
        assert!(!skipped.ran_ok() && !skipped.went_wrong());
    }
}
