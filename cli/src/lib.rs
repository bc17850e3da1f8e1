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

mod compile;
mod info;
mod install;
mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use nodetool_discovery::{DiscoveredCatalog, trust};
use nodetool_frontend::answers;
use nodetool_frontend::fetch;
use nodetool_frontend::run::{BodyRun, Isolation, Runner};
use nodetool_frontend::search::{Environment, PackSources, RootLabels};
use nodetool_guest::{Capabilities, FetchGrant, RunLimits, WorkspaceGrant};
use nodetool_protocol::catalog::StatusLevel;
use nodetool_protocol::value::Value;
use nodetool_runtime::SandboxModuleCatalog;
use nodetool_runtime::codeact::{self, Allowlist};

/// The largest response body `fetch` accepts in a CLI run.
const MAX_FETCH_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

/// `--version` names the engines too ([`info::version_text`], set when the command is built).
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
    /// Serve the packs, runs over HTTP and the Packages page (the `nodetool-server` binary).
    Serve(nodetool_server::ServeArgs),
    /// This binary's version and engines, the pack search path, the directories it uses, the
    /// browser runner it serves and whether OCR works here. Writes nothing.
    Info {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
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
    #[command(flatten)]
    isolation: IsolationArgs,
}

/// How a run is isolated from this process.
#[derive(Args, Clone, Default)]
struct IsolationArgs {
    /// The memory ceiling of the run's sandbox worker process, in MiB: everything the run
    /// allocates, host modules and WASM included (default 512).
    #[arg(long, value_name = "MIB")]
    worker_memory_mb: Option<u64>,
    /// How long past its deadline the run may take to answer before its worker is killed, in
    /// milliseconds (default 100).
    #[arg(long, value_name = "MS")]
    grace_ms: Option<u64>,
    /// Debugging only: run in this process instead of a sandbox worker. A deadline or memory
    /// limit then holds only while the engine cooperates.
    #[arg(long)]
    in_process: bool,
}

