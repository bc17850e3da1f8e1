//! The run's workspace directory: every path confined to it, no link followed, per-run quotas.
//!
//! The guest hands over what its `workspace` methods were called with (a method, a path string,
//! the bytes of a write); everything about where that may go is decided here, in the process
//! that holds the authority (the supervisor, when runs live in worker processes). No message
//! names a host filesystem path.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::budget::{Budget, Charge, SlotKind};
use crate::quoted;

/// The directory a run may read and write through the `workspace` global, with its caps. There
/// is no `Default`: callers state the caps ([`WorkspaceGrant::standard`] uses NodeTool's).
///
/// Every guest path is relative to `root` and confined to it: absolute paths, `..` segments,
/// backslashes, control characters and percent-encoded `.`, `/` or `\` are refused before the
/// filesystem is touched, and every existing component below the root is checked with
/// `symlink_metadata`, so a symbolic link anywhere under the root is refused, never followed.
/// The root itself is the host's and may be reached through links.
///
/// Writes are held to per-run totals as well as the per-file cap, so a body that writes in a
/// loop fills neither the disk nor the directory: every byte a successful write wrote counts
/// (an overwrite counts again), and so does every file and directory a write created. A write
/// past either total is refused before it touches the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceGrant {
    /// The run's directory (it must exist and be a directory when the guest uses it).
    pub root: PathBuf,
    /// The largest file `readText`/`readBytes` return and `writeText`/`writeBytes` write.
    pub max_file_bytes: u64,
    /// The most entries one `list` call reads; a larger directory is refused.
    pub max_list_entries: usize,
    /// The most bytes one run's writes may write, all files together.
    pub max_run_write_bytes: u64,
    /// The most files and directories one run's writes may create.
    pub max_run_entries: usize,
}

impl WorkspaceGrant {
    /// NodeTool's standard per-file cap: 10 MiB.
    pub const STANDARD_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
    /// NodeTool's standard listing cap: 10,000 entries.
    pub const STANDARD_MAX_LIST_ENTRIES: usize = 10_000;
    /// NodeTool's standard write quota per run: 256 MiB.
    pub const STANDARD_MAX_RUN_WRITE_BYTES: u64 = 256 * 1024 * 1024;
    /// NodeTool's standard quota of created entries per run: 10,000 files and directories
    /// (as many as one listing reads).
    pub const STANDARD_MAX_RUN_ENTRIES: usize = 10_000;

    /// `root` with NodeTool's standard caps ([`Self::STANDARD_MAX_FILE_BYTES`],
    /// [`Self::STANDARD_MAX_LIST_ENTRIES`], [`Self::STANDARD_MAX_RUN_WRITE_BYTES`],
    /// [`Self::STANDARD_MAX_RUN_ENTRIES`]).
    pub fn standard(root: impl Into<PathBuf>) -> WorkspaceGrant {
        WorkspaceGrant {
            root: root.into(),
            max_file_bytes: Self::STANDARD_MAX_FILE_BYTES,
            max_list_entries: Self::STANDARD_MAX_LIST_ENTRIES,
            max_run_write_bytes: Self::STANDARD_MAX_RUN_WRITE_BYTES,
            max_run_entries: Self::STANDARD_MAX_RUN_ENTRIES,
        }
    }
}

/// What one run's writes have used of its [`WorkspaceGrant`] quotas.
#[derive(Debug, Default)]
struct WriteUsage {
    bytes: u64,
    entries: usize,
}

/// The longest guest path accepted (in UTF-8 bytes).
const MAX_PATH_BYTES: usize = 1024;

/// The `workspace` global's methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceMethod {
    /// `readText(path)`: a UTF-8 file as text.
    ReadText,
    /// `writeText(path, text)`.
    WriteText,
    /// `readBytes(path)`: a file as bytes.
    ReadBytes,
    /// `writeBytes(path, bytes)`.
    WriteBytes,
    /// `list(path?)`: a directory's files and directories.
    List,
    /// `exists(path)`.
    Exists,
}

impl WorkspaceMethod {
    /// Every method, in the order the global defines them.
    pub const ALL: [WorkspaceMethod; 6] = [
        WorkspaceMethod::ReadText,
        WorkspaceMethod::WriteText,
        WorkspaceMethod::ReadBytes,
        WorkspaceMethod::WriteBytes,
        WorkspaceMethod::List,
        WorkspaceMethod::Exists,
    ];

