//! `csv`: parse and stringify (the `csv` crate), shaped like the reference's papaparse calls.
//!
//! `parse` tokenizes with the `csv` crate and layers papaparse's rules on top: a leading BOM is
//! stripped, rows of one empty field are skipped (`skipEmptyLines: true`), every value stays a
//! string (`dynamicTyping: false`), a missing delimiter is guessed the way papaparse's
//! `guessDelimiter` does, and with `header: true` the records follow papaparse exactly:
//! duplicate header names are renamed (`a`, `a_1`, `a_2`, passing over the names the header
//! holds itself), a short row leaves its missing
//! fields out of the record, and fields past the header go to a `__parsed_extra` array.
//!
//! `stringify` writes papaparse's `unparse` output: fields are quoted when they contain the
//! delimiter, a quote, CR, LF or a BOM, or start or end with a space; rows are joined by "\n"
//! with no trailing newline.

use std::collections::{HashMap, HashSet};

use nodetool_protocol::packed::{KeyId, Packed, PackedError, PackedWriter, SharedCache, Token};
use nodetool_protocol::value::Value;

use crate::error::{HostError, HostErrorCode};
use crate::limits::{MAX_RESULT_BYTES, bool_option, js_number, option, options_of, require_text};

/// The delimiters papaparse's guesser tries, in its order (`Papa.RECORD_SEP`, `Papa.UNIT_SEP`
/// last).
const GUESSED_DELIMITERS: [u8; 6] = [b',', b'\t', b'|', b';', 0x1e, 0x1f];

/// How many rows the guesser previews per candidate (papaparse's `preview: 10`).
const GUESS_PREVIEW_ROWS: usize = 10;

/// Delimiters papaparse refuses (`Papa.BAD_DELIMITERS`); asking for one gives `,`.
const BAD_DELIMITERS: [char; 4] = ['\r', '\n', '"', '\u{feff}'];

/// The key papaparse files fields past the header under.
const EXTRA_KEY: &str = "__parsed_extra";

/// How deep a cell value may nest before `stringify` refuses to JSON-encode it.
const MAX_CELL_DEPTH: usize = 512;

/// `parse(text, {header=true, delimiter})`: header true -> an array of records keyed by the
/// first row; header false -> an array of row arrays. Values are strings.
pub fn parse(args: &[Value]) -> Result<Value, HostError> {
    let packed = parse_packed(args)?;
    // Packed, each header name is stored once; as values, every record holds its own copy of
    // every name, so a long header over many short rows would expand without bound.
    if !expands_within(&packed, MAX_RESULT_BYTES)
        .map_err(|e| HostError::new(HostErrorCode::Internal, format!("csv.parse: {e}")))?
    {
        return Err(HostError::output(format!(
            "csv.parse: the records come to more than the {MAX_RESULT_BYTES} bytes one parse may return (every record repeats the header's names)"
        )));
    }
    packed
        .to_value()
        .map_err(|e| HostError::new(HostErrorCode::Internal, format!("csv.parse: {e}")))
}

/// Whether the strings and keys of `packed`, as a `Value` holds them (a key once per object
/// that has it, a shared string once per use), come to at most `budget` bytes. Stops counting
/// at the first byte past it.
fn expands_within(packed: &Packed, budget: usize) -> Result<bool, PackedError> {
    enum Stop {
        Over,
        Malformed(PackedError),
    }
    impl From<PackedError> for Stop {
        fn from(e: PackedError) -> Stop {
            Stop::Malformed(e)
        }
    }
    let keys = packed.keys();
    let mut left = budget;
    let walked = packed.walk(|token| {
        let bytes = match token {
            Token::Key(key) => keys.get(key as usize).map_or(0, String::len),
            Token::String(s) | Token::Shared(s, _) => s.len(),
            _ => 0,
        };
        left = left.checked_sub(bytes).ok_or(Stop::Over)?;
        Ok(())
    });
    match walked {
        Ok(()) => Ok(true),
        Err(Stop::Over) => Ok(false),
        Err(Stop::Malformed(e)) => Err(e),
    }
}

/// [`parse`], packed for the guest: the records are written as they are read, into a few
/// buffers, with each header name stored once.
pub fn parse_packed(args: &[Value]) -> Result<Packed, HostError> {
    const AT: &str = "csv.parse";
    let text = require_text(AT, args.first(), "text")?;
    let options = options_of(args.get(1));
    let header = bool_option(options, "header", true);
    let delimiter = match option(options, "delimiter") {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) if s.encode_utf16().count() == 1 => s.chars().next(),
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: delimiter must be a single character"
            )));
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let delimiter = match delimiter {
        // papaparse's Parser swaps a refused delimiter for the default.
        Some(c) if BAD_DELIMITERS.contains(&c) => ',',
        Some(c) => c,
        None => char::from(guess_delimiter(text)),
    };
    write_rows(AT, text, delimiter, header)
}

/// A row papaparse's `skipEmptyLines: true` drops: exactly one empty field.
fn is_empty_row(row: &csv::StringRecord) -> bool {
    row.len() == 1 && row.get(0).is_some_and(str::is_empty)
}

fn reader(text: &[u8], delimiter: u8) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(text)
}

