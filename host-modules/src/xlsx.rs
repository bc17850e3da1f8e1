//! `xlsx`: read workbooks (calamine) and write styled ones (rust_xlsxwriter).
//!
//! The reference ran exceljs on the host; this module keeps its contract (argument shapes,
//! return shapes, messages and the write caps) and adds the caps a native reader of untrusted
//! bytes needs: the archive's inflated size, the number of cells a parse may return and the
//! bytes of the values it makes (a shared string is copied into every cell that uses it).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{Cursor, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use calamine::{DataRef, ExcelDateTime, ExcelDateTimeType, Reader, SheetType, Xlsx, XlsxError};
use nodetool_protocol::value::Value;
use rust_xlsxwriter::{Color, Format, FormatPattern, Workbook, Worksheet};

use crate::limits::{
    MAX_RESULT_BYTES, bool_option, js_number, js_string, option, options_of, require_bytes,
};

/// Sheets one `write` call may produce.
pub const MAX_WRITE_SHEETS: usize = 64;
/// Cells one `write` call may produce, across every sheet.
pub const MAX_WRITE_CELLS: usize = 250_000;
/// Cell-style applications one `write` call may make (the summed areas of its style ranges).
pub const MAX_STYLED_CELLS: usize = 2 * MAX_WRITE_CELLS;
/// Bytes the archive handed to `parse` may inflate to, across every entry.
pub const MAX_PARSE_INFLATED_BYTES: u64 = 100 * 1024 * 1024;
/// Values (cells, and the nulls that pad rows) one `parse` call may return or hold.
pub const MAX_PARSE_CELLS: usize = 1_000_000;
/// Bytes of strings one `parse` call may make: every cell's text and every record's keys,
/// counted once per copy. A 7 KiB workbook whose one 1 MiB shared string fills 20,000 cells
/// asks for 20 GB.
pub const MAX_PARSE_VALUE_BYTES: usize = MAX_RESULT_BYTES;

/// Excel's grid and cell limits.
const MAX_ROWS: u32 = 1_048_576;
const MAX_COLUMNS: u32 = 16_384;
const MAX_CELL_CHARS: usize = 32_767;

const PARSE: &str = "xlsx.parse";
const WRITE: &str = "xlsx.write";

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// JavaScript's `Boolean(value)`.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Undefined | Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => *n != 0.0 && !n.is_nan(),
        Value::String(s) => !s.is_empty(),
        Value::Bytes(_) | Value::Array(_) | Value::Object(_) => true,
    }
}

/// A member that is present and not `undefined` (the reference's `x !== undefined`).
fn member<'a>(members: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    members
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| !matches!(v, Value::Undefined))
}

/// `typeof`-style wording for a value in a message.
fn kind_of(value: Option<&Value>) -> &'static str {
    match value {
        None | Some(Value::Undefined) => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Bytes(_)) => "a Uint8Array",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "object",
    }
}

/// Length as JavaScript counts it (UTF-16 code units).
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `0` -> `A`, `27` -> `AB`.
fn column_letters(col: u32) -> String {
    let mut n = col + 1;
    let mut letters = Vec::new();
    while n > 0 {
        let rem = (n - 1) % 26;
        letters.push(char::from(b'A' + rem as u8));
        n = (n - 1) / 26;
    }
    letters.iter().rev().collect()
}

/// Sets `key` in an insertion-ordered object, keeping the first position (as JavaScript does).
fn upsert(members: &mut Vec<(String, Value)>, key: String, value: Value) {
    match members.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => members.push((key, value)),
    }
}

// ---------------------------------------------------------------------------------------------
// parse
// ---------------------------------------------------------------------------------------------

/// `parse(bytes, {header=true, sheet?})` -> `{sheetName: rows}` for every worksheet (workbook
/// order), or one sheet's rows when `sheet` names it. Cells: empty -> null, numbers, strings,
/// booleans, dates -> ISO strings, formulas -> their cached result, errors -> their text
/// (`#DIV/0!`). With `header` the first non-empty row gives the keys (an empty header cell is
/// `col_<n>`, 1-based) and every later row is a record with null for missing cells; without it
/// every non-empty row is an array padded with nulls from column A.
pub fn parse(args: &[Value]) -> Result<Value, String> {
    let bytes = require_bytes(PARSE, args.first(), "bytes")?;
    let options = options_of(args.get(1));
    let header = bool_option(options, "header", true);
    let wanted = option(options, "sheet").map(js_string);
    // The readers are fuzzed but not proven: a malformed archive that trips one (calamine
    // indexes shared strings unchecked, for one) is a parse error, not a failed host.
    catch_unwind(AssertUnwindSafe(|| {
        read_workbook(bytes, header, wanted.as_deref())
    }))
    .unwrap_or_else(|_| {
        Err(format!(
            "{PARSE}: the workbook is malformed and could not be read"
        ))
    })
}

