//! Running processes: one-shot commands, and the multi-process harness in which a test re-runs
//! its own test binary as children that play a role.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// What a finished process left: its exit code (-1 if a signal ended it) and its output,
/// decoded lossily.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Runs `cmd` to the end, capturing stdout and stderr. Only failing to start it panics; a
/// non-zero exit is the caller's to judge.
pub fn run(mut cmd: Command) -> Run {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Run::from(out)
}

/// Waits for a spawned child and insists it succeeded (panicking with its stderr, if that was
/// piped, if not); returns its stdout, if that was piped.
pub fn wait_ok(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "BERTH_TEST_CHILD_ROLE";

/// A command that re-runs this test binary, running only the test `entry`, with `CHILD_ROLE`
/// set to `role`.
///
/// A child-role test is marked `#[ignore = "a child role: run by its parent test"]`, so a
/// normal run neither runs it nor counts it as passed; this command passes `--ignored` (with
/// `--exact`) so the child runs it all the same, and the test calls [`child_role`] first.
pub fn child(entry: &str, role: &str) -> Command {
    let exe = std::env::current_exe().expect("the path of this test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        entry,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ROLE, role);
    cmd
}

/// The child role this process was started by [`child`] to play.
///
/// Panics when `CHILD_ROLE` is not set: the test was run by hand (with `--ignored` or
/// `--include-ignored`) rather than by its parent, and a child role that did nothing must not
/// pass as a test that checked something.
pub fn child_role() -> String {
    std::env::var(CHILD_ROLE).unwrap_or_else(|_| {
        panic!(
            "this test is a child role: its parent test runs it with {CHILD_ROLE} set; \
             run the parent test instead"
        )
    })
}

/// A cheap pseudo-random sequence (xorshift) seeded from the clock: enough to vary kill timing
/// without a dependency. The seed is printed so a failure can be replayed with
/// [`Jitter::from_seed`].
pub struct Jitter(u64);

impl Jitter {
    /// A sequence seeded from the clock; prints the seed to stderr.
    pub fn from_clock() -> Jitter {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        eprintln!("jitter seed {seed}");
        Jitter::from_seed(seed)
    }

    /// The sequence of a given seed (a printed one, to replay a failure).
    pub fn from_seed(seed: u64) -> Jitter {
        // xorshift's state must not be zero.
        Jitter(seed | 1)
    }

    /// The next number, in `0..below`.
    pub fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Runs `cmd` (a child that prints `DONE <what>` after each acknowledged operation), waits up
/// to 30 s for its first acknowledgement, lets it work for a random `0..max_us` microseconds
/// more, SIGKILLs it, and returns everything it acknowledged (the `<what>`s), in order.
pub fn kill_after_first_ack(mut cmd: Command, jitter: &mut Jitter, max_us: u64) -> Vec<String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut proc = cmd.spawn().unwrap();
    let stdout = proc.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints "test name ... " without a newline, so the first DONE may share
            // its line: split at "DONE " rather than matching the start.
            if let Some((_, done)) = line.split_once("DONE ") {
                let _ = tx.send(done.to_owned());
            }
        }
    });
    let first = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(first) => first,
        Err(_) => {
            let _ = proc.kill();
            let _ = proc.wait();
            panic!("child never acknowledged an operation within 30 s");
        }
    };
    std::thread::sleep(Duration::from_micros(jitter.next(max_us)));
    proc.kill().unwrap(); // SIGKILL on unix
    proc.wait().unwrap();
    reader.join().unwrap();
    std::iter::once(first).chain(rx.try_iter()).collect()
}

/// The command lines of the host's processes (but zombies waiting for their reaper) that
/// hold `marker`. A confined process's pid is its own PID namespace's, which means nothing
/// to a test, so a test knows such a process by a unique argument instead.
pub fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            // Gone meanwhile, or a zombie: it runs no more.
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}
