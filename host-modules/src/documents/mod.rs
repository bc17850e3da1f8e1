//! The document host modules: `pdf`, `docx`, `mammoth`, `pptx` and `epub` (each its own file),
//! and what they share: the typed error every export answers with, the bounded XML walker the
//! archive formats are read through, and the budget of text a call may produce.
//!
//! Every reader takes bytes and answers plain values; nothing here opens a file, so the modules
//! run unchanged in a worker with no filesystem. The bounds, each a constant beside the code that
//! enforces it: the shared input cap (10 MiB of bytes), an inflation budget per call (see
//! [`crate::archive`]), an XML depth cap ([`MAX_XML_DEPTH`]) with no DTD ever expanded, page,
//! slide and chapter caps, and [`crate::limits::MAX_RESULT_BYTES`] of text out. Time is bounded
//! by the input (every walk is linear in what was inflated) and by the run's deadline, which the
//! sandbox worker enforces by ending the run whatever a host thread is doing.

pub mod docx;
pub mod epub;
pub mod mammoth;
mod ooxml;
pub mod pdf;
pub mod pdflib;
pub mod pptx;
pub mod pptxgen;

#[cfg(test)]
mod tests;

use std::borrow::Cow;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use crate::archive::ArchiveError;
use crate::error::{HostError, HostErrorCode};
use crate::limits::MAX_RESULT_BYTES;

/// Elements one XML part may nest. OOXML and EPUB nest a few dozen deep at most; the cap keeps a
/// crafted part from making the walkers' stacks as deep as the input is long.
pub const MAX_XML_DEPTH: usize = 256;

/// Why a document call failed: the message completes `<id>.<export>: `, and [`DocError::at`]
/// gives it its stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocError {
    /// The bytes are not a document of the module's format.
    NotDocument(String),
    /// The document is encrypted with a password.
    Encrypted(String),
    /// The document passes one of the caps (inflation, pages, depth).
    TooLarge(String),
    /// The result would pass the bytes one call may return.
    OutputTooLarge(String),
    /// The document is of the format but broken past reading.
    Malformed(String),
    /// The run's deadline passed while the document was being read or written.
    DeadlinePassed,
    /// Writing into memory failed: a bug, not the input's fault.
    Internal(String),
}

impl DocError {
    /// The stable code. (Argument errors are the shared input rules'; these classify what a
    /// document itself can do wrong.)
    pub fn code(&self) -> HostErrorCode {
        match self {
            DocError::NotDocument(_) | DocError::Malformed(_) => HostErrorCode::MalformedInput,
            DocError::Encrypted(_) => HostErrorCode::Unsupported,
            DocError::TooLarge(_) => HostErrorCode::LimitExceeded,
            DocError::OutputTooLarge(_) => HostErrorCode::OutputTooLarge,
            DocError::DeadlinePassed => HostErrorCode::DeadlineExceeded,
            DocError::Internal(_) => HostErrorCode::Internal,
        }
    }

    /// The error the guest sees: `<at>: <reason>`, under [`DocError::code`].
    pub fn at(&self, at: &str) -> HostError {
        let message = match self {
            DocError::NotDocument(m)
            | DocError::Encrypted(m)
            | DocError::TooLarge(m)
            | DocError::OutputTooLarge(m)
            | DocError::Malformed(m)
            | DocError::Internal(m) => format!("{at}: {m}"),
            DocError::DeadlinePassed => {
                format!("{at}: the run's deadline passed before the call finished")
            }
        };
        HostError::new(self.code(), message)
    }

    /// An archive failure of a document whose format is `what`, with its article ("a .docx",
    /// "an EPUB").
    pub fn archive(error: ArchiveError, what: &str) -> DocError {
        match error {
            ArchiveError::NotZip(_) => DocError::NotDocument(format!(
                "the bytes are not {what} file ({})",
                error.message()
            )),
            ArchiveError::TooManyEntries { .. }
            | ArchiveError::Overlapping
            | ArchiveError::TooLarge { .. } => DocError::TooLarge(error.message()),
            ArchiveError::Entry { .. } => DocError::Malformed(error.message()),
        }
    }
}

/// Refuses to go on once the run's deadline has passed (a dispatched call knows it; a direct call
/// has none). The sandbox worker ends an overdue run whatever a host thread does; this stops the
/// thread's work too, so an overdue call frees its core.
pub fn check_deadline() -> Result<(), DocError> {
    match crate::call_deadline() {
        Some(deadline) if std::time::Instant::now() >= deadline => Err(DocError::DeadlinePassed),
        _ => Ok(()),
    }
}

/// Steps of work between two looks at the clock.
pub const DEADLINE_STRIDE: usize = 4096;

/// Bytes of text one call may produce, counted as it is made.
pub struct TextBudget {
    left: usize,
}