    /// The method's JavaScript name.
    pub fn name(self) -> &'static str {
        match self {
            WorkspaceMethod::ReadText => "readText",
            WorkspaceMethod::WriteText => "writeText",
            WorkspaceMethod::ReadBytes => "readBytes",
            WorkspaceMethod::WriteBytes => "writeBytes",
            WorkspaceMethod::List => "list",
            WorkspaceMethod::Exists => "exists",
        }
    }

    /// The method named `name`.
    pub fn from_name(name: &str) -> Option<WorkspaceMethod> {
        WorkspaceMethod::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// One call of a `workspace` method, as the guest made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRequest {
    /// The method.
    pub method: WorkspaceMethod,
    /// The path as given (`""` for `list()` without one).
    pub path: String,
    /// What a write writes (a `writeText`'s text as UTF-8); empty otherwise.
    pub data: Vec<u8>,
}

/// What a `workspace` call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceReply {
    /// `readText`.
    Text(String),
    /// `readBytes`.
    Bytes(Vec<u8>),
    /// A write succeeded.
    Written,
    /// `exists`.
    Exists(bool),
    /// `list`, sorted by name.
    Entries(Vec<ListEntry>),
}

/// One run's workspace: the grant and what its writes have used.
#[derive(Debug)]
pub struct Workspace {
    grant: WorkspaceGrant,
    usage: Mutex<WriteUsage>,
}

impl Workspace {
    /// A fresh run's workspace (nothing written yet).
    pub fn new(grant: WorkspaceGrant) -> Workspace {
        Workspace {
            grant,
            usage: Mutex::new(WriteUsage::default()),
        }
    }

    /// The grant.
    pub fn grant(&self) -> &WorkspaceGrant {
        &self.grant
    }

    /// Performs one call, charging what it holds in memory to `budget`: the reply (with the
    /// charge for its bytes, held until the caller has handed them over) or the message the
    /// guest's Promise rejects with.
    pub fn perform(
        &self,
        request: &WorkspaceRequest,
        budget: &Budget,
    ) -> Result<(WorkspaceReply, Option<Charge>), String> {
        let name = request.method.name();
        let raw = request.path.as_str();
        let shown = if raw.is_empty() {
            quoted(".")
        } else {
            quoted(raw)
        };
        let fail = |reason: String| format!("workspace.{name}: {shown} {reason}");
        let refuse_write = |refusal: WriteRefusal| match refusal {
            WriteRefusal::Path(reason) => fail(reason),
            WriteRefusal::Quota(quota) => {
                format!("workspace.{name}: {quota}; {shown} was not written")
            }
        };
        let _slot = budget
            .slot(SlotKind::Workspace)
            .map_err(|e| format!("workspace.{name}: {e}"))?;
        let segments = parse_path(raw).map_err(fail)?;
        let root = open_root(&self.grant.root).map_err(fail)?;
        let grant = &self.grant;
        match request.method {
            WorkspaceMethod::ReadText => {
                let (bytes, charge) = read_file(grant, &root, &segments, budget).map_err(fail)?;
                match String::from_utf8(bytes) {
                    Ok(text) => Ok((WorkspaceReply::Text(text), Some(charge))),
                    Err(_) => Err(fail(
                        "is not valid UTF-8 text; read it with readBytes".into(),
                    )),
                }
            }
            WorkspaceMethod::ReadBytes => {
                let (bytes, charge) = read_file(grant, &root, &segments, budget).map_err(fail)?;
                Ok((WorkspaceReply::Bytes(bytes), Some(charge)))
            }
            WorkspaceMethod::WriteText | WorkspaceMethod::WriteBytes => {
                let mut usage = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
                write_file(grant, &root, &mut usage, &segments, &request.data)
                    .map_err(refuse_write)?;
                Ok((WorkspaceReply::Written, None))
            }
            WorkspaceMethod::List => {
                let entries = list_dir(grant, &root, &segments).map_err(fail)?;
                Ok((WorkspaceReply::Entries(entries), None))
            }
            WorkspaceMethod::Exists => {
                let found = lookup(&root, &segments).map_err(fail)?;
                Ok((WorkspaceReply::Exists(found.is_some()), None))
            }
        }
    }
}

/// Splits a guest path into its segments below the root (`""` and `"."` are the root itself),
/// or says why the path is refused.
fn parse_path(raw: &str) -> Result<Vec<&str>, String> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(format!(
            "is longer than the {MAX_PATH_BYTES} bytes a workspace path may have"
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if raw.contains('\\') {
        return Err("contains a backslash; workspace paths separate segments with /".into());
    }
    let bytes = raw.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if raw.starts_with('/') || drive {
        return Err(
            "is absolute; workspace paths are relative to the run's workspace directory".into(),
        );
    }
    let lower = raw.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c"].iter().any(|e| lower.contains(e)) {
        return Err(
            "contains a percent-encoded '.', '/' or '\\', which workspace paths refuse".into(),
        );
    }
    let segments: Vec<&str> = raw
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.contains(&"..") {
        return Err("has a \"..\" segment; workspace paths cannot leave the workspace".into());
    }
    Ok(segments)
}

