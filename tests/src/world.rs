//! The one isolated test world every CLI and server test runs its processes in.
//!
//! A [`World`] owns a fresh temporary directory holding a home, the five XDG directories, a
//! temporary directory, a working directory and (by default) an empty shipped-packs root. A
//! command it builds ([`World::command`]) starts from an **empty environment**: the child sees
//! only the variables this world sets and the few of [`PASSED_THROUGH`], so neither the
//! developer's `~/.cache`, `~/.config` and `~/.local/share` nor any `NODETOOL_*` setting of the
//! machine running the tests can reach it, and nothing it writes lands outside the world.
//!
//! Invariant: every path a command built here can write under (home, XDG, `TMPDIR`, the working
//! directory) is inside [`World::path`], removed when the world drops. `cargo xtask ci` proves it
//! for the whole suite by running the tests with `HOME` on a read-only directory and the XDG
//! variables removed (`xtask/src/isolation.rs`).
//!
//! ```no_run
//! use nodetool_tests::world::{World, shipped_packs};
//! let world = World::with_shipped(shipped_packs());
//! let body = world.write("body.js", "return 1 + 1");
//! let mut command = world.command("target/debug/nodetool");
//! command.arg("run").arg(&body).arg("--json");
//! let output = command.output();
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

/// The variables a child takes from the test process's own environment, when set there:
///
/// - `PATH`: the tools the project runs (npm, node, python3, readelf, script, chromium).
/// - `TESSDATA_PREFIX`: where this machine keeps Tesseract's language data (the OCR module's
///   one variable), a fact of the machine that is only read.
///
/// The world sets `HOME`, the five XDG directories, `TMPDIR` and `NODETOOL_SHIPPED_PACKS_DIR`.
/// Every other variable the workspace reads (the list in `nodetool_protocol::env`) is unset
/// unless the test sets it: a developer's `NODETOOL_PACKS_PATH`, `NODETOOL_ALLOW_UNCONFINED`,
/// `NO_COLOR` or `RUST_LOG` never changes what a test sees.
pub const PASSED_THROUGH: &[&str] = &["PATH", "TESSDATA_PREFIX"];

/// Unwraps with a message naming what failed (the workspace lints forbid `unwrap`).
#[track_caller]
pub fn must<T, E: Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The workspace root, canonical.
pub fn repo_root() -> PathBuf {
    must(
        std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")),
        "canonicalize the workspace root",
    )
}

/// The repo's shipped packs (`packs/`).
pub fn shipped_packs() -> PathBuf {
    repo_root().join("packs")
}

/// The fixture pack roots (`tests/fixtures/packs`: `installed-a`, `installed-b`, `shipped`).
pub fn fixture_packs() -> PathBuf {
    repo_root().join("tests/fixtures/packs")
}

/// Copies a directory tree: directories and the files in them, a symbolic link as what it
/// points at.
pub fn copy_dir(from: &Path, to: &Path) {
    must(std::fs::create_dir_all(to), "create a copy target");
    for entry in must(std::fs::read_dir(from), "read a directory to copy") {
        let entry = must(entry, "read a directory entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            must(std::fs::copy(entry.path(), &target), "copy a file");
        }
    }
}

/// The world's directories under its root, each created with it: (variable, directory).
const DIRS: &[(&str, &str)] = &[
    ("HOME", "home"),
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_CACHE_HOME", "cache"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_RUNTIME_DIR", "runtime"),
    ("TMPDIR", "tmp"),
];

/// One isolated world: a temporary root holding `home/`, `config/`, `data/`, `cache/`,
/// `state/`, `runtime/`, `tmp/`, `work/` and `shipped/`, removed on drop.
pub struct World {
    tmp: TempDir,
    shipped: PathBuf,
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

impl World {
    /// A world whose shipped root is its own empty `shipped/`: only what a test installs exists.
    pub fn new() -> World {
        let tmp = must(tempfile::tempdir(), "create a world's temp dir");
        for (_, dir) in DIRS {
            must(
                std::fs::create_dir_all(tmp.path().join(dir)),
                "create a world dir",
            );
        }
        // XDG_RUNTIME_DIR must be private to its user.
        let runtime = tmp.path().join("runtime");
        let mut permissions = must(std::fs::metadata(&runtime), "stat runtime/").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o700);
        must(
            std::fs::set_permissions(&runtime, permissions),
            "chmod runtime/",
        );
        for dir in ["work", "shipped"] {
            must(
                std::fs::create_dir_all(tmp.path().join(dir)),
                "create a world dir",
            );
        }
        let shipped = tmp.path().join("shipped");
        World { tmp, shipped }
    }