impl TextBudget {
    /// The standard budget, [`MAX_RESULT_BYTES`].
    pub fn standard() -> TextBudget {
        TextBudget {
            left: MAX_RESULT_BYTES,
        }
    }

    /// Charges `bytes`, refusing past the budget.
    pub fn charge(&mut self, bytes: usize) -> Result<(), DocError> {
        self.left = self.left.checked_sub(bytes).ok_or_else(|| {
            DocError::OutputTooLarge(format!(
                "the document's text comes to more than the {MAX_RESULT_BYTES} bytes one call may return"
            ))
        })?;
        Ok(())
    }
}

/// One step of an XML part, element names without their prefix.
#[derive(Debug, Clone, PartialEq)]
pub enum XmlNode<'a> {
    /// A start tag (an empty element is an `Open` followed by its `Close`).
    Open(BytesStart<'a>),
    /// An end tag, by local name.
    Close(Vec<u8>),
    /// Character data, entities resolved.
    Text(Cow<'a, str>),
}

/// A pull reader over one XML part with the depth cap, end-name checks and no DTD: a document
/// type declaration is refused outright unless the format allows one (XHTML's), and even then
/// its internal subset is never read, so no entity it defines is ever expanded. Unknown named
/// references come back as their literal text.
pub struct XmlWalker<'a> {
    reader: Reader<&'a [u8]>,
    depth: usize,
    allow_doctype: bool,
    pending_close: Option<Vec<u8>>,
    part: String,
    events: usize,
}

impl<'a> XmlWalker<'a> {
    /// A walker over `text`, the part named `part` (for messages).
    pub fn new(text: &'a str, part: &str, allow_doctype: bool) -> XmlWalker<'a> {
        let mut reader = Reader::from_str(text);
        let config = reader.config_mut();
        config.check_end_names = true;
        config.expand_empty_elements = false;
        config.trim_text(false);
        XmlWalker {
            reader,
            depth: 0,
            allow_doctype,
            pending_close: None,
            part: part.to_string(),
            events: 0,
        }
    }

    fn malformed(&self, reason: &dyn std::fmt::Display) -> DocError {
        DocError::Malformed(format!(
            "part {:?} is not well-formed XML ({reason})",
            self.part
        ))
    }

    /// The current nesting depth (0 outside the root).
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The next node, or `None` at the end of the part.
    pub fn next(&mut self) -> Result<Option<XmlNode<'a>>, DocError> {
        if let Some(name) = self.pending_close.take() {
            self.depth -= 1;
            return Ok(Some(XmlNode::Close(name)));
        }
        loop {
            self.events += 1;
            if self.events.is_multiple_of(DEADLINE_STRIDE) {
                check_deadline()?;
            }
            let event = match self.reader.read_event() {
                Ok(event) => event,
                Err(e) => return Err(self.malformed(&e)),
            };
            match event {
                Event::Start(start) | Event::Empty(start) if self.depth >= MAX_XML_DEPTH => {
                    let _ = start;
                    return Err(DocError::TooLarge(format!(
                        "part {:?} nests elements more than {MAX_XML_DEPTH} deep",
                        self.part
                    )));
                }
                Event::Start(start) => {
                    self.depth += 1;
                    return Ok(Some(XmlNode::Open(start)));
                }
                Event::Empty(start) => {
                    self.depth += 1;
                    self.pending_close = Some(start.local_name().as_ref().to_vec());
                    return Ok(Some(XmlNode::Open(start)));
                }
                Event::End(end) => {
                    self.depth = self.depth.saturating_sub(1);
                    return Ok(Some(XmlNode::Close(end.local_name().as_ref().to_vec())));
                }
                Event::Text(text) => {
                    let text = text.decode().map_err(|e| self.malformed(&e))?;
                    return Ok(Some(XmlNode::Text(text)));
                }
                Event::CData(data) => {
                    let text = data.decode().map_err(|e| self.malformed(&e))?;
                    return Ok(Some(XmlNode::Text(Cow::Owned(text.into_owned()))));
                }
                Event::GeneralRef(reference) => {
                    if let Some(c) = reference
                        .resolve_char_ref()
                        .map_err(|e| self.malformed(&e))?
                    {
                        return Ok(Some(XmlNode::Text(Cow::Owned(c.to_string()))));
                    }
                    let name = reference.decode().map_err(|e| self.malformed(&e))?;
                    let text = match named_entity(&name) {
                        Some(s) => Cow::Borrowed(s),
                        None => Cow::Owned(format!("&{name};")),
                    };
                    return Ok(Some(XmlNode::Text(text)));
                }
                Event::DocType(_) if !self.allow_doctype => {
                    return Err(DocError::Malformed(format!(
                        "part {:?} has a document type declaration; DTDs are refused",
                        self.part
                    )));
                }
                Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => {}
                Event::Eof => return Ok(None),
            }
        }
    }

