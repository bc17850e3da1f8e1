//! The pack search path, the operator's allowlist file, the directories nodetool keeps its
//! state in, and the catalog discovered from them.
//!
//! Packs are searched in the `--packs` roots (in order), then `NODETOOL_PACKS_PATH`
//! (colon-separated), then the installed root (`$XDG_DATA_HOME/nodetool/packs/node_modules`),
//! then the shipped packs: `NODETOOL_SHIPPED_PACKS_DIR`, else the packs embedded in this binary,
//! written out on first use to `$XDG_DATA_HOME/nodetool/shipped/<version>-<digest>`
//! ([`crate::shipped`]). A root the operator named must exist; the installed root may be
//! absent. No path of the machine the binary was built on is ever used.
//!
//! The config, data and cache directories are `$XDG_CONFIG_HOME`, `$XDG_DATA_HOME` and
//! `$XDG_CACHE_HOME`, else `~/.config`, `~/.local/share` and `~/.cache`. With neither set, a
//! command that needs one fails naming the variables ([`NoDirectory`]); nothing falls back to
//! the current directory.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog, trust,
};
use nodetool_protocol::catalog::{ModuleKind, Status, StatusCode, StatusLevel};
use nodetool_protocol::host::HOST_MODULES;
use nodetool_runtime::{CompiledLookup, SandboxModuleCatalog};

use crate::shipped;

/// The environment values the search path depends on, read by the front end and passed in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `NODETOOL_PACKS_PATH`: colon-separated roots searched after `--packs`.
    pub packs_path: Option<String>,
    /// `XDG_DATA_HOME` (the installed root lives under it).
    pub xdg_data_home: Option<PathBuf>,
    /// `XDG_CONFIG_HOME` (the allowlist file lives under it).
    pub xdg_config_home: Option<PathBuf>,
    /// `XDG_CACHE_HOME` (the compiler's cache lives under it).
    pub xdg_cache_home: Option<PathBuf>,
    /// `HOME`, for the XDG defaults.
    pub home: Option<PathBuf>,
    /// `NODETOOL_SHIPPED_PACKS_DIR`: the shipped root instead of the source tree's `packs/`.
    pub shipped: Option<PathBuf>,
    /// `NODETOOL_ALLOW_UNCONFINED=1`: run bodies in workers that could not confine themselves.
    pub allow_unconfined: bool,
}

