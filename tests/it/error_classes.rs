//! Every error type the library defines says its exit class, and `commands::exit_of` knows
//! it: an error type missing from either would leave its failure at exit 1 whatever it means
//! (a verification failure reported as a runtime error). Read from the source, so a new error
//! type fails here until it is classified and listed.

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
fn every_error_type_classifies_and_the_exit_code_knows_it() {
    let types = error_types();
    assert!(types.len() > 30, "{types:?}");
    let mut source = String::new();
    for entry in walkdir::WalkDir::new(repo("src")).into_iter().filter_map(Result::ok) {
        if entry.path().extension().is_some_and(|e| e == "rs") {
            source.push_str(&std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    let commands = std::fs::read_to_string(repo("src/commands/mod.rs")).unwrap();
    // Every `first_of!(…);` list (the errors commands return, and what those wrap).
    let lists: Vec<&str> = commands
        .match_indices("first_of!(")
        .map(|(start, _)| &commands[start..start + commands[start..].find(");").unwrap()])
        .collect();
    assert!(lists.len() >= 2, "the exit code's lists");
    let list = lists.concat();
    let mut unclassified = Vec::new();
    let mut unlisted = Vec::new();
    for t in &types {
        let classified = source.contains(&format!("Classify for {t} {{"))
            || source.contains(&format!("Classify for {t}<"))
            || source.contains(&format!("Classify for {t}\n"));
        if !classified {
            unclassified.push(t.clone());
        }
        let listed = list.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| w == t);
        if !listed {
            unlisted.push(t.clone());
        }
    }
    assert_eq!(unclassified, Vec::<String>::new(), "error types without `impl Classify`");
    assert_eq!(unlisted, Vec::<String>::new(), "error types `commands::exit_of` does not know");
}
