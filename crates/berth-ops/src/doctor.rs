//! `berth doctor`: what works and what does not in a berth home, each finding with what to do.
//!
//! The checks run in order, each on what the ones before found: git; the home (readable and
//! writable); the global config (it parses); the store (reachable, its URL shown without its
//! password, its schema version); the listing index (the filesystem store's); spare checkouts
//! and their disk use; each configured provider (its key present, never shown; its base URL);
//! what this kernel can enforce of `[sandbox]` (an error when it cannot, since every command
//! is then refused); and every workspace (its worktree, repository or folder still there). What needs something
//! that failed (the store, the config) is reported as not run, saying why. Nothing is changed,
//! but for a probe file written to the home and removed, and a home and store opened as any
//! command opens them (a missing home is made; a database schema older than this berth's is
//! brought up to date, as always).
//!
//! The external MCP servers (`[[mcp_servers]]`) are berth-agent's to start; its `mcp::doctor`
//! adds their findings to the [`Report`], from [`Report::mcp_servers`].
//!
//! The advice speaks the CLI's words: `berth doctor` is a command of the CLI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_core::config::{Config, McpServerSettings, ProviderKind};
use berth_git::{GIT_MINIMUM, GIT_REBASE_MINIMUM, Health};
use berth_store_fs::FsStore;
use berth_store_sql::{SCHEMA_VERSION, SqlStore};
use serde::Serialize;

use crate::{Ops, StoreChoice, config, disk, git_workspace};

/// What the kernel offers the sandbox, and what `berth doctor --fix` can do about it.
pub use berth_sandbox::{AppArmorFix, support as sandbox_support};

/// How long the store may take to answer before it counts as unreachable.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(15);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Works, but something is worth knowing or doing.
    Warn,
    /// Broken: something berth needs does not work.
    Error,
    /// Not run: what it needs failed (the finding says which).
    NotRun,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Error => "error",
            Status::NotRun => "not run",
        }
    }
}

/// One finding: which check, how it came out, what was found, and what to do about it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    pub message: String,
    /// What to do, when there is something to do.
    pub fix: Option<String>,
}