    /// A world whose shipped root is `shipped` (the repo's `packs/`, a fixture root...).
    pub fn with_shipped(shipped: impl Into<PathBuf>) -> World {
        let mut world = World::new();
        world.shipped = shipped.into();
        world
    }

    /// The world's temporary root (everything it owns is under it).
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// `HOME`.
    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// `XDG_CONFIG_HOME` (the allowlist is `nodetool/packs.json` under it).
    pub fn config(&self) -> PathBuf {
        self.path().join("config")
    }

    /// `XDG_DATA_HOME` (the installed packs and the written-out shipped packs are under it).
    pub fn data(&self) -> PathBuf {
        self.path().join("data")
    }

    /// `XDG_CACHE_HOME` (the compiler's cache and the WASM artifacts are under it).
    pub fn cache(&self) -> PathBuf {
        self.path().join("cache")
    }

    /// The working directory commands start in.
    pub fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    /// The shipped root commands get as `NODETOOL_SHIPPED_PACKS_DIR`.
    pub fn shipped(&self) -> &Path {
        &self.shipped
    }

    /// A directory `name` under the world's root, created.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        must(std::fs::create_dir_all(&dir), "create a world dir");
        dir
    }

    /// Writes `text` to `name` in the working directory (parents created); its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work().join(name);
        if let Some(parent) = path.parent() {
            must(std::fs::create_dir_all(parent), "create a parent dir");
        }
        must(std::fs::write(&path, text), "write a file");
        path
    }

    /// Every variable a command of this world gets: [`PASSED_THROUGH`] as the test process has
    /// them, the world's home, XDG and temporary directories, and its shipped root.
    pub fn vars(&self) -> Vec<(&'static str, OsString)> {
        let mut vars = passed_through();
        for (name, dir) in DIRS {
            vars.push((name, self.path().join(dir).into_os_string()));
        }
        vars.push((
            "NODETOOL_SHIPPED_PACKS_DIR",
            self.shipped.clone().into_os_string(),
        ));
        vars
    }

    /// `program` in this world: an empty environment plus [`World::vars`], started in
    /// [`World::work`] with standard input closed (a test that feeds it sets its own).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = self.bare_command(program);
        command.envs(self.vars());
        command
    }

    /// `program` with nothing of the world but its working directory: an empty environment
    /// plus only [`PASSED_THROUGH`], for tests about what a missing `HOME` or XDG variable does
    /// (they set what they mean to).
    pub fn bare_command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .envs(passed_through())
            .current_dir(self.work())
            .stdin(Stdio::null());
        command
    }
}

/// The [`PASSED_THROUGH`] variables the test process has.
fn passed_through() -> Vec<(&'static str, OsString)> {
    PASSED_THROUGH
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_sees_only_the_worlds_variables() {
        let world = World::with_shipped(shipped_packs());
        let output = must(world.command("env").output(), "run env");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name))
            .collect();
        names.sort_unstable();
        let mut expected: Vec<&str> = world.vars().iter().map(|(name, _)| *name).collect();
        expected.sort_unstable();
        assert_eq!(names, expected);
        for (name, value) in world.vars() {
            if PASSED_THROUGH.contains(&name) {
                continue;
            }
            let value = PathBuf::from(value);
            assert!(
                value.starts_with(world.path()) || value == shipped_packs(),
                "{name} is outside the world: {}",
                value.display()
            );
            assert!(value.is_dir(), "{name} does not exist: {}", value.display());
        }
    }

    #[test]
    fn a_bare_command_has_no_home_and_the_world_is_removed_on_drop() {
        let world = World::new();
        let output = must(world.bare_command("env").output(), "run env");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("HOME=") || l.starts_with("XDG_")),
            "{text}"
        );
        let root = world.path().to_path_buf();
        drop(world);
        assert!(!root.exists());
    }
}
