//! The `outputSchema` of each tool: the shape of the structured content its successful results
//! carry, so a client can check and use them without parsing text. A failed call is an
//! `isError` result whose structured content is `{"error": {"kind", "message"}}` instead
//! (`errors::tool`); the MCP specification leaves error results outside the schema.
//!
//! The shapes are those of `berth_ops`'s views (`WorkspaceView`, `SessionView`) plus the URIs
//! this server adds. `tests/mcp/test_tools.py` validates every tool's results against these
//! schemas through the official Python SDK, so a field that changes here or there is caught.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("an output schema is an object"),
    }
}

fn string() -> Value {
    json!({ "type": "string" })
}

fn string_or_null() -> Value {
    json!({ "type": ["string", "null"] })
}

fn size() -> Value {
    json!({ "type": "integer", "minimum": 0 })
}

/// A workspace as `berth_ops::WorkspaceView` serializes it, with its `uri`.
fn workspace_properties() -> serde_json::Map<String, Value> {
    let git = object(
        json!({
            "repo": string(),
            "worktree": string(),
            "branch": string(),
            "base_branch": string(),
            "branch_created": { "type": "boolean" },
        }),
        &[
            "repo",
            "worktree",
            "branch",
            "base_branch",
            "branch_created",
        ],
    );
    let port = json!({ "type": "integer", "minimum": 1, "maximum": 65535 });
    let ports = object(
        json!({ "first": port, "last": port, "count": port }),
        &["first", "last", "count"],
    );
    let Value::Object(map) = json!({
        "id": string(),
        "name": string_or_null(),
        "label": string(),
        "description": string(),
        "created_at": string(),
        "last_accessed": string(),
        "agent_id": string_or_null(),
        "path": string_or_null(),
        "git": { "anyOf": [git, { "type": "null" }] },
        "ports": {
            "anyOf": [ports, { "type": "null" }],
            "description": "The workspace's own block of TCP ports (BERTH_PORT = first); null until something of the workspace first needs ports (a run, a setup command, a command of berth's agent), which gives it one."
        },
        "git_status": { "type": ["object", "null"] },
        "size_bytes": { "type": ["integer", "null"], "minimum": 0 },
        "uri": string(),
    }) else {
        unreachable!()
    };
    map
}

const WORKSPACE_REQUIRED: &[&str] = &[
    "id",
    "name",
    "label",
    "description",
    "created_at",
    "last_accessed",
    "agent_id",
    "path",
    "git",
    "ports",
    "git_status",
    "size_bytes",
    "uri",
];

fn workspace() -> Value {
    object(Value::Object(workspace_properties()), WORKSPACE_REQUIRED)
}

/// A session as `berth_ops::SessionView` serializes it, with its and its workspace's URIs.
fn session_properties() -> serde_json::Map<String, Value> {
    let Value::Object(map) = json!({
        "id": string(),
        "workspace_id": string(),
        "label": string(),
        "title": string(),
        "provider": string(),
        "model": string(),
        "agent": string_or_null(),
        "cwd": string_or_null(),
        "status": string(),
        "created_at": string(),
        "updated_at": string(),
        "uri": string(),
        "workspace_uri": string(),
    }) else {
        unreachable!()
    };
    map
}

const SESSION_REQUIRED: &[&str] = &[
    "id",
    "workspace_id",
    "label",
    "title",
    "provider",
    "model",
    "agent",
    "cwd",
    "status",
    "created_at",
    "updated_at",
    "uri",
    "workspace_uri",
];

fn session() -> Value {
    object(Value::Object(session_properties()), SESSION_REQUIRED)
}

fn page(key: &str, item: Value) -> Arc<JsonObject> {
    schema(object(
        json!({
            key: { "type": "array", "items": item },
            "next_cursor": string_or_null(),
        }),
        &[key, "next_cursor"],
    ))
}

/// A file's description beside its content (text as a text block, anything else as an
/// embedded blob).
fn file_properties() -> Value {
    json!({
        "path": string(),
        "uri": string(),
        "mime_type": string(),
        "encoding": { "enum": ["utf-8", "base64"] },
        "size": size(),
    })
}

