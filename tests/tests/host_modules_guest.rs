//! The shipped host packs used the way a Code node uses them: discovered from `packs/`,
//! imported by the body, called through the generated facades and the host dispatcher, with
//! results and errors arriving in the guest as JavaScript values.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox, body_imports};
use nodetool_host_modules::HostDispatcher;
use nodetool_protocol::catalog::Declaration;
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

fn run(code: &str, inputs: Value) -> Result<Value, RunError> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
    let roots = [SearchRoot {
        path: shipped,
        kind: RootKind::Shipped,
        label: "shipped".into(),
    }];
    let trusted = BTreeSet::new();
    let catalog = discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    );
    let imports = body_imports(code).unwrap_or_default();
    let declarations: Vec<Declaration> = imports
        .into_iter()
        .map(|i| Declaration::of(i.specifier))
        .collect();
    let resolution = catalog.resolve_for_execution(&declarations);
    let host = HostDispatcher::for_resolution(&resolution)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .map(|d| d as Arc<dyn nodetool_runtime::dispatch::Dispatcher>);
    Sandbox::new()
        .run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &inputs,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers { host, wasm: None },
            cancel: None,
        })
        .result
}

fn ok(code: &str) -> Value {
    run(code, Value::Null).unwrap_or_else(|e| panic!("{e}"))
}

fn json(code: &str) -> serde_json::Value {
    ok(code).to_json()
}

/// The message a body caught (the body returns `e.message`).
fn caught(code: &str, inputs: Value) -> String {
    match run(code, inputs) {
        Ok(Value::String(s)) => s,
        other => panic!("expected a caught message, got {other:?}"),
    }
}

#[test]
fn csv_round_trips_with_named_and_default_imports() {
    let out = json(
        "import Papa, { parse, stringify } from '@nodetool-ai/sandbox-csv';\n\
         const text = await stringify([{ a: '1', b: 'x,y' }, { a: '2', b: 'q\"r' }]);\n\
         return [await parse(text), (await Papa.parse('a;b\\n1;2', { header: false })), Papa.parse === parse];",
    );
    assert_eq!(
        out,
        serde_json::json!([[{ "a": "1", "b": "x,y" }, { "a": "2", "b": "q\"r" }], [["a", "b"], ["1", "2"]], true])
    );
    let message = caught(
        "import { parse } from '@nodetool-ai/sandbox-csv'; try { await parse('a', { delimiter: ';;' }) } catch (e) { return e.message }",
        Value::Null,
    );
    assert_eq!(message, "csv.parse: delimiter must be a single character");
}

#[test]
fn the_text_cap_is_enforced_by_one() {
    let code = "import { parse } from '@nodetool-ai/sandbox-csv'; try { await parse(inputs.text); return 'parsed' } catch (e) { return e.message }";
    let over = Value::Object(vec![(
        "text".into(),
        Value::String("a".repeat(5 * 1024 * 1024 + 1)),
    )]);
    assert_eq!(
        caught(code, over),
        "csv.parse: input exceeds the 5242880 character limit"
    );
}

#[test]
fn xml_keeps_leaves_as_strings() {
    let out = json(
        "import { parse } from '@nodetool-ai/sandbox-xml'; return await parse('<r><id kind=\"n\">007</id><id>8</id></r>');",
    );
    assert_eq!(out["r"]["id"][0]["#text"], "007");
    assert_eq!(out["r"]["id"][0]["@_kind"], "n");
    assert_eq!(out["r"]["id"][1], "8");
    let message = caught(
        "import { parse } from '@nodetool-ai/sandbox-xml'; try { await parse('<a><b></a>') } catch (e) { return e.message }",
        Value::Null,
    );
    assert!(message.starts_with("xml.parse: invalid XML ("), "{message}");
}

#[test]
fn xlsx_write_then_parse_in_the_guest() {
    let out = json(
        "import { write, parse } from '@nodetool-ai/sandbox-xlsx';\n\
         const bytes = await write({ People: [{ name: 'Ada', age: 36 }, { name: 'Alan', age: 41 }] }, { styles: undefined });\n\
         const sheets = await parse(bytes);\n\
         let missing; try { await parse(bytes, { sheet: 'Nope' }) } catch (e) { missing = e.message }\n\
         return [bytes instanceof Uint8Array, sheets, missing];",
    );
    assert_eq!(out[0], true);
    assert_eq!(
        out[1],
        serde_json::json!({ "People": [{ "name": "Ada", "age": 36 }, { "name": "Alan", "age": 41 }] })
    );
    assert_eq!(
        out[2],
        "xlsx.parse: no sheet named \"Nope\". Sheets: People"
    );
    let many = caught(
        "import { write } from '@nodetool-ai/sandbox-xlsx'; const sheets = {}; for (let i = 0; i < 65; i++) sheets['s' + i] = [{ a: 1 }]; try { await write(sheets) } catch (e) { return e.message }",
        Value::Null,
    );
    assert_eq!(many, "xlsx.write: 65 sheets exceeds the 64 sheet limit");
}

fn bomb(entries: usize) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut writer = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let zeros = vec![0u8; 1024 * 1024];
    for i in 0..entries {
        writer
            .start_file(format!("z{i}"), options)
            .unwrap_or_else(|e| panic!("{e}"));
        writer.write_all(&zeros).unwrap_or_else(|e| panic!("{e}"));
    }
    writer.finish().unwrap_or_else(|e| panic!("{e}"));
    out.into_inner()
}

#[test]
fn zip_round_trips_and_a_bomb_is_stopped() {
    let out = json(
        "import { zip, unzip } from '@nodetool-ai/sandbox-zip';\n\
         const archive = await zip({ 'a.txt': 'hello', 'b.bin': new Uint8Array([1, 2, 3]) });\n\
         const files = await unzip(archive);\n\
         return [Object.keys(files), Array.from(files['b.bin']), files['a.txt'].length];",
    );
    assert_eq!(out, serde_json::json!([["a.txt", "b.bin"], [1, 2, 3], 5]));
    let code = "import { unzip } from '@nodetool-ai/sandbox-zip'; try { await unzip(inputs.archive); return 'inflated' } catch (e) { return e.message }";
    let inputs = Value::Object(vec![("archive".into(), Value::Bytes(bomb(120)))]);
    assert_eq!(
        caught(code, inputs),
        "zip.unzip: archive inflates past the 52428800 byte limit"
    );
}

#[test]
fn diff_produces_a_unified_patch() {
    let out = ok(
        "import { unified } from '@nodetool-ai/sandbox-diff'; return await unified('a\\nb\\n', 'a\\nc\\n', { oldName: 'x', newName: 'y', context: 1e9 });",
    );
    assert_eq!(
        out,
        Value::String("--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n".into())
    );
}

#[test]
fn an_uncaught_host_error_is_a_host_module_error() {
    let e = run(
        "import { parse } from '@nodetool-ai/sandbox-xml';\nawait parse(42);",
        Value::Null,
    )
    .err()
    .unwrap_or_else(|| panic!("ran"));
    assert_eq!(e.code, RunErrorCode::HostModuleError);
    assert_eq!(e.message, "Error: xml.parse: text must be a string");
    assert_eq!(e.line, Some(2));
}