/// papaparse's `guessDelimiter` (5.7): over the first rows of each candidate, the one whose
/// field count varies least between consecutive rows, a tie going to more fields on average,
/// among those averaging about two fields or more; `,` when none qualifies.
fn guess_delimiter(text: &str) -> u8 {
    let mut best: Option<(u8, usize, f64)> = None;
    for candidate in GUESSED_DELIMITERS {
        let (mut delta, mut fields, mut rows) = (0usize, 0usize, 0usize);
        let mut previous: Option<usize> = None;
        for row in reader(text.as_bytes(), candidate)
            .records()
            .take(GUESS_PREVIEW_ROWS)
        {
            // A tokenizer error ends the preview; the rows read so far still count.
            let Ok(row) = row else { break };
            if is_empty_row(&row) {
                continue;
            }
            let count = row.len();
            fields += count;
            rows += 1;
            if let Some(previous) = previous {
                delta += count.abs_diff(previous);
            }
            previous = Some(count);
        }
        if rows == 0 {
            continue;
        }
        let average = fields as f64 / rows as f64;
        // papaparse 5.7: the most consistent field count wins; the average only breaks a tie.
        let better = best.is_none_or(|(_, best_delta, best_average)| {
            delta < best_delta || (delta == best_delta && average > best_average)
        });
        if better && average > 1.99 {
            best = Some((candidate, delta, average));
        }
    }
    best.map_or(b',', |(delimiter, _, _)| delimiter)
}

/// The records of a text as the `csv` crate's reader reads them (`csv_core`: the delimiter,
/// `"` quotes with `""` escapes, CR, LF or CRLF ending a record, empty lines ignored, a BOM at
/// the very start dropped), without its per-record copies. A line with no quote and no CR is
/// split where it lies, which is what `csv_core` does with such a line; every other record,
/// and the first one, goes through one `csv_core` reader that is never reset, so its BOM and
/// line-ending handling stay exactly its own.
struct Records<'t> {
    text: &'t str,
    at: usize,
    core: csv_core::Reader,
    core_used: bool,
    /// What each byte is to a line split where it lies (see `split_line`).
    class: [u8; 256],
    /// The current record is either split from its line...
    plain: Vec<&'t str>,
    /// ...or parsed by `core`: its fields one after another, and where each ends.
    output: Vec<u8>,
    ends: Vec<usize>,
    parsed: Option<usize>,
}

impl<'t> Records<'t> {
    /// Byte classes for `split_line`.
    const FIELD_END: u8 = 1;
    const LINE_END: u8 = 2;
    const SPECIAL: u8 = 3;

