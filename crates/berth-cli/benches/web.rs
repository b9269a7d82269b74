//! Benchmark: the web page of `berth serve` on a home with 10,000 workspaces.
//!
//! `cargo bench -p berth-cli --bench web` (`BENCH_WORKSPACES` to change the count).
//!
//! One real `berth serve` process on loopback; each figure is the time from a request's first
//! byte sent to its last byte read, over a new connection each time, as a browser opening the
//! page sees it. Measured beside two baselines from the same run: `/healthz` (the floor: a
//! connection and a response that reads nothing) and `berth workspace list --json` (the whole
//! listing as the CLI gives it, a process each). Target (issue 27): the first page under
//! 100 ms.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{env_or, populate_workspaces, sorted_times};

fn main() {
    let count = env_or("BENCH_WORKSPACES", 10_000);
    let home = tempfile::tempdir().unwrap();
    populate_workspaces(home.path(), count);

    let berth = env!("CARGO_BIN_EXE_berth");
    let home_arg = home.path().to_str().unwrap();
    let mut server = Command::new(berth)
        .args(["serve", "--listen", "127.0.0.1:0", "--open"])
        .current_dir(home_arg)
        .env("BERTH_HOME", home_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = {
        let mut said = Vec::new();
        let mut byte = [0u8; 1];
        let stderr = server.stderr.as_mut().unwrap();
        while stderr.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            said.push(byte[0]);
        }
        let said = String::from_utf8(said).unwrap();
        let at = said.find("web page at http://").expect(&said) + "web page at http://".len();
        said[at..].trim_end_matches('/').to_owned()
    };

    let first = get(&address, "/");
    assert!(
        first.contains("data-workspace"),
        "the first page lists no workspace"
    );
    let next = first
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a next page")
        .replace("&amp;", "&");
    let ids: Vec<String> = first
        .split("data-workspace=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_owned))
        .collect();
    let status = format!("/w/status?ids={}", ids.join(","));
    let search = format!("/?q=ws-{}", count / 2);

    println!(
        "berth web page benchmark: {count} workspaces, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:<44} {:>9} {:>9} {:>8} {:>9}",
        "request", "median", "p90", "target", "vs floor"
    );
    let floor = sorted_times(50, || {
        get(&address, "/healthz");
    });
    report("GET /healthz (floor)", &floor, None, &floor);
    let cli = sorted_times(10, || {
        let ok = Command::new(berth)
            .args(["workspace", "list", "--json"])
            .env("BERTH_HOME", home_arg)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    });
    report("berth workspace list --json (baseline)", &cli, None, &floor);
    let page = sorted_times(30, || {
        get(&address, "/");
    });
    report(
        "GET / (first page, 50 workspaces)",
        &page,
        Some(100),
        &floor,
    );
    report_cli_ratio(&page, &cli);
    let later = sorted_times(30, || {
        get(&address, &next);
    });
    report("GET /?after=… (second page)", &later, Some(100), &floor);
    let found = sorted_times(20, || {
        get(&address, &search);
    });
    report("GET /?q=… (search all)", &found, None, &floor);
    let filled = sorted_times(20, || {
        get(&address, &status);
    });
    report("GET /w/status (the page's 50 rows)", &filled, None, &floor);
    let _ = server.kill();
    let _ = server.wait();
}

/// The body of a GET, over a new connection; anything but 200 fails the benchmark.
fn get(address: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "GET {path}: {}",
        response.lines().next().unwrap_or("")
    );
    response
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(what: &str, times: &[Duration], target_ms: Option<u64>, floor: &[Duration]) {
    let median = times[times.len() / 2];
    let p90 = times[times.len() * 9 / 10];
    let target = target_ms.map_or("-".to_owned(), |t| format!("<{t} ms"));
    let ratio = ms(median) / ms(floor[floor.len() / 2]);
    println!(
        "{what:<44} {:>6.2} ms {:>6.2} ms {target:>8} {ratio:>8.1}x",
        ms(median),
        ms(p90)
    );
    if let Some(t) = target_ms
        && ms(median) > t as f64
    {
        println!("  ^ over its target");
    }
}

fn report_cli_ratio(page: &[Duration], cli: &[Duration]) {
    println!(
        "  the first page takes {:.3} of the CLI's whole listing",
        ms(page[page.len() / 2]) / ms(cli[cli.len() / 2])
    );
}