fn not_a_workbook(detail: &dyn std::fmt::Display) -> String {
    format!("{PARSE}: the bytes are not a readable .xlsx workbook ({detail})")
}

/// Refuses what is not a zip archive, and an archive that inflates past the cap, before a
/// reader that holds whole parts in memory (shared strings, styles) sees it.
fn check_archive(bytes: &[u8], limit: u64) -> Result<(), String> {
    const CFB_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    if bytes.starts_with(&CFB_MAGIC) {
        return Err(format!(
            "{PARSE}: the bytes are a legacy .xls or a password-protected workbook; only unencrypted .xlsx workbooks can be read"
        ));
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| not_a_workbook(&e))?;
    let mut total: u64 = 0;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| not_a_workbook(&e))?;
        let room = limit.saturating_sub(total);
        let read = std::io::copy(&mut (&mut entry).take(room + 1), &mut std::io::sink())
            .map_err(|e| not_a_workbook(&e))?;
        total = total.saturating_add(read);
        if total > limit {
            return Err(format!(
                "{PARSE}: the workbook inflates past the {limit} byte limit"
            ));
        }
    }
    Ok(())
}

fn read_workbook(bytes: &[u8], header: bool, wanted: Option<&str>) -> Result<Value, String> {
    check_archive(bytes, MAX_PARSE_INFLATED_BYTES)?;
    let mut workbook = Xlsx::new(Cursor::new(bytes)).map_err(|e| not_a_workbook(&e))?;
    let names: Vec<String> = workbook
        .sheets_metadata()
        .iter()
        .filter(|s| s.typ == SheetType::WorkSheet)
        .map(|s| s.name.clone())
        .collect();
    let mut budget = ParseBudget {
        cells: MAX_PARSE_CELLS,
        bytes: MAX_PARSE_VALUE_BYTES,
    };
    if let Some(wanted) = wanted {
        if !names.iter().any(|n| n == wanted) {
            return Err(format!(
                "{PARSE}: no sheet named \"{wanted}\". Sheets: {}",
                names.join(", ")
            ));
        }
        return read_sheet(&mut workbook, wanted, header, &mut budget).map(Value::Array);
    }
    let mut sheets = Vec::with_capacity(names.len());
    for name in &names {
        let rows = read_sheet(&mut workbook, name, header, &mut budget)?;
        upsert(&mut sheets, name.to_string(), Value::Array(rows));
    }
    Ok(Value::Object(sheets))
}

/// What one `parse` may still make, across its sheets.
struct ParseBudget {
    /// Values ([`MAX_PARSE_CELLS`]).
    cells: usize,
    /// Bytes of strings ([`MAX_PARSE_VALUE_BYTES`]).
    bytes: usize,
}

impl ParseBudget {
    fn cells(&mut self, cells: u64) -> Result<(), String> {
        match usize::try_from(cells)
            .ok()
            .and_then(|c| self.cells.checked_sub(c))
        {
            Some(left) => {
                self.cells = left;
                Ok(())
            }
            None => Err(format!(
                "{PARSE}: the workbook holds more than {MAX_PARSE_CELLS} cells"
            )),
        }
    }

    /// Spends `bytes` of strings, before they are made.
    fn bytes(&mut self, bytes: usize) -> Result<(), String> {
        match self.bytes.checked_sub(bytes) {
            Some(left) => {
                self.bytes = left;
                Ok(())
            }
            None => Err(format!(
                "{PARSE}: the workbook's values come to more than the {MAX_PARSE_VALUE_BYTES} bytes one parse may return (a shared string counts once for every cell that uses it)"
            )),
        }
    }
}

/// One row's sparse cells (column, value), columns ascending.
type SparseRow = Vec<(u32, Value)>;

