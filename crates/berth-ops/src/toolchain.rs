//! The project's own check commands, detected from the files at a worktree's root, so the
//! prompts say `cargo test` or `pnpm run lint` instead of generic advice.
//!
//! Only the root is looked at, through the same confined reader as the `files` resource, so a
//! `package.json` that is a symlink out of the worktree is not read.

use std::path::Path;

use berth_core::StoragePath;

use crate::worktree::{self, Node};

/// One command the project uses to check itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The toolchain it belongs to: `Cargo`, `npm`, `pnpm`, `yarn`, `Go`, `Python`, `Make`.
    pub tool: &'static str,
    /// What it does: `format`, `lint`, `test` or `build`.
    pub purpose: &'static str,
    pub command: String,
}

/// `package.json` and `pyproject.toml` larger than this are not parsed.
const MANIFEST_LIMIT: u64 = 1024 * 1024;

pub fn detect(root: &Path) -> Vec<Check> {
    let names: Vec<String> = match worktree::read(root, None, 0) {
        Ok(Node::Folder(entries)) => entries.into_iter().map(|e| e.name).collect(),
        _ => return Vec::new(),
    };
    let has = |n: &str| names.iter().any(|x| x == n);
    let read =
        |n: &str| match worktree::read(root, Some(&StoragePath::new(n).ok()?), MANIFEST_LIMIT) {
            Ok(Node::File(bytes)) => String::from_utf8(bytes).ok(),
            _ => None,
        };
    let mut checks = Vec::new();
    let mut add = |tool, purpose, command: &str| {
        checks.push(Check {
            tool,
            purpose,
            command: command.to_owned(),
        })
    };
    if has("Cargo.toml") {
        add("Cargo", "format", "cargo fmt --all -- --check");
        add("Cargo", "lint", "cargo clippy --all-targets -- -D warnings");
        add("Cargo", "test", "cargo test");
    }
    if has("package.json") {
        let tool = if has("pnpm-lock.yaml") {
            "pnpm"
        } else if has("yarn.lock") {
            "yarn"
        } else {
            "npm"
        };
        let scripts = read("package.json")
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v.get("scripts").and_then(|s| s.as_object()).cloned())
            .unwrap_or_default();
        for (script, purpose) in [
            ("format", "format"),
            ("fmt", "format"),
            ("lint", "lint"),
            ("typecheck", "lint"),
            ("test", "test"),
            ("build", "build"),
        ] {
            if scripts.contains_key(script) {
                add(tool, purpose, &format!("{tool} run {script}"));
            }
        }
    }
    if has("go.mod") {
        add("Go", "format", "gofmt -l .");
        add("Go", "lint", "go vet ./...");
        add("Go", "test", "go test ./...");
    }
    if has("pyproject.toml") || has("setup.py") || has("requirements.txt") {
        let pyproject = read("pyproject.toml").unwrap_or_default();
        if pyproject.contains("[tool.ruff") {
            add("Python", "format", "ruff format --check .");
            add("Python", "lint", "ruff check .");
        }
        if pyproject.contains("[tool.mypy") {
            add("Python", "lint", "mypy .");
        }
        add("Python", "test", "python -m pytest");
    }
    if let Some(makefile) = ["Makefile", "makefile", "GNUmakefile"]
        .into_iter()
        .find(|n| has(n))
        .and_then(read)
    {
        for (target, purpose) in [
            ("fmt", "format"),
            ("format", "format"),
            ("lint", "lint"),
            ("check", "test"),
            ("test", "test"),
            ("build", "build"),
        ] {
            if makefile
                .lines()
                .any(|l| l.strip_prefix(target).is_some_and(|r| r.starts_with(':')))
            {
                add("Make", purpose, &format!("make {target}"));
            }
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(root: &Path) -> Vec<String> {
        detect(root).into_iter().map(|c| c.command).collect()
    }

    #[test]
    fn detects_each_toolchain_from_its_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(commands(dir.path()).is_empty());
        std::fs::write(dir.path().join("Cargo.toml"), "[package]").unwrap();
        assert!(commands(dir.path()).contains(&"cargo test".to_owned()));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts": {"test": "vitest", "lint": "eslint ."}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("pnpm-lock.yaml"), "").unwrap();
        assert_eq!(commands(dir.path()), ["pnpm run lint", "pnpm run test"]);

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("go.mod"), "module x").unwrap();
        std::fs::write(
            dir.path().join("Makefile"),
            "all:\n\ntest: all\n\tgo test\n",
        )
        .unwrap();
        let got = commands(dir.path());
        assert!(got.contains(&"go test ./...".to_owned()), "{got:?}");
        assert!(got.contains(&"make test".to_owned()), "{got:?}");
        assert!(!got.contains(&"make lint".to_owned()), "{got:?}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "[tool.ruff]\n").unwrap();
        assert_eq!(
            commands(dir.path()),
            ["ruff format --check .", "ruff check .", "python -m pytest"]
        );
    }
}
