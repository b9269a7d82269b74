//! `berth chat -p` end to end: the real binary against local servers that speak each
//! provider's real streaming format (berth-testkit's provider server).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::process::Command;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{Run, run};
use support::Home;

/// Which provider a test talks to, and how berth is pointed at the local server for it.
#[derive(Clone, Copy, Debug)]
enum Dialect {
    Claude,
    Openai,
    Gemini,
}

const ALL: [Dialect; 3] = [Dialect::Claude, Dialect::Openai, Dialect::Gemini];

impl Dialect {
    fn reply(self, turn: &Turn) -> Reply {
        match self {
            Dialect::Claude => Reply::anthropic(turn),
            Dialect::Openai => Reply::openai(turn),
            Dialect::Gemini => Reply::gemini(turn),
        }
    }

    fn error(self, status: u16, message: &str) -> Reply {
        match self {
            Dialect::Claude => Reply::anthropic_error(status, message),
            Dialect::Openai => Reply::openai_error(status, message),
            Dialect::Gemini => Reply::gemini_error(status, message),
        }
    }

    /// `berth chat` with this provider configured through the environment, run in `work`.
    fn chat(
        self,
        home: &Home,
        server: &ProviderServer,
        work: &std::path::Path,
        args: &[&str],
    ) -> Command {
        let mut all = vec!["chat"];
        all.extend_from_slice(args);
        let mut cmd = home.cmd(&all);
        cmd.current_dir(work);
        let (name, table, key_var, base) = match self {
            Dialect::Claude => (
                "claude",
                "CLAUDE",
                "ANTHROPIC_API_KEY",
                server.url().to_owned(),
            ),
            Dialect::Openai => (
                "openai",
                "OPENAI",
                "OPENAI_API_KEY",
                format!("{}/v1", server.url()),
            ),
            Dialect::Gemini => (
                "gemini",
                "GEMINI",
                "GEMINI_API_KEY",
                server.url().to_owned(),
            ),
        };
        cmd.env("BERTH_PROVIDER", name)
            .env(format!("BERTH_PROVIDERS__{table}__BASE_URL"), base)
            .env(format!("BERTH_PROVIDERS__{table}__MODEL"), "test-model")
            .env(key_var, "test-key");
        cmd
    }
}

fn setup() -> (Home, ProviderServer, tempfile::TempDir) {
    (
        Home::new(),
        ProviderServer::start_in_background(),
        tempfile::tempdir().unwrap(),
    )
}

#[test]
fn the_answer_streams_to_stdout_and_nothing_else_does() {
    for d in ALL {
        let (home, server, work) = setup();
        server.push(d.reply(&Turn::new().text(["The answer ", "is 42."])));
        let r = run(d.chat(&home, &server, work.path(), &["-p", "what is it?"]));
        assert_eq!(r.code, 0, "{d:?}: {}", r.stderr);
        assert_eq!(r.stdout, "The answer is 42.\n", "{d:?}");
        assert!(!r.stderr.contains("42"), "{d:?}: {}", r.stderr);
        let sessions = home.json(&["session", "list", "--json"]);
        let s = &sessions.as_array().unwrap()[0];
        assert_eq!(s["provider"], format!("{d:?}").to_lowercase(), "{d:?}");
        let shown = home.json(&["session", "show", s["id"].as_str().unwrap(), "--json"]);
        let messages = shown["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{d:?}: {shown}");
        assert_eq!(messages[0]["content"], "what is it?");
        assert_eq!(messages[1]["content"], "The answer is 42.");
        // The key went in a header, never in the URL.
        let req = &server.requests()[0];
        assert!(!req.path.contains("test-key"), "{d:?}: {}", req.path);
        assert!(req.head_contains("test-key"), "{d:?}");
    }
}

