//! What an [`Action`] does, through the same functions of berth-run and berth-ops as the
//! CLI, MCP and the web page: the dashboard writes no rule of its own. Each ends in one
//! [`Update`]: what it read, or a line saying what it did or why it could not.

use std::path::PathBuf;

use berth_ops::{Ops, Repository};
use berth_run::{How, Lander, RunRequest, RunStore, Runs, Started, StopRequest, Telling, Told};

use crate::model::{Action, NewRun, Update};

/// What every action runs with.
#[derive(Clone)]
pub struct Context {
    pub ops: Ops,
    /// The runs' lifecycle: a start, resume or tell from here goes through it, detached.
    pub runs: Runs,
    pub store: RunStore,
    pub program: PathBuf,
    pub here: PathBuf,
    /// Creates the lands of the queue, which a supervisor process then drives.
    pub lander: Lander,
    /// The trial merges already made, kept while the dashboard is open.
    pub foresight: berth_run::Foresight,
}

impl Action {
    /// Whether the list of runs should be read again once it is done.
    pub fn changes_runs(&self) -> bool {
        matches!(
            self,
            Action::Pick { .. }
                | Action::Discard { .. }
                | Action::Stop { .. }
                | Action::Resume(_)
                | Action::Tell { .. }
                | Action::Answer { .. }
                | Action::Start(_)
                | Action::Land(_)
        )
    }
}

/// Does `action`.
pub async fn act(cx: &Context, action: Action) -> Update {
    let (ops, store) = (&cx.ops, &cx.store);
    match action {
        Action::Follow(_) | Action::Quit | Action::StepIn(_) => Update::Done(String::new()),
        Action::MoreRuns(cursor) => match store.page(crate::app::RUNS_PAGE, Some(&cursor)).await {
            Ok(page) => Update::MoreRuns {
                runs: page.runs.into_iter().filter_map(Result::ok).collect(),
                next: page.next,
            },
            Err(e) => Update::Failed(e.to_string()),
        },
        Action::LoadDiff {
            run,
            agent,
            workspace,
        } => Update::Diff {
            run,
            agent,
            diff: berth_run::workspace_diff(ops, store, &workspace, true)
                .await
                .map_err(|e| e.to_string()),
        },
        Action::LoadCheck { run, agent } => kept_check(store, run, agent).await,
        Action::LoadConflicts { run, agent } => match store.load(&run).await {
            Ok(record) => Update::Conflicts {
                seen: cx.foresight.foresee_agent(ops, store, &record, agent).await,
                run,
                agent,
            },
            Err(e) => Update::Failed(format!("cannot read run {run}: {e}")),
        },
        Action::LoadSaid {
            run,
            agent,
            question,
        } => said(store, run, agent, question).await,
        Action::LoadWorkspaces => match ops.list_workspaces().await {
            Ok(list) => Update::Workspaces(list),
            Err(e) => Update::Failed(format!("cannot list the workspaces: {e}")),
        },
        Action::LoadWorkspaceStatus(id) => workspace_status(ops, id).await,
        Action::LoadSessions => match ops.list_sessions(None).await {
            Ok(list) => Update::Sessions(list),
            Err(e) => Update::Failed(format!("cannot list the sessions: {e}")),
        },
        Action::LoadSessionTranscript(id) => session_transcript(ops, id).await,
        Action::Pick {
            run,
            agent,
            force,
            also,
        } => pick(cx, run, agent, force, also).await,
        Action::Discard { run, agent } => match berth_run::discard(ops, store, &run, agent).await {
            Ok(dropped) => Update::Done(format!(
                "dropped {} workspace(s) of run {run}",
                dropped.len()
            )),
            Err(e) => Update::Failed(e.to_string()),
        },
        Action::Stop { run, agent } => stop(store, run, agent).await,
        Action::Resume(run) => match cx.runs.resume(&run, How::Detached).await {
            Ok(Started::Detached { supervisor, .. }) => {
                Update::Done(format!("run {run} resumed in process {supervisor}"))
            }
            Ok(_) => Update::Done(format!("run {run} resumed")),
            Err(e) => Update::Failed(e.to_string()),
        },
        Action::Tell { run, agent, text } => tell(cx, run, agent, text).await,
        Action::Answer {
            run,
            agent,
            question,
            answer,
        } => match store
            .queue_answer_to(&run, Some(agent), Some(&question), answer)
            .await
        {
            Ok((i, tool)) => Update::Done(format!(
                "answered agent {}: {tool}: {}",
                i + 1,
                answer.as_str()
            )),
            Err(e) => Update::Failed(e.to_string()),
        },
        Action::Start(form) => match start(cx, form).await {
            Ok(message) => Update::Done(message),
            Err(e) => Update::Failed(e),
        },
        Action::LoadLand(id) => load_land(&cx.lander, id).await,
        Action::Land(targets) => land(cx, targets).await,
    }
}

