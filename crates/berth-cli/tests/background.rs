//! Background processes of a session, end to end: the real `berth chat -p` against a local
//! server speaking Claude's streaming format, whose scripted model starts a process with
//! `run_command`'s `background: true`, reaches it from a later command, reads its output and
//! stops it; `berth workspace ps` lists and kills what runs; a session's end ends the rest.
//!
//! A later command reaches a server over a unix socket in the work folder, and over TCP on
//! the workspace's port (every confined tree of a workspace shares its network), where the
//! host reaches it too while the session lives.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_testkit::loopback::{free_port_block, http_get};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use serde_json::{Value, json};
use support::Home;

/// A server on `app.sock` in the folder it runs in: it says it listens, then answers each
/// connection `pong N`.
const SERVER: &str = r#"import os, socket
path = "app.sock"
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen()
print("listening on", path, "port", os.environ.get("BERTH_PORT"), "pid", os.getpid(), flush=True)
n = 0
while True:
    c, _ = s.accept()
    n += 1
    c.sendall(f"pong {n}\n".encode())
    c.close()
"#;

/// Asks the server once (`--once`) or until it answers (10 s at most); fails when it cannot.
const CLIENT: &str = r#"import socket, sys, time
deadline = time.time() + (0 if "--once" in sys.argv else 10)
while True:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect("app.sock")
        print(s.recv(100).decode().strip())
        break
    except OSError as e:
        if time.time() >= deadline:
            print("cannot reach the server:", e)
            sys.exit(1)
        time.sleep(0.1)
"#;

/// Appends a line to ticks.txt every 100 ms.
const TICKING: &str = "while :; do echo tick >> ticks.txt; sleep 0.1; done";

/// `berth chat -p` on Claude's dialect at `server`, in `work`, every tool allowed.
fn chat(home: &Home, server: &ProviderServer, work: &Path) -> Command {
    chat_with(home, server, work, &[])
}

/// [`chat`] with more arguments.
fn chat_with(home: &Home, server: &ProviderServer, work: &Path, more: &[&str]) -> Command {
    let mut args = vec!["chat", "--allow-all", "-p", "work in the background"];
    args.extend_from_slice(more);
    let mut cmd = home.cmd(&args);
    cmd.current_dir(work)
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key");
    cmd
}

fn call(id: &str, tool: &str, arguments: Value) -> Reply {
    Reply::anthropic(&Turn::new().tool_call(id, tool, [arguments.to_string()]))
}

/// The result the model was sent for call `id`: its text, and whether it is an error.
fn result_of(server: &ProviderServer, id: &str) -> (String, bool) {
    for request in server.requests() {
        for message in request.body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    let text = match &block["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        other => other.to_string(),
                    };
                    return (text, block["is_error"] == true);
                }
            }
        }
    }
    panic!("the model was never sent the result of {id}")
}

/// The pid a start's answer names (`started bg-N (pid P)`).
fn pid_in(answer: &str) -> u32 {
    let at = answer
        .find("(pid ")
        .unwrap_or_else(|| panic!("no pid in {answer}"))
        + 5;
    answer[at..].split(')').next().unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
    })
}

/// Waits until `what` holds, 20 s at most.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Whether the file still grows over half a second.
fn grows(path: &Path) -> bool {
    let before = size(path);
    std::thread::sleep(Duration::from_millis(500));
    size(path) > before
}

/// The only session's workspace id.
fn workspace_of_the_session(home: &Home) -> String {
    let sessions = home.json(&["session", "list", "--json"]);
    sessions[0]["workspace_id"].as_str().unwrap().to_owned()
}

