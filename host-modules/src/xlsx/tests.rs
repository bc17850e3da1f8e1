//! The xlsx module's tests: parse and write, round trips, and hostile workbooks.

use std::io::{Cursor, Read};

use nodetool_protocol::value::Value;
use rust_xlsxwriter::{Format, Workbook};

use super::read::{check_archive, iso_from_unix_ms};
use super::write::{Shape, check_shapes, read_sheet_specs};
use super::*;
use crate::error::HostError;
use crate::limits::js_number;

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn n(v: f64) -> Value {
    Value::Number(v)
}

fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn arr(items: &[Value]) -> Value {
    Value::Array(items.to_vec())
}

fn bytes_of(result: Result<Value, HostError>) -> Vec<u8> {
    match result {
        Ok(Value::Bytes(b)) => b,
        other => panic!("expected bytes, got {other:?}"),
    }
}

fn err(result: Result<Value, HostError>) -> String {
    match result {
        Err(e) => e.into_message(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

fn parse_with(bytes: &[u8], options: Value) -> Result<Value, HostError> {
    parse(&[Value::Bytes(bytes.to_vec()), options])
}

#[test]
fn round_trip_header_and_array_modes_across_sheets() {
    let people = arr(&[
        obj(&[
            ("name", s("Ada")),
            ("age", n(36.0)),
            ("admin", Value::Bool(true)),
        ]),
        obj(&[
            ("name", s("Linus")),
            ("age", n(54.5)),
            ("admin", Value::Bool(false)),
            ("team", s("kernel")),
        ]),
        obj(&[("name", s("Grace")), ("age", Value::Null)]),
    ]);
    let sheets = arr(&[
        obj(&[("name", s("People")), ("rows", people)]),
        obj(&[
            ("name", s("Grid")),
            ("header", Value::Bool(false)),
            (
                "rows",
                arr(&[
                    arr(&[n(1.0), s("two"), Value::Bool(true)]),
                    arr(&[Value::Null, n(-3.25)]),
                ]),
            ),
        ]),
        obj(&[
            ("name", s("Nested")),
            (
                "rows",
                arr(&[obj(&[
                    ("data", obj(&[("a", n(1.0))])),
                    ("list", arr(&[n(1.0), n(2.0)])),
                ])]),
            ),
        ]),
    ]);
    let book = bytes_of(write(&[sheets]));

    let parsed = parse_with(&book, Value::Undefined);
    let expected = obj(&[
        (
            "People",
            arr(&[
                obj(&[
                    ("name", s("Ada")),
                    ("age", n(36.0)),
                    ("admin", Value::Bool(true)),
                    ("team", Value::Null),
                ]),
                obj(&[
                    ("name", s("Linus")),
                    ("age", n(54.5)),
                    ("admin", Value::Bool(false)),
                    ("team", s("kernel")),
                ]),
                obj(&[
                    ("name", s("Grace")),
                    ("age", Value::Null),
                    ("admin", Value::Null),
                    ("team", Value::Null),
                ]),
            ]),
        ),
        // Read back with header on: the first row gives keys (numbers stringified).
        (
            "Grid",
            arr(&[obj(&[
                ("1", Value::Null),
                ("two", n(-3.25)),
                ("true", Value::Null),
            ])]),
        ),
        (
            "Nested",
            arr(&[obj(&[("data", s("{\"a\":1}")), ("list", s("[1,2]"))])]),
        ),
    ]);
    assert_eq!(parsed, Ok(expected));

    // One sheet, as arrays.
    let grid = parse_with(
        &book,
        obj(&[("sheet", s("Grid")), ("header", Value::Bool(false))]),
    );
    assert_eq!(
        grid,
        Ok(arr(&[
            arr(&[n(1.0), s("two"), Value::Bool(true)]),
            arr(&[Value::Null, n(-3.25)])
        ]))
    );

    // The {name: rows} shape, explicit column order, and a global header: false.
    let book = bytes_of(write(&[
        obj(&[("Only", arr(&[arr(&[s("a"), s("b")])]))]),
        obj(&[("header", Value::Bool(false))]),
    ]));
    assert_eq!(
        parse_with(&book, obj(&[("header", Value::Bool(false))])),
        Ok(obj(&[("Only", arr(&[arr(&[s("a"), s("b")])]))]))
    );
    let columns = arr(&[obj(&[
        ("name", s("S")),
        ("columns", arr(&[s("b"), s("a")])),
        (
            "rows",
            arr(&[obj(&[("a", n(1.0)), ("b", n(2.0)), ("c", n(3.0))])]),
        ),
    ])]);
    let book = bytes_of(write(&[columns]));
    assert_eq!(
        parse_with(&book, obj(&[("sheet", s("S"))])),
        Ok(arr(&[obj(&[("b", n(2.0)), ("a", n(1.0))])]))
    );
}

#[test]
fn header_cells_that_are_empty_become_col_n() {
    let rows = arr(&[
        arr(&[s("id"), Value::Null, s("")]),
        arr(&[n(1.0), n(2.0), n(3.0)]),
    ]);
    let book = bytes_of(write(&[
        obj(&[("S", rows)]),
        obj(&[("header", Value::Bool(false))]),
    ]));
    let parsed = parse_with(&book, obj(&[("sheet", s("S"))]));
    assert_eq!(
        parsed,
        Ok(arr(&[obj(&[
            ("id", n(1.0)),
            ("col_2", n(2.0)),
            ("col_3", n(3.0))
        ])]))
    );
}

#[test]
fn dates_read_as_iso_strings() {
    let build = || -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
        let mut workbook = Workbook::new();
        let sheet = workbook.add_worksheet();
        let date = Format::new().set_num_format("yyyy-mm-dd hh:mm:ss");
        let day = rust_xlsxwriter::ExcelDateTime::from_ymd(2024, 2, 29)?
            .and_hms_milli(13, 45, 30, 250)?;
        sheet.write_string(0, 0, "when")?;
        sheet.write_datetime_with_format(1, 0, &day, &date)?;
        // A date-formatted number reads as a date too.
        sheet.write_number_with_format(
            2,
            0,
            45000.5,
            &Format::new().set_num_format("d mmm yyyy"),
        )?;
        sheet.write_string(0, 1, "plain")?;
        sheet.write_number(1, 1, 45000.5)?;
        workbook.save_to_buffer()
    };
    let book = build().unwrap_or_else(|e| panic!("fixture: {e}"));
    let parsed = parse_with(&book, obj(&[("sheet", s("Sheet1"))]));
    assert_eq!(
        parsed,
        Ok(arr(&[
            obj(&[
                ("when", s("2024-02-29T13:45:30.250Z")),
                ("plain", n(45000.5))
            ]),
            obj(&[
                ("when", s("2023-03-15T12:00:00.000Z")),
                ("plain", Value::Null)
            ]),
        ]))
    );
}

#[test]
fn formulas_read_their_cached_result_and_errors_their_text() {
    let build = || -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
        let mut workbook = Workbook::new();
        let sheet = workbook.add_worksheet();
        sheet.write_row(0, 0, ["a", "sum", "bad"])?;
        sheet.write_number(1, 0, 2)?;
        sheet.write_formula(
            1,
            1,
            rust_xlsxwriter::Formula::new("=A2*21").set_result("42"),
        )?;
        sheet.write_formula(
            1,
            2,
            rust_xlsxwriter::Formula::new("=1/0").set_result("#DIV/0!"),
        )?;
        workbook.save_to_buffer()
    };
    let book = build().unwrap_or_else(|e| panic!("fixture: {e}"));
    let parsed = parse_with(&book, obj(&[("sheet", s("Sheet1"))]));
    assert_eq!(
        parsed,
        Ok(arr(&[obj(&[
            ("a", n(2.0)),
            ("sum", n(42.0)),
            ("bad", s("#DIV/0!"))
        ])]))
    );
}

#[test]
fn a_formula_without_a_cached_result_reads_as_null() {
    let book = bytes_of(write(&[obj(&[(
        "S",
        arr(&[obj(&[("k", n(2.0)), ("f", n(0.0))])]),
    )])]));
    let sheet = part(&book, "xl/worksheets/sheet1.xml");
    assert!(sheet.contains("<c r=\"B2\"><v>0</v></c>"), "{sheet}");
    // As openpyxl writes a formula it never computed.
    let sheet = sheet.replace(
        "<c r=\"B2\"><v>0</v></c>",
        "<c r=\"B2\"><f>A2*2</f><v></v></c>",
    );
    let book = rebuild(&book, "xl/worksheets/sheet1.xml", sheet.as_bytes());
    assert_eq!(
        parse_with(&book, Value::Undefined),
        Ok(obj(&[(
            "S",
            arr(&[obj(&[("k", n(2.0)), ("f", Value::Null)])])
        )]))
    );
}

#[test]
fn shared_string_references_are_checked_before_calamine_reads_them() {
    let book = bytes_of(write(&[obj(&[("S", arr(&[obj(&[("k", s("v"))])]))])]));
    let sheet = part(&book, "xl/worksheets/sheet1.xml");
    // Index 2 past two strings; a number calamine reads as 0 is fine.
    for (v, ok) in [
        ("2", false),
        ("1", true),
        ("18446744073709551615", false),
        ("18446744073709551616", true),
        ("x", true),
        ("0", true),
    ] {
        let forged = sheet.replace("<v>0</v>", &format!("<v>{v}</v>"));
        let forged = rebuild(&book, "xl/worksheets/sheet1.xml", forged.as_bytes());
        let out = parse_with(&forged, Value::Undefined);
        assert_eq!(out.is_ok(), ok, "{v}: {out:?}");
    }
    // No shared-string part at all, and a cell that names one.
    let strings = part(&book, "xl/sharedStrings.xml");
    let empty = strings.replace("<t>v</t>", "").replace("<t>k</t>", "");
    let forged = rebuild(&book, "xl/sharedStrings.xml", empty.as_bytes());
    assert!(err(parse_with(&forged, Value::Undefined)).contains("malformed"));
}

#[test]
fn styles_apply_and_bad_ranges_fail() {
    let style = |members: &[(&str, Value)]| obj(members);
    let sheet = |styles: Value| {
        arr(&[obj(&[
            ("name", s("Styled")),
            (
                "rows",
                arr(&[obj(&[("price", n(1234.5)), ("item", s("tea"))])]),
            ),
            ("styles", styles),
        ])])
    };
    let ok = write(&[sheet(arr(&[
        style(&[
            ("range", s("A1:B1")),
            ("bold", Value::Bool(true)),
            ("background", s("#FFCC00")),
            ("color", s("80112233")),
        ]),
        style(&[
            ("range", s("a2")),
            ("numberFormat", s("#,##0.00")),
            ("italic", Value::Bool(true)),
            ("size", n(14.0)),
        ]),
        // A styled cell without a value.
        style(&[("range", s("D5")), ("background", s("00ff00"))]),
    ]))]);
    let book = bytes_of(ok);
    // The values survive styling; the number format does not turn the number into text.
    assert_eq!(
        parse_with(&book, obj(&[("sheet", s("Styled"))])),
        Ok(arr(&[obj(&[("price", n(1234.5)), ("item", s("tea"))])]))
    );
    // The style parts are in the archive.
    let text = styles_xml(&book);
    assert!(text.contains("#,##0.00"), "{text}");
    assert!(text.contains("FFFFCC00"), "{text}");
    assert!(text.contains("FF112233"), "{text}");
    assert!(
        text.contains("<b/>") && text.contains("<i/>") && text.contains("<sz val=\"14\"/>"),
        "{text}"
    );

    for bad in [
        "A0", "1A", "A1:B2:C3", "ZZZZ1", "A1048577", "XFE1", "A1:", "A-1",
    ] {
        let e = err(write(&[sheet(arr(&[style(&[
            ("range", s(bad)),
            ("bold", Value::Bool(true)),
        ])]))]));
        assert_eq!(e, format!("xlsx.write: \"{bad}\" is not a cell range"));
    }
    let e = err(write(&[sheet(arr(&[style(&[(
        "bold",
        Value::Bool(true),
    )])]))]));
    assert_eq!(e, "xlsx.write: a style needs a range like \"A1:C20\"");
    let e = err(write(&[sheet(arr(&[style(&[
        ("range", s("A1")),
        ("color", s("red")),
    ])]))]));
    assert_eq!(e, "xlsx.write: color must be a hex colour like \"FFCC00\"");
    let e = err(write(&[sheet(arr(&[style(&[
        ("range", s("A1")),
        ("size", n(0.0)),
    ])]))]));
    assert_eq!(e, "xlsx.write: size must be a number from 1 to 409");
    let e = err(write(&[sheet(arr(&[style(&[
        ("range", s("A1:XFD1048576")),
        ("bold", Value::Bool(true)),
    ])]))]));
    assert_eq!(e, "xlsx.write: styles cover more than 500000 cells");
    let e = err(write(&[sheet(s("nope"))]));
    assert_eq!(e, "xlsx.write: sheet \"Styled\" styles must be an array");
}

/// The styles part of a written workbook.
fn styles_xml(book: &[u8]) -> String {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(book)).unwrap_or_else(|e| panic!("zip: {e}"));
    let mut part = archive
        .by_name("xl/styles.xml")
        .unwrap_or_else(|e| panic!("styles: {e}"));
    let mut text = String::new();
    part.read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("read: {e}"));
    text
}

