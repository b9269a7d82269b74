//! Benchmark: what installed skills cost a turn. For 0, 200 and 2,000 skills in a workspace's
//! `skills/` folder (each with a description of about 150 characters, as real ones are):
//!
//! 1. the time to gather them (`Ops::skills`, done at every turn's setup), median and p90:
//!    the first gather reads and parses every `SKILL.md`, the later ones only those changed;
//! 2. the tokens they add to a turn's request: the instructions' "Skills" section, as
//!    `context_fill` estimates the request, and as the provider stand-in saw the request of a
//!    real turn (its `system` field, in characters and in tokens at the Claude window's rate);
//! 3. a whole turn's setup (`Agent::context_fill`: config, provider, transcript, memory,
//!    skills), median, against the same with none.
//!
//! The list is bounded (`berth_skills::LISTING_CHARS`): 2,000 skills must add no more tokens
//! than 200. `cargo bench -p berth-agent --bench skills` (`BENCH_ROUNDS`, 30).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_agent::{
    AgentBuilder, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions,
    TurnRequest,
};
use berth_ops::{CreateSession, CreateWorkspace, Repository};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};

/// The turn calls no tool; were it to, nobody is there to allow it.
struct Refuse;

#[async_trait]
impl Permissions for Refuse {
    async fn decide(&self, _: &PermissionRequest) -> Decision {
        Decision::Reject
    }
}

struct Figures {
    skills: usize,
    gather: (Duration, Duration),
    setup: Duration,
    fill_tokens: u64,
    system_chars: usize,
    listed: usize,
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = ProviderServer::start_in_background();
    let figures: Vec<Figures> = [0, 200, 2_000]
        .into_iter()
        .map(|n| rt.block_on(measure(&server, n, rounds)))
        .collect();
    let base = &figures[0];
    println!(
        "skills  gather p50   gather p90   setup p50    listed  system chars  +tokens (request)  +tokens (estimate)"
    );
    for f in &figures {
        let added_chars = f.system_chars - base.system_chars;
        println!(
            "{:>6}  {:>9.2?}  {:>11.2?}  {:>10.2?}  {:>6}  {:>12}  {:>17}  {:>18}",
            f.skills,
            f.gather.0,
            f.gather.1,
            f.setup,
            f.listed,
            f.system_chars,
            (added_chars as f64 / 3.5).ceil() as u64,
            f.fill_tokens - base.fill_tokens,
        );
    }
    let (two_hundred, two_thousand) = (&figures[1], &figures[2]);
    let added = |f: &Figures| f.system_chars - base.system_chars;
    // Claude's window counts 3.5 characters a token (berth_agent::context::Window).
    let tokens = |f: &Figures| (added(f) as f64 / 3.5).ceil() as u64;
    println!(
        "setup with 200 skills: {:.2}x the setup with none; with 2,000: {:.2}x",
        two_hundred.setup.as_secs_f64() / base.setup.as_secs_f64(),
        two_thousand.setup.as_secs_f64() / base.setup.as_secs_f64(),
    );
    println!(
        "2,000 skills add {} tokens ({} characters) to a turn's request, 200 add {} ({}): {}",
        tokens(two_thousand),
        added(two_thousand),
        tokens(two_hundred),
        added(two_hundred),
        if tokens(two_thousand) <= tokens(two_hundred) {
            "bounded (goal met)"
        } else {
            "NOT bounded (goal missed)"
        }
    );
}

async fn measure(server: &ProviderServer, skills: usize, rounds: usize) -> Figures {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("berth");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "provider = \"claude\"\n[providers.claude]\nbase_url = \"{}\"\nmodel = \"bench\"\n",
            server.url()
        ),
    )
    .unwrap();
    let env = vec![("ANTHROPIC_API_KEY".to_owned(), "sk-bench".to_owned())];
    let ops = berth_ops::open(&home, &env).unwrap();
    let mut create = CreateWorkspace::new(Repository::None);
    create.name = Some("bench".into());
    let made = ops.create_workspace(create).await.unwrap();
    let ws = ops.resolve_workspace(made.id.as_str()).await.unwrap();
    let folder = ops
        .skill_roots(Some(&ws))
        .into_iter()
        .find(|r| r.source == berth_ops::skills::Source::Workspace)
        .unwrap()
        .path;
    for i in 0..skills {
        let name = format!("skill-{i:04}");
        std::fs::create_dir_all(folder.join(&name)).unwrap();
        std::fs::write(
            folder.join(&name).join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: \"Use when the task is about area {i} of the \
                 system: how its parts fit, the commands that build and test it, and the \
                 mistakes people make there.\"\n---\nThe instructions of {name}.\n"
            ),
        )
        .unwrap();
        std::fs::write(folder.join(&name).join("reference.md"), "details").unwrap();
        // Installed a while ago, as skills are: not just written.
        std::fs::File::options()
            .write(true)
            .open(folder.join(&name).join("SKILL.md"))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }
    let session = ops
        .create_session(CreateSession {
            workspace: ws.id.to_string(),
            ..CreateSession::default()
        })
        .await
        .unwrap();
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();

    let mut gathers = Vec::new();
    let mut setups = Vec::new();
    let mut listed = 0;
    let mut fill_tokens = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let found = ops.skills(Some(&ws)).await.unwrap();
        gathers.push(t.elapsed());
        assert!(found.warnings.is_empty(), "{:?}", found.warnings.first());
        assert_eq!(found.skills.len(), skills);
        listed = found.offered().shown.len();
        let t = Instant::now();
        fill_tokens = agent.context_fill(&session, None).await.unwrap().tokens;
        setups.push(t.elapsed());
    }
    gathers.sort();
    setups.sort();

    // One real turn: what the provider is sent.
    server.push(Reply::anthropic(&Turn::new().text(["ok"])));
    let seen = server.requests().len();
    let permissions = std::sync::Arc::new(Refuse);
    let mut turn = agent
        .start_turn(TurnRequest {
            session: session.clone(),
            prompt: "hello".to_owned(),
            images: Vec::new(),
            cwd: root.path().to_owned(),
            permissions,
            cancel: CancellationToken::new(),
            options: Default::default(),
        })
        .await
        .unwrap();
    while let Some(event) = turn.next_event().await {
        if let AgentEvent::TurnEnded { .. } = event {
            break;
        }
    }
    let request = &server.requests()[seen];
    let system_chars = request.body["system"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| b["text"].as_str().unwrap_or("").chars().count())
                .sum()
        })
        .or_else(|| request.body["system"].as_str().map(|s| s.chars().count()))
        .unwrap_or(0);
    Figures {
        skills,
        gather: (gathers[rounds / 2], gathers[rounds * 9 / 10]),
        setup: setups[rounds / 2],
        fill_tokens,
        system_chars,
        listed,
    }
}
