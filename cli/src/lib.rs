//! `nodetool-cli`: the `nodetool` command-line front end.
//!
//! It owns argument parsing, the pack search path (`--packs`, `NODETOOL_PACKS_PATH`, the
//! installed root, the shipped root), wiring discovery, the catalog and the guest together, the
//! HTTP client behind `--allow-fetch`, and rendering — for people (results, logs, errors with the
//! offending source line and a caret) and for machines (`--json`).
//!
//! Architecture invariant: thin. Validation, the CodeAct allowlist and prompt tier, and docs
//! disclosure live in library crates (`nodetool_guest::validate`, `nodetool_runtime::codeact`)
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

mod fetch;
mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog, trust,
};
use nodetool_guest::{
    Capabilities, Dispatchers, FetchGrant, RunLimits, RunRequest, Sandbox, WorkspaceGrant,
    body_imports,
};
use nodetool_protocol::catalog::{Declaration, Resolution, StatusLevel};
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use nodetool_runtime::codeact::{self, Allowlist};
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

/// The largest response body `fetch` accepts in a CLI run.
const MAX_FETCH_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

#[derive(Parser)]
#[command(
    name = "nodetool",
    version,
    about = "Run and check NodeTool Code node bodies in the sandbox, and manage sandbox packs."
)]
struct Cli {
    /// A node_modules-style pack root to search first (repeatable, searched in order).
    #[arg(long = "packs", value_name = "DIR", global = true)]
    packs: Vec<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a Code node body; its static imports are its declaration.
    Run(RunArgs),
    /// Validate every Code node of a workflow graph, offline.
    Validate {
        /// The workflow JSON.
        workflow: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Stamp each Code node's imports with what they resolve to now.
    Lock {
        /// The workflow JSON (rewritten in place).
        workflow: PathBuf,
    },
    /// Inspect and trust sandbox packs.
    #[command(subcommand)]
    Packs(PacksCommand),
    /// Print the manifest JSON Schema.
    Schema,
    /// Run and inform model-written CodeAct actions under a session allowlist.
    #[command(subcommand)]
    Codeact(CodeactCommand),
}

#[derive(Args)]
struct RunArgs {
    /// The body (a file, or `-` / nothing for standard input).
    file: Option<PathBuf>,
    /// The `inputs` object: JSON text, or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE")]
    input: Option<String>,
    /// Deadline in milliseconds (default 30000).
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// A secret `getSecret(NAME)` may return (repeatable).
    #[arg(long = "secret", value_name = "NAME=VALUE")]
    secrets: Vec<String>,
    /// A directory the body may read and write through `workspace`.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// A host `fetch` may reach (repeatable); without one there is no `fetch`.
    #[arg(long = "allow-fetch", value_name = "HOST")]
    allow_fetch: Vec<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum PacksCommand {
    /// Every importable module and every diagnostic.
    List {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Diagnostics grouped by pack, with what to do; exit 1 when any is an error.
    Doctor,
    /// A pack's SKILL.md, or the module's own section.
    Docs {
        /// The specifier.
        specifier: String,
    },
    /// Trust a pack (the operator allowlist).
    Allow {
        /// The package name.
        name: String,
    },
    /// Stop trusting a pack.
    Disallow {
        /// The package name.
        name: String,
    },
}

#[derive(Subcommand)]
enum CodeactCommand {
    /// Run one action under a session allowlist.
    Step {
        /// The action's code (a file, or `-` / nothing for standard input).
        file: Option<PathBuf>,
        /// A pack the session allows (repeatable; default: the trusted packs).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The package section of the system prompt.
    Prompt {
        /// A pack the session allows (repeatable; default: the trusted packs).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
    },
    /// The package-docs tool.
    Docs {
        /// The specifier.
        specifier: String,
        /// A pack the session allows (repeatable; default: the trusted packs).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
    },
}

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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Failed) => ExitCode::from(1),
        Err(Failure::Usage(message)) => {
            errln!("nodetool: {message}");
            ExitCode::from(2)
        }
    }
}

/// `--help` and `--version` print as clap writes them (exit 0), and so does the help a bare
/// `nodetool` or `nodetool packs` gets (exit 2). Every other parse error is bad input: one
/// `nodetool: ...` line naming what is wrong and where the command's help is (exit 2).
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
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
    // Keep the tips that say what was meant (`a similar argument exists: '--json'`), not the
    // one about passing a flag as a value.
    for tip in lines.filter_map(|l| l.strip_prefix("tip: ")) {
        if !tip.starts_with("to pass") {
            message.push_str(&format!("; {tip}"));
        }
    }
    errln!("nodetool: {message} (see `{} --help`)", command_path());
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

fn dispatch(cli: Cli) -> Outcome {
    let env = Environment::from_process();
    match cli.command {
        Command::Schema => {
            let schema = nodetool_protocol::manifest_json_schema();
            outln!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(())
        }
        Command::Packs(PacksCommand::Allow { name }) => set_trust(&env, &name, true),
        Command::Packs(PacksCommand::Disallow { name }) => set_trust(&env, &name, false),
        command => {
            let trusted = trust::read_allowlist(&env.allowlist_path()).map_err(Failure::Usage)?;
            let catalog = build_catalog(&cli.packs, &env, &trusted)?;
            match command {
                Command::Run(args) => run(args, &catalog),
                Command::Validate { workflow, json } => validate(&workflow, json, &catalog),
                Command::Lock { workflow } => lock(&workflow, &catalog),
                Command::Packs(PacksCommand::List { json }) => {
                    render::packs_list(&catalog, json);
                    Ok(())
                }
                Command::Packs(PacksCommand::Doctor) => {
                    if render::doctor(&catalog) {
                        Err(Failure::Failed)
                    } else {
                        Ok(())
                    }
                }
                Command::Packs(PacksCommand::Docs { specifier }) => {
                    packs_docs(&specifier, &catalog)
                }
                Command::Codeact(CodeactCommand::Step { file, allow, json }) => {
                    codeact_step(file.as_deref(), &session(allow, &trusted), json, &catalog)
                }
                Command::Codeact(CodeactCommand::Prompt { allow }) => {
                    outln!(
                        "{}",
                        codeact::prompt_section(&session(allow, &trusted), &catalog)
                    );
                    Ok(())
                }
                Command::Codeact(CodeactCommand::Docs { specifier, allow }) => {
                    match codeact::package_docs(&specifier, &session(allow, &trusted), &catalog) {
                        Ok(text) => {
                            outln!("{text}");
                            Ok(())
                        }
                        Err(refusal) => {
                            errln!("{}", refusal.message());
                            Err(Failure::Failed)
                        }
                    }
                }
                Command::Schema
                | Command::Packs(PacksCommand::Allow { .. } | PacksCommand::Disallow { .. }) => {
                    Ok(())
                }
            }
        }
    }
}

/// The environment values the CLI reads, read once here and passed down as values.
struct Environment {
    packs_path: Option<String>,
    xdg_data_home: Option<PathBuf>,
    xdg_config_home: Option<PathBuf>,
    home: Option<PathBuf>,
    shipped: Option<PathBuf>,
}

impl Environment {
    fn from_process() -> Self {
        let path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Environment {
            packs_path: std::env::var("NODETOOL_PACKS_PATH").ok(),
            xdg_data_home: path("XDG_DATA_HOME"),
            xdg_config_home: path("XDG_CONFIG_HOME"),
            home: path("HOME"),
            shipped: path("NODETOOL_SHIPPED_PACKS_DIR"),
        }
    }

