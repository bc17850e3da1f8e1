//! The command line as clap parses it: the global flags, every command and its arguments.
//!
//! What each command does is in [`crate::commands`]; [`Command::stage`] sorts a parsed command
//! into the stage that runs it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use nodetool_frontend::run::{Isolation, Runner};
use nodetool_frontend::search::Environment;

use crate::term::ColorChoice;
use crate::{Failure, scaffold};

/// `--version` names the engines too ([`crate::info::version_text`], set when the command is built).
#[derive(Parser)]
#[command(
    name = "nodetool",
    version,
    about = "Run and check NodeTool Code node bodies in the sandbox, and manage sandbox packs.",
    after_help = "Examples:\n  nodetool run body.js --input '{\"x\": 1}'\n  nodetool check body.js\n  nodetool validate workflow.json --json\n  nodetool packs doctor\n\nEvery command takes --json: one JSON object on stdout, errors as {\"ok\":false,\"error\":{\"code\",\"message\"}}.\nExit status: 0 ok, 1 the run or check failed, 2 a usage or configuration error."
)]
pub(crate) struct Cli {
    /// A node_modules-style pack root to search first (repeatable, searched in order). A
    /// directory that is itself a pack is searched as the root holding it.
    #[arg(long = "packs", value_name = "DIR", global = true)]
    pub(crate) packs: Vec<PathBuf>,
    /// Print one JSON object on stdout, errors included.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// When to colour human output (`NO_COLOR` turns `auto` off).
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto, global = true)]
    pub(crate) color: ColorChoice,
    /// Say less: no progress or notes on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// Say more: progress in detail (npm's own output during `packs install`).
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run a Code node body; its static imports are its declaration.
    #[command(
        after_help = "Examples:\n  nodetool run body.js --input '{\"a\": 1}' --timeout-ms 5000\n  echo 'return 1 + 1' | nodetool run -\n  nodetool run body.js --allow-fetch api.example.com --secret TOKEN=abc --json"
    )]
    Run(RunArgs),
    /// Check one Code node body offline: syntax, imports, missing exports, absent globals.
    #[command(
        after_help = "Examples:\n  nodetool check body.js\n  nodetool check - < body.js\n  nodetool check body.js --deny-warnings --json"
    )]
    Check {
        /// The body (a file, or `-` / nothing for standard input).
        file: Option<PathBuf>,
        /// Fail (exit 1) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Validate every Code node of a workflow graph, offline.
    #[command(
        after_help = "Examples:\n  nodetool validate workflow.json\n  nodetool validate workflow.json --deny-warnings --json"
    )]
    Validate {
        /// The workflow JSON.
        workflow: PathBuf,
        /// Fail (exit 1) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Stamp each Code node's imports with what they resolve to now; refuses (exit 1) while a
    /// node has errors.
    #[command(after_help = "Example:\n  nodetool lock workflow.json")]
    Lock {
        /// The workflow JSON (rewritten in place).
        workflow: PathBuf,
    },
    /// Inspect, install and allow sandbox packs.
    #[command(subcommand)]
    Packs(PacksCommand),
    /// Print the manifest JSON Schema.
    #[command(after_help = "Example:\n  nodetool schema > nodetool-manifest.schema.json")]
    Schema,
    /// Run and inform model-written CodeAct actions under a session allowlist.
    #[command(subcommand)]
    Codeact(CodeactCommand),
    /// Serve the packs, runs over HTTP and the Packages page (the `nodetool-server` binary).
    #[command(after_help = "Example:\n  nodetool serve --port 7777")]
    Serve(nodetool_server::ServeArgs),
    /// This binary's version and engines, the pack search path, the directories it uses, the
    /// browser runner it serves and whether OCR works here. Writes nothing.
    #[command(after_help = "Example:\n  nodetool info --json")]
    Info,
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  nodetool completions bash > ~/.local/share/bash-completion/completions/nodetool\n  nodetool completions zsh > ~/.zfunc/_nodetool\n  nodetool completions fish > ~/.config/fish/completions/nodetool.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
pub(crate) struct RunArgs {
    /// The body (a file, or `-` / nothing for standard input).
    pub(crate) file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) execution: ExecutionArgs,
}

