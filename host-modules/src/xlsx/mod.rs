//! `xlsx`: read workbooks (calamine) and write styled ones (rust_xlsxwriter).
//!
//! The reference ran exceljs on the host; this module keeps its contract (argument shapes,
//! return shapes, messages and the write caps) and adds the caps a native reader of untrusted
//! bytes needs: the archive's inflated size, the number of cells a parse may return and the
//! bytes of the values it makes (a shared string is copied into every cell that uses it).
//!
//! `read` is `parse`, `write` is `write`; this file holds the caps and the helpers both use.

use nodetool_protocol::value::Value;

use crate::limits::MAX_RESULT_BYTES;

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

mod read;
mod write;

#[cfg(test)]
mod tests;

pub use read::parse;
pub use write::write;
