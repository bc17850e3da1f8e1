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
use std::io::BufWriter;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nodetool_broker::Grants;
use nodetool_guest::{Capabilities, RunLimits};
use nodetool_protocol::catalog::{Resolution, ResolvedModule};
use nodetool_protocol::packed::Packed;
use nodetool_protocol::run::{RunError, RunErrorCode};

use super::ask::{ChannelAuthority, Link};

#[cfg(target_os = "linux")]
use super::confine::{Confined, confine};

/// Outside Linux there is no confinement to install (yet): the worker says so.
#[cfg(not(target_os = "linux"))]
fn confine(_channel: std::os::fd::RawFd) -> Result<Confined, String> {
    Err(format!(
        "sandbox workers cannot be confined on {} yet (only on Linux, with seccomp)",
        std::env::consts::OS
    ))
}

#[cfg(not(target_os = "linux"))]
struct Confined {
    landlock: bool,
}
use super::wire::{
    self, BlobWriter, Frame, FromWorker, MAX_RESULT_BYTES, RunAnswer, RunOrder, ScanAnswer,
    ScanOrder, ToWorker, WireCapabilities, WireError, WireIssue, WireLimits, WireModule, WirePlace,
    WorkerReady,
};
use crate::run::{BodyRun, Engines};
use nodetool_wasm_host::ArtifactStore;

/// The first argument that starts a front end's binary as a sandbox worker. It is not a
/// command of either front end (their argument parsers never see it).
pub const WORKER_ARG: &str = "--nodetool-sandbox-worker";

/// The argument before the worker's data ceiling in bytes.
pub const MEMORY_ARG: &str = "--memory-bytes";

/// The argument before the supervisor's process id.
pub const PARENT_ARG: &str = "--parent-pid";

/// The argument that tells a worker not to confine itself (see `WorkerOptions::confine`).
pub const UNCONFINED_ARG: &str = "--unconfined";

/// Runs the sandbox worker and returns its exit status when this process was started as one
/// (its first argument is [`WORKER_ARG`]); `None` otherwise. Call it first thing in `main`.
pub fn run_if_worker() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != WORKER_ARG {
        return None;
    }
    let mut memory = None;
    let mut parent = None;
    let mut confine = true;
    while let Some(arg) = args.next() {
        if arg == UNCONFINED_ARG {
            confine = false;
            continue;
        }
        let value = args
            .next()
            .and_then(|v| v.to_str().and_then(|v| v.parse::<u64>().ok()));
        if arg == MEMORY_ARG {
            memory = value;
        } else if arg == PARENT_ARG {
            parent = value;
        }
    }
    Some(worker_main(memory, parent, confine))
}

fn worker_main(memory: Option<u64>, parent: Option<u64>, confine: bool) -> ExitCode {
    use rustix::process::{Resource, Rlimit, Signal, setrlimit};
    // Die with the supervisor; if it is already gone (this process was adopted by init or a
    // subreaper), there is nobody to answer.
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    let parent_now = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    if parent_now
        .is_none_or(|p| parent.is_some_and(|expected| u64::try_from(p).ok() != Some(expected)))
    {
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
    let channel_fd = std::os::fd::AsRawFd::as_raw_fd(&channel);
    let link = Arc::new(Link::new(BufWriter::new(File::from(channel))));

    // Orders are served on a thread whose stack is fixed (and counted in the data ceiling):
    // the main thread's stack grows up to whatever RLIMIT_STACK allows, which the ceiling does
    // not cover. A parser recursing past this stack ends the worker, never the front end.
    // A quarter of a small ceiling at most, so the stack itself fits under it.
    let stack = memory.map_or(RUN_STACK_BYTES, |m| {
        RUN_STACK_BYTES.min(usize::try_from(m / 4).unwrap_or(usize::MAX))
    });
    let served = std::thread::Builder::new()
        .name("worker-run".into())
        .stack_size(stack.max(2 * 1024 * 1024))
        .spawn(move || serve(&link, channel_fd, memory_enforced, confine));
    match served.map(std::thread::JoinHandle::join) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::from(3),
    }
}

/// The stack of the thread that parses and runs bodies (less under a small memory ceiling).
const RUN_STACK_BYTES: usize = 64 * 1024 * 1024;