#[test]
fn a_background_server_outlives_its_call_is_read_and_stopped_and_the_rest_ends_with_the_chat() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("serve.py"), SERVER).unwrap();
    std::fs::write(work.path().join("client.py"), CLIENT).unwrap();
    let background = |command: &str| json!({"command": command, "background": true});
    server.push(call("c1", "run_command", background("python3 serve.py")));
    server.push(call(
        "c2",
        "run_command",
        json!({"command": "python3 client.py"}),
    ));
    server.push(call("c3", "read_background", json!({"id": "bg-1"})));
    server.push(call("c4", "run_command", background(TICKING)));
    server.push(call("c5", "stop_background", json!({"id": "bg-1"})));
    server.push(call(
        "c6",
        "run_command",
        json!({"command": "python3 client.py --once"}),
    ));
    server.push(call("c7", "read_background", json!({"id": "bg-7"})));
    server.push(call("c8", "stop_background", json!({"id": "bg-1"})));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let out = berth_testkit::run(chat(&home, &server, work.path()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");

    // The start returned at once with an id and a pid, and the server went on serving: a
    // later command of the session reached it.
    let (started, failed) = result_of(&server, "c1");
    assert!(
        !failed && started.starts_with("started bg-1 (pid "),
        "{started}"
    );
    let (reached, failed) = result_of(&server, "c2");
    assert!(!failed, "{reached}");
    assert_eq!(reached.trim(), "pong 1");

    // Its output was read, with its state.
    let (read, failed) = result_of(&server, "c3");
    assert!(!failed, "{read}");
    assert!(read.starts_with("bg-1 (pid "), "{read}");
    assert!(read.contains("is running"), "{read}");
    assert!(read.contains("listening on app.sock"), "{read}");
    // Started as run_command starts a command: with the workspace's port, and confined, in
    // a PID namespace of its own (the shell and the server are its first processes).
    let said: Vec<&str> = read.split_whitespace().collect();
    let port = said[said.iter().position(|w| *w == "port").unwrap() + 1];
    assert!(port.parse::<u16>().is_ok(), "{read}");
    let pid: u32 = said[said.iter().position(|w| *w == "pid").unwrap() + 1]
        .parse()
        .unwrap();
    assert!(pid <= 3, "not in a PID namespace of its own: {read}");

    // Stopped, it serves no more.
    let (stopped, failed) = result_of(&server, "c5");
    assert!(
        !failed && stopped.starts_with("stopped bg-1: it was killed by signal 9"),
        "{stopped}"
    );
    let (refused, failed) = result_of(&server, "c6");
    assert!(failed, "the server still answered: {refused}");
    assert!(refused.contains("cannot reach the server"), "{refused}");

    // An id the session never had, and a second stop, are errors, never successes.
    let (unknown, failed) = result_of(&server, "c7");
    assert!(failed, "{unknown}");
    assert!(unknown.contains("no background process bg-7"), "{unknown}");
    assert!(unknown.contains("bg-1, bg-2"), "{unknown}");
    let (again, failed) = result_of(&server, "c8");
    assert!(failed && again.contains("had ended already"), "{again}");

    // The one left running ended with the chat: the whole tree, not only its shell.
    let (ticking, _) = result_of(&server, "c4");
    let pid = pid_in(&ticking);
    assert!(!alive(pid), "bg-2's keeper {pid} outlived the chat");
    let ticks = work.path().join("ticks.txt");
    assert!(size(&ticks) > 0, "bg-2 never ran");
    assert!(!grows(&ticks), "bg-2's loop outlived the chat");
    let ws = workspace_of_the_session(&home);
    assert_eq!(home.json(&["workspace", "ps", &ws, "--json"]), json!([]));

    // Their output is kept in berth's home, never in the work folder.
    let log = home.path().join("background").join(&ws).join("bg-1.log");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("listening on app.sock")
    );
    assert!(!work.path().join("bg-1.log").exists());
}

/// Finding: a server started in the background served nobody over TCP: a later command of
/// its session ran in another network namespace, and the host reached none of them.
#[test]
fn a_background_server_serves_its_port_to_later_commands_and_the_host_until_the_session_ends() {
    let port = free_port_block(50000);
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[ports]\nfirst = {port}\nlast = {}\nblock = 10\n", port + 9),
    )
    .unwrap();
    let server = ProviderServer::start_in_background();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("README"), "hello\n").unwrap();
    server.push(call(
        "c1",
        "run_command",
        json!({
            "command": "python3 -m http.server \"$BERTH_PORT\" --bind 127.0.0.1",
            "background": true,
        }),
    ));
    let fetch = r#"python3 -c '
import os, time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:%s/README" % os.environ["BERTH_PORT"], timeout=5).read().decode())
        break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit("never served")