impl Finding {
    pub fn ok(check: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding {
            check: check.into(),
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    pub fn warn(
        check: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            check: check.into(),
            status: Status::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn error(
        check: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            check: check.into(),
            status: Status::Error,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn not_run(check: impl Into<String>, because: impl Into<String>) -> Finding {
        Finding {
            check: check.into(),
            status: Status::NotRun,
            message: because.into(),
            fix: None,
        }
    }
}

/// Every finding, in the order the checks ran.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub home: PathBuf,
    pub findings: Vec<Finding>,
    /// The config's `[[mcp_servers]]`, for berth-agent's check; `None` when the config could
    /// not be read (that check is then not run either).
    #[serde(skip)]
    pub mcp_servers: Option<Vec<McpServerSettings>>,
}

impl Report {
    /// How many findings are errors: a home with any is broken.
    pub fn errors(&self) -> usize {
        self.count(Status::Error)
    }

    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }
}

/// Runs every check on the home at `home`, with the environment layer `env`.
pub async fn diagnose(home: &Path, env: &[(String, String)]) -> Report {
    let home = std::path::absolute(home).unwrap_or_else(|_| home.to_owned());
    let mut findings = vec![git()];
    findings.push(home_access(&home));

    let config = config_of(&home, env);
    let config = match config {
        Ok(config) => {
            findings.push(Finding::ok(
                "config",
                match config::global_path(&home) {
                    p if p.is_file() => format!("{} and the environment", p.display()),
                    _ => "no config file; defaults and the environment".to_owned(),
                },
            ));
            config
        }
        Err(e) => {
            findings.push(Finding::error(
                "config",
                e,
                format!(
                    "fix {} (the message names the line), or the BERTH_* variable it names",
                    config::global_path(&home).display()
                ),
            ));
            let because = "the config cannot be read";
            for check in [
                "store",
                "index",
                "spares",
                "providers",
                "sandbox",
                "workspaces",
            ] {
                findings.push(Finding::not_run(check, because));
            }
            return Report {
                home,
                findings,
                mcp_servers: None,
            };
        }
    };

    let ops = store(&home, env, &config, &mut findings).await;
    match &ops {
        Some(ops) => {
            if let StoreChoice::Files = ops.store_choice() {
                findings.push(index(&home));
            }
            findings.push(spares(ops, &config).await);
        }
        None => {
            let because = "the store cannot be opened";
            findings.push(Finding::not_run("index", because));
            findings.push(Finding::not_run("spares", because));
        }
    }
    findings.extend(providers(&config, &home));
    findings.push(sandbox(&config, &home));
    findings.extend(notifications(&config, &home));
    match &ops {
        Some(ops) => findings.extend(workspaces(ops).await),
        None => findings.push(Finding::not_run("workspaces", "the store cannot be opened")),
    }
    Report {
        home,
        findings,
        mcp_servers: Some(config.mcp_servers),
    }
}

/// Each `[[notify]]` entry, with how its last delivery went (`notify.log` in the home).
fn notifications(config: &Config, home: &Path) -> Vec<Finding> {
    let kept = crate::notices::deliveries(&home.join(crate::notices::LOG));
    config
        .notify
        .iter()
        .map(|entry| {
            let sink = crate::notices::sink_label(entry);
            let check = format!("notify {sink}");
            if entry.url.is_none() && entry.command.is_none() && !entry.desktop {
                return Finding::warn(
                    check,
                    "a [[notify]] entry with no url, command or desktop sends nothing",
                    "give it a url, a command or desktop = true, or remove it",
                );
            }
            match kept.iter().rev().find(|d| d.sink == sink) {
                None => Finding::ok(check, "nothing sent yet"),
                Some(d) => match &d.error {
                    None => Finding::ok(
                        check,
                        format!(
                            "the last ({}) was delivered at {}",
                            d.event,
                            d.time.format("%Y-%m-%d %H:%M UTC")
                        ),
                    ),
                    Some(why) => Finding::warn(
                        check,
                        format!(
                            "the last ({}) failed at {}: {why}",
                            d.event,
                            d.time.format("%Y-%m-%d %H:%M UTC")
                        ),
                        "check that the URL answers (or the command runs) from this machine",
                    ),
                },
            }
        })
        .collect()
}

/// What this kernel can enforce of `[sandbox]`, and whether it is on.
fn sandbox(config: &Config, home: &Path) -> Finding {
    use berth_core::config::{SandboxMode, SandboxNetwork};
    let off = "set [sandbox] mode = \"off\" to run commands and agents with all of your rights instead (see docs/sandbox.md)";
    let policy = match berth_sandbox::Policy::from_settings(
        &config.sandbox,
        crate::user_home().as_deref(),
        home,
    ) {
        Ok(policy) => policy,
        Err(e) => return Finding::error("sandbox", e.to_string(), "fix [sandbox] in the config"),
    };
    let support = berth_sandbox::support();
    if config.sandbox.mode == SandboxMode::Off {
        return Finding::warn(
            "sandbox",
            format!(
                "off: commands and agent processes run with all of your rights (this kernel has {})",
                support.summary()
            ),
            "set [sandbox] mode = \"on\" (the default) to confine them",
        );
    }
    if support.missing().is_some() && policy.falls_back() {
        let fix = match support.userns_fix() {
            Some(fix) => format!("for the full sandbox: {fix}"),
            None => "for the full sandbox, allow user namespaces to berth".to_owned(),
        };
        return Finding::warn("sandbox", policy.level(), fix);
    }
    if let Some(missing) = support.missing() {
        let fallback = if support.namespaces.is_err() && support.landlock_abi > 0 {
            "; or set [sandbox] fallback = \"landlock\" to confine commands by Landlock and seccomp alone (agents stay refused)"
        } else {
            ""
        };
        let fix = match support.userns_fix() {
            Some(fix) => format!("{fix}{fallback}; or {off}"),
            None => format!(
                "run berth on Linux 5.13 or newer with Landlock and user namespaces{fallback}; or {off}"
            ),
        };
        return Finding::error(
            "sandbox",
            format!("{missing}: every command and agent process is refused"),
            fix,
        );
    }
    let network = match config.sandbox.network {
        SandboxNetwork::Off => format!(
            "commands have no network; agent processes reach their provider{} by name, through berth's proxy (HTTPS_PROXY inside, port {})",
            allowed(&config.sandbox.allow_hosts),
            berth_sandbox::PROXY_PORT
        ),
        SandboxNetwork::Proxy => format!(
            "commands and agent processes reach{} by name, through berth's proxy (HTTPS_PROXY inside, port {})",
            allowed(&config.sandbox.allow_hosts),
            berth_sandbox::PROXY_PORT
        ),
        SandboxNetwork::Full => "the network is open (network = \"full\")".to_owned(),
    };
    let limits = berth_sandbox::limits_enforced();
    let said = format!(
        "on, enforced by {}; {network}; forwards: {}; limits: {limits}",
        support.summary(),
        crate::sandbox::network_forwards_said(config)
    );
    match limits.memory_missing() {
        // An agent's tree could take all the machine's memory: said, not refused.
        Some(_) => Finding::warn(
            "sandbox",
            said,
            "run berth as root where it can make a cgroup with the memory controller (cgroup v2, or v1's memory hierarchy on Linux 6.14 or newer), or bound its memory from outside (systemd-run -p MemoryMax=…)",
        ),
        None => Finding::ok("sandbox", said),
    }
}

/// `allow_hosts` as doctor shows it, after what it adds to.
fn allowed(hosts: &[String]) -> String {
    match hosts {
        [] => String::new(),
        hosts => format!(" and {}", hosts.join(", ")),
    }
}

fn git() -> Finding {
    let needs = format!(
        "berth needs {GIT_MINIMUM} or newer, {GIT_REBASE_MINIMUM} for `workspace merge --rebase`"
    );
    match berth_git::version() {
        Err(e) => Finding::error(
            "git",
            format!("{e}"),
            format!("install git and put it on PATH; {needs}"),
        ),
        Ok(v) if v < GIT_MINIMUM => Finding::error(
            "git",
            format!("git {v} is too old: merging a workspace needs `git merge-tree --write-tree`"),
            format!("install a newer git; {needs}"),
        ),
        Ok(v) if v < GIT_REBASE_MINIMUM => Finding::warn(
            "git",
            format!("git {v}: everything but `workspace merge --rebase` (`git replay`) works"),
            format!("install git {GIT_REBASE_MINIMUM} or newer to rebase workspaces"),
        ),
        Ok(v) => Finding::ok("git", format!("git {v}; {needs}")),
    }
}

/// The home can be listed, and a file written in it and removed.
fn home_access(home: &Path) -> Finding {
    let fix = format!(
        "berth reads and writes {}: give this user both (or pass --home / set BERTH_HOME to another folder)",
        home.display()
    );
    match std::fs::metadata(home) {
        // Made as any command makes it, then checked like any other.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Err(e) = std::fs::create_dir_all(home) {
                return Finding::error(
                    "home",
                    format!("{} does not exist and cannot be made: {e}", home.display()),
                    fix,
                );
            }
        }
        Err(e) => return Finding::error("home", format!("{}: {e}", home.display()), fix),
        Ok(m) if !m.is_dir() => {
            return Finding::error(
                "home",
                format!("{} is not a folder", home.display()),
                "pass --home / set BERTH_HOME to a folder",
            );
        }
        Ok(_) => {}
    }
    if let Err(e) = std::fs::read_dir(home) {
        return Finding::error("home", format!("cannot read {}: {e}", home.display()), fix);
    }
    let probe = home.join(format!(".berth-doctor-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match written {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Finding::ok(
                "home",
                format!("{} (readable and writable)", home.display()),
            )
        }
        Err(e) => Finding::error(
            "home",
            format!("cannot write in {}: {e}", home.display()),
            fix,
        ),
    }
}

