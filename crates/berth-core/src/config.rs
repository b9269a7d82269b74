//! Layered configuration: global `config.toml` → workspace `config.toml` → environment.
//!
//! Tables merge recursively; scalars and arrays replace. Each file is checked on its own first,
//! so a syntax error, a value of the wrong type or an unknown key is reported against the file
//! (and line) it came from rather than against an anonymous merged blob. Secrets are held in
//! [`Secret`], which never prints or serializes its value.

use std::collections::BTreeMap;
use std::fmt;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;

use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Error, Result, line_of_offset};

/// The raw text of one config file and where it came from.
#[derive(Debug, Clone)]
pub struct ConfigText {
    pub origin: PathBuf,
    pub text: String,
}

/// An API key or token. Debug, Display and Serialize all redact it; only [`Secret::expose`]
/// gives the value, so leaking one takes a deliberate call.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub const REDACTED: &'static str = "<redacted>";

    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(Self::REDACTED)
    }
}

/// The LLM providers berth's agent can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    #[serde(alias = "anthropic")]
    Claude,
    Openai,
    #[serde(alias = "google")]
    Gemini,
}

impl std::str::FromStr for ProviderKind {
    type Err = crate::InvalidInput;

    /// The names config files take, aliases included (`anthropic`, `google`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" | "anthropic" => Ok(ProviderKind::Claude),
            "openai" => Ok(ProviderKind::Openai),
            "gemini" | "google" => Ok(ProviderKind::Gemini),
            _ => Err(crate::InvalidInput::new(
                "provider",
                s,
                "must be claude (or anthropic), openai, or gemini (or google)",
            )),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Claude => "claude",
            ProviderKind::Openai => "openai",
            ProviderKind::Gemini => "gemini",
        }
    }

    /// The model used when no layer names one.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Claude => "claude-sonnet-4-5",
            ProviderKind::Openai => "gpt-4.1",
            ProviderKind::Gemini => "gemini-2.5-flash",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Providers {
    pub claude: ProviderSettings,
    pub openai: ProviderSettings,
    pub gemini: ProviderSettings,
}

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
}