#[test]
fn sheet_limit() {
    let sheets = |count: usize| {
        Value::Object(
            (0..count)
                .map(|i| (format!("S{i}"), arr(&[obj(&[("x", n(i as f64))])])))
                .collect(),
        )
    };
    let book = bytes_of(write(&[sheets(64)]));
    match parse_with(&book, Value::Undefined) {
        Ok(Value::Object(parsed)) => assert_eq!(parsed.len(), 64),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(write(&[sheets(65)])),
        "xlsx.write: 65 sheets exceeds the 64 sheet limit"
    );
    assert_eq!(
        err(write(&[sheets(0)])),
        "xlsx.write: a workbook needs at least one sheet"
    );
    assert_eq!(
        err(write(&[arr(&[])])),
        "xlsx.write: a workbook needs at least one sheet"
    );
}

#[test]
fn cell_limit_over_by_one() {
    // Header mode: (250000 rows + 1 header) x 1 key.
    let rows = Value::Array(vec![obj(&[("k", n(1.0))]); MAX_WRITE_CELLS]);
    assert_eq!(
        err(write(&[obj(&[("S", rows)])])),
        "xlsx.write: the workbook exceeds the 250000 cell limit"
    );
    // Array mode: 250001 rows x 1, across two sheets.
    let a = Value::Array(vec![arr(&[n(1.0)]); MAX_WRITE_CELLS - 10]);
    let b = Value::Array(vec![arr(&[n(1.0)]); 11]);
    let e = err(write(&[
        obj(&[("A", a), ("B", b)]),
        obj(&[("header", Value::Bool(false))]),
    ]));
    assert_eq!(e, "xlsx.write: the workbook exceeds the 250000 cell limit");
    // Exactly at the cap passes the cap (checked without building the workbook).
    let rows = Value::Array(vec![obj(&[("k", n(1.0))]); MAX_WRITE_CELLS - 1]);
    let sheets = obj(&[("S", rows)]);
    let specs = read_sheet_specs(Some(&sheets), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(check_shapes(&specs).as_deref(), Ok([Shape::Header(keys)]) if keys.len() == 1)
    );
    let over = obj(&[(
        "S",
        Value::Array(vec![obj(&[("k", n(1.0))]); MAX_WRITE_CELLS]),
    )]);
    let specs = read_sheet_specs(Some(&over), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(check_shapes(&specs).is_err());
}

#[test]
fn write_argument_errors() {
    let e = err(write(&[obj(&[("S", arr(&[arr(&[n(1.0)])]))])]));
    assert_eq!(
        e,
        "xlsx.write: sheet \"S\" row 0 must be an object, not an array (pass header: false for arrays)"
    );
    let e = err(write(&[
        obj(&[("S", arr(&[arr(&[n(1.0)]), obj(&[])]))]),
        obj(&[("header", Value::Bool(false))]),
    ]));
    assert_eq!(
        e,
        "xlsx.write: sheet \"S\" row 1 must be an array when header is false, not object"
    );
    let e = err(write(&[obj(&[(
        "S",
        arr(&[obj(&[("b", Value::Bytes(vec![1]))])]),
    )])]));
    assert_eq!(e, "xlsx.write: a cell cannot hold bytes");
    let e = err(write(&[arr(&[
        obj(&[("name", s("A")), ("rows", arr(&[]))]),
        obj(&[("name", s("a")), ("rows", arr(&[]))]),
    ])]));
    assert_eq!(e, "xlsx.write: duplicate sheet name \"a\"");
    let e = err(write(&[arr(&[obj(&[("rows", arr(&[]))])])]));
    assert_eq!(e, "xlsx.write: sheet 0 has no name");
    let e = err(write(&[arr(&[n(1.0)])]));
    assert_eq!(e, "xlsx.write: sheet 0 must be an object with a name");
    let e = err(write(&[obj(&[("S", n(1.0))])]));
    assert_eq!(e, "xlsx.write: sheet \"S\" must hold an array of rows");
    let e = err(write(&[s("x")]));
    assert_eq!(
        e,
        "xlsx.write: sheets must be {name: rows} or [{name, rows}], not string"
    );
    let e = err(write(&[obj(&[("a/b", arr(&[]))])]));
    assert_eq!(
        e,
        "xlsx.write: \"a/b\" is not a valid sheet name (a name cannot contain * ? : [ ] \\ or /)"
    );
    let long = "x".repeat(MAX_CELL_CHARS + 1);
    let e = err(write(&[obj(&[("S", arr(&[obj(&[("k", s(&long))])]))])]));
    assert_eq!(
        e,
        "xlsx.write: sheet \"S\" cell A2 holds more than 32767 characters"
    );
    let wide = Value::Array((0..=MAX_COLUMNS).map(|i| n(f64::from(i))).collect());
    let e = err(write(&[
        obj(&[("S", arr(&[wide]))]),
        obj(&[("header", Value::Bool(false))]),
    ]));
    assert_eq!(
        e,
        "xlsx.write: sheet \"S\" has 16385 columns; a sheet holds at most 16384"
    );
}

#[test]
fn auto_fit_widths() {
    let rows = arr(&[obj(&[
        ("short", s("a")),
        ("long", s(&"y".repeat(200))),
        ("mid", s("twelve chars")),
    ])]);
    let book = bytes_of(write(&[obj(&[("S", rows.clone())])]));
    let sheet = part(&book, "xl/worksheets/sheet1.xml");
    assert!(sheet.contains("width=\"8.7109375\""), "{sheet}"); // 8 characters
    assert!(sheet.contains("width=\"80.7109375\""), "{sheet}"); // capped at 80
    assert!(sheet.contains("width=\"14.7109375\""), "{sheet}"); // 12 + 2
    let book = bytes_of(write(&[
        obj(&[("S", rows)]),
        obj(&[("autoFitColumns", Value::Bool(false))]),
    ]));
    assert!(!part(&book, "xl/worksheets/sheet1.xml").contains("<cols>"));
}

fn part(book: &[u8], name: &str) -> String {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(book)).unwrap_or_else(|e| panic!("zip: {e}"));
    let mut part = archive
        .by_name(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut text = String::new();
    part.read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("read: {e}"));
    text
}