/// `workspace_create`: the new workspace, where its worktree started, and warnings.
pub fn workspace_create() -> Arc<JsonObject> {
    let mut properties = workspace_properties();
    properties.insert(
        "start".into(),
        json!({ "anyOf": [
            object(json!({ "ref": string(), "sha": string() }), &["ref", "sha"]),
            { "type": "null" },
        ]}),
    );
    properties.insert(
        "warnings".into(),
        json!({ "type": "array", "items": string() }),
    );
    let mut required = WORKSPACE_REQUIRED.to_vec();
    required.extend(["start", "warnings"]);
    schema(object(Value::Object(properties), &required))
}

/// `workspace_remove`.
pub fn workspace_remove() -> Arc<JsonObject> {
    schema(object(
        json!({
            "id": string(),
            "removed": { "const": true },
            "unbound": { "type": "array", "items": string() },
            "warning": string_or_null(),
        }),
        &["id", "removed", "unbound", "warning"],
    ))
}

/// `*_storage_read`.
pub fn file() -> Arc<JsonObject> {
    schema(object(
        file_properties(),
        &["path", "uri", "mime_type", "encoding", "size"],
    ))
}

/// `*_storage_write`.
pub fn written() -> Arc<JsonObject> {
    schema(object(
        json!({ "path": string(), "size": size() }),
        &["path", "size"],
    ))
}

/// `*_storage_list`.
pub fn entries() -> Arc<JsonObject> {
    let entry = object(
        json!({
            "name": string(),
            "path": string(),
            "kind": { "enum": ["file", "dir", "symlink"] },
            "size": size(),
        }),
        &["name", "path", "kind", "size"],
    );
    schema(object(
        json!({ "entries": { "type": "array", "items": entry } }),
        &["entries"],
    ))
}

/// `resource_workspace_list`.
pub fn workspace_page() -> Arc<JsonObject> {
    page("workspaces", workspace())
}

/// `resource_workspace_show`: the workspace, its sessions and the URIs of its parts.
pub fn workspace_show() -> Arc<JsonObject> {
    let mut properties = workspace_properties();
    let item = object(
        json!({ "id": string(), "title": string(), "status": string(), "uri": string() }),
        &["id", "title", "status", "uri"],
    );
    for (key, value) in [
        ("files_uri", string()),
        ("context_uri", string()),
        ("storage_uri", string()),
        ("sessions", json!({ "type": "array", "items": item })),
    ] {
        properties.insert(key.into(), value);
    }
    let mut required = WORKSPACE_REQUIRED.to_vec();
    required.extend(["context_uri", "storage_uri", "sessions"]);
    schema(object(Value::Object(properties), &required))
}

/// `resource_workspace_browse`: a file's description, or a folder's entries.
pub fn worktree_node() -> Arc<JsonObject> {
    let entry = object(
        json!({
            "name": string(),
            "path": string(),
            "type": string(),
            "size": size(),
            "uri": string(),
        }),
        &["name", "path", "type", "size", "uri"],
    );
    let folder = object(
        json!({
            "uri": string(),
            "path": string(),
            "entries": { "type": "array", "items": entry },
        }),
        &["uri", "path", "entries"],
    );
    let file = object(
        file_properties(),
        &["path", "uri", "mime_type", "encoding", "size"],
    );
    schema(json!({ "type": "object", "required": ["path", "uri"], "anyOf": [file, folder] }))
}

/// `resource_session_list`.
pub fn session_page() -> Arc<JsonObject> {
    page("sessions", session())
}

/// `resource_session_show`: the session and the URIs of its transcript and storage.
pub fn session_show() -> Arc<JsonObject> {
    let mut properties = session_properties();
    properties.insert("transcript_uri".into(), string());
    properties.insert("storage_uri".into(), string());
    properties.insert("run".into(), json!({ "type": ["object", "null"] }));
    let mut required = SESSION_REQUIRED.to_vec();
    required.extend(["transcript_uri", "storage_uri", "run"]);
    schema(object(Value::Object(properties), &required))
}

/// `prompt_list`: each prompt's name, description and arguments, as `prompts/list` gives them.
pub fn prompts() -> Arc<JsonObject> {
    let prompt = object(
        json!({
            "name": string(),
            "description": string(),
            "arguments": { "type": "array", "items": { "type": "object" } },
        }),
        &["name"],
    );
    schema(object(
        json!({ "prompts": { "type": "array", "items": prompt } }),
        &["prompts"],
    ))
}

