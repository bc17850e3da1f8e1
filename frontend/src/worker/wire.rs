//! The frames the supervisor and a sandbox worker exchange over the worker's stdin and stdout.
//!
//! A frame is `[u32 LE length of the rest][u32 LE header length][header][blob]`. The header is
//! JSON (small: codes, limits, names, spans); the blob carries the large parts as raw bytes that
//! the header points into with [`Span`]s: module sources and WASM binaries, and `inputs` and the
//! result packed with [`Packed::to_bytes`] (a flat tape, so no tree is ever parsed recursively
//! on either side). Both directions trust nothing: a frame longer than [`MAX_FRAME_BYTES`], a
//! header that does not parse, or a span outside the blob is an error, never a panic, and a
//! supervisor treats such a worker as crashed.

use std::io::{self, Read, Write};
use std::sync::Arc;

use nodetool_protocol::catalog::{
    Bytes, FileContent, GraphFile, ResolvedKind, ResolvedModule, Status,
};
use nodetool_protocol::manifest::WasmContract;
use nodetool_protocol::packed::Packed;
use nodetool_protocol::run::{LogEntry, RunError};
use nodetool_protocol::value::Value;
use serde::{Deserialize, Serialize};

/// The largest frame either side accepts: room for a 16 MiB request's inputs, a run's modules
/// and the largest result a run may return ([`MAX_RESULT_BYTES`]) with its logs.
pub const MAX_FRAME_BYTES: usize = 160 * 1024 * 1024;

/// The largest packed result a run may send back; a larger one ends the run with an error that
/// says so.
pub const MAX_RESULT_BYTES: usize = 64 * 1024 * 1024;

/// A byte range of a frame's blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Offset in the blob.
    pub at: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Why a frame could not be read or written.
#[derive(Debug)]
pub enum WireError {
    /// The other side closed the stream between frames.
    Closed,
    /// Reading or writing failed.
    Io(io::Error),
    /// The bytes are not a frame this side accepts.
    Malformed(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Closed => f.write_str("the stream closed"),
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Malformed(why) => write!(f, "a malformed frame: {why}"),
        }
    }
}

/// A frame being built: its blob grows as parts are added.
#[derive(Default)]
pub struct BlobWriter {
    bytes: Vec<u8>,
}

impl BlobWriter {
    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends `bytes` and returns where they are.
    pub fn push(&mut self, bytes: &[u8]) -> Span {
        let span = Span {
            at: self.bytes.len() as u64,
            len: bytes.len() as u64,
        };
        self.bytes.extend_from_slice(bytes);
        span
    }

    /// Appends `bytes`, taking them without a copy when the blob is still empty (a reply that
    /// is one large body).
    pub fn push_owned(&mut self, bytes: Vec<u8>) -> Span {
        if self.bytes.is_empty() {
            let span = Span {
                at: 0,
                len: bytes.len() as u64,
            };
            self.bytes = bytes;
            return span;
        }
        self.push(&bytes)
    }
}

/// A received frame's blob.
pub struct Blob<'a>(&'a [u8]);

impl<'a> Blob<'a> {
    /// The bytes of `span`, or an error when it lies outside the blob.
    pub fn get(&self, span: Span) -> Result<&'a [u8], WireError> {
        let at = usize::try_from(span.at).ok();
        let len = usize::try_from(span.len).ok();
        at.zip(len)
            .and_then(|(at, len)| Some(at..at.checked_add(len)?))
            .and_then(|range| self.0.get(range))
            .ok_or_else(|| WireError::Malformed("a span outside the blob".into()))
    }

    /// The UTF-8 text of `span`.
    pub fn text(&self, span: Span) -> Result<&'a str, WireError> {
        std::str::from_utf8(self.get(span)?)
            .map_err(|_| WireError::Malformed("text that is not UTF-8".into()))
    }

    /// The packed value of `span`, expanded.
    pub fn value(&self, span: Span) -> Result<Value, WireError> {
        Packed::from_bytes(self.get(span)?)
            .and_then(|p| p.to_value())
            .map_err(|e| WireError::Malformed(e.0))
    }
}