fn io_kind(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        kind => kind.to_string(),
    }
}

fn symlink_refusal(segments: &[&str], at: usize) -> String {
    if at + 1 == segments.len() {
        "is a symbolic link, which the workspace never follows".into()
    } else {
        format!(
            "passes through the symbolic link {}, which the workspace never follows",
            quoted(&segments[..=at].join("/"))
        )
    }
}

fn over_limit(size: u64, max: u64) -> String {
    format!("is {size} bytes, over the {max} byte limit of a workspace file")
}

/// Names of in-progress writes; unique per process (and per attempt).
static WRITE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Why a write was refused: something about its path or size (the message follows the path),
/// or one of the run's quotas (the message stands on its own).
enum WriteRefusal {
    Path(String),
    Quota(String),
}

impl From<String> for WriteRefusal {
    fn from(reason: String) -> WriteRefusal {
        WriteRefusal::Path(reason)
    }
}

/// Refuses a write of `bytes` creating `entries` that would pass one of the run's quotas.
fn check_quotas(
    grant: &WorkspaceGrant,
    usage: &WriteUsage,
    bytes: u64,
    entries: usize,
) -> Result<(), WriteRefusal> {
    let (written, created) = (usage.bytes, usage.entries);
    if written.saturating_add(bytes) > grant.max_run_write_bytes {
        return Err(WriteRefusal::Quota(format!(
            "this run's workspace write quota ({}) is used up: {written} bytes are written and this write is {bytes} more",
            crate::budget::quantity(
                usize::try_from(grant.max_run_write_bytes).unwrap_or(usize::MAX)
            )
        )));
    }
    if created.saturating_add(entries) > grant.max_run_entries {
        return Err(WriteRefusal::Quota(format!(
            "this run's workspace entry quota ({} new files and directories) is used up: {created} are created and this write needs {entries} more",
            grant.max_run_entries
        )));
    }
    Ok(())
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// Its name.
    pub name: String,
    /// A directory (else a regular file).
    pub directory: bool,
    /// Its size in bytes (0 for a directory).
    pub size: u64,
}

// Every path is walked one component at a time from a descriptor of the root, each directory
// opened relative to the one before with `O_NOFOLLOW`, and the last component opened or
// created relative to its parent the same way. A link swapped in anywhere while a call runs is
// refused by the kernel at that step, never followed, and nothing is ever named by a full path.

type Fd = rustix::fd::OwnedFd;

fn errno_kind(errno: rustix::io::Errno) -> String {
    io_kind(&io::Error::from(errno))
}

/// The root's descriptor, or why it cannot be reached.
fn open_root(root: &Path) -> Result<Fd, String> {
    rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| "cannot be reached: the run's workspace directory is unavailable".to_string())
}

/// Why the component `segments[at]`, which is not a plain directory, cannot be passed.
fn not_passable(dir: &Fd, segments: &[&str], at: usize) -> String {
    match rustix::fs::statat(dir, segments[at], AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {
            symlink_refusal(segments, at)
        }
        Ok(_) => format!(
            "cannot be reached: {} is not a directory",
            quoted(&segments[..=at].join("/"))
        ),
        Err(e) => format!("could not be checked ({})", errno_kind(e)),
    }
}

/// Opens the directory `segments[at]` inside `dir` without following a link; `None` when it
/// does not exist.
fn open_dir_in(dir: &Fd, segments: &[&str], at: usize) -> Result<Option<Fd>, String> {
    match rustix::fs::openat(
        dir,
        segments[at],
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::LOOP | Errno::NOTDIR) => Err(not_passable(dir, segments, at)),
        Err(e) => Err(format!("could not be checked ({})", errno_kind(e))),
    }
}

/// The directory holding the last segment (the root for one segment); `None` when a component
/// on the way does not exist.
fn parent_of(root: &Fd, segments: &[&str]) -> Result<Option<Fd>, String> {
    let mut dir =
        rustix::io::dup(root).map_err(|e| format!("could not be checked ({})", errno_kind(e)))?;
    for at in 0..segments.len().saturating_sub(1) {
        match open_dir_in(&dir, segments, at)? {
            Some(next) => dir = next,
            None => return Ok(None),
        }
    }
    Ok(Some(dir))
}

