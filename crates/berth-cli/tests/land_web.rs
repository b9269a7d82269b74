//! The review page's Land button (`POST /runs/{id}/agents/{n}/land`): it needs the page's
//! CSRF header, starts a land of that one agent driven in `berth serve` and answers at once;
//! the land brings the agent's work onto `main` with the check run on the combined tree, and
//! the page says so on its next load. An agent whose check fails on the combined tree (the
//! base moved under it) gets its turns to mend it, is left, and the page says why. The real
//! binary serving the page, a real repository, the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{commit, git, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, until, write_call};

/// A finished one-agent run in `root` whose agent wrote `out.txt`, checked by `check`.
fn one_run(home: &Home, server: &ProviderServer, root: &Path, check: &str) -> String {
    server.push(Reply::anthropic(&write_call("landed from the page\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        home,
        server,
        root,
        &["Write out.txt", "--allow", "write_file", "--check", check],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `berth serve --open` in `root`, berth's agent on the stand-in; its address.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(home: &Home, server: &ProviderServer, root: &Path) -> Served {
    let log = home.path().join("serve.log");
    let mut cmd = home.cmd(&["serve", "--open", "--listen", "127.0.0.1:0"]);
    cmd.current_dir(root)
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let child = cmd.spawn().unwrap();
    let addr = until("the page", Duration::from_secs(30), || {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let at = said.find("web page at http://")?;
        let rest = &said[at + "web page at http://".len()..];
        Some(rest[..rest.find('/')?].to_owned())
    });
    Served { child, addr }
}

/// One HTTP/1.1 request, as the page's script sends it (same origin, the page's CSRF header
/// when given): the status and the body.
fn http(addr: &str, method: &str, path: &str, csrf: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    if let Some(token) = csrf {
        request.push_str(&format!("x-berth-csrf: {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {answer}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

fn csrf_of(page: &str) -> String {
    page.split("name=\"berth-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned()
}

/// The newest land, once it is over.
fn land_over(home: &Home) -> Value {
    until("the land to be over", Duration::from_secs(60), || {
        let lands = home.json(&["land", "list", "--json"]);
        let newest = lands.as_array()?.first()?.clone();
        (newest["state"] == "over").then_some(newest)
    })
}

#[test]
fn the_land_button_lands_the_agent_in_the_server_and_the_page_says_so() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let id = one_run(&home, &server, &root, "test -f out.txt");
    let served = serve(&home, &server, &root);
    let land_path = format!("/runs/{id}/agents/1/land");

    // Beside Merge, saying what it does.
    let (status, page) = http(&served.addr, "GET", &format!("/runs/{id}"), None);
    assert_eq!(status, 200, "{page}");
    let button = page
        .split("<button")
        .find(|b| b.contains(&format!("data-action=\"{land_path}\"")))
        .unwrap_or_else(|| panic!("no Land button:\n{page}"));
    assert!(button.contains("combined tree"), "{button}");
    assert!(
        page.contains("moves the base only once the run's check passes on that combined tree"),
        "the page says it, not only a title: {page}"
    );
    assert!(page.contains("/agents/1/merge\""), "{page}");

    // Without the page's CSRF header, nothing is started.
    let (status, body) = http(&served.addr, "POST", &land_path, None);
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        home.json(&["land", "list", "--json"]),
        serde_json::json!([])
    );

    let (status, body) = http(&served.addr, "POST", &land_path, Some(&csrf_of(&page)));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["location"], format!("/runs/{id}"), "{answer}");

    let land = land_over(&home);
    assert_eq!(
        land["landed"],
        serde_json::json!([format!("{id}:1")]),
        "{land:#}"
    );
    let shown = home.json(&["land", "show", land["id"].as_str().unwrap(), "--json"]);
    let checked = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "checked")
        .unwrap_or_else(|| panic!("no check on the combined tree: {shown:#}"));
    assert_eq!(checked["check"]["passed"], true, "{checked:#}");
    assert_eq!(
        git(&root, &["show", "main:out.txt"]),
        "landed from the page\n"
    );
    let run = home.json(&["run", "show", &id, "--json"]);
    assert_eq!(run["agents"][0]["outcome"], "merged", "{run:#}");

    // The page's next load says it landed, and offers nothing more for the agent.
    let (_, page) = http(&served.addr, "GET", &format!("/runs/{id}"), None);
    assert!(
        page.contains("Landed</span> onto <code>main</code>"),
        "{page}"
    );
    assert!(!page.contains(&land_path), "{page}");
}

#[test]
fn an_agent_whose_check_fails_on_the_combined_tree_is_left_and_the_page_says_why() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Green where the agent worked; red once the base has later.txt, which it gets now.
    let id = one_run(&home, &server, &root, "test ! -f later.txt");
    commit(&root, "later.txt", "meanwhile\n");
    let main_before = git(&root, &["rev-parse", "main"]);
    // The agent's two turns to mend the check, which it does not.
    for _ in 0..2 {
        server.push(Reply::anthropic(
            &Turn::new().text(["I cannot see what to change."]),
        ));
    }
    let served = serve(&home, &server, &root);
    let (_, page) = http(&served.addr, "GET", &format!("/runs/{id}"), None);
    let land_path = format!("/runs/{id}/agents/1/land");
    let (status, body) = http(&served.addr, "POST", &land_path, Some(&csrf_of(&page)));
    assert_eq!(status, 200, "{body}");

    let land = land_over(&home);
    assert_eq!(
        land["left"],
        serde_json::json!([format!("{id}:1")]),
        "{land:#}"
    );
    assert_eq!(git(&root, &["rev-parse", "main"]), main_before);
    let shown = home.json(&["land", "show", land["id"].as_str().unwrap(), "--json"]);
    let reason = shown["items"][0]["reason"].as_str().unwrap().to_owned();
    assert_eq!(shown["items"][0]["turns"], 2, "{shown:#}");

    // The page names the land and the reason, and offers Land again.
    let (_, page) = http(&served.addr, "GET", &format!("/runs/{id}"), None);
    assert!(page.contains("Not landed</span> by land"), "{page}");
    let escaped = reason
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    assert!(page.contains(&escaped), "{reason}\n{page}");
    assert!(page.contains(&land_path), "{page}");
}
