//! The shipped host packs used the way a Code node uses them: discovered from `packs/`,
//! imported by the body, called through the generated facades and the host dispatcher, with
//! results and errors arriving in the guest as JavaScript values.

mod shipped_guest;

use std::io::Write;

use nodetool_guest::RunLimits;
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use shipped_guest::{run, run_limited};

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

fn text_input(text: &str) -> Value {
    Value::Object(vec![("text".into(), Value::String(text.into()))])
}

/// A CSV with repeated and unique columns, quoted fields, non-ASCII text, short rows, fields
/// past the header, empty lines, and headers that are duplicated or special.
fn varied_csv(rows: usize) -> String {
    let mut text = String::from("id,city,__proto__,constructor,note,city,__parsed_extra,flag\n");
    for i in 0..rows {
        let city = ["Berlin", "Zürich", "São Paulo", "東京", ""][i % 5];
        let note = if i % 7 == 0 {
            format!("\"quoted, {i} \"\"x\"\"\nline\"")
        } else {
            format!("n{i}")
        };
        let line = match i % 50 {
            0 => format!("{i},{city}"),
            1 => format!("{i},{city},p,c,{note},{city},e1,{},x1,x2", i % 2 == 0),
            2 => String::new(),
            _ => format!("{i},{city},p{},c,{note},{city}!,e,{}", i % 3, i % 2 == 0),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[test]
fn csv_records_in_the_guest_are_the_host_values() {
    // More rows than a column's sharing trial, so columns go plain and stay shared alike.
    let text = varied_csv(10_000);
    let host = nodetool_host_modules::implementation("csv", "parse")
        .unwrap_or_else(|| panic!("csv.parse"));
    for options in ["{}", "{ header: false }"] {
        let header = options == "{}";
        let args = [
            Value::String(text.clone()),
            Value::Object(vec![("header".into(), Value::Bool(header))]),
        ];
        let expected = host(&args).unwrap_or_else(|e| panic!("{e}"));
        let code = format!(
            "import {{ parse }} from '@nodetool-ai/sandbox-csv'; return await parse(inputs.text, {options});"
        );
        let got = run(&code, text_input(&text)).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            got == expected,
            "{options}: the guest's records differ from the host's"
        );
    }
}

#[test]
fn csv_records_are_plain_objects_defined_not_assigned() {
    let out = json(
        "import { parse } from '@nodetool-ai/sandbox-csv';\n\
         let hit = 0;\n\
         Object.defineProperty(Object.prototype, 'name', { set() { hit++; }, get() { return 'inherited'; }, configurable: true });\n\
         const rows = await parse('name,__proto__,0,constructor\\nAda,p,z,c\\nBob,q,y,d\\n');\n\
         delete Object.prototype.name;\n\
         const [a, b] = rows;\n\
         return [hit, a.name, b.name, Object.keys(a), Object.getPrototypeOf(a) === Object.prototype,\n\
           Object.prototype.hasOwnProperty.call(a, '__proto__'), a.__proto__, a['0'], b.constructor,\n\
           Object.getOwnPropertyDescriptor(a, 'name'), Object.isFrozen(a), Array.isArray(rows)];",
    );
    assert_eq!(
        out,
        serde_json::json!([
            0, "Ada", "Bob", ["0", "name", "__proto__", "constructor"], true, true, "p", "z", "d",
            { "value": "Ada", "writable": true, "enumerable": true, "configurable": true },
            false, true
        ])
    );
}

#[test]
fn array_items_are_defined_so_no_planted_index_setter_runs_during_a_conversion() {
    // An index setter on Array.prototype (and on Object.prototype) would, if items were
    // assigned, run with the half-built result array as `this` and could rewrite it.
    let out = json(
        "import { parse as csv } from '@nodetool-ai/sandbox-csv';\n\
         import { parse as xml } from '@nodetool-ai/sandbox-xml';\n\
         let hits = 0;\n\
         for (const proto of [Array.prototype, Object.prototype]) {\n\
           for (const i of ['0', '1', '2']) {\n\
             Object.defineProperty(proto, i, { set() { hits++; }, get() { return 'planted'; }, configurable: true });\n\
           }\n\
         }\n\
         const rows = await csv('a,b\\n1,2\\n3,4\\n', { header: false });\n\
         const tree = await xml('<a><b>1</b><b>2</b><b>3</b></a>');\n\
         for (const proto of [Array.prototype, Object.prototype]) for (const i of ['0', '1', '2']) delete proto[i];\n\
         return [hits, rows, tree];",
    );
    assert_eq!(
        out,
        serde_json::json!([0, [["a", "b"], ["1", "2"], ["3", "4"]], { "a": { "b": ["1", "2", "3"] } }])
    );
}

#[test]
fn xml_trees_in_the_guest_are_the_host_values() {
    let mut doc = String::from("<?xml version=\"1.0\"?>\n<catalog kind=\"test\">");
    for i in 0..3_000 {
        doc.push_str(&format!(
            "<item id=\"{i}\" available=\"{}\"><name>n{} &amp; m</name><price currency=\"EUR\">{i}.5</price>\
             <tags><tag>a</tag><tag>b{}</tag></tags><![CDATA[raw <{i}>]]>text</item>",
            i % 2 == 0,
            i % 10,
            i % 3
        ));
    }
    doc.push_str("<empty/></catalog>");
    let expected = nodetool_host_modules::implementation("xml", "parse")
        .unwrap_or_else(|| panic!("xml.parse"))(&[Value::String(doc.clone())])
    .unwrap_or_else(|e| panic!("{e}"));
    let got = run(
        "import { parse } from '@nodetool-ai/sandbox-xml'; return await parse(inputs.text);",
        text_input(&doc),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(got == expected, "the guest's tree differs from the host's");
}

#[test]
fn a_result_past_the_memory_limit_is_an_error_not_a_crash() {
    let text = varied_csv(40_000);
    let limits = RunLimits {
        memory_bytes: 12 * 1024 * 1024,
        ..RunLimits::STANDARD
    };
    let out = run_limited(
        "import { parse } from '@nodetool-ai/sandbox-csv'; const rows = await parse(inputs.text); return rows.length;",
        text_input(&text),
        limits,
    );
    let error = out.err().unwrap_or_else(|| panic!("the result fit"));
    assert_eq!(error.code, RunErrorCode::HostModuleError);
    assert!(
        error
            .message
            .contains("the result could not cross into the sandbox"),
        "{}",
        error.message
    );
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
