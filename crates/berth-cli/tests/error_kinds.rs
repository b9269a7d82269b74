//! Every public error type of berth's libraries has a kind (`impl Kinded`), and the CLI's one
//! table of error types (`ERROR_TYPES` in `main.rs`) names it: an error type added without
//! either would exit 1 whatever it meant, with no kind for scripts to read.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The public error types of `text`: a `pub enum` or `pub struct` right after a derive of
/// thiserror's `Error`.
fn error_types(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut types = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_start();
        if !(line.starts_with("#[derive(")
            && (line.contains("thiserror::Error")
                || line.contains(" Error)")
                || line.contains(" Error,")))
        {
            continue;
        }
        for next in lines.iter().skip(i + 1).take(6) {
            let next = next.trim_start();
            let name = next
                .strip_prefix("pub enum ")
                .or_else(|| next.strip_prefix("pub struct "));
            if let Some(name) = name {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                types.push(name);
                break;
            }
        }
    }
    types
}

#[test]
fn every_public_error_type_has_a_kind_and_is_in_the_clis_table() {
    let root = root();
    let main = std::fs::read_to_string(root.join("crates/berth-cli/src/main.rs")).unwrap();
    let table = main
        .split("const ERROR_TYPES")
        .nth(1)
        .and_then(|rest| rest.split("];").next())
        .expect("ERROR_TYPES in main.rs");
    let mut all = Vec::new();
    sources(&root.join("crates"), &mut all);
    let mut missing = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // The CLI's own (Interrupted, its 130) and the tests' kit are not libraries.
        if name == "berth-cli" || name == "berth-testkit" {
            continue;
        }
        let src = entry.path().join("src");
        let in_crate: Vec<&(PathBuf, String)> =
            all.iter().filter(|(p, _)| p.starts_with(&src)).collect();
        for (path, text) in &in_crate {
            for ty in error_types(text) {
                seen += 1;
                let kinded = in_crate
                    .iter()
                    .any(|(_, t)| t.contains(&format!("Kinded for {ty} {{")));
                if !kinded {
                    missing.push(format!("{ty} ({}): no `impl Kinded`", path.display()));
                }
                // Named in the table by its name, or by a name it is re-exported as.
                let alias_names: Vec<String> = all
                    .iter()
                    .flat_map(|(_, t)| {
                        t.split(&format!("{ty} as "))
                            .skip(1)
                            .map(|rest| {
                                rest.chars()
                                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                                    .collect::<String>()
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect();
                let named = std::iter::once(ty.clone())
                    .chain(alias_names)
                    .any(|n| table.contains(&format!("{n}>")));
                if !named {
                    missing.push(format!(
                        "{ty} ({}): not in main.rs's ERROR_TYPES",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(
        seen > 15,
        "found only {seen} error types: is the scan right?"
    );
    assert!(
        missing.is_empty(),
        "error types without a kind:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_derived_error_is_found() {
    let text = "#[derive(Debug, thiserror::Error)]\npub enum FooError {\n    A,\n}\n#[derive(Debug)]\npub struct NotAnError;\n";
    assert_eq!(error_types(text), ["FooError"]);
}