impl Environment {
    /// Reads the variables through `var` (a front end passes `std::env::var_os`). Empty values
    /// count as unset; a `NODETOOL_PACKS_PATH` that is not UTF-8 is ignored.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let path = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Environment {
            packs_path: var("NODETOOL_PACKS_PATH").and_then(|v| v.into_string().ok()),
            xdg_data_home: path("XDG_DATA_HOME"),
            xdg_config_home: path("XDG_CONFIG_HOME"),
            xdg_cache_home: path("XDG_CACHE_HOME"),
            home: path("HOME"),
            shipped: path("NODETOOL_SHIPPED_PACKS_DIR"),
            allow_unconfined: var(crate::worker::ALLOW_UNCONFINED_ENV).is_some_and(|v| v == "1"),
        }
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_home(&self) -> Result<PathBuf, NoDirectory> {
        self.xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
            .ok_or(NoDirectory {
                what: "config",
                variable: "XDG_CONFIG_HOME",
            })
    }

    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub fn data_home(&self) -> Result<PathBuf, NoDirectory> {
        self.xdg_data_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".local/share")))
            .ok_or(NoDirectory {
                what: "data",
                variable: "XDG_DATA_HOME",
            })
    }

    /// `$XDG_CACHE_HOME`, else `~/.cache` (the compiler's cache and the WASM artifacts are
    /// under it).
    pub fn cache_dir(&self) -> Result<PathBuf, NoDirectory> {
        self.xdg_cache_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".cache")))
            .ok_or(NoDirectory {
                what: "cache",
                variable: "XDG_CACHE_HOME",
            })
    }

    /// All three, or the first that cannot be found.
    pub fn dirs(&self) -> Result<Dirs, NoDirectory> {
        Ok(Dirs {
            config: self.config_home()?,
            data: self.data_home()?,
            cache: self.cache_dir()?,
        })
    }

    /// The cache home, as [`Environment::cache_dir`], for callers that checked
    /// [`Environment::dirs`] (or discovered, which checks it) first. Without `HOME` or
    /// `XDG_CACHE_HOME` it is the relative `.cache`, which such a caller never reaches.
    pub fn cache_home(&self) -> PathBuf {
        self.cache_dir().unwrap_or_else(|_| PathBuf::from(".cache"))
    }

    /// `$XDG_DATA_HOME/nodetool/packs/node_modules` (or under `~/.local/share`).
    pub fn installed_root(&self) -> Option<PathBuf> {
        Some(self.install_dir()?.join("node_modules"))
    }

    /// `$XDG_DATA_HOME/nodetool/packs` (or under `~/.local/share`): the npm project
    /// `nodetool packs install` manages, holding the installed root and the install ledger.
    pub fn install_dir(&self) -> Option<PathBuf> {
        Some(self.data_home().ok()?.join("nodetool/packs"))
    }

    /// `$XDG_CONFIG_HOME/nodetool/packs.json` (or under `~/.config`).
    pub fn allowlist_path(&self) -> Result<PathBuf, NoDirectory> {
        Ok(self.config_home()?.join("nodetool/packs.json"))
    }

    /// The shipped root: `NODETOOL_SHIPPED_PACKS_DIR`, else where this binary's embedded packs
    /// are written out in the data directory ([`shipped::root_in`]). Nothing is written here.
    pub fn shipped_root(&self) -> Result<PathBuf, NoDirectory> {
        match &self.shipped {
            Some(dir) => Ok(dir.clone()),
            None => Ok(shipped::root_in(&self.data_home()?)),
        }
    }
}

/// The three directories nodetool keeps its state in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    /// `$XDG_CONFIG_HOME` (the allowlist file: `nodetool/packs.json`).
    pub config: PathBuf,
    /// `$XDG_DATA_HOME` (installed packs, the shipped packs written out).
    pub data: PathBuf,
    /// `$XDG_CACHE_HOME` (compiled npm modules, compiled WASM).
    pub cache: PathBuf,
}

/// Neither `HOME` nor the XDG variable for a directory is set, so there is nowhere to read or
/// write it (a systemd unit, `env -i`). Nothing falls back to the current directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoDirectory {
    /// `config`, `data` or `cache`.
    pub what: &'static str,
    /// `XDG_CONFIG_HOME`, `XDG_DATA_HOME` or `XDG_CACHE_HOME`.
    pub variable: &'static str,
}

impl fmt::Display for NoDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "there is no {} directory: neither HOME nor {} is set; set HOME (or all of XDG_CONFIG_HOME, XDG_DATA_HOME and XDG_CACHE_HOME) so nodetool has somewhere to keep its packs, allowlist and caches (it never writes into the current directory instead)",
            self.what, self.variable
        )
    }
}

/// One root of the search path, as [`PackSources::search_path`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootEntry {
    /// `--packs[1]`, `NODETOOL_PACKS_PATH[2]`, `installed packs`, `shipped packs`.
    pub label: String,
    /// Where it is; `None` when there is no data directory to hold it.
    pub path: Option<PathBuf>,
    /// Where it came from: `--packs`, `NODETOOL_PACKS_PATH`, `nodetool packs install`,
    /// `NODETOOL_SHIPPED_PACKS_DIR` or `embedded in this binary` (written out on first use).
    pub origin: &'static str,
    /// Whether it is a directory now.
    pub present: bool,
}

/// How diagnostics name the roots (discovery prints only these labels, never a path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootLabels {
    /// By their paths: right for a local user reading their own terminal.
    Paths,
    /// By where they came from (`--packs[1]`, `NODETOOL_PACKS_PATH[2]`, `installed packs`,
    /// `shipped packs`): right for anything a remote client reads.
    Opaque,
}

