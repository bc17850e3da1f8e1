//! Writing Open Packaging parts: escaped XML text and the deflated ZIP package with a fixed
//! timestamp, so equal descriptions give byte-identical files.

use std::io::{Cursor, Write};

use ::zip::write::SimpleFileOptions;
use ::zip::{CompressionMethod, ZipWriter};

use super::DocError;
use crate::limits::MAX_RESULT_BYTES;

/// `text` as XML character data: escaped, and with the characters XML 1.0 cannot hold (controls
/// other than tab, newline and carriage return, lone surrogates cannot occur in a `str`)
/// dropped.
pub fn xml_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Refuses a document whose text passes the result cap while it is still being written (the
/// escaped XML of a part can be several times the text it holds).
pub fn check_written(bytes: usize) -> Result<(), DocError> {
    if bytes > MAX_RESULT_BYTES {
        return Err(DocError::OutputTooLarge(format!(
            "the document would be larger than the {MAX_RESULT_BYTES} bytes one call may return"
        )));
    }
    Ok(())
}

/// The parts of one package, in the order they are written.
pub struct Package {
    parts: Vec<(String, Vec<u8>)>,
    size: usize,
}

impl Package {
    pub fn new() -> Package {
        Package {
            parts: Vec::new(),
            size: 0,
        }
    }

    /// Adds a part, refusing a package whose parts pass the result cap together.
    pub fn add(
        &mut self,
        name: impl Into<String>,
        data: impl Into<Vec<u8>>,
    ) -> Result<(), DocError> {
        let data = data.into();
        self.size = self.size.saturating_add(data.len());
        check_written(self.size)?;
        self.parts.push((name.into(), data));
        Ok(())
    }

    /// The package as ZIP bytes (`[Content_Types].xml` must have been added first).
    pub fn finish(self) -> Result<Vec<u8>, DocError> {
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data) in &self.parts {
            let failed = |e: &dyn std::fmt::Display| {
                DocError::Internal(format!("part {name:?} could not be written ({e})"))
            };
            writer
                .start_file(name.as_str(), options)
                .map_err(|e| failed(&e))?;
            writer.write_all(data).map_err(|e| failed(&e))?;
        }
        let out = writer
            .finish()
            .map_err(|e| DocError::Internal(format!("the package could not be finished ({e})")))?;
        Ok(out.into_inner())
    }
}

/// The file extension and content type of image bytes the formats embed, or `None`.
pub fn image_kind(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some(("png", "image/png")),
        [0xff, 0xd8, 0xff, ..] => Some(("jpeg", "image/jpeg")),
        [b'G', b'I', b'F', b'8', ..] => Some(("gif", "image/gif")),
        [b'B', b'M', ..] => Some(("bmp", "image/bmp")),
        _ => None,
    }
}

/// An image's pixel size, read from its header only.
pub fn image_pixels(bytes: &[u8]) -> Option<(u32, u32)> {
    image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .into_dimensions()
        .ok()
}

/// JavaScript's `Number(value)` of an optional member, `None` when absent or not finite.
pub fn number_of(value: Option<&nodetool_protocol::value::Value>) -> Option<f64> {
    value
        .map(crate::limits::js_to_number)
        .filter(|n| n.is_finite())
}

/// JavaScript's `Boolean(value)` of an optional member.
pub fn truthy(value: Option<&nodetool_protocol::value::Value>) -> bool {
    use nodetool_protocol::value::Value;
    match value {
        None | Some(Value::Undefined | Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => *n != 0.0 && !n.is_nan(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// A member of a plain object (the last one, as an object keeps it), `undefined` counting as
/// absent.
pub fn member<'a>(
    members: &'a [(String, nodetool_protocol::value::Value)],
    key: &str,
) -> Option<&'a nodetool_protocol::value::Value> {
    use nodetool_protocol::value::Value;
    members
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| !matches!(v, Value::Undefined))
}

/// JavaScript's `String(value ?? "")`.
pub fn string_or_empty(value: Option<&nodetool_protocol::value::Value>) -> String {
    use nodetool_protocol::value::Value;
    match value {
        None | Some(Value::Undefined | Value::Null) => String::new(),
        Some(v) => crate::limits::js_string(v),
    }
}
