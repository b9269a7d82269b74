//! Content both ways: a prompt's blocks become what the model reads (embedded files and the
//! files resource links name go in whole, bounded; images go as images); a transcript becomes
//! the chunks a `session/load` replays.

use std::fmt::Write as _;
use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, EmbeddedResourceResource, SessionUpdate, TextContent, ToolCall,
    ToolCallContent, ToolCallStatus,
};
use berth_agent::tools::Tool;
use berth_agent::tools::files::ReadFile;
use berth_agent::{Image, ToolContext};
use berth_ops::{Role, Transcript};

use crate::errors;

/// A prompt as the model gets it.
pub struct Prompt {
    pub text: String,
    pub images: Vec<Image>,
}

/// The prompt as the model gets it: the text blocks in order, then each embedded resource and
/// each linked file inside the working directory, with its URI; image blocks (and embedded
/// images) as images. A linked file outside the working directory, or one that cannot be read,
/// is named and left for the model to ask about.
pub async fn prompt(
    blocks: &[ContentBlock],
    cx: &ToolContext,
) -> Result<Prompt, agent_client_protocol::Error> {
    let mut text = String::new();
    let mut attached = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => {
                if !text.is_empty() && !text.ends_with('\n') && !t.text.starts_with('\n') {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    attach(&mut attached, &t.uri, &t.text);
                }
                EmbeddedResourceResource::BlobResourceContents(b)
                    if b.mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("image/")) =>
                {
                    images.push(image(b.mime_type.as_deref().unwrap_or_default(), &b.blob)?);
                }
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    let _ = write!(
                        attached,
                        "\n\n[attached: {} ({}), binary, not shown]",
                        b.uri,
                        b.mime_type.as_deref().unwrap_or("no type")
                    );
                }
                _ => {}
            },
            ContentBlock::ResourceLink(link) => match linked_file(&link.uri, cx).await {
                Some(body) => attach(&mut attached, &link.uri, &body),
                None => {
                    let _ = write!(
                        attached,
                        "\n\n[the user refers to {}: {}]",
                        link.name, link.uri
                    );
                }
            },
            ContentBlock::Image(i) => images.push(image(&i.mime_type, &i.data)?),
            ContentBlock::Audio(_) => {
                return Err(errors::invalid(
                    "berth's agent does not take audio in prompts; send text, files or resource links",
                ));
            }
            _ => {}
        }
    }
    text.push_str(&attached);
    if text.trim().is_empty() && images.is_empty() {
        return Err(errors::invalid("the prompt is empty"));
    }
    Ok(Prompt { text, images })
}

fn image(mime_type: &str, data: &str) -> Result<Image, agent_client_protocol::Error> {
    Image::new(mime_type, data).map_err(errors::invalid)
}

fn attach(out: &mut String, uri: &str, body: &str) {
    let _ = write!(
        out,
        "\n\n<file uri=\"{}\">\n{body}",
        uri.replace('"', "%22")
    );
    if !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("</file>");
}

/// A `file://` link's text, when it names a text file inside the working directory: read by the
/// `read_file` tool itself, so with its confinement, its size limit and the client's buffers
/// where the client offers them.
async fn linked_file(uri: &str, cx: &ToolContext) -> Option<String> {
    let path = percent_decode(uri.strip_prefix("file://")?)?;
    let rel = Path::new(&path)
        .strip_prefix(&cx.cwd)
        .ok()?
        .to_str()?
        .to_owned();
    ReadFile
        .call(serde_json::json!({ "path": rel }), cx)
        .await
        .ok()
}

/// `%XX` escapes decoded; `None` for a malformed escape or text that is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The transcript as `session/load` replays it: each user message as a user chunk, each
/// answer as an agent chunk, each recorded tool call as a finished tool call (titled with its
/// record's first line). System messages are instructions, not conversation: not shown.
pub fn replay(transcript: &Transcript) -> Vec<SessionUpdate> {
    transcript
        .messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let text = || ContentBlock::Text(TextContent::new(m.content.clone()));
            match m.role {
                Role::User => Some(SessionUpdate::UserMessageChunk(ContentChunk::new(text()))),
                Role::Assistant => {
                    Some(SessionUpdate::AgentMessageChunk(ContentChunk::new(text())))
                }
                Role::Tool => {
                    let title = m.content.lines().next().unwrap_or("tool").to_owned();
                    let status = if m.content.contains("\n\nerror:") {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    Some(SessionUpdate::ToolCall(
                        ToolCall::new(format!("replayed-{i}"), title)
                            .status(status)
                            .content(vec![ToolCallContent::from(text())]),
                    ))
                }
                Role::System => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_escapes_decode() {
        assert_eq!(percent_decode("/a%20b/c").unwrap(), "/a b/c");
        assert_eq!(percent_decode("/%C3%A9").unwrap(), "/é");
        assert!(percent_decode("/%zz").is_none());
        assert!(percent_decode("/%2").is_none());
    }
}