/// A run whose heap stayed under this tears down in well under a millisecond: its teardown is
/// not announced with `Prepared`, and the next order's clock may include it.
const QUIET_TEARDOWN_BYTES: usize = 4 * 1024 * 1024;

/// How long a worker waits, after a run, for host work the run started to finish before it
/// asks to be replaced.
const HOST_WORK_SETTLE: Duration = Duration::from_millis(50);

fn serve(link: &Arc<Link>, channel_fd: std::os::fd::RawFd, memory_enforced: bool, confine: bool) {
    let artifacts = Arc::new(Artifacts::default());
    let engines = Engines::for_worker(Arc::clone(&artifacts) as Arc<dyn ArtifactStore>);
    engines.prepare(&RunLimits::STANDARD);
    // Native libraries a host module loads at run time are mapped now: once confined, the
    // worker cannot open a file.
    nodetool_host_modules::preload_native_libraries();
    {
        let link = Arc::clone(link);
        nodetool_host_modules::set_ocr_language_source(Box::new(move |language| {
            link.language_data(language)
        }));
    }
    let confined = if confine {
        confine_unless_tested(channel_fd)
    } else {
        Err("the supervisor started this worker unconfined".to_string())
    };
    let ready = FromWorker::Ready(WorkerReady {
        pid: std::process::id(),
        memory_enforced,
        landlock: confined.as_ref().is_ok_and(|c| c.landlock),
        unconfined: confined.err(),
    });
    if link.send(&ready, &BlobWriter::default()).is_err() {
        return;
    }
    let mut modules: HashMap<String, ResolvedModule> = HashMap::new();
    while let Some((order, frame)) = link.next_order() {
        let order = match order {
            ToWorker::Run(order) => order,
            ToWorker::Scan(order) => {
                let answer = scan(&frame, &order);
                if link
                    .send(&FromWorker::Scanned(answer), &BlobWriter::default())
                    .is_err()
                {
                    return;
                }
                continue;
            }
            // The reader keeps replies; nothing else is an order.
            ToWorker::Reply(_) => return,
            ToWorker::Compile(order) => {
                let mut blob = BlobWriter::default();
                let answer = compile(&engines, &artifacts, &frame, order, &mut blob);
                // A compile worker serves that one order and leaves.
                let _ = link.send(&FromWorker::Compiled(answer), &blob);
                return;
            }
            #[cfg(debug_assertions)]
            ToWorker::Probe(order) => {
                let answer = wire::ProbeAnswer {
                    id: order.id,
                    outcome: probe(&order.operation),
                };
                if link
                    .send(&FromWorker::Probed(answer), &BlobWriter::default())
                    .is_err()
                {
                    return;
                }
                continue;
            }
        };
        let id = order.id;
        let started = Instant::now();
        let mut blob = BlobWriter::default();
        artifacts.offer(&frame, &order.artifacts);
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            execute(&engines, &mut modules, &frame, order, &mut blob, link)
        }));
        // Replies to calls the run did not wait for have nobody to settle.
        link.forget_waiting();
        // What this run compiled is not handed back: the supervisor keeps only artifacts a
        // fresh worker compiled before it ran any guest code (`ToWorker::Compile`).
        let refused_artifacts = artifacts.forget_produced();
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
        let settles = engines.last_peak_heap_bytes() > QUIET_TEARDOWN_BYTES;
        let answer = RunAnswer {
            retire,
            host_work_left: host_work_left(),
            refused_artifacts,
            settles,
            ..answer
        };
        let leaving = retire || answer.host_work_left;
        if link.send(&FromWorker::Answer(answer), &blob).is_err() || leaving {
            return;
        }
        drop(blob);
        drop(frame);
        // The answer is out: tear the run down and build the next one's engine while the
        // supervisor reads it, then say so (the next order waits for that, so this time is
        // never part of a run's deadline).
        engines.prepare(&RunLimits::STANDARD);
        if settles
            && link
                .send(&FromWorker::Prepared, &BlobWriter::default())
                .is_err()
        {
            return;
        }
    }
}

