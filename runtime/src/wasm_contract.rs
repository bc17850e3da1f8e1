//! Section-level checks of a WASM binary against the scalar contract, before anything compiles
//! it: a valid binary, no imports, bounded unshared memories, and declared exports that are
//! functions over i32/f32/f64 with at most 8 parameters and 1 result.
//!
//! Discovery runs these checks on every pack's binaries; the WASM host runs them again before
//! first use, because a resolution can come from a catalog this process did not build. One
//! implementation serves both, so they can never disagree.

use std::collections::HashMap;

use nodetool_protocol::catalog::StatusCode;
use nodetool_protocol::limits::{WASM_MAX_ARITY, WASM_MAX_MEMORY_PAGES, WASM_MAX_RESULTS};
use nodetool_protocol::manifest::WasmContract;
use wasmparser::{CompositeInnerType, ExternalKind, FuncType, Parser, Payload, ValType, Validator};

/// A broken rule of the scalar WASM contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmError {
    /// The stable code (`wasm-invalid`, `wasm-imports`, `wasm-memory`, `wasm-export`).
    pub code: StatusCode,
    /// The rule, in words.
    pub message: String,
}

fn error(code: StatusCode, message: impl Into<String>) -> WasmError {
    WasmError {
        code,
        message: message.into(),
    }
}