fn read_sheet(
    workbook: &mut Xlsx<Cursor<&[u8]>>,
    name: &str,
    header: bool,
    budget: &mut ParseBudget,
) -> Result<Vec<Value>, String> {
    let failed = |e: XlsxError| format!("{PARSE}: sheet \"{name}\" could not be read ({e})");
    let mut cells: Vec<(u32, u32, Value)> = Vec::new();
    {
        let mut reader = match workbook.worksheet_cells_reader(name) {
            Ok(reader) => reader,
            Err(XlsxError::NotAWorksheet(_)) => return Ok(Vec::new()),
            Err(e) => return Err(failed(e)),
        };
        while let Some(cell) = reader.next_cell().map_err(failed)? {
            let value = cell_value(cell.get_value(), budget)?;
            if matches!(value, Value::Null) {
                continue;
            }
            if cells.len() >= MAX_PARSE_CELLS {
                return Err(format!(
                    "{PARSE}: the workbook holds more than {MAX_PARSE_CELLS} cells"
                ));
            }
            let (row, col) = cell.get_position();
            cells.push((row, col, value));
        }
    }
    // Document order is row order in any sane file; sort anyway (stably, so a repeated
    // reference keeps its last value).
    cells.sort_by_key(|&(row, col, _)| (row, col));
    let mut rows: Vec<SparseRow> = Vec::new();
    let mut last: Option<(u32, u32)> = None;
    for (row, col, value) in cells {
        let current = rows
            .last_mut()
            .filter(|_| last.is_some_and(|(r, _)| r == row));
        match current {
            Some(cells) if last == Some((row, col)) => {
                if let Some(slot) = cells.last_mut() {
                    slot.1 = value;
                }
            }
            Some(cells) => cells.push((col, value)),
            None => rows.push(vec![(col, value)]),
        }
        last = Some((row, col));
    }

    if !header {
        return rows
            .into_iter()
            .map(|row| dense(row, budget).map(Value::Array))
            .collect();
    }
    // The keys span every column that holds a value anywhere (a column under an empty header
    // cell is `col_<n>`, not dropped).
    let width = rows
        .iter()
        .filter_map(|row| row.last())
        .map(|&(col, _)| col)
        .max();
    let mut rows = rows.into_iter();
    let Some(mut head) = rows.next() else {
        return Ok(Vec::new());
    };
    if let Some(width) = width
        && head.last().is_none_or(|&(col, _)| col < width)
    {
        head.push((width, Value::Null));
    }
    let head = dense(head, budget)?;
    // Keys in first-seen order; a repeated key takes the value of its last column, as
    // assigning `record[key]` column by column does.
    let mut keys: Vec<String> = Vec::new();
    let mut slot_of_key: HashMap<String, usize> = HashMap::new();
    let mut slot_of_col: Vec<usize> = Vec::with_capacity(head.len());
    for (i, cell) in head.iter().enumerate() {
        let key = match cell {
            Value::Null => format!("col_{}", i + 1),
            Value::String(s) if s.is_empty() => format!("col_{}", i + 1),
            other => js_string(other),
        };
        let slot = *slot_of_key.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
        slot_of_col.push(slot);
    }
    let mut last_col_of_slot = vec![0usize; keys.len()];
    for (col, &slot) in slot_of_col.iter().enumerate() {
        if let Some(last) = last_col_of_slot.get_mut(slot) {
            *last = col;
        }
    }
    // Every record gets its own copy of every key.
    let key_bytes: usize = keys.iter().map(String::len).sum();
    let mut records = Vec::new();
    for row in rows {
        budget.cells(keys.len() as u64)?;
        budget.bytes(key_bytes)?;
        let mut values = vec![Value::Null; keys.len()];
        for (col, value) in row {
            let col = col as usize;
            if let Some(&slot) = slot_of_col.get(col)
                && last_col_of_slot.get(slot) == Some(&col)
                && let Some(target) = values.get_mut(slot)
            {
                *target = value;
            }
        }
        records.push(Value::Object(keys.iter().cloned().zip(values).collect()));
    }
    Ok(records)
}

/// A sparse row as an array from column A to its last value, nulls between.
fn dense(row: SparseRow, budget: &mut ParseBudget) -> Result<Vec<Value>, String> {
    let width = row.last().map_or(0, |&(col, _)| u64::from(col) + 1);
    budget.cells(width)?;
    let mut out = vec![Value::Null; width as usize];
    for (col, value) in row {
        if let Some(slot) = out.get_mut(col as usize) {
            *slot = value;
        }
    }
    Ok(out)
}

