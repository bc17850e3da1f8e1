//! What each command does, one file per command, in two stages.
//!
//! [`Command::stage`] sorts a parsed command into the stage that runs it: a [`Direct`] command
//! runs without a catalog (it prints what is built in, edits the operator's files, or installs
//! packs and discovers what it needs itself), an [`OnCatalog`] command runs against the catalog
//! discovered from the search path first. Each stage matches its own enum exhaustively, so a new
//! command does not compile until it is given a stage, and no stage can be handed a command the
//! other one runs.

mod check;
mod codeact;
mod completions;
mod execution;
mod lock;
mod packs_allow;
mod packs_compile;
mod packs_docs;
mod packs_doctor;
mod packs_list;
mod run;
mod schema;
mod serve;
mod validate;

use std::io::Read;
use std::path::{Path, PathBuf};

use nodetool_frontend::search::{Environment, PackSources, RootLabels};

use crate::args::{CodeactCommand, Command, ExecutionArgs, PacksCommand, RunArgs};
use crate::{Failure, Outcome, compile, info, install, scaffold, term};

/// What every command is run with: the environment the front end read, `--json`, and the
/// `--packs` roots as given.
pub(crate) struct Context {
    pub(crate) env: Environment,
    pub(crate) json: bool,
    pub(crate) packs: Vec<PathBuf>,
}

/// The stage a command runs in.
pub(crate) enum Stage {
    Direct(Direct),
    OnCatalog(OnCatalog),
}

/// The commands that run without a catalog.
pub(crate) enum Direct {
    Schema,
    Completions(clap_complete::Shell),
    Info,
    Serve(nodetool_server::ServeArgs),
    PacksAllow(String),
    PacksDisallow(String),
    PacksNew {
        name: String,
        kind: scaffold::Kind,
        dir: PathBuf,
    },
    PacksInstall {
        spec: String,
        allow_reserved_name: bool,
    },
    PacksRebuild(String),
    PacksUninstall(String),
}

/// The commands that run against the catalog discovered from the search path.
pub(crate) enum OnCatalog {
    Run(RunArgs),
    Check {
        file: Option<PathBuf>,
        deny_warnings: bool,
    },
    Validate {
        workflow: PathBuf,
        deny_warnings: bool,
    },
    Lock {
        workflow: PathBuf,
    },
    PacksList,
    PacksDoctor {
        pack: Option<String>,
        deny_warnings: bool,
    },
    PacksDocs {
        specifier: String,
    },
    PacksCompile,
    CodeactStep {
        file: Option<PathBuf>,
        allow: Vec<String>,
        execution: ExecutionArgs,
    },
    CodeactPrompt {
        allow: Vec<String>,
    },
    CodeactDocs {
        specifier: String,
        allow: Vec<String>,
    },
}

impl Command {
    /// The stage that runs this command.
    pub(crate) fn stage(self) -> Stage {
        use Stage::{Direct as D, OnCatalog as C};
        match self {
            Command::Schema => D(Direct::Schema),
            Command::Completions { shell } => D(Direct::Completions(shell)),
            Command::Info => D(Direct::Info),
            Command::Serve(args) => D(Direct::Serve(args)),
            Command::Run(args) => C(OnCatalog::Run(args)),
            Command::Check {
                file,
                deny_warnings,
            } => C(OnCatalog::Check {
                file,
                deny_warnings,
            }),
            Command::Validate {
                workflow,
                deny_warnings,
            } => C(OnCatalog::Validate {
                workflow,
                deny_warnings,
            }),
            Command::Lock { workflow } => C(OnCatalog::Lock { workflow }),
            Command::Packs(command) => match command {
                PacksCommand::Allow { name } => D(Direct::PacksAllow(name)),
                PacksCommand::Disallow { name } => D(Direct::PacksDisallow(name)),
                PacksCommand::New { name, kind, dir } => D(Direct::PacksNew { name, kind, dir }),
                PacksCommand::Install {
                    spec,
                    allow_reserved_name,
                } => D(Direct::PacksInstall {
                    spec,
                    allow_reserved_name,
                }),
                PacksCommand::Rebuild { name } => D(Direct::PacksRebuild(name)),
                PacksCommand::Uninstall { name } => D(Direct::PacksUninstall(name)),
                PacksCommand::List => C(OnCatalog::PacksList),
                PacksCommand::Doctor {
                    pack,
                    deny_warnings,
                } => C(OnCatalog::PacksDoctor {
                    pack,
                    deny_warnings,
                }),
                PacksCommand::Docs { specifier } => C(OnCatalog::PacksDocs { specifier }),
                PacksCommand::Compile => C(OnCatalog::PacksCompile),
            },
            Command::Codeact(command) => match command {
                CodeactCommand::Step {
                    file,
                    allow,
                    execution,
                } => C(OnCatalog::CodeactStep {
                    file,
                    allow,
                    execution,
                }),
                CodeactCommand::Prompt { allow } => C(OnCatalog::CodeactPrompt { allow }),
                CodeactCommand::Docs { specifier, allow } => {
                    C(OnCatalog::CodeactDocs { specifier, allow })
                }
            },
        }
    }
}

