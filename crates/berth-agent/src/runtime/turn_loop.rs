//! A turn's loop: the prompt made durable, then rounds of the model's answer streamed out and
//! its tool calls run, until the model ends its turn.

use std::sync::Arc;

use berth_ops::{INTERRUPTED, Message, Role, Session, tool_record};
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::partial::PartialKeeper;
use super::{Inner, Out, Setup, TurnRequest};
use crate::context;
use crate::conversation::{
    ChatMessage, Part, Speaker, StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
use crate::events::{AgentEvent, Decision, PermissionRequest, TurnStop};
use crate::mcp::McpServers;
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};
use crate::tools::{FileChange, Preview, Ran, Tool, ToolContext, ToolKind, Toolbox, plan};

/// A turn started ([`Inner::start_turn`]): its prompt durable and its model asked.
struct Started {
    /// The conversation so far, the prompt last.
    history: Vec<ChatMessage>,
    toolbox: Toolbox,
    /// The toolbox's specs, as the model is shown them.
    tools: Arc<[ToolSpec]>,
    /// The model's first answer opening.
    opened: Result<ProviderStream, ProviderError>,
}

impl Inner {
    /// The turn's tools: the built-in ones, then those of the config's and the client's MCP
    /// servers (started now if this is their first turn). A server that cannot start is a
    /// notice, once, and the turn goes on without it.
    pub(super) async fn turn_tools(
        &self,
        config_servers: &McpServers,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Toolbox {
        let mut toolbox = self.tools.clone();
        let client_servers = request.options.mcp.as_deref();
        for servers in std::iter::once(config_servers).chain(client_servers) {
            if servers.is_empty() {
                continue;
            }
            let (tools, notices) = servers.tools().await;
            for message in notices {
                out.send(AgentEvent::Notice { message }).await;
            }
            for tool in tools {
                toolbox = toolbox.with(tool);
            }
        }
        toolbox
    }

    /// Runs the turn to its end; returns how it ended and the tokens used. A session's first
    /// prompt also titles it, if it has no title, with the turn's count at its end
    /// ([`Out::first_prompt`]): one change of the session's record, not two, and there when
    /// the turn is over.
    pub(super) async fn run(
        &self,
        mut setup: Setup,
        request: &TurnRequest,
        out: &mut Out,
    ) -> (TurnStop, Usage) {
        let first_prompt = !setup.history.iter().any(|m| m.speaker == Speaker::User);
        let mut usage = Usage::default();
        let session = &request.session;
        let cancel = &request.cancel;
        let Started {
            mut history,
            toolbox,
            tools,
            mut opened,
        } = match self.start_turn(&mut setup, request, out).await {
            Ok(started) => started,
            Err(stop) => return (stop, usage),
        };
        // The prompt is the session's now: the first one names it.
        if first_prompt {
            out.first_prompt = Some(request.prompt.clone());
        }
        // Messages in the transcript so far: an answer kept aside follows them.
        let mut written = setup.transcript_len + 1;
        let cx = self.tool_context(request);
        let mut rounds = 0;
        loop {
            let keeper = PartialKeeper::start(self.ops.clone(), session.clone(), written);
            let answer = self
                .stream_answer(&*setup.provider, opened, cancel, out, &keeper)
                .await;
            // The round's answer is about to be the transcript's (or never will be).
            let kept = keeper.stop();
            let (message, stop, used) = match answer {
                Ok(done) => done,
                Err((shown, error)) => {
                    let stop = self.end_interrupted(session, &shown, error, kept).await;
                    return (stop, usage);
                }
            };
            usage.add(used);
            out.in_context = used.input_tokens + used.output_tokens;
            out.send(AgentEvent::Usage { usage }).await;
            let over = request
                .options
                .stop_after
                .as_ref()
                .is_some_and(|over| over(usage));
            let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
            let last = calls.is_empty();
            if let Err(stop) = self
                .append_answer(session, &message, last, usage, out)
                .await
            {
                return (stop, usage);
            }
            if !message.text().is_empty() {
                written += 1;
            }
            if kept {
                let _ = self.ops.forget_partial_answer(session).await;
            }
            history.push(message);
            if calls.is_empty() {
                let stop = match stop {
                    StopReason::MaxTokens => TurnStop::MaxTokens,
                    StopReason::Refusal => TurnStop::Refusal,
                    _ => TurnStop::EndTurn,
                };
                return (stop, usage);
            }
            if over {
                // Past what it may spend: the answer is kept, its tools never run.
                return (TurnStop::Cancelled, usage);
            }
            rounds += 1;
            if rounds > setup.max_tool_iterations {
                return (TurnStop::MaxToolIterations, usage);
            }
            let results = self.run_tools(&toolbox, &calls, &cx, request, out).await;
            if let Err(stop) = self.record_tool_calls(session, &calls, &results).await {
                return (stop, usage);
            }
            written += calls.len();
            if cancel.is_cancelled() {
                return (TurnStop::Cancelled, usage);
            }
            match self.results_and_told(results, request, out).await {
                Ok((message, told)) => {
                    written += told;
                    history.push(message);
                }
                Err(stop) => return (stop, usage),
            }
            let next = provider_request(&setup, &history, &tools);
            opened = open_answer(&*setup.provider, next, cancel).await;
        }
    }

    /// The turn's start: the setup's notices told, the prompt written and the turn's tools
    /// gathered, then the model asked while the prompt syncs; or how the turn ended when the
    /// prompt could not be written or synced.
    async fn start_turn(
        &self,
        setup: &mut Setup,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Result<Started, TurnStop> {
        for message in std::mem::take(&mut setup.notices) {
            out.send(AgentEvent::Notice { message }).await;
        }
        let mut history = std::mem::take(&mut setup.history);
        history.push(ChatMessage::user_with_images(
            request.prompt.clone(),
            &request.images,
        ));
        // The prompt is written to the transcript while the turn's tools are gathered (external
        // MCP servers starting): the two waits overlap instead of adding up. The model is asked
        // only once the prompt is in the transcript, so a process that dies never leaves an
        // answer, or a bill, for a prompt the session does not hold; a failed append ends the
        // turn before it is asked. The prompt's sync to the disk goes on while the model is
        // asked ([`Inner::run`]).
        let prompt = Message::new(Role::User, transcript_prompt(request));
        let gather = async {
            let toolbox = self.turn_tools(&setup.mcp, request, out).await;
            let tools = toolbox.specs();
            (toolbox, tools)
        };
        let (appended, (toolbox, tools)) = tokio::join!(
            self.ops.append_message_syncing(&request.session, &prompt),
            gather
        );
        let prompt_synced = appended.map_err(failed)?;
        let first = provider_request(setup, &history, &tools);
        // The prompt reaches the disk while the model is asked; nothing of the answer is shown
        // or kept before it has (a sync that fails ends the turn, its answer unread).
        let (opened, synced) = tokio::join!(
            open_answer(&*setup.provider, first, &request.cancel),
            prompt_synced.wait()
        );
        synced.map_err(failed)?;
        Ok(Started {
            history,
            toolbox,
            tools,
            opened,
        })
    }

    /// What the turn's tool calls can reach.
    fn tool_context(&self, request: &TurnRequest) -> ToolContext {
        ToolContext {
            cwd: request.cwd.clone(),
            ops: self.ops.clone(),
            session: request.session.clone(),
            cancel: request.cancel.clone(),
            call_id: String::new(),
            files: request.options.files.clone(),
            commands: request.options.commands.clone(),
            unconfined: false,
        }
    }

    /// Ends a turn whose answer failed or was cancelled while it streamed; `kept` says whether
    /// a partial answer was kept aside for it.
    async fn end_interrupted(
        &self,
        session: &Session,
        shown: &str,
        error: ProviderError,
        kept: bool,
    ) -> TurnStop {
        // What the person saw stays, marked; nothing is sent again.
        if !shown.is_empty() {
            let text = format!("{shown}{INTERRUPTED}");
            let _ = self
                .ops
                .append_message(session, &Message::new(Role::Assistant, text))
                .await;
        }
        if kept {
            let _ = self.ops.forget_partial_answer(session).await;
        }
        match error {
            ProviderError::Cancelled => TurnStop::Cancelled,
            e => TurnStop::Failed {
                message: e.to_string(),
            },
        }
    }

    /// Writes the text of a round's answer to the transcript (if it has any); the `last`
    /// answer's, together with the turn's count.
    async fn append_answer(
        &self,
        session: &Session,
        message: &ChatMessage,
        last: bool,
        usage: Usage,
        out: &mut Out,
    ) -> Result<(), TurnStop> {
        let text = message.text();
        let append = async {
            match text.is_empty() {
                true => Ok(()),
                false => {
                    self.ops
                        .append_message(session, &Message::new(Role::Assistant, text))
                        .await
                }
            }
        };
        // The last answer's append and the turn's count go to disk together (the
        // transcript and the record have a lock each): the count never holds up the end.
        let appended = if last {
            let (appended, ()) = tokio::join!(append, self.count(session, usage, out));
            out.counted = true;
            appended
        } else {
            append.await
        };
        appended.map_err(failed)
    }

    /// Each call and its result join the transcript, in the order the model made them: the
    /// session is then a whole record of what the agent did.
    async fn record_tool_calls(
        &self,
        session: &Session,
        calls: &[ToolCall],
        results: &[ToolResult],
    ) -> Result<(), TurnStop> {
        for (call, result) in calls.iter().zip(results) {
            let input = match &call.arguments {
                Ok(value) => value.to_string(),
                Err(raw) => raw.clone(),
            };
            let record = tool_record(&call.name, &input, result.is_error, &result.content);
            self.ops
                .append_message(session, &record)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    /// The person's message after a step: its tool results, then what a person said while
    /// it ran ([`super::TurnOptions::told`]) beside them, each of those made durable in the
    /// transcript after the step's tool records (where it joined) and said as an event,
    /// before the model reads it. The message, and how many such words it holds.
    async fn results_and_told(
        &self,
        results: Vec<ToolResult>,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Result<(ChatMessage, usize), TurnStop> {
        let mut parts: Vec<Part> = results.into_iter().map(Part::ToolResult).collect();
        let told: Vec<String> = match &request.options.told {
            Some(take) => take()
                .into_iter()
                .filter(|t| !t.trim().is_empty())
                .collect(),
            None => Vec::new(),
        };
        let count = told.len();
        for text in told {
            self.ops
                .append_message(&request.session, &Message::new(Role::User, text.clone()))
                .await
                .map_err(failed)?;
            out.send(AgentEvent::Told { text: text.clone() }).await;
            parts.push(Part::Text(text));
        }
        let speaker = Speaker::User;
        Ok((ChatMessage { speaker, parts }, count))
    }

    /// Adds a turn's tokens to its session, and titles it after its first prompt, the one
    /// [`Out`] keeps (see [`Ops::count_turn`](berth_ops::Ops::count_turn)): the title the
    /// session has then goes in the turn's end ([`AgentEvent::TurnEnded`]); a failure to
    /// count is told the person, not a failed turn.
    pub(super) async fn count(&self, session: &Session, usage: Usage, out: &mut Out) {
        let used = berth_ops::TokenUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        };
        let first_prompt = out.first_prompt.take();
        match self
            .ops
            .count_turn(session, used, first_prompt.as_deref())
            .await
        {
            Ok(counted) => {
                out.titled = counted
                    .filter(|_| first_prompt.is_some())
                    .map(|s| s.title)
                    .filter(|t| !t.is_empty());
            }
            Err(e) => {
                let message = format!("the tokens of this turn could not be counted: {e}");
                out.send(AgentEvent::Notice { message }).await;
            }
        }
    }

    /// One model answer, streamed out as events. On failure, the text already shown.
    async fn stream_answer(
        &self,
        provider: &dyn Provider,
        opened: Result<ProviderStream, ProviderError>,
        cancel: &CancellationToken,
        out: &mut Out,
        keeper: &PartialKeeper,
    ) -> Result<(ChatMessage, StopReason, Usage), (String, ProviderError)> {
        let mut shown = String::new();
        let mut stream = opened.map_err(|e| (String::new(), e))?;
        // An event read ahead while merging pieces, handled next.
        let mut ahead = None;
        loop {
            let next = match ahead.take() {
                Some(next) => next,
                None => tokio::select! {
                    _ = cancel.cancelled() => return Err((shown, ProviderError::Cancelled)),
                    n = stream.next() => n,
                },
            };
            match next {
                Some(Ok(ProviderEvent::TextDelta(mut t))) => {
                    ahead = merge_ready(&mut stream, &mut t, false);
                    shown.push_str(&t);
                    keeper.show(&t);
                    out.send(AgentEvent::Text { text: t }).await;
                }
                Some(Ok(ProviderEvent::ThoughtDelta(mut t))) => {
                    ahead = merge_ready(&mut stream, &mut t, true);
                    out.send(AgentEvent::Thought { text: t }).await;
                }
                // Calls are announced when they run, in order, with their permission asks.
                Some(Ok(ProviderEvent::ToolCall(_))) => {}
                Some(Ok(ProviderEvent::Done {
                    message,
                    stop,
                    usage,
                })) => return Ok((message, stop, usage)),
                Some(Err(e)) => return Err((shown, e)),
                None => {
                    let e = ProviderError::Stream {
                        provider: provider.name(),
                        message: "the stream ended without finishing the answer".to_owned(),
                    };
                    return Err((shown, e));
                }
            }
        }
    }

    /// Runs a round of tool calls: permissions are asked one at a time, in order (a person
    /// answers them); the calls allowed then run concurrently. Results come back in call
    /// order, one per call, errors included.
    async fn run_tools(
        &self,
        toolbox: &Toolbox,
        calls: &[ToolCall],
        cx: &ToolContext,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Vec<ToolResult> {
        let mut plans = Vec::with_capacity(calls.len());
        for call in calls {
            plans.push(self.plan_call(toolbox, call, cx, request, out).await);
        }
        let runs = calls
            .iter()
            .zip(plans)
            .map(|(call, plan)| run_planned(toolbox, call, plan, cx, request));
        let done = futures::future::join_all(runs).await;
        let mut results = Vec::with_capacity(done.len());
        for ((r, change), call) in done.into_iter().zip(calls) {
            if r.name == plan::NAME
                && !r.is_error
                && let Some(steps) = call
                    .arguments
                    .as_ref()
                    .ok()
                    .and_then(|a| plan::parse(a).ok())
            {
                out.send(AgentEvent::Plan { steps }).await;
            }
            out.send(AgentEvent::ToolFinished {
                id: r.call_id.clone(),
                name: r.name.clone(),
                output: r.content.clone(),
                is_error: r.is_error,
                change,
            })
            .await;
            results.push(r);
        }
        results
    }

    /// Announces one call, and decides what becomes of it: an answer when its arguments or
    /// its tool are wrong, else a run, once a person allowed it where its tool needs that.
    async fn plan_call(
        &self,
        toolbox: &Toolbox,
        call: &ToolCall,
        cx: &ToolContext,
        request: &TurnRequest,
        out: &mut Out,
    ) -> CallPlan {
        let arguments = call.arguments.clone().unwrap_or(Value::Null);
        let tool = toolbox.get(&call.name);
        out.send(AgentEvent::ToolStarted {
            id: call.id.clone(),
            name: call.name.clone(),
            // A tool the model made up runs nothing; it is shown as `other`.
            kind: tool.map_or(ToolKind::Other, |t| t.kind()),
            location: tool.and_then(|t| t.location(&arguments)),
            arguments: arguments.clone(),
        })
        .await;
        match (&call.arguments, toolbox.get(&call.name)) {
            (Err(raw), _) => CallPlan::Answer(format!(
                "the arguments of this call are not valid JSON, so it did not run: {raw:?}; call {} again with a JSON object",
                call.name
            )),
            (_, None) => CallPlan::Answer(format!(
                "there is no tool named {:?}; the tools are: {}",
                call.name,
                toolbox
                    .specs()
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            (Ok(args), Some(tool)) if tool.needs_permission() => {
                self.ask_permission(&**tool, call, args, cx, request, out)
                    .await
            }
            (Ok(args), Some(_)) => CallPlan::Run(args.clone(), None),
        }
    }

    /// A call of a tool that needs permission: run if the session's person allowed the tool
    /// always, else as the front end decides (a refusal is the model's answer).
    async fn ask_permission(
        &self,
        tool: &dyn Tool,
        call: &ToolCall,
        args: &Value,
        cx: &ToolContext,
        request: &TurnRequest,
        out: &mut Out,
    ) -> CallPlan {
        let key = (request.session.id.to_string(), call.name.clone());
        let remembered = self.allowed_always(&key);
        let cx = cx.for_call(&call.id);
        let Preview {
            description,
            change,
        } = tool.preview(args, &cx).await;
        if remembered {
            return CallPlan::Run(args.clone(), change);
        }
        out.send(AgentEvent::PermissionAsked {
            id: call.id.clone(),
            name: call.name.clone(),
            description: description.clone(),
            change: change.clone(),
        })
        .await;
        let asked = PermissionRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: args.clone(),
            description,
            change: change.clone(),
        };
        let decision = tokio::select! {
            _ = request.cancel.cancelled() => Decision::Reject,
            d = request.permissions.decide(&asked) => d,
        };
        match decision {
            Decision::AllowOnce => CallPlan::Run(args.clone(), change),
            Decision::AllowAlways => {
                self.always_allowed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key);
                CallPlan::Run(args.clone(), change)
            }
            Decision::Reject => CallPlan::Answer(format!(
                "the user refused to let {} run; do not try it again unasked — say what you wanted to do, or find another way",
                call.name
            )),
            Decision::NotAllowed => CallPlan::Answer(format!(
                "the run's policy does not allow {} (nobody was asked: this run answers by its --allow list alone), so it did not run; do not try it again — say what you wanted to do, and the person can allow it when they tell you more",
                call.name
            )),
            Decision::Expired => CallPlan::Answer(format!(
                "nobody answered the request to let {} run in the time allowed, so it did not run; say what you wanted to do, and the user can ask for it again",
                call.name
            )),
        }
    }

    fn allowed_always(&self, key: &(String, String)) -> bool {
        self.always_allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }
}

/// What becomes of one tool call, once its permission is settled.
enum CallPlan {
    /// Run it with these arguments; the file change it was allowed with, if any.
    Run(Value, Option<FileChange>),
    /// Do not run it: this is the model's (error) result.
    Answer(String),
}

/// One call as planned: run (stopped when the turn is cancelled, and run once more without
/// the sandbox where a person allows it), or answered. Its result, and the file change it made.
async fn run_planned(
    toolbox: &Toolbox,
    call: &ToolCall,
    plan: CallPlan,
    cx: &ToolContext,
    request: &TurnRequest,
) -> (ToolResult, Option<FileChange>) {
    let (content, is_error, change) = match plan {
        CallPlan::Answer(message) => (message, true, None),
        CallPlan::Run(args, change) => {
            let tool = toolbox.get(&call.name).expect("planned to run").clone();
            let cx = cx.for_call(&call.id);
            let ran = tokio::select! {
                _ = cx.cancel.cancelled() => Ran {
                    outcome: Err("cancelled by the user".to_owned()),
                    refused: None,
                },
                r = tool.run(args.clone(), &cx) => r,
            };
            let ran = match unconfined_once(&*tool, call, &args, &cx, request, &ran).await {
                Some(again) => again,
                None => ran.outcome,
            };
            match ran {
                Ok(output) => (output, false, change),
                Err(message) => (message, true, None),
            }
        }
    };
    (
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error,
        },
        change,
    )
}

/// A command the sandbox refused part of, run once more without it when a person allows it
/// (`Permissions::allow_unconfined`); `None` when it is not asked or not allowed.
///
/// Asked only when berth itself saw the refusal: `ran.refused`, the note the tool made where
/// it confined the process. Never from the output's text: a command that prints a line like
/// the note (`echo '[berth sandbox] …'`, or `cat` of a file holding one) met no sandbox, and
/// must not bring a person a question whose "yes" lifts it.
async fn unconfined_once(
    tool: &dyn Tool,
    call: &ToolCall,
    args: &Value,
    cx: &ToolContext,
    request: &TurnRequest,
    ran: &Ran,
) -> Option<Result<String, String>> {
    if tool.kind() != ToolKind::Execute || cx.cancel.is_cancelled() {
        return None;
    }
    let note = ran.refused.as_deref()?;
    let command = args.get("command").and_then(Value::as_str)?;
    let asked = PermissionRequest {
        call_id: call.id.clone(),
        tool: format!("{} without the sandbox", call.name),
        arguments: args.clone(),
        description: format!(
            "run once more without the sandbox, with all of your rights:\n$ {command}\n\n{note}"
        ),
        change: None,
    };
    let allowed = tokio::select! {
        _ = cx.cancel.cancelled() => false,
        a = request.permissions.allow_unconfined(&asked) => a,
    };
    if !allowed {
        return None;
    }
    let unconfined = ToolContext {
        unconfined: true,
        ..cx.clone()
    };
    let again = tokio::select! {
        _ = cx.cancel.cancelled() => Err("cancelled by the user".to_owned()),
        r = tool.call(args.clone(), &unconfined) => r,
    };
    let said =
        "(the sandbox refused part of it; run again without the sandbox, as the user allowed once)";
    Some(match again {
        Ok(o) => Ok(format!("{said}\n{o}")),
        Err(e) => Err(format!("{said}\n{e}")),
    })
}

/// Appends to `text` the pieces of the same kind (thoughts, or answer text) that have
/// already arrived, without waiting: a fast stream then costs the front end one event per
/// read rather than one per piece. Returns the first other item read, to be handled next.
fn merge_ready(
    stream: &mut ProviderStream,
    text: &mut String,
    thought: bool,
) -> Option<Option<Result<ProviderEvent, ProviderError>>> {
    use futures::FutureExt;
    loop {
        match stream.next().now_or_never()? {
            Some(Ok(ProviderEvent::TextDelta(more))) if !thought => text.push_str(&more),
            Some(Ok(ProviderEvent::ThoughtDelta(more))) if thought => text.push_str(&more),
            other => return Some(other),
        }
    }
}

/// The request for the model's next answer: the conversation so far, compacted to fit.
fn provider_request(
    setup: &Setup,
    history: &[ChatMessage],
    tools: &Arc<[ToolSpec]>,
) -> ProviderRequest {
    ProviderRequest {
        model: setup.model.clone(),
        system: setup.system.clone(),
        messages: context::compact(history, &setup.system, tools, &setup.window),
        tools: tools.clone(),
        max_tokens: setup.max_tokens,
    }
}

/// The provider's answer to `request`, started: its stream, or why it could not start.
async fn open_answer(
    provider: &dyn Provider,
    request: ProviderRequest,
    cancel: &CancellationToken,
) -> Result<ProviderStream, ProviderError> {
    tokio::select! {
        _ = cancel.cancelled() => Err(ProviderError::Cancelled),
        s = provider.stream(request, cancel.clone()) => s,
    }
}

fn failed(e: impl std::fmt::Display) -> TurnStop {
    TurnStop::Failed {
        message: e.to_string(),
    }
}

/// The prompt as the transcript keeps it: its text, then a note of each attached image (a
/// transcript is text a person reads and edits; the pixels went to the model once).
pub(super) fn transcript_prompt(request: &TurnRequest) -> String {
    let mut text = request.prompt.clone();
    for image in &request.images {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!(
            "[image attached: {}, {} KB]",
            image.mime_type,
            image.decoded_len().div_ceil(1024)
        ));
    }
    text
}
