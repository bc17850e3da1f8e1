//! Generated facade sources for host and WASM modules.
//!
//! A facade is the ESM text a host or WASM specifier resolves to: one async export per allowed
//! export, each forwarding to the run's dispatcher through a private bridge specifier that only
//! facades may import. The text is pure data: it joins the module digest together with its
//! version, so a generator change shows up as drift rather than silently running other code.

use crate::manifest::WasmExport;

/// Version of the host facade generator; part of every host module's digest.
pub const HOST_FACADE_VERSION: u32 = 2;
/// Version of the WASM facade generator; part of every WASM module's digest.
pub const WASM_FACADE_VERSION: u32 = 1;
/// The private specifier host facades import their dispatcher bridge from.
pub const HOST_BRIDGE_SPECIFIER: &str = "nodetool:host-bridge";
/// The private specifier WASM facades import their dispatcher bridge from.
pub const WASM_BRIDGE_SPECIFIER: &str = "nodetool:wasm-bridge";

fn js_string(s: &str) -> String {
    // serde_json's string encoding is valid JavaScript string-literal syntax (it escapes
    // quotes, backslashes and control characters, and U+2028/9 are legal in ES2019 strings).
    serde_json::Value::String(s.to_string()).to_string()
}

/// The facade for a host module: one async export per registry export plus a default namespace
/// object, so both `import { parse } from "…"` and `import csv from "…"` work.
///
/// `exports` must be identifiers (the registry's are, by test).
pub fn host_facade_source(module_key: &str, exports: &[&str]) -> String {
    let key = js_string(module_key);
    let mut out = format!(
        "import {{ __call }} from {};\n",
        js_string(HOST_BRIDGE_SPECIFIER)
    );
    for name in exports {
        out.push_str(&format!(
            "export async function {name}(...args) {{ return __call({key}, {}, args); }}\n",
            js_string(name)
        ));
    }
    out.push_str(&format!("export default {{ {} }};\n", exports.join(", ")));
    out
}

/// The facade for a WASM module: one async export per manifest export under its `as` name. No
/// default export and no instance or memory: the guest sees functions of scalars only.
///
/// `exports` must have identifier `as` names (the manifest validation guarantees it).
pub fn wasm_facade_source(module_key: &str, exports: &[WasmExport]) -> String {
    let key = js_string(module_key);
    let mut out = format!(
        "import {{ __call }} from {};\n",
        js_string(WASM_BRIDGE_SPECIFIER)
    );
    for export in exports {
        out.push_str(&format!(
            "export async function {}(...args) {{ return __call({key}, {}, args); }}\n",
            export.as_name,
            js_string(&export.as_name)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facade_shape() {
        let src = host_facade_source("@nodetool-ai/sandbox-csv", &["parse", "stringify"]);
        assert_eq!(
            src,
            "import { __call } from \"nodetool:host-bridge\";\n\
             export async function parse(...args) { return __call(\"@nodetool-ai/sandbox-csv\", \"parse\", args); }\n\
             export async function stringify(...args) { return __call(\"@nodetool-ai/sandbox-csv\", \"stringify\", args); }\n\
             export default { parse, stringify };\n"
        );
    }

    #[test]
    fn wasm_facade_uses_aliases_and_has_no_default() {
        let src = wasm_facade_source(
            "@acme/ref/scalar",
            &[WasmExport {
                wasm: "sum-f32".into(),
                as_name: "sumF32".into(),
            }],
        );
        assert!(src.contains("export async function sumF32(...args) { return __call(\"@acme/ref/scalar\", \"sumF32\", args); }"));
        assert!(!src.contains("export default"));
        assert!(src.starts_with("import { __call } from \"nodetool:wasm-bridge\";"));
    }

    #[test]
    fn module_keys_are_escaped() {
        let src = host_facade_source("a\"b\\c\u{2028}", &["x"]);
        assert!(src.contains(r#""a\"b\\c"#), "{src}");
    }
}
