//! Capability calls across the channel: the confined worker asks, the supervisor decides and
//! performs.
//!
//! A worker's guest gets a [`ChannelAuthority`]: each `workspace` or `fetch` call becomes an
//! [`WireAsk`] frame, and the future it returned settles when the supervisor's [`WireReply`]
//! with the same id arrives (the worker's channel reader hands it over). The supervisor holds
//! the run's [`RunAuthority`](nodetool_broker::RunAuthority), with its grants, quotas and
//! budget, and answers with [`serve`]. Nothing here decides anything: the worker has no
//! grant to decide with, and the supervisor checks every request as it would its own.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use nodetool_broker::{
    Authority, AuthorityFuture, FetchRequest, FetchResponse, Granted, Grants, ListEntry, Reply,
    Request, WorkspaceMethod, WorkspaceReply, WorkspaceRequest,
};
use nodetool_runtime::dispatch::{Deliver, answer_slot, block_on};
use serde::{Deserialize, Serialize};

use super::wire::{self, Blob, BlobWriter, Frame, FromWorker, Span, ToWorker, WireError};

/// A capability call on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireAsk {
    /// Numbers the call (unique within the worker).
    pub id: u64,
    /// What is asked.
    pub request: WireRequest,
}

/// [`Request`] on the wire; bytes travel in the blob.
#[derive(Debug, Serialize, Deserialize)]
pub enum WireRequest {
    /// A `workspace` method.
    Workspace {
        /// The method's name.
        method: String,
        /// The path as given.
        path: String,
        /// A write's bytes.
        data: Span,
    },
    /// A `fetch`.
    Fetch {
        /// The URL as given.
        url: String,
        /// The method as given.
        method: Option<String>,
        /// The headers as given.
        headers: Vec<(String, String)>,
        /// The body.
        body: Option<Span>,
    },
    /// The data of one OCR language (a host module's need, not the guest's: the worker cannot
    /// open Tesseract's data files). Answered with bytes.
    LanguageData {
        /// A single Tesseract language code.
        language: String,
    },
}

/// The answer to a [`WireAsk`].
#[derive(Debug, Serialize, Deserialize)]
pub struct WireReply {
    /// The call's id.
    pub id: u64,
    /// What it returned, or the message the guest's Promise rejects with.
    pub outcome: Result<WireGranted, String>,
}

/// [`Reply`] on the wire; bytes travel in the blob.
#[derive(Debug, Serialize, Deserialize)]
pub enum WireGranted {
    /// `readText`.
    Text(Span),
    /// `readBytes`.
    Bytes(Span),
    /// A write.
    Written,
    /// `exists`.
    Exists(bool),
    /// `list`.
    Entries(Vec<(String, bool, u64)>),
    /// A fetch's response.
    Response {
        /// Status code.
        status: u16,
        /// Reason phrase.
        status_text: String,
        /// Final URL.
        url: String,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: Span,
    },
}

impl WireRequest {
    fn write(request: Request, blob: &mut BlobWriter) -> WireRequest {
        match request {
            Request::Workspace(r) => WireRequest::Workspace {
                method: r.method.name().to_string(),
                path: r.path,
                data: blob.push(&r.data),
            },
            Request::Fetch(r) => WireRequest::Fetch {
                url: r.url,
                method: r.method,
                headers: r.headers,
                body: r.body.map(|b| blob.push(&b)),
            },
        }
    }

    fn read(self, frame: &mut Frame<()>) -> Result<Request, WireError> {
        Ok(match self {
            WireRequest::LanguageData { .. } => {
                return Err(WireError::Malformed(
                    "language data is not a capability call".into(),
                ));
            }
            WireRequest::Workspace { method, path, data } => {
                let method = WorkspaceMethod::from_name(&method).ok_or_else(|| {
                    WireError::Malformed(format!("no workspace method {method:?}"))
                })?;
                Request::Workspace(WorkspaceRequest {
                    method,
                    path,
                    data: frame.take(data)?,
                })
            }
            WireRequest::Fetch {
                url,
                method,
                headers,
                body,
            } => Request::Fetch(FetchRequest {
                url,
                method,
                headers,
                body: body.map(|b| frame.take(b)).transpose()?,
            }),
        })
    }
}