#[test]
fn a_write_is_refused_without_allow_and_done_with_it() {
    for d in ALL {
        let (home, server, work) = setup();
        let call = Turn::new().tool_call(
            "call_1",
            "write_file",
            [r#"{"path":"out.txt","content":"hello"}"#],
        );
        server.push(d.reply(&call));
        server.push(d.reply(&Turn::new().text(["I was not allowed."])));
        let r = run(d.chat(&home, &server, work.path(), &["-p", "write it"]));
        assert_eq!(r.code, 0, "{d:?}: {}", r.stderr);
        assert!(!work.path().join("out.txt").exists(), "{d:?}");
        assert!(
            r.stderr.contains("refused write_file") && r.stderr.contains("--allow write_file"),
            "{d:?}: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "I was not allowed.\n");

        server.push(d.reply(&call));
        server.push(d.reply(&Turn::new().text(["Written."])));
        let r = run(d.chat(
            &home,
            &server,
            work.path(),
            &["-p", "write it", "--allow", "write_file", "--continue"],
        ));
        assert_eq!(r.code, 0, "{d:?}: {}", r.stderr);
        assert_eq!(
            std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
            "hello",
            "{d:?}"
        );
        // --continue carried the first exchange into the second request.
        let last = server.requests().last().unwrap().body.to_string();
        assert!(last.contains("I was not allowed."), "{d:?}: {last}");
    }
}

#[test]
fn a_provider_error_fails_with_its_own_message() {
    for d in ALL {
        let (home, server, work) = setup();
        server.push(d.error(400, "model test-model does not exist"));
        let r: Run = run(d.chat(&home, &server, work.path(), &["-p", "hi"]));
        assert_ne!(r.code, 0, "{d:?}");
        assert!(
            r.stderr.contains("model test-model does not exist"),
            "{d:?}: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "", "{d:?}");
        assert_eq!(server.request_count(), 1, "{d:?}: a 4xx is not retried");
    }
}

#[test]
fn the_prompt_can_come_from_stdin_and_a_missing_key_is_named() {
    let (home, server, work) = setup();
    server.push(Reply::anthropic(&Turn::new().text(["from stdin"])));
    let mut cmd = Dialect::Claude.chat(&home, &server, work.path(), &["-p", "-"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a prompt on stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from stdin\n");
    assert!(
        server.requests()[0]
            .body
            .to_string()
            .contains("a prompt on stdin")
    );

    let mut cmd = Dialect::Openai.chat(&home, &server, work.path(), &["-p", "hi"]);
    cmd.env_remove("OPENAI_API_KEY");
    let r = run(cmd);
    assert_eq!(r.code, 7, "not configured: {}", r.stderr);
    assert!(r.stderr.contains("OPENAI_API_KEY"), "{}", r.stderr);
}

#[test]
fn without_p_and_without_a_terminal_it_says_what_to_do() {
    let (home, server, work) = setup();
    let r = run(Dialect::Claude.chat(&home, &server, work.path(), &[]));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("needs a terminal") && r.stderr.contains("-p PROMPT"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
    assert_eq!(server.request_count(), 0);
    assert_eq!(
        home.json(&["session", "list", "--json"]),
        serde_json::json!([])
    );
}

/// berth's own MCP server as the agent's external tools: `berth mcp` on stdio and
/// `berth mcp --transport http`, each serving another home, called by the model as
/// `mcp__<server>__<tool>` with each result tied to its call; an `isError` result comes back
/// as an error; a server whose command does not exist is named on stderr and the turn runs.
#[test]
fn berths_own_mcp_server_on_stdio_and_over_http_are_tools_of_the_agent() {
    let (home, server, work) = setup();
    let (served, _) = served_home("from the served home");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = served.cmd(&[
        "mcp",
        "--transport",
        "http",
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let mut http = KillOnDrop(http.stderr(std::process::Stdio::null()).spawn().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "berth mcp --transport http did not listen"
        );
        assert!(
            http.0.try_wait().unwrap().is_none(),
            "berth mcp --transport http exited"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[mcp_servers]]\nname = \"local\"\ncommand = \"{bin}\"\nargs = [\"mcp\"]\nenv = {{ BERTH_HOME = \"{served}\" }}\n\
             [[mcp_servers]]\nname = \"remote\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
             [[mcp_servers]]\nname = \"ghost\"\ncommand = \"/nonexistent/berth-no-such-server\"\n",
            bin = env!("CARGO_BIN_EXE_berth"),
            served = served.path().display(),
        ),
    )
    .unwrap();
    let read = |path: &str| format!(r#"{{"workspace_identifier": "served-ws", "path": "{path}"}}"#);
    server.push(Reply::anthropic(
        &Turn::new()
            .tool_call(
                "c_local",
                "mcp__local__workspace_storage_read",
                [read("note.txt")],
            )
            .tool_call(
                "c_remote",
                "mcp__remote__workspace_storage_read",
                [read("note.txt")],
            )
            .tool_call(
                "c_missing",
                "mcp__local__workspace_storage_read",
                [read("missing.txt")],
            ),
    ));
    server.push(Reply::anthropic(&Turn::new().text(["Both said it."])));
    let r = run(Dialect::Claude.chat(
        &home,
        &server,
        work.path(),
        &["-p", "read the note", "--allow-all"],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Both said it.\n");
    assert!(
        r.stderr.contains("MCP server \"ghost\" is not available"),
        "{}",
        r.stderr
    );
    let requests = server.requests();
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__local__workspace_create"), "{tools:?}");
    assert!(
        tools.contains(&"mcp__remote__workspace_create"),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__ghost")),
        "{tools:?}"
    );
    let messages = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<&serde_json::Value> = messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 3, "{messages:?}");
    for (result, id) in results.iter().zip(["c_local", "c_remote"]) {
        assert_eq!(result["tool_use_id"], id);
        assert_eq!(result["is_error"], false, "{result}");
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("from the served home"),
            "{result}"
        );
    }
    assert_eq!(results[2]["tool_use_id"], "c_missing");
    assert_eq!(results[2]["is_error"], true, "{}", results[2]);
    let _ = http.0.kill();
}

/// berth's own MCP server marks its read tools read-only, so `chat -p` reads its storage
/// without `--allow`; a write through it still waits for `--allow` and is refused without it.
#[test]
fn berths_own_read_only_mcp_tools_run_without_allow_and_its_writes_do_not() {
    let (home, server, work) = setup();
    let (served, ws) = served_home("kept");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[mcp_servers]]\nname = \"berth\"\ncommand = \"{bin}\"\nargs = [\"mcp\"]\nenv = {{ BERTH_HOME = \"{served}\" }}\n",
            bin = env!("CARGO_BIN_EXE_berth"),
            served = served.path().display(),
        ),
    )
    .unwrap();
    let write =
        r#"{"workspace_identifier": "served-ws", "path": "note.txt", "content": "overwritten"}"#;
    let script = |server: &ProviderServer| {
        server.push(Reply::anthropic(
            &Turn::new()
                .tool_call(
                    "c_read",
                    "mcp__berth__workspace_storage_read",
                    [r#"{"workspace_identifier": "served-ws", "path": "note.txt"}"#],
                )
                .tool_call("c_write", "mcp__berth__workspace_storage_write", [write]),
        ));
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    };
    script(&server);
    let r = run(Dialect::Claude.chat(&home, &server, work.path(), &["-p", "read, then write"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("refused mcp__berth__workspace_storage_write (allow it with --allow"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr
            .contains("refused mcp__berth__workspace_storage_read"),
        "{}",
        r.stderr
    );
    let results = |server: &ProviderServer| -> Vec<serde_json::Value> {
        let requests = server.requests();
        requests.last().unwrap().body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .cloned()
            .collect()
    };
    let got = results(&server);
    assert_eq!(got[0]["tool_use_id"], "c_read");
    assert_eq!(got[0]["is_error"], false, "{}", got[0]);
    assert!(
        got[0]["content"].as_str().unwrap().contains("kept"),
        "{}",
        got[0]
    );
    assert_eq!(got[1]["tool_use_id"], "c_write");
    assert_eq!(got[1]["is_error"], true, "{}", got[1]);
    let note = |served: &Home| served.ok(&["workspace", "storage", "read", &ws, "note.txt"]);
    assert_eq!(note(&served), "kept");

    // Allowed by name, the write goes through.
    script(&server);
    let r = run(Dialect::Claude.chat(
        &home,
        &server,
        work.path(),
        &[
            "-p",
            "read, then write",
            "--allow",
            "mcp__berth__workspace_storage_write",
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(results(&server)[1]["is_error"], false);
    assert_eq!(note(&served), "overwritten");
}

/// Another home for `berth mcp` to serve, with a workspace `served-ws` (its id returned) whose
/// storage holds `note.txt`.
fn served_home(note: &str) -> (Home, String) {
    let served = Home::new();
    let ws = served
        .ok(&["workspace", "create", "served-ws"])
        .trim()
        .to_owned();
    served.ok(&["workspace", "storage", "write", &ws, "note.txt", note]);
    (served, ws)
}

/// Kills a child process when the test ends, whichever way it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
