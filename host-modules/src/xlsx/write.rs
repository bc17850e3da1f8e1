//! `xlsx.write`: the sheets described, checked against the caps and planned before
//! rust_xlsxwriter writes anything.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use nodetool_protocol::value::Value;
use rust_xlsxwriter::{Color, Format, FormatPattern, Workbook, Worksheet};

use super::{
    MAX_CELL_CHARS, MAX_COLUMNS, MAX_ROWS, MAX_STYLED_CELLS, MAX_WRITE_CELLS, MAX_WRITE_SHEETS,
    WRITE, column_letters, js_len, kind_of, member, truthy,
};
use crate::error::HostError;
use crate::limits::{bool_option, js_number, js_string, options_of};

/// One sheet as the caller described it.
pub(super) struct SheetSpec<'a> {
    name: String,
    rows: &'a [Value],
    header: bool,
    columns: Option<Vec<String>>,
    styles: Vec<&'a [(String, Value)]>,
}

/// A sheet's columns: header keys, or the widest row.
pub(super) enum Shape {
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
pub fn write(args: &[Value]) -> Result<Value, HostError> {
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
    let failed = |e: rust_xlsxwriter::XlsxError| HostError::internal(format!("{WRITE}: {e}"));
    for plan in plans {
        let sheet = workbook.add_worksheet();
        sheet.set_name(plan.name.as_str()).map_err(failed)?;
        build_sheet(sheet, plan, auto_fit).map_err(failed)?;
    }
    workbook.save_to_buffer().map(Value::Bytes).map_err(failed)
}

fn check_sheet_name(name: &str) -> Result<(), HostError> {
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
    Err(HostError::invalid(format!(
        "{WRITE}: \"{name}\" is not a valid sheet name ({reason})"
    )))
}

/// A sheet as given: its name, its members (given as an object) and its rows (given directly).
type SheetEntry<'a> = (String, &'a [(String, Value)], Option<&'a Value>);

/// The sheet list, from either accepted shape, with per-sheet options resolved.
pub(super) fn read_sheet_specs<'a>(
    sheets: Option<&'a Value>,
    options: &[(String, Value)],
) -> Result<Vec<SheetSpec<'a>>, HostError> {
    let default_header = bool_option(options, "header", true);
    let mut entries: Vec<SheetEntry<'a>> = Vec::new();
    match sheets {
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                let Value::Object(members) = item else {
                    return Err(HostError::invalid(format!(
                        "{WRITE}: sheet {index} must be an object with a name"
                    )));
                };
                let name = match member(members, "name") {
                    None | Some(Value::Null) => String::new(),
                    Some(v) => js_string(v).trim().to_string(),
                };
                if name.is_empty() {
                    return Err(HostError::invalid(format!(
                        "{WRITE}: sheet {index} has no name"
                    )));
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
            return Err(HostError::invalid(format!(
                "{WRITE}: sheets must be {{name: rows}} or [{{name, rows}}], not {}",
                kind_of(other)
            )));
        }
    }
    if entries.is_empty() {
        return Err(HostError::invalid(format!(
            "{WRITE}: a workbook needs at least one sheet"
        )));
    }
    if entries.len() > MAX_WRITE_SHEETS {
        return Err(HostError::limit(format!(
            "{WRITE}: {} sheets exceeds the {MAX_WRITE_SHEETS} sheet limit",
            entries.len()
        )));
    }

    // Excel compares sheet names case-insensitively.
    let mut seen = HashSet::new();
    let mut specs = Vec::with_capacity(entries.len());
    for (name, members, direct_rows) in entries {
        if !seen.insert(name.to_lowercase()) {
            return Err(HostError::invalid(format!(
                "{WRITE}: duplicate sheet name \"{name}\""
            )));
        }
        check_sheet_name(&name)?;
        let rows = match direct_rows.or_else(|| member(members, "rows")) {
            Some(Value::Array(rows)) => rows.as_slice(),
            _ => {
                return Err(HostError::invalid(format!(
                    "{WRITE}: sheet \"{name}\" must hold an array of rows"
                )));
            }
        };
        let columns = match member(members, "columns") {
            None | Some(Value::Null) => None,
            Some(Value::Array(columns)) => Some(columns.iter().map(js_string).collect()),
            Some(_) => {
                return Err(HostError::invalid(format!(
                    "{WRITE}: sheet \"{name}\" columns must be an array of names"
                )));
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
                        return Err(HostError::invalid(format!(
                            "{WRITE}: every sheet \"{name}\" styles entry must be an object"
                        )));
                    };
                    out.push(style.as_slice());
                }
                out
            }
            Some(_) => {
                return Err(HostError::invalid(format!(
                    "{WRITE}: sheet \"{name}\" styles must be an array"
                )));
            }
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
pub(super) fn check_shapes(specs: &[SheetSpec<'_>]) -> Result<Vec<Shape>, HostError> {
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
            HostError::limit(format!(
                "{WRITE}: the workbook exceeds the {MAX_WRITE_CELLS} cell limit"
            ))
        })?;
        if columns > MAX_COLUMNS as usize {
            return Err(HostError::limit(format!(
                "{WRITE}: sheet \"{}\" has {columns} columns; a sheet holds at most {MAX_COLUMNS}",
                spec.name
            )));
        }
        shapes.push(shape);
    }
    Ok(shapes)
}