fn config_of(home: &Path, env: &[(String, String)]) -> Result<Config, String> {
    let global = config::global_text(home).map_err(|e| e.to_string())?;
    berth_core::config::layer(global.as_ref(), None, env.iter().cloned())
        .map(|loaded| loaded.config)
        .map_err(|e| e.to_string())
}

/// The store: reachable (a database's schema read first, without changing it), then opened as
/// every command opens it.
async fn store(
    home: &Path,
    env: &[(String, String)],
    config: &Config,
    findings: &mut Vec<Finding>,
) -> Option<Ops> {
    let url = config.store.url.as_ref().map(|u| u.expose().to_owned());
    let choice = match StoreChoice::of(home, url.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            findings.push(Finding::error(
                "store",
                e.to_string(),
                "fix [store] url, or remove it to keep the records in the home's files",
            ));
            return None;
        }
    };
    let shown = choice.describe(home);
    let mut message = shown.clone();
    if let StoreChoice::Database { url } = &choice {
        message = database_schema(url.expose().to_owned(), &shown, home, findings).await?;
    }
    let home2 = home.to_owned();
    let env = env.to_vec();
    let opened = tokio::time::timeout(
        STORE_TIMEOUT,
        tokio::task::spawn_blocking(move || crate::open(&home2, &env)),
    )
    .await;
    match opened {
        Ok(Ok(Ok(ops))) => {
            findings.push(Finding::ok("store", message));
            Some(ops)
        }
        Ok(Ok(Err(e))) => {
            findings.push(Finding::error(
                "store",
                format!("cannot open {shown}: {e}"),
                "the message says what is wrong with it",
            ));
            None
        }
        Ok(Err(e)) => {
            findings.push(Finding::error(
                "store",
                format!("cannot open {shown}: {e}"),
                "run berth doctor again",
            ));
            None
        }
        Err(_) => {
            findings.push(Finding::error(
                "store",
                format!("{shown} did not open within {} s", STORE_TIMEOUT.as_secs()),
                "check that the store is reachable, and that no other process holds it",
            ));
            None
        }
    }
}

