//! Interactive `berth chat` in a real terminal (tmux), against the local provider server that
//! speaks Anthropic's real streaming format: answers stream, Ctrl-C stops a turn and the
//! prompt comes back, writes are asked inline, the slash commands do what they say.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip
//! (`support/terminal.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use serde_json::Value;
use support::Home;
use support::terminal::{Terminal, last_line};

/// The chat's prompt as it shows on a screen line (capture-pane drops trailing blanks).
const PROMPT: &str = "berth>";

/// A chat in a terminal, on its own home, talking to its own provider server, working in its
/// own folder.
struct Chat {
    term: Terminal,
    server: ProviderServer,
    home: Home,
    work: tempfile::TempDir,
}

impl Chat {
    /// `berth chat ARGS` in a terminal, at its first prompt.
    fn start(args: &[&str]) -> Chat {
        let home = Home::new();
        let server = ProviderServer::start_in_background();
        let work = tempfile::tempdir().unwrap();
        let term = Chat::open(&home, &server, work.path(), args);
        let chat = Chat {
            term,
            server,
            home,
            work,
        };
        chat.wait_prompt("the first prompt");
        chat
    }

    fn open(home: &Home, server: &ProviderServer, work: &Path, args: &[&str]) -> Terminal {
        let mut all = vec!["chat"];
        all.extend_from_slice(args);
        Terminal::start_with(
            home,
            work,
            &all,
            &[
                ("BERTH_PROVIDER", "claude"),
                ("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url()),
                ("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model"),
                ("ANTHROPIC_API_KEY", "test-key"),
            ],
        )
    }

    /// Waits for an empty prompt at the bottom of the screen; returns the screen.
    fn wait_prompt(&self, what: &str) -> String {
        self.term
            .wait_for(&format!("{what}, then the prompt"), |s| {
                last_line(s) == PROMPT
            })
    }

    /// Types `line` and Enter at the prompt, waits for the prompt to come back after it, and
    /// returns what was shown in between.
    fn enter(&self, line: &str) -> String {
        let typed = format!("{PROMPT} {line}");
        let typed = typed.trim_end();
        let count = |s: &str| s.lines().filter(|l| l.trim_end() == typed).count();
        let before = count(&self.term.screen());
        self.term.type_text(line);
        self.term.send_keys(&["Enter"]);
        let screen = self.term.wait_for(&format!("`{line}` to finish"), |s| {
            count(s) > before && last_line(s) == PROMPT
        });
        after_last(&screen, typed)
    }

    /// Types `line` and Enter, then waits for the permission question about `tool`; returns
    /// the screen after the typed line.
    fn enter_until_asked(&self, line: &str, tool: &str) -> String {
        let typed = format!("{PROMPT} {line}");
        let question = format!("allow {tool}?");
        self.term.type_text(line);
        self.term.send_keys(&["Enter"]);
        let screen = self
            .term
            .wait_for(&format!("the question `{question}`"), |s| {
                last_line(s).starts_with(&question)
            });
        after_last(&screen, &typed)
    }

    /// Answers the question on the screen and waits for the prompt; returns what was shown
    /// after the answer.
    fn answer(&self, key: &str) -> String {
        self.term.send_keys(&[key, "Enter"]);
        let screen = self.wait_prompt(&format!("the answer {key}"));
        let question_line = screen
            .lines()
            .rev()
            .find(|l| l.starts_with("allow ") && l.trim_end().ends_with(key))
            .unwrap_or_else(|| panic!("no answered question on the screen:\n{screen}"))
            .trim_end()
            .to_owned();
        after_last(&screen, &question_line)
    }

    /// The workspace's sessions, oldest first, as `session list --json` shows them.
    fn sessions(&self) -> Vec<Value> {
        self.home
            .json(&["session", "list", "--json"])
            .as_array()
            .unwrap()
            .clone()
    }

    /// The messages of a session: `(role, content)`.
    fn messages(&self, session: &str) -> Vec<(String, String)> {
        let shown = self.home.json(&["session", "show", session, "--json"]);
        shown["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("no messages in {shown}"))
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// The id of the only session.
    fn only_session(&self) -> String {
        let sessions = self.sessions();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        sessions[0]["id"].as_str().unwrap().to_owned()
    }
}

/// The lines of `screen` after the last line that is `marker`, without the final prompt.
fn after_last(screen: &str, marker: &str) -> String {
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let at = lines
        .iter()
        .rposition(|l| *l == marker)
        .unwrap_or_else(|| panic!("`{marker}` is not on the screen:\n{screen}"));
    let mut shown: Vec<&str> = lines[at + 1..].to_vec();
    while shown.last().is_some_and(|l| l.is_empty() || *l == PROMPT) {
        shown.pop();
    }
    shown.join("\n")
}

/// The position of `needle` in `haystack`, failing with the screen when it is missing.
fn at(haystack: &str, needle: &str) -> usize {
    haystack
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not on the screen:\n{haystack}"))
}

#[test]
fn an_answer_streams_in_with_thoughts_and_tool_activity_set_apart() {
    let chat = Chat::start(&[]);
    std::fs::write(chat.work.path().join("notes.txt"), "buy milk\n").unwrap();
    chat.server.push(Reply::anthropic(
        &Turn::new()
            .thinking(["The notes ", "are in notes.txt."], "sig-1")
            .tool_call("call_1", "read_file", [r#"{"path":"#, r#""notes.txt"}"#]),
    ));
    chat.server.push(Reply::anthropic(&Turn::new().text([
        "The notes ",
        "say: ",
        "buy milk.",
    ])));
    let shown = chat.enter("what do my notes say?");

    let thought = at(&shown, "The notes are in notes.txt.");
    let call = at(&shown, "→ read_file {\"path\":\"notes.txt\"}");
    let done = at(&shown, "✓ read_file");
    let answer = at(&shown, "The notes say: buy milk.");
    assert!(
        thought < call && call < done && done < answer,
        "out of order:\n{shown}"
    );
    // The tool's result went back to the model.
    let second = chat.server.requests()[1].body.to_string();
    assert!(second.contains("buy milk"), "{second}");
    // The session keeps the prompt, the call with its result, and the answer.
    let id = chat.only_session();
    assert_eq!(
        chat.messages(&id),
        vec![
            ("user".to_owned(), "what do my notes say?".to_owned()),
            (
                "tool".to_owned(),
                "`read_file` {\"path\":\"notes.txt\"}\n\nresult:\n\nbuy milk".to_owned()
            ),
            (
                "assistant".to_owned(),
                "The notes say: buy milk.".to_owned()
            ),
        ]
    );
}

#[test]
fn ctrl_c_stops_a_stream_and_a_running_command_and_the_prompt_comes_back() {
    let chat = Chat::start(&["--allow", "run_command"]);
    // The stream stops after its first words for two minutes: longer than any wait here, so
    // the prompt can only come back because Ctrl-C cut the stream.
    let long = Turn::new().text(["Counting: one, two, ", "three, four."]);
    let first = long
        .anthropic_events()
        .iter()
        .position(|e| e.contains("Counting"))
        .unwrap();
    chat.server
        .push(Reply::anthropic(&long).pause_after(first + 1, Duration::from_secs(120)));
    chat.term.type_text("count slowly");
    chat.term.send_keys(&["Enter"]);
    chat.term.wait_for("the first words of the answer", |s| {
        s.contains("Counting: one, two,")
    });
    chat.term.send_keys(&["C-c"]);
    let screen = chat.wait_prompt("the interrupted answer");
    let shown = after_last(&screen, "berth> count slowly");
    assert!(shown.contains("[interrupted]"), "{shown}");
    assert!(!shown.contains("three"), "{shown}");
    let id = chat.only_session();
    assert_eq!(
        chat.messages(&id)[1],
        (
            "assistant".to_owned(),
            "Counting: one, two, \n\n[interrupted]".to_owned()
        )
    );

    // A command that would run for minutes is stopped the same way.
    chat.server.push(Reply::anthropic(&Turn::new().tool_call(
        "call_1",
        "run_command",
        [r#"{"command":"sleep 300 && echo late > late.txt","timeout_secs":600}"#],
    )));
    chat.term.type_text("wait a while");
    chat.term.send_keys(&["Enter"]);
    chat.term
        .wait_for("the command to start", |s| s.contains("→ run_command"));
    chat.term.send_keys(&["C-c"]);
    let screen = chat.wait_prompt("the interrupted command");
    let shown = after_last(&screen, "berth> wait a while");
    assert!(shown.contains("[interrupted]"), "{shown}");
    assert_eq!(
        chat.server.request_count(),
        2,
        "the model was not called again"
    );

    // The chat goes on, with what was shown in the history it sends.
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Still here."])));
    let shown = chat.enter("are you there?");
    assert!(shown.contains("Still here."), "{shown}");
    let last = chat.server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("Counting: one, two, \\n\\n[interrupted]"),
        "{last}"
    );
    assert!(!chat.work.path().join("late.txt").exists());
}

#[test]
fn writes_are_asked_inline_and_a_refusal_reaches_the_model() {
    let chat = Chat::start(&[]);
    let write = |id: &str, path: &str| {
        Reply::anthropic(&Turn::new().tool_call(
            id,
            "write_file",
            [format!(r#"{{"path":"{path}","content":"hello\n"}}"#)],
        ))
    };

    // Refused: no file, and the model is told.
    chat.server.push(write("call_1", "out.txt"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["I was not allowed."])));
    let asked = chat.enter_until_asked("write out.txt", "write_file");
    assert!(asked.contains("write_file 'out.txt' (new file)"), "{asked}");
    assert!(asked.contains("+hello"), "the diff is not shown:\n{asked}");
    let shown = chat.answer("n");
    assert!(shown.contains("✗ write_file"), "{shown}");
    assert!(shown.contains("I was not allowed."), "{shown}");
    assert!(!chat.work.path().join("out.txt").exists());
    let sent = chat.server.requests()[1].body.to_string();
    assert!(sent.contains("refused"), "{sent}");

    // Allowed once: written, and the next write is asked again.
    chat.server.push(write("call_2", "out.txt"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Written."])));
    chat.enter_until_asked("write it now", "write_file");
    let shown = chat.answer("y");
    assert!(shown.contains("Written."), "{shown}");
    assert_eq!(
        std::fs::read_to_string(chat.work.path().join("out.txt")).unwrap(),
        "hello\n"
    );

    // Allowed always: the second write of the session is not asked.
    chat.server.push(write("call_3", "a.txt"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["First."])));
    chat.enter_until_asked("write a", "write_file");
    let shown = chat.answer("a");
    assert!(shown.contains("First."), "{shown}");
    chat.server.push(write("call_4", "b.txt"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Second."])));
    let shown = chat.enter("write b");
    assert!(shown.contains("Second."), "{shown}");
    assert!(
        !shown.contains("allow write_file?"),
        "asked again:\n{shown}"
    );
    assert!(chat.work.path().join("a.txt").is_file());
    assert!(chat.work.path().join("b.txt").is_file());
}

#[test]
fn slash_commands_show_clear_and_switch_and_quit() {
    let chat = Chat::start(&[]);
    let shown = chat.enter("/context");
    assert!(shown.contains("messages   0"), "{shown}");

    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Hello there."])));
    chat.enter("hi");
    let id = chat.only_session();

    let shown = chat.enter("/workspace");
    for expected in [
        "workspace  (no name)",
        "id         default",
        "provider   claude",
        "model      test-model",
        "messages   2",
    ] {
        assert!(shown.contains(expected), "no `{expected}`:\n{shown}");
    }
    assert!(shown.contains(&id), "{shown}");

    let shown = chat.enter("/context");
    assert!(
        shown.contains("messages   2 (all in the context window)"),
        "{shown}"
    );
    assert!(shown.contains("of 200,000"), "{shown}");

    // /model switches this session's model: the next request names it.
    let shown = chat.enter("/model");
    assert!(
        shown.contains("claude/test-model (the workspace's config)"),
        "{shown}"
    );
    let shown = chat.enter("/model other-model");
    assert!(shown.contains("now calls claude/other-model"), "{shown}");
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["From the other one."])));
    chat.enter("and now?");
    let last = chat.server.requests().last().unwrap().body.clone();
    assert_eq!(last["model"], "other-model", "{last}");
    let shown = chat.enter("/model");
    assert!(shown.contains("claude/other-model (chosen"), "{shown}");
    // A provider without a key is refused at once, and the model stays.
    let shown = chat.enter("/model gemini");
    assert!(shown.contains("GEMINI_API_KEY"), "{shown}");
    let shown = chat.enter("/workspace");
    assert!(shown.contains("model      other-model"), "{shown}");

    // /clear empties the transcript.
    let shown = chat.enter("/clear");
    assert!(shown.contains("cleared"), "{shown}");
    assert_eq!(chat.messages(&id), vec![]);
    let shown = chat.enter("/context");
    assert!(shown.contains("messages   0"), "{shown}");
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Fresh start."])));
    chat.enter("again");
    let last = chat.server.requests().last().unwrap().body.to_string();
    assert!(
        !last.contains("Hello there."),
        "the cleared history was sent: {last}"
    );

    let shown = chat.enter("/nope");
    assert!(shown.contains("unknown command /nope"), "{shown}");
    assert!(
        shown.contains("/workspace, /clear, /context, /model"),
        "{shown}"
    );
    let shown = chat.enter("/help");
    assert!(shown.contains("/load ID"), "{shown}");

    chat.term.type_text("/quit");
    chat.term.send_keys(&["Enter"]);
    let (code, screen) = chat.term.wait_exit();
    assert_eq!(code, 0, "{screen}");

    // The model chosen is kept with the session: a later chat that continues it calls it.
    let again = Chat::open(&chat.home, &chat.server, chat.work.path(), &["--continue"]);
    let screen = again.wait_for("the banner", |s| last_line(s) == PROMPT);
    assert!(screen.contains("claude/other-model"), "{screen}");

    // And so does a script: `chat -p --session` resolves the session's model the same way.
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Scripted."])));
    let mut script = chat
        .home
        .cmd(&["chat", "-p", "from a script", "--session", &id]);
    script
        .current_dir(chat.work.path())
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", chat.server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key");
    let r = berth_testkit::run(script);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Scripted.\n");
    let last = chat.server.requests().last().unwrap().body.clone();
    assert_eq!(last["model"], "other-model", "{last}");
}

#[test]
fn sessions_are_listed_started_and_loaded_and_prompts_are_remembered() {
    let chat = Chat::start(&[]);
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Noted: apples."])));
    chat.enter("remember apples");
    let first = chat.only_session();

    let shown = chat.enter("/new");
    assert!(shown.contains("new session"), "{shown}");
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Noted: pears."])));
    chat.enter("remember pears");
    let sessions = chat.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let second = sessions
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .find(|s| *s != first)
        .unwrap()
        .to_owned();
    // The new session's request carried nothing of the first.
    let last = chat.server.requests().last().unwrap().body.to_string();
    assert!(!last.contains("apples"), "{last}");

    let shown = chat.enter("/sessions");
    assert!(shown.contains(&format!("* {}", &second[..8])), "{shown}");
    assert!(shown.contains(&first[..8]), "{shown}");
    assert!(shown.contains("remember apples"), "{shown}");

    let shown = chat.enter(&format!("/load {}", &first[..8]));
    assert!(shown.contains("2 messages"), "{shown}");
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Apples, yes."])));
    chat.enter("what was it?");
    let last = chat.server.requests().last().unwrap().body.to_string();
    assert!(last.contains("Noted: apples."), "{last}");
    assert_eq!(chat.messages(&first).len(), 4);
    assert_eq!(chat.messages(&second).len(), 2);

    let shown = chat.enter("/load zzzz");
    assert!(shown.contains("error:"), "{shown}");

    // The prompts are in the history file, and a new chat recalls them with Up.
    chat.term.send_keys(&["C-d"]);
    let (code, screen) = chat.term.wait_exit();
    assert_eq!(code, 0, "{screen}");
    let history = std::fs::read_to_string(chat.home.path().join("chat_history")).unwrap();
    assert!(history.contains("remember apples"), "{history}");
    assert!(history.contains("/sessions"), "{history}");
    let again = Chat::open(&chat.home, &chat.server, chat.work.path(), &[]);
    again.wait_for("the prompt", |s| last_line(s) == PROMPT);
    again.send_keys(&["Up"]);
    again.wait_for("the last line typed, recalled", |s| {
        last_line(s) == "berth> /load zzzz"
    });
}

#[test]
fn ctrl_d_leaves_and_so_does_ctrl_c_twice_at_an_empty_prompt() {
    let chat = Chat::start(&[]);
    chat.term.send_keys(&["C-d"]);
    let (code, screen) = chat.term.wait_exit();
    assert_eq!(code, 0, "{screen}");

    let chat = Chat::start(&[]);
    // Ctrl-C on a line with text clears it; it does not count toward leaving.
    chat.term.type_text("half a thought");
    chat.term.wait_for("the typed text", |s| {
        last_line(s) == "berth> half a thought"
    });
    chat.term.send_keys(&["C-c"]);
    chat.wait_prompt("the cleared line");
    chat.term.send_keys(&["C-c"]);
    chat.term
        .wait_for("the hint", |s| s.contains("Ctrl-C again"));
    chat.wait_prompt("the hint");
    chat.term.send_keys(&["C-c"]);
    let (code, screen) = chat.term.wait_exit();
    assert_eq!(code, 0, "{screen}");
    assert_eq!(
        chat.sessions().len(),
        0,
        "a chat without a prompt made a session"
    );
}

#[test]
fn a_command_the_sandbox_refused_runs_once_unconfined_only_when_the_person_says_so() {
    let chat = Chat::start(&[]);
    // Outside /tmp and /var/tmp, where a confined command has private tmpfs of its own.
    let outside_dir = berth_testkit::outside_dir();
    let outside = outside_dir.path().join("unconfined.txt");
    let _ = std::fs::remove_file(&outside);
    let command = |id: &str| {
        Reply::anthropic(
            &Turn::new().tool_call(
                id,
                "run_command",
                [
                    serde_json::json!({ "command": format!("echo x > {}", outside.display()) })
                        .to_string(),
                ],
            ),
        )
    };

    // Refused by the sandbox, then asked; "no" keeps it confined.
    chat.server.push(command("call_1"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["It was refused."])));
    chat.enter_until_asked("write outside", "run_command");
    chat.term.send_keys(&["y", "Enter"]);
    let asked = chat.term.wait_for("the question to lift the sandbox", |s| {
        last_line(s).starts_with("allow run_command without the sandbox?")
    });
    assert!(asked.contains("[berth sandbox]"), "{asked}");
    // Once, never always: "always" is not offered, nor taken as an answer.
    assert_eq!(
        last_line(&asked),
        "allow run_command without the sandbox? [y] once, [n] no:",
        "{asked}"
    );
    chat.term.send_keys(&["a", "Enter"]);
    chat.term.wait_for("the answer a to be refused", |s| {
        s.contains("answer y or n")
            && last_line(s).starts_with("allow run_command without the sandbox?")
    });
    let shown = chat.answer("n");
    assert!(shown.contains("It was refused."), "{shown}");
    assert!(!outside.exists());

    // "yes" runs it once without the sandbox.
    chat.server.push(command("call_2"));
    chat.server
        .push(Reply::anthropic(&Turn::new().text(["Written."])));
    chat.enter_until_asked("write outside again", "run_command");
    chat.term.send_keys(&["y", "Enter"]);
    chat.term.wait_for("the question to lift the sandbox", |s| {
        last_line(s).starts_with("allow run_command without the sandbox?")
    });
    let shown = chat.answer("y");
    assert!(shown.contains("Written."), "{shown}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "x\n");
    std::fs::remove_file(&outside).unwrap();
}