/// A cell's value, its text charged to `budget` before it is copied.
fn cell_value(data: &DataRef<'_>, budget: &mut ParseBudget) -> Result<Value, String> {
    let mut text = |s: &str| -> Result<Value, String> {
        budget.bytes(s.len())?;
        Ok(Value::String(s.to_string()))
    };
    Ok(match data {
        DataRef::Int(i) => Value::Number(*i as f64),
        DataRef::Float(f) => Value::Number(*f),
        DataRef::String(s) => text(s)?,
        DataRef::SharedString(s) => text(s)?,
        DataRef::Bool(b) => Value::Bool(*b),
        DataRef::DateTime(dt) => excel_date(dt),
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => text(s)?,
        DataRef::Error(e) => text(&e.to_string())?,
        DataRef::Empty => Value::Null,
    })
}

/// A date-formatted serial as exceljs reads it: `Math.round((v - 25569 [+ 1462]) * 86400000)`
/// milliseconds since the Unix epoch, as `Date.prototype.toISOString` prints them.
fn excel_date(dt: &ExcelDateTime) -> Value {
    let serial = dt.as_f64();
    let kind = if dt.is_duration() {
        ExcelDateTimeType::TimeDelta
    } else {
        ExcelDateTimeType::DateTime
    };
    // calamine keeps the workbook's epoch private; equality exposes it.
    let is_1904 = *dt != ExcelDateTime::new(serial, kind, false);
    let days = serial - 25569.0 + if is_1904 { 1462.0 } else { 0.0 };
    let ms = (days * 24.0 * 3600.0 * 1000.0 + 0.5).floor();
    iso_from_unix_ms(ms).map_or(Value::Number(serial), Value::String)
}