/// A frame's lengths and JSON header (its blob follows), or why it cannot be sent.
fn frame_head<H: Serialize>(header: &H, blob: &BlobWriter) -> Result<Vec<u8>, WireError> {
    let header = serde_json::to_vec(header).map_err(|e| WireError::Malformed(e.to_string()))?;
    let rest = 4 + header.len() + blob.bytes.len();
    if rest > MAX_FRAME_BYTES {
        return Err(WireError::Malformed(format!(
            "a frame of {rest} bytes is over the {MAX_FRAME_BYTES}-byte cap"
        )));
    }
    let mut head = Vec::with_capacity(8 + header.len());
    head.extend_from_slice(&(rest as u32).to_le_bytes());
    head.extend_from_slice(&(header.len() as u32).to_le_bytes());
    head.extend_from_slice(&header);
    Ok(head)
}

/// Writes one frame: `header` as JSON, then the blob.
pub fn write_frame<H: Serialize>(
    out: &mut impl Write,
    header: &H,
    blob: &BlobWriter,
) -> Result<(), WireError> {
    let head = frame_head(header, blob)?;
    out.write_all(&head).map_err(WireError::Io)?;
    out.write_all(&blob.bytes).map_err(WireError::Io)?;
    out.flush().map_err(WireError::Io)
}

/// Writes one frame to a non-blocking pipe, waiting with `poll(2)` for room until `until`: a
/// reader that stops reading cannot hold the writer past it (`Io(TimedOut)`; the frame is then
/// cut short and the reader must be stopped).
pub fn write_frame_until<H: Serialize, W>(
    out: &mut W,
    header: &H,
    blob: &BlobWriter,
    until: std::time::Instant,
) -> Result<(), WireError>
where
    W: Write + std::os::fd::AsFd,
{
    let head = frame_head(header, blob)?;
    write_all_until(out, &head, until)?;
    write_all_until(out, &blob.bytes, until)
}

fn write_all_until<W: Write + std::os::fd::AsFd>(
    out: &mut W,
    mut bytes: &[u8],
    until: std::time::Instant,
) -> Result<(), WireError> {
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return Err(WireError::Closed),
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let now = std::time::Instant::now();
                if now >= until {
                    return Err(WireError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the worker stopped reading its channel",
                    )));
                }
                let left = until - now;
                let timeout = rustix::event::Timespec {
                    tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                let mut fds = [rustix::event::PollFd::new(
                    &*out,
                    rustix::event::PollFlags::OUT,
                )];
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(WireError::Io(e.into())),
                }
            }
            Err(e) => return Err(WireError::Io(e)),
        }
    }
    Ok(())
}

/// A frame read whole: the header parsed, the blob kept.
pub struct Frame<H> {
    /// The parsed header.
    pub header: H,
    blob: Vec<u8>,
    blob_at: usize,
}

impl<H> Frame<H> {
    /// The header, and the frame without it (its blob still readable).
    pub fn split(self) -> (H, Frame<()>) {
        (
            self.header,
            Frame {
                header: (),
                blob: self.blob,
                blob_at: self.blob_at,
            },
        )
    }

    /// The frame's blob.
    pub fn blob(&self) -> Blob<'_> {
        Blob(self.blob.get(self.blob_at..).unwrap_or_default())
    }

    /// The bytes of `span`, taken out of the frame without a copy when they are the whole of
    /// its blob's end (a request that is one large body); copied otherwise.
    pub fn take(&mut self, span: Span) -> Result<Vec<u8>, WireError> {
        let bytes = self.blob().get(span)?;
        let end = self
            .blob_at
            .saturating_add(usize::try_from(span.at).unwrap_or(usize::MAX));
        if end.saturating_add(bytes.len()) == self.blob.len() && bytes.len() > 64 * 1024 {
            let taken = self.blob.split_off(end);
            return Ok(taken);
        }
        Ok(bytes.to_vec())
    }
}

/// Reads one frame. End of stream before the first byte is [`WireError::Closed`].
pub fn read_frame<H: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
) -> Result<Frame<H>, WireError> {
    let mut length = [0u8; 4];
    match input.read(&mut length[..1]) {
        Ok(0) => return Err(WireError::Closed),
        Ok(_) => {}
        Err(e) => return Err(WireError::Io(e)),
    }
    input.read_exact(&mut length[1..]).map_err(WireError::Io)?;
    let rest = frame_length(length)?;
    let mut body = vec![0u8; rest];
    input.read_exact(&mut body).map_err(WireError::Io)?;
    parse_frame(body)
}