impl GitSettings {
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
    fn check(&self) -> Result<()> {
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

impl Config {
    /// What `usage` of `model` cost, in US dollars, when `[prices]` knows the model.
    pub fn cost(&self, model: &str, usage: crate::model::TokenUsage) -> Option<f64> {
        self.prices.get(model).map(|p| p.cost(usage))
    }

    /// Every price a number of dollars, none negative.
    fn check_prices(&self) -> Result<()> {
        for (model, price) in &self.prices {
            for (what, value) in [("input", price.input), ("output", price.output)] {
                if !value.is_finite() || value < 0.0 {
                    return Err(Error::Config(format!(
                        "[prices.\"{model}\"] {what} must be a price in US dollars per million tokens, 0 or more, not {value}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Whether commands and agent processes berth starts are confined (`[sandbox] mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Confined; refused where the kernel cannot confine.
    #[default]
    On,
    /// Unconfined, as before berth had a sandbox: the user's rights.
    Off,
}

/// What a confined process may reach on the network (`[sandbox] network`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxNetwork {
    /// Commands reach nothing; an agent process reaches its provider and `allow_hosts`, by
    /// name, through berth's proxy.
    #[default]
    Off,
    /// Commands too reach `allow_hosts` through berth's proxy (a build fetching from a
    /// registry).
    Proxy,
    /// Everything the user can reach.
    Full,
}

/// The confinement of every command and agent process berth starts (`[sandbox]`). Paths may
/// start with `~/`. See docs/sandbox.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    pub network: SandboxNetwork,
    /// Hosts reachable through berth's proxy, by name: `host:port`, `*.example.com:443`, a
    /// bare name (port 443) or a URL.
    pub allow_hosts: Vec<String>,
    /// Paths a confined process may write besides its workspace's folder and `/tmp`.
    pub writable: Vec<String>,
    /// Paths hidden from a confined process, added to berth's own list.
    pub deny_read: Vec<String>,
    /// Paths beneath `$HOME` a confined process may read, besides the toolchains' folders
    /// (`$HOME` is otherwise an empty folder to it).
    pub readable: Vec<String>,
    /// Variables of berth's environment passed on to confined processes besides the allow
    /// list (docs/sandbox.md lists it).
    pub env: Vec<String>,
    /// Processes one confined tree may have at once.
    pub max_processes: u64,
    /// The size of a confined tree's private `/tmp`, and of its `/dev/shm`, in MiB each.
    pub tmp_mib: u64,
    /// The memory one confined tree may use, in MiB, where a cgroup can hold it; 0: no
    /// limit of berth's.
    pub memory_mib: u64,
}

impl SandboxSettings {
    /// `max_processes`' default.
    pub const MAX_PROCESSES: u64 = 1024;
    /// `tmp_mib`'s default: 1 GiB.
    pub const TMP_MIB: u64 = 1024;
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::default(),
            network: SandboxNetwork::default(),
            allow_hosts: Vec::new(),
            writable: Vec::new(),
            deny_read: Vec::new(),
            readable: Vec::new(),
            env: Vec::new(),
            max_processes: Self::MAX_PROCESSES,
            tmp_mib: Self::TMP_MIB,
            memory_mib: 0,
        }
    }
}

/// What a notification is about (`[[notify]] events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A permission request waits for a person's answer.
    NeedsInput,
    /// A run ended, checks and all, with every agent done and every check passed.
    Done,
    /// A run ended with an agent failed or stopped, or a check failed.
    Failed,
    /// A one-agent run's agent was stopped at its budget.
    Budget,
    /// A turn an agent was told after its run was over (`run tell`) ended.
    ToldDone,
    /// One agent of several ended (done, failed, stopped or at its budget). Only to entries
    /// that name it.
    AgentDone,
    /// A run's check failed in one agent's worktree. Only to entries that name it: the run's
    /// end says so anyway.
    CheckFailed,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 7] = [
        NotifyEvent::NeedsInput,
        NotifyEvent::Done,
        NotifyEvent::Failed,
        NotifyEvent::Budget,
        NotifyEvent::ToldDone,
        NotifyEvent::AgentDone,
        NotifyEvent::CheckFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::NeedsInput => "needs_input",
            NotifyEvent::Done => "done",
            NotifyEvent::Failed => "failed",
            NotifyEvent::Budget => "budget",
            NotifyEvent::ToldDone => "told_done",
            NotifyEvent::AgentDone => "agent_done",
            NotifyEvent::CheckFailed => "check_failed",
        }
    }

    /// Whether an entry that names no events gets it: one notification per run's end, not
    /// one per agent and check as well.
    pub fn by_default(self) -> bool {
        !matches!(self, NotifyEvent::AgentDone | NotifyEvent::CheckFailed)
    }
}

/// The shape of a `url` notification's body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyFormat {
    /// berth's own JSON object (docs/notify.md).
    #[default]
    Json,
    /// ntfy's: the summary as the body, the title, link and event as headers.
    Ntfy,
    /// A Slack incoming webhook's `{"text": …}`.
    Slack,
}

/// One `[[notify]]` entry: where to tell a person what happened, and what.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifySettings {
    /// POST the notification here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret>,
    /// Run this shell command with the notification's JSON on its standard input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Show it on this machine's desktop (the freedesktop notification service over the
    /// session's D-Bus, through `notify-send`), when there is a session bus.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub desktop: bool,
    pub format: NotifyFormat,
    /// The events this entry sends; empty for every event [`NotifyEvent::by_default`] says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<NotifyEvent>,
    /// Send even when a person watches (a page or an editor shows the session).
    pub always: bool,
}

impl NotifySettings {
    pub fn wants(&self, event: NotifyEvent) -> bool {
        match self.events.is_empty() {
            true => event.by_default(),
            false => self.events.contains(&event),
        }
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

/// The merged configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Which provider the agent calls; default `claude`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderKind>,
    /// A model that overrides the provider's own `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub providers: Providers,
    pub git: GitSettings,
    pub store: StoreSettings,
    pub agent: AgentSettings,
    pub mcp: McpSettings,
    pub ports: PortSettings,
    pub run: RunSettings,
    pub pool: PoolSettings,
    pub sandbox: SandboxSettings,
    pub serve: ServeSettings,
    /// What models cost, by model name (`[prices."claude-sonnet-4-5"]`): berth ships no
    /// prices (they change); a model not in the table has no cost shown.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub prices: std::collections::BTreeMap<String, Price>,
    /// External MCP servers for berth's agent (`[[mcp_servers]]`). An array: a higher layer's
    /// list replaces a lower one's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServerSettings>,
    /// Where to tell people what needs them and what is done (`[[notify]]`). An array: a
    /// higher layer's list replaces a lower one's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<NotifySettings>,
    /// ACP agents a run can start by name (`[agents.NAME]`), besides the built-in ones.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub agents: std::collections::BTreeMap<String, AgentEntry>,
}

impl Config {
    pub fn provider(&self) -> ProviderKind {
        self.provider.unwrap_or(ProviderKind::Claude)
    }