/// What a run may use and how long it may take (`run` and `codeact step`).
#[derive(Args)]
pub(crate) struct ExecutionArgs {
    /// The `inputs` object: JSON text, or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE")]
    pub(crate) input: Option<String>,
    /// Deadline in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 30_000)]
    pub(crate) timeout_ms: u64,
    /// A secret `getSecret(NAME)` may return (repeatable).
    #[arg(long = "secret", value_name = "NAME=VALUE")]
    pub(crate) secrets: Vec<String>,
    /// A directory the body may read and write through `workspace`.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// A host `fetch` may reach (repeatable); without one there is no `fetch`.
    #[arg(long = "allow-fetch", value_name = "HOST")]
    pub(crate) allow_fetch: Vec<String>,
    #[command(flatten)]
    pub(crate) isolation: IsolationArgs,
}

/// How a run is isolated from this process.
#[derive(Args, Clone)]
pub(crate) struct IsolationArgs {
    /// The memory ceiling of the run's sandbox worker process, in MiB: everything the run
    /// allocates, host modules and WASM included.
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    pub(crate) worker_memory_mb: u64,
    /// How long past its deadline the run may take to answer before its worker is killed, in
    /// milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub(crate) grace_ms: u64,
    /// Debugging only: run in this process instead of a sandbox worker, with no confinement. A
    /// deadline or memory limit then holds only while the engine cooperates, and the body's
    /// engine runs with everything this process can reach; it needs --allow-unconfined too.
    #[arg(long)]
    pub(crate) in_process: bool,
    /// Run in a sandbox worker even where it cannot be confined (no seccomp: another OS, an old
    /// kernel, a container that forbids it); without this flag (or NODETOOL_ALLOW_UNCONFINED=1)
    /// such a host refuses to run bodies.
    #[arg(long)]
    pub(crate) allow_unconfined: bool,
}

impl Default for IsolationArgs {
    fn default() -> Self {
        IsolationArgs {
            worker_memory_mb: 512,
            grace_ms: 100,
            in_process: false,
            allow_unconfined: false,
        }
    }
}

/// Why `--in-process` alone is refused: it gives up both walls the worker keeps (the killable
/// process and its confinement), so it asks for the same consent as an unconfined worker.
const IN_PROCESS_NEEDS_CONSENT: &str = "--in-process runs bodies in this process, with no sandbox worker and no seccomp or Landlock confinement\nhelp: for debugging, pass --allow-unconfined as well (or set NODETOOL_ALLOW_UNCONFINED=1)";

impl IsolationArgs {
    /// The runner these flags ask for (one worker; compiled WASM modules kept in the cache
    /// directory `env` names).
    pub(crate) fn runner(&self, env: &Environment) -> Result<Runner, Failure> {
        let allow_unconfined = self.allow_unconfined || env.allow_unconfined;
        let isolation = if self.in_process {
            if !allow_unconfined {
                return Err(Failure::Usage(IN_PROCESS_NEEDS_CONSENT.into()));
            }
            Isolation::InProcess
        } else {
            let mut options = nodetool_frontend::worker::options_from_flags(
                1,
                Some(self.worker_memory_mb),
                Some(self.grace_ms),
                None,
            )
            .map_err(Failure::Usage)?;
            options.allow_unconfined |= allow_unconfined;
            let cache = env.cache_dir().map_err(|e| Failure::Usage(e.to_string()))?;
            options.artifact_dir = Some(nodetool_frontend::worker::artifact_dir(&cache));
            Isolation::Workers(options)
        };
        Runner::start(isolation).map_err(|e| {
            Failure::Usage(format!(
                "{e}\nhelp: reinstall nodetool (`cargo install --path cli --locked`), or pass --in-process --allow-unconfined to run without a worker (debugging only)"
            ))
        })
    }
}

