//! A workspace's memory: berth's agent keeps a note with `remember`, every later session of
//! the workspace starts with it in its instructions, `forget` removes it, and a person reads,
//! edits and clears it with `berth workspace memory`. Against the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use support::Home;

/// `berth chat -p PROMPT` in workspace `w`, berth's agent on the stand-in, `remember` and
/// `forget` allowed.
fn chat(home: &Home, server: &ProviderServer, prompt: &str) -> berth_testkit::Run {
    let mut cmd = home.cmd(&[
        "chat", "-p", prompt, "-w", "w", "--allow", "remember", "--allow", "forget",
    ]);
    // The person's own memory lives in their config folder, here one of the test's.
    cmd.env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key");
    run(cmd)
}

fn call(name: &str, text: &str) -> Turn {
    let args = serde_json::json!({ "text": text }).to_string();
    Turn::new().tool_call("m1", name, [args])
}

/// The system instructions of the `n`th request the stand-in saw.
fn instructions(server: &ProviderServer, n: usize) -> String {
    server.requests()[n].body["system"].to_string()
}

#[test]
fn a_note_remembered_is_in_every_later_session_until_forgotten() {
    let home = Home::new();
    home.ok(&["workspace", "create", "w"]);
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&call(
        "remember",
        "The tests\nrun with `make check`.",
    )));
    server.push(Reply::anthropic(&Turn::new().text(["Noted."])));
    let r = chat(&home, &server, "Remember how tests run");
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Kept dated, one line, in the workspace's Markdown file.
    let memory = home.json(&["workspace", "memory", "w", "--json"]);
    let notes = memory["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{memory:#}");
    assert_eq!(notes[0]["text"], "The tests run with `make check`.");
    let path = std::path::PathBuf::from(memory["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("- 20") && text.contains(": The tests run with `make check`."),
        "{text}"
    );
    let shown = home.ok(&["workspace", "memory", "w"]);
    assert!(
        shown.contains("The tests run with `make check`."),
        "{shown}"
    );

    // A new session starts with it, and with the person's own memory, which no tool writes.
    let mine = home.path().join("xdg/berth/memory.md");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    std::fs::write(&mine, "I prefer small commits.\n").unwrap();
    server.push(Reply::anthropic(&Turn::new().text(["Hi."])));
    let r = chat(&home, &server, "Hello");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = instructions(&server, 2);
    assert!(
        seen.contains("Workspace memory") && seen.contains("make check"),
        "{seen}"
    );
    assert!(
        seen.contains("The person's memory") && seen.contains("I prefer small commits."),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(&mine).unwrap(),
        "I prefer small commits.\n"
    );

    // Forgotten: gone from the file and from the next session.
    server.push(Reply::anthropic(&call("forget", "make check")));
    server.push(Reply::anthropic(&Turn::new().text(["Forgotten."])));
    let r = chat(&home, &server, "Forget that");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let memory = home.json(&["workspace", "memory", "w", "--json"]);
    assert!(memory["notes"].as_array().unwrap().is_empty(), "{memory:#}");
    server.push(Reply::anthropic(&Turn::new().text(["Hi again."])));
    chat(&home, &server, "Hello again");
    let seen = instructions(&server, 5);
    assert!(!seen.contains("make check"), "{seen}");
}

#[test]
fn a_person_edits_and_clears_the_memory() {
    let home = Home::new();
    home.ok(&["workspace", "create", "w"]);
    // --edit opens the file in $EDITOR (here a script that adds a note as a person would).
    let mut edit = home.cmd(&["workspace", "memory", "w", "--edit"]);
    edit.env(
        "EDITOR",
        "sh -c 'echo \"- 2026-01-01: edited by hand\" >> \"$1\"' sh",
    );
    edit.env_remove("VISUAL");
    let r = run(edit);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let memory = home.json(&["workspace", "memory", "w", "--json"]);
    assert_eq!(memory["notes"][0]["text"], "edited by hand", "{memory:#}");
    // --clear asks first; without a terminal it needs --yes.
    let refused = home.run(&["workspace", "memory", "w", "--clear"]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert_eq!(
        home.json(&["workspace", "memory", "w", "--json"])["notes"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    home.ok(&["workspace", "memory", "w", "--clear", "--yes"]);
    let empty = home.run(&["workspace", "memory", "w"]);
    assert_eq!(empty.code, 0);
    assert!(empty.stderr.contains("no notes"), "{}", empty.stderr);
}
