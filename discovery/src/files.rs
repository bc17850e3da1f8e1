//! Reading a pack's declared files without ever following a link or leaving the pack.

use std::fs;
use std::io::Read;
use std::path::Path;

/// Why a declared file could not be read.
#[derive(Debug)]
pub(crate) enum FileError {
    /// Missing, not a regular file, or an I/O failure, in words.
    Unreadable(String),
    /// The file resolves outside the pack directory.
    Escapes,
    /// This package-relative prefix of the path is a symlink.
    Symlink(String),
    /// The file's size in bytes, over the cap.
    TooLarge(u64),
}

/// The size of a declared file, after checking that no component of its path is a symlink, that
/// it is a regular file, and that it resolves inside `root` (the pack's canonical directory).
/// `id` is a normalized package-relative id (no `..`, no empty or `.` segments).
pub(crate) fn check_pack_file(root: &Path, id: &str) -> Result<u64, FileError> {
    let mut path = root.to_path_buf();
    let mut prefix = String::new();
    let mut metadata = None;
    for segment in id.split('/') {
        path.push(segment);
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(segment);
        let m = fs::symlink_metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileError::Unreadable("does not exist".into()),
            _ => FileError::Unreadable(format!("cannot be read ({e})")),
        })?;
        if m.file_type().is_symlink() {
            // Where the link leads decides the rule: out of the pack is an escape (the worse
            // problem, and the one to fix first), inside it is still a refused symlink.
            return match fs::canonicalize(&path) {
                Ok(target) if target.starts_with(root) => Err(FileError::Symlink(prefix)),
                _ => Err(FileError::Escapes),
            };
        }
        metadata = Some(m);
    }
    let Some(metadata) = metadata.filter(fs::Metadata::is_file) else {
        return Err(FileError::Unreadable("is not a regular file".into()));
    };
    // With no symlink on the way and no `..` in the id this cannot fail; it is the containment
    // rule stated once more, independently of how the id was built.
    let real = fs::canonicalize(&path)
        .map_err(|e| FileError::Unreadable(format!("cannot be read ({e})")))?;
    if !real.starts_with(root) {
        return Err(FileError::Escapes);
    }
    Ok(metadata.len())
}

/// Reads a file checked by [`check_pack_file`], refusing to read more than `cap` bytes even if
/// it grew in between.
pub(crate) fn read_capped(root: &Path, id: &str, cap: u64) -> Result<Vec<u8>, FileError> {
    let size = check_pack_file(root, id)?;
    if size > cap {
        return Err(FileError::TooLarge(size));
    }
    let file = fs::File::open(root.join(id))
        .map_err(|e| FileError::Unreadable(format!("cannot be read ({e})")))?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::Unreadable(format!("cannot be read ({e})")))?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads a file directly under a pack directory that is not part of its sandbox graph
/// (`package.json`, `SKILL.md`): a regular file, not a symlink, at most `cap` bytes. `Ok(None)`
/// when it does not exist.
pub(crate) fn read_pack_metadata_file(
    root: &Path,
    name: &str,
    cap: u64,
) -> Result<Option<Vec<u8>>, FileError> {
    match fs::symlink_metadata(root.join(name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::Unreadable(format!("cannot be read ({e})"))),
        Ok(_) => read_capped(root, name, cap).map(Some),
    }
}
