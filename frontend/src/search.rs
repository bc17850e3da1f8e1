//! The pack search path, the operator's allowlist file, and the catalog discovered from them.
//!
//! Packs are searched in the `--packs` roots (in order), then `NODETOOL_PACKS_PATH`
//! (colon-separated), then the installed root (`$XDG_DATA_HOME/nodetool/packs/node_modules`),
//! then the shipped packs (`NODETOOL_SHIPPED_PACKS_DIR`, else the source tree's `packs/`). A
//! root the operator named must exist; the installed root and the built-in shipped default may
//! be absent.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog, trust,
};
use nodetool_runtime::CompiledLookup;

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
        }
    }

    /// `$XDG_DATA_HOME/nodetool/packs/node_modules` (or under `~/.local/share`).
    pub fn installed_root(&self) -> Option<PathBuf> {
        Some(self.install_dir()?.join("node_modules"))
    }

    /// `$XDG_DATA_HOME/nodetool/packs` (or under `~/.local/share`): the npm project
    /// `nodetool packs install` manages, holding the installed root and the install ledger.
    pub fn install_dir(&self) -> Option<PathBuf> {
        let data = self
            .xdg_data_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".local/share")))?;
        Some(data.join("nodetool/packs"))
    }

    /// `$XDG_CONFIG_HOME/nodetool/packs.json` (or under `~/.config`).
    pub fn allowlist_path(&self) -> PathBuf {
        let config = self
            .xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".config")))
            .unwrap_or_else(|| PathBuf::from(".config"));
        config.join("nodetool/packs.json")
    }

    /// The cache home: `$XDG_CACHE_HOME`, else `~/.cache` (the compiler's cache root is under
    /// it).
    pub fn cache_home(&self) -> PathBuf {
        self.xdg_cache_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".cache")))
            .unwrap_or_else(|| PathBuf::from(".cache"))
    }

    /// The shipped root: `NODETOOL_SHIPPED_PACKS_DIR`, else the source tree's `packs/`.
    pub fn shipped_root(&self) -> PathBuf {
        self.shipped
            .clone()
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"))
    }
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

/// A pack root the operator named does not exist or is not a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootError {
    /// The root as named.
    pub path: PathBuf,
    /// Where it was named (`--packs`, `NODETOOL_PACKS_PATH`, `NODETOOL_SHIPPED_PACKS_DIR`).
    pub origin: &'static str,
    /// Its label (a path only under [`RootLabels::Paths`]).
    pub label: String,
}

impl fmt::Display for RootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the pack root {} (from {}) does not exist or is not a directory",
            self.path.display(),
            self.origin
        )
    }
}

impl RootError {
    /// The same sentence naming the root by its label, for a remote client.
    pub fn without_path(&self) -> String {
        format!(
            "the pack root {} (from {}) does not exist or is not a directory",
            self.label, self.origin
        )
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
    /// The trusted pack names from the operator's allowlist file.
    pub fn trusted(&self) -> Result<BTreeSet<String>, SourceError> {
        trust::read_allowlist(&self.env.allowlist_path()).map_err(SourceError::Allowlist)
    }

    /// The search roots, in order of precedence. Fails when a root the operator named (a
    /// `--packs` or `NODETOOL_PACKS_PATH` entry, `NODETOOL_SHIPPED_PACKS_DIR`) is not a
    /// directory.
    pub fn roots(&self) -> Result<Vec<SearchRoot>, RootError> {
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
                return Err(RootError {
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
        let shipped = self.env.shipped_root();
        if shipped.is_dir() {
            roots.push(SearchRoot {
                label: "shipped packs".into(),
                path: shipped,
                kind: RootKind::Shipped,
            });
        } else if self.env.shipped.is_some() {
            // The built-in default may be absent (a binary moved away from its source tree); a
            // root the operator named must exist, like every `--packs` and NODETOOL_PACKS_PATH root.
            return Err(RootError {
                path: shipped,
                origin: "NODETOOL_SHIPPED_PACKS_DIR",
                label: "shipped packs".into(),
            });
        }
        Ok(roots)
    }

    /// Discovers every pack on the search path into one catalog.
    pub fn discover(
        &self,
        trusted: &BTreeSet<String>,
        compiled: &dyn CompiledLookup,
    ) -> Result<DiscoveredCatalog, RootError> {
        let roots = self.roots()?;
        Ok(discover_catalog(
            &roots,
            &DiscoveryOptions {
                compiled,
                trusted_packs: trusted,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            PathBuf::from("/home/x/.config/nodetool/packs.json")
        );
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
        assert_eq!(error.path, missing);
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
            ..Environment::default()
        };
        let error = sources(Vec::new(), env, RootLabels::Paths)
            .roots()
            .err()
            .unwrap_or_else(|| panic!("must fail"));
        assert_eq!(error.origin, "NODETOOL_SHIPPED_PACKS_DIR");
    }
}