/// The length a frame's first four bytes announce, when it is one this side accepts.
fn frame_length(bytes: [u8; 4]) -> Result<usize, WireError> {
    let rest = u32::from_le_bytes(bytes) as usize;
    if (4..=MAX_FRAME_BYTES).contains(&rest) {
        Ok(rest)
    } else {
        Err(WireError::Malformed(format!("a frame length of {rest}")))
    }
}

/// A frame from the bytes after its length.
fn parse_frame<H: for<'de> Deserialize<'de>>(body: Vec<u8>) -> Result<Frame<H>, WireError> {
    let header_len = body
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(|b| u32::from_le_bytes(b) as usize)
        .unwrap_or(usize::MAX);
    let header_end = header_len
        .checked_add(4)
        .filter(|end| *end <= body.len())
        .ok_or_else(|| WireError::Malformed("a header longer than its frame".into()))?;
    let header_bytes = body.get(4..header_end).unwrap_or_default();
    // A capability call's header holds a path or a URL and its headers (bulk data travels in
    // the blob): parsing a huge one would cost the supervisor many times its size.
    if header_bytes.starts_with(b"{\"Ask\"") && header_bytes.len() > MAX_ASK_HEADER_BYTES {
        return Err(WireError::Malformed(format!(
            "a capability call's header of {} bytes is over the {MAX_ASK_HEADER_BYTES}-byte cap",
            header_bytes.len()
        )));
    }
    let header: H = serde_json::from_slice(header_bytes)
        .map_err(|e| WireError::Malformed(format!("a header that does not parse: {e}")))?;
    Ok(Frame {
        header,
        blob: body,
        blob_at: header_end,
    })
}

/// The largest JSON header of a capability call (`FromWorker::Ask`).
pub const MAX_ASK_HEADER_BYTES: usize = 1024 * 1024;

/// How much [`FrameReader`] reads at a time: a pipe's capacity once it is raised
/// ([`PIPE_BYTES`]).
const READ_CHUNK: usize = 1024 * 1024;

/// The capacity the supervisor asks for on a worker's pipes (the kernel's default is 64 KiB;
/// unprivileged processes may raise it to 1 MiB), so a large frame crosses in fewer wake-ups.
pub const PIPE_BYTES: usize = 1024 * 1024;

/// Reads frames from a non-blocking pipe on the caller's own thread, waiting with `poll(2)`
/// until a deadline: no reader thread, so an answer wakes the thread that waits for it, and
/// a worker that stops mid-frame cannot hold its reader past the deadline.
pub struct FrameReader<R: Read + std::os::fd::AsFd> {
    source: R,
    buffer: Vec<u8>,
}

impl<R: Read + std::os::fd::AsFd> FrameReader<R> {
    /// Reads `source`, which is made non-blocking.
    pub fn new(source: R) -> io::Result<FrameReader<R>> {
        rustix::io::ioctl_fionbio(&source, true)?;
        Ok(FrameReader {
            source,
            buffer: Vec::new(),
        })
    }

