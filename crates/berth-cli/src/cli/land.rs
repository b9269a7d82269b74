//! The grammar of `berth land`: the merge queue's flags, and the subcommands that follow the
//! lands kept under the home.

use clap::{Args, Subcommand};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LandArgs {
    #[command(subcommand)]
    pub command: Option<LandCommand>,
    #[command(flatten)]
    pub start: StartLandArgs,
}

#[derive(Args)]
pub struct StartLandArgs {
    /// The agents to land, in order: RUN (its one agent that finished), RUN:N (agent N, 1 is
    /// the first) or RUN:best (the pick rule's choice: the passing agent with the fewest
    /// changed lines). An agent picked already counts as landed and is skipped.
    #[arg(value_name = "RUN[:N|best]", required_unless_present_any = ["resume", "batch"])]
    pub targets: Vec<String>,
    /// Land the best passing agent of each run of this batch (`berth run --tasks`), in the
    /// file's order.
    #[arg(long, value_name = "ID", conflicts_with = "targets")]
    pub batch: Option<String>,
    /// Each agent's work as one new commit on its base (default: a merge, or a fast-forward
    /// when the base has not moved).
    #[arg(long, conflicts_with = "rebase")]
    pub squash: bool,
    /// Each agent's commits replayed on its base, one by one (git 2.44 or later); work that
    /// had to be resolved lands as a merge.
    #[arg(long)]
    pub rebase: bool,
    /// Turns an agent gets to resolve its conflicts or mend a check that fails on the
    /// combined tree, before it is left in the queue.
    #[arg(long, value_name = "N", default_value_t = berth_run::DEFAULT_LAND_RETRIES)]
    pub retries: u32,
    /// Hand nothing back: an agent whose work conflicts or fails the check is left at once.
    #[arg(long)]
    pub no_resolve: bool,
    /// Print the plan (order, the branch each lands on, the conflicts to expect, the checks
    /// to run) and change nothing.
    #[arg(long, conflicts_with_all = ["resume", "detach"])]
    pub dry_run: bool,
    /// Go on with a land that was cut off (a crash, Ctrl-C, a checkout in the way): LAND,
    /// else the newest one not over.
    #[arg(long, value_name = "LAND", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["targets", "batch"])]
    pub resume: Option<String>,
    /// Return at once, printing the land's id; a supervisor process drives it
    /// (`berth land show ID` follows it).
    #[arg(long)]
    pub detach: bool,
    /// One JSON object per step (and the plan as one, with --dry-run).
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum LandCommand {
    /// The lands kept under the home, newest first: LAND, STATE, LANDED, LEFT, STARTED.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One land: each agent in its order, where it stands (landed, left and why, waiting),
    /// and its steps.
    Show {
        #[arg(value_name = "LAND")]
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// The supervisor of a detached land (started by `berth land --detach`).
    #[command(hide = true)]
    Supervise {
        #[arg(value_name = "LAND")]
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command, LandArgs, LandCommand};

    /// What `berth land --detach` starts its supervisor with is what this grammar reads.
    #[test]
    fn a_land_supervisors_arguments_parse_back() {
        let how = berth_run::LandSupervisor {
            home: "/some/home".into(),
            land: berth_run::LandId::try_from("0123456789ab".to_owned()).unwrap(),
        };
        let mut argv = vec![std::ffi::OsString::from("berth")];
        argv.extend(how.args());
        let cli = Cli::try_parse_from(argv).unwrap();
        assert_eq!(
            cli.home.as_deref(),
            Some(std::path::Path::new("/some/home"))
        );
        match cli.command {
            Some(Command::Land(LandArgs {
                command: Some(LandCommand::Supervise { id }),
                ..
            })) => assert_eq!(id, how.land.as_str()),
            _ => panic!("not `land supervise`"),
        }
    }
}
