//! Capabilities a run is granted: absent unless granted, and shared with every pack module the
//! body imports (importing a module means trusting it with the node's capabilities).
//!
//! - `getSecret(name)`: the granted secrets, by name.
//! - `workspace`: a frozen object whose async methods read and write files inside the run's
//!   directory and nowhere else (see [`WorkspaceGrant`]).
//! - `fetch(url, init?)`: HTTP(S) to the granted hosts through the host's [`FetchClient`],
//!   settled by the run's event loop like a dispatcher call (see [`FetchGrant`]).
//!
//! Every refusal is an `Error` in the guest (a rejected Promise), never a panic, and no message
//! names a host filesystem path.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::future::Future;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rquickjs::function::Opt;
use rquickjs::object::Property;
use rquickjs::{Array, ArrayBuffer, Ctx, Exception, Function, Object, Persistent, Promise};
use rquickjs::{TypedArray, Value as JsValue};

use crate::bridge::{self, Awaited, BridgeState, PendingCall};
use crate::engine::bytes_of;

/// What a run may reach beyond pure computation. Every field defaults to "not granted".
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// Secrets `getSecret(name)` may return, by name. `None`: no `getSecret` global at all.
    pub secrets: Option<BTreeMap<String, String>>,
    /// The run's directory. `None`: no `workspace` global at all.
    pub workspace: Option<WorkspaceGrant>,
    /// Outbound HTTP(S). `None`: no `fetch` global at all.
    pub fetch: Option<FetchGrant>,
}

/// Installs the granted capabilities as globals.
pub(crate) fn install<'js>(
    ctx: &Ctx<'js>,
    caps: &Capabilities,
    freeze: &Function<'js>,
) -> rquickjs::Result<()> {
    if let Some(secrets) = &caps.secrets {
        let secrets = secrets.clone();
        let get_secret = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: rquickjs::Value<'js>| -> rquickjs::Result<Promise<'js>> {
                let (promise, resolve, reject) = Promise::new(&ctx)?;
                let name = name.as_string().and_then(|s| s.to_string().ok());
                match name.as_deref().and_then(|n| secrets.get(n).map(|v| (n, v))) {
                    Some((_, value)) => resolve.call::<_, ()>((value.clone(),))?,
                    None => {
                        let message = match name {
                            Some(n) => {
                                format!("getSecret: the secret \"{n}\" was not granted to this run")
                            }
                            None => "getSecret: the secret name must be a string".to_string(),
                        };
                        reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
                    }
                }
                Ok(promise)
            },
        )?;
        ctx.globals()
            .prop("getSecret", Property::from(get_secret))?;
    }
    if let Some(grant) = &caps.workspace {
        ctx.globals().prop(
            "workspace",
            Property::from(workspace_object(ctx, grant, freeze)?),
        )?;
    }
    if let Some(grant) = &caps.fetch {
        ctx.globals()
            .prop("fetch", Property::from(fetch_function(ctx, grant)?))?;
    }
    Ok(())
}

/// A Promise already settled with `outcome` (an `Error` with the message when it failed).
fn settled<'js>(
    ctx: &Ctx<'js>,
    outcome: Result<JsValue<'js>, String>,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(ctx)?;
    match outcome {
        Ok(value) => resolve.call::<_, ()>((value,))?,
        Err(message) => {
            reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
        }
    }
    Ok(promise)
}

/// A Promise already rejected with `reason`.
fn rejected_with<'js>(ctx: &Ctx<'js>, reason: JsValue<'js>) -> rquickjs::Result<Promise<'js>> {
    let (promise, _, reject) = Promise::new(ctx)?;
    reject.call::<_, ()>((reason,))?;
    Ok(promise)
}

/// A guest string quoted for a message: escaped (so control characters stay visible) and cut
/// short when long.
fn quoted(text: &str) -> String {
    const SHOWN: usize = 200;
    if text.chars().count() <= SHOWN {
        return format!("{text:?}");
    }
    let cut: String = text.chars().take(SHOWN).collect();
    format!("{cut:?}…")
}

