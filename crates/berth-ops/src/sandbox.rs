//! What a process berth starts for an agent may reach: `[sandbox]` in force for its
//! workspace, bound to the folder it works in (berth-sandbox does the confining).
//!
//! Every place that starts such a process asks here: berth's own `run_command`, an ACP agent's
//! terminals, a run's `--check` and the agent process of `--agent-cmd`. The user's own
//! `[git] setup` commands and `[[mcp_servers]]` are the user's, and run as they are.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use berth_core::Workspace;
use berth_core::config::Config;
use berth_sandbox::{Confinement, MaskedKeys, Place, Policy, Sandbox, Subject};

use crate::{Ops, Result};

/// How an agent process starts ([`Ops::agent_process`]).
pub struct AgentProcess {
    /// Its workspace's sandbox: the terminals it asks for are confined by it.
    pub sandbox: Sandbox,
    /// The process's own confinement; `None` for berth itself, or with `mode = "off"`.
    pub confinement: Option<Confinement>,
    /// Variables to set for it (`CLAUDE_CONFIG_DIR`, to keep Claude Code's state where it may
    /// write it).
    pub env: Vec<(String, String)>,
    /// For berth itself: the workspace's network, which what it confines joins.
    pub network: Option<berth_sandbox::Handoff>,
}

/// What a run says of an agent process beyond what berth knows of its program (an
/// `[agents.NAME]` entry, `--agent-writable`): each empty where it says nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentDeclared {
    /// Its own state, writable; replaces what berth knows of its program.
    pub writable: Vec<PathBuf>,
    /// Variables of berth's environment it gets, besides its provider's.
    pub env: Vec<String>,
    /// Where its provider is, reachable through the proxy besides what berth knows.
    pub hosts: Vec<String>,
    /// Whether its provider keys stay in berth, the agent getting stand-ins and base URLs on
    /// berth's proxy (`[agents.NAME] mask_keys`); `None`: yes for the agents berth knows, no
    /// for others (which may ignore a base URL).
    pub mask_keys: Option<bool>,
}

/// The user's home, for `~/` in `[sandbox]` and the default deny list.
/// What a workspace's network forwards under `config`'s `[sandbox]`: its ports in from the
/// host's loopback, and the host's loopback services `allow_hosts` names into it (as
/// `host:port`). Nothing with the sandbox off or `network = "full"`, where processes have the
/// host's network.
pub fn network_forwards(config: &Config) -> Option<Vec<String>> {
    use berth_core::config::{SandboxMode, SandboxNetwork};
    if config.sandbox.mode == SandboxMode::Off || config.sandbox.network == SandboxNetwork::Full {
        return None;
    }
    Some(
        berth_sandbox::loopback_forwards(&config.sandbox.allow_hosts)
            .into_iter()
            .map(|(host, port)| match host.contains(':') {
                true => format!("[{host}]:{port}"),
                false => format!("{host}:{port}"),
            })
            .collect(),
    )
}

/// [`network_forwards`] in a sentence.
pub fn network_forwards_said(config: &Config) -> String {
    match network_forwards(config) {
        None => "none: processes have the host's network".to_owned(),
        Some(into) if into.is_empty() => "a workspace's ports from the host's loopback (the same numbers, while a server of it listens); nothing of the host's loopback into it".to_owned(),
        Some(into) => format!(
            "a workspace's ports from the host's loopback (the same numbers, while a server of it listens); into every confined process, from the host's loopback: {}",
            into.join(", ")
        ),
    }
}

pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

impl Ops {
    /// `[sandbox]` of `config`, read.
    pub fn sandbox_policy(&self, config: &Config) -> Result<Policy> {
        Ok(Policy::from_settings(
            &config.sandbox,
            user_home().as_deref(),
            &self.home,
        )?)
    }

    /// The sandbox of processes that work in `work` for `ws` (its config layer, its own
    /// folder in the home, its ports); without a workspace, the global config's.
    pub async fn sandbox(&self, ws: Option<&Workspace>, work: &Path) -> Result<Sandbox> {
        let config = self.config(ws.map(|w| &w.id)).await?.config;
        self.sandbox_in(&config, ws, work)
    }