/// Why the search path could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootError {
    /// A root the operator named does not exist or is not a directory.
    Missing {
        /// The root as named.
        path: PathBuf,
        /// Where it was named (`--packs`, `NODETOOL_PACKS_PATH`, `NODETOOL_SHIPPED_PACKS_DIR`).
        origin: &'static str,
        /// Its label (a path only under [`RootLabels::Paths`]).
        label: String,
    },
    /// There is no data, config or cache directory to search or keep packs in.
    NoDirectory(NoDirectory),
    /// The shipped packs could not be written out to the data directory (the message names
    /// the directory and the error).
    Shipped(String),
}

impl fmt::Display for RootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootError::Missing { path, origin, .. } => write!(
                f,
                "the pack root {} (from {origin}) does not exist or is not a directory",
                path.display(),
            ),
            RootError::NoDirectory(e) => e.fmt(f),
            RootError::Shipped(why) => write!(
                f,
                "the shipped packs could not be written to the data directory: {why} (set XDG_DATA_HOME to a writable directory, or NODETOOL_SHIPPED_PACKS_DIR to a copy of the packs)"
            ),
        }
    }
}

impl RootError {
    /// The same sentence naming the root by its label, for a remote client.
    pub fn without_path(&self) -> String {
        match self {
            RootError::Missing { label, origin, .. } => format!(
                "the pack root {label} (from {origin}) does not exist or is not a directory"
            ),
            RootError::NoDirectory(e) => e.to_string(),
            RootError::Shipped(_) => {
                "the shipped packs could not be written to the data directory (the server log names it)".into()
            }
        }
    }
}

impl From<NoDirectory> for RootError {
    fn from(e: NoDirectory) -> RootError {
        RootError::NoDirectory(e)
    }
}

/// Why the packs could not be discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceError {
    /// A named root is missing.
    Root(RootError),
    /// The allowlist file is unreadable or malformed (the message names the file).
    Allowlist(String),
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Root(e) => e.fmt(f),
            SourceError::Allowlist(m) => f.write_str(m),
        }
    }
}

impl SourceError {
    /// The message without any filesystem path, for a remote client.
    pub fn without_path(&self) -> String {
        match self {
            SourceError::Root(e) => e.without_path(),
            SourceError::Allowlist(_) => {
                "the operator's pack allowlist file cannot be read or is malformed (the server log names it)".into()
            }
        }
    }
}

/// Where packs come from: the explicit roots, the environment, and how roots are labelled.
#[derive(Debug, Clone)]
pub struct PackSources {
    /// `--packs` roots, searched first, in order.
    pub explicit: Vec<PathBuf>,
    /// The environment values.
    pub env: Environment,
    /// How diagnostics name the roots.
    pub labels: RootLabels,
}

impl PackSources {
    /// The operator's allowlist file: the packs allowed, each with the identity it was
    /// allowed for. Discovery binds trust to those identities ([`PackSources::discover`]).
    pub fn trusted(&self) -> Result<trust::Allowlist, SourceError> {
        let path = self
            .env
            .allowlist_path()
            .map_err(|e| SourceError::Root(e.into()))?;
        trust::Allowlist::read(&path).map_err(SourceError::Allowlist)
    }