#[test]
fn parse_errors() {
    let book = bytes_of(write(&[obj(&[("a", arr(&[])), ("b", arr(&[]))])]));
    assert_eq!(
        parse_with(&book, obj(&[("sheet", s("c"))])),
        Err(HostError::invalid(
            "xlsx.parse: no sheet named \"c\". Sheets: a, b"
        ))
    );
    assert_eq!(parse_with(&book, obj(&[("sheet", s("a"))])), Ok(arr(&[])));
    assert_eq!(
        parse(&[s("not bytes")]),
        Err(HostError::invalid(
            "xlsx.parse: bytes must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
        ))
    );
    let e = err(parse_with(b"this is not a workbook", Value::Undefined));
    assert!(
        e.starts_with("xlsx.parse: the bytes are not a readable .xlsx workbook ("),
        "{e}"
    );
    let e = err(parse_with(
        &[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0],
        Value::Undefined,
    ));
    assert!(
        e.contains("legacy .xls or a password-protected workbook"),
        "{e}"
    );
    // A zip that is not a workbook.
    let e = err(parse_with(
        &zip_of(&[("hello.txt", b"hi")]),
        Value::Undefined,
    ));
    assert!(
        e.starts_with("xlsx.parse: the bytes are not a readable .xlsx workbook ("),
        "{e}"
    );
    // A truncated workbook.
    let e = err(parse_with(&book[..book.len() / 2], Value::Undefined));
    assert!(
        e.starts_with("xlsx.parse: the bytes are not a readable .xlsx workbook ("),
        "{e}"
    );
}

