//! `berth land`: the merge queue, driven in this process (Ctrl-C stops it after its current
//! step, to be resumed), by a detached supervisor, or only planned; and `land list` and
//! `show`, which follow the lands kept under the home.

use std::io::IsTerminal;

use anyhow::{Context, bail};
use berth_agent::AgentBuilder;
use berth_ops::{MergeMode, Ops};
use berth_run::{
    ItemState, LandPlan, LandRecord, LandRequest, LandState, LandStep, Lander, RunStore, StepKind,
    Target,
};

use super::Interrupted;
use crate::cli::{LandArgs, LandCommand, StartLandArgs};
use crate::render;

pub async fn run(ops: Ops, args: LandArgs) -> anyhow::Result<()> {
    let runs = RunStore::open(&ops).await?;
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let lander = Lander::new(ops.clone(), runs.clone(), agent);
    match args.command {
        Some(LandCommand::List { json }) => list(&lander, json).await,
        Some(LandCommand::Show { id, json }) => show(&lander, &id, json).await,
        Some(LandCommand::Supervise { id }) => {
            let id = lander.store().resolve(&id).await?;
            let held = lander.store().take(&id).await?;
            lander.drive(held).await?;
            Ok(())
        }
        None => start(&ops, &runs, lander, args.start).await,
    }
}

async fn request(
    runs: &RunStore,
    lander: &Lander,
    args: &StartLandArgs,
) -> anyhow::Result<LandRequest> {
    let mut targets = args
        .targets
        .iter()
        .map(|t| t.parse::<Target>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| berth_ops::Error::invalid(e.to_string()))?;
    let mut batch = None;
    if let Some(named) = &args.batch {
        let id = berth_run::resolve_batch(runs, named).await?;
        let (chosen, left_out) = lander.batch_targets(&id).await?;
        for (run, why) in left_out {
            eprintln!("run {run} is left out: {}", render::cell(&why));
        }
        targets = chosen;
        batch = Some(id.to_string());
    }
    Ok(LandRequest {
        targets,
        mode: match (args.squash, args.rebase) {
            (true, _) => MergeMode::Squash,
            (_, true) => MergeMode::Rebase,
            _ => MergeMode::Merge,
        },
        retries: args.retries,
        resolve: !args.no_resolve,
        dir: std::env::current_dir().context("cannot read the current folder")?,
        batch,
    })
}

async fn start(
    ops: &Ops,
    runs: &RunStore,
    lander: Lander,
    args: StartLandArgs,
) -> anyhow::Result<()> {
    let held = match &args.resume {
        Some(id) => {
            let id = match id.as_str() {
                "" => lander.store().newest_open().await?,
                id => lander.store().resolve(id).await?,
            };
            lander.take(&id).await?
        }
        None => {
            let request = request(runs, &lander, &args).await?;
            if args.dry_run {
                let plan = lander.plan(&request).await?;
                return print_plan(&plan, args.json);
            }
            lander.create(request).await?
        }
    };
    if args.detach {
        let id = held.record.id.clone();
        let exe = std::env::current_exe().context("cannot find the berth program to start")?;
        let pid = berth_run::detach_land(lander.store(), ops.home(), held, &exe).await?;
        if args.json {
            render::json(&serde_json::json!({ "land": id, "supervisor": pid }))?;
        } else {
            render::line(&id)?;
            eprintln!("land {id} is driven by process {pid}: `berth land show {id}` follows it");
        }
        return Ok(());
    }
    foreground(lander, held, args.json).await
}

/// Drives the land here, printing each step; Ctrl-C stops it after the current step.
async fn foreground(lander: Lander, held: berth_run::HeldLand, json: bool) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let lander = lander.with_steps(tx);
    let stop = lander.stopper();
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut driving = tokio::spawn(async move { lander.drive(held).await });
    let mut asked_to_stop = false;
    let record = loop {
        tokio::select! {
            Some(step) = rx.recv() => print_step(&step, json)?,
            _ = interrupts.recv() => {
                if !asked_to_stop {
                    asked_to_stop = true;
                    stop.cancel();
                    eprintln!("stopping the land after its current step (a turn under way is stopped; Ctrl-C again ends at once)…");
                } else {
                    bail!(Interrupted("land stopped at once by a second Ctrl-C; `berth land --resume` goes on".to_owned()));
                }
            }
            done = &mut driving => break done.context("the land's task failed")??,
        }
    };
    while let Ok(step) = rx.try_recv() {
        print_step(&step, json)?;
    }
    if !json {
        print_summary(&record)?;
    }
    if record.state == LandState::Stopped {
        let why = record.message.clone().unwrap_or_default();
        if asked_to_stop {
            bail!(Interrupted(format!(
                "land {} stopped by Ctrl-C; `berth land --resume {}` goes on",
                record.id, record.id
            )));
        }
        bail!(berth_ops::Error::refused(format!(
            "land {} stopped: {why}; `berth land --resume {}` goes on",
            record.id, record.id
        )));
    }
    if record.items.iter().any(|i| !i.state.is_done()) {
        bail!(
            "not every agent landed; `berth land show {}` says why",
            record.id
        );
    }
    Ok(())
}

