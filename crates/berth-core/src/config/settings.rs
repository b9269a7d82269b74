//! The config's tables, one struct each (`[git]`, `[store]`, `[agent]`, `[mcp]`, `[ports]`,
//! `[run]`, `[pool]`, `[serve]`, an `[agents.NAME]` entry, a price): what each key means and
//! its default, kept beside the key.

use std::collections::BTreeMap;
use std::num::{NonZeroU64, NonZeroUsize};

use serde::{Deserialize, Serialize};

use super::Secret;
use crate::error::{Error, Result};

/// Settings for git workspaces. They come from berth's own config only, never from a file
/// inside a repository, so cloning a repository cannot make berth run its commands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GitSettings {
    /// Where worktrees go; default `workspaces/<id>/worktree`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_dir: Option<String>,
    /// Untracked or ignored files to copy from the main checkout into a new worktree.
    pub copy: Vec<String>,
    /// Commands run in a new worktree.
    pub setup: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_timeout_secs: Option<u64>,
    /// Checkouts kept ready per repository so creating a workspace skips the checkout; each
    /// costs one worktree's disk space. Default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare_worktrees: Option<usize>,
    /// Check out submodules in a new worktree (from the main repository's module store where
    /// it has them). Default true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submodules: Option<bool>,
    /// Days a lost-work ref (`refs/berth/lost/<id>`, what a forced removal kept) is kept
    /// before `workspace gc` deletes it, counted from when berth made it. Default 30.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_lost_days: Option<u32>,
}

impl GitSettings {
    /// `[git] keep_lost_days`, default 30.
    pub fn keep_lost_days(&self) -> u32 {
        self.keep_lost_days.unwrap_or(30)
    }

    /// `[git] spare_worktrees`, default 0.
    pub fn spare_worktrees(&self) -> usize {
        self.spare_worktrees.unwrap_or(0)
    }

    /// `[git] submodules`, default true.
    pub fn submodules(&self) -> bool {
        self.submodules.unwrap_or(true)
    }
}

/// Where berth keeps its state. Read from the global file and the environment only: the
/// store has to be chosen before any workspace can be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreSettings {
    /// `sqlite:///path/berth.db` or `postgres://user@host/db`; unset, the filesystem store
    /// under the berth home. A secret: a URL can carry a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret>,
}

/// How berth's agent runs a turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSettings {
    /// Tool rounds one turn may take before it stops; default 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tool_iterations: Option<u32>,
    /// The model's context window in tokens; default: the provider's usual size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

/// How `berth mcp --transport http` serves its clients (its flags win over these).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpSettings {
    /// MCP sessions kept at once; beyond it the least recently used is closed. Default 1000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<NonZeroUsize>,
    /// Seconds a session may go unused before it is closed. Default 1800. Also read as
    /// `session_idle_timeout`, the flag's name.
    #[serde(
        skip_serializing_if = "Option::is_none",
        alias = "session_idle_timeout"
    )]
    pub session_idle_timeout_secs: Option<NonZeroU64>,
}

/// An external MCP server whose tools berth's agent offers the model, as
/// `mcp__<name>__<tool>`: a command on stdio, or a Streamable HTTP `url`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerSettings {
    /// Letters, digits, `-` and `_`; part of every tool name the model sees.
    pub name: String,
    /// The program to start (found on PATH), for a server on stdio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for the command, on top of berth's environment minus its secrets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Secret>,
    /// The endpoint of a Streamable HTTP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every HTTP request (an `Authorization` token, say).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Secret>,
    /// Seconds one tool call may take; default 60.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// The TCP ports a workspace is given a block of when it first needs one, its own alone until
/// it is deleted (`[ports]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PortSettings {
    /// The lowest port given out; default 20000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<u16>,
    /// The highest port given out; default 29999.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<u16>,
    /// Consecutive ports per workspace; default 10.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<u16>,
}

impl PortSettings {
    pub const DEFAULT_FIRST: u16 = 20000;
    pub const DEFAULT_LAST: u16 = 29999;
    pub const DEFAULT_BLOCK: u16 = 10;

    /// The range workspaces are given their block from, defaults filled in.
    pub fn range(&self) -> crate::model::PortRange {
        crate::model::PortRange {
            first: self.first.unwrap_or(Self::DEFAULT_FIRST),
            last: self.last.unwrap_or(Self::DEFAULT_LAST),
            block: self.block.unwrap_or(Self::DEFAULT_BLOCK),
        }
    }

    /// `first` is at least 1 and at most `last`, `block` at least 1, and the range holds at
    /// least one block.
    pub(super) fn check(&self) -> Result<()> {
        let r = self.range();
        let problem = if r.first == 0 {
            "[ports] first must be at least 1 (port 0 is no port)".to_owned()
        } else if r.first > r.last {
            format!(
                "[ports] first ({}) is above [ports] last ({})",
                r.first, r.last
            )
        } else if r.block == 0 {
            "[ports] block must be at least 1".to_owned()
        } else if u32::from(r.last) - u32::from(r.first) + 1 < u32::from(r.block) {
            format!(
                "[ports] first-last ({}-{}) holds {} ports, fewer than one [ports] block ({})",
                r.first,
                r.last,
                u32::from(r.last) - u32::from(r.first) + 1,
                r.block
            )
        } else {
            return Ok(());
        };
        Err(Error::Config(problem))
    }
}

