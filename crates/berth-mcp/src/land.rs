//! Lands over MCP (`land`, `land_status`): an orchestrating agent brings the winners of its
//! runs onto their base in order, as `berth land` does, through the same engine
//! (`berth_run::Lander`). A land is driven in this server's background, its agents' turns
//! hosted here (SIGTERM stays the server's); the tool answers at once with the land's id, and
//! `land_status` reads its record, which every step rewrites, in this process or any other.
//! A land cut off with the server (its record says landing, nobody drives it) is shown
//! `cut off`, and `berth land --resume` goes on.

use berth_ops::{Error, ErrorKind, MergeMode};
use berth_run::{LandRequest, LandStore, Lander, Target};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::context::Context;

/// What `land` lands, and how.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LandArgs {
    /// The agents to land, in order: `RUN` (its one finished agent), `RUN:N` (agent N, 1 is
    /// the first) or `RUN:best` (the pick rule's choice). RUN is a kept run's id or a 4+
    /// character prefix (`kept_run` of session_status).
    pub runs: Vec<String>,
    /// How each agent's work is brought onto the base: `merge` (the default), `squash` or
    /// `rebase`, as `berth run pick` does it.
    #[serde(default)]
    #[schemars(extend("enum" = ["merge", "squash", "rebase"]))]
    pub mode: Option<String>,
    /// Turns each agent gets to resolve a conflict or mend a check that fails on the combined
    /// tree (default 2).
    #[serde(default)]
    pub retries: Option<u32>,
    /// Whether conflicts and red checks go back to the agent that made them, in a turn of
    /// its own session (default true); false leaves such an agent in the queue with the
    /// reason.
    #[serde(default)]
    pub resolve: Option<bool>,
    /// Only say what the land would do (the order, each agent's branch, the conflicts to
    /// expect, the checks to run), moving nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Which land `land_status` reads.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LandRef {
    /// The land's id, as `land` answered it, or a 4+ character prefix.
    pub land_id: String,
}

fn mode(asked: Option<&str>) -> Result<MergeMode, Error> {
    match asked.unwrap_or("merge") {
        "merge" => Ok(MergeMode::Merge),
        "squash" => Ok(MergeMode::Squash),
        "rebase" => Ok(MergeMode::Rebase),
        other => Err(Error::invalid(format!(
            "mode {:?} is not a way to land: give merge, squash or rebase",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

/// The request `args` asks for, landing into the server's repository.
fn request(cx: &Context, args: &LandArgs) -> Result<LandRequest, Error> {
    let targets = args
        .runs
        .iter()
        .map(|t| {
            t.parse::<Target>()
                .map_err(|e| Error::invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dir = match &cx.repo {
        Some(repo) => repo.clone(),
        None => std::env::current_dir().map_err(|e| {
            Error::rule(
                ErrorKind::Io,
                format!("cannot read the server's folder: {e}"),
            )
        })?,
    };
    Ok(LandRequest {
        targets,
        mode: mode(args.mode.as_deref())?,
        retries: args.retries.unwrap_or(berth_run::DEFAULT_LAND_RETRIES),
        resolve: args.resolve.unwrap_or(true),
        dir,
        batch: None,
    })
}

/// The lander of this server: its agents' turns hosted here.
async fn lander(cx: &Context) -> Result<Lander, Error> {
    let runs = cx.runs.store(&cx.ops).await?.clone();
    Ok(Lander::new(cx.ops.clone(), runs, cx.runs.agent(&cx.ops).await?).hosted())
}

/// `land`: the plan, or the land created and driven in the background; its record as it
/// starts.
pub async fn land(cx: &Context, args: LandArgs) -> Result<(Value, String), Error> {
    let request = request(cx, &args)?;
    let lander = lander(cx).await?;
    if args.dry_run {
        let plan = lander.plan(&request).await?;
        let lines: Vec<String> = plan
            .items
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let conflicts = match i.conflicts.is_empty() {
                    true => String::new(),
                    false => format!(", conflicts expected in {}", i.conflicts.join(", ")),
                };
                format!(
                    "{}. {} {}:{} onto {}{conflicts}",
                    n + 1,
                    i.action,
                    i.run,
                    i.agent,
                    i.into.as_deref().unwrap_or("its base")
                )
            })
            .collect();
        let text = format!("nothing was changed (dry_run): {}", lines.join("; "));
        return Ok((json!({ "dry_run": true, "plan": plan }), text));
    }
    let held = lander.create(request).await?;
    // Held by this server, which drives it from now on.
    let mut value = shown(&berth_run::SeenLand {
        record: held.record.clone(),
        driven: true,
    });
    let id = held.record.id.clone();
    tokio::spawn(async move {
        if let Err(e) = lander.drive(held).await {
            // Its record says where it stopped; `berth land --resume` goes on.
            tracing::warn!(land = %id, "land {id}: {e}");
        }
    });
    // Driven now by this server, whatever the record said when it was created.
    value["state"] = json!("landing");
    value["dry_run"] = json!(false);
    let text = format!(
        "land {} started with {} agent(s); follow it with land_status",
        value["land_id"].as_str().unwrap_or_default(),
        value["items"].as_array().map_or(0, Vec::len)
    );
    Ok((value, text))
}

/// `land_status`: the land's record as kept, and what it came to.
pub async fn status(cx: &Context, args: LandRef) -> Result<(Value, String), Error> {
    let store = LandStore::open(&cx.ops);
    let id = store.resolve(&args.land_id).await?;
    let seen = store.seen(&id).await?;
    let value = shown(&seen);
    let record = seen.record;
    let (landed, left) = record.tally();
    let text = format!(
        "land {id}: {}; landed {}, left {}{}",
        value["state"].as_str().unwrap_or_default(),
        landed.len(),
        left.len(),
        record
            .message
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default()
    );
    Ok((value, text))
}

/// A land as the tools give it: its record, its id as `land_id`, `landed` and `left` as
/// `RUN:N`, `finished` once nothing more happens to it without a resume, and its state as a
/// reader sees it (`cut off` for one landing that nobody drives).
fn shown(seen: &berth_run::SeenLand) -> Value {
    let record = &seen.record;
    let mut value = serde_json::to_value(record).unwrap_or(Value::Null);
    let state = seen.state();
    let (landed, left) = record.tally();
    value["land_id"] = json!(record.id);
    value["state"] = json!(state);
    value["landed"] = json!(landed);
    value["left"] = json!(left);
    value["finished"] = json!(seen.finished());
    value
}
