//! The commands a session's prompt offers (`available_commands_update`): berth's own and the
//! workspace's skills, offered again when the skills change.

use agent_client_protocol::v1::schema::{SessionId, SessionUpdate};
use berth_ops::Session;

use super::{Open, Server};
use crate::commands;

impl Server {
    /// The commands a session's prompt offers: berth's own, then its workspace's skills (read
    /// now; one that cannot be read offers none). Which skills it offered is kept with it.
    pub(super) async fn commands_for(&self, open: &Open) -> SessionUpdate {
        let skills = self.skills_of(&open.session).await;
        *open.offered.lock().unwrap_or_else(|e| e.into_inner()) = skill_names(&skills);
        commands::available(&skills)
    }

    /// [`Server::commands_for`] the session open as `id`, with the id, for a client to be told.
    pub(super) async fn commands_of(&self, id: &SessionId) -> Option<(SessionId, SessionUpdate)> {
        let open = self.open(id).ok()?;
        Some((id.clone(), self.commands_for(&open).await))
    }

    /// The commands again when the workspace's skills changed since they were offered (a skill
    /// added or removed during the session): after each prompt.
    pub(super) async fn commands_if_changed(
        &self,
        open: &Open,
    ) -> Option<(SessionId, SessionUpdate)> {
        let skills = self.skills_of(&open.session).await;
        let names = skill_names(&skills);
        let mut offered = open.offered.lock().unwrap_or_else(|e| e.into_inner());
        if *offered == names {
            return None;
        }
        *offered = names;
        Some((
            open.session.id.to_string().into(),
            commands::available(&skills),
        ))
    }

    async fn skills_of(&self, session: &Session) -> berth_ops::skills::Skills {
        match self
            .ops
            .resolve_workspace(session.workspace_id.as_str())
            .await
        {
            Ok(ws) => self.ops.skills(Some(&ws)).await.unwrap_or_default(),
            Err(_) => Default::default(),
        }
    }
}

/// The names of `skills`, as a menu offered them.
fn skill_names(skills: &berth_ops::skills::Skills) -> Vec<String> {
    skills.skills.iter().map(|s| s.name.clone()).collect()
}