    fn installed_root(&self) -> Option<PathBuf> {
        let data = self
            .xdg_data_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".local/share")))?;
        Some(data.join("nodetool/packs/node_modules"))
    }

    fn allowlist_path(&self) -> PathBuf {
        let config = self
            .xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
            .unwrap_or_else(|| PathBuf::from(".config"));
        config.join("nodetool/packs.json")
    }

    fn shipped_root(&self) -> PathBuf {
        self.shipped
            .clone()
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"))
    }
}

fn build_catalog(
    packs: &[PathBuf],
    env: &Environment,
    trusted: &BTreeSet<String>,
) -> Result<DiscoveredCatalog, Failure> {
    let mut roots = Vec::new();
    let explicit = packs.iter().cloned().map(|p| (p, "--packs"));
    let from_env = env
        .packs_path
        .iter()
        .flat_map(|v| v.split(':'))
        .filter(|p| !p.is_empty())
        .map(|p| (PathBuf::from(p), "NODETOOL_PACKS_PATH"));
    for (path, source) in explicit.chain(from_env) {
        if !path.is_dir() {
            return Err(Failure::Usage(format!(
                "the pack root {} (from {source}) does not exist or is not a directory",
                path.display()
            )));
        }
        roots.push(SearchRoot {
            label: path.display().to_string(),
            path,
            kind: RootKind::Installed,
        });
    }
    if let Some(installed) = env.installed_root().filter(|p| p.is_dir()) {
        roots.push(SearchRoot {
            label: installed.display().to_string(),
            path: installed,
            kind: RootKind::Installed,
        });
    }
    let shipped = env.shipped_root();
    if shipped.is_dir() {
        roots.push(SearchRoot {
            label: "shipped packs".into(),
            path: shipped,
            kind: RootKind::Shipped,
        });
    } else if env.shipped.is_some() {
        // The built-in default may be absent (a binary moved away from its source tree); a
        // root the operator named must exist, like every `--packs` and NODETOOL_PACKS_PATH root.
        return Err(Failure::Usage(format!(
            "the pack root {} (from NODETOOL_SHIPPED_PACKS_DIR) does not exist or is not a directory",
            shipped.display()
        )));
    }
    Ok(discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: trusted,
        },
    ))
}

