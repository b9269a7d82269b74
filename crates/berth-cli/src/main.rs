//! `berth`: parses the command line and hands it to the libraries. See `cli.rs` for the grammar
//! and `commands/` for what each command does; neither holds domain logic.

#![forbid(unsafe_code)]
// The futures of `berth mcp` and `berth serve` nest every front end's async calls (a tool,
// its kept run, its store); laying one out in an optimized build goes deeper than the
// compiler's default limit of 128.
#![recursion_limit = "256"]

mod cli;
mod commands;
mod completion;
mod logging;
mod man;
mod progress;
mod render;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // A network a berth that started this one handed on is taken before anything else is
    // started, so nothing unconfined inherits its descriptors.
    berth_ops::take_handed_network();
    // Asked by the shell for completions (`COMPLETE=bash berth …`): answer, and exit.
    clap_complete::CompleteEnv::with_factory(<cli::Cli as clap::CommandFactory>::command)
        .complete();
    let cli = cli::Cli::parse();
    // `berth` alone: the dashboard for a person at a terminal; for a script, the help and
    // status 2, as a missing command always was.
    let command = match cli.command {
        Some(command) => command,
        None if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => {
            cli::Command::Ui
        }
        None => {
            let mut help = <cli::Cli as clap::CommandFactory>::command();
            let _ = help.write_help(&mut std::io::stderr());
            return ExitCode::from(2);
        }
    };
    if let cli::Command::Man { command, out } = &command {
        return match man::write(command, out.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("berth: {e:#}");
                ExitCode::from(exit_status(&e))
            }
        };
    }
    if let cli::Command::Completions { shell } = command {
        return match completion::print_registration(shell) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("berth: cannot write the completion script: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let serves_many = serves_many(&command);
    let server = is_server(&command);
    logging::init(cli.verbose, server);
    let mut builder = if serves_many {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("berth: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli.home, command)) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`berth workspace list | head`) is not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => report(&e),
    }
}

/// Whether the command runs on a worker per core. A command serves one caller and is done: one thread is fastest. So is `berth acp`, which
/// serves one editor: a streamed answer hops between the provider's connection, the turn
/// and the editor's pipe, and on one thread those hops cost no wakeup of another core
/// (acp_stream: relay / direct 1.0-1.4 on one thread, 1.5-2.5 on a worker per core, on two
/// cores). Its durable writes still run on the blocking pool, so one session's fsync holds
/// up no other's stream. An HTTP server may serve several clients at once, and a run's
/// supervisor streams several agents while it writes their records: a worker per core.
fn serves_many(command: &cli::Command) -> bool {
    matches!(
        command,
        cli::Command::Mcp(args) if args.transport == cli::Transport::Http
    ) || matches!(command, cli::Command::Serve(_) | cli::Command::Ui)
        || matches!(
            command,
            cli::Command::Run(run) if matches!(
                run.command,
                None | Some(
                    cli::RunCommand::Resume { .. }
                        | cli::RunCommand::Supervise { .. }
                        | cli::RunCommand::Attach { .. }
                )
            )
        )
}

/// Whether the command logs as a server does. A server's output is its log: structured lines. A run's supervisor writes to the
/// run's log file.
fn is_server(command: &cli::Command) -> bool {
    matches!(command, cli::Command::Serve(_))
        || matches!(
            command,
            cli::Command::Run(run) if matches!(run.command, Some(cli::RunCommand::Supervise { .. }))
        )
}

/// Says why a command failed, on stderr; its exit status.
fn report(e: &anyhow::Error) -> ExitCode {
    // A refusal to lose work names the CLI's own override; anything else is said
    // whole, with its causes.
    let forced = e
        .downcast_ref::<berth_ops::Error>()
        .map(|op| op.message_with_force("--force"))
        .filter(|m| {
            e.downcast_ref::<berth_ops::Error>()
                .is_some_and(|op| *m != op.to_string())
        });
    // A message may quote an agent's words or file names (git's, a check's): shown
    // with their control characters as escapes.
    let message = crate::render::lines(&forced.unwrap_or_else(|| format!("{e:#}")));
    match listing_hint(e) {
        Some(command) => eprintln!("berth: {message}: `{command}`"),
        None => eprintln!("berth: {message}"),
    }
    ExitCode::from(exit_status(e))
}

/// The command that lists what an unknown workspace or session name could have meant. The
/// libraries' messages end "list the … to see theirs" and name no front end's commands; the
/// CLI adds its own.
fn listing_hint(e: &anyhow::Error) -> Option<&'static str> {
    let what = e.chain().find_map(|c| {
        let core = c.downcast_ref::<berth_core::Error>().or_else(|| {
            match c.downcast_ref::<berth_ops::Error>()? {
                berth_ops::Error::Store(core) => Some(core),
                _ => None,
            }
        })?;
        match core {
            berth_core::Error::NotFound {
                what,
                hint: Some(_),
            } => Some(what),
            _ => None,
        }
    })?;
    if what.starts_with("workspace ") {
        Some("berth workspace list")
    } else if what.starts_with("session ") {
        Some("berth session list --all")
    } else if what.starts_with("binding ") {
        Some("berth binding list")
    } else {
        None
    }
}

/// Reads the kind of an error of one type, where the error is one.
type KindReader = fn(&(dyn std::error::Error + 'static)) -> Option<berth_ops::ErrorKind>;

/// Every public error type of berth's libraries, each a [`berth_ops::Kinded`]: the one
/// table of them (`tests/error_kinds.rs` fails when a type is missing).
const ERROR_TYPES: &[KindReader] = {
    use berth_ops::kind_as;
    &[
        kind_as::<berth_ops::Error>,
        kind_as::<berth_ops::GitError>,
        kind_as::<berth_ops::GitSetupError>,
        kind_as::<berth_ops::SandboxError>,
        kind_as::<berth_ops::SkillError>,
        kind_as::<berth_core::Error>,
        kind_as::<berth_core::InvalidInput>,
        kind_as::<berth_agent::AgentError>,
        kind_as::<berth_agent::providers::SetupError>,
        kind_as::<berth_agent::ProviderError>,
        kind_as::<berth_run::RunError>,
        kind_as::<berth_run::KeptError>,
        kind_as::<berth_run::ForesightError>,
        kind_as::<berth_run::TasksError>,
        kind_as::<berth_run::BadLandId>,
        kind_as::<berth_run::BadTarget>,
        kind_as::<berth_mcp::ServeError>,
        kind_as::<berth_serve::ServeError>,
        kind_as::<berth_serve::TokenError>,
        kind_as::<berth_serve::tls::TlsError>,
    ]
};

/// The exit status of a failed command, by the kind of its error (`cli::EXIT_STATUS` lists
/// them for `--help`): the first error in the chain of a type of berth's decides.
fn exit_status(e: &anyhow::Error) -> u8 {
    if e.chain()
        .any(|c| c.downcast_ref::<commands::Interrupted>().is_some())
    {
        return 130;
    }
    e.chain()
        .find_map(|c| ERROR_TYPES.iter().find_map(|read| read(c)))
        .map_or(1, berth_ops::ErrorKind::exit_status)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