/// Checks every row's shape and finds the sheet's columns.
fn shape_of(spec: &SheetSpec<'_>) -> Result<Shape, HostError> {
    if spec.header {
        for (index, row) in spec.rows.iter().enumerate() {
            if !matches!(row, Value::Object(_)) {
                return Err(HostError::invalid(format!(
                    "{WRITE}: sheet \"{}\" row {index} must be an object, not {} (pass header: false for arrays)",
                    spec.name,
                    kind_of(Some(row))
                )));
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
                return Err(HostError::invalid(format!(
                    "{WRITE}: sheet \"{}\" row {index} must be an array when header is false, not {}",
                    spec.name,
                    kind_of(Some(row))
                )));
            };
            widest = widest.max(cells.len());
        }
        Ok(Shape::Array(widest))
    }
}

/// What one guest value becomes in a cell (None: an empty cell).
fn cell_of(value: &Value) -> Result<Option<Cell<'_>>, HostError> {
    Ok(match value {
        Value::Undefined | Value::Null => None,
        Value::Bool(b) => Some(Cell::Bool(*b)),
        Value::Number(n) if n.is_finite() => Some(Cell::Number(*n)),
        // NaN and the infinities have no cell form (JSON makes them null too).
        Value::Number(_) => None,
        Value::String(s) => Some(Cell::Text(Cow::Borrowed(s))),
        Value::Bytes(_) => {
            return Err(HostError::invalid(format!(
                "{WRITE}: a cell cannot hold bytes"
            )));
        }
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
) -> Result<SheetPlan<'a>, HostError> {
    let mut plan = SheetPlan {
        name: spec.name.clone(),
        cells: Vec::new(),
        widths: Vec::new(),
        styles: HashMap::new(),
    };
    let mut put = |row: usize, col: usize, cell: Option<Cell<'a>>| -> Result<(), HostError> {
        // Both were bounded by the cell and column caps already.
        let (row32, col16) = (row as u32, col as u16);
        let length = match &cell {
            None => 0,
            Some(Cell::Text(text)) => {
                if text.chars().count() > MAX_CELL_CHARS {
                    return Err(HostError::limit(format!(
                        "{WRITE}: sheet \"{}\" cell {}{} holds more than {MAX_CELL_CHARS} characters",
                        spec.name,
                        column_letters(col as u32),
                        row + 1
                    )));
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
            return Err(HostError::limit(format!(
                "{WRITE}: styles cover more than {MAX_STYLED_CELLS} cells"
            )));
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
fn parse_range(range: Option<&Value>) -> Result<(u32, u32, u32, u32), HostError> {
    let range = match range {
        Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
        _ => {
            return Err(HostError::invalid(format!(
                "{WRITE}: a style needs a range like \"A1:C20\""
            )));
        }
    };
    let bad = || HostError::invalid(format!("{WRITE}: \"{range}\" is not a cell range"));
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
fn rgb(value: &Value, label: &str) -> Result<u32, HostError> {
    let text = js_string(value);
    let text = text.trim();
    let text = text.strip_prefix('#').unwrap_or(text);
    let valid = (text.len() == 6 || text.len() == 8) && text.chars().all(|c| c.is_ascii_hexdigit());
    let argb = if valid {
        u32::from_str_radix(text, 16).ok()
    } else {
        None
    };
    argb.map(|argb| argb & 0x00FF_FFFF).ok_or_else(|| {
        HostError::invalid(format!(
            "{WRITE}: {label} must be a hex colour like \"FFCC00\""
        ))
    })
}

/// A font size in points: a number (or numeric string) from 1 to 409, Excel's range.
fn font_size(value: &Value) -> Result<f64, HostError> {
    let size = match value {
        Value::Number(n) => Some(*n),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    size.filter(|s| s.is_finite() && (1.0..=409.0).contains(s))
        .ok_or_else(|| HostError::invalid(format!("{WRITE}: size must be a number from 1 to 409")))
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