/// What the last segment is, without following it: `None` when it (or a component on the way)
/// does not exist. No segments: the root itself.
fn lookup(root: &Fd, segments: &[&str]) -> Result<Option<rustix::fs::Stat>, String> {
    let Some((last, _)) = segments.split_last() else {
        return rustix::fs::fstat(root)
            .map(Some)
            .map_err(|e| format!("could not be checked ({})", errno_kind(e)));
    };
    let Some(parent) = parent_of(root, segments)? else {
        return Ok(None);
    };
    match rustix::fs::statat(&parent, *last, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {
            Err(symlink_refusal(segments, segments.len() - 1))
        }
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(format!("could not be checked ({})", errno_kind(e))),
    }
}

fn stat_size(stat: &rustix::fs::Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

fn read_file(
    grant: &WorkspaceGrant,
    root: &Fd,
    segments: &[&str],
    budget: &Budget,
) -> Result<(Vec<u8>, Charge), String> {
    let Some((last, _)) = segments.split_last() else {
        return Err("is a directory, not a file".into());
    };
    let Some(parent) = parent_of(root, segments)? else {
        return Err("does not exist".into());
    };
    let unreadable = |e: Errno| format!("could not be read ({})", errno_kind(e));
    // O_NONBLOCK: a FIFO put here is not waited on; O_NOFOLLOW: a link is refused, not read.
    let fd = match rustix::fs::openat(
        &parent,
        *last,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err("does not exist".into()),
        Err(Errno::LOOP) => return Err(symlink_refusal(segments, segments.len() - 1)),
        Err(e) => return Err(unreadable(e)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(unreadable)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err("is a directory, not a file".into()),
        _ => return Err("is not a regular file".into()),
    }
    let max = grant.max_file_bytes;
    let size = stat_size(&stat);
    if size > max {
        return Err(over_limit(size, max));
    }
    // A hard link cannot be told apart from the file it names, and its other name may be
    // outside the workspace (a link made before the run, by anyone who could write the
    // directory), so the workspace reads only files with one name.
    if stat.st_nlink > 1 {
        return Err(
            "has other hard links, which the workspace never reads (another name for the same file may be outside the workspace)"
                .into(),
        );
    }
    let mut charge = budget.charge(usize::try_from(size).unwrap_or(usize::MAX))?;
    let mut bytes = Vec::with_capacity(charge.bytes());
    fs::File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("could not be read ({})", io_kind(&e)))?;
    if bytes.len() as u64 > max {
        return Err(format!("is over the {max} byte limit of a workspace file"));
    }
    // The file grew after it was checked (within the limit): charge what was read.
    if let Some(more) = bytes.len().checked_sub(charge.bytes()).filter(|m| *m > 0) {
        charge.grow(more)?;
    }
    Ok((bytes, charge))
}

/// How many files and directories writing `segments` would create: every component from the
/// first missing one on. A component that cannot be checked counts as present; the write
/// itself then says why it cannot go there.
fn entries_to_create(root: &Fd, segments: &[&str]) -> usize {
    let Ok(mut dir) = rustix::io::dup(root) else {
        return 0;
    };
    for (at, segment) in segments.iter().enumerate() {
        match rustix::fs::statat(&dir, *segment, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) if at + 1 == segments.len() => return 0,
            Ok(_) => match open_dir_in(&dir, segments, at) {
                Ok(Some(next)) => dir = next,
                _ => return 0,
            },
            Err(Errno::NOENT) => return segments.len() - at,
            Err(_) => return 0,
        }
    }
    0
}

/// Creates the missing parent directories of a write, one at a time relative to the one
/// before (never through a link), counting each it creates in `usage`; returns the parent's
/// descriptor.
fn ensure_parents(root: &Fd, parents: &[&str], usage: &mut WriteUsage) -> Result<Fd, String> {
    let mut dir =
        rustix::io::dup(root).map_err(|e| format!("could not be checked ({})", errno_kind(e)))?;
    for at in 0..parents.len() {
        let here = || quoted(&parents[..=at].join("/"));
        match rustix::fs::mkdirat(&dir, parents[at], Mode::from_raw_mode(0o755)) {
            Ok(()) => usage.entries = usage.entries.saturating_add(1),
            Err(Errno::EXIST) => {}
            Err(e) => {
                return Err(format!(
                    "cannot be written: the directory {} could not be created ({})",
                    here(),
                    errno_kind(e)
                ));
            }
        }
        dir = match rustix::fs::openat(
            &dir,
            parents[at],
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(next) => next,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Err(match not_passable(&dir, parents, at) {
                    m if m.contains("symbolic link") => format!(
                        "passes through the symbolic link {}, which the workspace never follows",
                        here()
                    ),
                    _ => format!("cannot be written: {} is not a directory", here()),
                });
            }
            Err(e) => return Err(format!("could not be checked ({})", errno_kind(e))),
        };
    }
    Ok(dir)
}

