//! Prompts per token per minute (`--max-prompts-per-minute`): a phone stuck in a loop, or a
//! leaked token, cannot turn one server into a bill. Counted per token (the admin's all
//! together) over the last sixty seconds, across all its connections and transports; a prompt
//! over the limit is answered with an error at once and never reaches the agent (berth-acp asks
//! the rate before each prompt of a connection, whatever the transport or the JSON spelling).

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

    /// What a prompt over the rate is answered with.
    pub fn refusal(&self) -> String {
        format!(
            "this token has sent its {} prompts of the last minute (--max-prompts-per-minute); wait a little",
            self.per_minute
        )
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
        return berth_web::problem(
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            &prompts.refusal(),
        );
    }
    next.run(request).await
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
    }
}