    fn new(text: &'t str, delimiter: u8) -> Records<'t> {
        let mut class = [0u8; 256];
        class[usize::from(b'"')] = Self::SPECIAL;
        class[usize::from(b'\r')] = Self::SPECIAL;
        class[usize::from(b'\n')] = Self::LINE_END;
        class[usize::from(delimiter)] = Self::FIELD_END;
        Records {
            text,
            at: 0,
            core: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            core_used: false,
            class,
            plain: Vec::new(),
            output: vec![0; 1024],
            ends: vec![0; 64],
            parsed: None,
        }
    }

    /// Reads the next record; `false` at the end of the text.
    fn next(&mut self) -> bool {
        self.plain.clear();
        self.parsed = None;
        if self.core_used {
            match self.split_line() {
                Some(found) => return found,
                None => self.plain.clear(),
            }
        }
        self.core_used = true;
        self.read_parsed()
    }

    /// Splits the lines from `at` while they hold no quote and no CR: `Some(true)` with the
    /// first non-empty one in `plain` (empty lines are skipped, as `csv_core` skips them),
    /// `Some(false)` at the end of the text, `None` at a line `core` must read (`at` is its
    /// start).
    fn split_line(&mut self) -> Option<bool> {
        let bytes = self.text.as_bytes();
        let (mut line, mut start) = (self.at, self.at);
        let mut at = self.at;
        loop {
            let Some(&byte) = bytes.get(at) else {
                // The last line, without a terminator.
                if at == line {
                    self.at = at;
                    return Some(false);
                }
                self.plain.push(self.text.get(start..at)?);
                self.at = at;
                return Some(true);
            };
            match self.class[usize::from(byte)] {
                0 => {}
                Self::FIELD_END => {
                    self.plain.push(self.text.get(start..at)?);
                    start = at + 1;
                }
                Self::LINE_END if at == line => {
                    line = at + 1;
                    start = at + 1;
                }
                Self::LINE_END => {
                    self.plain.push(self.text.get(start..at)?);
                    self.at = at + 1;
                    return Some(true);
                }
                _ => {
                    self.at = line;
                    return None;
                }
            }
            at += 1;
        }
    }

    /// One record through `core`, from `at`.
    fn read_parsed(&mut self) -> bool {
        use csv_core::ReadRecordResult;
        let (mut out, mut end) = (0, 0);
        loop {
            let input = self.text.as_bytes().get(self.at..).unwrap_or_default();
            let output = self.output.get_mut(out..).unwrap_or_default();
            let ends = self.ends.get_mut(end..).unwrap_or_default();
            let (result, read, wrote, ended) = self.core.read_record(input, output, ends);
            self.at += read;
            out += wrote;
            end += ended;
            match result {
                // An empty input tells `core` the text has ended; it then finishes the record.
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull => self.output.resize(self.output.len() * 2, 0),
                ReadRecordResult::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                ReadRecordResult::Record => {
                    self.parsed = Some(end);
                    return true;
                }
                ReadRecordResult::End => return false,
            }
        }
    }

    fn len(&self) -> usize {
        self.parsed.unwrap_or(self.plain.len())
    }

    /// Field `i` of the current record.
    fn field(&self, i: usize) -> Option<&str> {
        if self.parsed.is_none() {
            return self.plain.get(i).copied();
        }
        let start = match i.checked_sub(1) {
            Some(before) => *self.ends.get(before)?,
            None => 0,
        };
        let end = *self.ends.get(i)?;
        // Fields of a UTF-8 text split at ASCII bytes, with ASCII quotes taken out.
        std::str::from_utf8(self.output.get(start..end)?).ok()
    }

    /// Whether the current record is one empty field (`skipEmptyLines` drops it).
    fn is_empty_row(&self) -> bool {
        self.len() == 1 && self.field(0).is_some_and(str::is_empty)
    }
}

/// Every non-empty row, written as it is read: with `header`, the first one names the fields
/// (duplicates renamed) and every later one becomes a record; without, each is an array. A
/// delimiter outside ASCII is swapped for an ASCII byte the text does not contain, and swapped
/// back inside the fields.
fn write_rows(at: &str, text: &str, delimiter: char, header: bool) -> Result<Packed, HostError> {
    let (byte, swapped) = match u8::try_from(delimiter) {
        Ok(byte) if byte.is_ascii() => (byte, None),
        _ => {
            let mut present = [false; 128];
            for &b in text.as_bytes() {
                if b.is_ascii() {
                    present[usize::from(b)] = true;
                }
            }
            let stand_in = (1u8..128)
                .find(|&b| !present[usize::from(b)] && !matches!(b, b'"' | b'\r' | b'\n'));
            let Some(stand_in) = stand_in else {
                return Err(HostError::unsupported(format!(
                    "{at}: the delimiter {delimiter:?} cannot be used with a text that holds every ASCII character"
                )));
            };
            (
                stand_in,
                Some(text.replace(delimiter, char::from(stand_in).encode_utf8(&mut [0; 4]))),
            )
        }
    };
    let source = swapped.as_deref().unwrap_or(text);
    // A field as written, with a swapped delimiter swapped back.
    let restore = |value: &str| -> Option<String> {
        (swapped.is_some() && value.contains(char::from(byte)))
            .then(|| value.replace(char::from(byte), delimiter.encode_utf8(&mut [0; 4])))
    };
    // A field of column `j` (`None`: not a column's, as under `__parsed_extra`).
    let mut sharing: Vec<Sharing> = Vec::new();
    let mut string = |out: &mut PackedWriter, j: Option<usize>, value: &str| {
        let restored = restore(value);
        let value = restored.as_deref().unwrap_or(value);
        let column = j.filter(|&j| j < Sharing::MAX_COLUMNS).and_then(|j| {
            if sharing.len() <= j {
                sharing.resize_with(j + 1, Sharing::default);
            }
            sharing.get_mut(j).filter(|column| column.on)
        });
        match column {
            Some(column) => {
                let repeat = out.shared_string(&mut column.cache, value);
                column.count(repeat);
            }
            None => out.string(value),
        }
    };
    let mut out = PackedWriter::with_capacity(source.len() / 2, source.len());
    // With `header`, once the first row is read: per column, its key (`None`: the field goes
    // to `__parsed_extra`).
    let mut columns: Option<Vec<Option<KeyId>>> = None;
    let extra = out.key(EXTRA_KEY);
    let mut records = Records::new(source, byte);
    let unreadable = || {
        HostError::new(
            HostErrorCode::Internal,
            format!("{at}: a field is not valid UTF-8"),
        )
    };
    out.begin_array();
    while records.next() {
        if records.is_empty_row() {
            continue;
        }
        let fields = records.len();
        if !header {
            out.begin_array();
            for j in 0..fields {
                string(&mut out, Some(j), records.field(j).ok_or_else(unreadable)?);
            }
            out.end();
            continue;
        }
        let Some(columns) = &columns else {
            let names = (0..fields)
                .map(|j| {
                    let value = records.field(j).ok_or_else(unreadable)?;
                    Ok(restore(value).unwrap_or_else(|| value.to_string()))
                })
                .collect::<Result<Vec<_>, HostError>>()?;
            columns = Some(
                rename_duplicates(names)
                    .iter()
                    .map(|name| (name != EXTRA_KEY).then(|| out.key(name)))
                    .collect(),
            );
            continue;
        };
        // papaparse's record: each field under its column's name, in order; the fields past
        // the header (and those under a column literally named `__parsed_extra`) in one array,
        // placed where the first of them is (`row[field] = row[field] || [];
        // row[field].push(value)`).
        out.begin_object();
        let mut extras_written = false;
        for j in 0..fields {
            match columns.get(j).copied().flatten() {
                Some(key) => {
                    out.member(key);
                    string(&mut out, Some(j), records.field(j).ok_or_else(unreadable)?);
                }
                None if extras_written => {}
                None => {
                    extras_written = true;
                    out.member(extra);
                    out.begin_array();
                    for k in j..fields {
                        if columns.get(k).copied().flatten().is_none() {
                            string(&mut out, None, records.field(k).ok_or_else(unreadable)?);
                        }
                    }
                    out.end();
                }
            }
        }
        out.end();
    }
    out.end();
    out.finish()
        .map_err(|e| HostError::new(HostErrorCode::Internal, format!("{at}: {e}")))
}

/// Whether a column's fields are written shared (see `PackedWriter::shared_string`): every
/// column starts shared; one whose fields repeat less than one time in ten over a trial (ids,
/// amounts, free text) goes plain, and stays so.
#[derive(Clone)]
struct Sharing {
    on: bool,
    seen: u32,
    repeats: u32,
    cache: SharedCache,
}

impl Default for Sharing {
    fn default() -> Sharing {
        Sharing {
            on: true,
            seen: 0,
            repeats: 0,
            cache: SharedCache::new(),
        }
    }
}

impl Sharing {
    /// Fields per trial.
    const TRIAL: u32 = 4096;
    /// Columns past this many are written plain (each shared one holds a 16 KiB cache).
    const MAX_COLUMNS: usize = 64;