fn session(allow: Vec<String>, trusted: &BTreeSet<String>) -> Allowlist {
    if allow.is_empty() {
        Allowlist::new(trusted.iter().cloned())
    } else {
        Allowlist::new(allow)
    }
}

fn read_source(file: Option<&Path>) -> Result<(String, String), Failure> {
    match file {
        None => read_stdin(),
        Some(p) if p == Path::new("-") => read_stdin(),
        Some(p) => std::fs::read_to_string(p)
            .map(|text| (text, p.display().to_string()))
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", p.display()))),
    }
}

fn read_stdin() -> Result<(String, String), Failure> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
    Ok((text, "<stdin>".into()))
}

fn parse_input(input: Option<&str>) -> Result<Value, Failure> {
    let Some(input) = input else {
        return Ok(Value::Object(Vec::new()));
    };
    let (text, origin) = match input.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read --input file {path}: {e}")))?,
            path.to_string(),
        ),
        None => (input.to_string(), "--input".to_string()),
    };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{origin} is not valid JSON: {e}")))?;
    Ok(Value::from_json(json))
}

fn capabilities(args: &RunArgs) -> Result<Capabilities, Failure> {
    let mut secrets = BTreeMap::new();
    for s in &args.secrets {
        let Some((name, value)) = s.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(Failure::Usage(format!(
                "--secret expects NAME=VALUE, got {s:?}"
            )));
        };
        secrets.insert(name.to_string(), value.to_string());
    }
    let workspace = match &args.workspace {
        None => None,
        Some(dir) if dir.is_dir() => Some(WorkspaceGrant::standard(
            std::fs::canonicalize(dir)
                .map_err(|e| Failure::Usage(format!("--workspace {}: {e}", dir.display())))?,
        )),
        Some(dir) => {
            return Err(Failure::Usage(format!(
                "--workspace {} does not exist or is not a directory",
                dir.display()
            )));
        }
    };
    let fetch = (!args.allow_fetch.is_empty()).then(|| FetchGrant {
        allowed_hosts: args.allow_fetch.clone(),
        max_response_bytes: MAX_FETCH_RESPONSE_BYTES,
        client: Arc::new(fetch::HttpClient::new()),
    });
    Ok(Capabilities {
        secrets: (!secrets.is_empty()).then_some(secrets),
        workspace,
        fetch,
    })
}

/// The body's static imports resolved through the catalog (their errors end the run in the
/// guest with `module-not-found` / `module-unavailable`), or its syntax error.
fn resolve_body(code: &str, catalog: &dyn SandboxModuleCatalog) -> Result<Resolution, RunError> {
    let imports = body_imports(code).map_err(|e| RunError {
        line: Some(e.line),
        column: Some(e.column),
        ..RunError::new(RunErrorCode::SyntaxError, e.message)
    })?;
    // Only sandbox-specifier-shaped imports are declarations; anything else (`node:fs`, a path,
    // a URL) is left for the loader to refuse by name.
    let declarations: Vec<Declaration> = imports
        .into_iter()
        .filter(|i| nodetool_protocol::names::is_specifier(&i.specifier))
        .map(|i| Declaration::of(i.specifier))
        .collect();
    Ok(catalog.resolve_for_execution(&declarations))
}