fn print_step(step: &LandStep, json: bool) -> anyhow::Result<()> {
    if json {
        let mut value = serde_json::to_value(step)?;
        value["event"] = serde_json::json!("step");
        render::line(serde_json::to_string(&value)?)?;
        return Ok(());
    }
    let who = match (&step.run, step.agent) {
        (Some(run), Some(agent)) => format!("{run}:{agent} "),
        _ => String::new(),
    };
    let word = serde_json::to_value(step.step)?
        .as_str()
        .unwrap_or("step")
        .replace('_', " ");
    render::line(format!("{who}{word}: {}", render::cell(&step.text)))?;
    if step.step == StepKind::Checked
        && let Some(check) = step.check.as_ref().filter(|c| !c.passed)
        && let Some(out) = &check.output
    {
        for line in out.lines() {
            render::line(format!("    {}", render::cell(line)))?;
        }
    }
    Ok(())
}

fn print_summary(record: &LandRecord) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = record
        .items
        .iter()
        .map(|i| {
            vec![
                i.asked.clone(),
                i.agent.map(|a| (a + 1).to_string()).unwrap_or_default(),
                i.state.as_str().to_owned(),
                render::cell(i.reason.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    if std::io::stdout().is_terminal() || !rows.is_empty() {
        render::table(&["RUN", "AGENT", "STATE", "WHY"], &rows)?;
    }
    Ok(())
}

fn print_plan(plan: &LandPlan, json: bool) -> anyhow::Result<()> {
    if json {
        render::json(plan)?;
        return Ok(());
    }
    for (n, item) in plan.items.iter().enumerate() {
        let onto = item.into.as_deref().unwrap_or("its base");
        let mut line = format!(
            "{}. {} {}:{} ({}) onto {onto}",
            n + 1,
            item.action,
            item.run,
            item.agent,
            item.label
        );
        if !item.conflicts.is_empty() {
            let files: Vec<String> = item
                .conflicts
                .iter()
                .map(|f| render::file_name(f))
                .collect();
            line.push_str(&format!("; conflicts expected in {}", files.join(", ")));
        }
        if let Some(check) = &item.check {
            line.push_str(&format!("; check `{}`", render::cell(check)));
        }
        if let Some(note) = &item.note {
            line.push_str(&format!(" ({})", render::cell(note)));
        }
        render::line(line)?;
    }
    let resolve = match (plan.resolve, plan.retries) {
        (false, _) => "nothing is handed back (--no-resolve)".to_owned(),
        (true, n) => format!("conflicts and red checks go back to their agent, {n} turn(s) each"),
    };
    eprintln!("{resolve}; nothing was changed (--dry-run)");
    Ok(())
}

async fn list(lander: &Lander, json: bool) -> anyhow::Result<()> {
    let mut lands = Vec::new();
    for land in lander.store().list().await? {
        match land {
            Ok(l) => lands.push(lander.store().look(l).await),
            Err(e) => eprintln!("berth: {e}"),
        }
    }
    if json {
        let shown: Vec<serde_json::Value> = lands.iter().map(summary).collect();
        render::json(&shown)?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = lands
        .iter()
        .map(|seen| {
            let l = &seen.record;
            let (landed, left) = l.tally();
            vec![
                l.id.to_string(),
                seen.state().to_owned(),
                landed.len().to_string(),
                left.len().to_string(),
                render::time(l.created_at),
            ]
        })
        .collect();
    render::table(&["LAND", "STATE", "LANDED", "LEFT", "STARTED"], &rows)?;
    Ok(())
}

fn summary(seen: &berth_run::SeenLand) -> serde_json::Value {
    let land = &seen.record;
    let (landed, left) = land.tally();
    serde_json::json!({
        "id": land.id,
        "state": seen.state(),
        "created_at": land.created_at,
        "ended_at": land.ended_at,
        "landed": landed,
        "left": left,
        "message": land.message,
    })
}

async fn show(lander: &Lander, id: &str, json: bool) -> anyhow::Result<()> {
    let id = lander.store().resolve(id).await?;
    let seen = lander.store().seen(&id).await?;
    let state = seen.state();
    let land = seen.record;
    if json {
        let mut value = serde_json::to_value(&land)?;
        value["state"] = serde_json::json!(state);
        render::json(&value)?;
        return Ok(());
    }
    render::line(format!("land {}: {state}", land.id))?;
    if let Some(m) = &land.message {
        render::line(format!("  {}", render::cell(m)))?;
    }
    for (k, item) in land.items.iter().enumerate() {
        let agent = item
            .agent
            .map(|a| format!(" agent {}", a + 1))
            .unwrap_or_default();
        let onto = item
            .into
            .as_ref()
            .map(|i| format!(" onto {i}"))
            .unwrap_or_default();
        let mut line = format!(
            "{}. run {}{agent}{onto}: {}",
            k + 1,
            item.run,
            item.state.as_str()
        );
        if let Some(why) = &item.reason
            && item.state != ItemState::Landed
        {
            line.push_str(&format!(" ({})", render::cell(why)));
        }
        render::line(line)?;
        for step in land.steps.iter().filter(|s| s.item == Some(k)) {
            let word = serde_json::to_value(step.step)?
                .as_str()
                .unwrap_or("step")
                .replace('_', " ");
            render::line(format!("   {word}: {}", render::cell(&step.text)))?;
        }
    }
    Ok(())
}