/// A run that failed on an operation the worker's confinement refused (the standard library
/// says `os error 1`, `EPERM`, which nothing else in a confined worker is refused with) is
/// `sandbox-denied`, naming what was refused.
fn denied(error: RunError) -> RunError {
    if error.code != RunErrorCode::HostModuleError || !error.message.contains("(os error 1)") {
        return error;
    }
    RunError {
        code: RunErrorCode::SandboxDenied,
        message: format!(
            "the sandbox refused an operation this host call attempted (sandbox workers cannot open files, sockets or processes): {}",
            error.message
        ),
        ..error
    }
}

/// Confines the worker (see `confine`). Debug builds only: with
/// `NODETOOL_TEST_UNCONFINABLE=1` in its environment a worker acts as one whose kernel refused
/// confinement, so the tests can check what the supervisor does then.
fn confine_unless_tested(channel_fd: std::os::fd::RawFd) -> Result<Confined, String> {
    #[cfg(debug_assertions)]
    if std::env::var("NODETOOL_TEST_UNCONFINABLE").is_ok_and(|v| v == "1") {
        return Err("this test worker acts as if the kernel had no seccomp".into());
    }
    confine(channel_fd)
}

/// Whether the `stall-channel` probe was made (debug builds only).
#[cfg(debug_assertions)]
pub(super) fn stalled() -> bool {
    STALL_CHANNEL.load(std::sync::atomic::Ordering::Acquire)
}

/// Set by the `stall-channel` probe: the channel reader stops after the next order.
#[cfg(debug_assertions)]
static STALL_CHANNEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tries one operation a confined worker must not be able to make (debug builds only).
#[cfg(debug_assertions)]
fn probe(operation: &str) -> Result<String, String> {
    match operation {
        "stall-channel" => {
            STALL_CHANNEL.store(true, std::sync::atomic::Ordering::Release);
            Ok("the channel reader stops after the next order".into())
        }
        "open" => std::fs::read_to_string("/etc/passwd")
            .map(|text| format!("read {} bytes", text.len()))
            .map_err(|e| e.to_string()),
        "socket" => std::net::TcpStream::connect(("127.0.0.1", 9))
            .map(|_| "connected".to_string())
            .map_err(|e| e.to_string()),
        "spawn" => std::process::Command::new("/bin/true")
            .status()
            .map(|s| format!("ran: {s}"))
            .map_err(|e| e.to_string()),
        "thread" => std::thread::spawn(|| 6 * 7)
            .join()
            .map(|n| format!("a thread answered {n}"))
            .map_err(|_| "the thread panicked".to_string()),
        other => Err(format!("no probe {other:?}")),
    }
}

