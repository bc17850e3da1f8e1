//! `nodetool-cli`: the `nodetool` command-line front end.
//!
//! It owns argument parsing ([`args`]), the split of each command into the stage that runs it
//! and one file per command ([`commands`]: those that need no catalog, then those run against
//! the catalog discovered from the search path), and rendering — for people (results, logs,
//! errors with the offending source line and a caret, `help:` lines that say what to do) and
//! for machines (`--json`). The variables the search path depends on are read here, once
//! (`Environment::from_vars`), and passed down as values.
//!
//! The pack search path (`--packs`, `NODETOOL_PACKS_PATH`, the installed root, the shipped
//! root) and the directories nodetool keeps its state in are `nodetool_frontend::search`'s;
//! running a body in a sandbox worker is `nodetool_frontend::run`'s, and `packs install` is
//! `nodetool_frontend::install`'s, so `nodetool serve` and `nodetool-server` answer the same
//! way. The HTTP client behind `--allow-fetch` is `nodetool_frontend::fetch`.
//!
//! Architecture invariant: thin. Validation, the CodeAct allowlist and prompt tier, and docs
//! disclosure live in library crates (`nodetool_jssource::validate`, `nodetool_runtime::codeact`)
//! so the server answers the same questions the same way. Exit status: 0 ok, 1 the work failed,
//! 2 usage or configuration error; never a panic or a backtrace on bad input.

/// `println!` that never panics: a closed stdout (`nodetool packs docs X | head`) ends the
/// output quietly instead of with a panic and a backtrace.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that never panics (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics (see [`outln!`]).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see [`outln!`]).
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod commands;
mod compile;
mod help;
mod info;
mod install;
mod render;
mod scaffold;
mod term;

use std::process::ExitCode;

use nodetool_frontend::search::Environment;

use args::Cli;
use commands::{Context, Stage};

/// A failure to report and the exit status it maps to.
enum Failure {
    /// Usage or configuration: exit 2.
    Usage(String),
    /// The work itself failed (already rendered): exit 1.
    Failed,
}

type Outcome = Result<(), Failure>;

/// Runs the CLI with the process's arguments and environment.
pub fn main() -> ExitCode {
    // Started as a sandbox worker by a `nodetool` front end: serve runs, nothing else.
    if let Some(code) = nodetool_frontend::worker::run_if_worker() {
        return code;
    }
    let parsed = command()
        .try_get_matches()
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    term::init(cli.json, cli.quiet, cli.verbose, cli.color);
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Failed) => ExitCode::from(1),
        Err(Failure::Usage(message)) => {
            report_error("usage", &message);
            ExitCode::from(2)
        }
    }
}

/// The `nodetool` command as clap sees it (for parsing, completions and the man page).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command().version(info::version_text())
}

/// Where `cargo xtask export` writes [`man_page`], relative to the workspace root.
pub const MAN_PAGE_PATH: &str = "docs/nodetool.1";

/// The man page, `nodetool.1`, in roff.
pub fn man_page() -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = clap_mangen::Man::new(command()).render(&mut out);
    out
}

/// An error on stderr (`nodetool: ...`), or in JSON mode `{"ok":false,"error":{code,message}}`
/// on stdout.
fn report_error(code: &str, message: &str) {
    if term::json() {
        outln!("{}", error_json(code, message));
    } else {
        errln!("nodetool: {}", term::safe(message));
    }
}

fn error_json(code: &str, message: &str) -> serde_json::Value {
    serde_json::json!({ "ok": false, "error": { "code": code, "message": message } })
}

/// `--help` and `--version` print as clap writes them (exit 0), and so does the help a bare
/// `nodetool` or `nodetool packs` gets (exit 2). Every other parse error is bad input: one
/// `nodetool: ...` line naming what is wrong and where the command's help is (exit 2), or with
/// `--json` anywhere on the line, the error object on stdout.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let json = std::env::args()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand if !json => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        _ => {}
    }
    // clap renders `error: <what>` (continued on indented lines), then a blank line, `tip:`
    // lines and the usage.
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().map(str::trim);
    let what: Vec<&str> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
    let mut message = what.join(" ");
    if let Some(rest) = message.strip_prefix("error: ") {
        message = rest.to_string();
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        message = "a subcommand is required".into();
    }
    // Keep the tips that say what was meant (`a similar argument exists: '--json'`), not the
    // one about passing a flag as a value.
    for tip in lines.filter_map(|l| l.strip_prefix("tip: ")) {
        if !tip.starts_with("to pass") {
            message.push_str(&format!("; {tip}"));
        }
    }
    let message = format!("{message} (see `{} --help`)", command_path());
    if json {
        outln!("{}", error_json("usage", &message));
    } else {
        errln!("nodetool: {message}");
    }
    ExitCode::from(2)
}

/// The subcommand the process's arguments name (`nodetool packs allow`), for the help pointer.
fn command_path() -> String {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut path = vec![command.get_name().to_string()];
    for arg in std::env::args().skip(1) {
        if arg == "--" {
            break;
        }
        let Some(sub) = command.find_subcommand(&arg).cloned() else {
            continue;
        };
        path.push(sub.get_name().to_string());
        command = sub;
    }
    path.join(" ")
}

/// Prints `value` as the command's one JSON object.
fn print_json(value: &serde_json::Value) {
    outln!("{}", serde_json::to_string(value).unwrap_or_default());
}

/// Reads the environment once, then runs the command in its stage.
fn dispatch(cli: Cli) -> Outcome {
    let env = Environment::from_vars(|name| std::env::var_os(name));
    help::set_packs_args(&cli.packs);
    let cx = Context {
        env,
        json: cli.json,
        packs: cli.packs,
    };
    match cli.command.stage() {
        Stage::Direct(command) => commands::direct(command, cx),
        Stage::OnCatalog(command) => commands::on_catalog(command, cx),
    }
}