/// The dispatchers the resolution's facades need: the host-module dispatcher (which re-checks
/// every host id against the registry pin) and, only when a WASM module is declared, the WASM
/// host (compiling and re-validating each binary before first use).
fn dispatchers(resolution: &Resolution) -> Result<Dispatchers, RunError> {
    let host = nodetool_host_modules::HostDispatcher::for_resolution(resolution)
        .map_err(|e| RunError::new(RunErrorCode::HostModuleError, e.0))?
        .map(|d| d as Arc<dyn nodetool_runtime::dispatch::Dispatcher>);
    let declares_wasm = resolution.modules.iter().any(|m| {
        matches!(
            m.kind,
            nodetool_protocol::catalog::ResolvedKind::Wasm { .. }
        )
    });
    let wasm = if declares_wasm {
        let engine = nodetool_wasm_host::WasmHost::new()
            .map_err(|e| RunError::new(RunErrorCode::WasmError, e.0))?;
        engine
            .dispatcher_for(resolution)
            .map_err(|e| RunError::new(RunErrorCode::WasmError, e.0))?
            .map(|d| d as Arc<dyn nodetool_runtime::dispatch::Dispatcher>)
    } else {
        None
    };
    Ok(Dispatchers { host, wasm })
}

/// Fills in where an import-related error's specifier is imported, when the guest could not.
fn locate_import(mut error: RunError, code: &str) -> RunError {
    if error.line.is_none()
        && let Some(import) = error.specifier.as_deref().and_then(|s| {
            body_imports(code)
                .ok()?
                .into_iter()
                .find(|i| i.specifier == s)
        })
    {
        error.line = Some(import.line);
        error.column = Some(import.column);
    }
    error
}

fn run(args: RunArgs, catalog: &DiscoveredCatalog) -> Outcome {
    let (code, origin) = read_source(args.file.as_deref())?;
    let inputs = parse_input(args.input.as_deref())?;
    let capabilities = capabilities(&args)?;
    let mut limits = RunLimits::STANDARD;
    if let Some(ms) = args.timeout_ms {
        if ms == 0 {
            return Err(Failure::Usage("--timeout-ms must be at least 1".into()));
        }
        limits.timeout = Duration::from_millis(ms);
    }
    let outcome = match resolve_body(&code, catalog) {
        Err(error) => nodetool_guest::RunOutcome {
            result: Err(error),
            logs: Vec::new(),
            duration: Duration::ZERO,
        },
        Ok(resolution) => match dispatchers(&resolution) {
            Err(error) => nodetool_guest::RunOutcome {
                result: Err(error),
                logs: Vec::new(),
                duration: Duration::ZERO,
            },
            Ok(dispatchers) => Sandbox::new().run(RunRequest {
                code: &code,
                resolution: &resolution,
                inputs: &inputs,
                limits,
                capabilities,
                dispatchers,
                cancel: None,
            }),
        },
    };
    let mut outcome = outcome;
    outcome.result = outcome.result.map_err(|e| locate_import(e, &code));
    let ok = outcome.result.is_ok();
    if args.json {
        render::run_json(&outcome);
    } else {
        render::run_human(&outcome, &code, &origin);
    }
    if ok { Ok(()) } else { Err(Failure::Failed) }
}

fn read_workflow(path: &Path) -> Result<serde_json::Value, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not valid JSON: {e}", path.display())))
}

fn validate(path: &Path, json: bool, catalog: &DiscoveredCatalog) -> Outcome {
    let document = read_workflow(path)?;
    let issues = nodetool_guest::validate::validate_graph(&document, catalog)
        .map_err(|e| Failure::Usage(format!("{}: {}", path.display(), e.0)))?;
    let nodes = nodetool_guest::validate::code_nodes(&document).unwrap_or_default();
    let failed = issues
        .iter()
        .any(|i| i.severity == nodetool_guest::validate::Severity::Error);
    if json {
        let out = serde_json::json!({ "ok": !failed, "issues": issues });
        outln!("{}", serde_json::to_string(&out).unwrap_or_default());
    } else {
        render::issues_human(&issues, &nodes, path);
    }
    if failed { Err(Failure::Failed) } else { Ok(()) }
}