    /// How an agent process (`berth run --agent-cmd`) starts in `work` for `ws`: confined as
    /// an agent (its provider's hosts, from the provider variables it is passed, set in `env`
    /// or berth's, and what berth knows of the agent or `declared` names; its provider keys
    /// kept in berth, the agent getting stand-ins, unless `declared` says otherwise; its
    /// state, `writable` or its profile's, made if missing so that it can be allowed), unless
    /// it is berth itself, which confines what it runs on its own.
    pub async fn agent_process(
        &self,
        ws: Option<&Workspace>,
        work: &Path,
        command: &str,
        declared: &AgentDeclared,
        env: &[(String, String)],
    ) -> Result<AgentProcess> {
        let config = self.config(ws.map(|w| &w.id)).await?.config;
        let sandbox = self.sandbox_in(&config, ws, work)?;
        // berth by its file, found as the shell that starts it will: the last `PATH` of
        // `env` (set after berth's own), else berth's.
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        if berth_sandbox::runs_berth(command, path.as_deref(), work) {
            return Ok(AgentProcess {
                network: sandbox.network_handoff()?,
                sandbox,
                confinement: None,
                env: Vec::new(),
            });
        }
        let profile = berth_sandbox::agent_profile(command);
        let ProviderAccess {
            passed,
            keys,
            hosts,
        } = provider_access(profile, declared, env, sandbox.is_on())?;
        let home = user_home();
        let writable = match declared.writable.as_slice() {
            [] => profile
                .into_iter()
                .flat_map(|p| p.state.iter())
                .filter_map(|rel| home.as_ref().map(|h| h.join(rel)))
                // A state folder the agent makes on first use is made now, so that it can be
                // allowed: a path that does not exist cannot be.
                .inspect(|path| {
                    let _ = std::fs::create_dir_all(path);
                })
                .collect(),
            given => given.to_vec(),
        };
        // What of its state it runs or obeys later, read-only (made first where missing, so
        // that it is covered rather than created); what it must write and then runs, private.
        let (settings, private) = match (profile, &home) {
            (Some(p), Some(home)) if sandbox.is_on() => (p.covered(home), p.private_in(home)),
            _ => (Vec::new(), Vec::new()),
        };
        let confinement = sandbox.confine_with(
            None,
            &Subject::Agent {
                hosts,
                writable,
                env: passed,
                program: berth_sandbox::program_files(command, path.as_deref(), work),
                settings,
                private,
            },
            &keys,
        )?;
        let mut process_env = Vec::new();
        if confinement.is_some()
            && let Some((var, rel)) = profile.and_then(|p| p.state_var)
            && std::env::var_os(var).is_none()
            && !env.iter().any(|(k, _)| k == var)
            && let Some(home) = &home
        {
            process_env.push((var.to_owned(), home.join(rel).display().to_string()));
        }
        Ok(AgentProcess {
            sandbox,
            confinement,
            env: process_env,
            network: None,
        })
    }

    fn sandbox_in(&self, config: &Config, ws: Option<&Workspace>, work: &Path) -> Result<Sandbox> {
        let policy = self.sandbox_policy(config)?;
        let workspace_dir = ws.and_then(|w| self.manager.workspaces().workspace_dir(&w.id));
        // berth's files in every workspace folder the work folder lies in: the session's own,
        // and a plain workspace's folder used from another workspace's session (whose config
        // layer would otherwise be the agent's to write, and obeyed by its next command).
        let holder = self.workspace_folder_holding(work);
        let mut protect = Vec::new();
        let mut hidden = Vec::new();
        if policy.is_on() {
            let own = workspace_dir.as_deref().and_then(|d| d.canonicalize().ok());
            for dir in own
                .iter()
                .chain(holder.iter().filter(|h| Some(*h) != own.as_ref()))
            {
                protect.extend(protected(dir, work)?);
                if Some(dir) != own.as_ref() {
                    hidden.push(dir.join("config.toml"));
                }
            }
        }
        let place = Place {
            work: work.to_owned(),
            cwd: work.to_owned(),
            workspace_dir,
            ports: ws
                .and_then(|w| w.ports)
                .map(|b| (b.first..=b.last()).collect())
                .unwrap_or_default(),
            protect,
            readable: ws
                .and_then(|w| w.git.as_ref())
                .map(|git| git.repo.clone())
                .filter(|repo| repo.starts_with(&*self.home))
                .into_iter()
                .collect(),
            hidden,
        };
        Ok(Sandbox::new(policy, place))
    }