'"#;
    server.push(call("c2", "run_command", json!({"command": fetch})));
    // The session waits (a command of its own) until the host has been served.
    server.push(call(
        "c3",
        "run_command",
        json!({"command": "for i in $(seq 300); do [ -f host-served ] && break; sleep 0.1; done"}),
    ));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let mut cmd = chat(&home, &server, work.path());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let chat = cmd.spawn().unwrap();
    wait_until("the third call", || server.request_count() >= 3);
    let (fetched, failed) = result_of(&server, "c2");
    assert!(!failed, "{fetched}");
    assert_eq!(fetched.trim(), "hello");
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        match http_get(port, "/README") {
            Ok(answer) if answer.contains(" 200 ") => break answer,
            _ => assert!(Instant::now() < deadline, "the host never reached it"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.ends_with("hello\n"), "{answer}");
    std::fs::write(work.path().join("host-served"), "").unwrap();
    let out = chat.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The session is over: so is its server, and the port is closed.
    let refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
    let ws = workspace_of_the_session(&home);
    assert_eq!(home.json(&["workspace", "ps", &ws, "--json"]), json!([]));
}

/// A chat whose model starts `commands` in the background, then streams an answer that stops
/// for two minutes: the processes run while the test looks at them.
fn chat_holding(home: &Home, server: &ProviderServer, work: &Path, commands: &[&str]) -> Child {
    chat_holding_with(home, server, work, commands, &[])
}

/// [`chat_holding`] with more arguments for the chat.
fn chat_holding_with(
    home: &Home,
    server: &ProviderServer,
    work: &Path,
    commands: &[&str],
    more: &[&str],
) -> Child {
    for (i, command) in commands.iter().enumerate() {
        server.push(call(
            &format!("c{i}"),
            "run_command",
            json!({"command": command, "background": true}),
        ));
    }
    let long = Turn::new().text(["Waiting", " forever."]);
    server.push(Reply::anthropic(&long).pause_after(1, Duration::from_secs(120)));
    let mut cmd = chat_with(home, server, work, more);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    wait_until("the last request", || {
        server.request_count() > commands.len()
    });
    child
}

