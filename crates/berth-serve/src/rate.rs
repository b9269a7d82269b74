//! Prompts per token per minute (`--max-prompts-per-minute`): a phone stuck in a loop, or a
//! leaked token, cannot turn one server into a bill. Counted per token (the admin's all
//! together) over the last sixty seconds, across all its connections; a prompt over the limit
//! is answered with an error at once and never reaches the agent.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// The prompts each token sent in the last minute.
#[derive(Debug)]
pub struct PromptRate {
    per_minute: usize,
    sent: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl PromptRate {
    /// `per_minute` prompts per token; 0 for no limit.
    pub fn new(per_minute: usize) -> PromptRate {
        PromptRate {
            per_minute,
            sent: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a prompt of `token`; `false` when it is over the limit (and then not counted).
    pub fn admit(&self, token: &str) -> bool {
        if self.per_minute == 0 {
            return true;
        }
        let now = Instant::now();
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let times = sent.entry(token.to_owned()).or_default();
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            times.pop_front();
        }
        if times.len() >= self.per_minute {
            return false;
        }
        times.push_back(now);
        true
    }

    pub fn per_minute(&self) -> usize {
        self.per_minute
    }
}

/// The middleware that holds the web page's prompts (`POST /s/{id}/prompt`) to the same rate
/// as the token's prompts over `/acp`: over it, 429 and nothing is sent to the agent.
pub async fn web_prompts(
    axum::extract::State(prompts): axum::extract::State<std::sync::Arc<PromptRate>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path();
    let is_prompt = request.method() == axum::http::Method::POST && berth_web::is_prompt(path);
    let counted_as = request
        .extensions()
        .get::<crate::Principal>()
        .map(crate::Principal::counted_as);
    if is_prompt
        && let Some(counted_as) = counted_as
        && !prompts.admit(&counted_as)
    {
        let why = format!(
            "this token has sent its {} prompts of the last minute (--max-prompts-per-minute); wait a little",
            prompts.per_minute()
        );
        return berth_web::problem(axum::http::StatusCode::TOO_MANY_REQUESTS, &why);
    }
    next.run(request).await
}

/// What a frame asks, as JSON-RPC decodes it (a string escape such as `session\/prompt`
/// names the method as well as the plain spelling): the ids of its `session/prompt` requests,
/// and of every request in it, a batch's included. A frame that is not JSON asks nothing
/// here; the ACP server answers it.
pub fn requests(frame: &str) -> Requests {
    let mut found = Requests::default();
    let Ok(message) = serde_json::from_str::<serde_json::Value>(frame) else {
        return found;
    };
    let messages = match message {
        serde_json::Value::Array(batch) => batch,
        one => vec![one],
    };
    for m in messages {
        let (Some(method), Some(id)) = (m.get("method").and_then(|m| m.as_str()), m.get("id"))
        else {
            continue;
        };
        if method == "session/prompt" {
            found.prompts.push(id.clone());
        }
        found.all.push(id.clone());
    }
    found
}

/// The requests of one frame (notifications and responses have no part here).
#[derive(Debug, Default, PartialEq)]
pub struct Requests {
    /// The ids of its `session/prompt` requests.
    pub prompts: Vec<serde_json::Value>,
    /// The ids of all its requests, prompts included.
    pub all: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gets_its_prompts_a_minute_and_no_more() {
        let rate = PromptRate::new(2);
        assert!(rate.admit("phone") && rate.admit("phone"));
        assert!(!rate.admit("phone"));
        assert!(rate.admit("tablet"), "each token counts alone");
        assert!(PromptRate::new(0).admit("phone"));
        let prompts = |frame: &str| requests(frame).prompts;
        let frame = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}"#;
        assert_eq!(prompts(frame), [serde_json::json!(7)]);
        assert!(prompts(r#"{"id":1,"method":"session/new"}"#).is_empty());
        assert!(
            prompts(r#"{"id":1,"method":"session/new","params":{"x":"session/prompt"}}"#)
                .is_empty()
        );
    }

    /// The method spelt with JSON's `\/` escape is the same method: it was not counted when
    /// prompts were found by a substring of the frame.
    #[test]
    fn an_escaped_method_and_a_batch_count_as_prompts() {
        let escaped = r#"{"jsonrpc":"2.0","id":8,"method":"session\/prompt","params":{}}"#;
        assert_eq!(requests(escaped).prompts, [serde_json::json!(8)]);
        let unicode = r#"{"jsonrpc":"2.0","id":9,"method":"session\u002fprompt"}"#;
        assert_eq!(requests(unicode).prompts, [serde_json::json!(9)]);
        let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"session/prompt"},
                        {"jsonrpc":"2.0","id":2,"method":"session/list"},
                        {"jsonrpc":"2.0","method":"session/cancel"}]"#;
        let found = requests(batch);
        assert_eq!(found.prompts, [serde_json::json!(1)]);
        assert_eq!(found.all, [serde_json::json!(1), serde_json::json!(2)]);
    }
}
