//! `berth doctor` against real things: real git, a real repository and worktree, berth's own
//! MCP server as the configured external server, and a Postgres URL that no server answers.
//! A healthy home passes and names each check; a broken one fails and names each problem
//! with what to do.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;

use berth_testkit::{commit, git};
use serde_json::Value;
use support::Home;

const KEY: &str = "sk-ant-doctor-test-secret";

/// A repository with one commit on `main`.
fn repo(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    commit(&root, "README.md", "hello\n");
    root.canonicalize().unwrap()
}

fn doctor(home: &Home, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = home.cmd(&[&["doctor"], args].concat());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no finding {check:?} in {report:#}"))
}

/// `[[mcp_servers]]` entries, appended to the home's config.
fn add_config(home: &Home, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.path().join("config.toml"))
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_healthy_home_passes_and_names_each_check() {
    let home = Home::new();
    let served = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = repo(tmp.path());
    home.ok(&["workspace", "create", "plain", "--plain"]);
    home.ok(&[
        "workspace",
        "create",
        "feat",
        "--repo",
        root.to_str().unwrap(),
    ]);
    // berth's own MCP server, on another home, as the configured external server.
    add_config(
        &home,
        &format!(
            "[[mcp_servers]]\nname = \"local\"\ncommand = \"{}\"\nargs = [\"mcp\"]\nenv = {{ BERTH_HOME = \"{}\" }}\n",
            env!("CARGO_BIN_EXE_berth"),
            served.path().display()
        ),
    );
    let (code, text, stderr) = doctor(&home, &[], &[("ANTHROPIC_API_KEY", KEY)]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    for check in [
        "git",
        "home",
        "config",
        "store",
        "index",
        "spares",
        "provider claude",
        "workspaces",
        "mcp local",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok ") && l.contains(&format!(" {check} "))),
            "no ok line for {check}:\n{text}"
        );
    }
    assert!(!text.contains(KEY), "the key is printed:\n{text}");

    let (code, json, _) = doctor(&home, &["--json"], &[("ANTHROPIC_API_KEY", KEY)]);
    assert_eq!(code, 0);
    assert!(!json.contains(KEY));
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["errors"], 0);
    let git = finding(&report, "git");
    assert_eq!(git["status"], "ok");
    assert!(git["message"].as_str().unwrap().contains("2.38.0 or newer"));
    let ws = finding(&report, "workspaces");
    assert!(
        ws["message"]
            .as_str()
            .unwrap()
            .starts_with("2 workspace(s), 1 of them git"),
        "{ws}"
    );
    // The server was started and its tools listed.
    let mcp = finding(&report, "mcp local")["message"].as_str().unwrap();
    assert!(mcp.starts_with("running; "), "{mcp}");
    assert!(mcp.contains("workspace_list"), "{mcp}");
    let provider = finding(&report, "provider claude");
    assert!(provider["message"].as_str().unwrap().contains("key set"));
    assert_eq!(finding(&report, "store")["status"], "ok");
}

#[test]
fn a_broken_home_fails_and_says_what_to_do_about_each_problem() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = repo(tmp.path());
    let id = home
        .ok(&[
            "workspace",
            "create",
            "gone",
            "--repo",
            root.to_str().unwrap(),
        ])
        .trim()
        .to_owned();
    let worktree = home.ok(&["workspace", "path", "gone"]);
    std::fs::remove_dir_all(worktree.trim()).unwrap();
    add_config(
        &home,
        "[[mcp_servers]]\nname = \"missing\"\ncommand = \"/nonexistent/berth-no-such-server\"\n",
    );

    // No key for the configured provider, a worktree gone, a server that cannot start.
    let (code, json, stderr) = doctor(&home, &["--json", "--mcp-timeout", "5"], &[]);
    assert_eq!(code, 1, "{json}\n{stderr}");
    assert!(stderr.contains("problem(s) found"), "{stderr}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["ok"], false);
    // A missing key is a warning: only berth's own agent needs one, and it says which
    // commands those are.
    let provider = finding(&report, "provider claude");
    assert_eq!(provider["status"], "warn");
    assert!(
        provider["fix"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY")
    );
    let said = provider["message"].as_str().unwrap();
    assert!(
        said.contains("berth chat") && said.contains("berth run"),
        "{said}"
    );
    let gone = finding(&report, "workspace gone");
    assert_eq!(gone["status"], "error");
    assert!(gone["message"].as_str().unwrap().contains("worktree"));
    assert!(gone["message"].as_str().unwrap().contains("is gone"));
    assert!(
        gone["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("berth workspace delete {id}"))
    );
    let mcp = finding(&report, "mcp missing");
    assert_eq!(mcp["status"], "error");
    assert!(
        mcp["message"]
            .as_str()
            .unwrap()
            .contains("berth-no-such-server"),
        "{mcp}"
    );
    assert!(mcp["fix"].as_str().unwrap().contains("[[mcp_servers]]"));

    // A store no server answers: named without its password; what needs it is not run, the
    // rest still is.
    let url = "postgres://berth:hunter2@127.0.0.1:1/berth";
    let (code, text, _) = doctor(&home, &["--mcp-timeout", "5"], &[("BERTH_STORE_URL", url)]);
    assert_eq!(code, 1, "{text}");
    assert!(
        !text.contains("hunter2"),
        "the password is printed:\n{text}"
    );
    let store = text
        .lines()
        .find(|l| l.contains(" store "))
        .unwrap_or_else(|| panic!("no store line:\n{text}"));
    assert!(store.starts_with("error "), "{store}");
    assert!(
        store.contains("postgres://berth:***@127.0.0.1:1/berth"),
        "{store}"
    );
    assert!(
        text.contains("check that the database at postgres://berth:***@127.0.0.1:1/berth is up")
    );
    for check in ["index", "spares", "workspaces"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!(" {check} ")))
            .unwrap_or_else(|| panic!("no {check} line:\n{text}"));
        assert!(
            line.starts_with("not run") && line.contains("the store cannot be opened"),
            "{line}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("error") && l.contains(" mcp missing "))
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains(" git "))
    );
}