/// Writes a whole file: into a new temporary file beside it (`O_CREAT | O_EXCL`, which never
/// follows a link), then renamed over the target, which replaces the name itself, all relative
/// to the parent's descriptor. So a write never goes through a link or a hard link to
/// somewhere else, and a reader never sees half a file. The run's quotas are checked first
/// and charged with what the write did.
fn write_file(
    grant: &WorkspaceGrant,
    root: &Fd,
    usage: &mut WriteUsage,
    segments: &[&str],
    bytes: &[u8],
) -> Result<(), WriteRefusal> {
    let max = grant.max_file_bytes;
    if bytes.len() as u64 > max {
        return Err(WriteRefusal::Path(format!(
            "cannot be written: {} bytes is over the {max} byte limit of a workspace file",
            bytes.len()
        )));
    }
    let Some((name, parents)) = segments.split_last() else {
        return Err(WriteRefusal::Path(
            "is the workspace directory itself, not a file".into(),
        ));
    };
    check_quotas(
        grant,
        usage,
        bytes.len() as u64,
        entries_to_create(root, segments),
    )?;
    let parent = ensure_parents(root, parents, usage)?;
    let created = match rustix::fs::statat(&parent, *name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                return Err(symlink_refusal(segments, segments.len() - 1).into());
            }
            FileType::Directory => {
                return Err(WriteRefusal::Path("is a directory, not a file".into()));
            }
            FileType::RegularFile => false,
            _ => return Err(WriteRefusal::Path("is not a regular file".into())),
        },
        Err(Errno::NOENT) => true,
        Err(e) => return Err(format!("could not be checked ({})", errno_kind(e)).into()),
    };
    let written = |e: Errno| format!("could not be written ({})", errno_kind(e));
    for _ in 0..8 {
        let temp = format!(
            ".nodetool-write-{}-{}",
            std::process::id(),
            WRITE_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let fd = match rustix::fs::openat(
            &parent,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(fd) => fd,
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(written(e).into()),
        };
        let mut file = fs::File::from(fd);
        let result = file
            .write_all(bytes)
            .and_then(|()| file.flush())
            .map_err(|e| format!("could not be written ({})", io_kind(&e)))
            .and_then(|()| {
                drop(file);
                rustix::fs::renameat(&parent, temp.as_str(), &parent, *name).map_err(written)
            });
        if let Err(message) = result {
            let _ = rustix::fs::unlinkat(&parent, temp.as_str(), AtFlags::empty());
            return Err(message.into());
        }
        usage.bytes = usage.bytes.saturating_add(bytes.len() as u64);
        if created {
            usage.entries = usage.entries.saturating_add(1);
        }
        return Ok(());
    }
    Err("could not be written (no temporary name was free)"
        .to_string()
        .into())
}

/// The regular files and directories of a directory, sorted by name. Links and other special
/// files are left out (the workspace never follows them), as are names that are not UTF-8.
fn list_dir(
    grant: &WorkspaceGrant,
    root: &Fd,
    segments: &[&str],
) -> Result<Vec<ListEntry>, String> {
    let dir = if segments.is_empty() {
        rustix::io::dup(root).map_err(|e| format!("could not be checked ({})", errno_kind(e)))?
    } else {
        let Some(parent) = parent_of(root, segments)? else {
            return Err("does not exist".into());
        };
        match open_dir_in(&parent, segments, segments.len() - 1) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Err("does not exist".into()),
            Err(m) if m.contains("is not a directory") => return Err("is not a directory".into()),
            Err(m) => return Err(m),
        }
    };
    let listed = |e: Errno| format!("could not be listed ({})", errno_kind(e));
    let max = grant.max_list_entries;
    let mut entries = Vec::new();
    let mut seen = 0usize;
    let reader = rustix::fs::Dir::read_from(&dir).map_err(listed)?;
    for entry in reader {
        let entry = entry.map_err(listed)?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        if seen >= max {
            return Err(format!(
                "has more than {max} entries, the most one listing may return"
            ));
        }
        seen += 1;
        let Ok(name) = std::str::from_utf8(raw) else {
            continue;
        };
        let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => entries.push(ListEntry {
                name: name.to_string(),
                directory: true,
                size: 0,
            }),
            FileType::RegularFile => entries.push(ListEntry {
                name: name.to_string(),
                directory: false,
                size: stat_size(&stat),
            }),
            _ => {}
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