    pub fn provider_settings(&self, kind: ProviderKind) -> &ProviderSettings {
        match kind {
            ProviderKind::Claude => &self.providers.claude,
            ProviderKind::Openai => &self.providers.openai,
            ProviderKind::Gemini => &self.providers.gemini,
        }
    }

    /// The model actually called: top-level `model`, else the provider's `model`, else the
    /// provider's default.
    pub fn model(&self) -> &str {
        let kind = self.provider();
        self.model
            .as_deref()
            .or(self.provider_settings(kind).model.as_deref())
            .unwrap_or(kind.default_model())
    }
}

/// A key that no part of berth reads, and the layer that set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownKey {
    pub origin: String,
    pub key: String,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown key '{}' in {} (ignored)", self.key, self.origin)
    }
}

#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub unknown_keys: Vec<UnknownKey>,
    /// The layers that contributed, lowest first, for `config show`.
    pub layers: Vec<String>,
    /// Where each key that a layer set came from, by its dotted path (`ports.first`,
    /// `providers.claude.api_key`): the file, or `environment (VAR)`. A key not here has its
    /// default.
    pub sources: BTreeMap<String, String>,
}

/// Environment variables that configure the process rather than the config tree.
const PROCESS_VARS: &[&str] = &[
    "BERTH_HOME",
    "BERTH_LOG",
    "BERTH_MCP_TOKEN",
    "BERTH_SERVE_TOKEN",
];

/// `BERTH_PORT` and `BERTH_PORT_<n>`: the ports berth gives a workspace's processes, which
/// may run berth themselves. They configure nothing.
fn is_port_var(name: &str) -> bool {
    name == "BERTH_PORT"
        || name
            .strip_prefix("BERTH_PORT_")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Layers the config. `env` is passed in (rather than read here) so callers and tests decide
/// what the environment is.
pub fn layer(
    global: Option<&ConfigText>,
    workspace: Option<&ConfigText>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<LoadedConfig> {
    let mut merged = toml::Table::new();
    let mut unknown_keys = Vec::new();
    let mut layers = Vec::new();
    let mut sources = BTreeMap::new();
    for file in [global, workspace].into_iter().flatten() {
        let table = parse_file(file, &mut unknown_keys)?;
        let origin = file.origin.display().to_string();
        record_sources(&table, "", &origin, &mut sources);
        layers.push(origin);
        merge(&mut merged, table);
    }
    let (env_table, env_vars) = env_layer(env)?;
    if !env_table.is_empty() {
        for (name, path) in &env_vars {
            sources.insert(path.clone(), format!("environment ({name})"));
        }
        let env_names: Vec<&str> = env_vars.iter().map(|(name, _)| name.as_str()).collect();
        let origin = format!("environment ({})", env_names.join(", "));
        check_value(
            &origin,
            toml::Value::Table(env_table.clone()),
            &mut unknown_keys,
        )?;
        layers.push(origin);
        merge(&mut merged, env_table);
    }
    let config: Config = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| Error::Config(e.message().to_owned()))?;
    config.ports.check()?;
    config.check_prices()?;
    Ok(LoadedConfig {
        config,
        unknown_keys,
        layers,
        sources,
    })
}

/// Records `origin` for every value `table` sets, by dotted path; a table's keys one by one
/// (tables merge), anything else (an array too: arrays replace) as one value.
fn record_sources(
    table: &toml::Table,
    prefix: &str,
    origin: &str,
    sources: &mut BTreeMap<String, String>,
) {
    for (key, value) in table {
        let path = match prefix {
            "" => key.clone(),
            p => format!("{p}.{key}"),
        };
        match value {
            toml::Value::Table(t) => record_sources(t, &path, origin, sources),
            _ => {
                sources.insert(path, origin.to_owned());
            }
        }
    }
}

/// Parses one file: syntax errors are `Corrupt` with a line; type errors name file and line;
/// unknown keys are collected.
fn parse_file(file: &ConfigText, unknown: &mut Vec<UnknownKey>) -> Result<toml::Table> {
    let corrupt = |e: toml::de::Error| Error::Corrupt {
        file: file.origin.clone(),
        line: e.span().map(|s| line_of_offset(&file.text, s.start)),
        // The message only: toml's Display quotes the offending line, which may hold a secret.
        reason: e.message().trim().to_owned(),
    };
    let table: toml::Table = toml::from_str(&file.text).map_err(corrupt)?;
    let origin = file.origin.display().to_string();
    let de = toml::Deserializer::parse(&file.text).map_err(corrupt)?;
    let mut found = Vec::new();
    serde_ignored::deserialize(de, |path| found.push(path.to_string()))
        .map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| line_of_offset(&file.text, s.start));
            let at = line.map(|l| format!(" line {l}")).unwrap_or_default();
            Error::Config(format!("{origin}{at}: {}", e.message().trim()))
        })
        .map(|_: Config| ())?;
    unknown.extend(found.into_iter().map(|key| UnknownKey {
        origin: origin.clone(),
        key,
    }));
    Ok(table)
}