/// Where user namespaces are refused, doctor says every process is refused, names the
/// Landlock fallback as a way, and with it set names the fallback and what it lacks.
#[test]
fn without_user_namespaces_doctor_names_the_landlock_fallback() {
    let home = Home::new();
    let env = [
        ("ANTHROPIC_API_KEY", KEY),
        ("BERTH_SANDBOX_PRETEND", "no-userns"),
    ];
    let (_, json, _) = doctor(&home, &["--json"], &env);
    let report: Value = serde_json::from_str(&json).unwrap();
    let sandbox = finding(&report, "sandbox");
    assert_eq!(sandbox["status"], "error", "{sandbox:#}");
    let text = sandbox.to_string();
    assert!(
        text.contains("every command and agent process is refused"),
        "{text}"
    );
    assert!(text.contains("fallback = \\\"landlock\\\""), "{text}");

    add_config(&home, "[sandbox]\nfallback = \"landlock\"\n");
    let (_, json, _) = doctor(&home, &["--json"], &env);
    let report: Value = serde_json::from_str(&json).unwrap();
    let sandbox = finding(&report, "sandbox");
    assert_eq!(sandbox["status"], "warn", "{sandbox:#}");
    let text = sandbox.to_string();
    assert!(text.contains("Landlock-only fallback"), "{text}");
    assert!(text.contains("TCP rules by port, not by address"), "{text}");
    assert!(text.contains("no private /tmp"), "{text}");
}

/// Where AppArmor's policy refuses user namespaces, `doctor --fix --dry-run` prints berth's
/// profile and the sudo commands that install it, and runs nothing; where nothing refuses
/// them, there is nothing to fix.
#[test]
fn doctor_fix_shows_the_apparmor_profile_and_its_commands() {
    let home = Home::new();
    let (code, out, err) = doctor(
        &home,
        &["--fix", "--dry-run"],
        &[("BERTH_SANDBOX_PRETEND", "apparmor-userns")],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("profile berth "), "{out}");
    assert!(out.contains("userns,"), "{out}");
    assert!(out.contains(env!("CARGO_BIN_EXE_berth")), "{out}");
    assert!(out.contains("sudo tee /etc/apparmor.d/berth"), "{out}");
    assert!(
        out.contains("sudo apparmor_parser -r /etc/apparmor.d/berth"),
        "{out}"
    );
    assert!(out.contains("nothing was run"), "{out}");
    let (code, json, _) = doctor(
        &home,
        &["--json"],
        &[("BERTH_SANDBOX_PRETEND", "apparmor-userns")],
    );
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(code, 1);
    assert!(
        finding(&report, "sandbox")["fix"]
            .as_str()
            .unwrap()
            .contains("berth doctor --fix")
    );
    let (code, out, _) = doctor(&home, &["--fix", "--dry-run"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to fix"), "{out}");
}

/// Half of `MemTotal`, in MiB, as berth's default memory limit of a confined tree.
fn half_the_machine_mib() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    (kib * 1024 / 2) >> 20
}

#[test]
fn doctor_says_whether_a_trees_memory_is_bounded() {
    let home = Home::new();
    let (_, json, stderr) = doctor(&home, &["--json"], &[]);
    let report: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let sandbox = finding(&report, "sandbox");
    let message = sandbox["message"].as_str().unwrap();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let memory_cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("0::") || l.split(':').nth(1) == Some("memory"));
    if !root || !memory_cgroup {
        assert_eq!(sandbox["status"], "warn", "{sandbox:#}");
        assert!(message.contains("not memory"), "{message}");
        return;
    }
    // As root with a memory controller (these tests' machines): in force, by default half
    // the machine's memory.
    assert_eq!(sandbox["status"], "ok", "{sandbox:#}");
    let half = half_the_machine_mib();
    assert!(
        message.contains(&format!(
            "memory per tree ([sandbox] memory_mib, by default half the machine's: {half} MiB)"
        )),
        "{message}"
    );
    // Where the tree's cgroup must be a pids one (a kernel without pid_max per PID
    // namespace) and the pids hierarchy has no memory controller (cgroup v1), it is not in
    // force, and doctor says so.
    let v1 = !std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("0::/") && l.len() > 4)
        && std::path::Path::new("/sys/fs/cgroup/memory").is_dir();
    if v1 {
        let (_, json, _) = doctor(
            &home,
            &["--json"],
            &[("BERTH_SANDBOX_PRETEND", "no-pid-max")],
        );
        let report: Value = serde_json::from_str(&json).unwrap();
        let sandbox = finding(&report, "sandbox");
        assert_eq!(sandbox["status"], "warn", "{sandbox:#}");
        let message = sandbox["message"].as_str().unwrap();
        assert!(
            message.contains("not memory: a tree's cgroup is its pids one"),
            "{message}"
        );
        assert!(
            sandbox["fix"]
                .as_str()
                .unwrap_or_default()
                .contains("cgroup"),
            "{sandbox:#}"
        );
    }
}