    /// The entry of berth's own in a workspace folder that `path` is or lies in, if it does:
    /// the workspace's record, config layer, lock, storage, sessions and the rest of
    /// [`berth_store_fs::WORKSPACE_ENTRIES`]. A plain workspace's folder is its agent's working
    /// folder too, and berth obeys what it keeps there when it reads it back (a config layer's
    /// provider URL, an answer kept aside): berth's file tools ask here before they write, as
    /// the sandbox keeps a confined process off the same entries. `path` need not exist; what
    /// exists of it is resolved, symlinks and all.
    pub fn berths_own_entry(&self, path: &Path) -> Option<PathBuf> {
        let workspaces = self.home.join("workspaces").canonicalize().ok()?;
        let real = resolved(path)?;
        let mut inside = real.strip_prefix(&workspaces).ok()?.components();
        let (id, entry) = (inside.next()?, inside.next()?);
        berth_store_fs::WORKSPACE_ENTRIES
            .iter()
            .any(|own| entry.as_os_str() == *own)
            .then(|| workspaces.join(id).join(entry))
    }

    /// The folder of the workspace in berth's home that `work` lies in, if it does (a plain
    /// workspace's folder, or beneath one).
    fn workspace_folder_holding(&self, work: &Path) -> Option<PathBuf> {
        let workspaces = self.home.join("workspaces").canonicalize().ok()?;
        let work = work.canonicalize().ok()?;
        let id = work.strip_prefix(&workspaces).ok()?.components().next()?;
        Some(workspaces.join(id))
    }
}

/// What an agent process gets of its provider: the names of berth's variables passed to it
/// (its provider's key and base URL, and what its entry names), the keys kept from it, and the
/// hosts it may reach through berth's proxy.
struct ProviderAccess {
    passed: Vec<String>,
    keys: MaskedKeys,
    hosts: Vec<String>,
}

/// [`ProviderAccess`] of an agent of `profile`, with `declared` and `env` (set on its
/// command) as [`Ops::agent_process`] has them; its keys are kept only while `confined`.
fn provider_access(
    profile: Option<&berth_sandbox::AgentProfile>,
    declared: &AgentDeclared,
    env: &[(String, String)],
    confined: bool,
) -> Result<ProviderAccess> {
    // Of berth's environment, the agent gets its provider's key and base URL besides the
    // allow list (every agent's, where berth does not know which it is); nothing else.
    let mut passed: Vec<String> = match profile {
        Some(p) => p.env().into_iter().map(str::to_owned).collect(),
        None => berth_sandbox::provider_env()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    passed.extend(declared.env.iter().cloned());
    // Their values as the agent would get them: set on its command, else berth's.
    let values: Vec<(String, String)> = passed
        .iter()
        .filter_map(|name| {
            let value = env
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok())?;
            Some((name.clone(), value))
        })
        .collect();
    let keys = match declared.mask_keys.unwrap_or(profile.is_some()) {
        true if confined => MaskedKeys::for_agent(profile, &values)?,
        _ => MaskedKeys::default(),
    };
    // Only the agent's own provider settings open hosts, never the rest of berth's
    // environment (`OLLAMA_BASE_URL`); a masked provider is reached through berth's proxy
    // alone.
    let hosts = berth_sandbox::agent_hosts(
        profile,
        values
            .iter()
            .filter(|(k, _)| !keys.hides(k))
            .map(|(k, v)| (k.as_str(), v.as_str())),
        declared.hosts.iter().map(String::as_str),
    );
    Ok(ProviderAccess {
        passed,
        keys,
        hosts,
    })
}

/// `path` with what exists of it canonicalized (its nearest existing folder, symlinks
/// followed) and the rest, which does not exist yet, joined on as written.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            let rest = path.strip_prefix(existing).ok()?;
            return Some(real.join(rest));
        }
        existing = existing.parent()?;
    }
}

/// berth's own files in the workspace folder `dir`, when an agent works in it (a plain
/// workspace's folder is both): its record, its transcripts and storage stay read-only, and
/// its config layer exists, so that it is hidden rather than made by the agent (a
/// `[sandbox] mode = "off"` or an `[[mcp_servers]]` command of its own choosing).
fn protected(dir: &Path, work: &Path) -> Result<Vec<PathBuf>> {
    let (Ok(dir), Ok(work)) = (dir.canonicalize(), work.canonicalize()) else {
        return Ok(Vec::new());
    };
    if !dir.starts_with(&work) {
        return Ok(Vec::new());
    }
    let config = dir.join("config.toml");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&config)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(
                berth_core::Error::io(format!("cannot create {}", config.display()), e).into(),
            );
        }
    }
    Ok(berth_store_fs::WORKSPACE_ENTRIES
        .iter()
        .map(|name| dir.join(name))
        .collect())
}