    fn count(&mut self, repeat: bool) {
        self.seen += 1;
        self.repeats += u32::from(repeat);
        if self.seen == Self::TRIAL {
            self.on = self.repeats * 10 >= self.seen;
            self.seen = 0;
            self.repeats = 0;
            if !self.on {
                self.cache = SharedCache::new();
            }
        }
    }
}

/// papaparse (5.4+) renames a repeated header `h` to `h_<n>`, with `n` the smallest number
/// from the count of `h`s so far whose name is not taken, where every header as written is
/// taken from the start: `c,c,c,c_1` gives `c, c_2, c_3, c_1`, never renaming a real column.
///
/// papaparse probes from the count each time, which is quadratic when the user's own columns
/// occupy the suffixes (`c, c_1 .. c_k` then `k` more `c`s). The probe before left every
/// suffix up to the one it found taken, so the next one starts past it: the same names, and
/// every failed probe is a distinct taken name, so the renaming is linear in the header.
fn rename_duplicates(headers: Vec<String>) -> Vec<String> {
    let mut taken: HashSet<&str> = HashSet::with_capacity(headers.len());
    let mut unique = true;
    for header in &headers {
        unique &= taken.insert(header);
    }
    if unique {
        return headers;
    }
    // Per base name: how many were seen, and the first suffix a later probe may find free.
    let mut bases: HashMap<&str, (usize, usize)> = HashMap::with_capacity(headers.len());
    let mut made: HashSet<String> = HashSet::new();
    let mut renamed = Vec::with_capacity(headers.len());
    for header in &headers {
        let Some((count, next)) = bases.get_mut(header.as_str()) else {
            bases.insert(header, (1, 1));
            renamed.push(header.clone());
            continue;
        };
        let mut suffix = (*count).max(*next);
        let name = loop {
            let name = format!("{header}_{suffix}");
            suffix += 1;
            if !taken.contains(name.as_str()) && !made.contains(&name) {
                break name;
            }
        };
        *count += 1;
        *next = suffix;
        made.insert(name.clone());
        renamed.push(name);
    }
    renamed
}

/// `stringify(rows, {header=true, delimiter=","})`: records (objects) or row arrays -> CSV text.
pub fn stringify(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "csv.stringify";
    let not_rows =
        || HostError::invalid(format!("{AT}: rows must be an array of records or arrays"));
    let Some(Value::Array(rows)) = args.first() else {
        return Err(not_rows());
    };
    let options = options_of(args.get(1));
    let header = bool_option(options, "header", true);
    let delimiter = match option(options, "delimiter") {
        None => ',',
        Some(Value::String(s)) if s.encode_utf16().count() == 1 => s.chars().next().unwrap_or(','),
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: delimiter must be a single character"
            )));
        }
    };
    // papaparse's unparse keeps its default for a refused delimiter.
    let delimiter = if BAD_DELIMITERS.contains(&delimiter) {
        ','
    } else {
        delimiter
    };
    let mut lines: Vec<String> = Vec::with_capacity(rows.len() + 1);
    match rows.first() {
        None => {}
        Some(Value::Object(_)) => {
            // The columns: every record's keys, in first-seen order.
            let mut columns: Vec<&str> = Vec::new();
            let mut seen: HashSet<&str> = HashSet::new();
            let mut records = Vec::with_capacity(rows.len());
            for row in rows {
                let Value::Object(members) = row else {
                    return Err(not_rows());
                };
                let mut record: HashMap<&str, &Value> = HashMap::with_capacity(members.len());
                for (key, value) in members {
                    if seen.insert(key) {
                        columns.push(key);
                    }
                    record.insert(key, value);
                }
                records.push(record);
            }
            if header && !columns.is_empty() {
                lines.push(join(columns.iter().map(|c| (*c).to_string()), delimiter));
            }
            for record in records {
                // papaparse writes a record with no keys as an empty line.
                if record.is_empty() {
                    lines.push(String::new());
                    continue;
                }
                let cells = columns
                    .iter()
                    .map(|c| record.get(c).map_or(Ok(String::new()), |v| cell(v)))
                    .collect::<Result<Vec<_>, _>>();
                lines.push(join(cells?.into_iter(), delimiter));
            }
        }
        Some(Value::Array(_)) => {
            for row in rows {
                let Value::Array(values) = row else {
                    return Err(not_rows());
                };
                let cells = values.iter().map(cell).collect::<Result<Vec<_>, _>>();
                lines.push(join(cells?.into_iter(), delimiter));
            }
        }
        Some(_) => return Err(not_rows()),
    }
    Ok(Value::String(lines.join("\n")))
}

