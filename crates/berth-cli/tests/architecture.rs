//! ARCHITECTURE.md maps the code: every crate has a section of its own (`### berth-x`), and
//! every top-level module of a crate (`src/name.rs` or `src/name/`) is named in its crate's
//! section, as `name.rs` or `name/`. A crate or a module added without a line fails here, and
//! so do an arrow between crates drawn otherwise than `Cargo.toml` has it, and a flow naming a
//! file or a function the code does not have.

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

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The arrows the map draws: each crate's berth crates, from the block under `## Crates`.
fn drawn_arrows(text: &str) -> BTreeMap<String, Vec<String>> {
    let block = text
        .split("## Crates")
        .nth(1)
        .and_then(|rest| rest.split("```").nth(1))
        .expect("a block of arrows under `## Crates`");
    let mut arrows = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if let Some((from, to)) = line.split_once("──►") {
            let mut to: Vec<String> = to.split_whitespace().map(str::to_owned).collect();
            to.sort();
            arrows.insert(from.trim().to_owned(), to);
        } else if let Some(names) = line.strip_suffix(": no berth crate") {
            for name in names.split(',') {
                arrows.insert(name.trim().to_owned(), Vec::new());
            }
        } else {
            panic!("a line of the arrows that is neither: {line}");
        }
    }
    arrows
}

/// The berth crates `manifest` depends on (its `[dependencies]`, not its dev- or
/// build-dependencies).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && line.starts_with("berth-") {
            let name = line
                .split(|c: char| c == '.' || c == '=' || c.is_whitespace())
                .next()
                .unwrap();
            deps.push(name.to_owned());
        }
    }
    deps.sort();
    deps
}

#[test]
fn every_crate_arrow_is_drawn_as_cargo_has_it() {
    let root = root();
    let drawn = drawn_arrows(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap());
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let name = entry.file_name().to_string_lossy().into_owned();
        if !manifest.exists() || name == "berth-testkit" {
            continue;
        }
        let has = dependencies(&std::fs::read_to_string(&manifest).unwrap());
        match drawn.get(&name) {
            None => wrong.push(format!("{name}: not in the arrows")),
            Some(d) if *d != has => {
                wrong.push(format!("{name}: drawn {d:?}, Cargo.toml has {has:?}"))
            }
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's arrows:\n{}",
        wrong.join("\n")
    );
}

/// Every source file of the workspace, by its path under `crates/`.
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && name != "target" {
            sources(&path, out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.to_string_lossy().replace('\\', "/"), text));
        }
    }
}

/// Whether `name` is defined in `sources`: a function, a type or trait, or a variant.
fn defined(sources: &[(String, String)], name: &str) -> bool {
    let forms = [
        format!("fn {name}("),
        format!("fn {name}<"),
        format!("struct {name}"),
        format!("enum {name}"),
        format!("trait {name}"),
        format!("type {name}"),
        format!("    {name},"),
        format!("    {name}("),
        format!("    {name} {{"),
    ];
    sources
        .iter()
        .any(|(_, text)| forms.iter().any(|f| text.contains(f.as_str())))
}

#[test]
fn the_flows_name_files_and_functions_that_exist() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let flows = text
        .split("\n## Flows")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a `## Flows` section");
    let mut all = Vec::new();
    sources(&root.join("crates"), &mut all);
    let mut missing = Vec::new();
    for (i, token) in flows.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        if token.ends_with(".rs") || (token.ends_with('/') && !token.contains(' ')) {
            // A file, or a folder of modules: some source path ends with it (`*` any name).
            let (prefix, suffix) = token.split_once('*').unwrap_or((token, ""));
            let found = all.iter().any(|(path, _)| {
                let folder = token.ends_with('/');
                path.split('/').enumerate().any(|(at, _)| {
                    let tail = path.splitn(at + 1, '/').last().unwrap_or_default();
                    match folder {
                        true => tail.starts_with(prefix),
                        false => tail.starts_with(prefix) && tail.ends_with(suffix),
                    }
                })
            });
            if !found {
                missing.push(format!("the file or folder `{token}`"));
            }
        } else if token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && token
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && (token.contains("::")
                || token.contains('_')
                || token.chars().any(|c| c.is_ascii_lowercase()))
            && token.chars().any(|c| c.is_ascii_lowercase())
        {
            // A function (`name`, `Type::method`) or a type (`Name`, `Enum::Variant`).
            for name in token.split("::").filter(|n| !n.is_empty()) {
                if !defined(&all, name) {
                    missing.push(format!("`{name}` (of `{token}`)"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's flows name what the code does not have:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_arrows_are_read_as_drawn() {
    let arrows = drawn_arrows("## Crates\n```\na ──► b  c\nd, e: no berth crate\n```\n");
    assert_eq!(arrows["a"], ["b", "c"]);
    assert!(arrows["d"].is_empty() && arrows["e"].is_empty());
    let deps = dependencies(
        "[dependencies]\nberth-x.workspace = true\nberth-y = { path = \"y\" }\nserde = \"1\"\n[dev-dependencies]\nberth-z.workspace = true\n",
    );
    assert_eq!(deps, ["berth-x", "berth-y"]);
}
