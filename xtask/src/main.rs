//! `cargo xtask`: the repository's automation, in Rust.
//!
//! * `cargo xtask ci` is the test command: formatting, clippy, the whole test suite (`--locked`), and
//!   the layering rule that `protocol` and `discovery` link no engine. `.ci/run` calls it.
//! * `cargo xtask export` regenerates the committed generated files (the manifest JSON Schema);
//!   tests fail when a committed copy drifts from what the code generates.
//! * `cargo xtask bench <area>` runs an optimized benchmark (`discovery`) and prints its
//!   figures. Benchmarks are never part of the test suite: the machines are shared and noisy.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\n\
         commands:\n  \
         ci                  formatting, every test, and the layering check (what .ci/run runs)\n  \
         export              regenerate protocol/schema/nodetool-manifest.schema.json\n  \
         bench discovery     discover 200 generated packs; resolution cost at 20 vs 2,000 packs\n  \
         bench guest         one invocation's cost, a js-yaml import, peak memory per run"
    );
    ExitCode::from(2)
}

fn export() -> Result<(), String> {
    let path = workspace_root().join(nodetool_protocol::MANIFEST_SCHEMA_PATH);
    let text = schema_text();
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", nodetool_protocol::MANIFEST_SCHEMA_PATH);
    Ok(())
}

/// The schema file's exact text: pretty JSON plus a final newline.
fn schema_text() -> String {
    let schema = nodetool_protocol::manifest_json_schema();
    format!(
        "{}\n",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    )
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

fn run(what: &str, command: &mut Command) -> Result<(), String> {
    println!("xtask: {what}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Crates that must never link an engine, and the engines they must not link.
const ENGINE_FREE: &[&str] = &[
    "nodetool-protocol",
    "nodetool-runtime",
    "nodetool-discovery",
];
const ENGINES: &[&str] = &["rquickjs", "wasmtime", "rolldown"];

fn check_layering() -> Result<(), String> {
    for package in ENGINE_FREE {
        let output = cargo()
            .args([
                "tree", "--locked", "-e", "normal", "--prefix", "none", "-p", package,
            ])
            .output()
            .map_err(|e| format!("cannot run cargo tree: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo tree -p {package} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let linked: Vec<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| ENGINES.iter().any(|e| name.starts_with(e)))
            .collect();
        if !linked.is_empty() {
            return Err(format!(
                "{package} must not link an engine, but depends on {}",
                linked.join(", ")
            ));
        }
    }
    println!(
        "xtask: layering ok ({} link no engine)",
        ENGINE_FREE.join(", ")
    );
    Ok(())
}

fn ci() -> Result<(), String> {
    run(
        "cargo fmt --check",
        cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    check_layering()?;
    run(
        "cargo clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    run(
        "cargo test",
        cargo().args(["test", "--workspace", "--locked"]),
    )?;
    Ok(())
}

fn bench(area: &str) -> Result<(), String> {
    let (package, bench) = match area {
        "discovery" => ("nodetool-discovery", "discovery"),
        "guest" => ("nodetool-guest", "guest"),
        other => return Err(format!("unknown bench area {other:?} (known: discovery, guest)")),
    };
    run(
        &format!("cargo bench -p {package}"),
        cargo().args(["bench", "--locked", "-p", package, "--bench", bench]),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ci"] => ci(),
        ["export"] => export(),
        ["bench", area] => bench(area),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
