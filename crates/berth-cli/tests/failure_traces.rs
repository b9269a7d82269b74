//! Failures leave a trace: the crates where connections, handshakes, provider calls, git and
//! the sandbox fail log through `tracing`, and berth-serve drops no error unsaid (no `let _ =`
//! or `.ok()` outside its tests: a connection's error is logged with its cause).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of every source file of `krate`, without its test modules.
fn sources(krate: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap().to_owned();
                out.push((path, code));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("crates").join(krate).join("src"), &mut out);
    assert!(!out.is_empty(), "{krate} has no sources");
    out
}

#[test]
fn the_crates_where_things_fail_log_through_tracing() {
    for krate in [
        "berth-serve",
        "berth-web",
        "berth-sandbox",
        "berth-agent",
        "berth-llm",
        "berth-git",
        "berth-run",
    ] {
        let calls = sources(krate)
            .iter()
            .map(|(_, text)| text.matches("tracing::").count())
            .sum::<usize>();
        assert!(calls > 0, "{krate} logs nothing");
    }
}

#[test]
fn berth_serve_drops_no_error_unsaid() {
    let mut dropped = Vec::new();
    for (path, text) in sources("berth-serve") {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            if code.contains("let _ =") || code.contains(".ok()") {
                dropped.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        dropped.is_empty(),
        "errors dropped:\n{}",
        dropped.join("\n")
    );
    for krate in ["berth-serve", "berth-acp", "berth-web", "berth-cli"] {
        for (path, text) in sources(krate) {
            assert!(
                !text.contains("let _ = berth_acp::serve_connection")
                    && !text.contains("let _ = serve_connection"),
                "{}: a connection's end dropped unsaid",
                path.display()
            );
        }
    }
}
