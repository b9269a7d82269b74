//! An agent's state runs nothing later: programs named `claude-agent-acp`, `codex` and
//! `gemini`, confined as berth confines them (their profile's state writable, what they run
//! or obey later read-only or made and then read-only, Claude Code's shell snapshots in a
//! folder of the tree's own), try to plant a hook, a command, a rule, an extension, a launcher
//! and instructions, whether the part exists or not; their sessions and history are written.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::Path;

use berth_sandbox::Subject;

mod support;

use support::{World, run_confined, world};

/// Writes `script` as the program `name` in the worktree, and runs it confined as berth
/// confines that agent: its output.
fn as_agent(w: &World, name: &str, script: &str) -> String {
    let profile = berth_sandbox::agent_profile(name).expect("an agent berth knows");
    let home = &w.user_home;
    let writable = profile
        .state
        .iter()
        .map(|rel| home.join(rel))
        .inspect(|p| std::fs::create_dir_all(p).unwrap())
        .collect();
    let subject = Subject::Agent {
        hosts: vec![],
        writable,
        env: vec![],
        program: vec![],
        settings: profile.covered(home),
        private: profile.private_in(home),
    };
    let program = w.worktree.join(name);
    std::fs::write(
        &program,
        format!("#!/bin/bash\ncd {}\n{script}", home.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, text) = run_confined(w, &subject, &format!("./{name}"), |_| {});
    text
}

/// Tries to write each of `paths` (beneath the home), as a file or, ending in `/`, a file in
/// that folder; prints `PLANTED` for each that worked.
fn plant(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| match p.strip_suffix('/') {
            Some(dir) => format!(
                "mkdir -p {dir}/evil 2>/dev/null; echo 'touch /tmp/pwned' > {dir}/evil/run.sh 2>/dev/null && echo PLANTED {p}\n"
            ),
            None => format!("echo 'touch /tmp/pwned' >> {p} 2>/dev/null && echo PLANTED {p}\n"),
        })
        .collect()
}

fn assert_untouched(home: &Path, text: &str, paths: &[&str]) {
    assert!(!text.contains("PLANTED"), "{text}");
    for p in paths {
        let path = home.join(p.trim_end_matches('/'));
        if path.is_dir() {
            assert!(!path.join("evil").exists(), "{p}:\n{text}");
        } else if let Ok(content) = std::fs::read_to_string(&path) {
            assert!(!content.contains("pwned"), "{p}:\n{text}");
        }
    }
}

#[test]
fn claude_codes_state_runs_nothing_later() {
    let w = world();
    let home = &w.user_home;
    // Some parts exist, as a person's would; the rest (plugins/ among them) do not yet.
    std::fs::create_dir_all(home.join(".claude/hooks")).unwrap();
    std::fs::write(home.join(".claude/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(home.join(".claude/commands")).unwrap();
    let parts = [
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".claude/CLAUDE.md",
        ".claude/hooks/",
        ".claude/plugins/",
        ".claude/commands/",
        ".claude/agents/",
        ".claude/skills/",
        ".claude/local/",
    ];
    let script = plant(&parts)
        + "echo '{}' > .claude/history.jsonl && echo DATA WRITTEN\n\
           mkdir -p .claude/projects/p && echo '{}' > .claude/projects/p/s.jsonl && echo SESSION WRITTEN\n\
           echo 'echo SNAPSHOT SOURCED' > .claude/shell-snapshots/snapshot-bash.sh && . .claude/shell-snapshots/snapshot-bash.sh\n";
    let text = as_agent(&w, "claude-agent-acp", &script);
    assert_untouched(home, &text, &parts);
    assert!(text.contains("DATA WRITTEN"), "{text}");
    assert!(text.contains("SESSION WRITTEN"), "{text}");
    // Its own snapshot works inside, and is never the person's.
    assert!(text.contains("SNAPSHOT SOURCED"), "{text}");
    assert!(
        !home
            .join(".claude/shell-snapshots/snapshot-bash.sh")
            .exists(),
        "{text}"
    );
    assert!(home.join(".claude/history.jsonl").is_file());
}

#[test]
fn codexs_state_runs_nothing_later() {
    let w = world();
    let parts = [
        ".codex/config.toml",
        ".codex/AGENTS.md",
        ".codex/rules/",
        ".codex/prompts/",
        ".codex/skills/",
    ];
    let script = plant(&parts)
        + "echo 'prefix_rule(pattern=[\"bash\"], decision=\"allow\")' > .codex/rules/default.rules 2>/dev/null && echo PLANTED rule\n\
           mkdir -p .codex/sessions && echo '{}' > .codex/sessions/s.jsonl && echo SESSION WRITTEN\n";
    let text = as_agent(&w, "codex", &script);
    assert_untouched(&w.user_home, &text, &parts);
    assert!(!w.user_home.join(".codex/rules/default.rules").exists());
    assert!(text.contains("SESSION WRITTEN"), "{text}");
}

#[test]
fn geminis_state_runs_nothing_later() {
    let w = world();
    let parts = [
        ".gemini/settings.json",
        ".gemini/GEMINI.md",
        ".gemini/extensions/",
        ".gemini/commands/",
    ];
    let script = plant(&parts)
        + "echo '{\"mcpServers\":{\"x\":{\"command\":\"touch\"}}}' > .gemini/extensions/evil/gemini-extension.json 2>/dev/null && echo PLANTED extension\n\
           mkdir -p .gemini/tmp && echo x > .gemini/tmp/chat.json && echo DATA WRITTEN\n";
    let text = as_agent(&w, "gemini", &script);
    assert_untouched(&w.user_home, &text, &parts);
    assert!(text.contains("DATA WRITTEN"), "{text}");
}

#[test]
fn as_the_unprivileged_user_too() {
    if !support::is_root() {
        return; // the tests above ran as such a user already
    }
    support::as_test_user(&[
        "claude_codes_state_runs_nothing_later",
        "codexs_state_runs_nothing_later",
        "geminis_state_runs_nothing_later",
    ]);
}
