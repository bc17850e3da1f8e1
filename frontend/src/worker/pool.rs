//! The supervisor side: a pool of sandbox worker processes, and one run through it.
//!
//! The supervisor owns the clock. It sends a run to an idle worker and waits for the answer
//! until the deadline plus a grace; past that the worker is killed (SIGKILL), the answer is
//! `timeout`, and a replacement is started in the background. An answer that arrives after the
//! deadline is `timeout` too. A worker that dies under a run is `sandbox-crashed` naming the
//! signal, or `memory-limit` when it died because an allocation failed under its ceiling. A run
//! whose cancel token fires is cancelled in the worker, and killed if it does not stop within
//! the grace. A worker is recycled after a configurable number of runs, and whenever it held
//! too many modules. Idle workers wait for their next run; a slot whose worker was killed is
//! usable again only once its replacement said it is ready.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nodetool_broker::Authority;
use nodetool_guest::{CancelToken, Capabilities, RunLimits, RunOutcome};
use nodetool_protocol::catalog::{FileContent, Resolution, ResolvedKind};
use nodetool_protocol::packed::Packed;
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;

use super::ask::{self, SharedStdin};
use super::child::{MEMORY_ARG, PARENT_ARG, UNCONFINED_ARG, WORKER_ARG};
use super::wire::{
    self, BlobWriter, Frame, FrameReader, FromWorker, RunAnswer, RunOrder, ScanAnswer, ScanOrder,
    ToWorker, WireCapabilities, WireError, WireLimits, WireModule, WireResolved, module_key,
};

/// How workers are started and retired. There is no `Default` for the program:
/// [`WorkerOptions::standard`] takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerOptions {
    /// The executable started as a worker (a front end's own binary).
    pub program: PathBuf,
    /// Workers kept ready (the server's `--max-runs`; the CLI's 1).
    pub workers: usize,
    /// The memory ceiling of each worker: everything it allocates, guest heap, host modules,
    /// WASM, buffers and results together.
    pub memory_bytes: u64,
    /// How long past its deadline a run may take to answer before its worker is killed.
    pub grace: Duration,
    /// Runs a worker serves before it is replaced.
    pub recycle_after: u32,
    /// Where compiled WASM modules are kept between runs (`None`: nowhere). Only the
    /// supervisor writes here.
    pub artifact_dir: Option<PathBuf>,
    /// Run bodies in workers that could not confine themselves (no seccomp filter: another
    /// OS, an old kernel, a container that forbids it). Off by default: such a worker is a
    /// start-up error saying why ([`ALLOW_UNCONFINED_ENV`] or `--allow-unconfined` turn it on).
    pub allow_unconfined: bool,
    /// Confine workers (the default). Off only where code asks for it (the isolation
    /// benchmark measures what confinement costs); no front end offers it.
    pub confine: bool,
}

/// The environment variable that allows unconfined workers when set to `1`.
pub const ALLOW_UNCONFINED_ENV: &str = "NODETOOL_ALLOW_UNCONFINED";

impl WorkerOptions {
    /// The standard ceiling for a worker: 512 MiB.
    pub const STANDARD_MEMORY_BYTES: u64 = 512 * 1024 * 1024;
    /// The standard grace past a deadline: 100 ms.
    pub const STANDARD_GRACE: Duration = Duration::from_millis(100);
    /// The standard number of runs before a worker is replaced: 500.
    pub const STANDARD_RECYCLE_AFTER: u32 = 500;

    /// `workers` workers of `program` with the standard ceiling, grace and recycling.
    pub fn standard(program: PathBuf, workers: usize) -> WorkerOptions {
        WorkerOptions {
            program,
            workers: workers.max(1),
            memory_bytes: Self::STANDARD_MEMORY_BYTES,
            grace: Self::STANDARD_GRACE,
            recycle_after: Self::STANDARD_RECYCLE_AFTER,
            artifact_dir: None,
            allow_unconfined: false,
            confine: true,
        }
    }
}

/// Where compiled WASM modules are kept, under a cache home (`$XDG_CACHE_HOME`).
pub fn artifact_dir(cache_home: &std::path::Path) -> PathBuf {
    cache_home.join("nodetool").join("wasm-artifacts")
}

/// What a front end's flags say about its workers, checked, with this process's own
/// executable as the worker program. `None` values take the standard figures.
pub fn options_from_flags(
    workers: usize,
    memory_mb: Option<u64>,
    grace_ms: Option<u64>,
    recycle_after: Option<u32>,
) -> Result<WorkerOptions, String> {
    let program = std::env::current_exe().map_err(|e| {
        format!(
            "cannot find this program's own executable to start sandbox workers ({e}); run it from an installed path, or pass --in-process --allow-unconfined to run without isolation (debugging only)"
        )
    })?;
    let mut options = WorkerOptions::standard(program, workers);
    if let Some(mb) = memory_mb {
        if !(16..=65_536).contains(&mb) {
            return Err(format!(
                "--worker-memory-mb must be between 16 and 65536, got {mb}"
            ));
        }
        options.memory_bytes = mb * 1024 * 1024;
    }
    if let Some(ms) = grace_ms {
        if ms > 10_000 {
            return Err(format!("--grace-ms must be at most 10000, got {ms}"));
        }
        options.grace = Duration::from_millis(ms);
    }
    if let Some(runs) = recycle_after {
        options.recycle_after = runs.max(1);
    }
    Ok(options)
}

/// A worker could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStartError(pub String);