    /// The search roots, in order of precedence, writing the embedded shipped packs out on
    /// first use. Fails when a root the operator named (a `--packs` or `NODETOOL_PACKS_PATH`
    /// entry, `NODETOOL_SHIPPED_PACKS_DIR`) is not a directory, when there is no data
    /// directory (the installed root and the shipped packs live there), or when the shipped
    /// packs cannot be written.
    pub fn roots(&self) -> Result<Vec<SearchRoot>, RootError> {
        self.env.data_home()?;
        let mut roots = Vec::new();
        let explicit =
            (self.explicit.iter().cloned().enumerate()).map(|(i, p)| (p, "--packs", i + 1));
        let from_env = self
            .env
            .packs_path
            .iter()
            .flat_map(|v| v.split(':'))
            .filter(|p| !p.is_empty())
            .enumerate()
            .map(|(i, p)| (PathBuf::from(p), "NODETOOL_PACKS_PATH", i + 1));
        for (path, origin, number) in explicit.chain(from_env) {
            let label = match self.labels {
                RootLabels::Paths => path.display().to_string(),
                RootLabels::Opaque => format!("{origin}[{number}]"),
            };
            if !path.is_dir() {
                return Err(RootError::Missing {
                    path,
                    origin,
                    label,
                });
            }
            roots.push(SearchRoot {
                label,
                path,
                kind: RootKind::Installed,
            });
        }
        if let Some(installed) = self.env.installed_root().filter(|p| p.is_dir()) {
            roots.push(SearchRoot {
                label: match self.labels {
                    RootLabels::Paths => installed.display().to_string(),
                    RootLabels::Opaque => "installed packs".into(),
                },
                path: installed,
                kind: RootKind::Installed,
            });
        }
        let shipped = self.env.shipped_root()?;
        if self.env.shipped.is_none() {
            shipped::materialize(&shipped).map_err(RootError::Shipped)?;
        }
        if !shipped.is_dir() {
            // A root the operator named must exist, like every `--packs` and
            // NODETOOL_PACKS_PATH root.
            return Err(RootError::Missing {
                path: shipped,
                origin: "NODETOOL_SHIPPED_PACKS_DIR",
                label: "shipped packs".into(),
            });
        }
        roots.push(SearchRoot {
            label: "shipped packs".into(),
            path: shipped,
            kind: RootKind::Shipped,
        });
        Ok(roots)
    }

    /// The search path as `nodetool info` shows it: every root in order, labelled as under
    /// [`RootLabels::Opaque`], found without writing anything (the shipped packs are written
    /// out on first use, the installed root by the first `packs install`).
    pub fn search_path(&self) -> Vec<RootEntry> {
        let entry = |label: String, path: Option<PathBuf>, origin| RootEntry {
            present: path.as_ref().is_some_and(|p| p.is_dir()),
            label,
            path,
            origin,
        };
        let mut entries: Vec<RootEntry> = (self.explicit.iter().enumerate())
            .map(|(i, p)| entry(format!("--packs[{}]", i + 1), Some(p.clone()), "--packs"))
            .collect();
        let from_env = (self.env.packs_path.iter())
            .flat_map(|v| v.split(':'))
            .filter(|p| !p.is_empty())
            .enumerate();
        for (i, p) in from_env {
            entries.push(entry(
                format!("NODETOOL_PACKS_PATH[{}]", i + 1),
                Some(PathBuf::from(p)),
                "NODETOOL_PACKS_PATH",
            ));
        }
        entries.push(entry(
            "installed packs".into(),
            self.env.installed_root(),
            "nodetool packs install",
        ));
        let origin = match self.env.shipped {
            Some(_) => "NODETOOL_SHIPPED_PACKS_DIR",
            None => "embedded in this binary",
        };
        entries.push(entry(
            "shipped packs".into(),
            self.env.shipped_root().ok(),
            origin,
        ));
        entries
    }

    /// Discovers every pack on the search path into one catalog, with the host-library
    /// statuses ([`host_library_statuses`]): what `packs list` and the server show.
    pub fn discover(
        &self,
        trusted: &trust::Allowlist,
        compiled: &dyn CompiledLookup,
    ) -> Result<DiscoveredCatalog, RootError> {
        let mut catalog = self.discover_for_run(trusted, compiled)?;
        let statuses = host_library_statuses(&catalog, &|id| {
            nodetool_host_modules::library_status(id).and_then(Result::err)
        });
        catalog.add_diagnostics(statuses);
        Ok(catalog)
    }