/// The schema of the database at `url` (shown as `shown`), read without changing it: what
/// doctor says of it, or none when it cannot be read (the finding says why).
async fn database_schema(
    url: String,
    shown: &str,
    home: &Path,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let read = tokio::time::timeout(
        STORE_TIMEOUT,
        tokio::task::spawn_blocking(move || SqlStore::schema_version(&url)),
    )
    .await;
    let fix = format!(
        "check that the database at {shown} is up and reachable from here, and that [store] url in {} (or BERTH_STORE_URL) names it",
        config::global_path(home).display()
    );
    let version = match read {
        Err(_) => {
            findings.push(Finding::error(
                "store",
                format!(
                    "{shown} did not answer within {} s",
                    STORE_TIMEOUT.as_secs()
                ),
                fix,
            ));
            return None;
        }
        Ok(Err(e)) => {
            findings.push(Finding::error("store", e.to_string(), fix));
            return None;
        }
        Ok(Ok(Err(e))) if matches!(e, berth_core::Error::Refused(_)) => {
            findings.push(Finding::error(
                "store",
                e.to_string(),
                "install the berth that wrote it, or a newer one",
            ));
            return None;
        }
        Ok(Ok(Err(e))) => {
            findings.push(Finding::error("store", e.to_string(), fix));
            return None;
        }
        Ok(Ok(Ok(v))) => v,
    };
    Some(match version {
        None => {
            format!("{shown}: berth has not used it yet (its tables are made on first use)")
        }
        Some(v) if v < SCHEMA_VERSION => format!(
            "{shown}: schema version {v}, brought up to this berth's {SCHEMA_VERSION} on opening"
        ),
        Some(v) => format!("{shown}: schema version {v}"),
    })
}