fn check_value(origin: &str, value: toml::Value, unknown: &mut Vec<UnknownKey>) -> Result<()> {
    let mut found = Vec::new();
    let _: Config = serde_ignored::deserialize(value, |path| found.push(path.to_string()))
        .map_err(|e: toml::de::Error| Error::Config(format!("{origin}: {}", e.message())))?;
    unknown.extend(found.into_iter().map(|key| UnknownKey {
        origin: origin.to_owned(),
        key,
    }));
    Ok(())
}

/// Recursive merge: tables merge key by key, everything else in `top` replaces.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// The environment layer. Provider keys use their conventional names; `BERTH_A__B=v` sets
/// `a.b = v` (`__` separates levels, names are lowercased). Values that read as an integer or
/// a boolean become one; anything else is a string.
/// Returns the table and, for each variable used, its name and the dotted path it set.
fn env_layer(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(toml::Table, Vec<(String, String)>)> {
    let mut vars: Vec<(String, String)> = env.into_iter().collect();
    vars.sort();
    let mut table = toml::Table::new();
    let mut names = Vec::new();
    let has_gemini = vars.iter().any(|(k, _)| k == "GEMINI_API_KEY");
    for (name, value) in vars {
        let path: Vec<String> = match name.as_str() {
            "ANTHROPIC_API_KEY" => vec!["providers".into(), "claude".into(), "api_key".into()],
            "OPENAI_API_KEY" => vec!["providers".into(), "openai".into(), "api_key".into()],
            "GEMINI_API_KEY" => vec!["providers".into(), "gemini".into(), "api_key".into()],
            "GOOGLE_API_KEY" if !has_gemini => {
                vec!["providers".into(), "gemini".into(), "api_key".into()]
            }
            // The store's conventional name; `BERTH_STORE__URL` says the same.
            "BERTH_STORE_URL" => vec!["store".into(), "url".into()],
            n if n.starts_with("BERTH_") && !PROCESS_VARS.contains(&n) && !is_port_var(n) => {
                let rest = &n["BERTH_".len()..];
                if rest.is_empty() || rest.split("__").any(str::is_empty) {
                    return Err(Error::Config(format!(
                        "environment variable {n} does not name a config key (use BERTH_KEY or BERTH_TABLE__KEY)"
                    )));
                }
                rest.split("__").map(str::to_ascii_lowercase).collect()
            }
            _ => continue,
        };
        let is_secret = path
            .last()
            .is_some_and(|k| k == "api_key" || k.ends_with("token"));
        let scalar = match value.as_str() {
            _ if is_secret => toml::Value::String(value),
            "true" => toml::Value::Boolean(true),
            "false" => toml::Value::Boolean(false),
            v => v
                .parse::<i64>()
                .map(toml::Value::Integer)
                .unwrap_or(toml::Value::String(value)),
        };
        insert_path(&mut table, &path, scalar).map_err(|conflict| {
            Error::Config(format!(
                "environment variable {name} conflicts with {conflict}"
            ))
        })?;
        names.push((name, path.join(".")));
    }
    Ok((table, names))
}

fn insert_path(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
) -> std::result::Result<(), String> {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut cur = table;
    for key in parents {
        let entry = cur
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(format!("a value already set at '{key}'")),
        };
    }
    cur.insert(last.clone(), value);
    Ok(())
}