/// One row: each field quoted when papaparse would, joined by the delimiter.
fn join(fields: impl Iterator<Item = String>, delimiter: char) -> String {
    let mut line = String::new();
    for (i, field) in fields.enumerate() {
        if i > 0 {
            line.push(delimiter);
        }
        let quote = field.contains(['\r', '\n', '"', '\u{feff}', delimiter])
            || field.starts_with(' ')
            || field.ends_with(' ');
        if quote {
            line.push('"');
            line.push_str(&field.replace('"', "\"\""));
            line.push('"');
        } else {
            line.push_str(&field);
        }
    }
    line
}

/// A cell's text: strings as-is, numbers and booleans as JavaScript prints them, null and
/// undefined empty, anything else JSON-encoded.
fn cell(value: &Value) -> Result<String, HostError> {
    Ok(match value {
        Value::Undefined | Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => js_number(*n),
        Value::String(s) => s.clone(),
        Value::Bytes(_) | Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            json(value, &mut out, 0)?;
            out
        }
    })
}

/// `JSON.stringify` for a cell value (a Uint8Array encodes as its index-keyed object).
fn json(value: &Value, out: &mut String, depth: usize) -> Result<(), HostError> {
    // No byte limit here: the output cap of the whole text applies.
    crate::limits::write_json(value, out, depth, MAX_CELL_DEPTH, usize::MAX).map_err(|_| {
        HostError::limit(format!(
            "csv.stringify: a cell value nests deeper than the {MAX_CELL_DEPTH} level limit"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodetool_protocol::limits::MAX_HOST_INPUT_CHARS;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    fn obj(members: &[(&str, Value)]) -> Value {
        Value::Object(
            members
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
        )
    }

    fn strings(row: &[&str]) -> Value {
        Value::Array(row.iter().map(|v| s(v)).collect())
    }

    fn opts(members: &[(&str, Value)]) -> Value {
        obj(members)
    }

    fn no_header() -> Value {
        opts(&[("header", Value::Bool(false))])
    }

    #[test]
    fn records_by_default_values_stay_strings() {
        let out = parse(&[s("name,age,zip\nAda,36,007\nBob,,01234\n")]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![
                obj(&[("name", s("Ada")), ("age", s("36")), ("zip", s("007"))]),
                obj(&[("name", s("Bob")), ("age", s("")), ("zip", s("01234"))]),
            ]))
        );
        // Only a header, or nothing at all: no records.
        assert_eq!(parse(&[s("a,b\n")]), Ok(Value::Array(vec![])));
        assert_eq!(parse(&[s("")]), Ok(Value::Array(vec![])));
    }

    #[test]
    fn rows_without_header_and_empty_lines_skipped() {
        let out = parse(&[s("a,b\r\n\r\n1,2\n\n\n3,4"), no_header()]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![
                strings(&["a", "b"]),
                strings(&["1", "2"]),
                strings(&["3", "4"])
            ]))
        );
        // A quoted empty line is one empty field too, and skipped; a line of delimiters is not.
        let out = parse(&[s("a\n\"\"\n,\n"), no_header()]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![strings(&["a"]), strings(&["", ""])]))
        );
        // Old Mac line ends; a quoted CRLF stays inside its field.
        let out = parse(&[s("a,b\r1,\"x\r\ny\"\r"), no_header()]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![
                strings(&["a", "b"]),
                strings(&["1", "x\r\ny"])
            ]))
        );
        // Whitespace is kept.
        assert_eq!(
            parse(&[s(" a , b "), no_header()]),
            Ok(Value::Array(vec![strings(&[" a ", " b "])]))
        );
    }

    #[test]
    fn quoting_edge_cases() {
        let text =
            "\"a,b\",\"say \"\"hi\"\"\",\"line1\nline2\",\"\"\n\"x\"\"\",plain,\"\",\"\"\"\"";
        let out = parse(&[s(text), no_header()]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![
                strings(&["a,b", "say \"hi\"", "line1\nline2", ""]),
                strings(&["x\"", "plain", "", "\""])
            ]))
        );
        // An unclosed quote runs to the end of the input.
        assert_eq!(
            parse(&[s("a,\"b\nc"), no_header()]),
            Ok(Value::Array(vec![strings(&["a", "b\nc"])]))
        );
        // A quote inside an unquoted field is literal.
        assert_eq!(
            parse(&[s("a\"b,c"), no_header()]),
            Ok(Value::Array(vec![strings(&["a\"b", "c"])]))
        );
    }

    #[test]
    fn bom_is_stripped() {
        let out = parse(&[s("\u{feff}id,name\n1,x")]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![obj(&[("id", s("1")), ("name", s("x"))])]))
        );
    }

    #[test]
    fn short_rows_extra_fields_and_duplicate_headers_as_papaparse() {
        let out = parse(&[s("a,b,c\n1\n1,2,3,4,5\n")]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![
                obj(&[("a", s("1"))]),
                obj(&[
                    ("a", s("1")),
                    ("b", s("2")),
                    ("c", s("3")),
                    (EXTRA_KEY, strings(&["4", "5"]))
                ]),
            ]))
        );
        let out = parse(&[s("a,a,a,a_1\n1,2,3,4")]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![obj(&[
                ("a", s("1")),
                ("a_2", s("2")),
                ("a_3", s("3")),
                ("a_1", s("4"))
            ])]))
        );
        // A header literally named __parsed_extra collects into the array, as papaparse does.
        let out = parse(&[s("x,__parsed_extra\n1,2,3")]);
        assert_eq!(
            out,
            Ok(Value::Array(vec![obj(&[
                ("x", s("1")),
                (EXTRA_KEY, strings(&["2", "3"]))
            ])]))
        );
    }

    #[test]
    fn renamed_headers_never_take_a_real_column_name() {
        let names = |list: &[&str]| {
            rename_duplicates(list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        // papaparse 5.7's answers.
        assert_eq!(names(&["c", "c", "c", "c_1"]), ["c", "c_2", "c_3", "c_1"]);
        assert_eq!(names(&["a_1", "a", "a"]), ["a_1", "a", "a_2"]);
        assert_eq!(
            names(&["a", "a_1", "a_1", "a"]),
            ["a", "a_1", "a_1_1", "a_2"]
        );
        assert_eq!(
            names(&["x", "x", "x_1_1", "x_1"]),
            ["x", "x_2", "x_1_1", "x_1"]
        );
    }

    #[test]
    fn renaming_hostile_headers_is_linear() {
        // The user's own c_1..c_k occupy every suffix, then k more c's follow: probing from the
        // count each time would be k² names (4·10⁸ here).
        let k = 20_000;
        let mut header: Vec<String> = vec!["c".into()];
        header.extend((1..=k).map(|i| format!("c_{i}")));
        header.extend((0..k).map(|_| "c".to_string()));
        let renamed = rename_duplicates(header);
        assert_eq!(renamed.len(), 2 * k + 1);
        assert_eq!(renamed[k + 1], format!("c_{}", k + 1));
        assert_eq!(renamed[2 * k], format!("c_{}", 2 * k));
        let distinct: HashSet<&String> = renamed.iter().collect();
        assert_eq!(distinct.len(), renamed.len());
        // 1,500 copies of one 3,000-byte name (4.5 MB of header) renamed as papaparse does.
        let long = "h".repeat(3000);
        let text = format!(
            "{}\n{}",
            vec![long.as_str(); 1500].join(","),
            vec!["1"; 1500].join(",")
        );
        let out = parse(&[s(&text)]);
        let Ok(Value::Array(records)) = out else {
            panic!("parsed: {out:?}")
        };
        let [Value::Object(record)] = records.as_slice() else {
            panic!("one record")
        };
        assert_eq!(record.len(), 1500);
        assert_eq!(record[1499].0, format!("{long}_1499"));
    }

    #[test]
    fn delimiter_auto_detection() {
        let rows = |text: &str| parse(&[s(text), no_header()]);
        assert_eq!(
            rows("a;b;c\n1;2;3"),
            Ok(Value::Array(vec![
                strings(&["a", "b", "c"]),
                strings(&["1", "2", "3"])
            ]))
        );
        assert_eq!(
            rows("a\tb\n1\t2"),
            Ok(Value::Array(vec![
                strings(&["a", "b"]),
                strings(&["1", "2"])
            ]))
        );
        assert_eq!(
            rows("a|b\n1|2"),
            Ok(Value::Array(vec![
                strings(&["a", "b"]),
                strings(&["1", "2"])
            ]))
        );
        // Commas inside the values, but the semicolon count is the consistent one.
        assert_eq!(
            rows("name;note\nx;1,2,3\ny;4"),
            Ok(Value::Array(vec![
                strings(&["name", "note"]),
                strings(&["x", "1,2,3"]),
                strings(&["y", "4"])
            ]))
        );
        // Quoted delimiters do not count.
        assert_eq!(
            rows("\"a;b\",c\n\"d;e\",f"),
            Ok(Value::Array(vec![
                strings(&["a;b", "c"]),
                strings(&["d;e", "f"])
            ]))
        );
        // Nothing qualifies: the default comma (one field per row).
        assert_eq!(
            rows("one\ntwo"),
            Ok(Value::Array(vec![strings(&["one"]), strings(&["two"])]))
        );
        // null and "" also mean auto-detect.
        let null = opts(&[("header", Value::Bool(false)), ("delimiter", Value::Null)]);
        assert_eq!(
            parse(&[s("a;b"), null]),
            Ok(Value::Array(vec![strings(&["a", "b"])]))
        );
        let empty = opts(&[("header", Value::Bool(false)), ("delimiter", s(""))]);
        assert_eq!(
            parse(&[s("a|b"), empty]),
            Ok(Value::Array(vec![strings(&["a", "b"])]))
        );
    }

    #[test]
    fn the_most_consistent_delimiter_wins_as_in_papaparse_5_7() {
        // `,` averages more fields (2.33) but varies (3, 1, 3); the tab gives 2, 2, 2.
        assert_eq!(
            parse(&[s("a,b,c\td\ne\tf\ng,h,i\tj"), no_header()]),
            Ok(Value::Array(vec![
                strings(&["a,b,c", "d"]),
                strings(&["e", "f"]),
                strings(&["g,h,i", "j"]),
            ]))
        );
    }

    #[test]
    fn explicit_delimiters() {
        let with = |d: &str| opts(&[("header", Value::Bool(false)), ("delimiter", s(d))]);
        assert_eq!(
            parse(&[s("a;b,c"), with(";")]),
            Ok(Value::Array(vec![strings(&["a", "b,c"])]))
        );
        // A non-ASCII delimiter, including one inside a quoted field.
        assert_eq!(
            parse(&[s("a§b§\"c§d\"\n1§2§3"), with("§")]),
            Ok(Value::Array(vec![
                strings(&["a", "b", "c§d"]),
                strings(&["1", "2", "3"])
            ]))
        );
        // A refused delimiter falls back to the comma, as papaparse's Parser does.
        assert_eq!(
            parse(&[s("a,b"), with("\"")]),
            Ok(Value::Array(vec![strings(&["a", "b"])]))
        );
        let message = Err(HostError::invalid(
            "csv.parse: delimiter must be a single character",
        ));
        assert_eq!(parse(&[s("a"), with(";;")]), message);
        // One character as JavaScript counts them: an astral one is two.
        assert_eq!(parse(&[s("a"), with("😀")]), message);
        assert_eq!(
            parse(&[s("a"), opts(&[("delimiter", Value::Number(1.0))])]),
            message
        );
    }

    #[test]
    fn parse_argument_errors_and_cap() {
        assert_eq!(
            parse(&[Value::Number(1.0)]),
            Err(HostError::invalid("csv.parse: text must be a string"))
        );
        assert_eq!(
            parse(&[]),
            Err(HostError::invalid("csv.parse: text must be a string"))
        );
        let at_cap = s(&"x".repeat(MAX_HOST_INPUT_CHARS));
        assert!(parse(&[at_cap, no_header()]).is_ok());
        let over = s(&"x".repeat(MAX_HOST_INPUT_CHARS + 1));
        assert_eq!(
            parse(&[over]),
            Err(HostError::new(
                HostErrorCode::InputTooLarge,
                "csv.parse: input exceeds the 5242880 character limit"
            ))
        );
    }

    #[test]
    fn stringify_records_with_union_header() {
        let rows = Value::Array(vec![
            obj(&[("a", Value::Number(1.0)), ("b", s("x"))]),
            obj(&[("c", Value::Bool(true)), ("a", Value::Number(2.5))]),
        ]);
        assert_eq!(
            stringify(std::slice::from_ref(&rows)),
            Ok(s("a,b,c\n1,x,\n2.5,,true"))
        );
        assert_eq!(stringify(&[rows, no_header()]), Ok(s("1,x,\n2.5,,true")));
        assert_eq!(stringify(&[Value::Array(vec![])]), Ok(s("")));
        // Records without keys write empty lines, as unparse does.
        assert_eq!(
            stringify(&[Value::Array(vec![obj(&[]), obj(&[])])]),
            Ok(s("\n"))
        );
    }

    #[test]
    fn stringify_writes_a_record_without_keys_as_an_empty_line() {
        // papaparse 5.7's unparse of its own test rows.
        let rows = Value::Array(vec![
            obj(&[("a", Value::Null), ("b", s(" "))]),
            obj(&[]),
            obj(&[("a", s("1")), ("b", s("2"))]),
        ]);
        assert_eq!(stringify(&[rows]), Ok(s("a,b\n,\" \"\n\n1,2")));
    }

    #[test]
    fn stringify_arrays_and_values() {
        let rows = Value::Array(vec![
            Value::Array(vec![
                s("a"),
                Value::Null,
                Value::Undefined,
                Value::Number(-0.0),
                Value::Number(1e21),
                Value::Number(1e-7),
            ]),
            Value::Array(vec![
                Value::Number(123456789012.0),
                Value::Number(0.1),
                Value::Number(f64::NAN),
                Value::Bool(false),
            ]),
            Value::Array(vec![
                obj(&[("k", s("v")), ("u", Value::Undefined)]),
                Value::Array(vec![Value::Number(1.0), Value::Undefined]),
                Value::Bytes(vec![7, 8]),
            ]),
        ]);
        // Arrays are written as-is, whatever `header` says.
        let out = stringify(&[rows]);
        assert_eq!(
            out,
            Ok(s(
                "a,,,0,1e+21,1e-7\n123456789012,0.1,NaN,false\n\"{\"\"k\"\":\"\"v\"\"}\",\"[1,null]\",\"{\"\"0\"\":7,\"\"1\"\":8}\""
            ))
        );
    }

    #[test]
    fn stringify_quoting() {
        let rows = Value::Array(vec![Value::Array(vec![
            s("a,b"),
            s("say \"hi\""),
            s("l1\nl2"),
            s(" lead"),
            s("trail "),
            s("cr\r"),
            s("in side"),
            s(""),
        ])]);
        assert_eq!(
            stringify(&[rows]),
            Ok(s(
                "\"a,b\",\"say \"\"hi\"\"\",\"l1\nl2\",\" lead\",\"trail \",\"cr\r\",in side,"
            ))
        );
        let rows = Value::Array(vec![Value::Array(vec![s("a;b"), s("c,d")])]);
        assert_eq!(
            stringify(&[rows, opts(&[("delimiter", s(";"))])]),
            Ok(s("\"a;b\";c,d"))
        );
    }

    #[test]
    fn stringify_errors() {
        let message = Err(HostError::invalid(
            "csv.stringify: rows must be an array of records or arrays",
        ));
        assert_eq!(stringify(&[s("a,b")]), message);
        assert_eq!(stringify(&[obj(&[("a", s("b"))])]), message);
        assert_eq!(stringify(&[]), message);
        assert_eq!(stringify(&[Value::Array(vec![s("a")])]), message);
        // Mixed shapes are refused rather than guessed.
        assert_eq!(
            stringify(&[Value::Array(vec![obj(&[]), Value::Array(vec![])])]),
            message
        );
        assert_eq!(
            stringify(&[Value::Array(vec![Value::Array(vec![]), obj(&[])])]),
            message
        );
        let delimiter = Err(HostError::invalid(
            "csv.stringify: delimiter must be a single character",
        ));
        let rows = Value::Array(vec![]);
        assert_eq!(
            stringify(&[rows.clone(), opts(&[("delimiter", s(""))])]),
            delimiter
        );
        assert_eq!(
            stringify(&[rows.clone(), opts(&[("delimiter", s("ab"))])]),
            delimiter
        );
        assert_eq!(
            stringify(&[rows, opts(&[("delimiter", Value::Bool(true))])]),
            delimiter
        );
        // Hostile nesting inside a cell is refused, not overflowed.
        let mut deep = Value::Null;
        for _ in 0..(MAX_CELL_DEPTH + 2) {
            deep = Value::Array(vec![deep]);
        }
        let out = stringify(&[Value::Array(vec![Value::Array(vec![deep])])]);
        assert_eq!(
            out,
            Err(HostError::limit(
                "csv.stringify: a cell value nests deeper than the 512 level limit"
            ))
        );
    }

    #[test]
    fn round_trip() {
        let records = Value::Array(vec![
            obj(&[
                ("id", s("007")),
                ("text", s("a, \"quoted\"\nmulti-line value ")),
                ("empty", s("")),
            ]),
            obj(&[("id", s("2")), ("text", s("plain")), ("empty", s("x"))]),
        ]);
        for delimiter in [",", ";", "\t", "|", "§"] {
            let csv = stringify(&[records.clone(), opts(&[("delimiter", s(delimiter))])]);
            let Ok(Value::String(csv)) = csv else {
                panic!("stringify failed: {csv:?}")
            };
            // Explicit, and guessed (the guesser has no "§").
            assert_eq!(
                parse(&[s(&csv), opts(&[("delimiter", s(delimiter))])]),
                Ok(records.clone()),
                "{delimiter}"
            );
            if delimiter != "§" {
                assert_eq!(
                    parse(&[s(&csv)]),
                    Ok(records.clone()),
                    "{delimiter} guessed"
                );
            }
        }
        let rows = Value::Array(vec![
            strings(&["a", "b"]),
            strings(&["", "1"]),
            strings(&["only"]),
        ]);
        let Ok(Value::String(csv)) = stringify(std::slice::from_ref(&rows)) else {
            panic!("stringify failed")
        };
        assert_eq!(parse(&[s(&csv), no_header()]), Ok(rows));
    }

    /// Every record as the `csv` crate reads it (what `parse` used before `Records`).
    fn csv_crate_records(text: &str, delimiter: u8) -> Vec<Vec<String>> {
        reader(text.as_bytes(), delimiter)
            .records()
            .map(|row| row.map(|row| row.iter().map(str::to_string).collect()))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn records_of(text: &str, delimiter: u8) -> Vec<Vec<String>> {
        let mut records = Records::new(text, delimiter);
        let mut all = Vec::new();
        while records.next() {
            all.push(
                (0..records.len())
                    .map(|j| records.field(j).map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_else(|| panic!("field")),
            );
        }
        all
    }

    #[test]
    fn records_read_as_the_csv_crate_reads_them() {
        for text in [
            "",
            "a",
            "a,b\n1,2",
            "a,b\n1,2\n",
            "\n\n\na\n\n",
            "\u{feff}a,b\n\u{feff}c,\"d\"\n\u{feff}e",
            "\"\u{feff}q\"\n\u{feff}x\n",
            "a\r\n",
            "a\r\nb\rc\n\"d\"\r\ne\r\n\r\n",
            "\"a,b\",c\n\"unclosed\nx,y",
            "a\"b,\"c\"d,\"\"\"\"\n,,\n \", \n",
            "x\"\r\n,\n",
        ] {
            for delimiter in [b',', b';'] {
                assert_eq!(
                    records_of(text, delimiter),
                    csv_crate_records(text, delimiter),
                    "{text:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_as_the_csv_crate_reads_it(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["a", "é", ",", ";", "\"", "\r", "\n", "\r\n", " ", "\u{feff}", "\"\""]),
                0..40,
            )
        ) {
            let text = parts.concat();
            proptest::prop_assert_eq!(records_of(&text, b','), csv_crate_records(&text, b','));
        }
    }

    #[test]
    fn js_numbers() {
        for (n, text) in [
            (1.0, "1"),
            (-1.5, "-1.5"),
            (100.0, "100"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e-6, "0.0000015"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123.456, "123.456"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::NEG_INFINITY, "-Infinity"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(js_number(n), text);
        }
    }
}