/// The filesystem store's listing index: trusted as it is, or rebuilt at the next listing.
fn index(home: &Path) -> Finding {
    let problem = FsStore::open(home).and_then(|store| store.index_problem());
    match problem {
        Ok(None) => Finding::ok("index", "workspaces.index is sound"),
        Ok(Some(reason)) if reason.contains("does not exist") => Finding::ok(
            "index",
            "workspaces.index is not made yet (the first listing makes it)",
        ),
        Ok(Some(reason)) => Finding::warn(
            "index",
            format!("workspaces.index cannot be trusted: {reason}"),
            "nothing to do: the next listing (`berth workspace list`) rebuilds it from the records",
        ),
        Err(e) => Finding::error(
            "index",
            e.to_string(),
            format!(
                "the message names the file; removing {} makes berth rebuild it",
                home.join("workspaces.index").display()
            ),
        ),
    }
}

/// Spare checkouts: how many, and the disk they take.
async fn spares(ops: &Ops, config: &Config) -> Finding {
    let base = match git_workspace::spare_base(ops.manager(), &config.git) {
        Ok(b) => b,
        Err(e) => {
            return Finding::error(
                "spares",
                e.to_string(),
                "fix [git] worktree_dir in the config",
            );
        }
    };
    let counted = crate::blocking(move || {
        let mut pools = 0;
        let mut ready = 0;
        let pools_dir = match std::fs::read_dir(&base) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((base, 0, 0, 0)),
            Err(e) => {
                return Err(
                    berth_core::Error::io(format!("cannot list {}", base.display()), e).into(),
                );
            }
        };
        for pool in pools_dir.flatten() {
            if !pool.path().is_dir() {
                continue;
            }
            pools += 1;
            if let Ok(entries) = std::fs::read_dir(pool.path()) {
                ready += entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("ready-"))
                    .count();
            }
        }
        let bytes = disk::usage(&base)
            .map_err(|e| berth_core::Error::io(format!("cannot measure {}", base.display()), e))?;
        Ok((base, pools, ready, bytes))
    })
    .await;
    match counted {
        Ok((base, 0, _, _)) => Finding::ok("spares", format!("none ({})", base.display())),
        Ok((base, pools, ready, bytes)) => {
            let message = format!(
                "{ready} spare checkout(s) of {pools} repositor{} in {}, {}",
                if pools == 1 { "y" } else { "ies" },
                base.display(),
                disk::human(bytes)
            );
            if config.git.spare_worktrees() == 0 && ready > 0 {
                Finding::warn(
                    "spares",
                    format!("{message}, though [git] spare_worktrees is 0"),
                    "`berth workspace spares --clear --repo REPO` gives the space back",
                )
            } else {
                Finding::ok("spares", message)
            }
        }
        Err(e) => Finding::error(
            "spares",
            e.to_string(),
            "the message names what could not be read",
        ),
    }
}

/// Each provider the config uses or sets up: its key present (never shown), its base URL.
fn providers(config: &Config, home: &Path) -> Vec<Finding> {
    let configured = config.provider();
    let mut out = Vec::new();
    for kind in [
        ProviderKind::Claude,
        ProviderKind::Openai,
        ProviderKind::Gemini,
    ] {
        let settings = config.provider_settings(kind);
        let has_key = settings
            .api_key
            .as_ref()
            .is_some_and(|k| !k.expose().is_empty());
        let chosen = kind == configured;
        if !chosen && !has_key && settings.base_url.is_none() {
            continue;
        }
        let name = kind.as_str();
        let check = format!("provider {name}");
        let (variable, section) = (kind.key_variable(), kind.as_str());
        let url = match &settings.base_url {
            Some(u) => berth_store_sql::redact(u),
            None => "its default base URL".to_owned(),
        };
        if let Some(u) = &settings.base_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            out.push(Finding::error(
                check,
                format!("base_url {url} is not an http:// or https:// URL"),
                format!(
                    "fix [providers.{section}] base_url in {}",
                    config::global_path(home).display()
                ),
            ));
            continue;
        }
        let role = if chosen {
            "the configured provider"
        } else {
            "offered as another model"
        };
        if has_key {
            out.push(Finding::ok(
                check,
                format!("{role}; key set; {url}; model {}", model_of(config, kind)),
            ));
        } else if chosen {
            // Not an error: only berth's own agent needs a key; workspaces, sessions, MCP,
            // runs of other agents and the web page's views work without one.
            out.push(Finding::warn(
                check,
                format!(
                    "{role}, but it has no key ({url}): berth's own agent cannot answer (`berth chat`, `berth acp`, `berth run` without --agent-cmd, prompts on the web page); everything else works"
                ),
                format!(
                    "set {variable} in the environment, or api_key under [providers.{section}] in {}",
                    config::global_path(home).display()
                ),
            ));
        } else {
            out.push(Finding::warn(
                check,
                format!("set up ({url}) but without a key, so it is not offered"),
                format!("set {variable}, or remove [providers.{section}]"),
            ));
        }
    }
    out
}

