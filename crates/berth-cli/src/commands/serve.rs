//! `berth serve`: berth on the network (berth-serve). This builds the agent and the MCP
//! server as `berth acp` and `berth mcp` do, and hands them to berth-serve with the flags.

use std::time::Duration;

use berth_mcp::BerthMcp;
use berth_ops::{Ops, Refill};
use berth_serve::ServeOptions;

use crate::cli::ServeArgs;

pub async fn run(ops: Ops, args: ServeArgs) -> anyhow::Result<()> {
    let repo = super::mcp::served_repository(&ops, args.repo.as_deref()).await?;
    let loaded = ops.config(None).await?;
    for unknown in &loaded.unknown_keys {
        eprintln!("berth serve: warning: {unknown}");
    }
    let mcp_config = &loaded.config.mcp;
    // A server keeps running: it refills spare checkouts itself.
    let ops = ops.with_refill(Refill::InProcess);
    let agent = berth_agent::AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let mcp = BerthMcp::new(ops.clone(), repo, berth_mcp::DEFAULT_MAX_FILE_BYTES);
    let named_host = args.reach.allow_hosts.first().cloned();
    let tls = args.tls_cert.is_some();
    let options = ServeOptions {
        listen: args.listen,
        token: args.token.filter(|t| !t.is_empty()),
        open: args.open,
        allowed_hosts: args.reach.allow_hosts,
        allowed_origins: args.reach.allow_origins,
        max_connections: args.max_connections,
        max_message_bytes: args.max_message_bytes,
        ping_every: Duration::from_secs(args.ping_every.max(1)),
        acp_http_idle: Duration::from_secs(args.acp_http_idle.max(1)),
        max_prompts_per_minute: args.max_prompts_per_minute,
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        max_mcp_sessions: mcp_config
            .max_sessions
            .map_or(berth_mcp::DEFAULT_MAX_SESSIONS, |n| n.get()),
        mcp_session_idle: mcp_config
            .session_idle_timeout_secs
            .map_or(berth_mcp::DEFAULT_IDLE, |s| Duration::from_secs(s.get())),
    };
    // The device's token is made before the server starts: a name taken is refused now.
    let pairing = match &args.pair {
        Some(name) => Some((name.clone(), pair(&ops, name, args.rotate)?)),
        None => None,
    };
    let mut store = berth_run::RunStore::open(&ops).await?;
    if let Some(node) = &args.node {
        store = store.with_node(node);
    }
    let runs = berth_run::Runs::with_store(ops.clone(), store).with_agent(agent.clone());
    // The worker, beside the server, until the server stops.
    let stop_worker = berth_agent::CancellationToken::new();
    let worker = match args.worker {
        true => {
            if !runs.store().pooled() {
                return Err(berth_run::KeptError::NeedsDatabase.into());
            }
            let options = berth_run::WorkerOptions {
                max_agents: args.max_agents.map_or_else(
                    || std::thread::available_parallelism().map_or(1, |n| n.get()),
                    |n| n.get(),
                ),
                lease: loaded.config.pool.lease(),
            };
            Some(spawn_worker(&runs, options, &stop_worker))
        }
        false => None,
    };
    let served = berth_serve::serve(ops, agent, mcp, runs, options, |listening| {
        let addr = listening.addr;
        let (ws, http) = if tls { ("wss", "https") } else { ("ws", "http") };
        eprintln!("berth serve: ACP at {ws}://{addr}/acp (and {http}://{addr}/acp), MCP at {http}://{addr}/mcp, health at {http}://{addr}/healthz, web page at {http}://{addr}/");
        if let Some(token) = &listening.made_token {
            eprintln!(
                "berth serve: no token was set, so this run's is {token} (clients send `Authorization: Bearer <token>`); the web page, signed in: {}",
                berth_serve::pairing::web_link(&format!("{http}://{addr}"), token)
            );
            eprintln!(
                "berth serve: for one that lasts, set BERTH_SERVE_TOKEN or make one with `berth token create --admin NAME`"
            );
        }
        if let Some((name, token)) = pairing {
            print_pairing(&name, &token, ws, addr, named_host.as_deref());
        }
    })
    .await;
    stop_worker.cancel();
    if let Some(worker) = worker
        && let Err(e) = worker.await
    {
        eprintln!("berth serve: the worker stopped: {e}");
    }
    served?;
    Ok(())
}

/// The worker that takes queued runs from the pool, beside the server until `stop`.
fn spawn_worker(
    runs: &berth_run::Runs,
    options: berth_run::WorkerOptions,
    stop: &berth_agent::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    eprintln!(
        "berth serve: node {} works queued runs, {} agents at once",
        runs.store().node(),
        options.max_agents
    );
    let (runs, stop) = (runs.clone(), stop.clone());
    let work = async move { runs.work(options, stop).await };
    // Said when it happens (the database out of reach at the start), not at the end.
    tokio::spawn(async move {
        if let Err(e) = work.await {
            eprintln!("berth serve: the worker stopped: {e}");
        }
    })
}

/// The token of the device `--pair` names: a new one, or, for a device paired before, one in
/// place of its old token once the person agrees (or `--rotate` said so).
fn pair(ops: &Ops, name: &str, rotate: bool) -> anyhow::Result<String> {
    let device = berth_ops::DeviceId::new(name.to_owned())?;
    let role = berth_serve::Role::Device { device };
    let tokens = berth_serve::TokenStore::new(ops.home());
    match tokens.create(name, role.clone(), None) {
        Ok((_, token)) => Ok(token),
        Err(berth_serve::TokenError::Exists(_)) => {
            super::confirm_or(
                rotate,
                &format!(
                    "The device {name} was paired before. Give it a new token? Its old one stops working, and the device needs the new link."
                ),
                "--rotate",
            )?;
            Ok(tokens.rotate(name, role, None)?.1)
        }
        Err(e) => Err(e.into()),
    }
}

/// The pairing link of the device made for `--pair`, and its QR code, on standard error.
fn print_pairing(
    name: &str,
    token: &str,
    scheme: &str,
    addr: std::net::SocketAddr,
    host: Option<&str>,
) {
    let host = match host {
        Some(h) if h.contains(':') => h.to_owned(),
        Some(h) => format!("{h}:{}", addr.port()),
        None => addr.to_string(),
    };
    let link = berth_serve::pairing::link(&format!("{scheme}://{host}/acp"), name, token);
    eprintln!("berth serve: pair the device {name} with this link (it holds its token):");
    eprintln!("{link}");
    if let Some(code) = berth_serve::pairing::qr(&link) {
        eprintln!("{code}");
    }
    let web = if scheme == "wss" { "https" } else { "http" };
    eprintln!(
        "berth serve: or open the web page in the device's browser: {}",
        berth_serve::pairing::web_link(&format!("{web}://{host}"), token)
    );
    if addr.ip().is_unspecified() && host.starts_with("0.0.0.0") {
        eprintln!(
            "berth serve: the link names 0.0.0.0; start with --allow-host NAME (this machine's name or address) for a link a phone can use"
        );
    } else if host_is_loopback(&host) {
        eprintln!(
            "berth serve: warning: the link names {host}, which only this machine reaches; for a phone, start with --listen 0.0.0.0:{} --allow-host NAME (this machine's name or address on your network)",
            addr.port()
        );
    }
}

/// Whether `host` (`name:port`, `[v6]:port` or an address) is this machine only.
fn host_is_loopback(host: &str) -> bool {
    if let Ok(addr) = host.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
