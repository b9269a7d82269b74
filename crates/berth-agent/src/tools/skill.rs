//! `skill`: the instructions of one of the workspace's skills (`berth_ops::skills`), which
//! the turn's instructions list by name and description only. With `file`, one of the
//! skill's other files: a skill of the person's or the workspace's folder lies outside the
//! worktree, where the file tools cannot go.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::{parse_args, printable};
use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillArgs {
    name: String,
    #[serde(default)]
    file: Option<String>,
}

/// `skill`: a skill's body and the list of its files, or one of those files.
pub struct UseSkill;

#[async_trait]
impl Tool for UseSkill {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill".to_owned(),
            description: "Read a skill: instructions for a kind of task, listed under \"Skills\" by name and description. Call it when a task matches a skill's description, before you start, and follow what it says. It returns the skill's instructions and the list of its other files; give `file` to read one of them. A name not listed (more skills may be installed than are listed) is looked up among all of them.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name, as listed."},
                    "file": {"type": "string", "description": "One of the skill's other files, as its listing names it (relative to the skill's folder)."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn describe(&self, arguments: &Value, _cx: &ToolContext) -> String {
        match parse_args::<SkillArgs>("skill", arguments.clone()) {
            Ok(SkillArgs {
                name,
                file: Some(file),
            }) => printable(&format!("skill {name}: {file}")),
            Ok(a) => printable(&format!("skill {}", a.name)),
            Err(e) => e,
        }
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: SkillArgs = parse_args("skill", arguments)?;
        let ws = cx
            .ops
            .resolve_workspace(cx.session.workspace_id.as_str())
            .await
            .map_err(|e| e.to_string())?;
        let skills = cx.ops.skills(Some(&ws)).await.map_err(|e| e.to_string())?;
        let skill = skills.find(&args.name).map_err(|e| e.to_string())?.clone();
        let read = tokio::task::spawn_blocking(move || match &args.file {
            Some(file) => skill
                .read(file)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
            None => skill.body().map(|body| answer(&skill, &body)),
        });
        read.await
            .map_err(|e| format!("reading the skill failed: {e}"))?
            .map_err(|e| e.to_string())
    }
}

/// The body, then where the skill is and its other files.
fn answer(skill: &berth_ops::skills::Skill, body: &str) -> String {
    let mut out = format!("# Skill: {}\n\n{}", skill.name, body.trim_end());
    out.push_str(&format!(
        "\n\n(The skill's folder: {}, from the {} skills.",
        skill.dir.display(),
        skill.source
    ));
    if skill.files.is_empty() {
        out.push_str(" It has no other files.)");
    } else {
        out.push_str(" Its other files, read with this tool's `file`:\n");
        for file in &skill.files {
            out.push_str(&format!("- {file}\n"));
        }
        out.push(')');
    }
    out
}
