//! The one way the workspace replaces a file it owns (the operator's allowlist, the install
//! ledger, compile-cache entries, compiled-WASM artifacts): write a temporary file beside it,
//! flush it to disk, rename it over the target, and flush the directory. A reader sees the old
//! file or the new one, never half of either, and two writers (processes or threads) never
//! share a temporary file: its name carries the process id and a per-process counter, and it
//! is created with `O_EXCL`.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Temporary files made by this process so far (the part of a name that keeps two threads
/// apart).
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

/// What could not be done, and to which file.
#[derive(Debug)]
pub struct AtomicWriteError {
    /// The file being replaced.
    pub path: PathBuf,
    /// Which step failed: the temporary file's write, or the rename over `path`.
    pub step: AtomicWriteStep,
    /// The operating system's reason.
    pub source: std::io::Error,
}

/// The step of [`write_atomic`] that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicWriteStep {
    /// Writing the new contents (beside the target).
    Write,
    /// Putting them in the target's place.
    Replace,
}

impl std::fmt::Display for AtomicWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.step {
            AtomicWriteStep::Write => "written",
            AtomicWriteStep::Replace => "replaced",
        };
        write!(
            f,
            "{}: cannot be {what} ({})",
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for AtomicWriteError {}

/// Replaces `path`'s contents with `bytes` atomically. The directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    let error = |step, source| AtomicWriteError {
        path: path.to_path_buf(),
        step,
        source,
    };
    let temporary = temporary_beside(path);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(error(AtomicWriteStep::Write, e));
    }
    if let Err(e) = std::fs::rename(&temporary, path) {
        let _ = std::fs::remove_file(&temporary);
        return Err(error(AtomicWriteStep::Replace, e));
    }
    // The rename is durable once the directory is; a failure to flush it changes nothing a
    // reader sees, so it is not an error.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// A name beside `path` no other writer uses: `.<name>.<pid>.<n>.tmp`.
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = TEMPORARIES.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("packs.json");
        for text in ["first", "second, longer than the first", "3"] {
            assert!(write_atomic(&path, text.as_bytes()).is_ok());
            assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some(text));
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("packs.json")]);
    }

    #[test]
    fn concurrent_writers_never_mix_or_share_a_temporary() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("ledger.json");
        let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 256 * 1024]).collect();
        std::thread::scope(|scope| {
            for bytes in &contents {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..20 {
                        assert!(write_atomic(path, bytes).is_ok());
                    }
                });
            }
        });
        let last = std::fs::read(&path).unwrap_or_default();
        assert!(
            contents.contains(&last),
            "a mixed file of {} bytes",
            last.len()
        );
        let left = std::fs::read_dir(dir.path()).into_iter().flatten().count();
        assert_eq!(left, 1, "temporary files were left behind");
    }

    #[test]
    fn a_missing_directory_or_a_directory_target_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let missing = dir.path().join("no/such/dir/file");
        let e = write_atomic(&missing, b"x").err();
        assert!(
            e.as_ref().is_some_and(|e| e.step == AtomicWriteStep::Write
                && e.to_string()
                    .contains("no/such/dir/file: cannot be written")),
            "{e:?}"
        );
        let target = dir.path().join("a-directory");
        std::fs::create_dir(&target).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(target.join("child"), b"x").unwrap_or_else(|e| panic!("{e}"));
        let e = write_atomic(&target, b"x").err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.step == AtomicWriteStep::Replace),
            "{e:?}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "a failed replace left its temporary file");
    }
}
