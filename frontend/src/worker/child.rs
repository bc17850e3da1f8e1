//! The worker side: what a front end's binary does when it is started as a sandbox worker.
//!
//! The worker applies its own process limits before it reads anything (its data ceiling, no
//! core files, death with its parent), moves its stdout out of the way of the frame channel (so
//! nothing a native library prints can corrupt a frame), says it is ready, then reads and runs
//! one order at a time on its main thread (a run is stopped early by killing the worker). It
//! keeps the modules it was sent, by key, for the runs after; the supervisor decides when it is
//! retired.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, FetchGrant, RunLimits, WorkspaceGrant};
use nodetool_protocol::catalog::{Resolution, ResolvedModule};
use nodetool_protocol::packed::Packed;
use nodetool_protocol::run::{RunError, RunErrorCode};

use super::wire::{
    self, BlobWriter, Frame, FromWorker, MAX_RESULT_BYTES, RunAnswer, RunOrder, ToWorker,
    WireCapabilities, WireError, WireLimits, WireModule, WorkerReady,
};
use crate::fetch::HttpClient;
use crate::run::{BodyRun, Engines};
use nodetool_wasm_host::ArtifactStore;

/// The first argument that starts a front end's binary as a sandbox worker. It is not a
/// command of either front end (their argument parsers never see it).
pub const WORKER_ARG: &str = "--nodetool-sandbox-worker";

/// The argument before the worker's data ceiling in bytes.
pub const MEMORY_ARG: &str = "--memory-bytes";

/// Runs the sandbox worker and returns its exit status when this process was started as one
/// (its first argument is [`WORKER_ARG`]); `None` otherwise. Call it first thing in `main`.
pub fn run_if_worker() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WORKER_ARG {
        return None;
    }
    let mut memory = None;
    while let Some(arg) = args.next() {
        if arg == MEMORY_ARG {
            memory = args
                .next()
                .and_then(|v| v.to_str().and_then(|v| v.parse::<u64>().ok()));
        }
    }
    Some(worker_main(memory))
}

fn worker_main(memory: Option<u64>) -> ExitCode {
    use rustix::process::{Resource, Rlimit, Signal, setrlimit};
    // Die with the supervisor; if it is already gone, there is nobody to answer.
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    if rustix::process::getppid().is_none_or(|p| p.as_raw_nonzero().get() == 1) {
        return ExitCode::from(3);
    }
    let _ = setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
    // RLIMIT_DATA counts every private writable mapping (heap, mmap'ed buffers, thread stacks,
    // WASM memories once they are made writable), not address space reserved PROT_NONE, so it
    // is the ceiling on what this process can use without breaking wasmtime's reservations.
    let memory_enforced = memory.is_some_and(|bytes| {
        setrlimit(
            Resource::Data,
            Rlimit {
                current: Some(bytes),
                maximum: Some(bytes),
            },
        )
        .is_ok()
    });
    // The channel is the original stdout; fd 1 becomes a copy of stderr.
    let Ok(channel) = rustix::io::dup(std::io::stdout()) else {
        return ExitCode::from(3);
    };
    if rustix::stdio::dup2_stdout(std::io::stderr()).is_err() {
        return ExitCode::from(3);
    }
    let mut out = BufWriter::new(File::from(channel));
    let ready = FromWorker::Ready(WorkerReady {
        pid: std::process::id(),
        memory_enforced,
    });
    if wire::write_frame(&mut out, &ready, &BlobWriter::default()).is_err() {
        return ExitCode::from(3);
    }

    let artifacts = Arc::new(Artifacts::default());
    let engines = Engines::for_worker(Arc::clone(&artifacts) as Arc<dyn ArtifactStore>);
    engines.prepare(&RunLimits::STANDARD);
    let mut modules: HashMap<String, ResolvedModule> = HashMap::new();
    let mut input = BufReader::new(std::io::stdin().lock());
    // One order at a time, read on this thread: a run ends early only by this process being
    // killed, so nothing needs to read the channel while a run executes. The supervisor
    // closing the channel (or sending something no supervisor sends) ends the worker.
    while let Ok(frame) = wire::read_frame::<ToWorker>(&mut input) {
        let (ToWorker::Run(order), frame) = frame.split();
        let id = order.id;
        let started = Instant::now();
        let mut blob = BlobWriter::default();
        artifacts.offer(&frame, &order.artifacts);
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            execute(&engines, &mut modules, &frame, order, &mut blob)
        }));
        let produced = artifacts.take_produced(&mut blob);
        let (answer, retire) = match ran {
            Ok(Ok(answer)) => (answer, false),
            Ok(Err(error)) => (failed(id, error, started), false),
            Err(_) => (
                failed(
                    id,
                    RunError::new(
                        RunErrorCode::SandboxCrashed,
                        "the sandbox worker failed (a panic in the host); it is replaced",
                    ),
                    started,
                ),
                true,
            ),
        };
        let answer = RunAnswer {
            retire,
            artifacts: produced,
            ..answer
        };
        if wire::write_frame(&mut out, &FromWorker::Answer(answer), &blob).is_err() || retire {
            break;
        }
        drop(blob);
        drop(frame);
        // The answer is out: tear the run down and build the next one's engine while the
        // supervisor reads it and nobody waits on this process.
        engines.prepare(&RunLimits::STANDARD);
    }
    ExitCode::SUCCESS
}

