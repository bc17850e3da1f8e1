//! `xlsx.parse`: the archive checked before calamine sees it, then each sheet read under the
//! cell and value-byte budgets.

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};

use calamine::{DataRef, ExcelDateTime, ExcelDateTimeType, Reader, SheetType, Xlsx, XlsxError};
use nodetool_protocol::value::Value;

use super::{MAX_PARSE_CELLS, MAX_PARSE_INFLATED_BYTES, MAX_PARSE_VALUE_BYTES, PARSE, upsert};
use crate::error::HostError;
use crate::limits::{bool_option, js_string, option, options_of, require_bytes};

/// `parse(bytes, {header=true, sheet?})` -> `{sheetName: rows}` for every worksheet (workbook
/// order), or one sheet's rows when `sheet` names it. Cells: empty -> null, numbers, strings,
/// booleans, dates -> ISO strings, formulas -> their cached result (null without one), errors
/// -> their text (`#DIV/0!`). With `header` the first non-empty row gives the keys (an empty header cell is
/// `col_<n>`, 1-based) and every later row is a record with null for missing cells; without it
/// every non-empty row is an array padded with nulls from column A.
pub fn parse(args: &[Value]) -> Result<Value, HostError> {
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
        Err(HostError::malformed(format!(
            "{PARSE}: the workbook is malformed and could not be read"
        )))
    })
}

fn not_a_workbook(detail: &dyn std::fmt::Display) -> HostError {
    HostError::malformed(format!(
        "{PARSE}: the bytes are not a readable .xlsx workbook ({detail})"
    ))
}

/// Refuses what is not a zip archive, and an archive that inflates past the cap, before a
/// reader that holds whole parts in memory (shared strings, styles) sees it.
pub(super) fn check_archive(bytes: &[u8], limit: u64) -> Result<(), HostError> {
    const CFB_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    if bytes.starts_with(&CFB_MAGIC) {
        return Err(HostError::unsupported(format!(
            "{PARSE}: the bytes are a legacy .xls or a password-protected workbook; only unencrypted .xlsx workbooks can be read"
        )));
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| not_a_workbook(&e))?;
    let mut total: u64 = 0;
    let mut strings = 0usize;
    let mut referenced: Option<usize> = None;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| not_a_workbook(&e))?;
        let name = entry.name().to_ascii_lowercase();
        let room = limit.saturating_sub(total);
        let read = if name.ends_with(".xml") {
            let mut part = Vec::new();
            (&mut entry)
                .take(room + 1)
                .read_to_end(&mut part)
                .map_err(|e| not_a_workbook(&e))?;
            if name == "xl/sharedstrings.xml" {
                strings = shared_strings_in(&part);
            } else {
                referenced = referenced.max(highest_shared_string_reference(&part));
            }
            part.len() as u64
        } else {
            std::io::copy(&mut (&mut entry).take(room + 1), &mut std::io::sink())
                .map_err(|e| not_a_workbook(&e))?
        };
        total = total.saturating_add(read);
        if total > limit {
            return Err(HostError::limit(format!(
                "{PARSE}: the workbook inflates past the {limit} byte limit"
            )));
        }
    }
    // calamine indexes its shared-string table with a cell's number unchecked.
    if let Some(index) = referenced.filter(|&index| index >= strings) {
        return Err(HostError::malformed(format!(
            "{PARSE}: the workbook is malformed (a cell refers to shared string {index}, and the workbook has {strings})"
        )));
    }
    Ok(())
}

/// The strings calamine keeps from a shared-string part: each `si` holding a `t` outside a
/// phonetic run (`rPh`), or a rich-text run `r`.
fn shared_strings_in(part: &[u8]) -> usize {
    let mut reader = quick_xml::Reader::from_reader(part);
    reader.config_mut().check_end_names = false;
    let (mut count, mut in_si, mut kept, mut phonetic) = (0usize, false, false, 0usize);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Start(e)) => match e.local_name().as_ref() {
                b"si" => (in_si, kept, phonetic) = (true, false, 0),
                b"rPh" => phonetic += 1,
                b"r" if in_si => kept = true,
                b"t" if in_si && phonetic == 0 => kept = true,
                _ => {}
            },
            Ok(quick_xml::events::Event::Empty(e)) => match e.local_name().as_ref() {
                b"r" if in_si => kept = true,
                b"t" if in_si && phonetic == 0 => kept = true,
                _ => {}
            },
            Ok(quick_xml::events::Event::End(e)) => match e.local_name().as_ref() {
                b"si" if in_si => {
                    count += usize::from(kept);
                    in_si = false;
                }
                b"rPh" => phonetic = phonetic.saturating_sub(1),
                _ => {}
            },
            Ok(quick_xml::events::Event::Eof) | Err(_) => return count,
            Ok(_) => {}
        }
    }
}