    /// The next frame, or `None` when `until` passed first. End of stream is
    /// [`WireError::Closed`] (mid-frame too: the writer is gone either way).
    pub fn next<H: for<'de> Deserialize<'de>>(
        &mut self,
        until: std::time::Instant,
    ) -> Result<Option<Frame<H>>, WireError> {
        loop {
            let need = match self.buffer.get(..4) {
                Some(head) => {
                    let head = <[u8; 4]>::try_from(head).unwrap_or_default();
                    Some(4 + frame_length(head)?)
                }
                None => None,
            };
            if let Some(need) = need
                && self.buffer.len() >= need
            {
                let rest = self.buffer.split_off(need);
                let mut body = std::mem::replace(&mut self.buffer, rest);
                body.drain(..4);
                return parse_frame(body).map(Some);
            }
            // A frame still streaming in when the time is up is not waited for: a writer that
            // trickles a large frame cannot hold its reader past the deadline.
            if std::time::Instant::now() >= until {
                return Ok(None);
            }
            // Read what is there, a pipe's worth at a time (only that much is zeroed before
            // each read; the rest of a frame whose length is known is reserved, not touched).
            if let Some(need) = need {
                self.buffer.reserve(need - self.buffer.len());
            }
            let want = need.map_or(READ_CHUNK, |n| (n - self.buffer.len()).min(READ_CHUNK));
            let start = self.buffer.len();
            self.buffer.resize(start + want, 0);
            let read = self.source.read(&mut self.buffer[start..]);
            match read {
                Ok(0) => {
                    self.buffer.truncate(start);
                    return Err(WireError::Closed);
                }
                Ok(n) => self.buffer.truncate(start + n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.buffer.truncate(start);
                    let now = std::time::Instant::now();
                    if now >= until {
                        return Ok(None);
                    }
                    let left = until - now;
                    let timeout = rustix::event::Timespec {
                        tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                        tv_nsec: i64::from(left.subsec_nanos()),
                    };
                    let mut fds = [rustix::event::PollFd::new(
                        &self.source,
                        rustix::event::PollFlags::IN,
                    )];
                    match rustix::event::poll(&mut fds, Some(&timeout)) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(WireError::Io(e.into())),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.buffer.truncate(start);
                }
                Err(e) => {
                    self.buffer.truncate(start);
                    return Err(WireError::Io(e));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What the supervisor sends
// ---------------------------------------------------------------------------------------------

/// A frame to the worker. A run is stopped early by killing its worker, so a run is the only
/// order.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToWorker {
    /// Run one body.
    Run(RunOrder),
    /// Parse one body: its imports, or its validation findings.
    Scan(ScanOrder),
    /// The answer to a capability call the running body asked for.
    Reply(super::ask::WireReply),
    /// Compile the WASM modules given and hand back their artifacts. Sent only to a fresh
    /// worker that has run no guest code, which then leaves: artifacts a worker produces while
    /// running a body are never kept (a compromised worker could hand back any code under a
    /// module's key, and every later run of that module would load it).
    Compile(CompileOrder),
    /// Tries one operation a confined worker must not be able to make, and says what happened
    /// (debug builds only: the confinement tests' way in).
    #[cfg(debug_assertions)]
    Probe(ProbeOrder),
}

/// An operation to try (debug builds only).
#[cfg(debug_assertions)]
#[derive(Debug, Serialize, Deserialize)]
pub struct ProbeOrder {
    /// Numbers the order.
    pub id: u64,
    /// `open` (`/etc/passwd`), `socket` (a TCP connection to loopback), `spawn` (`/bin/true`)
    /// or `thread` (a thread, which must work).
    pub operation: String,
}

/// What a probed operation did (debug builds only).
#[cfg(debug_assertions)]
#[derive(Debug, Serialize, Deserialize)]
pub struct ProbeAnswer {
    /// The order's id.
    pub id: u64,
    /// `Ok` with what it got, or the error.
    pub outcome: Result<String, String>,
}

/// WASM modules to compile (see [`ToWorker::Compile`]).
#[derive(Debug, Serialize, Deserialize)]
pub struct CompileOrder {
    /// Numbers the order.
    pub id: u64,
    /// The modules, in full.
    pub modules: Vec<WireModule>,
}

/// What a compile order produced.
#[derive(Debug, Serialize, Deserialize)]
pub struct CompileAnswer {
    /// The order's id.
    pub id: u64,
    /// The serialized artifacts, by key (64 hex digits).
    pub artifacts: Vec<(String, Span)>,
    /// Why compiling failed, when it did (the run then compiles for itself).
    pub error: Option<String>,
}

/// A body to parse, so the front end never parses untrusted code itself.
#[derive(Debug, Serialize, Deserialize)]
pub struct ScanOrder {
    /// Numbers the order.
    pub id: u64,
    /// The body.
    pub code: Span,
    /// Validate it as this Code node (its findings), rather than read its static imports.
    pub node: Option<String>,
}

/// A static import, or a syntax error, with its position in the body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WirePlace {
    /// The specifier (an import) or the message (an error).
    pub text: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// One validation finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireIssue {
    /// An error (else a warning).
    pub error: bool,
    /// The stable issue code.
    pub code: String,
    /// In words.
    pub message: String,
    /// 1-based line.
    pub line: Option<u32>,
    /// 1-based column.
    pub column: Option<u32>,
}

/// What parsing a body found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanAnswer {
    /// The order's id.
    pub id: u64,
    /// The static imports (deduplicated, in order).
    pub imports: Vec<WirePlace>,
    /// Why the body does not parse (a scan for imports).
    pub syntax_error: Option<WirePlace>,
    /// The validation findings (a scan as a Code node).
    pub issues: Vec<WireIssue>,
}

/// One run, as the worker needs it: everything is data (no catalog, no path lookups).
#[derive(Debug, Serialize, Deserialize)]
pub struct RunOrder {
    /// Numbers the run, so an answer is matched to its order.
    pub id: u64,
    /// The body.
    pub code: Span,
    /// `inputs`, packed.
    pub inputs: Span,
    /// The run's limits.
    pub limits: WireLimits,
    /// What the run is granted.
    pub capabilities: WireCapabilities,
    /// The modules to mount: in full the first time this worker sees one, else by key.
    pub modules: Vec<WireModule>,
    /// The resolution's statuses (its errors end the run before anything starts).
    pub statuses: Vec<Status>,
    /// Compiled WASM modules from the front end's artifact cache, by key (64 hex digits).
    #[serde(default)]
    pub artifacts: Vec<(String, Span)>,
}

/// [`nodetool_guest::RunLimits`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct WireLimits {
    /// Deadline in milliseconds.
    pub timeout_ms: u64,
    /// Guest heap in bytes.
    pub memory_bytes: u64,
    /// Engine stack in bytes.
    pub stack_bytes: u64,
    /// Console lines kept.
    pub log_entries: u64,
    /// Characters per console line.
    pub log_chars: u64,
}

/// The granted capabilities on the wire: the secrets granted to the run, and which of the
/// brokered capabilities exist. The grants themselves (the workspace directory, the allowed
/// hosts) stay with the supervisor, which performs every call (see `super::ask`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireCapabilities {
    /// `getSecret`'s secrets.
    pub secrets: Option<Vec<(String, String)>>,
    /// The `workspace` global exists.
    pub workspace: bool,
    /// The `fetch` global exists.
    pub fetch: bool,
}