fn type_of(value: Option<&JsValue<'_>>) -> &'static str {
    value.map_or("undefined", JsValue::type_name)
}

// ---------------------------------------------------------------------------------------------
// workspace
// ---------------------------------------------------------------------------------------------

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

/// What one run's writes have used of its [`WorkspaceGrant`] quotas; one per run, shared by
/// the body and every pack module (they share the one `workspace` global).
#[derive(Default)]
struct WriteUsage {
    bytes: Cell<u64>,
    entries: Cell<usize>,
}

/// A byte count as a person reads a quota: whole MiB or KiB when it is one, bytes otherwise.
fn byte_quantity(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The longest guest path accepted (in UTF-8 bytes).
const MAX_PATH_BYTES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    ReadText,
    WriteText,
    ReadBytes,
    WriteBytes,
    List,
    Exists,
}

impl Method {
    const ALL: [Method; 6] = [
        Method::ReadText,
        Method::WriteText,
        Method::ReadBytes,
        Method::WriteBytes,
        Method::List,
        Method::Exists,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::ReadText => "readText",
            Method::WriteText => "writeText",
            Method::ReadBytes => "readBytes",
            Method::WriteBytes => "writeBytes",
            Method::List => "list",
            Method::Exists => "exists",
        }
    }
}

fn workspace_object<'js>(
    ctx: &Ctx<'js>,
    grant: &WorkspaceGrant,
    freeze: &Function<'js>,
) -> rquickjs::Result<Object<'js>> {
    let grant = Rc::new(grant.clone());
    let usage = Rc::new(WriteUsage::default());
    let object = Object::new(ctx.clone())?;
    for method in Method::ALL {
        let grant = Rc::clone(&grant);
        let usage = Rc::clone(&usage);
        let function = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  first: Opt<JsValue<'js>>,
                  second: Opt<JsValue<'js>>|
                  -> rquickjs::Result<Promise<'js>> {
                match workspace_call(&ctx, &grant, &usage, method, first.0, second.0) {
                    Ok(outcome) => settled(&ctx, outcome),
                    // Building the result threw (out of memory, say): the Promise rejects with it.
                    Err(e) if e.is_exception() => rejected_with(&ctx, ctx.catch()),
                    Err(e) => Err(e),
                }
            },
        )?;
        freeze.call::<_, ()>((function.clone(),))?;
        object.set(method.name(), function)?;
    }
    freeze.call::<_, ()>((object.clone(),))?;
    Ok(object)
}

