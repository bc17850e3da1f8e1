//! Host modules against inputs whose values fan out: a few KiB that name one large value from
//! many places. What a call makes is charged against its result budget before it is made, so
//! such an input is a clean dispatch error, not a copy the size of the fan-out (20 GB, then an
//! aborted process).

use std::io::{Cursor, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_host_modules::HostDispatcher;
use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::{DispatchError, Dispatcher};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

const XLSX: &str = "@nodetool-ai/sandbox-xlsx";
const CSV: &str = "@nodetool-ai/sandbox-csv";

/// A minimal .xlsx whose first `cells` rows each hold, in column A, shared string 0 (which
/// is `shared`).
fn fan_out_workbook(shared: &str, cells: usize) -> Vec<u8> {
    workbook(shared, cells, |_| true)
}

/// A minimal .xlsx, written part by part: one sheet of `rows` rows, each with one cell in
/// column A: shared string 0 (which is `shared`) where `uses_shared(row)`, the row number
/// elsewhere. Rows and cells name no reference (they follow one another), so the sheet's
/// XML is one short run repeated and deflates to almost nothing.
fn workbook(shared: &str, rows: usize, uses_shared: impl Fn(usize) -> bool) -> Vec<u8> {
    let main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
    let rels = "http://schemas.openxmlformats.org/package/2006/relationships";
    let office = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
    let cells = rows;
    let mut rows = String::new();
    for row in 1..=cells {
        let cell = if uses_shared(row) {
            "<c t=\"s\"><v>0</v></c>".to_string()
        } else {
            format!("<c><v>{row}</v></c>")
        };
        rows.push_str(&format!("<row>{cell}</row>"));
    }
    let parts = [
        (
            "[Content_Types].xml",
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
             <Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
             <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
             <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
             <Override PartName=\"/xl/workbook.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml\"/>\
             <Override PartName=\"/xl/worksheets/sheet1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml\"/>\
             <Override PartName=\"/xl/sharedStrings.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml\"/>\
             </Types>"
                .to_string(),
        ),
        (
            "_rels/.rels",
            format!(
                "<Relationships xmlns=\"{rels}\">\
                 <Relationship Id=\"rId1\" Type=\"{office}/officeDocument\" Target=\"xl/workbook.xml\"/>\
                 </Relationships>"
            ),
        ),
        (
            "xl/workbook.xml",
            format!(
                "<workbook xmlns=\"{main}\" xmlns:r=\"{office}\">\
                 <sheets><sheet name=\"Sheet1\" sheetId=\"1\" r:id=\"rId1\"/></sheets>\
                 </workbook>"
            ),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            format!(
                "<Relationships xmlns=\"{rels}\">\
                 <Relationship Id=\"rId1\" Type=\"{office}/worksheet\" Target=\"worksheets/sheet1.xml\"/>\
                 <Relationship Id=\"rId2\" Type=\"{office}/sharedStrings\" Target=\"sharedStrings.xml\"/>\
                 </Relationships>"
            ),
        ),
        (
            "xl/sharedStrings.xml",
            format!(
                "<sst xmlns=\"{main}\" count=\"{cells}\" uniqueCount=\"1\"><si><t>{shared}</t></si></sst>"
            ),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!("<worksheet xmlns=\"{main}\"><sheetData>{rows}</sheetData></worksheet>"),
        ),
    ];
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, text) in parts {
        writer
            .start_file(name, options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        writer
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    writer
        .finish()
        .unwrap_or_else(|e| panic!("zip: {e}"))
        .into_inner()
}

fn host_module(specifier: &str, id: &str) -> ResolvedModule {
    ResolvedModule {
        specifier: specifier.into(),
        pack_name: specifier.into(),
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: format!("host:{id}"),
        graph: vec![],
        kind: ResolvedKind::Host { host_id: id.into() },
    }
}

fn resolution() -> Resolution {
    Resolution {
        modules: vec![host_module(XLSX, "xlsx"), host_module(CSV, "csv")],
        statuses: vec![],
    }
}

fn dispatcher() -> Arc<HostDispatcher> {
    HostDispatcher::for_resolution(&resolution())
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no host dispatcher"))
}

/// Waits for a dispatcher call (each runs on a thread of its own).
fn answer(call: nodetool_runtime::dispatch::DispatchFuture) -> Result<Value, DispatchError> {
    let mut call = call;
    let waker = std::task::Waker::noop();
    loop {
        if let std::task::Poll::Ready(answer) = call
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
        {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn parse(bytes: Vec<u8>, header: bool) -> Result<Value, DispatchError> {
    let options = Value::Object(vec![("header".into(), Value::Bool(header))]);
    answer(dispatcher().call(
        XLSX,
        "parse",
        vec![Value::Bytes(bytes), options],
        Instant::now() + Duration::from_secs(60),
    ))
}

/// A parse's answer for the one sheet.
fn sheet(rows: Vec<Value>) -> Value {
    Value::Object(vec![("Sheet1".into(), Value::Array(rows))])
}

const BUDGET_MESSAGE: &str = "xlsx.parse: the workbook's values come to more than the 67108864 bytes one parse may return (a shared string counts once for every cell that uses it)";

#[test]
fn one_shared_string_in_twenty_thousand_cells_is_refused_by_the_value_budget() {
    // The same workbook, small: it is well formed, and a shared string fills every cell.
    let small = parse(fan_out_workbook("abc", 3), false);
    let row = Value::Array(vec![Value::String("abc".into())]);
    assert_eq!(small, Ok(sheet(vec![row.clone(), row.clone(), row])));

    let shared = "x".repeat(1024 * 1024);
    let bytes = fan_out_workbook(&shared, 20_000);
    assert!(bytes.len() < 8 * 1024, "{} bytes", bytes.len());
    for header in [false, true] {
        let started = Instant::now();
        let e = parse(bytes.clone(), header).err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some(BUDGET_MESSAGE), "header: {header}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "header: {header}"
        );
    }
}

/// As the key of every record, one header cell's string is copied once per row.
#[test]
fn a_huge_header_key_copied_into_every_record_is_refused_by_the_value_budget() {
    // Row 1 holds the string (the key); every later row a number.
    let records = |shared: &str, rows| parse(workbook(shared, rows, |row| row == 1), true);
    let record = Value::Object(vec![("k".into(), Value::Number(2.0))]);
    assert_eq!(records("k", 2), Ok(sheet(vec![record])));
    let e = records(&"k".repeat(1024 * 1024), 20_000)
        .err()
        .map(|e| e.message);
    assert_eq!(e.as_deref(), Some(BUDGET_MESSAGE));
}

/// What a body sees: a host-module error it can catch, and the run goes on.
#[test]
fn the_guest_sees_a_host_module_error_naming_the_budget() {
    let bytes = fan_out_workbook(&"x".repeat(1024 * 1024), 20_000);
    let resolution = resolution();
    let inputs = Value::Object(vec![("book".into(), Value::Bytes(bytes))]);
    let run = |code: &str| {
        Sandbox::new().run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &inputs,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers {
                host: Some(dispatcher()),
                wasm: None,
            },
            cancel: None,
        })
    };
    let outcome = run(&format!(
        "import {{ parse }} from '{XLSX}';\nawait parse(inputs.book, {{ header: false }});"
    ));
    let e = outcome.result.err();
    assert_eq!(
        e.as_ref().map(|e| e.code),
        Some(RunErrorCode::HostModuleError)
    );
    assert_eq!(
        e.map(|e| e.message),
        Some(format!("Error: {BUDGET_MESSAGE}"))
    );
    let outcome = run(&format!(
        "import {{ parse }} from '{XLSX}';\ntry {{ await parse(inputs.book) }} catch (e) {{ return e.message }}"
    ));
    assert_eq!(outcome.result, Ok(Value::String(BUDGET_MESSAGE.into())));
}

/// `csv.parse` answers the guest packed, each header name stored once; as values (the answer
/// `Dispatcher::call` gives, for the server's host-call route) every record holds its own copy,
/// so a 1 MiB header name over two million one-byte rows asked for 2 TB.
#[test]
fn a_long_csv_header_repeated_in_every_record_is_refused_as_values_not_packed() {
    let text = format!("{}\n{}", "h".repeat(1024 * 1024), "x\n".repeat(100));
    let e = answer(dispatcher().call(
        CSV,
        "parse",
        vec![Value::String(text.clone())],
        Instant::now() + Duration::from_secs(60),
    ))
    .err()
    .map(|e| e.message);
    assert_eq!(
        e.as_deref(),
        Some(
            "csv.parse: the records come to more than the 67108864 bytes one parse may return (every record repeats the header's names)"
        )
    );
    let small = answer(dispatcher().call(
        CSV,
        "parse",
        vec![Value::String("h\nx\ny".into())],
        Instant::now() + Duration::from_secs(60),
    ));
    let record = |v: &str| Value::Object(vec![("h".into(), Value::String(v.into()))]);
    assert_eq!(small, Ok(Value::Array(vec![record("x"), record("y")])));

    // Packed for the guest, the records share the one name.
    let resolution = resolution();
    let inputs = Value::Object(vec![("text".into(), Value::String(text))]);
    let outcome = Sandbox::new().run(RunRequest {
        code: &format!(
            "import {{ parse }} from '{CSV}';\nconst rows = await parse(inputs.text);\nreturn [rows.length, Object.keys(rows[99])[0].length];"
        ),
        resolution: &resolution,
        inputs: &inputs,
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers {
            host: Some(dispatcher()),
            wasm: None,
        },
        cancel: None,
    });
    assert_eq!(
        outcome.result,
        Ok(Value::Array(vec![
            Value::Number(100.0),
            Value::Number(1024.0 * 1024.0)
        ]))
    );
}