/// Runs a command of the first stage.
pub(crate) fn direct(command: Direct, cx: Context) -> Outcome {
    let Context { env, json, packs } = cx;
    match command {
        Direct::Schema => schema::schema(),
        Direct::Completions(shell) => completions::completions(shell, json),
        Direct::Info => {
            info::info(packs, &env, json);
            Ok(())
        }
        Direct::Serve(args) => serve::serve(args, packs, env),
        Direct::PacksAllow(name) => packs_allow::set_allowed(&env, pack_roots(packs), &name, true),
        Direct::PacksDisallow(name) => {
            packs_allow::set_allowed(&env, pack_roots(packs), &name, false)
        }
        Direct::PacksNew { name, kind, dir } => scaffold::new_pack(&name, kind, &dir),
        Direct::PacksInstall {
            spec,
            allow_reserved_name,
        } => landed(install::install(&env, &spec, json, allow_reserved_name)),
        Direct::PacksRebuild(name) => landed(install::trust(&env, &name, json)),
        Direct::PacksUninstall(name) => landed(install::uninstall(&env, &name, json)),
    }
}

impl OnCatalog {
    /// Whether the command lists diagnostics, which then check the host modules' native
    /// libraries too (loading Tesseract takes about 100 ms, which a run does not pay: its call
    /// says what is missing).
    fn lists_diagnostics(&self) -> bool {
        matches!(self, OnCatalog::PacksList | OnCatalog::PacksDoctor { .. })
    }
}

/// Discovers the catalog, then runs a command of the second stage against it.
pub(crate) fn on_catalog(command: OnCatalog, cx: Context) -> Outcome {
    let Context { env, json, packs } = cx;
    let sources = PackSources {
        explicit: pack_roots(packs),
        env: env.clone(),
        labels: RootLabels::Paths,
    };
    let trusted = sources
        .trusted()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    // Compiled npm modules come from the compiler's cache; an entry nothing compiled yet is
    // `pending-compile`.
    let cache = compile::cache(&env).map_err(Failure::Usage)?;
    let catalog = if command.lists_diagnostics() {
        sources.discover(&trusted, &cache)
    } else {
        sources.discover_for_run(&trusted, &cache)
    }
    .map_err(|e| Failure::Usage(e.to_string()))?;
    // A CodeAct session's default: the packs whose consent holds for their identity now.
    let consented = catalog.trusted_packs();
    match command {
        OnCatalog::Run(args) => run::run(
            args,
            json,
            &catalog,
            &compile::FirstUse {
                sources: &sources,
                trusted: &trusted,
                cache: &cache,
            },
        ),
        OnCatalog::Check {
            file,
            deny_warnings,
        } => check::check(file.as_deref(), json, deny_warnings, &catalog, &env),
        OnCatalog::Validate {
            workflow,
            deny_warnings,
        } => validate::validate(&workflow, json, deny_warnings, &catalog, &env),
        OnCatalog::Lock { workflow } => lock::lock(&workflow, json, &catalog, &env),
        OnCatalog::PacksList => packs_list::list(&catalog, &env, json),
        OnCatalog::PacksDoctor {
            pack,
            deny_warnings,
        } => packs_doctor::doctor(&catalog, pack.as_deref(), deny_warnings, json),
        OnCatalog::PacksDocs { specifier } => packs_docs::packs_docs(&specifier, json, &catalog),
        OnCatalog::PacksCompile => packs_compile::packs_compile(&sources, &cache, json),
        OnCatalog::CodeactStep {
            file,
            allow,
            execution,
        } => {
            codeact::warn_unknown_allowed(&allow, &catalog);
            codeact::step(
                file.as_deref(),
                &codeact::session(allow, &consented),
                json,
                &catalog,
                &execution,
                &env,
            )
        }
        OnCatalog::CodeactPrompt { allow } => codeact::prompt(allow, &consented, json, &catalog),
        OnCatalog::CodeactDocs { specifier, allow } => {
            codeact::docs(&specifier, allow, &consented, json, &catalog)
        }
    }
}

/// `--packs` roots as the search path takes them: a directory that is itself a pack (it has
/// a package.json with a `nodetool` block) is searched as the node_modules-style root above
/// it, with a note saying so, when that root's layout (`<root>/<name>` or
/// `<root>/@scope/<name>`) holds it; otherwise a warning says how to point at it.
fn pack_roots(roots: Vec<PathBuf>) -> Vec<PathBuf> {
    roots
        .into_iter()
        .map(|root| {
            let Some(name) = own_pack_name(&root) else {
                return root;
            };
            let depth = if name.starts_with('@') { 2 } else { 1 };
            let canonical = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone());
            let mut parent = canonical.clone();
            for _ in 0..depth {
                parent.pop();
            }
            if canonical == parent.join(&name) {
                if !term::output().quiet {
                    errln!(
                        "nodetool: note: --packs {} is the pack {} itself; searching the root that holds it, {}",
                        term::safe(&root.display().to_string()),
                        term::safe(&name),
                        term::safe(&parent.display().to_string())
                    );
                }
                parent
            } else {
                errln!(
                    "nodetool: warning: --packs {} is the pack {} itself, and not in a node_modules-style root; help: put it at <root>/{} and pass --packs <root>",
                    term::safe(&root.display().to_string()),
                    term::safe(&name),
                    term::safe(&name)
                );
                root
            }
        })
        .collect()
}

/// The package name of `dir` when it is a sandbox pack (a package.json with a `nodetool` key).
fn own_pack_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("nodetool")?;
    json.get("name")?.as_str().map(str::to_string)
}

/// An install-flow answer: a configuration problem exits 2, a failure already rendered exits 1.
fn landed(result: Result<bool, String>) -> Outcome {
    match result {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::Failed),
        Err(message) => Err(Failure::Usage(message)),
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
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() && !term::output().quiet {
        errln!(
            "nodetool: reading the body from standard input (end it with Ctrl-D; pass a file to read one instead)"
        );
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
    Ok((text, "<stdin>".into()))
}
