//! Sandbox worker processes: every run executes in a process the front end can always stop.
//!
//! A front end's own binary, started with [`WORKER_ARG`], becomes a worker ([`run_if_worker`]):
//! it runs bodies one at a time under a memory ceiling the kernel enforces (`RLIMIT_DATA`),
//! and everything a run computes (QuickJS, host-module calls, WASM compilation and calls,
//! console buffers, the result) happens there. The supervisor ([`WorkerPool`]) owns the clock:
//! at the deadline plus a grace it kills the worker and answers `timeout`, a worker that dies
//! under a run is `sandbox-crashed` (or `memory-limit`), and a replacement takes the slot once
//! it is ready. [`wire`] is the framed protocol between the two.
//!
//! Invariants: a worker serves one run at a time and never outlives its supervisor (it dies
//! with its parent); nothing a worker sends is trusted (every frame is bounded and checked,
//! and a worker that breaks the protocol is killed); a run's answer is never `ok` after its
//! deadline.

mod ask;
mod child;
#[cfg(target_os = "linux")]
mod confine;
mod pool;
pub mod wire;

pub use child::{MEMORY_ARG, WORKER_ARG, run_if_worker};
pub use pool::{
    ALLOW_UNCONFINED_ENV, PoolRun, WorkerCounts, WorkerOptions, WorkerPool, WorkerStartError,
    artifact_dir, options_from_flags,
};