/// One module of a run.
#[derive(Debug, Serialize, Deserialize)]
pub enum WireModule {
    /// The whole module; the worker keeps it under `key`.
    Full {
        /// The worker's cache key ([`module_key`]).
        key: String,
        /// The module, its files' contents in the blob.
        module: Box<WireResolved>,
    },
    /// A module this worker was sent before.
    Known(String),
}

/// [`ResolvedModule`] with its file contents moved into the blob.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireResolved {
    specifier: String,
    pack_name: String,
    pack_version: Option<String>,
    content_digest: String,
    module_id: String,
    graph: Vec<WireFile>,
    kind: WireKind,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireFile {
    id: String,
    internal: bool,
    dependencies: Vec<String>,
    wasm: bool,
    content: Span,
}

#[derive(Debug, Serialize, Deserialize)]
enum WireKind {
    Js,
    Wasm(WasmContract),
    Host(String),
}

/// What identifies a module's content for a worker's cache: everything the resolution says
/// about it except its files, whose content the graph digest covers.
pub fn module_key(module: &ResolvedModule) -> String {
    let kind = match &module.kind {
        ResolvedKind::Js => "js".to_string(),
        ResolvedKind::Wasm { wasm } => {
            format!("wasm:{}", serde_json::to_string(wasm).unwrap_or_default())
        }
        ResolvedKind::Host { host_id } => format!("host:{host_id}"),
    };
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{kind}",
        module.specifier,
        module.pack_name,
        module.pack_version.as_deref().unwrap_or(""),
        module.content_digest,
        module.module_id
    )
}

impl WireResolved {
    /// `module` with its contents appended to `blob`.
    pub fn write(module: &ResolvedModule, blob: &mut BlobWriter) -> WireResolved {
        let graph = module
            .graph
            .iter()
            .map(|f| {
                let (wasm, content) = match &f.content {
                    FileContent::Js { source } => (false, blob.push(source.as_bytes())),
                    FileContent::Wasm { bytes } => (true, blob.push(&bytes.0)),
                };
                WireFile {
                    id: f.id.clone(),
                    internal: f.internal,
                    dependencies: f.dependencies.clone(),
                    wasm,
                    content,
                }
            })
            .collect();
        WireResolved {
            specifier: module.specifier.clone(),
            pack_name: module.pack_name.clone(),
            pack_version: module.pack_version.clone(),
            content_digest: module.content_digest.clone(),
            module_id: module.module_id.clone(),
            graph,
            kind: match &module.kind {
                ResolvedKind::Js => WireKind::Js,
                ResolvedKind::Wasm { wasm } => WireKind::Wasm(wasm.clone()),
                ResolvedKind::Host { host_id } => WireKind::Host(host_id.clone()),
            },
        }
    }

