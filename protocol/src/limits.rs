//! Every numeric limit of the sandbox package system, in one place.
//!
//! Each constant is the value NodeTool enforces; where a manifest may ask for less (the WASM
//! budgets), the constant is both the default and the ceiling. A limit a caller passes around is
//! one of these values, never a silent default chosen elsewhere.

/// Bytes allowed in one authored JavaScript file of a pack (public entry or internal helper).
pub const AUTHORED_JS_BYTES: u64 = 256 * 1024;
/// Bytes allowed in one compiled npm bundle.
pub const NPM_BUNDLE_BYTES: u64 = 1024 * 1024;
/// Bytes allowed in one WASM binary.
pub const WASM_BYTES: u64 = 4 * 1024 * 1024;
/// Bytes allowed across every sandbox file of one pack (JS, WASM, compiled bundles).
pub const PACK_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes allowed in a pack's SKILL.md.
pub const SKILL_BYTES: u64 = 16 * 1024;
/// Bytes of `package.json` discovery reads before giving up on a pack. Not a reference limit:
/// it exists so a hostile manifest cannot make discovery allocate without bound.
pub const PACKAGE_JSON_BYTES: u64 = 1024 * 1024;

/// Characters of a module description in a summary or the one-line prompt tier.
pub const MAX_DESCRIPTION_CHARS: usize = 160;

/// The host's hard ceiling on a WASM memory's maximum, in 64 KiB pages (256 MiB).
pub const WASM_MAX_MEMORY_PAGES: u32 = 4096;
/// Parameters a scalar WASM export may take.
pub const WASM_MAX_ARITY: usize = 8;
/// Results a scalar WASM export may return.
pub const WASM_MAX_RESULTS: usize = 1;

/// The WASM budgets. Each value is the default and the ceiling: a manifest's `limits` may lower
/// the per-invocation ones and is rejected if it tries to raise them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WasmBudgets {
    /// Calls executing at once in the whole process. Not manifest-configurable.
    pub worker_pool_size: u32,
    /// Calls in flight at once per invocation; others queue.
    pub call_concurrency: u32,
    /// Calls per invocation.
    pub calls_per_invocation: u32,
    /// Aggregate WASM wall clock per invocation, in milliseconds.
    pub wall_clock_ms: u64,
    /// Wall clock for a single call, in milliseconds.
    pub call_timeout_ms: u64,
}

/// The budgets NodeTool grants when no manifest lowers them.
pub const WASM_BUDGETS: WasmBudgets = WasmBudgets {
    worker_pool_size: 4,
    call_concurrency: 2,
    calls_per_invocation: 256,
    wall_clock_ms: 30_000,
    call_timeout_ms: 5_000,
};

/// Characters a host module accepts in one text argument.
pub const MAX_HOST_INPUT_CHARS: usize = 5 * 1024 * 1024;
/// Bytes a host module accepts in one binary argument.
pub const MAX_HOST_INPUT_BYTES: usize = 10 * 1024 * 1024;
