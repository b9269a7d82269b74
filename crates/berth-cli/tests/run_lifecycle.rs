//! One run lifecycle: static checks on the tree that a run's life is berth-run's `Runs`, and
//! that the front ends only translate.
//!
//! - No front end reads the run store on a timer: `run logs -f`, the dashboard's feed, ACP's
//!   run questions and MCP's runs follow a run through `Runs::follow`, `Runs::questions` and
//!   `Runs::changes`. A clock that redraws a screen is allowed where it is named here.
//! - No module of berth-run takes a name from the crate's root (`crate::RunError`, a
//!   re-export of lib.rs), and its modules import one another without a circle: the map
//!   reads from the top down.
//! - berth-run's root exports none of the lifecycle's parts by themselves: starting a
//!   supervisor, preflight, the pool's worker, a supervised run's constructors.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text of a source without its comments (line comments and doc comments).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of the front ends that follow runs, and the redraw clocks each may hold (a
/// `tokio::time::interval` whose tick redraws, never reads the store).
const FOLLOWERS: &[(&str, usize)] = &[
    ("crates/berth-cli/src/commands/run.rs", 0),
    ("crates/berth-cli/src/commands/run/batch.rs", 0),
    ("crates/berth-cli/src/commands/run/finish.rs", 0),
    ("crates/berth-cli/src/commands/run/kept.rs", 0),
    ("crates/berth-cli/src/commands/run/start.rs", 0),
    ("crates/berth-cli/src/commands/run/summary.rs", 0),
    // The live table's clock: elapsed times tick on.
    ("crates/berth-cli/src/commands/run/supervise.rs", 1),
    ("crates/berth-cli/src/commands/run/view.rs", 0),
    // The dashboard's clock: a working agent's elapsed time and diff age.
    ("crates/berth-ui/src/app.rs", 1),
    ("crates/berth-ui/src/act.rs", 0),
    ("crates/berth-acp/src/run_questions.rs", 0),
    ("crates/berth-mcp/src/runs.rs", 0),
];

#[test]
fn no_front_end_reads_the_run_store_on_a_timer() {
    let mut found = Vec::new();
    for (path, clocks) in FOLLOWERS {
        let text = code(&read(path));
        for timer in ["sleep(", "sleep_until("] {
            if text.contains(timer) {
                found.push(format!("{path}: {timer}"));
            }
        }
        let intervals = text.matches("interval(").count();
        if intervals != *clocks {
            found.push(format!(
                "{path}: {intervals} interval(s), where {clocks} redraw clock(s) are allowed"
            ));
        }
    }
    // The dashboard's feed is woken by berth-run, not by its own clock.
    let app = code(&read("crates/berth-ui/src/app.rs"));
    for needed in ["runs.changes()", "runs.follow("] {
        if !app.contains(needed) {
            found.push(format!("crates/berth-ui/src/app.rs: no {needed}"));
        }
    }
    let logs = code(&read("crates/berth-cli/src/commands/run/kept.rs"));
    if !logs.contains("runs.follow(") {
        found.push("run logs -f: no Runs::follow".to_owned());
    }
    let questions = code(&read("crates/berth-acp/src/run_questions.rs"));
    if !questions.contains("runs.questions(") {
        found.push("ACP's run questions: no Runs::questions".to_owned());
    }
    assert!(found.is_empty(), "timers in front ends: {found:#?}");
}

/// Every Rust file under `dir`, by its path under `base`.
fn sources(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let shown = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((shown, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The modules berth-run's lib.rs declares.
fn modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("mod ")
                .or_else(|| l.strip_prefix("pub mod "))
                .or_else(|| l.strip_prefix("pub(crate) mod "))?;
            Some(rest.trim_end_matches(';').trim().to_owned())
        })
        .collect()
}

/// The top module a file of berth-run's `src` is part of: `land/drive.rs` is `land`.
fn top_module(file: &str) -> String {
    let first = file.split('/').next().unwrap();
    first.trim_end_matches(".rs").to_owned()
}

/// The first name after each `crate::` in `text`, and each name of a `crate::{…}` group.
fn crate_paths(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        // `berth_run::crate` is no path of this crate: the word before must end.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.push(name);
        }
    }
    names
}