/// `Date.prototype.toISOString` for a millisecond timestamp (None outside a Date's range).
fn iso_from_unix_ms(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms.abs() > 8.64e15 {
        return None;
    }
    let ms = ms as i64;
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (hour, minute, second, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    Some(format!(
        "{year}-{m:02}-{d:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z"
    ))
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

// ---------------------------------------------------------------------------------------------
// write
// ---------------------------------------------------------------------------------------------

/// One sheet as the caller described it.
struct SheetSpec<'a> {
    name: String,
    rows: &'a [Value],
    header: bool,
    columns: Option<Vec<String>>,
    styles: Vec<&'a [(String, Value)]>,
}

/// A sheet's columns: header keys, or the widest row.
enum Shape {
    Header(Vec<String>),
    Array(usize),
}

/// One cell to write.
enum Cell<'a> {
    Text(Cow<'a, str>),
    Number(f64),
    Bool(bool),
}

/// The font, fill and number format a style range leaves on one cell.
#[derive(Default, Clone, PartialEq, Eq, Hash)]
struct CellStyle {
    bold: Option<bool>,
    italic: Option<bool>,
    size_bits: Option<u64>,
    color: Option<u32>,
    background: Option<u32>,
    num_format: Option<String>,
}

impl CellStyle {
    fn is_empty(&self) -> bool {
        *self == CellStyle::default()
    }

    /// Later styles win property by property (the font merges; fill and format replace).
    fn apply(&mut self, patch: &CellStyle) {
        if patch.bold.is_some() {
            self.bold = patch.bold;
        }
        if patch.italic.is_some() {
            self.italic = patch.italic;
        }
        if patch.size_bits.is_some() {
            self.size_bits = patch.size_bits;
        }
        if patch.color.is_some() {
            self.color = patch.color;
        }
        if patch.background.is_some() {
            self.background = patch.background;
        }
        if patch.num_format.is_some() {
            self.num_format.clone_from(&patch.num_format);
        }
    }

    fn format(&self) -> Format {
        let mut format = Format::new();
        if self.bold == Some(true) {
            format = format.set_bold();
        }
        if self.italic == Some(true) {
            format = format.set_italic();
        }
        if let Some(bits) = self.size_bits {
            format = format.set_font_size(f64::from_bits(bits));
        }
        if let Some(rgb) = self.color {
            format = format.set_font_color(Color::RGB(rgb));
        }
        if let Some(rgb) = self.background {
            format = format
                .set_pattern(FormatPattern::Solid)
                .set_background_color(Color::RGB(rgb));
        }
        if let Some(num_format) = &self.num_format {
            format = format.set_num_format(num_format.as_str());
        }
        format
    }
}

/// A sheet ready to build: every check done.
struct SheetPlan<'a> {
    name: String,
    cells: Vec<(u32, u16, Cell<'a>)>,
    widths: Vec<usize>,
    styles: HashMap<(u32, u16), CellStyle>,
}

/// `write(sheets, {header=true, autoFitColumns=true})` -> the bytes of an .xlsx workbook.
/// `sheets` is `{name: rows}` or `[{name, rows, header?, columns?, styles?}]`. Header rows are
/// records keyed by `columns` or by the union of their keys in first-seen order; `header:
/// false` rows are arrays of cells. Objects in cells are JSON text; styles are `{range, bold,
/// italic, size, color, background, numberFormat}`.
pub fn write(args: &[Value]) -> Result<Value, String> {
    let options = options_of(args.get(1));
    let specs = read_sheet_specs(args.first(), options)?;
    let auto_fit = bool_option(options, "autoFitColumns", true);

    // Every cap is checked before a workbook exists.
    let shapes = check_shapes(&specs)?;
    let mut styled = 0usize;
    let mut plans = Vec::with_capacity(specs.len());
    for (spec, shape) in specs.iter().zip(shapes) {
        plans.push(plan_sheet(spec, shape, &mut styled)?);
    }

    let mut workbook = Workbook::new();
    let failed = |e: rust_xlsxwriter::XlsxError| format!("{WRITE}: {e}");
    for plan in plans {
        let sheet = workbook.add_worksheet();
        sheet.set_name(plan.name.as_str()).map_err(failed)?;
        build_sheet(sheet, plan, auto_fit).map_err(failed)?;
    }
    workbook.save_to_buffer().map(Value::Bytes).map_err(failed)
}

fn check_sheet_name(name: &str) -> Result<(), String> {
    let reason = if name.is_empty() {
        "a name cannot be blank"
    } else if name.chars().count() > 31 {
        "a name holds at most 31 characters"
    } else if name.contains(['*', '?', ':', '[', ']', '\\', '/']) {
        "a name cannot contain * ? : [ ] \\ or /"
    } else if name.starts_with('\'') || name.ends_with('\'') {
        "a name cannot start or end with an apostrophe"
    } else {
        return Ok(());
    };
    Err(format!(
        "{WRITE}: \"{name}\" is not a valid sheet name ({reason})"
    ))
}

/// A sheet as given: its name, its members (given as an object) and its rows (given directly).
type SheetEntry<'a> = (String, &'a [(String, Value)], Option<&'a Value>);

/// The sheet list, from either accepted shape, with per-sheet options resolved.
fn read_sheet_specs<'a>(
    sheets: Option<&'a Value>,
    options: &[(String, Value)],
) -> Result<Vec<SheetSpec<'a>>, String> {
    let default_header = bool_option(options, "header", true);
    let mut entries: Vec<SheetEntry<'a>> = Vec::new();
    match sheets {
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let Value::Object(members) = item else {
                    return Err(format!(
                        "{WRITE}: sheet {index} must be an object with a name"
                    ));
                };
                let name = match member(members, "name") {
                    None | Some(Value::Null) => String::new(),
                    Some(v) => js_string(v).trim().to_string(),
                };
                if name.is_empty() {
                    return Err(format!("{WRITE}: sheet {index} has no name"));
                }
                entries.push((name, members, None));
            }
        }
        Some(Value::Object(members)) => {
            for (name, rows) in members {
                entries.push((name.clone(), &[], Some(rows)));
            }
        }
        other => {
            return Err(format!(
                "{WRITE}: sheets must be {{name: rows}} or [{{name, rows}}], not {}",
                kind_of(other)
            ));
        }
    }
    if entries.is_empty() {
        return Err(format!("{WRITE}: a workbook needs at least one sheet"));
    }
    if entries.len() > MAX_WRITE_SHEETS {
        return Err(format!(
            "{WRITE}: {} sheets exceeds the {MAX_WRITE_SHEETS} sheet limit",
            entries.len()
        ));
    }

    // Excel compares sheet names case-insensitively.
    let mut seen = HashSet::new();
    let mut specs = Vec::with_capacity(entries.len());
    for (name, members, direct_rows) in entries {
        if !seen.insert(name.to_lowercase()) {
            return Err(format!("{WRITE}: duplicate sheet name \"{name}\""));
        }
        check_sheet_name(&name)?;
        let rows = match direct_rows.or_else(|| member(members, "rows")) {
            Some(Value::Array(rows)) => rows.as_slice(),
            _ => {
                return Err(format!(
                    "{WRITE}: sheet \"{name}\" must hold an array of rows"
                ));
            }
        };
        let columns = match member(members, "columns") {
            None | Some(Value::Null) => None,
            Some(Value::Array(columns)) => Some(columns.iter().map(js_string).collect()),
            Some(_) => {
                return Err(format!(
                    "{WRITE}: sheet \"{name}\" columns must be an array of names"
                ));
            }
        };
        let header = match member(members, "header") {
            Some(Value::Bool(b)) => *b,
            _ => default_header,
        };
        let styles = match member(members, "styles") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(styles)) => {
                let mut out = Vec::with_capacity(styles.len());
                for style in styles {
                    let Value::Object(style) = style else {
                        return Err(format!(
                            "{WRITE}: every sheet \"{name}\" styles entry must be an object"
                        ));
                    };
                    out.push(style.as_slice());
                }
                out
            }
            Some(_) => return Err(format!("{WRITE}: sheet \"{name}\" styles must be an array")),
        };
        specs.push(SheetSpec {
            name,
            rows,
            header,
            columns,
            styles,
        });
    }
    Ok(specs)
}