fn lock(path: &Path, catalog: &DiscoveredCatalog) -> Outcome {
    let mut document = read_workflow(path)?;
    let stamped = nodetool_guest::validate::lock_graph(&mut document, catalog)
        .map_err(|e| Failure::Usage(format!("{}: {}", path.display(), e.0)))?;
    let text = serde_json::to_string_pretty(&document).unwrap_or_default();
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    outln!("stamped {stamped} Code node(s) in {}", path.display());
    Ok(())
}

fn packs_docs(specifier: &str, catalog: &DiscoveredCatalog) -> Outcome {
    let Some((pack, module)) = nodetool_protocol::names::split_specifier(specifier) else {
        return Err(Failure::Usage(format!(
            "{specifier:?} is not a sandbox specifier"
        )));
    };
    match catalog.pack_skill(pack) {
        Some(disclosure) => {
            let text = codeact::module_section(&disclosure.skill, specifier, module)
                .unwrap_or(&disclosure.skill.body);
            outln!("{}", text.trim());
            Ok(())
        }
        None => {
            errln!(
                "No installed sandbox package documents \"{specifier}\" (it is not installed, or its SKILL.md is missing or invalid; see `nodetool packs doctor`)."
            );
            Err(Failure::Failed)
        }
    }
}

fn set_trust(env: &Environment, name: &str, allowed: bool) -> Outcome {
    nodetool_protocol::names::check_package_name(name)
        .map_err(|e| Failure::Usage(format!("{name:?} {e}")))?;
    let path = env.allowlist_path();
    let mut set = trust::read_allowlist(&path).map_err(Failure::Usage)?;
    let changed = if allowed {
        set.insert(name.to_string())
    } else {
        set.remove(name)
    };
    trust::write_allowlist(&path, &set).map_err(Failure::Usage)?;
    let verb = if allowed {
        "trusted"
    } else {
        "no longer trusted"
    };
    let note = if changed { "" } else { " (unchanged)" };
    outln!(
        "{name} is {verb}{note}. This decides how its SKILL.md reaches agents and whether CodeAct sessions allow it by default; it never lets a pack run host code."
    );
    Ok(())
}

fn codeact_step(
    file: Option<&Path>,
    allowlist: &Allowlist,
    json: bool,
    catalog: &DiscoveredCatalog,
) -> Outcome {
    let (code, _) = read_source(file)?;
    let observation_of = |ok: bool, observation: String| -> Outcome {
        if json {
            outln!(
                "{}",
                serde_json::json!({ "ok": ok, "observation": observation })
            );
        } else {
            outln!("{observation}");
        }
        if ok { Ok(()) } else { Err(Failure::Failed) }
    };
    // An unparseable action still runs: the sandbox reports the syntax error itself.
    let imports: Vec<String> = body_imports(&code)
        .map(|i| i.into_iter().map(|i| i.specifier).collect())
        .unwrap_or_default();
    let resolution = match codeact::mount_action_imports(&imports, allowlist, catalog) {
        Ok(resolution) => resolution,
        Err(refusal) => return observation_of(false, refusal.observation),
    };
    if resolution
        .statuses
        .iter()
        .any(|s| s.status == StatusLevel::Error)
    {
        return observation_of(false, "the action's imports could not be resolved".into());
    }
    let dispatchers = match dispatchers(&resolution) {
        Ok(d) => d,
        Err(error) => return observation_of(false, render::error_line(&error)),
    };
    let outcome = Sandbox::new().run(RunRequest {
        code: &code,
        resolution: &resolution,
        inputs: &Value::Object(Vec::new()),
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers,
        cancel: None,
    });
    let logs: String = outcome
        .logs
        .iter()
        .map(|l| format!("{}\n", l.message))
        .collect();
    match outcome.result {
        Ok(value) => observation_of(true, format!("{logs}{}", render::value_text(&value))),
        Err(error) => observation_of(false, format!("{logs}{}", render::error_line(&error))),
    }
}
