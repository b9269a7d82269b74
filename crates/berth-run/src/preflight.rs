//! What a run needs, checked before anything is made: the request itself ([`prepare`]), its
//! repository, a key for each berth agent's model, and a program for each ACP agent's
//! command. A run that cannot start leaves no run record, workspace, worktree, session or
//! check behind, and says why with one kind (`not_configured`) on every front end.

use std::path::{Path, PathBuf};

use berth_agent::Agent;
use berth_ops::{Ops, Repository};

use crate::agents::AgentSpec;
use crate::error::RunError;
use crate::request::RunRequest;

/// [`prepare`], then what the agents need: for every front end that starts a run (`berth
/// run`, detached too, and MCP's `session_run`), before it records or makes anything.
pub(crate) async fn preflight(
    ops: &Ops,
    agent: &Agent,
    request: RunRequest,
) -> Result<RunRequest, RunError> {
    let request = prepare(request)?;
    let workspace = match &request.workspace {
        Some(w) => Some(ops.resolve_workspace(w).await?.id),
        None => None,
    };
    // A repository named by path is checked now, as one found around a folder is: not by
    // each agent's create, after the run is recorded.
    if let Repository::Named(dir) = &request.repository
        && request.resume.is_empty()
        && berth_git::Repo::discover(dir).is_err()
    {
        return Err(RunError::NoRepository(dir.clone()));
    }
    let root = match &request.repository {
        Repository::Named(dir) => Some(dir.clone()),
        _ => None,
    };
    let policy = ops.sandbox_policy(&ops.config(None).await?.config)?;
    for spec in &request.agents {
        match spec {
            AgentSpec::Berth { model } => agent
                .preflight(workspace.as_ref(), model.as_deref())
                .await
                .map_err(RunError::Agent)?,
            AgentSpec::Acp { command, .. } => {
                // Found here, it may still be hidden from the confined agent process (berth
                // itself is not confined as an agent: it confines what it runs).
                if let Some(program) = check_command(command, root.as_deref())?
                    && !berth_sandbox::runs_berth(
                        command,
                        std::env::var_os("PATH").as_deref(),
                        root.as_deref().unwrap_or(Path::new(".")),
                    )
                    && !root.as_deref().is_some_and(|r| program.starts_with(r))
                    && let Some(hidden_by) = policy.hides(&program)
                {
                    return Err(RunError::AgentHidden {
                        command: command.clone(),
                        program,
                        hidden_by,
                    });
                }
            }
        }
    }
    Ok(request)
}

/// Refuses an ACP agent's command whose program does not exist or cannot run. The command
/// runs as `sh -c "exec COMMAND"` in the agent's worktree, so the shell itself always starts
/// and a missing program would show only as an agent that died at its first message. The
/// first word is looked for as the shell would: on `PATH` when it has no `/`, else as a path
/// (relative ones in the repository, which each worktree checks out). A command the shell
/// must expand first (`$VAR`, quotes, `(`) is left to the shell.
/// The program found, or `None` when the command is left to the shell.
pub(crate) fn check_command(
    command: &str,
    repository: Option<&Path>,
) -> Result<Option<PathBuf>, RunError> {
    let Some(program) = command.split_whitespace().find(|word| !is_assignment(word)) else {
        return Ok(None); // an empty command is `parse_agents`' refusal
    };
    if program.contains(['$', '`', '"', '\'', '(', '{', '\\', '~', '*', '?']) {
        return Ok(None);
    }
    let found = if program.contains('/') {
        let path = Path::new(program);
        let path = match repository {
            Some(root) if path.is_relative() => root.join(path),
            _ => path.to_path_buf(),
        };
        is_executable(&path).then_some(path)
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(program))
                .find(|path| is_executable(path))
        })
    };
    match found {
        Some(path) => Ok(Some(path)),
        None => Err(RunError::AgentCannotStart {
            command: command.to_owned(),
            program: program.to_owned(),
        }),
    }
}

/// `NAME=value`, which the shell takes as the command's environment.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks a request before anything is made, and settles its repository (the one around
/// the folder it names): what [`start`] does first, for a front end that records the run
/// before it starts it (`berth run --detach`).
pub(crate) fn prepare(request: RunRequest) -> Result<RunRequest, RunError> {
    if request.task.trim().is_empty() {
        return Err(RunError::EmptyTask);
    }
    if request.agents.is_empty() {
        return Err(RunError::NoAgents);
    }
    if request.workspace.is_some() && request.agents.len() > 1 {
        return Err(RunError::OneAgentPerWorkspace(request.agents.len()));
    }
    writable_needs_an_acp_agent(&request)?;
    // A name that cannot be a workspace's, with the largest index it will get, is refused
    // now rather than by every agent's create.
    if let Some(name) = &request.name {
        berth_ops::WorkspaceName::new(format!("{name}-{}-20", request.agents.len()))
            .map_err(|e| RunError::Ops(e.into()))?;
    }
    // Checked before anything is made: outside a repository, a create would make plain
    // workspaces, one per agent, only for the run to fail on each.
    let repository = match &request.repository {
        _ if request.workspace.is_some() => Repository::None,
        // A resumed run's workspaces exist already.
        kept if !request.resume.is_empty() => kept.clone(),
        Repository::Around(dir) => {
            let repo =
                berth_git::Repo::discover(dir).map_err(|_| RunError::NoRepository(dir.clone()))?;
            Repository::Named(repo.root().to_path_buf())
        }
        Repository::Named(dir) => Repository::Named(dir.clone()),
        Repository::None => return Err(RunError::NoRepository(PathBuf::from("this server"))),
    };
    if let Some(i) = request.resume.keys().find(|i| **i >= request.agents.len()) {
        return Err(RunError::NoSuchAgent(*i));
    }
    Ok(RunRequest {
        repository,
        ..request
    })
}

/// Refuses state to write (`--agent-writable`) for a run with no ACP agent, whose process it
/// would be for: refused, not ignored. [`prepare`]'s, and a queued run's.
pub(crate) fn writable_needs_an_acp_agent(request: &RunRequest) -> Result<(), RunError> {
    let any_acp = request
        .agents
        .iter()
        .any(|a| matches!(a, AgentSpec::Acp { .. }));
    if !request.agent_writable.is_empty() && !any_acp {
        return Err(RunError::Ops(berth_ops::Error::invalid(
            "--agent-writable is for ACP agents' processes, and this run has none: berth's own agent writes only its worktree",
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_path_or_at_a_path_passes_and_a_missing_one_is_named() {
        assert!(check_command("sh -c true", None).is_ok());
        assert!(check_command("FOO=1 BAR=2 sh", None).is_ok());
        assert!(check_command("/bin/sh -c true", None).is_ok());
        // Left to the shell: berth cannot know what it expands to.
        assert!(check_command("$AGENT --acp", None).is_ok());
        let missing = check_command("no-such-agent-7f3a --acp", None).unwrap_err();
        assert!(
            missing.to_string().contains("no-such-agent-7f3a"),
            "{missing}"
        );
        assert_eq!(missing.kind(), berth_ops::ErrorKind::NotConfigured);
        let repo = tempfile::tempdir().unwrap();
        assert!(check_command("./agent.sh", Some(repo.path())).is_err());
        let script = repo.path().join("agent.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(
            check_command("./agent.sh", Some(repo.path())).is_err(),
            "not executable"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_command("./agent.sh", Some(repo.path())).is_ok());
    }
}