/// `prompt_get`: the rendered prompt, as `prompts/get` gives it.
pub fn prompt() -> Arc<JsonObject> {
    let message = object(
        json!({ "role": { "enum": ["user", "assistant"] }, "content": { "type": "object" } }),
        &["role", "content"],
    );
    schema(object(
        json!({
            "description": string(),
            "messages": { "type": "array", "items": message },
        }),
        &["messages"],
    ))
}

/// `session_run`, `session_status`, `session_stop`: a run's state (`runs::RunState`).
pub fn run_state() -> Arc<JsonObject> {
    let count = || json!({ "type": "integer", "minimum": 0 });
    schema(object(
        json!({
            "run_id": string(),
            "session_id": string(),
            "workspace_id": string(),
            "kept_run": string(),
            "state": { "enum": ["queued", "starting", "working", "done", "failed", "stopped", "budget"] },
            "outcome": { "enum": ["merged", "discarded", "kept", null] },
            "stop": string_or_null(),
            "message": string_or_null(),
            "last_tool": string_or_null(),
            "refused": { "type": "array", "items": string() },
            "answer": string(),
            "input_tokens": count(),
            "output_tokens": count(),
            "elapsed_ms": count(),
            "check_passed": { "type": ["boolean", "null"] },
            "waiting": object(
                json!({ "question": string(), "tool": string(), "description": string() }),
                &["question", "tool", "description"],
            ),
            "finished": { "type": "boolean" },
        }),
        &[
            "run_id",
            "session_id",
            "workspace_id",
            "kept_run",
            "state",
            "answer",
            "finished",
        ],
    ))
}

/// A land's record as `land` and `land_status` give it (`berth_run::LandRecord`, with
/// `land_id`, `landed`, `left` and `finished`).
fn land_properties() -> Value {
    let item = object(
        json!({
            "run": string(),
            "asked": string(),
            "agent": { "type": ["integer", "null"], "minimum": 0 },
            "state": { "enum": ["waiting", "landing", "landed", "skipped", "left"] },
            "reason": string(),
            "into": string(),
            "turns": size(),
        }),
        &["run", "asked", "state"],
    );
    let step = object(
        json!({
            "land": string(),
            "at": string(),
            "step": string(),
            "item": size(),
            "run": string(),
            "agent": size(),
            "text": string(),
            "files": { "type": "array", "items": string() },
        }),
        &["land", "at", "step", "text"],
    );
    json!({
        "land_id": string(),
        "id": string(),
        "state": { "enum": ["landing", "stopped", "over", "cut off"] },
        "created_at": string(),
        "mode": { "enum": ["merge", "squash", "rebase"] },
        "retries": size(),
        "resolve": { "type": "boolean" },
        "message": string(),
        "items": { "type": "array", "items": item },
        "steps": { "type": "array", "items": step },
        "landed": { "type": "array", "items": string() },
        "left": { "type": "array", "items": string() },
        "finished": { "type": "boolean" },
    })
}

const LAND_REQUIRED: &[&str] = &[
    "land_id", "id", "state", "items", "steps", "landed", "left", "finished",
];

/// `land_status`: a land's record.
pub fn land_status() -> Arc<JsonObject> {
    schema(object(land_properties(), LAND_REQUIRED))
}

/// `land`: the plan (`dry_run`), or the land's record as it starts.
pub fn land() -> Arc<JsonObject> {
    let planned = object(
        json!({
            "run": string(),
            "agent": size(),
            "label": string(),
            "action": { "enum": ["land", "skip"] },
            "into": string(),
            "conflicts": { "type": "array", "items": string() },
            "check": string(),
            "note": string(),
        }),
        &["run", "agent", "label", "action", "conflicts"],
    );
    let plan = object(
        json!({
            "items": { "type": "array", "items": planned },
            "mode": { "enum": ["merge", "squash", "rebase"] },
            "retries": size(),
            "resolve": { "type": "boolean" },
        }),
        &["items", "mode", "retries", "resolve"],
    );
    let Value::Object(mut properties) = land_properties() else {
        unreachable!()
    };
    properties.insert("dry_run".to_owned(), json!({ "type": "boolean" }));
    properties.insert("plan".to_owned(), plan);
    schema(json!({
        "type": "object",
        "properties": properties,
        "required": ["dry_run"],
        "oneOf": [
            { "properties": { "dry_run": { "const": true } }, "required": ["plan"] },
            { "properties": { "dry_run": { "const": false } }, "required": LAND_REQUIRED },
        ],
    }))
}