#[test]
fn malformed_parts_never_panic_out() {
    let book = bytes_of(write(&[obj(&[("S", arr(&[obj(&[("k", s("v"))])]))])]));
    // A shared-string index past the table (calamine indexes it unchecked).
    let sheet = part(&book, "xl/worksheets/sheet1.xml").replace("<v>0</v>", "<v>99</v>");
    let forged = rebuild(&book, "xl/worksheets/sheet1.xml", sheet.as_bytes());
    let e = err(parse_with(&forged, Value::Undefined));
    assert_eq!(
        e,
        "xlsx.parse: the workbook is malformed (a cell refers to shared string 99, and the workbook has 2)"
    );
    // A cell in the grid's last corner is read sparsely (no dense 2^34-cell range).
    let sheet = part(&book, "xl/worksheets/sheet1.xml").replace("r=\"A2\"", "r=\"XFD1048576\"");
    let forged = rebuild(&book, "xl/worksheets/sheet1.xml", sheet.as_bytes());
    match parse_with(&forged, Value::Undefined) {
        Ok(Value::Object(sheets)) => match sheets.first() {
            Some((_, Value::Array(rows))) => match rows.first() {
                Some(Value::Object(record)) => {
                    assert_eq!(record.len(), 16_384);
                    assert_eq!(record.first(), Some(&("k".to_string(), Value::Null)));
                    assert_eq!(record.last(), Some(&("col_16384".to_string(), s("v"))));
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    match parse_with(&forged, obj(&[("header", Value::Bool(false))])) {
        Ok(Value::Object(sheets)) => match sheets.first() {
            Some((_, Value::Array(rows))) => {
                assert!(
                    matches!(rows.get(1), Some(Value::Array(last)) if last.len() == 16_384 && last.last() == Some(&s("v")))
                );
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // A reference off the grid pads past the cell cap instead of allocating.
    let sheet = part(&book, "xl/worksheets/sheet1.xml").replace("r=\"A2\"", "r=\"ZZZZZ2\"");
    let forged = rebuild(&book, "xl/worksheets/sheet1.xml", sheet.as_bytes());
    for header in [true, false] {
        let e = err(parse_with(&forged, obj(&[("header", Value::Bool(header))])));
        assert_eq!(e, "xlsx.parse: the workbook holds more than 1000000 cells");
    }
}

#[test]
fn inflation_cap() {
    let book = bytes_of(write(&[obj(&[("S", arr(&[]))])]));
    let padded = rebuild(&book, "xl/padding.bin", &[b' '; 64 * 1024]);
    assert!(padded.len() < 16 * 1024);
    assert_eq!(check_archive(&padded, 1024 * 1024), Ok(()));
    assert_eq!(
        check_archive(&padded, 64 * 1024),
        Err(HostError::limit(
            "xlsx.parse: the workbook inflates past the 65536 byte limit"
        ))
    );
    // The padding is harmless to the reader.
    assert_eq!(
        parse_with(&padded, Value::Undefined),
        Ok(obj(&[("S", arr(&[]))]))
    );
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        writer
            .start_file(*name, options)
            .unwrap_or_else(|e| panic!("{e}"));
        writer.write_all(data).unwrap_or_else(|e| panic!("{e}"));
    }
    writer
        .finish()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_inner()
}

/// The workbook with one part replaced (or added).
fn rebuild(book: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(book)).unwrap_or_else(|e| panic!("{e}"));
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap_or_else(|e| panic!("{e}"));
        let mut content = Vec::new();
        file.read_to_end(&mut content)
            .unwrap_or_else(|e| panic!("{e}"));
        entries.push((file.name().to_string(), content));
    }
    match entries.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = data.to_vec(),
        None => entries.push((name.to_string(), data.to_vec())),
    }
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    zip_of(&refs)
}

#[test]
fn js_number_strings() {
    for (value, text) in [
        (1.0, "1"),
        (-2.5, "-2.5"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (1.5e-10, "1.5e-10"),
    ] {
        assert_eq!(js_number(value), text);
    }
    assert_eq!(
        iso_from_unix_ms(0.0).as_deref(),
        Some("1970-01-01T00:00:00.000Z")
    );
    assert_eq!(
        iso_from_unix_ms(-1.0).as_deref(),
        Some("1969-12-31T23:59:59.999Z")
    );
    assert_eq!(column_letters(0), "A");
    assert_eq!(column_letters(27), "AB");
    assert_eq!(column_letters(16_383), "XFD");
}