    /// The same catalog without the host-library statuses, for a run: checking a library
    /// loads it (Tesseract: about 100 ms), and a run that calls a module whose library is
    /// missing gets the call's own error naming what to install.
    ///
    /// Trust is bound to identity here: a pack allowed for another identity than the one it
    /// has now is untrusted, with a `consent-identity-changed` diagnostic
    /// ([`trust::apply_consent`]; an installed pack's identity is its ledger integrity,
    /// [`crate::install::consent::installed_integrities`]).
    pub fn discover_for_run(
        &self,
        trusted: &trust::Allowlist,
        compiled: &dyn CompiledLookup,
    ) -> Result<DiscoveredCatalog, RootError> {
        let roots = self.roots()?;
        let mut catalog = discover_catalog(
            &roots,
            &DiscoveryOptions {
                compiled,
                trusted_packs: &trusted.names(),
            },
        );
        let integrities = crate::install::consent::installed_integrities(&self.env);
        trust::apply_consent(&mut catalog, trusted, &|name| {
            integrities.get(name).cloned()
        });
        Ok(catalog)
    }
}

/// A `host-library-missing` warning for each host module `catalog` offers whose native library
/// `missing` says is absent (`missing(id)` is the sentence saying what to install). Discovery
/// cannot say this: it loads no library. The module still resolves.
pub fn host_library_statuses(
    catalog: &dyn SandboxModuleCatalog,
    missing: &dyn Fn(&str) -> Option<String>,
) -> Vec<Status> {
    let mut statuses = Vec::new();
    for summary in catalog.summaries() {
        if summary.kind != ModuleKind::Host {
            continue;
        }
        // The registry pins each host id to one pack, so the pack names the id.
        let Some(spec) = HOST_MODULES
            .iter()
            .find(|h| h.pack_name == summary.pack_name)
        else {
            continue;
        };
        if let Some(why) = missing(spec.id) {
            statuses.push(Status {
                pack_name: summary.pack_name.clone(),
                specifier: Some(summary.specifier.clone()),
                status: StatusLevel::Warning,
                code: StatusCode::HostLibraryMissing,
                message: format!(
                    "{}: the module resolves, but its calls fail on this host: {why}",
                    summary.specifier
                ),
            });
        }
    }
    statuses
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sources(explicit: Vec<PathBuf>, env: Environment, labels: RootLabels) -> PackSources {
        PackSources {
            explicit,
            env,
            labels,
        }
    }

    #[test]
    fn environment_reads_only_what_it_is_given() {
        let env = Environment::from_vars(|name| match name {
            "NODETOOL_PACKS_PATH" => Some("/a:/b".into()),
            "HOME" => Some("/home/x".into()),
            "XDG_DATA_HOME" => Some("".into()),
            _ => None,
        });
        assert_eq!(env.packs_path.as_deref(), Some("/a:/b"));
        assert_eq!(env.xdg_data_home, None, "empty counts as unset");
        assert_eq!(
            env.installed_root(),
            Some(PathBuf::from(
                "/home/x/.local/share/nodetool/packs/node_modules"
            ))
        );
        assert_eq!(
            env.allowlist_path(),
            Ok(PathBuf::from("/home/x/.config/nodetool/packs.json"))
        );
        assert_eq!(
            env.dirs(),
            Ok(Dirs {
                config: "/home/x/.config".into(),
                data: "/home/x/.local/share".into(),
                cache: "/home/x/.cache".into(),
            })
        );
        // The shipped packs are this binary's own, written out under the data directory.
        let shipped = env.shipped_root().unwrap_or_default();
        assert!(
            shipped.starts_with("/home/x/.local/share/nodetool/shipped/"),
            "{}",
            shipped.display()
        );
    }

    #[test]
    fn without_home_or_xdg_every_directory_is_a_clear_error() {
        let env = Environment::from_vars(|name| match name {
            "HOME" | "XDG_CONFIG_HOME" => Some("".into()),
            _ => None,
        });
        let error = env.dirs().err().unwrap_or_else(|| panic!("must fail"));
        assert_eq!(
            error.to_string(),
            "there is no config directory: neither HOME nor XDG_CONFIG_HOME is set; set HOME (or all of XDG_CONFIG_HOME, XDG_DATA_HOME and XDG_CACHE_HOME) so nodetool has somewhere to keep its packs, allowlist and caches (it never writes into the current directory instead)"
        );
        assert_eq!(env.allowlist_path(), Err(error));
        assert_eq!(env.installed_root(), None);
        let sources = sources(Vec::new(), env, RootLabels::Paths);
        let message = sources
            .roots()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message
                .starts_with("there is no data directory: neither HOME nor XDG_DATA_HOME is set;"),
            "{message}"
        );
        let message = sources
            .trusted()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.starts_with("there is no config directory"),
            "{message}"
        );
    }

    #[test]
    fn the_embedded_shipped_packs_are_written_to_the_data_directory_on_first_use() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let env = Environment {
            home: Some(tmp.path().to_path_buf()),
            ..Environment::default()
        };
        let roots = sources(Vec::new(), env.clone(), RootLabels::Opaque)
            .roots()
            .unwrap_or_else(|e| panic!("roots: {e}"));
        let shipped = env.shipped_root().unwrap_or_default();
        assert_eq!(roots.len(), 1);
        assert_eq!(roots[0].path, shipped);
        assert_eq!(roots[0].label, "shipped packs");
        assert!(shipped.starts_with(tmp.path().join(".local/share/nodetool/shipped")));
        assert!(
            shipped
                .join("@nodetool-ai/sandbox-geo/package.json")
                .is_file()
        );
        assert!(shipped.join("package-lock.json").is_file());
    }

    #[test]
    fn opaque_labels_never_name_a_path() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("mkdir: {e}"));
        }
        let env = Environment {
            packs_path: Some(b.display().to_string()),
            shipped: Some(tmp.path().to_path_buf()),
            xdg_data_home: Some(tmp.path().join("data")),
            ..Environment::default()
        };
        let roots = sources(vec![a.clone()], env.clone(), RootLabels::Opaque)
            .roots()
            .unwrap_or_else(|e| panic!("roots: {e}"));
        let labels: Vec<&str> = roots.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["--packs[1]", "NODETOOL_PACKS_PATH[1]", "shipped packs"]
        );
        let missing = tmp.path().join("missing");
        let error = sources(vec![a, missing.clone()], env, RootLabels::Opaque)
            .roots()
            .err()
            .unwrap_or_else(|| panic!("a missing root must fail"));
        assert!(
            matches!(&error, RootError::Missing { path, .. } if *path == missing),
            "{error:?}"
        );
        let remote = error.without_path();
        assert!(
            !remote.contains(&tmp.path().display().to_string()),
            "{remote}"
        );
        assert!(remote.contains("--packs[2]"), "{remote}");
    }

    #[test]
    fn a_named_shipped_root_must_exist() {
        let env = Environment {
            shipped: Some(PathBuf::from("/nonexistent/nodetool/shipped")),
            home: Some(PathBuf::from("/nonexistent/home")),
            ..Environment::default()
        };
        let error = sources(Vec::new(), env, RootLabels::Paths)
            .roots()
            .err()
            .unwrap_or_else(|| panic!("must fail"));
        assert!(
            matches!(
                error,
                RootError::Missing {
                    origin: "NODETOOL_SHIPPED_PACKS_DIR",
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_missing_host_library_is_a_warning_on_its_module() {
        let env = Environment {
            shipped: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs")),
            home: Some(PathBuf::from("/nonexistent/home")),
            ..Environment::default()
        };
        let catalog = sources(Vec::new(), env, RootLabels::Opaque)
            .discover_for_run(
                &trust::Allowlist::default(),
                &nodetool_runtime::NoCompiledModules,
            )
            .unwrap_or_else(|e| panic!("discover: {e}"));
        let statuses = host_library_statuses(&catalog, &|id| {
            (id == "ocr").then(|| "Tesseract is not installed on this host".to_string())
        });
        assert_eq!(
            statuses,
            [Status {
                pack_name: "@nodetool-ai/sandbox-ocr".into(),
                specifier: Some("@nodetool-ai/sandbox-ocr".into()),
                status: StatusLevel::Warning,
                code: StatusCode::HostLibraryMissing,
                message: "@nodetool-ai/sandbox-ocr: the module resolves, but its calls fail on this host: Tesseract is not installed on this host".into(),
            }]
        );
        assert!(host_library_statuses(&catalog, &|_| None).is_empty());
    }
}
