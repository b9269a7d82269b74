//! ARCHITECTURE.md maps the code: every crate has a section of its own (`### berth-x`), and
//! every top-level module of a crate (`src/name.rs` or `src/name/`) is named in its crate's
//! section, as `name.rs` or `name/`. A crate or a module added without a line fails here.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::collections::BTreeMap;
use std::path::Path;

/// Each `### heading` of the map and the text under it.
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            if let Some((h, body)) = current.take() {
                out.insert(h, body);
            }
            current = Some((heading.trim().to_owned(), String::new()));
        } else if line.starts_with("## ") {
            if let Some((h, body)) = current.take() {
                out.insert(h, body);
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((h, body)) = current {
        out.insert(h, body);
    }
    out
}

/// What a crate's map must name: its top-level modules.
fn modules(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if e.path().is_dir() {
                Some(format!("{name}/"))
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib" && stem != "main").then(|| name.clone())
            }
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_crate_and_module_is_on_the_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = sections(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap());
    let mut missing = Vec::new();
    let mut crates: Vec<_> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    assert!(crates.len() > 10, "{crates:?}");
    for dir in crates {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(body) = map.get(&name) else {
            missing.push(format!("{name}: no `### {name}` section"));
            continue;
        };
        for module in modules(&dir.join("src")) {
            // A module's file, or a folder of several: named as `name.rs` or `name/`.
            let stem = module.trim_end_matches(".rs").trim_end_matches('/');
            let named = [format!("{stem}.rs"), format!("{stem}/")]
                .iter()
                .any(|n| body.contains(n.as_str()));
            if !named {
                missing.push(format!("{name}: {module} is not named in its section"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not map:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_crate_without_a_section_is_caught() {
    let map = sections("## Code map\n### berth-a\n`x.rs`: x\n## Tests\n");
    assert!(map.contains_key("berth-a"));
    assert!(!map.contains_key("berth-b"));
    assert!(map["berth-a"].contains("x.rs"));
}