/// One workspace method: `Ok(Err(message))` is a refusal the guest sees as a rejection.
fn workspace_call<'js>(
    ctx: &Ctx<'js>,
    grant: &WorkspaceGrant,
    usage: &WriteUsage,
    method: Method,
    first: Option<JsValue<'js>>,
    second: Option<JsValue<'js>>,
) -> rquickjs::Result<Result<JsValue<'js>, String>> {
    let name = method.name();
    let raw = match first.as_ref() {
        None => None,
        Some(v) if v.is_undefined() => None,
        Some(v) => match v.as_string() {
            Some(s) => match s.to_string() {
                Ok(s) => Some(s),
                Err(_) => {
                    return Ok(Err(format!(
                        "workspace.{name}: the path is not a valid string (it has an unpaired surrogate)"
                    )));
                }
            },
            None => {
                return Ok(Err(format!(
                    "workspace.{name}: the path must be a string, not {}",
                    type_of(Some(v))
                )));
            }
        },
    };
    let raw = match (raw, method) {
        (Some(raw), _) => raw,
        (None, Method::List) => String::new(),
        (None, _) => {
            return Ok(Err(format!(
                "workspace.{name}: the path must be a string, not undefined"
            )));
        }
    };
    let shown = if raw.is_empty() {
        quoted(".")
    } else {
        quoted(&raw)
    };
    let fail = |reason: String| Ok(Err(format!("workspace.{name}: {shown} {reason}")));
    let refuse_write = |refusal: WriteRefusal| match refusal {
        WriteRefusal::Path(reason) => fail(reason),
        WriteRefusal::Quota(quota) => Ok(Err(format!(
            "workspace.{name}: {quota}; {shown} was not written"
        ))),
    };
    let segments = match parse_path(&raw) {
        Ok(s) => s,
        Err(reason) => return fail(reason),
    };
    if let Err(reason) = root_available(&grant.root) {
        return fail(reason);
    }
    match method {
        Method::ReadText => match read_file(grant, &segments) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Ok(Ok(
                    rquickjs::String::from_str(ctx.clone(), &text)?.into_value()
                )),
                Err(_) => fail("is not valid UTF-8 text; read it with readBytes".into()),
            },
            Err(reason) => fail(reason),
        },
        Method::ReadBytes => match read_file(grant, &segments) {
            Ok(bytes) => Ok(Ok(
                TypedArray::<u8>::new_copy(ctx.clone(), &bytes)?.into_value()
            )),
            Err(reason) => fail(reason),
        },
        Method::WriteText => {
            let text = match second.as_ref().and_then(|v| v.as_string()) {
                Some(s) => match s.to_string() {
                    Ok(text) => text,
                    Err(_) => {
                        return fail(
                            "cannot be written: the text is not a valid string (it has an unpaired surrogate)"
                                .into(),
                        );
                    }
                },
                None => {
                    return fail(format!(
                        "cannot be written: the text must be a string, not {}",
                        type_of(second.as_ref())
                    ));
                }
            };
            match write_file(grant, usage, &segments, text.as_bytes()) {
                Ok(()) => Ok(Ok(JsValue::new_undefined(ctx.clone()))),
                Err(refusal) => refuse_write(refusal),
            }
        }
        Method::WriteBytes => {
            let Some(bytes) = second.as_ref().and_then(bytes_of) else {
                return fail(format!(
                    "cannot be written: the bytes must be a Uint8Array, another typed array or an ArrayBuffer, not {}",
                    type_of(second.as_ref())
                ));
            };
            match write_file(grant, usage, &segments, &bytes) {
                Ok(()) => Ok(Ok(JsValue::new_undefined(ctx.clone()))),
                Err(refusal) => refuse_write(refusal),
            }
        }
        Method::List => match list_dir(grant, &segments) {
            Ok(entries) => {
                let array = Array::new(ctx.clone())?;
                for (i, entry) in entries.iter().enumerate() {
                    let item = Object::new(ctx.clone())?;
                    item.set("name", entry.name.as_str())?;
                    item.set("type", if entry.directory { "directory" } else { "file" })?;
                    item.set("size", entry.size as f64)?;
                    array.set(i, item)?;
                }
                Ok(Ok(array.into_value()))
            }
            Err(reason) => fail(reason),
        },
        Method::Exists => match inspect(&grant.root, &segments) {
            Ok(found) => Ok(Ok(JsValue::new_bool(ctx.clone(), found.is_some()))),
            Err(reason) => fail(reason),
        },
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

fn root_available(root: &Path) -> Result<(), String> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        _ => Err("cannot be reached: the run's workspace directory is unavailable".into()),
    }
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

/// Checks every component of `segments` below `root` without following anything: `Ok(None)`
/// when a component does not exist, the metadata of the last one otherwise (the root's for no
/// segments).
fn inspect(root: &Path, segments: &[&str]) -> Result<Option<fs::Metadata>, String> {
    if segments.is_empty() {
        return fs::metadata(root)
            .map(Some)
            .map_err(|e| format!("could not be checked ({})", io_kind(&e)));
    }
    let mut path = root.to_path_buf();
    for (i, segment) in segments.iter().enumerate() {
        path.push(segment);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(symlink_refusal(segments, i)),
            Ok(m) if i + 1 == segments.len() => return Ok(Some(m)),
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "cannot be reached: {} is not a directory",
                    quoted(&segments[..=i].join("/"))
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("could not be checked ({})", io_kind(&e))),
        }
    }
    Ok(None)
}

fn joined(root: &Path, segments: &[&str]) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(segments);
    path
}

fn over_limit(size: u64, max: u64) -> String {
    format!("is {size} bytes, over the {max} byte limit of a workspace file")
}

