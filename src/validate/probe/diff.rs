//! `airlock probe --diff OLD.json`: two current-state records compared field by field (the
//! guide: store the current and the candidate records together so that approval examines a
//! diff). Every leaf is addressed by its path (`gpus[0].firmware.PLDM_BUNDLE`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub path: String,
    /// Absent (`null`) when the field is new.
    pub old: Option<String>,
    /// Absent (`null`) when the field is gone.
    pub new: Option<String>,
}

fn flatten(v: &Value, path: &str, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                flatten(v, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, &format!("{path}[{i}]"), out);
            }
        }
        Value::String(s) => {
            out.insert(path.to_owned(), s.clone());
        }
        other => {
            out.insert(path.to_owned(), other.to_string());
        }
    }
}

/// Every leaf that differs between `old` and `new`, in path order.
pub fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten(old, "", &mut a);
    flatten(new, "", &mut b);
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .map(|p| Change { path: p.clone(), old: a.get(p).cloned(), new: b.get(p).cloned() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_added_and_removed_leaves_by_path() {
        let old = serde_json::json!({"host": {"kernel": "6.8.0-50-generic"}, "gpus": [{"firmware": {"PLDM_BUNDLE": "01.25.03.12"}}]});
        let new = serde_json::json!({"host": {"kernel": "6.8.0-50-generic", "rocm": "7.0.2"}, "gpus": [{"firmware": {"PLDM_BUNDLE": "01.25.05.00"}}], "x": 1});
        let changes = diff(&old, &new);
        let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["gpus[0].firmware.PLDM_BUNDLE", "host.rocm", "x"]);
        assert_eq!(changes[0].old.as_deref(), Some("01.25.03.12"));
        assert_eq!((changes[1].old.as_deref(), changes[1].new.as_deref()), (None, Some("7.0.2")));
        assert!(diff(&old, &old).is_empty());
    }
}