impl WireGranted {
    /// The reply on the wire; its bytes move into `blob` (no copy when it is empty).
    fn write(reply: Reply, blob: &mut BlobWriter) -> WireGranted {
        match reply {
            Reply::Workspace(WorkspaceReply::Text(text)) => {
                WireGranted::Text(blob.push_owned(text.into_bytes()))
            }
            Reply::Workspace(WorkspaceReply::Bytes(bytes)) => {
                WireGranted::Bytes(blob.push_owned(bytes))
            }
            Reply::Workspace(WorkspaceReply::Written) => WireGranted::Written,
            Reply::Workspace(WorkspaceReply::Exists(found)) => WireGranted::Exists(found),
            Reply::Workspace(WorkspaceReply::Entries(entries)) => WireGranted::Entries(
                entries
                    .into_iter()
                    .map(|e| (e.name, e.directory, e.size))
                    .collect(),
            ),
            Reply::Fetch(response) => WireGranted::Response {
                status: response.status,
                status_text: response.status_text,
                url: response.url,
                headers: response.headers,
                body: blob.push_owned(response.body),
            },
        }
    }

    fn read(self, blob: &Blob<'_>) -> Result<Reply, WireError> {
        Ok(match self {
            WireGranted::Text(span) => {
                Reply::Workspace(WorkspaceReply::Text(blob.text(span)?.to_string()))
            }
            WireGranted::Bytes(span) => {
                Reply::Workspace(WorkspaceReply::Bytes(blob.get(span)?.to_vec()))
            }
            WireGranted::Written => Reply::Workspace(WorkspaceReply::Written),
            WireGranted::Exists(found) => Reply::Workspace(WorkspaceReply::Exists(found)),
            WireGranted::Entries(entries) => Reply::Workspace(WorkspaceReply::Entries(
                entries
                    .into_iter()
                    .map(|(name, directory, size)| ListEntry {
                        name,
                        directory,
                        size,
                    })
                    .collect(),
            )),
            WireGranted::Response {
                status,
                status_text,
                url,
                headers,
                body,
            } => Reply::Fetch(FetchResponse {
                status,
                status_text,
                url,
                headers,
                body: blob.get(body)?.to_vec(),
            }),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The worker's side
// ---------------------------------------------------------------------------------------------

type Answer = Result<Granted, String>;

/// The worker's end of the channel: the frame writer (answers and asks share it) and the calls
/// waiting for their reply.
pub(super) struct Link {
    out: Mutex<BufWriter<File>>,
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, Deliver<Answer>>>,
    /// The channel's reading end. The serving thread reads orders from it itself (no hand-off
    /// between threads for a run that calls nothing); a run's first capability call hands it
    /// to a reader thread, which settles the replies and hands it back with the next order.
    input: Mutex<Option<Input>>,
    handback: Mutex<mpsc::Receiver<Handback>>,
    handback_to: mpsc::SyncSender<Handback>,
}

/// The worker's end of the channel, read whole frames at a time.
type Input = BufReader<std::io::Stdin>;

/// What a reader thread hands back when a run is over: the next order (or `None`: the
/// channel closed), and the reading end.
type Handback = (Option<(ToWorker, Frame<()>)>, Option<Input>);

impl Link {
    pub(super) fn new(out: BufWriter<File>) -> Link {
        let (handback_to, handback) = mpsc::sync_channel(1);
        Link {
            out: Mutex::new(out),
            next: AtomicU64::new(0),
            waiting: Mutex::new(HashMap::new()),
            input: Mutex::new(Some(BufReader::new(std::io::stdin()))),
            handback: Mutex::new(handback),
            handback_to,
        }
    }

    /// The next order (replies that arrive first settle their calls); `None` when the
    /// supervisor closed the channel or sent something no supervisor sends.
    pub(super) fn next_order(&self) -> Option<(ToWorker, Frame<()>)> {
        loop {
            let held = self
                .input
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(mut input) = held else {
                // A reader thread has it (the last run called the host): it hands it back
                // with the next order.
                let (next, input) = self
                    .handback
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .recv()
                    .ok()?;
                *self.input.lock().unwrap_or_else(PoisonError::into_inner) = input;
                return next;
            };
            let read = wire::read_frame::<ToWorker>(&mut input);
            *self.input.lock().unwrap_or_else(PoisonError::into_inner) = Some(input);
            let (header, frame) = read.ok()?.split();
            match header {
                ToWorker::Reply(reply) => self.deliver(reply, &frame),
                order => return Some((order, frame)),
            }
        }
    }

    /// Makes sure a thread reads the channel while the run waits for replies.
    fn ensure_reader(self: &Arc<Self>) {
        let held = self
            .input
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(input) = held else {
            return;
        };
        let link = Arc::clone(self);
        // Without a reader the replies are never read, and the run ends at its deadline.
        let _ = std::thread::Builder::new()
            .name("worker-channel".into())
            .spawn(move || link.read_replies(input));
    }

    /// Settles replies until an order arrives, then hands it and the reading end back.
    fn read_replies(&self, mut input: Input) {
        // Debug builds: a worker told to stall stops reading its channel here, as a
        // compromised one could (the supervisor must still keep its clock).
        #[cfg(debug_assertions)]
        if super::child::stalled() {
            loop {
                std::thread::park();
            }
        }
        loop {
            match wire::read_frame::<ToWorker>(&mut input) {
                Ok(frame) => {
                    let (header, frame) = frame.split();
                    match header {
                        ToWorker::Reply(reply) => self.deliver(reply, &frame),
                        order => {
                            let _ = self.handback_to.send((Some((order, frame)), Some(input)));
                            return;
                        }
                    }
                }
                Err(_) => {
                    let _ = self.handback_to.send((None, None));
                    return;
                }
            }
        }
    }

    /// Writes one frame to the supervisor.
    pub(super) fn send(&self, header: &FromWorker, blob: &BlobWriter) -> Result<(), WireError> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        wire::write_frame(&mut *out, header, blob)
    }

    /// Settles the call `reply` answers. A reply for a call the worker no longer waits for
    /// (the run it belonged to has ended) is dropped.
    pub(super) fn deliver(&self, reply: WireReply, frame: &Frame<()>) {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&reply.id);
        let Some(deliver) = waiting else {
            return;
        };
        let answer = match reply.outcome {
            Ok(granted) => match granted.read(&frame.blob()) {
                Ok(reply) => Ok(Granted {
                    reply,
                    charge: None,
                }),
                Err(e) => Err(format!("the host's answer could not be read: {e}")),
            },
            Err(message) => Err(message),
        };
        deliver.send(answer);
    }

    /// Forgets every call still waiting (the run they belonged to has ended).
    pub(super) fn forget_waiting(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The authority a worker's guest sees: every call goes to the supervisor.
pub(super) struct ChannelAuthority {
    pub(super) grants: Grants,
    pub(super) link: Arc<Link>,
}

impl Authority for ChannelAuthority {
    fn grants(&self) -> Grants {
        self.grants
    }

    fn ask(&self, request: Request) -> AuthorityFuture {
        let mut blob = BlobWriter::default();
        let request = WireRequest::write(request, &mut blob);
        self.link.call(request, &blob)
    }
}

impl Link {
    /// Sends one call to the supervisor; the future settles with its reply.
    fn call(self: &Arc<Self>, request: WireRequest, blob: &BlobWriter) -> AuthorityFuture {
        self.ensure_reader();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (deliver, delivered) = answer_slot();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, deliver);
        let sent = self.send(&FromWorker::Ask(WireAsk { id, request }), blob);
        if let Err(e) = sent {
            self.waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            let message = match e {
                WireError::Malformed(why) => {
                    format!("the call could not be sent to the host: {why}")
                }
                _ => "the sandbox lost its channel to the host".to_string(),
            };
            return Box::pin(std::future::ready(Err(message)));
        }
        Box::pin(delivered)
    }

    /// One OCR language's data from the supervisor, waited for on this thread (a host-module
    /// call's own).
    pub(super) fn language_data(self: &Arc<Self>, language: &str) -> Result<Arc<[u8]>, String> {
        let request = WireRequest::LanguageData {
            language: language.to_string(),
        };
        match block_on(self.call(request, &BlobWriter::default()))?.reply {
            Reply::Workspace(WorkspaceReply::Bytes(bytes)) => Ok(Arc::from(bytes)),
            _ => Err("ocr.recognize: the host answered with something else".to_string()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The supervisor's side
// ---------------------------------------------------------------------------------------------

/// A worker's stdin (non-blocking), shared by the run's exchange and the threads finishing its
/// calls. Every write has a deadline, so a lock is never held past one.
pub(super) type SharedStdin = Arc<Mutex<ChildStdin>>;

/// Writes one frame to a worker by `until` (a worker that stops reading is stopped by its
/// run's deadline, never waited for past it).
pub(super) fn send_to(
    stdin: &SharedStdin,
    order: &ToWorker,
    blob: &BlobWriter,
    until: Instant,
) -> Result<(), WireError> {
    let mut stdin = stdin.lock().unwrap_or_else(PoisonError::into_inner);
    wire::write_frame_until(&mut *stdin, order, blob, until)
}

/// Answers one call the worker's run asked for, with the run's authority (`None`: the run has
/// no brokered capability, which an honest worker never asks for). A call that finishes at
/// once (the workspace) is answered before this returns, so calls are performed in the order
/// they were asked; one that waits (a fetch) is answered from a thread of its own.
///
/// `Err` means the worker sent something no worker sends.
pub(super) fn serve(
    authority: Option<&Arc<dyn Authority>>,
    ask: WireAsk,
    mut frame: Frame<()>,
    stdin: &SharedStdin,
    until: Instant,
) -> Result<(), WireError> {
    let id = ask.id;
    if let WireRequest::LanguageData { language } = &ask.request {
        // Read here, where files may be opened; the code is checked before any path is made.
        let answer = nodetool_host_modules::ocr_language_data(language).map(|bytes| Granted {
            reply: Reply::Workspace(WorkspaceReply::Bytes(bytes)),
            charge: None,
        });
        return reply(stdin, id, answer, until);
    }
    let request = ask.request.read(&mut frame)?;
    drop(frame);
    let Some(authority) = authority else {
        return reply(
            stdin,
            id,
            Err("this run was granted no such capability".into()),
            until,
        );
    };
    let mut future = authority.ask(request);
    let waker = std::task::Waker::noop();
    match future.as_mut().poll(&mut Context::from_waker(waker)) {
        Poll::Ready(answer) => reply(stdin, id, answer, until),
        Poll::Pending => {
            let stdin = Arc::clone(stdin);
            std::thread::spawn(move || {
                let answer = block_on(future);
                // After the run's deadline nobody waits for it (the run is answered, its worker
                // killed or serving another run, which drops a reply it did not ask for).
                if Instant::now() < until {
                    let _ = reply(&stdin, id, answer, until);
                }
            });
            Ok(())
        }
    }
}

fn reply(stdin: &SharedStdin, id: u64, answer: Answer, until: Instant) -> Result<(), WireError> {
    let mut blob = BlobWriter::default();
    let (outcome, held) = match answer {
        Ok(granted) => (
            Ok(WireGranted::write(granted.reply, &mut blob)),
            granted.charge,
        ),
        Err(message) => (Err(message), None),
    };
    let written = send_to(
        stdin,
        &ToWorker::Reply(WireReply { id, outcome }),
        &blob,
        until,
    );
    // What the reply held of the run's budget is given back once it is written.
    drop(held);
    match written {
        // A worker that cannot be written to has died or is dying; its run says why.
        Err(WireError::Io(e)) if e.kind() != std::io::ErrorKind::TimedOut => Ok(()),
        Err(WireError::Closed) => Ok(()),
        other => other,
    }
}