    /// The module, its contents read from `blob`.
    pub fn read(self, blob: &Blob<'_>) -> Result<ResolvedModule, WireError> {
        let mut graph = Vec::with_capacity(self.graph.len());
        for f in self.graph {
            let content = if f.wasm {
                FileContent::Wasm {
                    bytes: Bytes(Arc::from(blob.get(f.content)?)),
                }
            } else {
                FileContent::Js {
                    source: Arc::from(blob.text(f.content)?),
                }
            };
            graph.push(GraphFile {
                id: f.id,
                internal: f.internal,
                dependencies: f.dependencies,
                content,
            });
        }
        Ok(ResolvedModule {
            specifier: self.specifier,
            pack_name: self.pack_name,
            pack_version: self.pack_version,
            content_digest: self.content_digest,
            module_id: self.module_id,
            graph,
            kind: match self.kind {
                WireKind::Js => ResolvedKind::Js,
                WireKind::Wasm(wasm) => ResolvedKind::Wasm { wasm },
                WireKind::Host(host_id) => ResolvedKind::Host { host_id },
            },
        })
    }
}

// ---------------------------------------------------------------------------------------------
// What the worker sends
// ---------------------------------------------------------------------------------------------

/// A frame from the worker.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromWorker {
    /// The worker is up, its limits applied, and waits for a run.
    Ready(WorkerReady),
    /// A run's outcome.
    Answer(RunAnswer),
    /// A parse's outcome.
    Scanned(ScanAnswer),
    /// The last run is torn down and the next one's engine is ready.
    Prepared,
    /// The running body calls a capability the supervisor performs.
    Ask(super::ask::WireAsk),
    /// A compile order's outcome.
    Compiled(CompileAnswer),
    /// What a probe did (debug builds only).
    #[cfg(debug_assertions)]
    Probed(ProbeAnswer),
}

/// What a worker says once it is ready.
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerReady {
    /// Its process id.
    pub pid: u32,
    /// Whether its memory ceiling is in force (the kernel accepted the limit).
    pub memory_enforced: bool,
    /// Why it could not confine itself (no seccomp filter is in force); `None` when it did.
    pub unconfined: Option<String>,
    /// Whether Landlock denies it the filesystem too (besides the seccomp filter).
    pub landlock: bool,
}