fn read_file(grant: &WorkspaceGrant, segments: &[&str]) -> Result<Vec<u8>, String> {
    let Some(checked) = inspect(&grant.root, segments)? else {
        return Err("does not exist".into());
    };
    if checked.is_dir() {
        return Err("is a directory, not a file".into());
    }
    if !checked.is_file() {
        return Err("is not a regular file".into());
    }
    let max = grant.max_file_bytes;
    if checked.len() > max {
        return Err(over_limit(checked.len(), max));
    }
    let path = joined(&grant.root, segments);
    let file = fs::File::open(&path).map_err(|e| format!("could not be read ({})", io_kind(&e)))?;
    let opened = file
        .metadata()
        .map_err(|e| format!("could not be read ({})", io_kind(&e)))?;
    if !same_file(&checked, &opened) {
        return Err("changed while it was being opened; try again".into());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(checked.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("could not be read ({})", io_kind(&e)))?;
    if bytes.len() as u64 > max {
        return Err(format!("is over the {max} byte limit of a workspace file"));
    }
    Ok(bytes)
}

/// Whether the file opened is the one checked (a component swapped for a link in between is
/// caught here rather than read).
#[cfg(unix)]
fn same_file(checked: &fs::Metadata, opened: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    checked.dev() == opened.dev() && checked.ino() == opened.ino() && opened.is_file()
}

#[cfg(not(unix))]
fn same_file(_checked: &fs::Metadata, opened: &fs::Metadata) -> bool {
    opened.is_file()
}

/// Creates the missing parent directories of a write, checking each component (existing or
/// just created) without following links, and counting each directory it creates in `usage`.
/// Returns the parent directory's path.
fn ensure_parents(root: &Path, parents: &[&str], usage: &WriteUsage) -> Result<PathBuf, String> {
    let mut path = root.to_path_buf();
    for (i, segment) in parents.iter().enumerate() {
        path.push(segment);
        let here = || quoted(&parents[..=i].join("/"));
        let checked = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match fs::create_dir(&path) {
                    Ok(()) => usage.entries.set(usage.entries.get().saturating_add(1)),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        return Err(format!(
                            "cannot be written: the directory {} could not be created ({})",
                            here(),
                            io_kind(&e)
                        ));
                    }
                }
                fs::symlink_metadata(&path)
                    .map_err(|e| format!("could not be checked ({})", io_kind(&e)))?
            }
            Err(e) => return Err(format!("could not be checked ({})", io_kind(&e))),
        };
        if checked.file_type().is_symlink() {
            return Err(format!(
                "passes through the symbolic link {}, which the workspace never follows",
                here()
            ));
        }
        if !checked.is_dir() {
            return Err(format!("cannot be written: {} is not a directory", here()));
        }
    }
    Ok(path)
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

/// How many files and directories writing `segments` would create: every component from the
/// first missing one on. A component that cannot be checked counts as present; the write
/// itself then says why it cannot go there.
fn entries_to_create(root: &Path, segments: &[&str]) -> usize {
    let mut path = root.to_path_buf();
    for (i, segment) in segments.iter().enumerate() {
        path.push(segment);
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return segments.len() - i,
            Err(_) => return 0,
        }
    }
    0
}