/// `berth run`'s settings (`[run]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    /// Agents of one run working at once; the others wait, queued, for one to end. Default:
    /// no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_agents: Option<NonZeroUsize>,
    /// Tokens one agent of a run may use (read and written, all its turns); past them it is
    /// stopped, recorded as `budget`. Default: no limit. `--max-tokens` overrides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars one agent of a run may spend, by `[prices]`; past them it is stopped,
    /// recorded as `budget`. Default: no limit. `--max-cost` overrides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// The agent a run starts when none is named (`--agents 3` repeats it): `berth`,
    /// `berth:MODEL`, `cmd:COMMAND`, or the name of an `[agents.NAME]` entry or a built-in
    /// one (`claude-code`, `codex`, `gemini`). Default: `berth`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Ask a person about a call the run's `--allow` list does not cover, instead of refusing
    /// it (`--ask`). Default: false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<bool>,
    /// How long such a question waits for an answer before it is refused (`--ask-timeout`).
    /// Default: 1800 (30 minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_timeout_secs: Option<u64>,
    /// Checks (`--check`) of one run running at once, each started when its agent ends.
    /// Default: half the CPUs, at least one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_jobs: Option<NonZeroUsize>,
    /// The longest line an ACP agent may write to berth, in MiB: a longer one fails that
    /// agent. Default: 64. berth holds a line whole while it parses it, so this is what one
    /// agent's message may cost berth's memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_line_mib: Option<u64>,
}

impl RunSettings {
    /// `max_line_mib`'s default.
    pub const DEFAULT_MAX_LINE_MIB: u64 = 64;
    /// The highest `max_line_mib` berth takes: a line is held whole, several times over
    /// while it is parsed, so a higher one would let one agent take gigabytes.
    pub const MAX_LINE_MIB_CEILING: u64 = 1024;

    /// `[run] max_line_mib`, else its default, in MiB.
    pub fn max_line_mib(&self) -> u64 {
        self.max_line_mib.unwrap_or(Self::DEFAULT_MAX_LINE_MIB)
    }

    /// The longest line an ACP agent may write, in bytes (its newline not counted).
    pub fn max_line_bytes(&self) -> u64 {
        self.max_line_mib() << 20
    }

    /// `max_line_mib` is 1 to [`Self::MAX_LINE_MIB_CEILING`].
    pub(super) fn check(&self) -> Result<()> {
        match self.max_line_mib {
            Some(mib) if mib == 0 || mib > Self::MAX_LINE_MIB_CEILING => {
                Err(Error::Config(format!(
                    "[run] max_line_mib must be 1 to {} (MiB), not {mib}",
                    Self::MAX_LINE_MIB_CEILING
                )))
            }
            _ => Ok(()),
        }
    }

    /// `[run] check_jobs`, else half the CPUs (at least one): a check is usually a build and
    /// its tests, which use more than one core each.
    pub fn check_jobs(&self) -> usize {
        self.check_jobs.map(NonZeroUsize::get).unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get() / 2)
                .unwrap_or(1)
                .max(1)
        })
    }
}

/// An ACP agent a run can start by name (`[agents.NAME]`, `--agent NAME`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentEntry {
    /// Its command line, run by `sh -c` in the agent's worktree.
    pub command: String,
    /// Folders and files of its own state it may write, confined (`~/` is the home);
    /// default: what berth knows of its program, else nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// Variables of berth's environment it gets besides the allow list (its provider's key);
    /// default: what berth knows of its program, else every provider's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Where its provider is (`api.example.com`, `https://api.example.com:8443`), reachable
    /// through berth's proxy besides what berth knows of its program.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Whether its provider keys stay in berth, the agent getting a stand-in key and a base
    /// URL on berth's proxy (which puts the key in): default yes for the agents berth knows
    /// (claude-agent-acp, codex, gemini), no for others, which may not read a base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mask_keys: Option<bool>,
}

/// A pool of nodes on one database (`[pool]`): `berth serve --worker` and queued runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolSettings {
    /// How long a worker's hold on a run lasts unrenewed (it renews a third of the way
    /// through): a node that dies loses its runs this long after its last renewal, and
    /// another worker takes them. Default 30.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_secs: Option<u64>,
}

impl PoolSettings {
    pub const DEFAULT_LEASE_SECS: u64 = 30;

    /// The lease, at least a second.
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.lease_secs.unwrap_or(Self::DEFAULT_LEASE_SECS).max(1))
    }
}

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million tokens read (the prompt, the history, tool results).
    pub input: f64,
    /// Per million tokens written (the answer, tool calls).
    pub output: f64,
}

impl Price {
    /// What `usage` cost at this price, in US dollars.
    pub fn cost(&self, usage: crate::model::TokenUsage) -> f64 {
        (usage.input_tokens as f64 * self.input + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// `berth serve`'s settings that belong in the config rather than on its command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServeSettings {
    /// Names of `[[mcp_servers]]` entries a paired device may ask for in `session/new`: the
    /// device's server must have the entry's command and arguments (or URL), and berth then
    /// starts the entry as configured. Any other server a device sends is refused, since a
    /// device's token must not start programs on the server or send it to another host.
    pub device_mcp_servers: Vec<String>,
    /// How long a permission request shown on the web page waits for an answer before it is
    /// answered "no" (and the turn goes on); default 300.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_timeout_secs: Option<u64>,
    /// The address people reach the web page at (`https://berth.example.com`): a
    /// notification links to the run or session there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
}

impl ServeSettings {
    pub const DEFAULT_PERMISSION_TIMEOUT_SECS: u64 = 300;

    /// The web page's wait for a permission answer.
    pub fn permission_timeout(&self) -> std::time::Duration {
        let secs = self
            .permission_timeout_secs
            .unwrap_or(Self::DEFAULT_PERMISSION_TIMEOUT_SECS);
        std::time::Duration::from_secs(secs.max(1))
    }
}