/// A run's outcome.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunAnswer {
    /// The order's id.
    pub id: u64,
    /// The packed result when the run succeeded.
    pub result: Option<Span>,
    /// The error when it did not.
    pub error: Option<RunError>,
    /// Console output (already under the run's caps).
    pub logs: Vec<LogEntry>,
    /// The worker's own measure of the run, in microseconds.
    pub duration_us: u64,
    /// The worker is leaving after this answer (the host failed under it); start another.
    #[serde(default)]
    pub retire: bool,
    /// The worker will say `Prepared` once it has torn the run down (its heap was large); the
    /// next order's clock starts then. A small heap's teardown takes microseconds and is not
    /// announced.
    #[serde(default)]
    pub settles: bool,
    /// Host work the run started was still executing when it ended (a call it did not await):
    /// the worker must be replaced, so that work dies with it.
    #[serde(default)]
    pub host_work_left: bool,
    /// Keys of the artifacts it was offered that its engine refused to load (it compiled those
    /// modules itself): the supervisor drops them and compiles them again in a compile worker.
    #[serde(default)]
    pub refused_artifacts: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_call_with_a_huge_header_is_refused_before_it_is_parsed() {
        // 19 million empty header pairs took the supervisor to 1 GB when parsed.
        let headers = "[\"\",\"\"],".repeat(200_000);
        let header = format!(
            "{{\"Ask\":{{\"id\":1,\"request\":{{\"Fetch\":{{\"url\":\"http://x/\",\"method\":null,\"headers\":[{}[\"\",\"\"]],\"body\":null}}}}}}}}",
            headers
        );
        assert!(header.len() > MAX_ASK_HEADER_BYTES);
        let mut body = Vec::new();
        body.extend_from_slice(&(header.len() as u32).to_le_bytes());
        body.extend_from_slice(header.as_bytes());
        let refused = parse_frame::<FromWorker>(body).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|m| m.contains("capability call's header")),
            "{refused:?}"
        );
        // The same call under the cap parses.
        let small = "{\"Ask\":{\"id\":1,\"request\":{\"Fetch\":{\"url\":\"http://x/\",\"method\":null,\"headers\":[[\"a\",\"b\"]],\"body\":null}}}}";
        let mut body = Vec::new();
        body.extend_from_slice(&(small.len() as u32).to_le_bytes());
        body.extend_from_slice(small.as_bytes());
        assert!(matches!(
            parse_frame::<FromWorker>(body).map(|f| f.header),
            Ok(FromWorker::Ask(_))
        ));
    }

    #[test]
    fn a_frame_round_trips_with_its_blob() {
        let mut blob = BlobWriter::default();
        let code = blob.push("return 1".as_bytes());
        let inputs = blob.push(&Packed::from_value(&Value::String("x".into())).to_bytes());
        let mut out = Vec::new();
        let ready = FromWorker::Ready(WorkerReady {
            pid: 7,
            memory_enforced: true,
            unconfined: None,
            landlock: false,
        });
        assert!(write_frame(&mut out, &ready, &blob).is_ok());
        let frame: Result<Frame<FromWorker>, _> = read_frame(&mut out.as_slice());
        let Ok(frame) = frame else {
            panic!("must read")
        };
        assert!(matches!(
            frame.header,
            FromWorker::Ready(WorkerReady { pid: 7, .. })
        ));
        assert_eq!(frame.blob().text(code).ok(), Some("return 1"));
        assert_eq!(
            frame.blob().value(inputs).ok(),
            Some(Value::String("x".into()))
        );
        let outside = Span {
            at: 3,
            len: u64::MAX,
        };
        assert!(frame.blob().get(outside).is_err());
    }

    #[test]
    fn truncated_and_oversized_frames_are_errors() {
        let mut out = Vec::new();
        let ready = FromWorker::Ready(WorkerReady {
            pid: 1,
            memory_enforced: false,
            unconfined: None,
            landlock: false,
        });
        assert!(write_frame(&mut out, &ready, &BlobWriter::default()).is_ok());
        for cut in 1..out.len() {
            let read: Result<Frame<FromWorker>, _> = read_frame(&mut &out[..cut]);
            assert!(read.is_err(), "cut at {cut}");
        }
        let empty: Result<Frame<FromWorker>, _> = read_frame(&mut &[][..]);
        assert!(matches!(empty, Err(WireError::Closed)));
        let huge = u32::MAX.to_le_bytes();
        let read: Result<Frame<FromWorker>, _> = read_frame(&mut &huge[..]);
        assert!(matches!(read, Err(WireError::Malformed(_))));
    }

    #[test]
    fn a_frame_reader_waits_until_its_deadline_and_reads_frames_in_pieces() {
        use std::time::{Duration, Instant};
        let Ok((reader, mut writer)) = std::io::pipe() else {
            panic!("a pipe");
        };
        let Ok(mut frames) = FrameReader::new(reader) else {
            panic!("a non-blocking reader");
        };
        // Nothing written: `None` once the deadline passes, not before.
        let started = Instant::now();
        let nothing = frames.next::<FromWorker>(started + Duration::from_millis(50));
        assert!(matches!(nothing, Ok(None)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        // Two frames, the first written in two pieces with a pause between.
        let mut bytes = Vec::new();
        for pid in [1, 2] {
            let ready = FromWorker::Ready(WorkerReady {
                pid,
                memory_enforced: true,
                unconfined: None,
                landlock: false,
            });
            assert!(write_frame(&mut bytes, &ready, &BlobWriter::default()).is_ok());
        }
        let (first, second) = bytes.split_at(5);
        assert!(writer.write_all(first).is_ok());
        let second = second.to_vec();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            let _ = writer.write_all(&second);
            // Then the writer goes away.
        });
        let until = Instant::now() + Duration::from_secs(5);
        for pid in [1, 2] {
            let frame = frames.next::<FromWorker>(until);
            assert!(
                matches!(&frame, Ok(Some(Frame { header: FromWorker::Ready(r), .. })) if r.pid == pid),
                "frame {pid}"
            );
        }
        let _ = late.join();
        assert!(matches!(
            frames.next::<FromWorker>(until),
            Err(WireError::Closed)
        ));
    }

    #[test]
    fn a_frame_reader_refuses_an_impossible_length_at_once() {
        let Ok((reader, mut writer)) = std::io::pipe() else {
            panic!("a pipe");
        };
        let Ok(mut frames) = FrameReader::new(reader) else {
            panic!("a non-blocking reader");
        };
        assert!(writer.write_all(&u32::MAX.to_le_bytes()).is_ok());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        assert!(matches!(
            frames.next::<FromWorker>(until),
            Err(WireError::Malformed(_))
        ));
    }
}
