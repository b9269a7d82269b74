//! What the benchmarks share: sizes from the environment, git without a caller's
//! repository variables, and a generated repository of many files.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A berth home whose config sends berth's agent to the provider stand-in at `url`.
pub fn home_on_provider(url: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[providers.claude]\nbase_url = \"{url}\"\nmodel = \"bench-model\"\n"),
    )
    .unwrap();
    home
}

/// The number in environment variable `name`, else `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// git in `dir`, deaf to the repository variables of whoever runs the benchmark.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    cmd
}

/// [`generate`]d in `dir/repo`, saying how big and how long it took; its path, and the
/// bytes of its files.
pub fn generated_repository(dir: &Path, files: usize) -> (std::path::PathBuf, usize) {
    let repo = dir.join("repo");
    let started = std::time::Instant::now();
    let bytes = generate(&repo, files);
    eprintln!(
        "generated {files} files, {:.1} MB, in {:.1} s",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    (repo, bytes)
}

/// A repository with `files` files of 1-7 KB of pseudo-random text on `main`, checked out.
/// Returns the bytes of file content.
pub fn generate(repo: &Path, files: usize) -> usize {
    std::fs::create_dir_all(repo).unwrap();
    assert!(
        git_cmd(repo)
            .args(["init", "--quiet", "-b", "main"])
            .status()
            .unwrap()
            .success()
    );
    let mut import = git_cmd(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = std::io::BufWriter::new(import.stdin.take().unwrap());
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64: deterministic, so every run measures the same repository.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789 \n";
    let mut total = 0;
    for i in 0..files {
        let len = 1000 + (next() % 6000) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        total += len;
        write!(stdin, "blob\nmark :{}\ndata {len}\n", i + 1).unwrap();
        stdin.write_all(&data).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    stdin
        .write_all(b"commit refs/heads/main\ncommitter bench <bench@berth.invalid> 0 +0000\ndata 5\nbench\n")
        .unwrap();
    for i in 0..files {
        writeln!(stdin, "M 100644 :{} src/d{:03}/f{i:05}.txt", i + 1, i % 200).unwrap();
    }
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    assert!(import.wait().unwrap().success());
    assert!(
        git_cmd(repo)
            .args([
                "-c",
                "checkout.workers=0",
                "checkout",
                "--quiet",
                "-f",
                "main"
            ])
            .status()
            .unwrap()
            .success()
    );
    total
}

/// A home of `count` plain workspaces made through the filesystem store, every other one
/// named (`ws-<i>`) and each described, as in real use; says how long it took.
pub fn populate_workspaces(home: &Path, count: usize) {
    use berth_core::{NewWorkspace, WorkspaceName, WorkspaceStore};
    let store = berth_store_fs::FsStore::open(home).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    rt.block_on(async {
        for i in 0..count {
            let name = (i % 2 == 0).then(|| WorkspaceName::new(format!("ws-{i}")).unwrap());
            let new = NewWorkspace {
                name,
                description: format!("workspace number {i}"),
                ..NewWorkspace::default()
            };
            store.create(new, chrono::Utc::now()).await.unwrap();
        }
    });
    eprintln!(
        "populated {count} workspaces in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// `runs` timings of `f` after one to warm up, sorted.
pub fn sorted_times(runs: usize, mut f: impl FnMut()) -> Vec<std::time::Duration> {
    f();
    let mut times: Vec<std::time::Duration> = (0..runs)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times
}
