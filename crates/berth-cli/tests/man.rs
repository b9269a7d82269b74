//! `berth man`: the pages are roff that the real `man` (groff) renders without a warning, and
//! they hold every command and flag `--help` has; `--out` writes one page per command.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::process::Command;

use support::Home;

/// The commands `berth --help` lists.
fn commands_in_help(home: &Home) -> Vec<String> {
    let help = home.ok(&["--help"]);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  ") || l.is_empty())
        // A command's line; a wrapped description goes on further in.
        .filter(|l| l.len() > 2 && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

/// `man -l` on a page file: its text, and groff's warnings (none for valid roff).
fn render(page: &Path) -> (String, String) {
    let out = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(page)
        .env("MANWIDTH", "120")
        .env("MAN_KEEP_FORMATTING", "")
        .env_remove("MANPAGER")
        .env("PAGER", "cat")
        .output()
        .expect("man is installed");
    assert!(out.status.success(), "man -l failed: {:?}", out);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_page_is_valid_roff_naming_every_command() {
    let home = Home::new();
    let page = home.ok(&["man"]);
    assert!(page.contains(".TH berth 1 "), "{}", &page[..200]);
    assert!(page.contains(".SH SUBCOMMANDS"));
    let commands = commands_in_help(&home);
    assert!(commands.len() > 10, "{commands:?}");
    for c in ["workspace", "session", "doctor", "man", "completions"] {
        assert!(commands.iter().any(|x| x == c), "{c} not in --help");
    }
    let file = home.path().join("berth.1");
    std::fs::write(&file, &page).unwrap();
    let (text, warnings) = render(&file);
    assert_eq!(warnings, "", "groff warned about the page");
    // Rendered, it names each command as berth-<command>(1), as --help lists them.
    for c in &commands {
        assert!(
            text.contains(&format!("berth-{c}(1)")),
            "berth-{c}(1) missing from the rendered page:\n{text}"
        );
    }
    assert!(text.contains("--home"));
    assert!(
        text.contains("Exit status:"),
        "the exit statuses are on the page"
    );
}

#[test]
fn one_commands_page_and_every_page_into_a_folder() {
    let home = Home::new();
    let gc = home.ok(&["man", "workspace", "gc"]);
    assert!(gc.contains(".TH berth-workspace-gc 1 "), "{gc}");
    let file = home.path().join("gc.1");
    std::fs::write(&file, &gc).unwrap();
    let (text, warnings) = render(&file);
    assert_eq!(warnings, "");
    assert!(
        text.contains("--merged") && text.contains("--max-age"),
        "{text}"
    );

    let refused = home.run(&["man", "workspace", "nope"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("its commands are list, create"),
        "{}",
        refused.stderr
    );

    let dir = home.path().join("man1");
    let r = home.run(&["man", "--out", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for page in [
        "berth.1",
        "berth-workspace.1",
        "berth-workspace-gc.1",
        "berth-doctor.1",
    ] {
        assert!(dir.join(page).is_file(), "{page} not written");
    }
    let (_, warnings) = render(&dir.join("berth-workspace.1"));
    assert_eq!(warnings, "");
}