/// Every sheet's shape, checked against the cell cap (spent sheet by sheet, as the reference
/// did) and Excel's column count.
fn check_shapes(specs: &[SheetSpec<'_>]) -> Result<Vec<Shape>, String> {
    let mut budget = MAX_WRITE_CELLS;
    let mut shapes = Vec::with_capacity(specs.len());
    for spec in specs {
        let shape = shape_of(spec)?;
        let (cells, columns) = match &shape {
            Shape::Header(keys) => (
                (spec.rows.len() + 1).saturating_mul(keys.len().max(1)),
                keys.len(),
            ),
            Shape::Array(widest) => (spec.rows.len().saturating_mul((*widest).max(1)), *widest),
        };
        budget = budget.checked_sub(cells).ok_or_else(|| {
            format!("{WRITE}: the workbook exceeds the {MAX_WRITE_CELLS} cell limit")
        })?;
        if columns > MAX_COLUMNS as usize {
            return Err(format!(
                "{WRITE}: sheet \"{}\" has {columns} columns; a sheet holds at most {MAX_COLUMNS}",
                spec.name
            ));
        }
        shapes.push(shape);
    }
    Ok(shapes)
}

/// Checks every row's shape and finds the sheet's columns.
fn shape_of(spec: &SheetSpec<'_>) -> Result<Shape, String> {
    if spec.header {
        for (index, row) in spec.rows.iter().enumerate() {
            if !matches!(row, Value::Object(_)) {
                return Err(format!(
                    "{WRITE}: sheet \"{}\" row {index} must be an object, not {} (pass header: false for arrays)",
                    spec.name,
                    kind_of(Some(row))
                ));
            }
        }
        if let Some(columns) = spec.columns.as_ref().filter(|c| !c.is_empty()) {
            return Ok(Shape::Header(columns.clone()));
        }
        let mut keys = Vec::new();
        let mut seen = HashSet::new();
        for row in spec.rows {
            if let Value::Object(members) = row {
                for (key, _) in members {
                    if seen.insert(key.as_str()) {
                        keys.push(key.clone());
                    }
                }
            }
        }
        Ok(Shape::Header(keys))
    } else {
        let mut widest = 0;
        for (index, row) in spec.rows.iter().enumerate() {
            let Value::Array(cells) = row else {
                return Err(format!(
                    "{WRITE}: sheet \"{}\" row {index} must be an array when header is false, not {}",
                    spec.name,
                    kind_of(Some(row))
                ));
            };
            widest = widest.max(cells.len());
        }
        Ok(Shape::Array(widest))
    }
}

/// What one guest value becomes in a cell (None: an empty cell).
fn cell_of(value: &Value) -> Result<Option<Cell<'_>>, String> {
    Ok(match value {
        Value::Undefined | Value::Null => None,
        Value::Bool(b) => Some(Cell::Bool(*b)),
        Value::Number(n) if n.is_finite() => Some(Cell::Number(*n)),
        // NaN and the infinities have no cell form (JSON makes them null too).
        Value::Number(_) => None,
        Value::String(s) => Some(Cell::Text(Cow::Borrowed(s))),
        Value::Bytes(_) => return Err(format!("{WRITE}: a cell cannot hold bytes")),
        Value::Array(_) | Value::Object(_) => {
            Some(Cell::Text(Cow::Owned(value.to_json().to_string())))
        }
    })
}