/// The highest shared-string number a cell (`<c t="s"><v>N</v></c>`) of `part` names, read as
/// calamine reads it (what is not a number is 0).
fn highest_shared_string_reference(part: &[u8]) -> Option<usize> {
    let mut reader = quick_xml::Reader::from_reader(part);
    reader.config_mut().check_end_names = false;
    let (mut shared, mut in_v) = (false, false);
    let mut value = Vec::new();
    let mut highest: Option<usize> = None;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Start(e)) => match e.local_name().as_ref() {
                b"c" => {
                    shared = e
                        .try_get_attribute("t")
                        .ok()
                        .flatten()
                        .is_some_and(|t| t.value.as_ref() == b"s");
                }
                b"v" if shared => {
                    in_v = true;
                    value.clear();
                }
                _ => {}
            },
            Ok(quick_xml::events::Event::Empty(e)) if e.local_name().as_ref() == b"v" && shared => {
                highest = highest.max(Some(0));
            }
            Ok(quick_xml::events::Event::Text(t)) if in_v => value.extend_from_slice(&t),
            Ok(quick_xml::events::Event::End(e)) => match e.local_name().as_ref() {
                b"v" if in_v => {
                    in_v = false;
                    let index = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    highest = highest.max(Some(index));
                }
                b"c" => shared = false,
                _ => {}
            },
            Ok(quick_xml::events::Event::Eof) | Err(_) => return highest,
            Ok(_) => {}
        }
    }
}

fn read_workbook(bytes: &[u8], header: bool, wanted: Option<&str>) -> Result<Value, HostError> {
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
            return Err(HostError::invalid(format!(
                "{PARSE}: no sheet named \"{wanted}\". Sheets: {}",
                names.join(", ")
            )));
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
    fn cells(&mut self, cells: u64) -> Result<(), HostError> {
        match usize::try_from(cells)
            .ok()
            .and_then(|c| self.cells.checked_sub(c))
        {
            Some(left) => {
                self.cells = left;
                Ok(())
            }
            None => Err(HostError::limit(format!(
                "{PARSE}: the workbook holds more than {MAX_PARSE_CELLS} cells"
            ))),
        }
    }

    /// Spends `bytes` of strings, before they are made.
    fn bytes(&mut self, bytes: usize) -> Result<(), HostError> {
        match self.bytes.checked_sub(bytes) {
            Some(left) => {
                self.bytes = left;
                Ok(())
            }
            None => Err(HostError::output(format!(
                "{PARSE}: the workbook's values come to more than the {MAX_PARSE_VALUE_BYTES} bytes one parse may return (a shared string counts once for every cell that uses it)"
            ))),
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
) -> Result<Vec<Value>, HostError> {
    let failed = |e: XlsxError| {
        HostError::malformed(format!("{PARSE}: sheet \"{name}\" could not be read ({e})"))
    };
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
                return Err(HostError::limit(format!(
                    "{PARSE}: the workbook holds more than {MAX_PARSE_CELLS} cells"
                )));
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
fn dense(row: SparseRow, budget: &mut ParseBudget) -> Result<Vec<Value>, HostError> {
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
fn cell_value(data: &DataRef<'_>, budget: &mut ParseBudget) -> Result<Value, HostError> {
    let mut text = |s: &str| -> Result<Value, HostError> {
        budget.bytes(s.len())?;
        Ok(Value::String(s.to_string()))
    };
    Ok(match data {
        DataRef::Int(i) => Value::Number(*i as f64),
        DataRef::Float(f) => Value::Number(*f),
        // A formula cell with no cached result (`<f>..</f><v></v>`, as openpyxl writes one):
        // calamine falls back to the empty text, exceljs has no result, and both read nothing.
        DataRef::String(s) if s.is_empty() => Value::Null,
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
pub(super) fn iso_from_unix_ms(ms: f64) -> Option<String> {
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