impl std::fmt::Display for WorkerStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long a new worker may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The module bytes a worker may hold before it is recycled (it keeps every module it was sent).
const MAX_KNOWN_BYTES: usize = 96 * 1024 * 1024;

/// How long a worker may take to tear its last run down before it is handed out again.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long parsing one body (for its imports, or to validate it) may take in a worker.
pub const SCAN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long compiling a run's missing WASM modules may take in a compile worker.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a waiting run looks at its cancel token.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// The last bytes a worker wrote to stderr, kept to tell an allocation failure from a crash.
const STDERR_TAIL: usize = 4096;

/// Counts of what happened to workers, for logs and metrics.
#[derive(Debug, Default)]
pub struct WorkerCounts {
    /// Workers started (the first ones and every replacement).
    pub started: AtomicU64,
    /// Killed at the deadline plus the grace, or after a cancellation that did not stop.
    pub killed: AtomicU64,
    /// Died under a run.
    pub crashed: AtomicU64,
    /// Retired after their run budget or module budget.
    pub recycled: AtomicU64,
}

/// One worker process.
struct Worker {
    child: Child,
    stdin: SharedStdin,
    frames: FrameReader<ChildStdout>,
    stderr: Arc<StderrTail>,
    /// Modules this worker holds, by key.
    known: HashSet<String>,
    known_bytes: usize,
    runs: u32,
    /// It answered a run and will say `Prepared` once it has torn it down.
    settling: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker's stderr: forwarded to ours line by line, its tail kept.
struct StderrTail {
    tail: Mutex<VecDeque<u8>>,
    /// Set when the worker's stderr reached its end.
    closed: Mutex<bool>,
    changed: Condvar,
}

impl StderrTail {
    /// Forgets what an earlier order's work wrote.
    fn clear(&self) {
        self.tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn text(&self, wait: Duration) -> String {
        let closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self
            .changed
            .wait_timeout_while(closed, wait, |closed| !*closed);
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<u8>>()).into_owned()
    }
}

struct PoolState {
    idle: Vec<Worker>,
    starting: usize,
    draining: bool,
}

struct Shared {
    options: WorkerOptions,
    state: Mutex<PoolState>,
    changed: Condvar,
    next_id: AtomicU64,
    counts: WorkerCounts,
    memory_enforced: std::sync::atomic::AtomicBool,
    /// Why the workers could not be confined, when the operator allowed that.
    unconfined: Mutex<Option<String>>,
    /// Whether the last worker started has Landlock denying it the filesystem.
    landlock: std::sync::atomic::AtomicBool,
}

/// Sandbox worker processes and the runs they serve. Cheap to clone; `Sync`.
#[derive(Clone)]
pub struct WorkerPool(Arc<Shared>);

/// One order's exchange with a worker: its id, who may cancel it, when its worker is killed,
/// the error then, and the run's authority (for the capability calls it makes).
struct Exchange<'a> {
    id: u64,
    cancel: Option<&'a CancelToken>,
    kill_after: Duration,
    on_timeout: &'a dyn Fn() -> RunError,
    authority: Option<&'a Arc<dyn Authority>>,
}

/// One run through the pool: the resolution is already the catalog's answer.
pub struct PoolRun<'a> {
    /// The body.
    pub code: &'a str,
    /// What its imports resolved to.
    pub resolution: &'a Resolution,
    /// `inputs`.
    pub inputs: &'a Value,
    /// The run's limits.
    pub limits: RunLimits,
    /// What it is granted (a fetch grant's client is the worker's own).
    pub capabilities: &'a Capabilities,
    /// Cancellation from the front end.
    pub cancel: Option<&'a CancelToken>,
}