#[test]
fn workspace_ps_lists_what_runs_and_kill_ends_it_and_a_killed_berth_takes_the_rest_along() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let work = tempfile::tempdir().unwrap();
    let mut chat = chat_holding(
        &home,
        &server,
        work.path(),
        &[
            TICKING,
            "while :; do echo tock >> tocks.txt; sleep 0.1; done",
        ],
    );
    let ws = workspace_of_the_session(&home);
    let session = home.json(&["session", "list", "--json"])[0]["id"].clone();

    let listed = home.json(&["workspace", "ps", &ws, "--json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], "bg-1");
    assert_eq!(listed[0]["command"], TICKING);
    assert_eq!(listed[0]["session"], session);
    assert_eq!(listed[1]["id"], "bg-2");
    let pids: Vec<u32> = listed
        .iter()
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .collect();
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    let output = Path::new(listed[0]["output"].as_str().unwrap());
    assert!(output.starts_with(home.path()), "{}", output.display());
    let (ticks, tocks) = (work.path().join("ticks.txt"), work.path().join("tocks.txt"));
    wait_until("the first tick", || size(&ticks) > 0);
    assert!(grows(&ticks));

    // As a table, for a person.
    let table = home.ok(&["workspace", "ps", &ws]);
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains("bg-1") && table.contains("echo tick"),
        "{table}"
    );

    // Ids are checked, and one that runs nothing is not found.
    let r = home.run(&["workspace", "ps", &ws, "--kill", "../x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("bg- and a number"), "{}", r.stderr);
    let r = home.run(&["workspace", "ps", &ws, "--kill", "bg-9"]);
    assert_eq!(r.code, 3, "{}", r.stderr);

    // One killed: its whole tree is gone, the other runs on.
    let killed = home.ok(&["workspace", "ps", &ws, "--kill", "bg-1"]);
    assert!(killed.starts_with("killed bg-1"), "{killed}");
    assert!(!alive(pids[0]));
    assert!(!grows(&ticks), "bg-1's loop outlived its kill");
    assert!(grows(&tocks));
    let listed = home.json(&["workspace", "ps", &ws, "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], "bg-2");

    // berth killed outright: its lifeline takes the rest down, and nothing is listed.
    chat.kill().unwrap();
    chat.wait().unwrap();
    wait_until("bg-2 to end", || !alive(pids[1]));
    assert!(!grows(&tocks), "bg-2's loop outlived berth");
    assert_eq!(home.json(&["workspace", "ps", &ws, "--json"]), json!([]));
}

#[test]
fn a_corrupt_registry_is_an_error_and_is_left_as_it_was() {
    let home = Home::new();
    home.ok(&["workspace", "create", "web"]);
    let ws = home.json(&["workspace", "show", "web", "--json"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dir = home.path().join("background").join(&ws);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("processes.json"), "{\"next\": 2, \"processes\": [").unwrap();
    let r = home.run(&["workspace", "ps", "web"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("processes.json is corrupt"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("processes.json")).unwrap(),
        "{\"next\": 2, \"processes\": ["
    );
    // A workspace whose processes cannot be known is not deleted as if it had none.
    let r = home.run(&["workspace", "delete", "web", "--yes"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(home.run(&["workspace", "show", "web"]).code == 0);
}

#[test]
fn a_run_agents_background_process_ends_with_its_last_turn_before_its_check() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = support::runs::project();
    server.push(call(
        "c1",
        "run_command",
        json!({"command": TICKING, "background": true}),
    ));
    server.push(Reply::anthropic(&Turn::new().text(["Ticking."])));
    // The check passes only when nothing writes ticks.txt any more.
    let check = "test -s ticks.txt && a=$(wc -c < ticks.txt) && sleep 1 && test \"$a\" = \"$(wc -c < ticks.txt)\"";
    let r = berth_testkit::run(support::runs::berth_run(
        &home,
        &server,
        &root,
        &[
            "Start the ticking",
            "--allow",
            "run_command",
            "--check",
            check,
            "--name",
            "ticking",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let (started, failed) = result_of(&server, "c1");
    assert!(!failed && started.starts_with("started bg-1"), "{started}");
    let ws = home.json(&["workspace", "show", "ticking-1", "--json"]);
    let ticks = Path::new(ws["git"]["worktree"].as_str().unwrap()).join("ticks.txt");
    assert!(!grows(&ticks));
    let id = ws["id"].as_str().unwrap();
    assert_eq!(home.json(&["workspace", "ps", id, "--json"]), json!([]));
}

#[test]
fn deleting_a_workspace_ends_what_runs_in_it() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let work = tempfile::tempdir().unwrap();
    let mut chat = chat_holding(&home, &server, work.path(), &[TICKING]);
    let ws = workspace_of_the_session(&home);
    let listed = home.json(&["workspace", "ps", &ws, "--json"]);
    let pid = listed[0]["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid));
    home.ok(&["workspace", "delete", &ws, "--yes", "--force"]);
    assert!(!alive(pid), "its process outlived the workspace");
    assert!(!grows(&work.path().join("ticks.txt")));
    assert!(!home.path().join("background").join(&ws).exists());
    chat.kill().unwrap();
    chat.wait().unwrap();
}

#[test]
fn archiving_a_workspace_ends_what_runs_in_it_and_keeps_its_output() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let work = tempfile::tempdir().unwrap();
    home.ok(&["workspace", "create", "web"]);
    let mut chat = chat_holding_with(&home, &server, work.path(), &[TICKING], &["-w", "web"]);
    let listed = home.json(&["workspace", "ps", "web", "--json"]);
    let pid = listed[0]["pid"].as_u64().unwrap() as u32;
    let output = listed[0]["output"].as_str().unwrap().to_owned();
    assert!(alive(pid));
    home.ok(&["workspace", "archive", "web"]);
    assert!(!alive(pid), "its process outlived the archive");
    assert!(!grows(&work.path().join("ticks.txt")));
    assert!(
        Path::new(&output).exists(),
        "its output went with the archive"
    );
    chat.kill().unwrap();
    chat.wait().unwrap();
}