/// Lays out one sheet's cells and styles, checking each cell and style.
fn plan_sheet<'a>(
    spec: &SheetSpec<'a>,
    shape: Shape,
    styled: &mut usize,
) -> Result<SheetPlan<'a>, String> {
    let mut plan = SheetPlan {
        name: spec.name.clone(),
        cells: Vec::new(),
        widths: Vec::new(),
        styles: HashMap::new(),
    };
    let mut put = |row: usize, col: usize, cell: Option<Cell<'a>>| -> Result<(), String> {
        // Both were bounded by the cell and column caps already.
        let (row32, col16) = (row as u32, col as u16);
        let length = match &cell {
            None => 0,
            Some(Cell::Text(text)) => {
                if text.chars().count() > MAX_CELL_CHARS {
                    return Err(format!(
                        "{WRITE}: sheet \"{}\" cell {}{} holds more than {MAX_CELL_CHARS} characters",
                        spec.name,
                        column_letters(col as u32),
                        row + 1
                    ));
                }
                js_len(text)
            }
            Some(Cell::Number(n)) => js_number(*n).len(),
            Some(Cell::Bool(b)) => b.to_string().len(),
        };
        if plan.widths.len() <= col {
            plan.widths.resize(col + 1, 0);
        }
        if let Some(width) = plan.widths.get_mut(col) {
            *width = (*width).max(length);
        }
        if let Some(cell) = cell {
            plan.cells.push((row32, col16, cell));
        }
        Ok(())
    };
    match shape {
        Shape::Header(keys) => {
            for (col, key) in keys.iter().enumerate() {
                put(0, col, Some(Cell::Text(Cow::Owned(key.clone()))))?;
            }
            for (index, row) in spec.rows.iter().enumerate() {
                let Value::Object(members) = row else {
                    continue;
                };
                let record: HashMap<&str, &Value> =
                    members.iter().map(|(k, v)| (k.as_str(), v)).collect();
                for (col, key) in keys.iter().enumerate() {
                    let cell = match record.get(key.as_str()) {
                        Some(value) => cell_of(value)?,
                        None => None,
                    };
                    put(index + 1, col, cell)?;
                }
            }
        }
        Shape::Array(_) => {
            for (index, row) in spec.rows.iter().enumerate() {
                let Value::Array(cells) = row else { continue };
                for (col, value) in cells.iter().enumerate() {
                    put(index, col, cell_of(value)?)?;
                }
            }
        }
    }

    for style in &spec.styles {
        let (top, left, bottom, right) = parse_range(member(style, "range"))?;
        let patch = CellStyle {
            bold: member(style, "bold").map(truthy),
            italic: member(style, "italic").map(truthy),
            size_bits: member(style, "size")
                .map(font_size)
                .transpose()?
                .map(f64::to_bits),
            color: member(style, "color")
                .map(|v| rgb(v, "color"))
                .transpose()?,
            background: member(style, "background")
                .map(|v| rgb(v, "background"))
                .transpose()?,
            num_format: member(style, "numberFormat").map(js_string),
        };
        if patch.is_empty() {
            continue;
        }
        let area = ((bottom - top + 1) as usize).saturating_mul((right - left + 1) as usize);
        *styled = styled.saturating_add(area);
        if *styled > MAX_STYLED_CELLS {
            return Err(format!(
                "{WRITE}: styles cover more than {MAX_STYLED_CELLS} cells"
            ));
        }
        for row in top..=bottom {
            for col in left..=right {
                // Ranges are 1-based and within Excel's grid (checked by parse_range).
                plan.styles
                    .entry((row - 1, (col - 1) as u16))
                    .or_default()
                    .apply(&patch);
            }
        }
    }
    Ok(plan)
}