impl WorkerPool {
    /// Starts `options.workers` workers and waits until each is ready. A worker that cannot be
    /// started is an error naming the program and why.
    pub fn start(options: WorkerOptions) -> Result<WorkerPool, WorkerStartError> {
        let pool = WorkerPool(Arc::new(Shared {
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                starting: 0,
                draining: false,
            }),
            changed: Condvar::new(),
            next_id: AtomicU64::new(1),
            counts: WorkerCounts::default(),
            memory_enforced: std::sync::atomic::AtomicBool::new(true),
            unconfined: Mutex::new(None),
            landlock: std::sync::atomic::AtomicBool::new(false),
            options,
        }));
        for _ in 0..pool.0.options.workers {
            let worker = pool.spawn()?;
            pool.lock().idle.push(worker);
        }
        Ok(pool)
    }

    /// The options the pool was started with.
    pub fn options(&self) -> &WorkerOptions {
        &self.0.options
    }

    /// What happened to workers so far.
    pub fn counts(&self) -> &WorkerCounts {
        &self.0.counts
    }

    /// Whether Landlock denies the workers the filesystem too (besides seccomp): the kernel
    /// has it and accepted the ruleset.
    pub fn landlock(&self) -> bool {
        self.0.landlock.load(Ordering::Relaxed)
    }

    /// Why workers run unconfined (the operator allowed it), when they do.
    pub fn unconfined(&self) -> Option<String> {
        self.0
            .unconfined
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether every worker started so far runs under its memory ceiling (the kernel accepted
    /// the limit).
    pub fn memory_enforced(&self) -> bool {
        self.0.memory_enforced.load(Ordering::Relaxed)
    }

    /// The process ids of the workers idle now.
    pub fn idle_pids(&self) -> Vec<u32> {
        self.lock().idle.iter().map(|w| w.child.id()).collect()
    }

    /// Workers idle and ready now.
    pub fn ready(&self) -> usize {
        self.lock().idle.len()
    }

    /// Marks the pool as shutting down (what readiness reports). Runs already admitted by the
    /// front end still get workers and finish; refusing new work is the front end's admission's
    /// job, and the workers end with the pool (or the process).
    pub fn drain(&self) {
        self.lock().draining = true;
        self.0.changed.notify_all();
    }

    /// Whether [`WorkerPool::drain`] was called.
    pub fn draining(&self) -> bool {
        self.lock().draining
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts one worker and waits for its ready frame.
    fn spawn(&self) -> Result<Worker, WorkerStartError> {
        let options = &self.0.options;
        let program = &options.program;
        let mut command = Command::new(program);
        command
            .arg(WORKER_ARG)
            .arg(MEMORY_ARG)
            .arg(options.memory_bytes.to_string())
            .arg(PARENT_ARG)
            .arg(std::process::id().to_string())
            .args((!options.confine).then_some(UNCONFINED_ARG))
            // A worker needs nothing from the environment, and a compromised one would hold
            // whatever it was given; only the debug builds' test switch passes.
            .env_clear()
            .envs(
                std::env::vars_os().filter(|(name, _)| {
                    cfg!(debug_assertions) && name == "NODETOOL_TEST_UNCONFINABLE"
                }),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_from_lasting_thread(command).map_err(|e| {
            WorkerStartError(format!(
                "cannot start the sandbox worker {}: {e}",
                program.display()
            ))
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(WorkerStartError(
                "the sandbox worker's pipes could not be opened".into(),
            ));
        };
        // Larger pipes: a big order, result or capability reply crosses in fewer wake-ups
        // (best effort; the kernel may refuse).
        let _ = rustix::pipe::fcntl_setpipe_size(&stdin, wire::PIPE_BYTES);
        // Every write to a worker has a deadline (`wire::write_frame_until`).
        if let Err(e) = rustix::io::ioctl_fionbio(&stdin, true) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(WorkerStartError(format!(
                "the sandbox worker's channel could not be set up ({e})"
            )));
        }
        let _ = rustix::pipe::fcntl_setpipe_size(&stdout, wire::PIPE_BYTES);
        let tail = Arc::new(StderrTail {
            tail: Mutex::new(VecDeque::with_capacity(STDERR_TAIL)),
            closed: Mutex::new(false),
            changed: Condvar::new(),
        });
        let frames = match FrameReader::new(stdout) {
            Ok(frames) => frames,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WorkerStartError(format!(
                    "the sandbox worker's channel could not be set up: {e}"
                )));
            }
        };
        let spawned = {
            let tail = Arc::clone(&tail);
            std::thread::Builder::new()
                .name("worker-stderr".into())
                .spawn(move || forward_stderr(stderr, &tail))
        };
        let mut worker = Worker {
            child,
            stdin: Arc::new(Mutex::new(stdin)),
            frames,
            stderr: tail,
            known: HashSet::new(),
            known_bytes: 0,
            runs: 0,
            settling: false,
        };
        if let Err(e) = spawned {
            return Err(WorkerStartError(format!(
                "cannot start the sandbox worker's stderr thread: {e}"
            )));
        }
        self.0.counts.started.fetch_add(1, Ordering::Relaxed);
        match worker
            .frames
            .next::<FromWorker>(Instant::now() + READY_TIMEOUT)
        {
            Ok(Some(Frame {
                header: FromWorker::Ready(ready),
                ..
            })) => {
                if !ready.memory_enforced {
                    self.0.memory_enforced.store(false, Ordering::Relaxed);
                }
                self.0.landlock.store(ready.landlock, Ordering::Relaxed);
                if let Some(why) = ready.unconfined {
                    if self.0.options.confine && !self.0.options.allow_unconfined {
                        return Err(WorkerStartError(format!(
                            "sandbox workers cannot be confined on this host: {why}. Bodies are not run without that second wall\nhelp: to run them unconfined anyway, pass --allow-unconfined or set {ALLOW_UNCONFINED_ENV}=1"
                        )));
                    }
                    let mut unconfined = self
                        .0
                        .unconfined
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    unconfined.get_or_insert(why);
                }
                Ok(worker)
            }
            Ok(Some(_)) => Err(WorkerStartError(
                "the sandbox worker did not start with a ready frame".into(),
            )),
            Err(_) => {
                let status = worker.child.wait().ok();
                let said = worker.stderr.text(Duration::from_millis(200));
                let said = said.trim();
                Err(WorkerStartError(format!(
                    "the sandbox worker {} exited before it was ready ({}){}; it must be a nodetool binary that knows {WORKER_ARG}",
                    program.display(),
                    status.map_or_else(|| "status unknown".into(), describe_status),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {said}")
                    }
                )))
            }
            Ok(None) => Err(WorkerStartError(format!(
                "the sandbox worker {} did not become ready within {} s",
                program.display(),
                READY_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Starts a replacement on a thread of its own; its slot opens when it is ready.
    fn replace(&self) {
        self.lock().starting += 1;
        let pool = self.clone();
        let started = std::thread::Builder::new()
            .name("worker-respawn".into())
            .spawn(move || {
                let worker = pool.spawn();
                let mut state = pool.lock();
                state.starting -= 1;
                // A replacement that failed to start is started by the next run that needs one
                // (`take_any`), which then reports why.
                if let Ok(worker) = worker {
                    state.idle.push(worker);
                }
                drop(state);
                pool.0.changed.notify_all();
            });
        if started.is_err() {
            self.lock().starting -= 1;
            self.0.changed.notify_all();
        }
    }

    /// An idle worker, waiting for a replacement when none is idle; starts one itself when
    /// nothing else is starting. One that died while idle is replaced, never charged to a run.
    fn take(&self, cancel: Option<&CancelToken>) -> Result<Worker, RunError> {
        loop {
            let mut worker = self.take_any(cancel)?;
            if matches!(worker.child.try_wait(), Ok(None)) {
                return Ok(worker);
            }
            self.0.counts.crashed.fetch_add(1, Ordering::Relaxed);
            drop(worker);
            self.replace();
        }
    }

    fn take_any(&self, cancel: Option<&CancelToken>) -> Result<Worker, RunError> {
        let mut state = self.lock();
        loop {
            if let Some(worker) = state.idle.pop() {
                return Ok(worker);
            }
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return Err(RunError::new(
                    RunErrorCode::Cancelled,
                    "the run was cancelled",
                ));
            }
            if state.starting == 0 {
                state.starting += 1;
                drop(state);
                let worker = self.spawn();
                state = self.lock();
                state.starting -= 1;
                match worker {
                    Ok(worker) => return Ok(worker),
                    Err(e) => {
                        return Err(RunError::new(RunErrorCode::SandboxCrashed, e.0));
                    }
                }
            }
            state = self
                .0
                .changed
                .wait_timeout(state, CANCEL_POLL * 5)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Gives a worker back after a clean answer, or retires it.
    fn give_back(&self, worker: Worker, retire: bool) {
        let options = &self.0.options;
        if retire || worker.runs >= options.recycle_after || worker.known_bytes > MAX_KNOWN_BYTES {
            self.0.counts.recycled.fetch_add(1, Ordering::Relaxed);
            drop(worker);
            self.replace();
            return;
        }
        self.lock().idle.push(worker);
        self.0.changed.notify_one();
    }

    /// Sends the order `build` makes for a worker taken from the pool (the worker decides which
    /// modules it is sent by key) and waits for the frame answering `id` until the deadline
    /// `kill_after` gives from the moment the order was written, or a cancellation. A worker
    /// found dead when the order is written was idle, not running anything of this caller's:
    /// it is replaced and the order goes to another, once. On every failure the worker is gone
    /// (killed or dead) and replaced; `sent` hears of the worker the order went to.
    fn exchange(
        &self,
        order: Exchange<'_>,
        build: &mut dyn FnMut(&Worker) -> (ToWorker, BlobWriter),
        sent: &mut dyn FnMut(&mut Worker, Instant),
    ) -> Result<(Worker, FromWorker, Frame<()>), RunError> {
        let Exchange {
            id,
            cancel,
            kill_after,
            on_timeout,
            authority,
        } = order;
        let mut attempts = 0;
        let (mut worker, kill_at) = loop {
            let mut worker = self.take(cancel)?;
            worker.stderr.clear();
            let (order, blob) = build(&worker);
            let write_by = Instant::now() + kill_after;
            match ask::send_to(&worker.stdin, &order, &blob, write_by) {
                // A worker still tearing its last run down reads the order once it says
                // `Prepared`: the clock starts then, so that time is never this run's. One that
                // dies before it is replaced and the order goes to another, once.
                Ok(()) if worker.settling && !settled(&mut worker) && attempts == 0 => {
                    attempts += 1;
                    self.0.counts.crashed.fetch_add(1, Ordering::Relaxed);
                    drop(worker);
                    self.replace();
                }
                Ok(()) if worker.settling => return Err(self.died(worker)),
                Ok(()) => {
                    let now = Instant::now();
                    sent(&mut worker, now);
                    break (worker, now + kill_after);
                }
                Err(WireError::Malformed(why)) => {
                    self.give_back(worker, false);
                    return Err(RunError::new(
                        RunErrorCode::RuntimeError,
                        format!("the run could not be sent to its worker: {why}"),
                    ));
                }
                Err(_) if attempts == 0 => {
                    attempts += 1;
                    self.0.counts.crashed.fetch_add(1, Ordering::Relaxed);
                    drop(worker);
                    self.replace();
                }
                Err(_) => return Err(self.died(worker)),
            }
        };
        loop {
            let now = Instant::now();
            if now >= kill_at {
                self.0.counts.killed.fetch_add(1, Ordering::Relaxed);
                drop(worker);
                self.replace();
                return Err(on_timeout());
            }
            // A cancelled run's worker is killed at once: its client is gone, and a replacement
            // costs a few milliseconds off anyone's path.
            if cancel.is_some_and(CancelToken::is_cancelled) {
                self.0.counts.killed.fetch_add(1, Ordering::Relaxed);
                drop(worker);
                self.replace();
                return Err(RunError::new(
                    RunErrorCode::Cancelled,
                    "the run was cancelled",
                ));
            }
            let until = if cancel.is_some() {
                kill_at.min(now + CANCEL_POLL)
            } else {
                kill_at
            };
            match worker.frames.next::<FromWorker>(until) {
                Ok(None) => {}
                Ok(Some(frame)) if answers(&frame.header, id) => {
                    let (header, frame) = frame.split();
                    return Ok((worker, header, frame));
                }
                // The run calls a brokered capability: decided and performed here.
                Ok(Some(frame)) if matches!(frame.header, FromWorker::Ask(_)) => {
                    let (header, frame) = frame.split();
                    let FromWorker::Ask(asked) = header else {
                        continue;
                    };
                    let served = ask::serve(authority, asked, frame, &worker.stdin, kill_at);
                    // A worker that stopped reading its channel is out of time, not out of
                    // protocol: it is stopped at the deadline like any other.
                    match served {
                        Ok(()) => {}
                        Err(WireError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                            self.0.counts.killed.fetch_add(1, Ordering::Relaxed);
                            drop(worker);
                            self.replace();
                            return Err(on_timeout());
                        }
                        Err(_) => return Err(self.broke_protocol(worker)),
                    }
                }
                Ok(Some(_)) | Err(WireError::Malformed(_)) => {
                    return Err(self.broke_protocol(worker));
                }
                Err(WireError::Closed | WireError::Io(_)) => return Err(self.died(worker)),
            }
        }
    }

    /// Compiles, in a fresh worker that runs no guest code and then leaves, the WASM modules
    /// of `resolution` the artifact cache lacks, and keeps what it hands back under each
    /// module's own key. Best effort: a failure leaves the run to compile for itself.
    /// `keys` are the artifact keys of `resolution`'s WASM modules ([`artifact_keys`]). Only
    /// whether an entry exists is looked at here; its digest is checked when it is read for a
    /// run, and one that fails it is compiled again after that run.
    fn compile_missing(&self, resolution: &Resolution, keys: &HashMap<String, String>) {
        let Some(store) = self.artifact_store() else {
            return;
        };
        let missing: Vec<_> = resolution
            .modules
            .iter()
            .filter(|m| {
                keys.get(&m.specifier)
                    .and_then(|hex| store.path(hex))
                    .is_some_and(|path| !path.is_file())
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        let Ok(mut worker) = self.spawn() else {
            return;
        };
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let mut blob = BlobWriter::default();
        let modules = missing
            .iter()
            .map(|m| WireModule::Full {
                key: module_key(m),
                module: Box::new(WireResolved::write(m, &mut blob)),
            })
            .collect();
        let until = Instant::now() + COMPILE_TIMEOUT;
        let order = ToWorker::Compile(wire::CompileOrder { id, modules });
        if ask::send_to(&worker.stdin, &order, &blob, until).is_err() {
            return;
        }
        drop(blob);
        if let Ok(Some(frame)) = worker.frames.next::<FromWorker>(until) {
            let (header, frame) = frame.split();
            if let FromWorker::Compiled(answer) = header {
                for (hex, span) in &answer.artifacts {
                    // Only a key of the modules it was given, and bytes that read.
                    if keys.values().any(|k| k == hex)
                        && let Ok(bytes) = frame.blob().get(*span)
                    {
                        store.write(hex, bytes);
                    }
                }
            }
        }
        // The compile worker is done either way.
        let _ = worker.child.kill();
    }

    /// Runs one body in a worker (see the module documentation for every way it can end).
    pub fn run(&self, run: PoolRun<'_>) -> RunOutcome {
        let started = Instant::now();
        let fail = |error: RunError| RunOutcome {
            result: Err(error),
            logs: Vec::new(),
            duration: started.elapsed(),
        };
        let wasm_keys = artifact_keys(run.resolution);
        // A WASM module the cache lacks is compiled first, in a worker of its own (the run's
        // clock has not started).
        self.compile_missing(run.resolution, &wasm_keys);
        // An entry that could not be read for this run (gone, or failing its digest and so
        // dropped) is compiled again after it.
        let unreadable = std::cell::Cell::new(false);
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let inputs = Packed::from_value(run.inputs).to_bytes();
        let build = |worker: &Worker| {
            let mut blob = BlobWriter::default();
            let mut sent_keys: Vec<(String, usize)> = Vec::new();
            let mut artifacts = Vec::new();
            let modules = run
                .resolution
                .modules
                .iter()
                .map(|m| {
                    let key = module_key(m);
                    if worker.known.contains(&key) {
                        return WireModule::Known(key);
                    }
                    let before = blob.len();
                    let module = Box::new(WireResolved::write(m, &mut blob));
                    sent_keys.push((key.clone(), blob.len() - before));
                    // A module this worker has not compiled: its artifact, when one is kept.
                    if let (Some(hex), Some(store)) =
                        (wasm_keys.get(&m.specifier), self.artifact_store())
                    {
                        match store.read(hex) {
                            Some(artifact) => artifacts.push((hex.clone(), blob.push(&artifact))),
                            None => unreadable.set(true),
                        }
                    }
                    WireModule::Full { key, module }
                })
                .collect();
            let order = ToWorker::Run(RunOrder {
                id,
                code: blob.push(run.code.as_bytes()),
                inputs: blob.push(&inputs),
                limits: wire_limits(&run.limits),
                capabilities: wire_capabilities(run.capabilities),
                modules,
                statuses: run.resolution.statuses.clone(),
                artifacts,
            });
            (order, blob, sent_keys)
        };
        let mut deadline = Instant::now() + run.limits.timeout;
        let sent_modules = std::cell::RefCell::new(Vec::new());
        let exchanged = self.exchange(
            Exchange {
                id,
                cancel: run.cancel,
                kill_after: run.limits.timeout + self.0.options.grace,
                on_timeout: &|| timeout(&run.limits),
                authority: run.capabilities.authority.as_ref(),
            },
            &mut |worker| {
                let (order, blob, keys) = build(worker);
                *sent_modules.borrow_mut() = keys;
                (order, blob)
            },
            &mut |worker, at| {
                // The clock starts when the order is handed over.
                deadline = at + run.limits.timeout;
                for (key, bytes) in sent_modules.borrow().iter() {
                    worker.known.insert(key.clone());
                    worker.known_bytes += bytes;
                }
                worker.runs += 1;
            },
        );
        let (mut worker, header, frame) = match exchanged {
            Ok(exchanged) => exchanged,
            Err(e) => return fail(e),
        };
        let FromWorker::Answer(answer) = header else {
            return fail(protocol_broken());
        };
        let retire = answer.retire || answer.host_work_left;
        let settles = answer.settles;
        // An artifact the worker's engine would not load is dropped (the worst a lying worker
        // does with this is cost a recompile) and compiled again after the run.
        let refused: Vec<&String> = answer
            .refused_artifacts
            .iter()
            .filter(|hex| wasm_keys.values().any(|k| k == *hex))
            .collect();
        if let Some(store) = self.artifact_store() {
            for hex in &refused {
                if let Some(path) = store.path(hex) {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        let recompile = !refused.is_empty() || unreadable.get();
        let mut outcome = finish(answer, &frame, started);
        // Late is late however long the answer took to read: never `ok` after the deadline.
        if Instant::now() > deadline {
            outcome.result = Err(timeout(&run.limits));
        }
        // A large heap's teardown is announced with `Prepared`, and the next order's clock
        // waits for it.
        worker.settling = settles;
        self.give_back(worker, retire);
        if recompile {
            self.compile_missing(run.resolution, &wasm_keys);
        }
        outcome
    }

    /// Parses a body in a worker: its static imports (or its syntax error), or, with `node`,
    /// the validation findings of that Code node. The front end never parses untrusted code
    /// itself: a parser that recursed off its stack takes a worker with it, not the front end.
    pub fn scan(
        &self,
        code: &str,
        node: Option<&str>,
        cancel: Option<&CancelToken>,
    ) -> Result<ScanAnswer, RunError> {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let on_timeout = || {
            RunError::new(
                RunErrorCode::Timeout,
                format!(
                    "parsing the body took longer than {} ms",
                    SCAN_TIMEOUT.as_millis()
                ),
            )
        };
        let (worker, header, _) = self.exchange(
            Exchange {
                id,
                cancel,
                kill_after: SCAN_TIMEOUT,
                on_timeout: &on_timeout,
                authority: None,
            },
            &mut |_| {
                let mut blob = BlobWriter::default();
                let order = ToWorker::Scan(ScanOrder {
                    id,
                    code: blob.push(code.as_bytes()),
                    node: node.map(str::to_string),
                });
                (order, blob)
            },
            &mut |_, _| {},
        )?;
        self.give_back(worker, false);
        match header {
            FromWorker::Scanned(answer) => Ok(answer),
            _ => Err(protocol_broken()),
        }
    }

    /// Has a worker try one operation its confinement must refuse, and returns what
    /// happened (debug builds only; see `ToWorker::Probe`).
    #[cfg(debug_assertions)]
    pub fn probe(&self, operation: &str) -> Result<Result<String, String>, RunError> {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let on_timeout = || RunError::new(RunErrorCode::Timeout, "the probe did not answer");
        let (worker, header, _) = self.exchange(
            Exchange {
                id,
                cancel: None,
                kill_after: SCAN_TIMEOUT,
                on_timeout: &on_timeout,
                authority: None,
            },
            &mut |_| {
                let order = ToWorker::Probe(wire::ProbeOrder {
                    id,
                    operation: operation.to_string(),
                });
                (order, BlobWriter::default())
            },
            &mut |_, _| {},
        )?;
        self.give_back(worker, false);
        match header {
            FromWorker::Probed(answer) => Ok(answer.outcome),
            _ => Err(protocol_broken()),
        }
    }

    /// A worker that said something no worker says: it is not trusted again.
    fn broke_protocol(&self, worker: Worker) -> RunError {
        self.0.counts.crashed.fetch_add(1, Ordering::Relaxed);
        drop(worker);
        self.replace();
        protocol_broken()
    }

    fn artifact_store(&self) -> Option<ArtifactFiles<'_>> {
        self.0.options.artifact_dir.as_deref().map(ArtifactFiles)
    }

    /// A worker whose channel ended under a run: why it died, as the run's error.
    fn died(&self, mut worker: Worker) -> RunError {
        self.0.counts.crashed.fetch_add(1, Ordering::Relaxed);
        // Its channel is closed; it is gone or going (a worker whose stdout closed is stopped).
        let status = match worker.child.try_wait() {
            Ok(Some(status)) => Some(status),
            _ => {
                std::thread::sleep(Duration::from_millis(20));
                match worker.child.try_wait() {
                    Ok(Some(status)) => Some(status),
                    _ => {
                        let _ = worker.child.kill();
                        worker.child.wait().ok()
                    }
                }
            }
        };
        let said = worker.stderr.text(Duration::from_millis(200));
        drop(worker);
        self.replace();
        let ceiling = self.0.options.memory_bytes / (1024 * 1024);
        if said.contains("has overflowed its stack") {
            return RunError::new(
                RunErrorCode::StackOverflow,
                "the body nests too deeply: parsing or running it exhausted the sandbox worker's stack",
            );
        }
        if said.contains("memory allocation of")
            || said.contains("std::bad_alloc")
            || said.contains("out of memory")
        {
            return RunError::new(
                RunErrorCode::MemoryLimit,
                format!(
                    "the run exceeded its memory ceiling ({ceiling} MiB for everything its sandbox worker allocates)"
                ),
            );
        }
        RunError::new(
            RunErrorCode::SandboxCrashed,
            format!(
                "the sandbox worker running the body {}; it was replaced, and nothing else was affected",
                status.map_or_else(|| "died".to_string(), describe_status)
            ),
        )
    }
}

/// Waits for a worker's `Prepared` (it tore its last run down); `false` when it died, said
/// something else or took longer than [`SETTLE_TIMEOUT`].
fn settled(worker: &mut Worker) -> bool {
    let prepared = matches!(
        worker
            .frames
            .next::<FromWorker>(Instant::now() + SETTLE_TIMEOUT),
        Ok(Some(Frame {
            header: FromWorker::Prepared,
            ..
        }))
    );
    if prepared {
        worker.settling = false;
    }
    prepared
}

/// The run error of a worker that broke the protocol.
fn protocol_broken() -> RunError {
    RunError::new(
        RunErrorCode::SandboxCrashed,
        "the sandbox worker broke the protocol; it was stopped and replaced",
    )
}

/// Whether `header` is the answer to the order `id`.
fn answers(header: &FromWorker, id: u64) -> bool {
    match header {
        FromWorker::Answer(a) => a.id == id,
        FromWorker::Scanned(a) => a.id == id,
        #[cfg(debug_assertions)]
        FromWorker::Probed(a) => a.id == id,
        FromWorker::Compiled(a) => a.id == id,
        FromWorker::Ready(_) | FromWorker::Prepared | FromWorker::Ask(_) => false,
    }
}

/// The artifact key (hex) of each WASM module of `resolution`, by specifier.
fn artifact_keys(resolution: &Resolution) -> HashMap<String, String> {
    resolution
        .modules
        .iter()
        .filter_map(|m| {
            let ResolvedKind::Wasm { wasm } = &m.kind else {
                return None;
            };
            let FileContent::Wasm { bytes } = &m.entry()?.content else {
                return None;
            };
            let key = nodetool_wasm_host::module_key(&bytes.0, wasm);
            Some((m.specifier.clone(), super::child::key_to_hex(&key)))
        })
        .collect()
}

/// The largest artifact kept.
const MAX_ARTIFACT_BYTES: usize = 64 * 1024 * 1024;

/// The supervisor's artifact cache: `<dir>/<key>.cwasm`, each file the SHA-256 of its payload
/// followed by the payload. A file whose digest does not match is removed, never handed out.
struct ArtifactFiles<'a>(&'a std::path::Path);

impl ArtifactFiles<'_> {
    fn path(&self, hex: &str) -> Option<PathBuf> {
        super::child::key_from_hex(hex)?;
        Some(self.0.join(format!("{hex}.cwasm")))
    }

    fn read(&self, hex: &str) -> Option<Vec<u8>> {
        use sha2::{Digest as _, Sha256};
        let path = self.path(hex)?;
        let metadata = std::fs::metadata(&path).ok()?;
        if !metadata.is_file() || metadata.len() > (MAX_ARTIFACT_BYTES + 32) as u64 {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        let (digest, payload) = bytes.split_at_checked(32)?;
        if Sha256::digest(payload).as_slice() != digest {
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(payload.to_vec())
    }

    fn write(&self, hex: &str, payload: &[u8]) {
        use sha2::{Digest as _, Sha256};
        let Some(path) = self.path(hex) else { return };
        if payload.len() > MAX_ARTIFACT_BYTES || std::fs::create_dir_all(self.0).is_err() {
            return;
        }
        let mut bytes = Sha256::digest(payload).to_vec();
        bytes.extend_from_slice(payload);
        let _ = nodetool_discovery::atomic::write_atomic(&path, &bytes);
    }
}

/// The outcome an answer carries.
fn finish(answer: RunAnswer, frame: &Frame<()>, started: Instant) -> RunOutcome {
    let result = {
        match (answer.error, answer.result) {
            (Some(error), _) => Err(error),
            (None, Some(span)) => frame.blob().value(span).map_err(|e| {
                RunError::new(
                    RunErrorCode::SandboxCrashed,
                    format!("the sandbox worker sent a result that does not read: {e}"),
                )
            }),
            (None, None) => Ok(Value::Undefined),
        }
    };
    RunOutcome {
        result,
        logs: answer.logs,
        duration: started.elapsed(),
    }
}

fn timeout(limits: &RunLimits) -> RunError {
    RunError::new(
        RunErrorCode::Timeout,
        format!(
            "the run exceeded its {} ms deadline",
            limits.timeout.as_millis()
        ),
    )
}

/// Starts `command` from one thread that lives as long as the process. A worker asks for
/// SIGKILL when its parent goes away, and Linux means the parent *thread*: a worker started
/// from a short-lived thread (a respawn thread, a blocking-pool thread) would die with it.
fn spawn_from_lasting_thread(command: Command) -> std::io::Result<Child> {
    type Order = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Option<Mutex<mpsc::Sender<Order>>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (orders, incoming) = mpsc::channel::<Order>();
        std::thread::Builder::new()
            .name("worker-spawner".into())
            .spawn(move || {
                while let Ok((mut command, answer)) = incoming.recv() {
                    let _ = answer.send(command.spawn());
                }
            })
            .ok()
            .map(|_| Mutex::new(orders))
    });
    let unavailable = || std::io::Error::other("the worker-spawning thread is not running");
    let spawner = spawner.as_ref().ok_or_else(unavailable)?;
    let (answer, child) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((command, answer))
        .map_err(|_| unavailable())?;
    child.recv().map_err(|_| unavailable())?
}

/// `killed by SIGSEGV (signal 11)`, `exited with status 3`.
fn describe_status(status: ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        let name = match signal {
            4 => "SIGILL",
            6 => "SIGABRT",
            7 => "SIGBUS",
            8 => "SIGFPE",
            9 => "SIGKILL",
            11 => "SIGSEGV",
            13 => "SIGPIPE",
            15 => "SIGTERM",
            31 => "SIGSYS",
            _ => "a signal",
        };
        return format!("was killed by {name} (signal {signal})");
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_string(),
    }
}

/// Forwards a worker's stderr to ours, keeping its last bytes.
fn forward_stderr(mut stderr: std::process::ChildStderr, tail: &StderrTail) {
    use std::io::Write as _;
    let mut buffer = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut forwarded = 0usize;
    let mut emit = |line: &[u8]| {
        forwarded += 1;
        if forwarded <= MAX_FORWARDED_LINES {
            let _ = writeln!(std::io::stderr(), "sandbox worker: {}", shown_line(line));
        } else if forwarded == MAX_FORWARDED_LINES + 1 {
            let _ = writeln!(
                std::io::stderr(),
                "sandbox worker: (more output from this worker is not shown)"
            );
        }
    };
    loop {
        match stderr.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = &buffer[..n];
                for &byte in chunk {
                    if byte == b'\n' {
                        emit(&line);
                        line.clear();
                    } else if line.len() < MAX_FORWARDED_LINE_BYTES {
                        line.push(byte);
                    }
                }
                let mut kept = tail.tail.lock().unwrap_or_else(PoisonError::into_inner);
                kept.extend(chunk.iter().copied());
                let excess = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..excess);
            }
        }
    }
    if !line.is_empty() {
        emit(&line);
    }
    *tail.closed.lock().unwrap_or_else(PoisonError::into_inner) = true;
    tail.changed.notify_all();
}

/// The most lines of one worker's stderr shown on the front end's own.
const MAX_FORWARDED_LINES: usize = 10_000;

/// The longest line of a worker's stderr shown (the rest of it is left out).
const MAX_FORWARDED_LINE_BYTES: usize = 4096;

/// One line a worker wrote, as the front end's log shows it: what is not printable (escape
/// sequences, carriage returns, invalid UTF-8) escaped, so a worker can neither steer the
/// operator's terminal nor forge a line of the front end's own log.
fn shown_line(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\t' || !c.is_control() {
            shown.push(c);
        } else {
            shown.extend(c.escape_default());
        }
    }
    shown
}

fn wire_limits(limits: &RunLimits) -> WireLimits {
    let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
    WireLimits {
        timeout_ms: u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX),
        memory_bytes: n(limits.memory_bytes),
        stack_bytes: n(limits.stack_bytes),
        log_entries: n(limits.log_entries),
        log_chars: n(limits.log_chars),
    }
}

fn wire_capabilities(capabilities: &Capabilities) -> WireCapabilities {
    let grants = capabilities
        .authority
        .as_ref()
        .map(|a| a.grants())
        .unwrap_or_default();
    WireCapabilities {
        secrets: capabilities
            .secrets
            .as_ref()
            .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        workspace: grants.workspace,
        fetch: grants.fetch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(program: &str) -> String {
        let options = WorkerOptions::standard(PathBuf::from(program), 1);
        match WorkerPool::start(options) {
            Ok(_) => panic!("{program} must not start as a worker"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn a_missing_worker_program_is_a_startup_error_naming_it() {
        let message = start("/nonexistent/nodetool");
        assert!(
            message.contains("cannot start the sandbox worker /nonexistent/nodetool"),
            "{message}"
        );
    }

    #[test]
    fn a_program_that_is_not_a_worker_is_a_startup_error_saying_so() {
        let message = start("/bin/true");
        assert!(message.contains("exited before it was ready"), "{message}");
        assert!(message.contains(WORKER_ARG), "{message}");
    }

    #[test]
    fn flags_out_of_range_are_refused_with_the_range() {
        let refused = options_from_flags(1, Some(8), None, None).err();
        assert!(
            refused.is_some_and(|m| m.contains("between 16 and 65536")),
            "a tiny ceiling must be refused"
        );
        let refused = options_from_flags(1, None, Some(60_000), None).err();
        assert!(refused.is_some_and(|m| m.contains("at most 10000")));
        let options = options_from_flags(3, Some(256), Some(50), Some(7));
        assert!(options.as_ref().is_ok_and(|o| o.workers == 3
            && o.memory_bytes == 256 * 1024 * 1024
            && o.grace == Duration::from_millis(50)
            && o.recycle_after == 7));
    }

    #[test]
    fn a_workers_stderr_line_cannot_steer_the_terminal_or_forge_a_log_line() {
        assert_eq!(
            shown_line(b"\x1b[2Jcleared\rforged: ok\tand a tab"),
            "\\u{1b}[2Jcleared\\rforged: ok\tand a tab"
        );
        assert_eq!(shown_line(b"bad \xff byte"), "bad \u{fffd} byte");
    }

    #[test]
    fn signals_are_named() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            describe_status(ExitStatus::from_raw(11)),
            "was killed by SIGSEGV (signal 11)"
        );
        assert_eq!(
            describe_status(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
    }
}
