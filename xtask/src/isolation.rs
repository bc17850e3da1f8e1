//! The proof that no test writes outside its temporary directories.
//!
//! `cargo xtask ci` runs `cargo test` with `HOME` on a fresh read-only directory (mode 0555)
//! and every `XDG_*` variable removed, so `~/.cache`, `~/.config`, `~/.local/share` and every
//! default a tool derives from them point into that directory. A test that writes there fails
//! at the write; one running as root, which the mode does not stop, is caught after the run:
//! the directory must still be empty. The tests own their directories through
//! `nodetool_tests::world` (and `tempfile`, under `TMPDIR`, which is left as it is).
//!
//! Cargo and rustup keep working: `CARGO_HOME` and `RUSTUP_HOME` are set to where they are now
//! (their defaults under the real home when unset). The npm installs of the prerequisites run
//! before this, with the real `HOME`.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A read-only, empty `HOME` for one command, removed on drop.
pub struct ReadOnlyHome {
    dir: PathBuf,
}

impl ReadOnlyHome {
    /// Creates `$TMPDIR/nodetool-ci-home-<pid>-<n>`, empty, mode 0555.
    pub fn create() -> Result<ReadOnlyHome, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("nodetool-ci-home-{}-{n}", std::process::id()));
        if dir.exists() {
            remove(&dir)?;
        }
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let home = ReadOnlyHome { dir };
        std::fs::set_permissions(&home.dir, std::fs::Permissions::from_mode(0o555))
            .map_err(|e| format!("cannot make {} read-only: {e}", home.dir.display()))?;
        Ok(home)
    }

    /// The directory `HOME` names.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Points `command` at this home: `HOME` set, every `XDG_*` variable removed, `CARGO_HOME`
    /// and `RUSTUP_HOME` kept where they are.
    pub fn apply(&self, command: &mut Command) {
        let real_home = std::env::var_os("HOME").map(PathBuf::from);
        let kept = |name: &str, default: &str| -> Option<OsString> {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .or_else(|| {
                    let dir = real_home.as_ref()?.join(default);
                    dir.is_dir().then(|| dir.into_os_string())
                })
        };
        if let Some(cargo_home) = kept("CARGO_HOME", ".cargo") {
            command.env("CARGO_HOME", cargo_home);
        }
        if let Some(rustup_home) = kept("RUSTUP_HOME", ".rustup") {
            command.env("RUSTUP_HOME", rustup_home);
        }
        // Inherited or set on the command already: none reaches the tests.
        let set: Vec<OsString> = command.get_envs().map(|(n, _)| n.to_os_string()).collect();
        for name in std::env::vars_os().map(|(n, _)| n).chain(set) {
            if name.to_string_lossy().starts_with("XDG_") {
                command.env_remove(name);
            }
        }
        command.env("HOME", self.path());
    }

    /// Fails naming what a test left in the home (it must still be empty).
    pub fn check_untouched(&self) -> Result<(), String> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("cannot list {}: {e}", self.dir.display()))?;
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        names.sort();
        Err(format!(
            "a test wrote into HOME ({}): {}; tests must write only under their own temporary directories (nodetool_tests::world)",
            self.dir.display(),
            names.join(", ")
        ))
    }
}

impl Drop for ReadOnlyHome {
    fn drop(&mut self) {
        let _ = remove(&self.dir);
    }
}

/// Makes `dir` writable again and removes it with everything in it.
fn remove(dir: &Path) -> Result<(), String> {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    std::fs::remove_dir_all(dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))
}

/// Runs `command` through `run` with a [`ReadOnlyHome`], then checks the home is untouched
/// (also after a failed run, so a write is reported beside the failure it caused).
pub fn run_with_read_only_home(
    command: &mut Command,
    run: impl FnOnce(&mut Command) -> Result<(), String>,
) -> Result<(), String> {
    let home = ReadOnlyHome::create()?;
    home.apply(command);
    let outcome = run(command);
    let untouched = home.check_untouched();
    match (outcome, untouched) {
        (Ok(()), untouched) => untouched,
        (Err(failed), Ok(())) => Err(failed),
        (Err(failed), Err(wrote)) => Err(format!("{failed}; {wrote}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_gets_the_read_only_home_and_no_xdg_variable() {
        let home = ReadOnlyHome::create().unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(home.path())
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o555);
        let mut command = Command::new("env");
        command.env("XDG_CACHE_HOME", "/somewhere");
        home.apply(&mut command);
        let output = command.output().unwrap_or_else(|e| panic!("env: {e}"));
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.lines()
                .any(|l| l == format!("HOME={}", home.path().display())),
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("XDG_")), "{text}");
        assert!(home.check_untouched().is_ok());
    }

    #[test]
    fn a_write_into_the_home_is_reported_and_the_home_is_removed() {
        let home = ReadOnlyHome::create().unwrap_or_else(|e| panic!("{e}"));
        let dir = home.path().to_path_buf();
        // The write a test would make (as root the mode does not stop it; otherwise make the
        // directory writable first, as a test running as root would find it).
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        std::fs::create_dir(dir.join(".cache")).unwrap_or_else(|e| panic!("{e}"));
        let error = home.check_untouched().err().unwrap_or_default();
        assert!(error.contains(".cache"), "{error}");
        drop(home);
        assert!(!dir.exists());
    }
}