#[derive(Subcommand)]
pub(crate) enum PacksCommand {
    /// Every importable module and every diagnostic.
    #[command(after_help = "Example:\n  nodetool packs list --json")]
    List,
    /// Every problem of every pack (or of PACK) at once, with what to do; exit 1 when any is
    /// an error.
    #[command(
        after_help = "Examples:\n  nodetool packs doctor\n  nodetool packs doctor @acme/geo --packs ./node_modules --deny-warnings --json"
    )]
    Doctor {
        /// Only this pack.
        pack: Option<String>,
        /// Fail (exit 1) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// A pack's SKILL.md, or the module's own section.
    #[command(after_help = "Example:\n  nodetool packs docs @nodetool-ai/sandbox-geo")]
    Docs {
        /// The specifier.
        specifier: String,
    },
    /// Allow a pack for agents: its SKILL.md reaches them as trusted text and CodeAct
    /// sessions allow it by default. It never lets a pack run host code.
    #[command(after_help = "Example:\n  nodetool packs allow @acme/geo")]
    Allow {
        /// The package name.
        name: String,
    },
    /// Stop allowing a pack for agents.
    #[command(after_help = "Example:\n  nodetool packs disallow @acme/geo")]
    Disallow {
        /// The package name.
        name: String,
    },
    /// Compile every npm entry on the search path (bundle, scan, probe, cache); exit 1 when any
    /// module was skipped.
    #[command(after_help = "Example:\n  nodetool packs compile --packs ./node_modules --json")]
    Compile,
    /// Install a pack with its install scripts disabled (a registry name with an optional
    /// @version, a local tarball or a directory) and record it in the install ledger. A
    /// sandbox-only pack is active at once; any other stays inactive until `packs rebuild`.
    #[command(
        after_help = "Examples:\n  nodetool packs install @acme/nodetool-geo@1.2\n  nodetool packs install ./pack.tgz -v"
    )]
    Install {
        /// `name`, `name@version`, `@scope/name@range`, `./pack.tgz` or `./pack-dir`.
        spec: String,
        /// Let a local tarball or directory take a name reserved for NodeTool's own packs
        /// (`@nodetool-ai/...`); it is then used instead of the shipped pack of that name.
        #[arg(long)]
        allow_reserved_name: bool,
    },
    /// Rebuild with scripts: run an installed pack's install scripts (and its dependencies')
    /// against the files on disk, after proving the lockfile still matches what was installed.
    #[command(
        alias = "trust",
        after_help = "Example:\n  nodetool packs rebuild @acme/nodetool-geo\n\n`packs trust` is the same command under its former name."
    )]
    Rebuild {
        /// The package name.
        name: String,
    },
    /// Remove a pack `packs install` installed.
    #[command(after_help = "Example:\n  nodetool packs uninstall @acme/nodetool-geo")]
    Uninstall {
        /// The package name.
        name: String,
    },
    /// Scaffold a new pack that `packs doctor` passes.
    #[command(
        after_help = "Examples:\n  nodetool packs new @acme/geo --kind js\n  nodetool packs new @acme/yaml --kind npm --dir ./packs\n  nodetool packs new @acme/add --kind wasm"
    )]
    New {
        /// The package name (`@scope/name`).
        name: String,
        /// What its module is: authored JS, an npm library bundled on install, or WASM.
        #[arg(long, value_enum, default_value_t = scaffold::Kind::Js)]
        kind: scaffold::Kind,
        /// The node_modules-style root to create it in (then `--packs DIR` finds it).
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
pub(crate) enum CodeactCommand {
    /// Run one action under a session allowlist.
    #[command(
        after_help = "Examples:\n  nodetool codeact step action.js --allow @nodetool-ai/sandbox-geo --json\n  echo 'return 1' | nodetool codeact step - --timeout-ms 2000"
    )]
    Step {
        /// The action's code (a file, or `-` / nothing for standard input).
        file: Option<PathBuf>,
        /// A pack the session allows (repeatable; default: the packs allowed for agents).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
        #[command(flatten)]
        execution: ExecutionArgs,
    },
    /// The package section of the system prompt.
    #[command(after_help = "Example:\n  nodetool codeact prompt --allow @nodetool-ai/sandbox-geo")]
    Prompt {
        /// A pack the session allows (repeatable; default: the packs allowed for agents).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
    },
    /// The package-docs tool.
    #[command(
        after_help = "Example:\n  nodetool codeact docs @nodetool-ai/sandbox-geo --allow @nodetool-ai/sandbox-geo"
    )]
    Docs {
        /// The specifier.
        specifier: String,
        /// A pack the session allows (repeatable; default: the packs allowed for agents).
        #[arg(long = "allow", value_name = "PACK")]
        allow: Vec<String>,
    },
}