fn failed(id: u64, error: RunError, started: Instant) -> RunAnswer {
    RunAnswer {
        id,
        result: None,
        error: Some(error),
        logs: Vec::new(),
        duration_us: duration_us(started.elapsed()),
        retire: false,
        artifacts: Vec::new(),
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One order: its modules (kept for later runs), its inputs, the run, the packed result.
fn execute(
    engines: &Engines,
    modules: &mut HashMap<String, ResolvedModule>,
    frame: &Frame<()>,
    order: RunOrder,
    blob: &mut BlobWriter,
) -> Result<RunAnswer, RunError> {
    let malformed = |e: WireError| {
        RunError::new(
            RunErrorCode::SandboxCrashed,
            format!("the sandbox worker could not read its order: {e}"),
        )
    };
    let input = frame.blob();
    let mut resolution = Resolution {
        modules: Vec::with_capacity(order.modules.len()),
        statuses: order.statuses,
    };
    for module in order.modules {
        match module {
            WireModule::Full { key, module } => {
                let module = module.read(&input).map_err(malformed)?;
                modules.insert(key, module.clone());
                resolution.modules.push(module);
            }
            WireModule::Known(key) => match modules.get(&key) {
                Some(module) => resolution.modules.push(module.clone()),
                None => {
                    return Err(RunError::new(
                        RunErrorCode::SandboxCrashed,
                        "the sandbox worker was sent a module it does not have",
                    ));
                }
            },
        }
    }
    let code = input.text(order.code).map_err(malformed)?;
    let inputs = input.value(order.inputs).map_err(malformed)?;
    let outcome = engines.run_resolved(
        &resolution,
        BodyRun {
            code,
            inputs: &inputs,
            limits: limits(order.limits),
            capabilities: capabilities(order.capabilities),
            cancel: None,
        },
    );
    let duration = duration_us(outcome.duration);
    let (result, error) = match outcome.result {
        Ok(value) => {
            let packed = Packed::from_value(&value).to_bytes();
            drop(value);
            if packed.len() > MAX_RESULT_BYTES {
                (
                    None,
                    Some(RunError::new(
                        RunErrorCode::RuntimeError,
                        format!(
                            "the result is {} MiB, more than the {} MiB a run may return",
                            packed.len().div_ceil(1024 * 1024),
                            MAX_RESULT_BYTES / (1024 * 1024)
                        ),
                    )),
                )
            } else {
                (Some(blob.push(&packed)), None)
            }
        }
        Err(error) => (None, Some(error)),
    };
    Ok(RunAnswer {
        id: order.id,
        result,
        error,
        logs: outcome.logs,
        duration_us: duration,
        retire: false,
        artifacts: Vec::new(),
    })
}

/// The worker's side of the artifact cache: what the current order offered, and what the run
/// compiled (handed back with the answer; the worker writes no file).
#[derive(Default)]
struct Artifacts {
    offered: Mutex<HashMap<[u8; 32], Arc<[u8]>>>,
    produced: Mutex<Vec<([u8; 32], Vec<u8>)>>,
}

impl Artifacts {
    fn offer(&self, frame: &Frame<()>, offered: &[(String, wire::Span)]) {
        let mut map = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        map.clear();
        for (key, span) in offered {
            if let (Some(key), Ok(bytes)) = (key_from_hex(key), frame.blob().get(*span)) {
                map.insert(key, Arc::from(bytes));
            }
        }
    }

    fn take_produced(&self, blob: &mut BlobWriter) -> Vec<(String, wire::Span)> {
        self.offered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let produced =
            std::mem::take(&mut *self.produced.lock().unwrap_or_else(PoisonError::into_inner));
        produced
            .into_iter()
            .map(|(key, bytes)| (key_to_hex(&key), blob.push(&bytes)))
            .collect()
    }
}

impl ArtifactStore for Artifacts {
    fn load(&self, key: &[u8; 32]) -> Option<Arc<[u8]>> {
        self.offered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    fn save(&self, key: [u8; 32], artifact: Vec<u8>) {
        self.produced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((key, artifact));
    }
}

/// 64 lowercase hex digits.
pub(crate) fn key_to_hex(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of 64 lowercase hex digits, or `None`.
pub(crate) fn key_from_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}

fn clamp(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn limits(wire: WireLimits) -> RunLimits {
    RunLimits {
        timeout: Duration::from_millis(wire.timeout_ms),
        memory_bytes: clamp(wire.memory_bytes),
        stack_bytes: clamp(wire.stack_bytes),
        log_entries: clamp(wire.log_entries),
        log_chars: clamp(wire.log_chars),
    }
}

fn capabilities(wire: WireCapabilities) -> Capabilities {
    Capabilities {
        secrets: wire.secrets.map(|s| s.into_iter().collect()),
        workspace: wire.workspace.map(|w| WorkspaceGrant {
            max_file_bytes: w.max_file_bytes,
            max_list_entries: clamp(w.max_list_entries),
            ..WorkspaceGrant::standard(w.root)
        }),
        fetch: wire.fetch.map(|f| FetchGrant {
            allowed_hosts: f.allowed_hosts,
            max_response_bytes: clamp(f.max_response_bytes),
            client: Arc::new(HttpClient::new()),
        }),
    }
}