/// Refuses a write of `bytes` creating `entries` that would pass one of the run's quotas.
fn check_quotas(
    grant: &WorkspaceGrant,
    usage: &WriteUsage,
    bytes: u64,
    entries: usize,
) -> Result<(), WriteRefusal> {
    let (written, created) = (usage.bytes.get(), usage.entries.get());
    if written.saturating_add(bytes) > grant.max_run_write_bytes {
        return Err(WriteRefusal::Quota(format!(
            "this run's workspace write quota ({}) is used up: {written} bytes are written and this write is {bytes} more",
            byte_quantity(grant.max_run_write_bytes)
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

/// Writes a whole file: into a new temporary file beside it (`create_new`, which never follows
/// a link), then renamed over the target, which replaces the name itself. So a write never goes
/// through a link or a hard link to somewhere else, and a reader never sees half a file. The
/// run's quotas are checked first and charged with what the write did.
fn write_file(
    grant: &WorkspaceGrant,
    usage: &WriteUsage,
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
        entries_to_create(&grant.root, segments),
    )?;
    let parent = ensure_parents(&grant.root, parents, usage)?;
    let target = parent.join(name);
    let created = match fs::symlink_metadata(&target) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(symlink_refusal(segments, segments.len() - 1).into());
        }
        Ok(m) if m.is_dir() => return Err(WriteRefusal::Path("is a directory, not a file".into())),
        Ok(m) if !m.is_file() => return Err(WriteRefusal::Path("is not a regular file".into())),
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("could not be checked ({})", io_kind(&e)).into()),
    };
    let written = |e: io::Error| format!("could not be written ({})", io_kind(&e));
    for _ in 0..8 {
        let temp = parent.join(format!(
            ".nodetool-write-{}-{}",
            std::process::id(),
            WRITE_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(written(e).into()),
        };
        let result = file
            .write_all(bytes)
            .and_then(|()| file.flush())
            .and_then(|()| {
                drop(file);
                fs::rename(&temp, &target)
            });
        if let Err(e) = result {
            let _ = fs::remove_file(&temp);
            return Err(written(e).into());
        }
        usage
            .bytes
            .set(usage.bytes.get().saturating_add(bytes.len() as u64));
        if created {
            usage.entries.set(usage.entries.get().saturating_add(1));
        }
        return Ok(());
    }
    Err("could not be written (no temporary name was free)"
        .to_string()
        .into())
}

struct ListEntry {
    name: String,
    directory: bool,
    size: u64,
}

/// The regular files and directories of a directory, sorted by name. Links and other special
/// files are left out (the workspace never follows them), as are names that are not UTF-8.
fn list_dir(grant: &WorkspaceGrant, segments: &[&str]) -> Result<Vec<ListEntry>, String> {
    let Some(checked) = inspect(&grant.root, segments)? else {
        return Err("does not exist".into());
    };
    if !checked.is_dir() {
        return Err("is not a directory".into());
    }
    let listed = |e: io::Error| format!("could not be listed ({})", io_kind(&e));
    let path = joined(&grant.root, segments);
    let max = grant.max_list_entries;
    let mut entries = Vec::new();
    for (seen, entry) in fs::read_dir(&path).map_err(listed)?.enumerate() {
        if seen >= max {
            return Err(format!(
                "has more than {max} entries, the most one listing may return"
            ));
        }
        let entry = entry.map_err(listed)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // `DirEntry::file_type` and `metadata` do not follow links.
        let kind = entry.file_type().map_err(listed)?;
        if kind.is_dir() {
            entries.push(ListEntry {
                name,
                directory: true,
                size: 0,
            });
        } else if kind.is_file() {
            let size = entry.metadata().map_err(listed)?.len();
            entries.push(ListEntry {
                name,
                directory: false,
                size,
            });
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

// ---------------------------------------------------------------------------------------------
// fetch
// ---------------------------------------------------------------------------------------------

/// One HTTP request the guest's `fetch` asks the host to make. The URL is the parsed,
/// normalized form (no fragment) whose host was checked against the grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// Absolute `http:` or `https:` URL.
    pub url: String,
    /// Upper-case for the standard methods (`GET`, `POST`, ...), as given otherwise.
    pub method: String,
    /// Lower-case names; values without CR, LF or NUL.
    pub headers: Vec<(String, String)>,
    /// The request body (never for `GET` or `HEAD`).
    pub body: Option<Vec<u8>>,
}

/// What the host's client answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// HTTP status code.
    pub status: u16,
    /// The status line's reason phrase (may be empty).
    pub status_text: String,
    /// The URL the body came from (empty: the request's URL). Its host is checked against the
    /// grant again.
    pub url: String,
    /// Response headers as received (the guest sees lower-case names; repeats are joined with
    /// `, `).
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

/// What a [`FetchClient`] call resolves to; `Err` is a message the guest sees in its `Error`.
pub type FetchFuture = Pin<Box<dyn Future<Output = Result<FetchResponse, String>> + Send>>;

/// The host side of `fetch`. The guest has already checked the URL's scheme and host against
/// the grant; the client performs the request.
///
/// Contract: `fetch` returns promptly (the work happens in the future, which the run's event
/// loop polls and drops if the run ends first); the client must stop reading a body past
/// `max_response_bytes` (the guest refuses a larger one anyway); and it must not follow
/// redirects, or follow them only to hosts the grant allows (the guest refuses a response
/// whose final `url` is on another host, but by then the request has been made).
pub trait FetchClient: Send + Sync {
    /// Starts one request.
    fn fetch(&self, request: FetchRequest, max_response_bytes: usize) -> FetchFuture;
}

/// Outbound HTTP(S) for one run.
#[derive(Clone)]
pub struct FetchGrant {
    /// Hosts the guest may reach, compared exactly after normalization (case-insensitive;
    /// IDNA and IP forms as the URL parser writes them). Any port of an allowed host is
    /// allowed.
    pub allowed_hosts: Vec<String>,
    /// The largest response body the guest accepts.
    pub max_response_bytes: usize,
    /// Who makes the requests.
    pub client: Arc<dyn FetchClient>,
}

impl fmt::Debug for FetchGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchGrant")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("client", &"dyn FetchClient")
            .finish()
    }
}

/// A fetch grant as the run uses it: hosts normalized once.
pub(crate) struct FetchScope {
    allowed: Vec<String>,
    max_response_bytes: usize,
    client: Arc<dyn FetchClient>,
}

impl FetchScope {
    fn new(grant: &FetchGrant) -> FetchScope {
        let allowed = grant
            .allowed_hosts
            .iter()
            .map(|h| normalize_host(h.trim()))
            .collect();
        FetchScope {
            allowed,
            max_response_bytes: grant.max_response_bytes,
            client: Arc::clone(&grant.client),
        }
    }

    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.allowed.contains(&host)
    }
}

fn normalize_host(host: &str) -> String {
    match url::Host::parse(host) {
        Ok(parsed) => parsed.to_string().to_ascii_lowercase(),
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// What a settled fetch needs to build its Response.
pub(crate) struct FetchSettle {
    scope: Rc<FetchScope>,
    host: String,
    url: String,
}

fn fetch_function<'js>(ctx: &Ctx<'js>, grant: &FetchGrant) -> rquickjs::Result<Function<'js>> {
    let scope = Rc::new(FetchScope::new(grant));
    let state = bridge::current();
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              url: Opt<JsValue<'js>>,
              init: Opt<JsValue<'js>>|
              -> rquickjs::Result<Promise<'js>> {
            start_fetch(&ctx, state.as_ref(), &scope, url.0, init.0)
        },
    )
}