/// The git status of a workspace; none when it cannot be read.
async fn workspace_status(ops: &Ops, id: String) -> Update {
    let status = match ops.resolve_workspace(&id).await {
        Ok(ws) => ops.git_status(&ws).await.ok().flatten(),
        Err(_) => None,
    };
    Update::WorkspaceStatus { id, status }
}

/// A session's messages, or why they cannot be read.
async fn session_transcript(ops: &Ops, id: String) -> Update {
    let messages = match ops.resolve_session(&id).await {
        Ok(session) => ops
            .transcript(&session)
            .await
            .map(|t| t.messages)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    Update::SessionTranscript { id, messages }
}

/// Merges an agent's work, as `berth run pick RUN:N` does.
async fn pick(
    cx: &Context,
    run: berth_run::RunId,
    agent: usize,
    force: bool,
    also: bool,
) -> Update {
    let (ops, store) = (&cx.ops, &cx.store);
    let pick = berth_run::Pick {
        run: run.clone(),
        choice: berth_run::Choice::Agent(agent),
        mode: berth_ops::MergeMode::Merge,
        keep_others: false,
        force,
        also,
    };
    let against = match force {
        true => " against its evidence",
        false => "",
    };
    match berth_run::pick(ops, store, pick, &cx.here).await {
        Ok(picked) => Update::Done(format!(
            "picked agent {} of run {run}{against}: {} commit(s) merged into {}",
            agent + 1,
            picked.merge.merged.commits,
            picked.merge.merged.into
        )),
        Err(e) => Update::Failed(format!("cannot pick agent {}: {e}", agent + 1)),
    }
}

/// Asks a run's supervisor to stop one agent, or all of them.
async fn stop(store: &RunStore, run: berth_run::RunId, agent: Option<usize>) -> Update {
    let what = match agent {
        Some(i) => StopRequest::Agent(i),
        None => StopRequest::All,
    };
    match store.request_stop(&run, what).await {
        Ok(_) => Update::Done(format!("asked run {run} to stop")),
        Err(e) => Update::Failed(e.to_string()),
    }
}

/// The queue landed as `berth land RUN:N … --detach` lands it: created here (refused at
/// once, with nothing recorded, when an agent cannot land), then driven by a supervisor
/// process of its own.
async fn land(cx: &Context, targets: Vec<(berth_run::RunId, usize)>) -> Update {
    let request = berth_run::LandRequest {
        targets: targets
            .into_iter()
            .map(|(run, agent)| berth_run::Target {
                run: run.to_string(),
                which: berth_run::Which::Agent(agent),
            })
            .collect(),
        mode: berth_ops::MergeMode::Merge,
        retries: berth_run::DEFAULT_LAND_RETRIES,
        resolve: true,
        dir: cx.here.clone(),
        batch: None,
    };
    let held = match cx.lander.create(request).await {
        Ok(held) => held,
        Err(e) => return Update::Failed(format!("cannot land the queue: {e}")),
    };
    let record = held.record.clone();
    let store = cx.lander.store();
    match berth_run::detach_land(store, cx.ops.home(), held, &cx.program).await {
        Ok(pid) => Update::LandStarted { record, pid },
        Err(e) => Update::Failed(format!(
            "land {} was recorded, but its supervisor did not take it: {e}; `berth land --resume {}` goes on",
            record.id, record.id
        )),
    }
}

/// Land `id` (`None`: the newest kept one) as it is kept now, and whether a process drives it.
async fn load_land(lander: &Lander, id: Option<berth_run::LandId>) -> Update {
    let store = lander.store();
    let read = match id {
        Some(id) => store.load(&id).await.map(Some),
        None => store
            .list()
            .await
            .map(|lands| lands.into_iter().find_map(Result::ok)),
    };
    let mut record = match read {
        Ok(record) => record,
        Err(e) => return Update::Failed(format!("cannot read the land: {e}")),
    };
    let mut driven = false;
    if let Some(r) = record.take() {
        let seen = store.look(r).await;
        driven = seen.driven;
        record = Some(seen.record);
    }
    Update::Land { record, driven }
}

/// A run started from the form, as `berth run --detach` starts one: the agents chosen by
/// the same rules, checked before anything is made. It asks the person watching about a
/// call its policy does not cover, since they are here to answer.
async fn start(cx: &Context, form: NewRun) -> Result<String, String> {
    let config = cx.ops.config(None).await.map_err(|e| e.to_string())?.config;
    let agents = form.agents.trim();
    let specs: Vec<String> = agents
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let counted = agents.parse::<usize>().is_ok();
    let choice = berth_run::AgentChoice {
        agents: counted.then_some(agents),
        agent: match counted {
            true => &[],
            false => &specs,
        },
        model: None,
        agent_cmd: None,
    };
    let agents = berth_run::choose_agents(choice, &config).map_err(|e| e.to_string())?;
    let allow: Vec<String> = form
        .allow
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "all")
        .map(str::to_owned)
        .collect();
    let request = RunRequest {
        policy: berth_run::Policy::new(&allow, form.allow.trim() == "all"),
        check: Some(form.check.trim().to_owned()).filter(|c| !c.is_empty()),
        ask: berth_run::ask_wait(true, None, &config),
        ..RunRequest::new(
            form.task.trim().to_owned(),
            Repository::Around(cx.here.clone()),
            agents,
        )
    };
    match cx.runs.start(request, How::Detached).await {
        Ok(Started::Detached { record, supervisor }) => {
            Ok(format!("run {} started in process {supervisor}", record.id))
        }
        Ok(_) => Ok("run started".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// An agent's check output as the run keeps it on this machine.
async fn kept_check(store: &RunStore, run: berth_run::RunId, agent: usize) -> Update {
    let path = store.check_path(&run, agent);
    // Up to a MiB and more: read off the async threads.
    let kept = tokio::task::spawn_blocking(move || berth_run::read_kept_check(&path))
        .await
        .map_err(|e| e.to_string())
        .and_then(|read| read.map_err(|e| e.to_string()))
        // Shown as lines, through berth-core's `shown`: a byte that is not UTF-8 as its escape.
        .map(|bytes| {
            bytes.map(|b| berth_ops::shown::visible(&b, berth_ops::shown::Form::Lines).into_owned())
        });
    Update::Check { run, agent, kept }
}

/// What an agent said before it asked `question`, from its run's events.
async fn said(store: &RunStore, run: berth_run::RunId, agent: usize, question: String) -> Update {
    match store.events(&run, 0).await {
        Ok((events, _)) => Update::Said {
            text: crate::lines::said_before(&events, agent, &question),
            run,
            agent,
            question,
        },
        Err(e) => Update::Failed(format!("cannot read what agent {} said: {e}", agent + 1)),
    }
}

/// An agent told `text`, as `berth run tell --detach` tells it; the text shows in its
/// transcript from the run's events (`RunEvent::Told`), as any front end's tell does.
async fn tell(cx: &Context, run: berth_run::RunId, agent: usize, text: String) -> Update {
    let telling = Telling {
        agent: Some(berth_run::AgentNumber::of_index(agent)),
        text: &text,
        ..Telling::default()
    };
    let message = match cx.runs.tell(&run, telling, How::Detached).await {
        Ok(Told::Queued { agent }) => {
            format!(
                "agent {} is told at its next step, or once its current turn ends",
                agent + 1
            )
        }
        Ok(Told::Detached { agent, supervisor }) => {
            format!("agent {} is told, in process {supervisor}", agent + 1)
        }
        Ok(_) => format!("agent {} is told", agent + 1),
        Err(e) => return Update::Failed(e.to_string()),
    };
    Update::Done(message)
}
