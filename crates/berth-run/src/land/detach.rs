//! A land handed to a supervisor process of its own (`berth land --detach`): the process
//! outlives whoever started it, and this returns once it has taken the land, so a caller
//! never reports a land started that then silently was not.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_ops::ErrorKind;

use super::record::{LandId, LandState};
use super::store::{HeldLand, LandStore};

/// How long a supervisor may take to take its land.
const SUPERVISOR_START: Duration = Duration::from_secs(15);

/// What a land's supervisor is started with: the one contract between the process that
/// detaches a land and the command line that drives it (`berth --home HOME land supervise
/// ID`), written here and parsed by the CLI's grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandSupervisor {
    pub home: PathBuf,
    pub land: LandId,
}

impl LandSupervisor {
    /// The supervisor's arguments, after the program.
    pub fn args(&self) -> Vec<OsString> {
        vec![
            "--home".into(),
            self.home.clone().into_os_string(),
            "land".into(),
            "supervise".into(),
            self.land.as_str().into(),
        ]
    }
}

fn failed(message: String) -> berth_ops::Error {
    berth_ops::Error::rule(ErrorKind::External, message)
}

/// Starts `program` (the berth binary) as the land's supervisor, in its own process group
/// (a terminal's Ctrl-C or hangup does not reach it), its output in the land's folder;
/// waits until it has taken the land. The supervisor's process id.
pub async fn detach(
    store: &LandStore,
    home: &Path,
    held: HeldLand,
    program: &Path,
) -> berth_ops::Result<u32> {
    let id = held.record.id.clone();
    // Let go of the land, for the supervisor to take.
    drop(held);
    let log_path = store.dir(&id).join("supervisor.log");
    let io = |e: std::io::Error| failed(format!("{}: {e}", log_path.display()));
    let log = std::fs::File::create(&log_path).map_err(io)?;
    let log_too = log.try_clone().map_err(io)?;
    let how = LandSupervisor {
        home: home.to_owned(),
        land: id.clone(),
    };
    let mut child = Command::new(program)
        .args(how.args())
        .stdin(Stdio::null())
        .stdout(log_too)
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            failed(format!(
                "cannot start the land's supervisor {}: {e}",
                program.display()
            ))
        })?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            let record = store.load(&id).await?;
            if record.state != LandState::Landing {
                return Ok(child.id());
            }
            return Err(failed(format!(
                "the land's supervisor ended at once ({status}): {}",
                crate::stderr::last_words(&log_path)
            )));
        }
        let record = store.load(&id).await?;
        if record.pid == Some(child.id()) || record.state != LandState::Landing {
            return Ok(child.id());
        }
        if started.elapsed() > SUPERVISOR_START {
            return Err(failed(format!(
                "the land's supervisor did not start within {} s; see {}",
                SUPERVISOR_START.as_secs(),
                log_path.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
