//! WASM packs through their scalar facades: a tiny adder module (hand-assembled, so the
//! fixture data needs no assembler) and the fixtures that import it. Both runners run them:
//! the Rust guest with wasm-host's dispatcher ([`super::run_fixture`]), the browser runner with
//! the page's WebAssembly (`cargo xtask fixtures --browser`).

use std::sync::{Arc, OnceLock};

use nodetool_protocol::catalog::{
    Bytes, FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::manifest::{WasmContract, WasmExport};
use nodetool_runtime::dispatch::Dispatcher;
use nodetool_wasm_host::WasmHost;

/// `(module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))`
/// as bytes (a test checks them against the text).
pub const ADDER_WASM: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
    0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type: (i32, i32) -> i32
    0x03, 0x02, 0x01, 0x00, // function 0 has type 0
    0x07, 0x07, 0x01, 0x03, b'a', b'd', b'd', 0x00, 0x00, // export "add" = function 0
    0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a,
    0x0b, // local.get 0 1, i32.add
];

/// ADDER: `@acme/adder` of `@acme/nodetool-adder`, a `wasm` module whose binary export `add`
/// the facade exposes as `add` and as `sum`.
pub fn adder() -> ResolvedModule {
    ResolvedModule {
        specifier: "@acme/adder".into(),
        pack_name: "@acme/nodetool-adder".into(),
        pack_version: Some("1.0.0".into()),
        content_digest: "b".repeat(64),
        module_id: "sandbox/adder.wasm".into(),
        graph: vec![GraphFile {
            id: "sandbox/adder.wasm".into(),
            internal: false,
            dependencies: vec![],
            content: FileContent::Wasm {
                bytes: Bytes(ADDER_WASM.into()),
            },
        }],
        kind: ResolvedKind::Wasm {
            wasm: WasmContract {
                memory_pages_max: 1,
                exports: vec![
                    WasmExport {
                        wasm: "add".into(),
                        as_name: "add".into(),
                    },
                    WasmExport {
                        wasm: "add".into(),
                        as_name: "sum".into(),
                    },
                ],
                limits: None,
            },
        },
    }
}

/// The dispatcher a run of `resolution` needs for its WASM modules (`None` without any): one
/// wasm-host engine for the process, as a front end keeps one.
pub fn dispatcher(resolution: &Resolution) -> Result<Option<Arc<dyn Dispatcher>>, String> {
    static HOST: OnceLock<Result<Arc<WasmHost>, String>> = OnceLock::new();
    if !resolution
        .modules
        .iter()
        .any(|m| matches!(m.kind, ResolvedKind::Wasm { .. }))
    {
        return Ok(None);
    }
    let host = HOST
        .get_or_init(|| WasmHost::new().map_err(|e| e.0))
        .as_ref()
        .map_err(|e| format!("the WASM engine did not start: {e}"))?;
    Ok(host
        .dispatcher_for(resolution)
        .map_err(|e| format!("the WASM dispatcher refused the resolution: {}", e.0))?
        .map(|d| d as Arc<dyn Dispatcher>))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adder_bytes_are_the_text() {
        let text = r#"(module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))"#;
        let assembled = wat::parse_str(text).unwrap_or_default();
        assert_eq!(assembled, ADDER_WASM);
    }
}