/// The file `berth config init` writes: every key, commented, so the file documents itself.
pub const TEMPLATE: &str = r#"# berth configuration. Layers: this file -> workspaces/<id>/config.toml -> environment.
# Tables merge key by key; a scalar or an array in a higher layer replaces the lower one.
# Environment: ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY (or GOOGLE_API_KEY), and
# BERTH_<KEY> / BERTH_<TABLE>__<KEY> for any key below (e.g. BERTH_PROVIDER=gemini).

# Which provider berth's agent calls: "claude", "openai" or "gemini".
# provider = "claude"

# Overrides the provider's own model for every provider.
# model = "claude-sonnet-4-5"

[providers.claude]
# api_key = "..."            # prefer ANTHROPIC_API_KEY in the environment
# model = "claude-sonnet-4-5"
# base_url = "https://api.anthropic.com"
# max_tokens = 8192

[providers.openai]
# model = "gpt-4.1"

[providers.gemini]
# model = "gemini-2.5-flash"

[agent]
# max_tool_iterations = 50     # tool rounds one turn may take
# context_tokens = 200000      # the model's context window; default: the provider's usual size

[mcp]
# max_sessions = 1000              # HTTP sessions kept at once; the least recently used goes first
# session_idle_timeout_secs = 1800 # an HTTP session unused this long is closed

# External MCP servers whose tools berth's agent may call, as mcp__<name>__<tool>.
# [[mcp_servers]]
# name = "berth"                 # letters, digits, - and _
# command = "berth"              # a server on stdio...
# args = ["mcp"]
# env = { SOME_TOKEN = "..." }
# timeout_secs = 60              # one tool call's limit
# [[mcp_servers]]
# name = "docs"
# url = "http://127.0.0.1:8080/mcp"   # ...or a Streamable HTTP server
# headers = { Authorization = "Bearer ..." }

# Where to tell you when an agent needs you or is done (docs/notify.md). Any number.
# [[notify]]
# url = "https://ntfy.sh/my-secret-topic"   # a POST of each event...
# format = "ntfy"                            # json (default), ntfy or slack
# events = ["needs_input", "done", "failed", "check_failed"]   # default: all
# always = false                             # true: even while a page or an editor shows it
# [[notify]]
# command = "my-notifier"                    # ...or a command, the event's JSON on its stdin
# [[notify]]
# desktop = true                             # ...or this machine's desktop (notify-send)

[git]
# worktree_dir = "/path/for/worktrees"   # default: workspaces/<id>/worktree
# copy = [".env"]                        # untracked files copied into new worktrees
# setup = ["npm ci"]                     # commands run in new worktrees
# setup_timeout_secs = 600
# spare_worktrees = 1                    # checkouts kept ready: create skips the checkout
# submodules = false                     # default true: submodules checked out in new worktrees

[ports]
# first = 20000                # a workspace is given the lowest free block of ports in
# last = 29999                 # first..last when it first runs something, its own alone
# block = 10                   # until it is deleted, as BERTH_PORT, BERTH_PORT_1, ...

# What models cost, in US dollars per million tokens, for the costs `session show` and
# `berth run` show; berth ships no prices (they change), a model not listed has no cost.
# [prices."claude-sonnet-4-5"]
# input = 3.0
# output = 15.0

[run]
# max_agents = 4               # agents of one `berth run` working at once; the rest queued

[pool]
# lease_secs = 30              # a worker's hold on a run; a dead node's runs move on after it

[sandbox]
# mode = "on"                  # "off": commands and agent processes get all of your rights
# network = "off"              # commands reach nothing, agents their provider; "proxy": commands too reach allow_hosts; "full": all
# allow_hosts = ["index.crates.io"]  # reachable by name through berth's proxy
# writable = ["~/.cache/sccache"]   # besides the workspace's folder and a private /tmp
# deny_read = ["~/private"]         # hidden, besides ~/.ssh, ~/.aws, berth's home, ...

[serve]
# device_mcp_servers = ["docs"]     # [[mcp_servers]] a paired device may ask for by command
# permission_timeout_secs = 300     # a permission on the web page unanswered this long is a no
# public_url = "https://berth.example.com"   # where notifications link to

