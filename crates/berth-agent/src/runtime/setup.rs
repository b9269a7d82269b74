//! A turn's first phase: what it is set up with before it runs (the session's config and
//! provider, the history the model reads, the workspace's MCP servers).

use std::sync::Arc;

use berth_core::config::{Config, McpServerSettings};
use berth_ops::{ModelChoice, Role, Session, WorkspaceId};

use super::{AgentError, DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOOL_ITERATIONS, Inner};
use crate::context::Window;
use crate::conversation::ChatMessage;
use crate::http::Http;
use crate::mcp::McpServers;
use crate::provider::Provider;
use crate::providers::{self, SetupError};

/// What a turn is set up with before it runs.
pub(super) struct Setup {
    pub(super) provider: Arc<dyn Provider>,
    pub(super) model: String,
    pub(super) max_tokens: u32,
    pub(super) max_tool_iterations: u32,
    pub(super) system: String,
    pub(super) window: Window,
    pub(super) history: Vec<ChatMessage>,
    /// How many messages the transcript held when the turn began.
    pub(super) transcript_len: usize,
    /// The workspace's `[[mcp_servers]]`.
    pub(super) mcp: Arc<McpServers>,
    /// Said at the turn's start: why the session's kept model was set aside, which skills
    /// were skipped and why.
    pub(super) notices: Vec<String>,
}

/// How much of the workspace's memory goes into a turn's instructions, in characters.
const MEMORY_CHARS: usize = 8_000;

impl Inner {
    /// The servers of one `[[mcp_servers]]` list, made once per distinct list.
    pub(super) fn mcp_servers(&self, settings: &[McpServerSettings]) -> Arc<McpServers> {
        let mut known = self.mcp.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, servers)) = known.iter().find(|(s, _)| s == settings) {
            return servers.clone();
        }
        let servers = Arc::new(McpServers::new(settings));
        known.push((settings.to_vec(), servers.clone()));
        servers
    }

    /// The workspace's merged config (`None`: the user's alone, for a workspace not made
    /// yet), calling `choice` when given.
    pub(super) async fn config(
        &self,
        workspace: Option<&WorkspaceId>,
        choice: Option<&ModelChoice>,
    ) -> Result<Config, AgentError> {
        let mut config: Config = self.ops.config(workspace).await?.config;
        if let Some(choice) = choice {
            calling(&mut config, choice);
        }
        Ok(config)
    }

    /// The merged config of the session's workspace, calling the model `choice` names, else
    /// the session's own ([`Ops::session_model`]); and the warning, when the session's kept
    /// choice was set aside.
    pub(super) async fn session_config(
        &self,
        session: &Session,
        choice: Option<&ModelChoice>,
    ) -> Result<(Config, Option<String>), AgentError> {
        let mut config: Config = self.ops.config(Some(&session.workspace_id)).await?.config;
        let (choice, warning) = match choice {
            Some(c) => (c.clone(), None),
            None => {
                let model = self.ops.session_model_in(session, &config).await?;
                let warning = model.warning();
                (model.choice, warning)
            }
        };
        calling(&mut config, &choice);
        Ok((config, warning))
    }

    /// The builder's provider, else the one `config` names, with its key.
    pub(super) fn provider(&self, config: &Config) -> Result<Arc<dyn Provider>, AgentError> {
        Ok(match &self.provider {
            Some(p) => p.clone(),
            None => {
                let http = self
                    .http
                    .get_or_init(|| Http::new(self.policy.clone()))
                    .as_ref()
                    .map_err(|e| SetupError::Http(e.clone()))?;
                providers::from_config(config, http)?
            }
        })
    }

    pub(super) async fn setup(
        &self,
        session: &Session,
        choice: Option<&ModelChoice>,
    ) -> Result<Setup, AgentError> {
        let (config, model_warning) = self.session_config(session, choice).await?;
        let provider = self.provider(&config)?;
        let kind = config.provider();
        let max_tokens = config
            .provider_settings(kind)
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS);
        let ws = self
            .ops
            .resolve_workspace(session.workspace_id.as_str())
            .await?;
        let workspace_context = self.ops.context(&ws).await?;
        let memory = self.ops.memory(&ws).await?;
        // One small file, read on this thread (as the workspace's memory is).
        let user_memory = berth_ops::memory::user_memory()?;
        let skills = self.ops.skills(Some(&ws)).await?;
        let transcript = self.ops.transcript(session).await?;
        let transcript_len = transcript.messages.len();
        let mut system = self
            .system_prompt
            .clone()
            .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned());
        let mut history = Vec::new();
        for m in transcript.messages {
            match m.role {
                Role::User => history.push(ChatMessage::user_text(m.content)),
                Role::Assistant => history.push(ChatMessage::assistant_text(m.content)),
                // System messages of the transcript are instructions: they join the prompt.
                Role::System => {
                    system.push_str("\n\n");
                    system.push_str(&m.content);
                }
                // A record of a past call: the model sees what it concluded from it, in its
                // own answers, not the call itself (a provider wants a call's id and its
                // result paired within one turn).
                Role::Tool => {}
            }
        }
        if let Some(text) = workspace_context {
            system.push_str("\n\n## Workspace context (context.md)\n\n");
            system.push_str(&text);
        }
        if !memory.notes.is_empty() {
            // The newest notes, within a bound: an old workspace's memory never crowds out
            // the conversation.
            let (kept, left_out) = memory.newest(MEMORY_CHARS);
            system.push_str(
                "\n\n## Workspace memory (notes kept with `remember`; `forget` removes one)\n\n",
            );
            if left_out > 0 {
                system.push_str(&format!("({left_out} older notes are not shown.)\n"));
            }
            for note in kept {
                system.push_str(&format!("- {}: {}\n", note.date, note.text));
            }
        }
        if let Some((path, text)) = user_memory {
            system.push_str(&format!(
                "\n\n## The person's memory ({}; theirs to edit, never written by you)\n\n",
                path.display()
            ));
            system.push_str(berth_ops::memory::tail(&text, MEMORY_CHARS));
        }
        system.push_str(&skills.instructions());
        let mut notices: Vec<String> = model_warning.into_iter().collect();
        notices.extend(skills.warnings.iter().map(|w| format!("skill {w}")));
        Ok(Setup {
            provider,
            model: config.model().to_owned(),
            max_tokens,
            max_tool_iterations: config
                .agent
                .max_tool_iterations
                .unwrap_or(DEFAULT_MAX_TOOL_ITERATIONS),
            window: Window::for_provider(kind, config.agent.context_tokens, max_tokens),
            system,
            history,
            transcript_len,
            mcp: self.mcp_servers(&config.mcp_servers),
            notices,
        })
    }
}

/// The system prompt unless the builder is given another.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are berth's coding agent, working in a person's \
project through the tools you are given. Read before you change; keep changes small and \
explain them. File paths are relative to the working directory and cannot leave it. Writing \
files and running commands need the person's permission; if they refuse, do not retry \
unasked. When a tool fails, read its message: it says what to do next.";

/// `config` calling `choice` instead of the model it names.
pub(super) fn calling(config: &mut Config, choice: &ModelChoice) {
    config.provider = Some(choice.provider);
    config.model = Some(choice.model.clone());
}