    /// Skips the rest of the element just opened (its content and its end).
    pub fn skip_element(&mut self) -> Result<(), DocError> {
        let target = self.depth.saturating_sub(1);
        while self.depth > target {
            if self.next()?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// The text inside the element just opened, up to its end.
    pub fn element_text(&mut self) -> Result<String, DocError> {
        let target = self.depth.saturating_sub(1);
        let mut text = String::new();
        while self.depth > target {
            match self.next()? {
                Some(XmlNode::Text(t)) => text.push_str(&t),
                Some(_) => {}
                None => break,
            }
        }
        Ok(text)
    }
}

/// The XML entities, plus the HTML ones XHTML chapters use most (an XHTML file may use them
/// only through its DTD, which is never read; naming them here is what browsers do).
fn named_entity(name: &str) -> Option<&'static str> {
    Some(match name {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" => "\u{a0}",
        "shy" => "\u{ad}",
        "ndash" => "\u{2013}",
        "mdash" => "\u{2014}",
        "lsquo" => "\u{2018}",
        "rsquo" => "\u{2019}",
        "ldquo" => "\u{201c}",
        "rdquo" => "\u{201d}",
        "hellip" => "\u{2026}",
        "copy" => "\u{a9}",
        "reg" => "\u{ae}",
        "trade" => "\u{2122}",
        "eacute" => "é",
        "egrave" => "è",
        "agrave" => "à",
        "uuml" => "ü",
        "ouml" => "ö",
        "auml" => "ä",
        "szlig" => "ß",
        _ => return None,
    })
}

/// The value of the attribute whose local name is `name`, entities resolved.
pub fn attr(start: &BytesStart<'_>, name: &str) -> Option<String> {
    // quick-xml's repeat check is quadratic in an element's attributes; none is needed to read.
    start
        .attributes()
        .with_checks(false)
        .flatten()
        .find(|a| a.key.local_name().as_ref() == name.as_bytes())
        .map(|a| attribute_value(&a.value))
}

/// An attribute's raw value with its references resolved (a malformed one is kept as written).
fn attribute_value(raw: &[u8]) -> String {
    let raw = String::from_utf8_lossy(raw);
    match quick_xml::escape::unescape_with(&raw, named_entity) {
        Ok(v) => v.into_owned(),
        Err(_) => raw.into_owned(),
    }
}

/// An element's local name.
pub fn local(start: &BytesStart<'_>) -> Vec<u8> {
    start.local_name().as_ref().to_vec()
}

/// The relationships of an OOXML part (`_rels/<part>.rels`): id -> (type's last segment,
/// target resolved against the part's folder, whether external).
pub fn relationships(
    xml: &str,
    rels_part: &str,
    base_dir: &str,
) -> Result<Vec<(String, String, String, bool)>, DocError> {
    let mut walker = XmlWalker::new(xml, rels_part, false);
    let mut out = Vec::new();
    while let Some(node) = walker.next()? {
        if let XmlNode::Open(start) = node
            && local(&start) == b"Relationship"
        {
            let (Some(id), Some(target)) = (attr(&start, "Id"), attr(&start, "Target")) else {
                continue;
            };
            let kind = attr(&start, "Type").unwrap_or_default();
            let kind = kind.rsplit('/').next().unwrap_or_default().to_string();
            let external = attr(&start, "TargetMode").is_some_and(|m| m == "External");
            let target = if external {
                target
            } else {
                resolve_part(base_dir, &target)
            };
            out.push((id, kind, target, external));
        }
    }
    Ok(out)
}

/// `target` relative to the folder `base_dir` ("word", "ppt/slides"), as a part name: `..` and
/// `.` segments folded, a leading `/` meaning the archive root. Part names are keys only.
pub fn resolve_part(base_dir: &str, target: &str) -> String {
    let target = target.split(['#', '?']).next().unwrap_or_default();
    let mut segments: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base_dir.split('/').filter(|s| !s.is_empty()).collect()
    };
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    percent_decode(&segments.join("/"))
}

/// `%xx` escapes in a URI reference decoded (malformed ones kept as they are).
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folder of a part name ("word/document.xml" -> "word").
pub fn folder_of(part: &str) -> &str {
    part.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The relationships part of `part` ("word/document.xml" -> "word/_rels/document.xml.rels").
pub fn rels_part_of(part: &str) -> String {
    match part.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/_rels/{file}.rels"),
        None => format!("_rels/{part}.rels"),
    }
}

/// Standard base64 with padding (image data URIs).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The media type of image bytes by their signature, else by the part name's extension.
pub fn image_media_type(bytes: &[u8], name: &str) -> &'static str {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xff, 0xd8, 0xff, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => "image/webp",
        [b'B', b'M', ..] => "image/bmp",
        _ => match name
            .rsplit('.')
            .next()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => "image/svg+xml",
            Some("emf") => "image/emf",
            Some("wmf") => "image/wmf",
            Some("tif" | "tiff") => "image/tiff",
            _ => "application/octet-stream",
        },
    }
}