impl IsolationArgs {
    /// The runner these flags ask for (one worker; compiled WASM modules kept in the cache
    /// directory `env` names).
    fn runner(&self, env: &Environment) -> Result<Runner, Failure> {
        let isolation = if self.in_process {
            Isolation::InProcess
        } else {
            let mut options = nodetool_frontend::worker::options_from_flags(
                1,
                self.worker_memory_mb,
                self.grace_ms,
                None,
            )
            .map_err(Failure::Usage)?;
            let cache = env.cache_dir().map_err(|e| Failure::Usage(e.to_string()))?;
            options.artifact_dir = Some(nodetool_frontend::worker::artifact_dir(&cache));
            Isolation::Workers(options)
        };
        Runner::start(isolation).map_err(|e| {
            Failure::Usage(format!(
                "{e}\nhelp: reinstall nodetool (`cargo install --path cli --locked`), or pass --in-process to run without a worker (debugging only)"
            ))
        })
    }
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
    /// Compile every npm entry on the search path (bundle, scan, probe, cache); exit 1 when any
    /// module was skipped.
    Compile {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Install a pack with its install scripts disabled (a registry name with an optional
    /// @version, a local tarball or a directory) and record it in the install ledger. A
    /// sandbox-only pack is active at once; any other is inactive until `packs trust`.
    Install {
        /// `name`, `name@version`, `@scope/name@range`, `./pack.tgz` or `./pack-dir`.
        spec: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run an installed pack's install scripts (and its dependencies') against the files on
    /// disk, after proving the lockfile still matches what was installed.
    Trust {
        /// The package name.
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Remove a pack `packs install` installed.
    Uninstall {
        /// The package name.
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
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
        #[command(flatten)]
        isolation: IsolationArgs,
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
    // Started as a sandbox worker by a `nodetool` front end: serve runs, nothing else.
    if let Some(code) = nodetool_frontend::worker::run_if_worker() {
        return code;
    }
    let command = <Cli as clap::CommandFactory>::command().version(info::version_text());
    let parsed = command
        .try_get_matches()
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
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
    let env = Environment::from_vars(|name| std::env::var_os(name));
    match cli.command {
        Command::Schema => {
            let schema = nodetool_protocol::manifest_json_schema();
            outln!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(())
        }
        Command::Info { json } => {
            info::info(cli.packs, &env, json);
            Ok(())
        }
        Command::Serve(args) => {
            // Every directory is settled before anything starts, so nothing is ever written
            // into the current directory.
            env.dirs().map_err(|e| Failure::Usage(e.to_string()))?;
            nodetool_server::serve_blocking(args, cli.packs, env).map_err(|e| match e {
                nodetool_server::ServeError::Config(message) => Failure::Usage(message),
                nodetool_server::ServeError::Failed(message) => {
                    errln!("nodetool: {message}");
                    Failure::Failed
                }
            })
        }
        Command::Packs(PacksCommand::Allow { name }) => set_trust(&env, &name, true),
        Command::Packs(PacksCommand::Install { spec, json }) => {
            landed(install::install(&env, &spec, json))
        }
        Command::Packs(PacksCommand::Trust { name, json }) => {
            landed(install::trust(&env, &name, json))
        }
        Command::Packs(PacksCommand::Uninstall { name, json }) => {
            landed(install::uninstall(&env, &name, json))
        }
        Command::Packs(PacksCommand::Disallow { name }) => set_trust(&env, &name, false),
        command => {
            let sources = PackSources {
                explicit: cli.packs,
                env: env.clone(),
                labels: RootLabels::Paths,
            };
            let trusted = sources
                .trusted()
                .map_err(|e| Failure::Usage(e.to_string()))?;
            // Compiled npm modules come from the compiler's cache; an entry nothing compiled yet
            // is `pending-compile`.
            let cache = compile::cache(&env).map_err(Failure::Usage)?;
            // What lists diagnostics checks the host modules' native libraries too (loading
            // Tesseract takes about 100 ms, which a run does not pay: its call says what is
            // missing).
            let lists = matches!(
                command,
                Command::Packs(PacksCommand::List { .. } | PacksCommand::Doctor)
            );
            let catalog = if lists {
                sources.discover(&trusted, &cache)
            } else {
                sources.discover_for_run(&trusted, &cache)
            }
            .map_err(|e| Failure::Usage(e.to_string()))?;
            match command {
                Command::Run(args) => run(
                    args,
                    &catalog,
                    &compile::FirstUse {
                        sources: &sources,
                        trusted: &trusted,
                        cache: &cache,
                    },
                ),
                Command::Packs(PacksCommand::Compile { json }) => {
                    let roots = sources.roots().map_err(|e| Failure::Usage(e.to_string()))?;
                    match compile::packs_compile(&roots, &cache, json, &compile::npm()) {
                        Ok(true) => Ok(()),
                        Ok(false) => Err(Failure::Failed),
                        Err(message) => {
                            errln!("nodetool: {message}");
                            Err(Failure::Failed)
                        }
                    }
                }
                Command::Validate { workflow, json } => validate(&workflow, json, &catalog, &env),
                Command::Lock { workflow } => lock(&workflow, &catalog),
                Command::Packs(PacksCommand::List { json }) => {
                    // The ledger adds mode, active and scripts per installed pack; one that
                    // cannot be read is reported and the catalog is listed anyway.
                    let ledger = install::installer(&env)
                        .ok()
                        .map(|i| i.ledger())
                        .transpose()
                        .unwrap_or_else(|e| {
                            errln!("nodetool: {}", e.message);
                            None
                        });
                    render::packs_list(&catalog, ledger.as_ref(), json);
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
                Command::Codeact(CodeactCommand::Step {
                    file,
                    allow,
                    json,
                    isolation,
                }) => codeact_step(
                    file.as_deref(),
                    &session(allow, &trusted),
                    json,
                    &catalog,
                    &isolation,
                    &env,
                ),
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
                | Command::Serve(_)
                | Command::Info { .. }
                | Command::Packs(
                    PacksCommand::Allow { .. }
                    | PacksCommand::Disallow { .. }
                    | PacksCommand::Install { .. }
                    | PacksCommand::Trust { .. }
                    | PacksCommand::Uninstall { .. },
                ) => Ok(()),
            }
        }
    }
}

/// An install-flow answer: a configuration problem exits 2, a failure already rendered exits 1.
fn landed(result: Result<bool, String>) -> Outcome {
    match result {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::Failed),
        Err(message) => Err(Failure::Usage(message)),
    }
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

fn run(args: RunArgs, catalog: &DiscoveredCatalog, first_use: &compile::FirstUse<'_>) -> Outcome {
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
    let runner = args.isolation.runner(&first_use.sources.env)?;
    warn_unenforced(&runner);
    // The body is parsed in a worker; a shipped guest pack it imports compiles now if nothing
    // compiled it yet.
    let body = BodyRun {
        code: &code,
        inputs: &inputs,
        limits,
        capabilities,
        cancel: None,
    };
    let outcome = match runner.scan(&code, None) {
        Ok(imports) => {
            let recompiled = first_use.catalog_for(&imports, catalog);
            let catalog = recompiled.as_ref().unwrap_or(catalog);
            runner.run_scanned(catalog, &imports, body)
        }
        Err(error) => nodetool_guest::RunOutcome {
            result: Err(error),
            logs: Vec::new(),
            duration: Duration::ZERO,
        },
    };
    let ok = outcome.result.is_ok();
    if args.json {
        outln!(
            "{}",
            serde_json::to_string(&answers::run_json(&outcome)).unwrap_or_default()
        );
    } else {
        render::run_human(&outcome, &code, &origin);
    }
    if ok { Ok(()) } else { Err(Failure::Failed) }
}

/// States once what the runner cannot enforce here.
fn warn_unenforced(runner: &Runner) {
    if let Some(note) = runner.unenforced() {
        errln!("nodetool: warning: {note}");
    }
}

fn read_workflow(path: &Path) -> Result<serde_json::Value, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not valid JSON: {e}", path.display())))
}

fn validate(path: &Path, json: bool, catalog: &DiscoveredCatalog, env: &Environment) -> Outcome {
    let document = read_workflow(path)?;
    // Every body is parsed in a sandbox worker, as a run's is.
    let runner = IsolationArgs::default().runner(env)?;
    let issues = runner
        .validate_graph(&document, catalog)
        .map_err(|e| Failure::Usage(format!("{}: {}", path.display(), e.0)))?;
    let nodes = nodetool_guest::validate::code_nodes(&document).unwrap_or_default();
    let failed = answers::has_errors(&issues);
    if json {
        outln!(
            "{}",
            serde_json::to_string(&answers::validate_json(&issues)).unwrap_or_default()
        );
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
    trust::write_atomically(path, &text).map_err(Failure::Usage)?;
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
    let path = env
        .allowlist_path()
        .map_err(|e| Failure::Usage(e.to_string()))?;
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
    isolation: &IsolationArgs,
    env: &Environment,
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
    let runner = isolation.runner(env)?;
    warn_unenforced(&runner);
    // An unparseable action still runs: the sandbox reports the syntax error itself.
    let imports: Vec<String> = match runner.scan(&code, None) {
        Ok(imports) => imports.into_iter().map(|i| i.specifier).collect(),
        Err(e) if e.code == nodetool_protocol::run::RunErrorCode::SyntaxError => Vec::new(),
        Err(e) => return observation_of(false, render::error_line(&e)),
    };
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
    let outcome = runner.run_resolved(
        &resolution,
        BodyRun {
            code: &code,
            inputs: &Value::Object(Vec::new()),
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            cancel: None,
        },
    );
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