/// Whether host work a run started (a host-module call or a `fetch` it did not await) is still
/// executing, after giving what just answered a moment to finish.
fn host_work_left() -> bool {
    let busy = || nodetool_runtime::dispatch::host_work_running() > 0;
    let until = Instant::now() + HOST_WORK_SETTLE;
    while busy() {
        if Instant::now() >= until {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A scan order: the body's imports or its syntax error, or its validation findings.
fn scan(frame: &Frame<()>, order: &ScanOrder) -> ScanAnswer {
    let mut answer = ScanAnswer {
        id: order.id,
        imports: Vec::new(),
        syntax_error: None,
        issues: Vec::new(),
    };
    let Ok(code) = frame.blob().text(order.code) else {
        answer.syntax_error = Some(WirePlace {
            text: "the body is not UTF-8 text".into(),
            line: 1,
            column: 1,
        });
        return answer;
    };
    let place = |i: &nodetool_guest::BodyImport| WirePlace {
        text: i.specifier.clone(),
        line: i.line,
        column: i.column,
    };
    match &order.node {
        Some(node) => {
            let analysis = nodetool_jssource::validate::analyze_body(node, code);
            answer.imports = analysis.imports.iter().map(place).collect();
            answer.issues = analysis
                .issues
                .into_iter()
                .map(|i| WireIssue {
                    error: i.severity == nodetool_jssource::validate::Severity::Error,
                    code: i.code.to_string(),
                    message: i.message,
                    line: i.line,
                    column: i.column,
                })
                .collect();
        }
        None => match nodetool_guest::body_imports(code) {
            Ok(imports) => answer.imports = imports.iter().map(place).collect(),
            Err(e) => {
                answer.syntax_error = Some(WirePlace {
                    text: e.message,
                    line: e.line,
                    column: e.column,
                });
            }
        },
    }
    answer
}

fn failed(id: u64, error: RunError, started: Instant) -> RunAnswer {
    RunAnswer {
        id,
        result: None,
        error: Some(error),
        logs: Vec::new(),
        duration_us: duration_us(started.elapsed()),
        retire: false,
        host_work_left: false,
        refused_artifacts: Vec::new(),
        settles: false,
    }
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A compile order: every WASM module compiled (and re-validated) as a run would, nothing run.
fn compile(
    engines: &Engines,
    artifacts: &Artifacts,
    frame: &Frame<()>,
    order: wire::CompileOrder,
    blob: &mut BlobWriter,
) -> wire::CompileAnswer {
    let mut answer = wire::CompileAnswer {
        id: order.id,
        artifacts: Vec::new(),
        error: None,
    };
    let mut resolution = Resolution {
        modules: Vec::with_capacity(order.modules.len()),
        statuses: Vec::new(),
    };
    for module in order.modules {
        match module {
            WireModule::Full { module, .. } => match module.read(&frame.blob()) {
                Ok(module) => resolution.modules.push(module),
                Err(e) => {
                    answer.error = Some(format!("the order could not be read: {e}"));
                    return answer;
                }
            },
            WireModule::Known(_) => {
                answer.error = Some("a compile order names a module by key".into());
                return answer;
            }
        }
    }
    let compiled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        engines.dispatchers(&resolution).map(|_| ())
    }));
    match compiled {
        Ok(Ok(())) => answer.artifacts = artifacts.take_produced(blob),
        Ok(Err(e)) => answer.error = Some(e.message),
        Err(_) => answer.error = Some("compiling panicked".into()),
    }
    answer
}

/// One order: its modules (kept for later runs), its inputs, the run, the packed result.
fn execute(
    engines: &Engines,
    modules: &mut HashMap<String, ResolvedModule>,
    frame: &Frame<()>,
    order: RunOrder,
    blob: &mut BlobWriter,
    link: &Arc<Link>,
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
            capabilities: capabilities(order.capabilities, link),
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
        Err(error) => (None, Some(denied(error))),
    };
    Ok(RunAnswer {
        id: order.id,
        result,
        error,
        logs: outcome.logs,
        duration_us: duration,
        retire: false,
        host_work_left: false,
        refused_artifacts: Vec::new(),
        settles: false,
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

    /// Forgets what the run compiled, and returns the keys of offered artifacts the engine
    /// would not load (it compiled those modules itself, so it saved them again).
    fn forget_produced(&self) -> Vec<String> {
        let mut offered = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        let produced =
            std::mem::take(&mut *self.produced.lock().unwrap_or_else(PoisonError::into_inner));
        let refused = produced
            .iter()
            .filter(|(key, _)| offered.contains_key(key))
            .map(|(key, _)| key_to_hex(key))
            .collect();
        offered.clear();
        refused
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
    nodetool_protocol::hex::hex(key)
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

/// The run's capabilities: its secrets, and a channel to the supervisor for the brokered ones.
fn capabilities(wire: WireCapabilities, link: &Arc<Link>) -> Capabilities {
    let grants = Grants {
        workspace: wire.workspace,
        fetch: wire.fetch,
    };
    Capabilities {
        secrets: wire.secrets.map(|s| s.into_iter().collect()),
        authority: (grants.workspace || grants.fetch).then(|| {
            Arc::new(ChannelAuthority {
                grants,
                link: Arc::clone(link),
            }) as Arc<dyn nodetool_broker::Authority>
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_call_refused_by_the_confinement_is_sandbox_denied() {
        let refused = RunError::new(
            RunErrorCode::HostModuleError,
            "Error: ocr.recognize: reading the data failed: Operation not permitted (os error 1)",
        );
        let error = denied(refused);
        assert_eq!(error.code, RunErrorCode::SandboxDenied);
        assert!(
            error.message.contains("Operation not permitted"),
            "{}",
            error.message
        );
        // Anything else keeps its code.
        for (code, message) in [
            (RunErrorCode::HostModuleError, "Error: csv.parse: bad quote"),
            (RunErrorCode::RuntimeError, "Error: (os error 1)"),
        ] {
            assert_eq!(denied(RunError::new(code, message)).code, code);
        }
    }
}
