//! A pool of nodes on one Postgres, for the tests of queued runs: each node its own home
//! (its own clone, worktrees and provider stand-in) on one database.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use serde_json::Value;

use super::Home;
use super::runs::{until, write_call};

/// A node: a home on the shared database, with its own provider stand-in.
pub struct Node {
    pub name: &'static str,
    pub home: Home,
    pub server: ProviderServer,
    pub url: String,
    pub lease: &'static str,
    pub worker: Option<Child>,
}

impl Node {
    pub fn new(name: &'static str, url: &str, lease: &'static str) -> Node {
        Node {
            name,
            home: Home::new(),
            server: ProviderServer::start_in_background(),
            url: url.to_owned(),
            lease,
            worker: None,
        }
    }

    /// A berth command of this node: its home, the database, its stand-in.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = self.home.cmd(args);
        cmd.env("BERTH_STORE_URL", &self.url)
            .env("BERTH_POOL__LEASE_SECS", self.lease)
            .env("BERTH_PROVIDER", "claude")
            .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", self.server.url())
            .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
            .env("ANTHROPIC_API_KEY", "test-key");
        cmd
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let r = berth_testkit::run(self.cmd(args));
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
    }

    /// `berth serve --worker` of this node, one agent at a time; its output in its home.
    pub fn start_worker(&mut self) {
        let log = std::fs::File::create(self.log()).unwrap();
        let child = self
            .cmd(&[
                "serve",
                "--worker",
                "--node",
                self.name,
                "--max-agents",
                "1",
                "--open",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.worker = Some(child);
        until("the worker to start", Duration::from_secs(30), || {
            std::fs::read_to_string(self.log())
                .unwrap()
                .contains("works queued runs")
                .then_some(())
        });
    }

    pub fn log(&self) -> PathBuf {
        self.home.path().join(format!("worker-{}.log", self.name))
    }

    pub fn said(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.worker.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `berth run --queue` from `node`: the run's id, printed at once.
pub fn queue(node: &Node, task: &str, url: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "run",
        "--queue",
        task,
        "--repo",
        url,
        "--allow",
        "write_file",
        "--json",
    ];
    args.extend_from_slice(extra);
    let queued = node.json(&args);
    assert_eq!(queued["queued"], true);
    queued["run"].as_str().unwrap().to_owned()
}

/// Replies for `turns` one-agent turns of `node`: each writes `out.txt` saying the node and
/// the turn (answered after `delay`, so a node is busy long enough for the other to take the
/// next run), then closes.
pub fn script(node: &Node, turns: usize, delay: Duration) {
    for n in 0..turns {
        node.server
            .push(Reply::anthropic(&write_call(&format!("{} {n}\n", node.name))).delay_head(delay));
        node.server
            .push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
}

pub fn wait_ended(node: &Node, id: &str, limit: Duration) -> Value {
    until(&format!("run {id} to end"), limit, || {
        let run = node.json(&["run", "show", id, "--json"]);
        run["state"]
            .as_str()
            .is_some_and(|s| s == "ended" || s == "failed")
            .then_some(run)
    })
}
