//! `berth chat -p` end to end: the real binary against local servers that speak each
//! provider's real streaming format (berth-testkit's provider server).

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
    assert_eq!(r.code, 2, "{}", r.stderr);
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
