//! Every error type the library defines says its exit class, and a command's error can only be
//! a `failure::Failure`, which takes its class from the error it is made of: an error type
//! without a class would leave its failure at exit 1 whatever it means (a verification failure
//! reported as a runtime error). Read from the source, so a new error type fails here until it
//! is classified.

use std::collections::BTreeSet;

use crate::common::repo;

/// The names of the types deriving `thiserror::Error` under `src/`.
fn error_types() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in walkdir::WalkDir::new(repo("src")).into_iter().filter_map(Result::ok) {
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains("thiserror::Error") {
                continue;
            }
            // The type the derive is on: the next `pub enum`/`pub struct` line.
            if let Some(def) = lines[i..].iter().find(|l| l.starts_with("pub enum ") || l.starts_with("pub struct ")) {
                let name = def.split_whitespace().nth(2).unwrap();
                let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn every_error_type_classifies() {
    let types = error_types();
    assert!(types.len() > 30, "{types:?}");
    let mut source = String::new();
    for entry in walkdir::WalkDir::new(repo("src")).into_iter().filter_map(Result::ok) {
        if entry.path().extension().is_some_and(|e| e == "rs") {
            source.push_str(&std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    let unclassified: Vec<&String> = types
        .iter()
        .filter(|t| {
            !(source.contains(&format!("Classify for {t} {{"))
                || source.contains(&format!("Classify for {t}<"))
                || source.contains(&format!("Classify for {t}\n")))
        })
        .collect();
    assert_eq!(unclassified, Vec::<&String>::new(), "error types without `impl Classify`");
}

/// `anyhow::Error` carries no class: an error made one (a `bail!`, a `context` on an error that
/// does not know its class) would reach the exit code as runtime whatever it meant. Only
/// `failure::Failure` holds one, with the class it was given.
#[test]
fn no_error_leaves_a_command_without_its_class() {
    let mut holders = Vec::new();
    for entry in walkdir::WalkDir::new(repo("src")).into_iter().filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("src/failure.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        if text.contains("anyhow") {
            holders.push(path.strip_prefix(repo("")).unwrap_or(path).display().to_string());
        }
    }
    assert_eq!(holders, Vec::<String>::new(), "files that make an `anyhow::Error` themselves");
}