fn start_fetch<'js>(
    ctx: &Ctx<'js>,
    state: Option<&Rc<BridgeState>>,
    scope: &Rc<FetchScope>,
    url: Option<JsValue<'js>>,
    init: Option<JsValue<'js>>,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(ctx)?;
    let refuse = |message: &str| -> rquickjs::Result<Promise<'js>> {
        reject.call::<_, ()>((Exception::from_message(ctx.clone(), message)?,))?;
        Ok(promise.clone())
    };
    let (request, host) = match prepare(scope, url, init) {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(message)) => return refuse(&message),
        // A getter on `init` threw: that error is the rejection.
        Err(e) if e.is_exception() => return rejected_with(ctx, ctx.catch()),
        Err(e) => return Err(e),
    };
    let Some(state) = state else {
        return refuse("fetch: the sandbox cannot make requests outside a run");
    };
    let settle = FetchSettle {
        scope: Rc::clone(scope),
        host,
        url: request.url.clone(),
    };
    if state.in_flight() >= crate::bridge::MAX_PENDING_CALLS {
        return refuse(&format!(
            "fetch: {} calls are already in flight in this run; await some before starting more",
            crate::bridge::MAX_PENDING_CALLS
        ));
    }
    let future = scope.client.fetch(request, scope.max_response_bytes);
    let queued = state.push_pending(PendingCall {
        awaited: Awaited::Fetch { future, settle },
        resolve: Persistent::save(ctx, resolve),
        reject: Persistent::save(ctx, reject.clone()),
    });
    if let Err(message) = queued {
        return refuse(&format!("fetch: {message}"));
    }
    Ok(promise)
}

