//! Conflicts seen before landing: `berth run compare` says, for each agent that finished with
//! work, whether that work still merges into its base as the base now stands, and which
//! finished agents of other runs it clashes with, naming the files. Found by a trial merge,
//! so work on other lines of the same file is not a conflict; the agents of one run are
//! alternatives and never compared with each other. The real binary, a real repository and
//! the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{commit, git, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, until};

const F: &str = "one\ntwo\nthree\n";

/// A model turn that writes `content` to `path` with berth's `write_file`.
fn write(path: &str, content: &str) -> Turn {
    let args = serde_json::json!({"path": path, "content": content}).to_string();
    Turn::new().tool_call("w1", "write_file", [args])
}

/// A run with an agent per `(path, content)`, each writing its file; its id once it ended.
fn edit_run(home: &Home, server: &ProviderServer, root: &Path, writes: &[(&str, &str)]) -> String {
    for (path, content) in writes {
        // Held back so that every agent's first request gets a write.
        server
            .push(Reply::anthropic(&write(path, content)).delay_head(Duration::from_millis(1500)));
    }
    for _ in writes {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let n = writes.len().to_string();
    let r = run(berth_run(
        home,
        server,
        root,
        &["Edit the files", "--agents", &n, "--allow", "write_file"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The review page of run `id`, as `berth serve` serves it.
fn review_page(home: &Home, id: &str) -> String {
    let log_path = home.path().join("serve.log");
    let mut child = home
        .cmd(&["serve", "--open", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let addr = until("the web page", Duration::from_secs(30), || {
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        let at = said.find("web page at http://")?;
        let rest = &said[at + "web page at http://".len()..];
        Some(rest[..rest.find('/')?].to_owned())
    });
    let page = get(&addr, &format!("/runs/{id}"));
    child.kill().unwrap();
    child.wait().unwrap();
    page
}

/// The body of `GET path`, which must answer 200.
fn get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer.split_once("\r\n\r\n").unwrap().1.to_owned()
}

/// `run compare ID --json`'s conflicts of agent `n` (from 1): each as `with: files`.
fn conflicts(home: &Home, id: &str, n: usize) -> (Vec<String>, Value) {
    let compared = home.json(&["run", "compare", id, "--json"]);
    let seen = compared["agents"][n - 1]["conflicts"].clone();
    let lines = seen["with"]
        .as_array()
        .unwrap_or_else(|| panic!("{compared:#}"))
        .iter()
        .map(|c| {
            let with = match c["kind"].as_str().unwrap() {
                "base" => c["branch"].as_str().unwrap().to_owned(),
                _ => format!("{} {}", c["run"].as_str().unwrap(), c["agent"]),
            };
            let files: Vec<&str> = c["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            format!("{with}: {}", files.join(", "))
        })
        .collect();
    (lines, seen)
}

/// The lines of `run compare ID` that say what an agent's work conflicts with.
fn conflict_lines(home: &Home, id: &str) -> Vec<String> {
    home.ok(&["run", "compare", id])
        .lines()
        .filter(|l| l.contains("conflicts"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn compare_names_the_conflicts_with_the_base_and_with_other_runs_but_not_within_a_run() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    commit(&root, "f.txt", F);

    // One run of two agents, alternatives, both changing line 1; another run changing it too;
    // a third changing line 3 and adding a file.
    let pair = edit_run(
        &home,
        &server,
        &root,
        &[("f.txt", "X\ntwo\nthree\n"), ("f.txt", "Y\ntwo\nthree\n")],
    );
    let rival = edit_run(&home, &server, &root, &[("f.txt", "Z\ntwo\nthree\n")]);
    let apart = edit_run(&home, &server, &root, &[("f.txt", "one\ntwo\nTHREE\n")]);

    // The pair's agents each clash with the rival, never with each other.
    for n in [1, 2] {
        let (lines, seen) = conflicts(&home, &pair, n);
        assert_eq!(lines, [format!("{rival} 1: f.txt")], "{seen:#}");
        assert_eq!(seen["base"], "main", "{seen:#}");
        // Compared with the rival and the run on line 3.
        assert_eq!(seen["compared"], 2, "{seen:#}");
    }
    assert_eq!(
        conflict_lines(&home, &pair),
        [
            format!("[1] conflicts with run {rival} agent 1: f.txt"),
            format!("[2] conflicts with run {rival} agent 1: f.txt"),
        ]
    );
    // The rival clashes with both of the pair.
    let (lines, _) = conflicts(&home, &rival, 1);
    assert_eq!(
        lines,
        [format!("{pair} 1: f.txt"), format!("{pair} 2: f.txt")]
    );
    // Line 3 merges with all of them, and with main: nothing to say.
    let (lines, seen) = conflicts(&home, &apart, 1);
    assert_eq!(lines, Vec::<String>::new(), "{seen:#}");
    assert_eq!(seen["compared"], 3, "{seen:#}");
    assert_eq!(conflict_lines(&home, &apart), Vec::<String>::new());

    // main changes line 1 meanwhile: every agent that changed it no longer merges; the one
    // on line 3 still does.
    let main_before = git(&root, &["rev-parse", "main"]);
    commit(&root, "f.txt", "uno\ntwo\nthree\n");
    let rival_lines = conflict_lines(&home, &rival);
    assert_eq!(
        rival_lines,
        [
            "[1] conflicts with main: f.txt".to_owned(),
            format!("[1] conflicts with run {pair} agent 1: f.txt"),
            format!("[1] conflicts with run {pair} agent 2: f.txt"),
        ]
    );
    let (lines, seen) = conflicts(&home, &rival, 1);
    assert_eq!(lines[0], "main: f.txt", "{seen:#}");
    assert_eq!(seen["with"][0]["kind"], "base", "{seen:#}");
    assert_eq!(conflict_lines(&home, &apart), Vec::<String>::new());

    // The review page says the same, beside each agent's check.
    let page = review_page(&home, &rival);
    let dd = page
        .split("<dd class=\"conflicts\">")
        .nth(1)
        .and_then(|rest| rest.split("</dd>").next())
        .unwrap_or_else(|| panic!("{page}"));
    assert!(
        dd.contains("with <code>main</code>: <code>f.txt</code>"),
        "{dd}"
    );
    assert!(
        dd.contains(&format!(
            "<a href=\"/runs/{pair}\">run {pair} agent 2</a> (berth): <code>f.txt</code>"
        )),
        "{dd}"
    );
    let page = review_page(&home, &apart);
    assert!(page.contains("<span class=\"add\">none</span>"), "{page}");

    // Looking changed nothing: main, the person's checkout, and each agent's worktree.
    assert_ne!(git(&root, &["rev-parse", "main"]), main_before);
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
    let shown = home.json(&["run", "show", &rival, "--json"]);
    let wt = Path::new(shown["agents"][0]["worktree"].as_str().unwrap());
    assert_eq!(
        git(wt, &["status", "--porcelain"]),
        " M f.txt\n",
        "the agent's work is still uncommitted, its index as it was"
    );
    assert_eq!(git(wt, &["rev-parse", "HEAD"]), main_before);

    // Once the rival is discarded, nobody is compared with it any more.
    home.ok(&["run", "discard", &rival, "-y"]);
    assert_eq!(
        conflict_lines(&home, &pair),
        [
            "[1] conflicts with main: f.txt".to_owned(),
            "[2] conflicts with main: f.txt".to_owned(),
        ]
    );
    let (_, seen) = conflicts(&home, &rival, 1);
    assert_eq!(seen["unjudged"]["reason"], "closed", "{seen:#}");
}