/// The files that are test modules as a whole: declared `#[cfg(test)] mod NAME;` by the file
/// beside or above them (`kept.rs` declares `kept/conformance.rs`).
fn test_modules(files: &[(String, String)]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (file, text) in files {
        let folder = file.trim_end_matches(".rs");
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] == "#[cfg(test)]"
                && let Some(name) = pair[1]
                    .strip_prefix("mod ")
                    .and_then(|r| r.strip_suffix(';'))
            {
                found.insert(format!("{folder}/{name}.rs"));
            }
        }
    }
    found
}

#[test]
fn no_module_arrow_inside_berth_run_runs_back_up() {
    let src = root().join("crates/berth-run/src");
    let lib = read("crates/berth-run/src/lib.rs");
    let modules = modules(&lib);
    assert!(modules.contains("lifecycle"), "{modules:?}");
    let mut files = Vec::new();
    sources(&src, &src, &mut files);
    let tests_only = test_modules(&files);
    let mut from_root = Vec::new();
    let mut arrows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        if file == "lib.rs" || tests_only.contains(file) {
            continue;
        }
        let here = top_module(file);
        // A file's own tests may reach anywhere: the map is of the code that ships.
        let shipped = text.split("#[cfg(test)]").next().unwrap_or(text);
        for name in crate_paths(&code(shipped)) {
            if !modules.contains(&name) {
                from_root.push(format!("{file}: crate::{name}"));
            } else if name != here {
                arrows.entry(here.clone()).or_default().insert(name);
            }
        }
    }
    assert!(
        from_root.is_empty(),
        "names taken from berth-run's root instead of the module that defines them: {from_root:#?}"
    );
    // A circle between modules is an arrow that runs back up, whichever it is.
    for start in arrows.keys() {
        let mut stack = vec![vec![start.clone()]];
        while let Some(path) = stack.pop() {
            let last = path.last().unwrap();
            for next in arrows.get(last).into_iter().flatten() {
                assert!(
                    next != start,
                    "berth-run's modules import in a circle: {} -> {next}",
                    path.join(" -> ")
                );
                if !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
}

/// The names lib.rs's `pub use` lines export: an item's alias, else its path's last name.
fn exported_names(lib: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for statement in lib.split(';') {
        let Some(used) = statement.trim_start().strip_prefix("pub use ") else {
            continue;
        };
        let items = match used.find('{') {
            Some(open) => used[open + 1..].trim_end().trim_end_matches('}').to_owned(),
            None => used.to_owned(),
        };
        for item in items.split(',') {
            let item = item.trim();
            let name = match item.rsplit_once(" as ") {
                Some((_, alias)) => alias,
                None => item.rsplit("::").next().unwrap_or(item),
            };
            if !name.is_empty() {
                names.insert(name.trim().to_owned());
            }
        }
    }
    names
}

#[test]
fn berth_runs_root_exports_the_lifecycle_only_through_runs() {
    let lib = code(&read("crates/berth-run/src/lib.rs"));
    let words = exported_names(&lib);
    for part in [
        "detach",
        "start_detached",
        "tell_detached",
        "preflight",
        "prepare",
        "start",
        "work",
        "queue",
        "start_batch",
        "Host",
        "Detach",
        "Run",
    ] {
        assert!(
            !words.contains(part),
            "berth-run's root exports `{part}`: a front end would start or supervise a run by hand"
        );
    }
    for part in ["Runs", "How", "Started", "Told", "Telling", "SuperviseArgs"] {
        assert!(words.contains(part), "berth-run does not export `{part}`");
    }
    // The constructors of a supervised run are berth-run's own.
    let supervisor = code(&read("crates/berth-run/src/supervisor.rs"));
    for constructor in [
        "fn start(",
        "fn tell(",
        "fn new(",
        "fn hosted(",
        "fn spawn_hosted(",
    ] {
        let public = supervisor
            .lines()
            .any(|l| l.trim_start().starts_with("pub ") && l.contains(constructor));
        assert!(!public, "Supervised::{constructor}…) is public");
    }
}