/// `A1` or `A1:C20` (either corner first) -> 1-based (top, left, bottom, right).
fn parse_range(range: Option<&Value>) -> Result<(u32, u32, u32, u32), String> {
    let range = match range {
        Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
        _ => return Err(format!("{WRITE}: a style needs a range like \"A1:C20\"")),
    };
    let bad = || format!("{WRITE}: \"{range}\" is not a cell range");
    let corner = |cell: &str| -> Option<(u32, u32)> {
        let cell = cell.trim();
        let split = cell.find(|c: char| c.is_ascii_digit())?;
        let (letters, digits) = cell.split_at(split);
        if letters.is_empty()
            || letters.len() > 3
            || !letters.chars().all(|c| c.is_ascii_alphabetic())
        {
            return None;
        }
        if digits.is_empty() || digits.len() > 7 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let col = letters
            .to_ascii_uppercase()
            .bytes()
            .fold(0u32, |acc, b| acc * 26 + u32::from(b - b'A' + 1));
        let row: u32 = digits.parse().ok()?;
        ((1..=MAX_ROWS).contains(&row) && (1..=MAX_COLUMNS).contains(&col)).then_some((row, col))
    };
    let parts: Vec<&str> = range.split(':').collect();
    let (start, end) = match parts.as_slice() {
        [one] => {
            let start = corner(one).ok_or_else(bad)?;
            (start, start)
        }
        [a, b] => (corner(a).ok_or_else(bad)?, corner(b).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    Ok((
        start.0.min(end.0),
        start.1.min(end.1),
        start.0.max(end.0),
        start.1.max(end.1),
    ))
}

/// `FFCC00`, `#FFCC00` or ARGB `80FFCC00` -> the RGB Excel stores (fills and fonts are
/// opaque: a 6-digit colour is `FF`-prefixed as ARGB, and the alpha byte is not kept).
fn rgb(value: &Value, label: &str) -> Result<u32, String> {
    let text = js_string(value);
    let text = text.trim();
    let text = text.strip_prefix('#').unwrap_or(text);
    let valid = (text.len() == 6 || text.len() == 8) && text.chars().all(|c| c.is_ascii_hexdigit());
    let argb = if valid {
        u32::from_str_radix(text, 16).ok()
    } else {
        None
    };
    argb.map(|argb| argb & 0x00FF_FFFF)
        .ok_or_else(|| format!("{WRITE}: {label} must be a hex colour like \"FFCC00\""))
}

/// A font size in points: a number (or numeric string) from 1 to 409, Excel's range.
fn font_size(value: &Value) -> Result<f64, String> {
    let size = match value {
        Value::Number(n) => Some(*n),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    size.filter(|s| s.is_finite() && (1.0..=409.0).contains(s))
        .ok_or_else(|| format!("{WRITE}: size must be a number from 1 to 409"))
}

fn build_sheet(
    sheet: &mut Worksheet,
    plan: SheetPlan<'_>,
    auto_fit: bool,
) -> Result<(), rust_xlsxwriter::XlsxError> {
    let SheetPlan {
        cells,
        widths,
        mut styles,
        ..
    } = plan;
    let mut formats: HashMap<CellStyle, Format> = HashMap::new();
    let mut format_for = |style: CellStyle| {
        formats
            .entry(style.clone())
            .or_insert_with(|| style.format())
            .clone()
    };
    for (row, col, cell) in cells {
        match (styles.remove(&(row, col)).map(&mut format_for), cell) {
            (None, Cell::Text(text)) => sheet.write_string(row, col, text)?,
            (None, Cell::Number(n)) => sheet.write_number(row, col, n)?,
            (None, Cell::Bool(b)) => sheet.write_boolean(row, col, b)?,
            (Some(format), Cell::Text(text)) => {
                sheet.write_string_with_format(row, col, text, &format)?
            }
            (Some(format), Cell::Number(n)) => {
                sheet.write_number_with_format(row, col, n, &format)?
            }
            (Some(format), Cell::Bool(b)) => {
                sheet.write_boolean_with_format(row, col, b, &format)?
            }
        };
    }
    // Styled cells without a value.
    let mut rest: Vec<((u32, u16), CellStyle)> = styles.into_iter().collect();
    rest.sort_by_key(|(pos, _)| *pos);
    for ((row, col), style) in rest {
        let format = format_for(style);
        sheet.write_blank(row, col, &format)?;
    }
    if auto_fit {
        for (col, width) in widths.iter().enumerate() {
            let width = (width + 2).clamp(8, 80);
            sheet.set_column_width(col as u16, width as f64)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn bytes_of(result: Result<Value, String>) -> Vec<u8> {
        match result {
            Ok(Value::Bytes(b)) => b,
            other => panic!("expected bytes, got {other:?}"),
        }
    }

    fn err(result: Result<Value, String>) -> String {
        match result {
            Err(e) => e,
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    fn parse_with(bytes: &[u8], options: Value) -> Result<Value, String> {
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
            Err("xlsx.parse: no sheet named \"c\". Sheets: a, b".into())
        );
        assert_eq!(parse_with(&book, obj(&[("sheet", s("a"))])), Ok(arr(&[])));
        assert_eq!(
            parse(&[s("not bytes")]),
            Err("xlsx.parse: bytes must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())".into())
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
            "xlsx.parse: the workbook is malformed and could not be read"
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
            Err("xlsx.parse: the workbook inflates past the 65536 byte limit".into())
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
}
