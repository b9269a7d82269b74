//! Each fact once: static checks on the tree that a fact berth has one table for is not
//! written again elsewhere. A JSON-RPC error code comes from berth-core's
//! `ErrorKind::json_rpc_code`, so MCP, berth-acp's server and berth-run's ACP client answer a
//! failure of one kind with one code; a provider's hosts and variables from berth-core's
//! `ProviderKind`; a known ACP agent's command from berth-sandbox's `AgentProfile`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::Path;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Rust source of the workspace's crates, by its path under the workspace.
fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && name != "target" {
            sources(&path, root, out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let shown = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((shown.replace('\\', "/"), text));
        }
    }
}

/// The JSON-RPC codes berth-core's table owns, written as numbers: a run of five digits that
/// is 32002 or 326xx (the sign aside).
fn code_literals(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
            i += 1;
        }
        let run: String = line[start..i].chars().filter(|c| *c != '_').collect();
        let after_letter = start > 0 && (bytes[start - 1].is_ascii_alphanumeric());
        if !after_letter && run.len() == 5 && (run.starts_with("326") || run == "32002") {
            found.push(run);
        }
    }
    found
}

/// The SDKs' names for the codes the table owns (ACP's `ErrorCode` and `Error`, rmcp's
/// `ErrorData`).
const NAMED_CODES: [&str; 8] = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "invalid_params(",
    "invalid_request(",
    "internal_error(",
    "resource_not_found(",
];

/// Where a code is the JSON-RPC specification's own answer, before any of berth's kinds
/// applies: a line of an ACP agent that is no JSON-RPC message (`invalid_request`, as the
/// specification answers a value that is not a request object).
const SPEC_ANSWERS: [(&str, &str); 1] =
    [("crates/berth-run/src/acp_agent/wire.rs", "invalid_request(")];

/// The table itself, and this test, which names what it looks for.
const THE_TABLE: [&str; 2] = [
    "crates/berth-core/src/error.rs",
    "crates/berth-cli/tests/facts_once.rs",
];

fn codes_outside_the_table(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        if THE_TABLE.contains(&path.as_str()) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            for code in code_literals(line) {
                found.push(format!("{path}:{}: {code}", n + 1));
            }
            for name in NAMED_CODES {
                let allowed = SPEC_ANSWERS.contains(&(path.as_str(), name));
                if line.contains(name) && !allowed {
                    found.push(format!("{path}:{}: {name}", n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn no_json_rpc_code_is_written_outside_berth_cores_table() {
    let root = root();
    let mut files = Vec::new();
    sources(&root.join("crates"), &root, &mut files);
    assert!(
        files.len() > 100,
        "the tree was not read: {} files",
        files.len()
    );
    let found = codes_outside_the_table(&files);
    assert!(
        found.is_empty(),
        "JSON-RPC codes written outside ErrorKind::json_rpc_code (berth-core's error.rs); \
         answer with the error of a kind instead (berth_agent::acp::error_of_kind, \
         berth-mcp's errors::of_kind):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_code_written_anywhere_else_is_caught() {
    let planted = |text: &str| {
        codes_outside_the_table(&[("crates/berth-run/src/planted.rs".into(), text.into())])
    };
    let minus = '-';
    assert_eq!(
        planted(&format!("let c = {minus}{}{};", 326, "02")).len(),
        1
    );
    assert_eq!(planted(&format!("code: {minus}{}_{}", 32, "002")).len(), 1);
    assert_eq!(planted("Error::new(ErrorCode::INVALID_PARAMS, m)").len(), 1);
    assert_eq!(
        planted("agent_client_protocol::Error::invalid_request()").len(),
        1
    );
    assert_eq!(planted("ErrorData::internal_error(e, None)").len(), 1);
    assert!(planted("let port = 43260; let n = x326021;").is_empty());
    assert!(planted("error_of_kind(ErrorKind::Refused, why)").is_empty());
}

/// A provider's facts as berth-core's `ProviderKind` has them: the hosts of its API and the
/// variables its keys and base URL are read from.
const PROVIDER_FACTS: [&str; 13] = [
    "api.anthropic.com",
    "api.openai.com",
    "generativelanguage.googleapis.com",
    "\"ANTHROPIC_API_KEY\"",
    "\"ANTHROPIC_AUTH_TOKEN\"",
    "\"CLAUDE_CODE_OAUTH_TOKEN\"",
    "\"OPENAI_API_KEY\"",
    "\"CODEX_API_KEY\"",
    "\"GEMINI_API_KEY\"",
    "\"GOOGLE_API_KEY\"",
    "\"ANTHROPIC_BASE_URL\"",
    "\"OPENAI_BASE_URL\"",
    "\"GOOGLE_GEMINI_BASE_URL\"",
];

/// `ProviderKind` itself, and the commented file `berth config init` writes, which is prose
/// for a person (a test of berth-core's keeps it in step with the keys).
const PROVIDER_TABLE: [&str; 2] = [
    "crates/berth-core/src/config/provider.rs",
    "crates/berth-core/src/config/template.rs",
];

/// Where a provider's facts are written in a library's or the CLI's own code (its sources
/// under `src/`, before their tests), but for `ProviderKind` itself. Comments and help text
/// may name them; code takes them from the one table.
fn provider_facts_outside_provider_kind(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        if !path.contains("/src/") || PROVIDER_TABLE.contains(&path.as_str()) {
            continue;
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for fact in PROVIDER_FACTS {
                if line.contains(fact) {
                    found.push(format!("{path}:{}: {fact}", n + 1));
                }
            }
        }
    }
    found
}

/// The commands of the ACP agents berth knows, which only berth-sandbox's `AgentProfile`
/// table writes (berth-run's built-in agents read them there).
const AGENT_COMMANDS: [&str; 3] = [
    "\"claude-agent-acp\"",
    "\"codex-acp\"",
    "\"gemini --experimental-acp\"",
];

#[test]
fn the_known_agents_commands_come_from_their_profiles() {
    let root = root();
    let mut files = Vec::new();
    sources(&root.join("crates"), &root, &mut files);
    let mut found = Vec::new();
    for (path, text) in &files {
        if !path.contains("/src/") || path == "crates/berth-sandbox/src/policy.rs" {
            continue;
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            // Help text and comments may show one as an example.
            if line.trim_start().starts_with("//") {
                continue;
            }
            for command in AGENT_COMMANDS.iter().filter(|c| line.contains(*c)) {
                found.push(format!("{path}:{}: {command}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a known agent's command written outside berth-sandbox's AgentProfile table:\n{}",
        found.join("\n")
    );
}

#[test]
fn provider_hosts_and_key_variables_come_from_provider_kind() {
    let root = root();
    let mut files = Vec::new();
    sources(&root.join("crates"), &root, &mut files);
    let found = provider_facts_outside_provider_kind(&files);
    assert!(
        found.is_empty(),
        "a provider's host or variable written outside berth-core's ProviderKind \
         (config/provider.rs); take it from ProviderKind (key_variables, \
         agent_key_variables, base_url_variable, default_base_url, origin):\n{}",
        found.join("\n")
    );
    let planted = [(
        "crates/berth-sandbox/src/planted.rs".to_owned(),
        "const K: &str = \"OPENAI_API_KEY\";\n#[cfg(test)]\nconst T: &str = \"OPENAI_API_KEY\";"
            .to_owned(),
    )];
    assert_eq!(provider_facts_outside_provider_kind(&planted).len(), 1);
}