const STANDARD_METHODS: [&str; 7] = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"];
const FORBIDDEN_METHODS: [&str; 3] = ["CONNECT", "TRACE", "TRACK"];
/// Headers that would change where or how the request is routed or framed; the client sets
/// them itself.
const FORBIDDEN_HEADERS: [&str; 9] = [
    "connection",
    "content-length",
    "expect",
    "host",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks the guest's arguments and builds the request (and the host it goes to).
/// `Ok(Err(message))` is a refusal; `Err` is a JavaScript exception raised reading `init`.
fn prepare<'js>(
    scope: &FetchScope,
    url: Option<JsValue<'js>>,
    init: Option<JsValue<'js>>,
) -> rquickjs::Result<Result<(FetchRequest, String), String>> {
    let raw = match url.as_ref().and_then(|v| v.as_string()) {
        Some(s) => match s.to_string() {
            Ok(s) => s,
            Err(_) => return Ok(Err("fetch: the URL is not a valid string".into())),
        },
        None => {
            return Ok(Err(format!(
                "fetch: the URL must be a string, not {}",
                type_of(url.as_ref())
            )));
        }
    };
    let shown = quoted(&raw);
    let mut parsed = match url::Url::parse(&raw) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(Err(format!("fetch: {shown} is not a valid URL ({e})"))),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Ok(Err(format!(
            "fetch: {shown} uses the \"{}:\" scheme; only http and https are allowed",
            parsed.scheme()
        )));
    }
    let Some(host) = parsed.host_str().map(str::to_ascii_lowercase) else {
        return Ok(Err(format!("fetch: {shown} has no host")));
    };
    if !scope.allows(&host) {
        return Ok(Err(format!(
            "fetch: \"{host}\" is not an allowed host for this run"
        )));
    }
    parsed.set_fragment(None);

    let mut method = "GET".to_string();
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut body = None;
    if let Some(init) = init.filter(|v| !v.is_undefined() && !v.is_null()) {
        let Some(init) = init.as_object().filter(|_| !init.is_array()) else {
            return Ok(Err(format!(
                "fetch: the options must be an object, not {}",
                init.type_name()
            )));
        };
        let given: JsValue = init.get("method")?;
        if !given.is_undefined() {
            let Some(text) = given.as_string().and_then(|s| s.to_string().ok()) else {
                return Ok(Err(format!(
                    "fetch: the method must be a string, not {}",
                    given.type_name()
                )));
            };
            let upper = text.to_ascii_uppercase();
            if !is_token(&text) {
                return Ok(Err(format!(
                    "fetch: {} is not a valid HTTP method",
                    quoted(&text)
                )));
            }
            if FORBIDDEN_METHODS.contains(&upper.as_str()) {
                return Ok(Err(format!("fetch: the {upper} method is not allowed")));
            }
            method = if STANDARD_METHODS.contains(&upper.as_str()) {
                upper
            } else {
                text
            };
        }
        let given: JsValue = init.get("headers")?;
        if !given.is_undefined() && !given.is_null() {
            let Some(object) = given.as_object().filter(|_| !given.is_array()) else {
                return Ok(Err(
                    "fetch: the headers must be an object of name: value pairs".into(),
                ));
            };
            for name in object.keys::<String>() {
                let name = name?;
                let value: JsValue = object.get(name.as_str())?;
                let lower = name.to_ascii_lowercase();
                if !is_token(&name) {
                    return Ok(Err(format!(
                        "fetch: {} is not a valid header name",
                        quoted(&name)
                    )));
                }
                if FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
                    return Ok(Err(format!(
                        "fetch: the \"{lower}\" header is set by the host and cannot be given"
                    )));
                }
                let text = if let Some(s) = value.as_string() {
                    s.to_string().ok()
                } else if let Some(n) = value.as_number() {
                    Some(number_text(n))
                } else {
                    value.as_bool().map(|b| b.to_string())
                };
                let Some(text) = text else {
                    return Ok(Err(format!(
                        "fetch: the \"{lower}\" header must be a string, not {}",
                        value.type_name()
                    )));
                };
                if text.contains(['\r', '\n', '\0']) {
                    return Ok(Err(format!(
                        "fetch: the \"{lower}\" header has a line break or NUL in its value"
                    )));
                }
                match headers.iter_mut().find(|(n, _)| *n == lower) {
                    Some((_, existing)) => {
                        existing.push_str(", ");
                        existing.push_str(&text);
                    }
                    None => headers.push((lower, text)),
                }
            }
        }
        let given: JsValue = init.get("body")?;
        if !given.is_undefined() && !given.is_null() {
            let bytes = match given.as_string() {
                Some(s) => match s.to_string() {
                    Ok(s) => s.into_bytes(),
                    Err(_) => return Ok(Err("fetch: the body is not a valid string".into())),
                },
                None => match bytes_of(&given) {
                    Some(bytes) => bytes,
                    None => {
                        return Ok(Err(format!(
                            "fetch: the body must be a string, a typed array or an ArrayBuffer, not {}",
                            given.type_name()
                        )));
                    }
                },
            };
            if method == "GET" || method == "HEAD" {
                return Ok(Err(format!("fetch: a {method} request cannot have a body")));
            }
            body = Some(bytes);
        }
    }
    Ok(Ok((
        FetchRequest {
            url: parsed.to_string(),
            method,
            headers,
            body,
        },
        host,
    )))
}

