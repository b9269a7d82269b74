//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): each workspace's skills,
//! the same its own agent is offered (`berth_ops::skills`), as
//! `skill://{workspace id}/{name}/SKILL.md`; their files as resources (`resources/read`),
//! their folders through `resources/directory/read`. Every file is read beneath its skill's
//! folder, as the agent's `skill` tool reads it: a symlink out of a skill is refused.
//!
//! Nothing is cached: a list or a read sees the folders as they are now. A skill whose files
//! cannot all be read at listing time is listed with `"dynamic"` resources instead of a
//! manifest of digests.

use std::collections::HashMap;
use std::path::PathBuf;

use berth_ops::skills::{Skill as Found, Skills};
use berth_ops::{ErrorKind, Workspace};
use rmcp::ErrorData;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, GetSkillResult, ListSkillsResult, MetaObject, ReadResourceDirectoryResult,
    Resource, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::json;

use crate::context::Context;
use crate::errors;
use crate::resources::Body;
use crate::uri::{self, SkillTarget};

/// Workspaces whose skills one page of `skills/list` holds.
const WORKSPACES_PER_PAGE: usize = 50;

/// `skills/list`: the skills of every workspace, a page of workspaces at a time (the cursor is
/// the last workspace id of the page before), by workspace id then name.
pub async fn list(cx: &Context, cursor: Option<&str>) -> Result<ListSkillsResult, ErrorData> {
    let mut all = cx
        .ops
        .workspace_records()
        .await
        .map_err(|e| errors::protocol(&e))?;
    all.sort_by(|a, b| a.id.cmp(&b.id));
    let from = match cursor {
        None => 0,
        Some(after) => all.partition_point(|ws| ws.id.as_str() <= after),
    };
    let page: Vec<Workspace> = all.into_iter().skip(from).collect();
    let more = page.len() > WORKSPACES_PER_PAGE;
    let page: Vec<Workspace> = page.into_iter().take(WORKSPACES_PER_PAGE).collect();
    let mut found = Vec::new();
    for ws in &page {
        found.push((ws.clone(), gather(cx, ws).await?));
    }
    let skills = berth_ops::blocking(move || {
        let mut made: HashMap<PathBuf, Manifest> = HashMap::new();
        let mut skills = Vec::new();
        for (ws, found) in &found {
            for skill in &found.skills {
                let manifest = made
                    .entry(skill.dir.clone())
                    .or_insert_with(|| manifest(skill));
                skills.push(entry_of(ws, skill, manifest));
            }
        }
        Ok(skills)
    })
    .await
    .map_err(|e| errors::protocol(&e))?;
    let mut result = ListSkillsResult::with_all_items(skills);
    if more {
        result.next_cursor = page.last().map(|ws| ws.id.to_string());
    }
    Ok(result)
}

/// `skills/get`: one skill, with the manifest of its files.
pub async fn get(cx: &Context, uri: &str) -> Result<GetSkillResult, ErrorData> {
    let (ws, skill, path) = find(cx, uri).await?;
    if path.as_deref() != Some(berth_ops::skills::SKILL_MD) {
        return Err(errors::of_kind(
            ErrorKind::Invalid,
            format!("{uri} is not a skill's SKILL.md: skills/get takes the URI skills/list gives"),
        ));
    }
    let entry = berth_ops::blocking(move || Ok(entry(&ws, &skill)))
        .await
        .map_err(|e| errors::protocol(&e))?;
    Ok(GetSkillResult::new(entry))
}

/// `resources/read` of a skill's file.
pub async fn read(cx: &Context, uri: &str) -> Result<Body, ErrorData> {
    let (_, skill, path) = find(cx, uri).await?;
    let Some(path) = path else {
        return Err(errors::of_kind(
            ErrorKind::IsFolder,
            format!("{uri} is a skill's folder: read it with resources/directory/read"),
        ));
    };
    let shown = path.clone();
    let bytes = berth_ops::blocking(move || Ok(skill.read(&shown)?))
        .await
        .map_err(|e| errors::protocol(&e))?;
    Ok(Body::file(&path, bytes))
}