fn model_of(config: &Config, kind: ProviderKind) -> String {
    if kind == config.provider() {
        return config.model().to_owned();
    }
    crate::ModelChoice::choices(config)
        .into_iter()
        .find(|c| c.provider == kind)
        .map_or_else(|| "its default".to_owned(), |c| c.model)
}

/// Every workspace whose worktree, repository or folder is gone; one line when all are sound.
async fn workspaces(ops: &Ops) -> Vec<Finding> {
    let records = match ops.workspace_records().await {
        Ok(r) => r,
        Err(e) => {
            return vec![Finding::error(
                "workspaces",
                e.to_string(),
                "the message names the record; `berth workspace delete --force ID` removes one that cannot be read",
            )];
        }
    };
    // An archived workspace's worktree is gone by design.
    let records: Vec<_> = records.into_iter().filter(|w| !w.is_archived()).collect();
    let gits: Vec<_> = records.iter().filter_map(|w| w.git.clone()).collect();
    let statuses = git_workspace::statuses(gits).await.unwrap_or_default();
    let mut statuses = statuses.into_iter();
    let files_store = matches!(ops.store_choice(), StoreChoice::Files);
    let mut out = Vec::new();
    for ws in &records {
        let check = match &ws.name {
            Some(name) => format!("workspace {name}"),
            None => format!("workspace {}", ws.id),
        };
        if let Some(git) = &ws.git {
            let Some(status) = statuses.next() else {
                continue;
            };
            match status.health {
                Health::Ok => {}
                Health::WorktreeMissing => out.push(Finding::error(
                    check,
                    format!("its worktree {} is gone", git.worktree.display()),
                    format!(
                        "`berth workspace delete {}` removes the record (and the branch berth made, unless it holds commits found nowhere else)",
                        ws.id
                    ),
                )),
                Health::RepoMissing => out.push(Finding::error(
                    check,
                    format!("its repository {} is gone", git.repo.display()),
                    format!(
                        "if the repository moved, `berth workspace repair --repo NEW_PATH` reattaches it; else `berth workspace delete --force {}` removes the record",
                        ws.id
                    ),
                )),
                Health::BranchMissing => out.push(Finding::warn(
                    check,
                    format!("its branch {} is gone", git.branch),
                    format!(
                        "check out a branch in {}, or `berth workspace delete {}`",
                        git.worktree.display(),
                        ws.id
                    ),
                )),
            }
        } else if files_store {
            // A database store makes a plain workspace's folder on each machine that asks.
            let view = ops.view(ws, None);
            if let Some(dir) = view.work_dir()
                && !dir.is_dir()
            {
                out.push(Finding::error(
                    check,
                    format!("its folder {} is gone", dir.display()),
                    format!(
                        "`berth workspace path {}` makes it again (empty); `berth workspace delete {}` removes the record",
                        ws.id, ws.id
                    ),
                ));
            }
        }
    }
    let broken = out.len();
    let total = records.len();
    let git = records.iter().filter(|w| w.git.is_some()).count();
    out.insert(
        0,
        if broken == 0 {
            Finding::ok(
                "workspaces",
                format!("{total} workspace(s), {git} of them git; every one has its folder"),
            )
        } else {
            Finding::warn(
                "workspaces",
                format!("{broken} of {total} workspace(s) need attention (below)"),
                "see each workspace's finding",
            )
        },
    );
    out
}