/// Checks `bytes` against `contract`; every broken rule is reported.
pub fn check_wasm(bytes: &[u8], contract: &WasmContract) -> Result<(), Vec<WasmError>> {
    if let Err(e) = Validator::new().validate_all(bytes) {
        return Err(vec![error(
            StatusCode::WasmInvalid,
            format!(
                "invalid WASM binary: {} (at byte {})",
                first_line(e.message()),
                e.offset()
            ),
        )]);
    }
    let mut errors = Vec::new();
    let mut types: Vec<Option<FuncType>> = Vec::new();
    let mut function_types: Vec<u32> = Vec::new();
    let mut exports: HashMap<String, (ExternalKind, u32)> = HashMap::new();
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = match payload {
            Ok(p) => p,
            Err(e) => {
                return Err(vec![error(
                    StatusCode::WasmInvalid,
                    format!("invalid WASM binary: {}", first_line(e.message())),
                )]);
            }
        };
        let read = |e: wasmparser::BinaryReaderError| {
            error(
                StatusCode::WasmInvalid,
                format!("invalid WASM binary: {}", first_line(e.message())),
            )
        };
        match payload {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for sub in group.map_err(|e| vec![read(e)])?.into_types() {
                        types.push(match sub.composite_type.inner {
                            CompositeInnerType::Func(f) => Some(f),
                            _ => None,
                        });
                    }
                }
            }
            Payload::ImportSection(reader) => {
                let first = reader
                    .clone()
                    .into_iter()
                    .next()
                    .and_then(Result::ok)
                    .map(|imports| match imports {
                        wasmparser::Imports::Single(_, i) => format!("{}.{}", i.module, i.name),
                        wasmparser::Imports::Compact1 { module, .. }
                        | wasmparser::Imports::Compact2 { module, .. } => module.to_string(),
                    });
                if reader.count() > 0 {
                    let what = first
                        .map(|f| format!(" (it imports {f})"))
                        .unwrap_or_default();
                    errors.push(error(
                        StatusCode::WasmImports,
                        format!("WASM imports are not allowed{what}"),
                    ));
                }
            }
            Payload::FunctionSection(reader) => {
                for ty in reader {
                    function_types.push(ty.map_err(|e| vec![read(e)])?);
                }
            }
            Payload::MemorySection(reader) => {
                for (index, memory) in reader.into_iter().enumerate() {
                    let m = memory.map_err(|e| vec![read(e)])?;
                    let rule = if m.shared {
                        Some("is shared; every WASM memory must be unshared".to_string())
                    } else if m.memory64 {
                        Some(
                            "is a 64-bit memory, which the scalar contract does not allow"
                                .to_string(),
                        )
                    } else if m.page_size_log2.is_some_and(|p| p != 16) {
                        Some(
                            "uses a custom page size, which the scalar contract does not allow"
                                .to_string(),
                        )
                    } else {
                        match m.maximum {
                            None => Some(
                                "declares no maximum; every WASM memory must declare one"
                                    .to_string(),
                            ),
                            Some(max) if max < m.initial => {
                                Some(format!("has maximum {max} below its minimum {}", m.initial))
                            }
                            Some(max)
                                if max > u64::from(contract.memory_pages_max)
                                    || max > u64::from(WASM_MAX_MEMORY_PAGES) =>
                            {
                                Some(format!(
                                    "has maximum {max} pages, above the manifest's memoryPagesMax {} (host ceiling {WASM_MAX_MEMORY_PAGES})",
                                    contract.memory_pages_max
                                ))
                            }
                            Some(_) => None,
                        }
                    };
                    if let Some(rule) = rule {
                        errors.push(error(
                            StatusCode::WasmMemory,
                            format!("memory {index} {rule}"),
                        ));
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let e = export.map_err(|e| vec![read(e)])?;
                    exports.insert(e.name.to_string(), (e.kind, e.index));
                }
            }
            _ => {}
        }
    }

    // Imported functions would come first in the function index space; a module with imports
    // is refused already, so its exports are not checked against a shifted index.
    let has_imports = errors.iter().any(|e| e.code == StatusCode::WasmImports);
    for export in contract.exports.iter().filter(|_| !has_imports) {
        let name = &export.wasm;
        let rule = match exports.get(name) {
            None => Some("is missing from the binary".to_string()),
            Some((ExternalKind::Func | ExternalKind::FuncExact, index)) => {
                // No imports are allowed, so function index n is the n-th defined function.
                let ty = usize::try_from(*index)
                    .ok()
                    .and_then(|i| function_types.get(i))
                    .and_then(|t| types.get(usize::try_from(*t).ok()?))
                    .and_then(Option::as_ref);
                match ty {
                    None => Some("has no signature in the binary".to_string()),
                    Some(f) => signature_violation(f),
                }
            }
            Some((kind, _)) => Some(format!("is a {}, not a function", kind_name(*kind))),
        };
        if let Some(rule) = rule {
            errors.push(error(
                StatusCode::WasmExport,
                format!("export {name} {rule}"),
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// wasmparser's messages can carry a multi-line dump after their first line; a status keeps
/// the sentence only.
fn first_line(message: &str) -> &str {
    let line = message.lines().next().unwrap_or(message);
    line.split(" - expected=")
        .next()
        .unwrap_or(line)
        .trim_end_matches(':')
}

fn kind_name(kind: ExternalKind) -> &'static str {
    match kind {
        ExternalKind::Func | ExternalKind::FuncExact => "function",
        ExternalKind::Table => "table",
        ExternalKind::Memory => "memory",
        ExternalKind::Global => "global",
        ExternalKind::Tag => "tag",
    }
}

fn signature_violation(f: &FuncType) -> Option<String> {
    if f.params().len() > WASM_MAX_ARITY {
        return Some(format!(
            "takes {} parameters, above the {WASM_MAX_ARITY} the scalar contract allows",
            f.params().len()
        ));
    }
    if f.results().len() > WASM_MAX_RESULTS {
        return Some(format!(
            "returns {} values (multi-value), and the scalar contract allows at most one",
            f.results().len()
        ));
    }
    for (i, p) in f.params().iter().enumerate() {
        if let Some(why) = type_violation(*p) {
            return Some(format!("takes parameter {} that {why}", i + 1));
        }
    }
    f.results()
        .iter()
        .find_map(|r| type_violation(*r))
        .map(|why| format!("returns a value that {why}"))
}

fn type_violation(t: ValType) -> Option<String> {
    match t {
        ValType::I32 | ValType::F32 | ValType::F64 => None,
        ValType::I64 => Some("uses i64, which maps to bigint rather than number".into()),
        ValType::V128 => Some("uses v128, a vector type".into()),
        ValType::Ref(r) => Some(format!("uses the reference type {r}")),
    }
}
