//! `nodetool-wasm-host`: runs a pack's scalar WASM exports on the host with wasmtime.
//!
//! It will own (spec M4, its own issue): compile once per process keyed by content digest, a
//! fresh store and instance per call with an empty linker, re-validation of the binary against
//! the scalar contract before first use, per-call timeouts, the per-invocation budgets, and the
//! dispatcher implementation behind the generated WASM facades.
//!
//! It must never link an import into a pack's module, and never let state outlive a call.
