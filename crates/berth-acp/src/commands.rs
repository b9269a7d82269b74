//! berth's slash commands in an editor: offered with `available_commands_update`, and run when
//! a prompt is one. Which commands there are and what they do is `berth_agent::slash`'s, as
//! for `berth chat`; this only translates.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, SessionUpdate,
    TextContent, UnstructuredCommandInput,
};
use berth_agent::slash::{self, Command, Input};
use berth_ops::skills::Skills;

/// The commands an editor offers in its prompt (`/` completes them): berth's own, then the
/// workspace's skills (`/name what to do`; the agent reads the skill into the turn), but for
/// a skill whose name is one of berth's commands.
pub fn available(skills: &Skills) -> SessionUpdate {
    let mut commands: Vec<AvailableCommand> = slash::editor_commands()
        .map(|c| {
            let command = AvailableCommand::new(c.name(), c.what);
            match c.argument() {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(hint),
                )),
                None => command,
            }
        })
        .collect();
    for skill in &skills.skills {
        let line = format!("/{}", skill.name);
        if slash::invoked_skill(skills, &line).is_none() {
            continue;
        }
        commands.push(
            AvailableCommand::new(skill.name.clone(), format!("skill: {}", skill.description))
                .input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new("what to do (optional)"),
                )),
        );
    }
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// What a prompt is, when it is one text block that is a command: the command, or a known
/// command used wrongly (what to type instead). Anything else, an unknown `/name` included (a
/// path, say), is a prompt for the model.
pub enum Typed {
    Command(Command),
    Usage(String),
}

pub fn typed(prompt: &[ContentBlock]) -> Option<Typed> {
    let [ContentBlock::Text(text)] = prompt else {
        return None;
    };
    match slash::parse(&text.text) {
        Input::Command(command) => Some(Typed::Command(command)),
        Input::Usage(message) => Some(Typed::Usage(message)),
        Input::Empty | Input::Prompt(_) | Input::Unknown(_) => None,
    }
}

/// A prompt whose one text block starts with `//` goes to the model with one `/`, as in chat.
pub fn unescape(prompt: &mut [ContentBlock]) {
    if let [ContentBlock::Text(text)] = prompt
        && let Input::Prompt(line) = slash::parse(&text.text)
        && text.text.trim_start().starts_with("//")
    {
        *text = TextContent::new(line);
    }
}