[store]
# url = "sqlite:///path/berth.db"   # or "postgres://user:password@host:5432/db"; default: files in the home
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn text(origin: &str, text: &str) -> ConfigText {
        ConfigText {
            origin: PathBuf::from(origin),
            text: text.to_owned(),
        }
    }

    #[test]
    fn workspace_overrides_global_and_tables_merge() {
        let g = text(
            "g.toml",
            "provider = \"claude\"\n[providers.gemini]\nmodel = \"a\"\nbase_url = \"u\"\n",
        );
        let w = text(
            "w.toml",
            "provider = \"gemini\"\n[providers.gemini]\nmodel = \"b\"\n",
        );
        let loaded = layer(Some(&g), Some(&w), []).unwrap();
        assert_eq!(loaded.config.provider(), ProviderKind::Gemini);
        assert_eq!(loaded.config.model(), "b");
        assert_eq!(
            loaded.config.providers.gemini.base_url.as_deref(),
            Some("u")
        );
        assert!(loaded.unknown_keys.is_empty());
    }

    #[test]
    fn arrays_replace_rather_than_append() {
        let g = text("g.toml", "[git]\ncopy = [\".env\", \"a\"]\n");
        let w = text("w.toml", "[git]\ncopy = [\"b\"]\n");
        assert_eq!(
            layer(Some(&g), Some(&w), []).unwrap().config.git.copy,
            vec!["b"]
        );
    }

    #[test]
    fn environment_is_the_top_layer() {
        let w = text("w.toml", "provider = \"gemini\"\n");
        let env = vec![
            ("BERTH_PROVIDER".to_owned(), "openai".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "sk-123".to_owned()),
            ("GOOGLE_API_KEY".to_owned(), "g-1".to_owned()),
            (
                "BERTH_PROVIDERS__CLAUDE__MAX_TOKENS".to_owned(),
                "100".to_owned(),
            ),
            ("BERTH_HOME".to_owned(), "/x".to_owned()),
            ("PATH".to_owned(), "/bin".to_owned()),
        ];
        let c = layer(None, Some(&w), env).unwrap().config;
        assert_eq!(c.provider(), ProviderKind::Openai);
        assert_eq!(
            c.providers.openai.api_key.as_ref().unwrap().expose(),
            "sk-123"
        );
        assert_eq!(c.providers.gemini.api_key.as_ref().unwrap().expose(), "g-1");
        assert_eq!(c.providers.claude.max_tokens, Some(100));
    }

    #[test]
    fn gemini_key_wins_over_google_key() {
        let env = vec![
            ("GOOGLE_API_KEY".to_owned(), "google".to_owned()),
            ("GEMINI_API_KEY".to_owned(), "gemini".to_owned()),
        ];
        let c = layer(None, None, env).unwrap().config;
        assert_eq!(c.providers.gemini.api_key.unwrap().expose(), "gemini");
    }

    #[test]
    fn unknown_keys_are_reported_with_their_origin() {
        let g = text(
            "g.toml",
            "provder = \"x\"\n[providers.claude]\nmodle = \"m\"\n",
        );
        let env = vec![("BERTH_COLOUR".to_owned(), "red".to_owned())];
        let loaded = layer(Some(&g), None, env).unwrap();
        let keys: Vec<_> = loaded.unknown_keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, vec!["provder", "providers.claude.modle", "colour"]);
        assert_eq!(loaded.unknown_keys[0].origin, "g.toml");
        assert!(loaded.unknown_keys[2].origin.contains("BERTH_COLOUR"));
    }

    #[test]
    fn syntax_error_is_corrupt_with_line_and_no_secret() {
        let g = text(
            "g.toml",
            "[providers.claude]\napi_key = \"sk-secret\nmodel = 1\n",
        );
        let err = layer(Some(&g), None, []).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Corrupt { line: Some(2), .. }), "{msg}");
        assert!(msg.contains("g.toml"), "{msg}");
        assert!(!msg.contains("sk-secret"), "{msg}");
    }

    #[test]
    fn type_error_names_file_and_line() {
        let g = text("g.toml", "\n\nprovider = \"nope\"\n");
        let msg = layer(Some(&g), None, []).unwrap_err().to_string();
        assert!(msg.contains("g.toml line 3"), "{msg}");
    }

    #[test]
    fn secrets_never_print() {
        let env = vec![("ANTHROPIC_API_KEY".to_owned(), "sk-ant-xyz".to_owned())];
        let c = layer(None, None, env).unwrap().config;
        assert!(!format!("{c:?}").contains("sk-ant-xyz"));
        assert!(!toml::to_string(&c).unwrap().contains("sk-ant-xyz"));
        assert!(!serde_json::to_string(&c).unwrap().contains("sk-ant-xyz"));
    }

    #[test]
    fn the_store_url_has_its_own_variable() {
        let env = [(
            "BERTH_STORE_URL".to_owned(),
            "postgres://u:pw@h/db".to_owned(),
        )];
        let loaded = layer(None, None, env).unwrap();
        assert!(loaded.unknown_keys.is_empty(), "{:?}", loaded.unknown_keys);
        let url = loaded.config.store.url.unwrap();
        assert_eq!(url.expose(), "postgres://u:pw@h/db");
    }

    #[test]
    fn ports_default_and_are_checked() {
        let c = layer(None, None, []).unwrap().config;
        assert_eq!(
            c.ports.range(),
            crate::PortRange {
                first: 20000,
                last: 29999,
                block: 10
            }
        );
        let env = [("BERTH_PORTS__BLOCK".to_owned(), "4".to_owned())];
        let w = text("w.toml", "[ports]\nfirst = 30000\nlast = 30003\n");
        let c = layer(None, Some(&w), env).unwrap().config;
        assert_eq!(c.ports.range().block, 4);
        for (bad, says) in [
            (
                "[ports]\nfirst = 30000\nlast = 29999\n",
                "above [ports] last",
            ),
            ("[ports]\nblock = 0\n", "block must be at least 1"),
            (
                "[prices.m]\ninput = -1.0\noutput = 2.0\n",
                "0 or more, not -1",
            ),
            ("[ports]\nfirst = 0\n", "first must be at least 1"),
            (
                "[ports]\nfirst = 100\nlast = 104\nblock = 6\n",
                "fewer than one",
            ),
        ] {
            let err = layer(Some(&text("g.toml", bad)), None, []).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Invalid, "{err}");
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
        // Not a port number: a type error naming the file and line.
        let err = layer(Some(&text("g.toml", "[ports]\nlast = 70000\n")), None, []).unwrap_err();
        assert!(err.to_string().contains("g.toml line 2"), "{err}");
    }

    #[test]
    fn the_ports_berth_hands_out_are_not_config() {
        let env = [
            ("BERTH_PORT".to_owned(), "20000".to_owned()),
            ("BERTH_PORT_1".to_owned(), "20001".to_owned()),
            ("BERTH_PORT_X".to_owned(), "1".to_owned()),
        ];
        let loaded = layer(None, None, env).unwrap();
        let keys: Vec<_> = loaded.unknown_keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, ["port_x"]);
    }

    #[test]
    fn template_is_valid_and_complete() {
        let t = text("t.toml", TEMPLATE);
        let loaded = layer(Some(&t), None, []).unwrap();
        assert_eq!(loaded.config, Config::default());
        // Uncommenting every key must give a config with no unknown keys.
        let uncommented: String = TEMPLATE
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if rest.contains(" = ") || rest.starts_with('[') => {
                    rest.split("  ").next().unwrap().to_owned()
                }
                _ => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let loaded = layer(Some(&text("u.toml", &uncommented)), None, []).unwrap();
        assert!(loaded.unknown_keys.is_empty(), "{:?}", loaded.unknown_keys);
        assert_eq!(loaded.config.git.setup, vec!["npm ci"]);
        assert_eq!(loaded.config.ports.block, Some(10));
        assert_eq!(loaded.config.run.max_agents.map(|n| n.get()), Some(4));
        assert_eq!(loaded.config.sandbox.mode, SandboxMode::On);
        assert_eq!(loaded.config.sandbox.deny_read, ["~/private"]);
        let usage = crate::model::TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        };
        assert_eq!(loaded.config.cost("claude-sonnet-4-5", usage), Some(4.5));
        assert_eq!(loaded.config.cost("gpt-4.1", usage), None);
        let servers = &loaded.config.mcp_servers;
        assert_eq!(servers.len(), 2, "{servers:?}");
        assert_eq!(servers[0].args, ["mcp"]);
        assert_eq!(servers[1].url.as_deref(), Some("http://127.0.0.1:8080/mcp"));
    }
}