/// A number as JavaScript's `String(n)` would write the common cases.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Builds the guest's Response for a finished fetch, or the message it rejects with.
pub(crate) fn settle_fetch<'js>(
    ctx: &Ctx<'js>,
    settle: &FetchSettle,
    outcome: Result<FetchResponse, String>,
) -> rquickjs::Result<Result<JsValue<'js>, String>> {
    let host = settle.host.as_str();
    let response = match outcome {
        Ok(response) => response,
        Err(message) => {
            return Ok(Err(format!(
                "fetch: the request to {host} failed: {message}"
            )));
        }
    };
    let max = settle.scope.max_response_bytes;
    if response.body.len() > max {
        return Ok(Err(format!(
            "fetch: the response from {host} exceeds the {max} byte limit"
        )));
    }
    let final_url = if response.url.is_empty() {
        settle.url.clone()
    } else {
        response.url.clone()
    };
    let final_host = url::Url::parse(&final_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    match final_host {
        Some(h) if settle.scope.allows(&h) => {}
        Some(h) => {
            return Ok(Err(format!(
                "fetch: the response from {host} came from \"{h}\", which is not an allowed host for this run"
            )));
        }
        None => {
            return Ok(Err(format!(
                "fetch: the response from {host} has no valid http(s) URL"
            )));
        }
    }

    let object = Object::new(ctx.clone())?;
    let field =
        |key: &str, value: JsValue<'js>| object.prop(key, Property::from(value).enumerable());
    field(
        "status",
        JsValue::new_int(ctx.clone(), i32::from(response.status)),
    )?;
    field(
        "statusText",
        rquickjs::String::from_str(ctx.clone(), &response.status_text)?.into_value(),
    )?;
    field(
        "ok",
        JsValue::new_bool(ctx.clone(), (200..300).contains(&response.status)),
    )?;
    field(
        "url",
        rquickjs::String::from_str(ctx.clone(), &final_url)?.into_value(),
    )?;
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &response.headers {
        merged
            .entry(name.to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    let headers = Object::new(ctx.clone())?;
    for (name, value) in &merged {
        // Defined, not assigned: a header named `__proto__` is just a header.
        headers.prop(name.as_str(), Property::from(value.as_str()).enumerable())?;
    }
    field("headers", headers.into_value())?;

    // The body lives in the guest's heap (counted against its memory limit), not the host's.
    let body = ArrayBuffer::new_copy(ctx.clone(), &response.body)?;
    drop(response);
    let reader = |read: BodyRead| -> rquickjs::Result<Function<'js>> {
        let body = body.clone();
        let host = settle.host.clone();
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>| -> rquickjs::Result<Promise<'js>> {
                read_body(&ctx, &body, &host, read)
            },
        )
    };
    field("text", reader(BodyRead::Text)?.into_value())?;
    field("json", reader(BodyRead::Json)?.into_value())?;
    field("bytes", reader(BodyRead::Bytes)?.into_value())?;
    field("arrayBuffer", reader(BodyRead::ArrayBuffer)?.into_value())?;
    Ok(Ok(object.into_value()))
}

#[derive(Debug, Clone, Copy)]
enum BodyRead {
    Text,
    Json,
    Bytes,
    ArrayBuffer,
}

/// One of a Response's body methods: a Promise of the body read as asked. The body may be read
/// any number of times.
fn read_body<'js>(
    ctx: &Ctx<'js>,
    body: &ArrayBuffer<'js>,
    host: &str,
    read: BodyRead,
) -> rquickjs::Result<Promise<'js>> {
    // The buffer is private to the Response's methods, so it cannot have been detached.
    let body = bytes_of(body.as_value()).unwrap_or_default();
    let body = body.as_slice();
    match read {
        // As the web's fetch does, malformed UTF-8 becomes U+FFFD.
        BodyRead::Text => settled(
            ctx,
            Ok(
                rquickjs::String::from_str(ctx.clone(), &String::from_utf8_lossy(body))?
                    .into_value(),
            ),
        ),
        BodyRead::Bytes => settled(
            ctx,
            Ok(TypedArray::<u8>::new_copy(ctx.clone(), body)?.into_value()),
        ),
        BodyRead::ArrayBuffer => settled(
            ctx,
            Ok(ArrayBuffer::new_copy(ctx.clone(), body)?.into_value()),
        ),
        BodyRead::Json => {
            // The engine's own JSON parser: what the guest did to the `JSON` global is
            // irrelevant here.
            let text = String::from_utf8_lossy(body).into_owned();
            match ctx.json_parse(text) {
                Ok(value) => settled(ctx, Ok(value)),
                Err(e) if e.is_exception() => rejected_with(ctx, ctx.catch()),
                Err(_) => settled(
                    ctx,
                    Err(format!("fetch: the response from {host} is not valid JSON")),
                ),
            }
        }
    }
}