/// `resources/directory/read`: the files and folders directly in a skill's folder or one of
/// its folders.
pub async fn directory(cx: &Context, uri: &str) -> Result<ReadResourceDirectoryResult, ErrorData> {
    let (ws, skill, path) = find(cx, uri).await?;
    let prefix = path.as_ref().map(|p| format!("{p}/")).unwrap_or_default();
    let mut children: Vec<Resource> = Vec::new();
    let mut folders: Vec<&str> = Vec::new();
    let all =
        std::iter::once(berth_ops::skills::SKILL_MD).chain(skill.files.iter().map(String::as_str));
    for file in all {
        let Some(rest) = file.strip_prefix(prefix.as_str()) else {
            continue;
        };
        match rest.split_once('/') {
            None => children.push(Resource::new(
                uri::skill(&ws.id, &skill.name, Some(file)),
                rest.to_owned(),
            )),
            Some((folder, _)) if !folders.contains(&folder) => {
                folders.push(folder);
                children.push(
                    Resource::new(
                        uri::skill(&ws.id, &skill.name, Some(&format!("{prefix}{folder}"))),
                        folder.to_owned(),
                    )
                    .with_mime_type(DIRECTORY_MIME_TYPE),
                );
            }
            Some(_) => {}
        }
    }
    if children.is_empty() {
        return Err(errors::of_kind(
            ErrorKind::Invalid,
            format!("{uri} is not a folder of the skill {:?}", skill.name),
        ));
    }
    Ok(ReadResourceDirectoryResult::with_all_items(children))
}

async fn gather(cx: &Context, ws: &Workspace) -> Result<Skills, ErrorData> {
    let found = cx
        .ops
        .skills(Some(ws))
        .await
        .map_err(|e| errors::protocol(&e))?;
    for w in &found.warnings {
        tracing::warn!(workspace = %ws.label(), "workspace {}: {w}", ws.label());
    }
    Ok(found)
}

/// The workspace, skill and path a `skill://` URI names.
async fn find(cx: &Context, uri: &str) -> Result<(Workspace, Found, Option<String>), ErrorData> {
    let Some(SkillTarget {
        workspace,
        name,
        path,
    }) = uri::parse_skill(uri)
    else {
        return Err(errors::of_kind(
            ErrorKind::NotFound,
            format!(
                "{uri} names no skill: skill URIs are skill://{{workspace id}}/{{name}}/{{path}}, as skills/list gives them"
            ),
        ));
    };
    let ws = cx
        .ops
        .resolve_workspace(&workspace)
        .await
        .map_err(|e| errors::protocol(&e))?;
    let found = gather(cx, &ws).await?;
    let skill = found
        .find(&name)
        .map_err(|e| errors::protocol(&berth_ops::Error::from(e)))?
        .clone();
    Ok((ws, skill, path))
}

/// The digest and size of each file of a skill (`SKILL.md` first), by its path in the skill's
/// folder; `None` when one could not be read. Made once per folder in a listing: the person's
/// own skills are every workspace's.
type Manifest = Option<Vec<(String, String, u64)>>;

fn manifest(skill: &Found) -> Manifest {
    let all =
        std::iter::once(berth_ops::skills::SKILL_MD).chain(skill.files.iter().map(String::as_str));
    let mut files = Vec::new();
    for file in all {
        match skill.read(file) {
            Ok(bytes) => files.push((
                file.to_owned(),
                rmcp::model::sha256_digest(&bytes),
                bytes.len() as u64,
            )),
            Err(e) => {
                tracing::warn!(skill = %skill.name, "skill {}: {e}", skill.name);
                return None;
            }
        }
    }
    Some(files)
}

/// A skill as the extension lists it: its `SKILL.md` URI, its front matter, and the manifest
/// of its files (digest and size), or `"dynamic"` when one could not be read.
fn entry(ws: &Workspace, skill: &Found) -> Skill {
    entry_of(ws, skill, &manifest(skill))
}

fn entry_of(ws: &Workspace, skill: &Found, manifest: &Manifest) -> Skill {
    let mut front = SkillFrontmatter::new(&skill.name, &skill.description);
    front.extra = skill.extra.clone();
    let md = uri::skill(&ws.id, &skill.name, Some(berth_ops::skills::SKILL_MD));
    let resources = match manifest {
        Some(files) => SkillResources::Files(
            files
                .iter()
                .map(|(path, digest, size)| {
                    SkillResource::new(
                        uri::skill(&ws.id, &skill.name, Some(path)),
                        digest.clone(),
                        *size,
                    )
                })
                .collect(),
        ),
        None => SkillResources::Dynamic,
    };
    let mut meta = serde_json::Map::new();
    meta.insert(
        "berth".into(),
        json!({"workspace": ws.id.to_string(), "workspace_label": ws.label(), "source": skill.source}),
    );
    Skill::new(md, front, resources).with_meta(MetaObject(meta))
}
