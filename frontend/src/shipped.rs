//! The shipped packs travel inside the binary: `build.rs` embeds every file of
//! `packs/@nodetool-ai/` (no `node_modules`) and the packs' `package.json` and
//! `package-lock.json`, and [`materialize`] writes them out, once, to a directory of the data
//! directory named by their content ([`root_in`]), so a binary finds its own shipped packs
//! wherever it is installed and never reads the tree it was built from.
//!
//! The directory is written whole under a temporary name beside it and renamed into place, so a
//! reader never sees half of it; a second process that loses the race keeps the winner's. Its
//! name carries the binary's version and a digest of every embedded file, so a binary whose
//! packs differ writes its own directory and two binaries never share one. Nothing else writes
//! there, except the npm libraries installed into its `node_modules` on first use
//! ([`crate::first_use`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

include!(concat!(env!("OUT_DIR"), "/shipped_packs.rs"));

/// The embedded files, `(path relative to the shipped root, bytes)`, sorted by path.
pub fn files() -> &'static [(&'static str, &'static [u8])] {
    FILES
}

/// The first 16 hex digits of the SHA-256 over every embedded file (each path and its bytes,
/// length-prefixed, in path order).
pub fn digest() -> &'static str {
    static DIGEST: OnceLock<String> = OnceLock::new();
    DIGEST.get_or_init(|| {
        let mut hash = Sha256::new();
        for (path, bytes) in FILES {
            hash.update((path.len() as u64).to_le_bytes());
            hash.update(path.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        }
        nodetool_protocol::hex::hex(&hash.finalize()[..8])
    })
}

/// Where this binary's shipped packs live under the data directory `data_home`
/// (`$XDG_DATA_HOME`): `nodetool/shipped/<version>-<digest>`.
pub fn root_in(data_home: &Path) -> PathBuf {
    data_home
        .join("nodetool/shipped")
        .join(format!("{}-{}", env!("CARGO_PKG_VERSION"), digest()))
}

/// Writes the embedded packs to `root` unless it exists. Returns whether this call wrote it.
pub fn materialize(root: &Path) -> Result<bool, String> {
    if root.is_dir() {
        return Ok(false);
    }
    let parent = root
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", root.display()))?;
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let staging = unique_sibling(root, "staging")?;
    let written = write_all(&staging);
    let landed = written.and_then(|()| {
        std::fs::rename(&staging, root).or_else(|e| {
            // Another process wrote the same directory first: theirs is as good as ours.
            if root.is_dir() {
                Ok(())
            } else {
                Err(format!(
                    "cannot move the shipped packs into {}: {e}",
                    root.display()
                ))
            }
        })
    });
    if staging.exists() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    landed.map(|()| true)
}

/// A fresh directory beside `path` (`.<name>.<what>-<pid>-<n>`), created empty.
pub(crate) fn unique_sibling(path: &Path, what: &str) -> Result<PathBuf, String> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 0..1000u32 {
        let candidate = parent.join(format!(".{name}.{what}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", candidate.display())),
        }
    }
    Err(format!(
        "cannot create a temporary directory beside {}",
        path.display()
    ))
}

fn write_all(dir: &Path) -> Result<(), String> {
    for (relative, bytes) in FILES {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let mut file = std::fs::File::create(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_pack_is_embedded_without_node_modules() {
        let names: Vec<&str> = files().iter().map(|(p, _)| *p).collect();
        assert!(names.contains(&"package.json"), "{names:?}");
        assert!(names.contains(&"package-lock.json"), "{names:?}");
        for pack in ["sandbox-geo", "sandbox-yaml", "sandbox-ocr"] {
            let manifest = format!("@nodetool-ai/{pack}/package.json");
            assert!(names.contains(&manifest.as_str()), "{manifest}");
        }
        assert!(
            names
                .iter()
                .all(|n| !n.split('/').any(|c| c == "node_modules")),
            "{names:?}"
        );
        // What the source tree holds, byte for byte.
        let packs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
        for (relative, bytes) in files() {
            let on_disk = std::fs::read(packs.join(relative)).unwrap_or_default();
            assert_eq!(&on_disk, bytes, "{relative}");
        }
    }

    #[test]
    fn materializing_writes_once_and_keeps_what_is_there() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let root = root_in(tmp.path());
        assert!(root.starts_with(tmp.path().join("nodetool/shipped")));
        assert_eq!(materialize(&root), Ok(true));
        for (relative, bytes) in files() {
            assert_eq!(
                std::fs::read(root.join(relative)).ok().as_deref(),
                Some(*bytes),
                "{relative}"
            );
        }
        // A second call (another process, a later run) finds it and writes nothing.
        assert_eq!(materialize(&root), Ok(false));
        // No temporary directory is left beside it.
        let siblings: Vec<_> = std::fs::read_dir(tmp.path().join("nodetool/shipped"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(siblings.len(), 1, "{siblings:?}");
    }

    #[test]
    fn a_data_directory_that_cannot_be_written_is_named() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = tmp.path().join("not-a-directory");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("write: {e}"));
        let error = materialize(&root_in(&file)).err().unwrap_or_default();
        assert!(
            error.starts_with(&format!("cannot create {}", file.display())),
            "{error}"
        );
    }
}
