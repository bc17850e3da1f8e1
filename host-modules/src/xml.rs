//! `xml`: parse XML into plain objects (quick-xml), shaped like the reference's
//! fast-xml-parser output (`attributeNamePrefix: "@_"`, `parseTagValue: false`,
//! `parseAttributeValue: false`, `trimValues: true`).
//!
//! The shape: `{root: value}`. An element's value is its trimmed text when it has only text
//! (leaves stay strings: "007" stays "007"), "" when it is empty, and otherwise an object of
//! its children (a repeated child name becomes an array, in document order), its text under
//! `#text` (trimmed text runs and CDATA sections concatenated, as fast-xml-parser does) and
//! then its attributes as `@_name` strings (trimmed, entities decoded; dropped with
//! `attributes: false`). Comments, processing instructions, the DOCTYPE and the `<?xml ...?>`
//! declaration are left out (fast-xml-parser keeps a `?xml` key; NodeTool does not).
//!
//! Line ends are normalised first, as XML requires (section 2.11): `\r\n` and a lone `\r`
//! become `\n` everywhere, text, attribute values and CDATA alike (`&#13;` still decodes to CR).
//!
//! Entities: the five predefined ones and numeric character references are decoded (CDATA is
//! kept verbatim); any other `&name;` stays as written. A `&` that starts no reference is
//! ill-formed, in text and in attribute values alike. Nothing from a DTD is expanded, so no
//! external entity is ever fetched and no internal one can amplify the input.
//!
//! Well-formedness is checked while parsing (one root element, matching and closed tags,
//! valid names, quoted and unique attributes with whitespace between them, nothing but
//! whitespace outside the root, the declaration only at the very start); a failure is `xml.parse: invalid XML (<message>)`.
//! The tree is built with an explicit stack capped at [`MAX_DEPTH`] open elements, so hostile
//! nesting can neither recurse nor grow without bound, and an element's attributes are checked
//! for repeats through a set, so one element with 100,000 attributes is linear too.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use nodetool_protocol::value::Value;
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use crate::error::HostError;
use crate::limits::{bool_option, options_of, require_text};

const AT: &str = "xml.parse";

/// The most elements that may be open at once.
pub const MAX_DEPTH: usize = 512;

/// The key of an element's text when it has children or attributes.
const TEXT_KEY: &str = "#text";

/// The prefix of attribute keys.
const ATTRIBUTE_PREFIX: &str = "@_";

/// `parse(text, {attributes=true})` -> a plain object.
pub fn parse(args: &[Value]) -> Result<Value, HostError> {
    let text = require_text(AT, args.first(), "text")?;
    let attributes = bool_option(options_of(args.get(1)), "attributes", true);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = normalise_line_ends(text);
    build(&text, attributes)
}

/// XML's end-of-line handling: `\r\n` and a lone `\r` become `\n`.
fn normalise_line_ends(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(cr) = rest.find('\r') {
        out.push_str(&rest[..cr]);
        out.push('\n');
        rest = &rest[cr + 1..];
        rest = rest.strip_prefix('\n').unwrap_or(rest);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// One open element while its content is read.
#[derive(Default)]
struct Frame {
    name: String,
    attributes: Vec<(String, Value)>,
    members: Vec<(String, Value)>,
    /// Member key -> its index in `members`.
    index: HashMap<String, usize>,
    /// Raw text not yet trimmed and decoded (comments do not end a run, as in
    /// fast-xml-parser).
    pending: String,
    /// The element's text so far.
    text: String,
}

impl Frame {
    fn new(name: String, attributes: Vec<(String, Value)>) -> Frame {
        Frame {
            name,
            attributes,
            ..Frame::default()
        }
    }

    /// Ends a text run: trimmed, decoded, appended.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let run = js_trim(&self.pending);
        if !run.is_empty() {
            let decoded = decode_entities(run);
            self.text.push_str(&decoded);
        }
        self.pending.clear();
    }

    /// Adds a child, turning a repeated name into an array.
    fn add(&mut self, key: String, value: Value) {
        match self.index.get(&key).and_then(|&i| self.members.get_mut(i)) {
            Some((_, Value::Array(items))) => items.push(value),
            Some((_, existing)) => {
                let first = std::mem::replace(existing, Value::Null);
                *existing = Value::Array(vec![first, value]);
            }
            None => {
                self.index.insert(key.clone(), self.members.len());
                self.members.push((key, value));
            }
        }
    }

    /// The element's value (fast-xml-parser's `compress`).
    fn finish(mut self) -> (String, Value) {
        self.flush();
        let mut members = self.members;
        if !self.text.is_empty() {
            members.push((TEXT_KEY.to_string(), Value::String(self.text)));
        }
        let value = if !self.attributes.is_empty() {
            members.extend(self.attributes);
            Value::Object(members)
        } else if members.is_empty() {
            Value::String(String::new())
        } else if members.len() == 1 && members[0].0 == TEXT_KEY {
            members.pop().map_or(Value::Null, |(_, text)| text)
        } else {
            Value::Object(members)
        };
        (self.name, value)
    }
}

/// The document: at most one root element, whitespace around it.
#[derive(Default)]
struct Document {
    root: Option<(String, Value)>,
    /// Whether anything (even whitespace) came before the current event.
    started: bool,
}

fn build(text: &str, keep_attributes: bool) -> Result<Value, HostError> {
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    // A `&` that starts no reference is an error (`Event::GeneralRef` carries the rest).
    config.allow_dangling_amp = false;
    config.check_end_names = true;
    config.expand_empty_elements = false;
    config.trim_text(false);

    let mut stack: Vec<Frame> = Vec::new();
    let mut document = Document::default();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| located(text, &e.to_string(), reader.error_position()))?;
        let at = || reader.buffer_position();
        match event {
            Event::Decl(_) if document.started => {
                return Err(located(
                    text,
                    "the XML declaration is allowed only at the start of the document",
                    at(),
                ));
            }
            Event::Start(start) | Event::Empty(start)
                if stack.is_empty() && document.root.is_some() =>
            {
                let name = utf8(start.name().as_ref()).into_owned();
                return Err(located(
                    text,
                    &format!("multiple root elements (a second one, <{name}>, follows the first)"),
                    at(),
                ));
            }
            Event::Start(start) => {
                let frame = open(&start, keep_attributes, |message| {
                    located(text, message, at())
                })?;
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep());
                }
                if let Some(parent) = stack.last_mut() {
                    parent.flush();
                }
                stack.push(frame);
            }
            Event::Empty(start) => {
                let frame = open(&start, keep_attributes, |message| {
                    located(text, message, at())
                })?;
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep());
                }
                close(&mut stack, &mut document, frame);
            }
            Event::End(_) => {
                // quick-xml has already matched the name against the open tag.
                let Some(frame) = stack.pop() else {
                    return Err(located(text, "a closing tag without an open element", at()));
                };
                close(&mut stack, &mut document, frame);
            }
            Event::Text(run) => match stack.last_mut() {
                Some(frame) => frame.pending.push_str(&utf8(&run)),
                None if js_trim(&utf8(&run)).is_empty() => {}
                None => return Err(located(text, "text outside the root element", at())),
            },
            Event::GeneralRef(reference) if !is_reference(&reference) => {
                return Err(located(text, NOT_A_REFERENCE, at()));
            }
            Event::GeneralRef(reference) => match stack.last_mut() {
                Some(frame) => {
                    frame.pending.push('&');
                    frame.pending.push_str(&utf8(&reference));
                    frame.pending.push(';');
                }
                None => return Err(located(text, "text outside the root element", at())),
            },
            Event::CData(data) => match stack.last_mut() {
                Some(frame) => {
                    frame.flush();
                    frame.text.push_str(&utf8(&data));
                }
                None => return Err(located(text, "CDATA outside the root element", at())),
            },
            Event::PI(_) => {
                // fast-xml-parser ends the text run at a processing instruction.
                if let Some(frame) = stack.last_mut() {
                    frame.flush();
                }
            }
            Event::Decl(_) | Event::Comment(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
        document.started = true;
    }
    if let Some(open) = stack.last() {
        return Err(located(
            text,
            &format!("unclosed tag <{}>", open.name),
            text.len() as u64,
        ));
    }
    match document.root {
        Some((name, value)) => Ok(Value::Object(vec![(name, value)])),
        None => Err(HostError::malformed(format!(
            "{AT}: invalid XML (no root element)"
        ))),
    }
}

/// A finished element goes to its parent, or becomes the root.
fn close(stack: &mut [Frame], document: &mut Document, frame: Frame) {
    let (name, value) = frame.finish();
    match stack.last_mut() {
        Some(parent) => {
            parent.flush();
            parent.add(name, value);
        }
        None => document.root = Some((name, value)),
    }
}

/// The depth cap's error.
fn too_deep() -> HostError {
    HostError::limit(format!(
        "{AT}: elements nest deeper than the {MAX_DEPTH} level limit"
    ))
}

/// A start tag's frame: its name and (when kept) its attributes, both checked; `located` makes
/// a reason the error at the tag.
fn open(
    start: &BytesStart<'_>,
    keep_attributes: bool,
    located: impl Fn(&str) -> HostError,
) -> Result<Frame, HostError> {
    let name = utf8(start.name().as_ref()).into_owned();
    if !is_xml_name(&name) {
        return Err(located(&format!("{name:?} is not a valid tag name")));
    }
    let mut attributes = Vec::new();
    // quick-xml's own repeat check compares each key with every earlier one (quadratic in the
    // attributes of one element); a set does it in linear time.
    let mut keys: HashSet<&[u8]> = HashSet::new();
    let raw = start.attributes_raw();
    for attribute in start.attributes().with_checks(false) {
        let attribute =
            attribute.map_err(|e| located(&format!("error while parsing attribute: {e}")))?;
        let key = utf8(attribute.key.as_ref());
        if !is_xml_name(&key) {
            return Err(located(&format!("{key:?} is not a valid attribute name")));
        }
        if !keys.insert(attribute.key.0) {
            return Err(located(&format!("attribute {key:?} is repeated")));
        }
        if let Some(message) = bare_ampersand(&attribute.value) {
            return Err(located(&format!("attribute {key:?}: {message}")));
        }
        if keep_attributes {
            let value = decode_entities(js_trim(&utf8(&attribute.value)));
            attributes.push((format!("{ATTRIBUTE_PREFIX}{key}"), Value::String(value)));
        }
    }
    if let Some(message) = unseparated_attribute(raw) {
        return Err(located(&message));
    }
    Ok(Frame::new(name, attributes))
}

/// An attribute value that closes its quote and is followed by anything but whitespace or the
/// end of the tag (`a="1"b="2"`), which XML forbids.
fn unseparated_attribute(raw: &[u8]) -> Option<String> {
    let mut quote: Option<u8> = None;
    let mut just_closed = false;
    for (i, &b) in raw.iter().enumerate() {
        if std::mem::take(&mut just_closed) && !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            let next: String = String::from_utf8_lossy(&raw[i..])
                .chars()
                .take_while(|c| !matches!(c, ' ' | '=' | '\t' | '\n' | '\r'))
                .take(40)
                .collect();
            return Some(format!("attribute {next:?} has no whitespace before it"));
        }
        match quote {
            Some(q) if b == q => {
                quote = None;
                just_closed = true;
            }
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None => {}
        }
    }
    None
}

/// Why a raw attribute value holds a `&` that starts no reference, if it does.
fn bare_ampersand(value: &[u8]) -> Option<&'static str> {
    let mut rest = value;
    while let Some(amp) = rest.iter().position(|&b| b == b'&') {
        let after = &rest[amp + 1..];
        let end = after.iter().position(|&b| b == b';');
        if !end.is_some_and(|end| is_reference(&after[..end])) {
            return Some(NOT_A_REFERENCE);
        }
        rest = end.map_or(&[][..], |end| &after[end + 1..]);
    }
    None
}

const NOT_A_REFERENCE: &str = "a \"&\" that starts no reference (write &amp;)";

/// Whether what stands between `&` and `;` is a reference's name: an XML name, `#` digits or
/// `#x` hex digits.
fn is_reference(name: &[u8]) -> bool {
    match name.strip_prefix(b"#") {
        Some(number) => match number.strip_prefix(b"x") {
            Some(hex) => !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit),
            None => !number.is_empty() && number.iter().all(u8::is_ascii_digit),
        },
        None => std::str::from_utf8(name).is_ok_and(is_xml_name),
    }
}

/// `invalid XML (<message> at line N)`.
fn located(text: &str, message: &str, offset: u64) -> HostError {
    let offset = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let line = text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    HostError::malformed(format!("{AT}: invalid XML ({message} at line {line})"))
}

/// Input slices split at ASCII markup, so they are always UTF-8; lossy keeps that a non-issue.
fn utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// JavaScript's `String.prototype.trim` (Unicode white space and line terminators, plus the
/// BOM, but not U+0085).
fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}')
}

/// Decodes `&lt;` `&gt;` `&amp;` `&apos;` `&quot;` and `&#N;` / `&#xH;`; anything else that
/// starts with `&` is kept as written.
fn decode_entities(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        // The longest reference we decode is `#x10FFFF`; look no further for the `;`.
        let end = after.bytes().take(10).position(|b| b == b';');
        match end.and_then(|end| entity(&after[..end]).map(|c| (c, end))) {
            Some((c, end)) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    let code = match name {
        "lt" => return Some('<'),
        "gt" => return Some('>'),
        "amp" => return Some('&'),
        "apos" => return Some('\''),
        "quot" => return Some('"'),
        _ => {
            let number = name.strip_prefix('#')?;
            match number.strip_prefix('x') {
                Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()?
                }
                Some(_) => return None,
                None if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) => {
                    number.parse::<u32>().ok()?
                }
                None => return None,
            }
        }
    };
    // XML forbids NUL; surrogates and values past U+10FFFF are not characters.
    char::from_u32(code).filter(|&c| c != '\0')
}

/// An XML 1.0 `Name` (namespace prefixes are part of the name).
fn is_xml_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(is_name_start) && chars.all(|c| is_name_start(c) || matches!(c, '-' | '.' | '0'..='9' | '\u{b7}' | '\u{300}'..='\u{36f}' | '\u{203f}'..='\u{2040}'))
}

fn is_name_start(c: char) -> bool {
    matches!(c,
        ':' | 'A'..='Z' | '_' | 'a'..='z'
        | '\u{c0}'..='\u{d6}' | '\u{d8}'..='\u{f6}' | '\u{f8}'..='\u{2ff}' | '\u{370}'..='\u{37d}'
        | '\u{37f}'..='\u{1fff}' | '\u{200c}'..='\u{200d}' | '\u{2070}'..='\u{218f}'
        | '\u{2c00}'..='\u{2fef}' | '\u{3001}'..='\u{d7ff}' | '\u{f900}'..='\u{fdcf}'
        | '\u{fdf0}'..='\u{fffd}' | '\u{10000}'..='\u{effff}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HostErrorCode;
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

    /// The value, or the message of a malformed-input error.
    fn xml(text: &str) -> Result<Value, String> {
        parse(&[s(text)]).map_err(malformed)
    }

    fn no_attributes(text: &str) -> Result<Value, String> {
        parse(&[s(text), obj(&[("attributes", Value::Bool(false))])]).map_err(malformed)
    }

    fn malformed(e: HostError) -> String {
        assert_eq!(e.code(), HostErrorCode::MalformedInput, "{e}");
        e.into_message()
    }

    #[test]
    fn elements_attributes_and_arrays() {
        let text = r#"<?xml version="1.0" encoding="UTF-8"?>
<catalog id="c1">
  <book id="b1" lang=" en "><title>Rust</title><price>007</price></book>
  <book id="b2"><title>XML &amp; you</title><price>12.50</price></book>
  <note/>
  <empty></empty>
</catalog>"#;
        let book1 = obj(&[
            ("title", s("Rust")),
            ("price", s("007")),
            ("@_id", s("b1")),
            ("@_lang", s("en")),
        ]);
        let book2 = obj(&[
            ("title", s("XML & you")),
            ("price", s("12.50")),
            ("@_id", s("b2")),
        ]);
        let catalog = obj(&[
            ("book", Value::Array(vec![book1, book2])),
            ("note", s("")),
            ("empty", s("")),
            ("@_id", s("c1")),
        ]);
        assert_eq!(xml(text), Ok(obj(&[("catalog", catalog)])));

        let book1 = obj(&[("title", s("Rust")), ("price", s("007"))]);
        let book2 = obj(&[("title", s("XML & you")), ("price", s("12.50"))]);
        let catalog = obj(&[
            ("book", Value::Array(vec![book1, book2])),
            ("note", s("")),
            ("empty", s("")),
        ]);
        assert_eq!(no_attributes(text), Ok(obj(&[("catalog", catalog)])));
    }

    #[test]
    fn leaves_stay_strings() {
        assert_eq!(
            xml("<a><zip>007</zip><n>1e3</n><b>true</b></a>"),
            Ok(obj(&[(
                "a",
                obj(&[("zip", s("007")), ("n", s("1e3")), ("b", s("true"))])
            )]))
        );
        assert_eq!(xml("<v>  007  </v>"), Ok(obj(&[("v", s("007"))])));
        assert_eq!(
            xml(r#"<v n="007"/>"#),
            Ok(obj(&[("v", obj(&[("@_n", s("007"))]))]))
        );
    }

    #[test]
    fn text_with_attributes_and_mixed_content() {
        assert_eq!(
            xml(r#"<p id="1">hi</p>"#),
            Ok(obj(&[("p", obj(&[("#text", s("hi")), ("@_id", s("1"))]))]))
        );
        assert_eq!(
            no_attributes(r#"<p id="1">hi</p>"#),
            Ok(obj(&[("p", s("hi"))]))
        );
        // Each text run is trimmed and the runs are concatenated (fast-xml-parser's shape).
        assert_eq!(
            xml("<p>hello <b>big</b> world</p>"),
            Ok(obj(&[(
                "p",
                obj(&[("b", s("big")), ("#text", s("helloworld"))])
            )]))
        );
        // Repeated names gather in document order, wherever they appear.
        assert_eq!(
            xml("<r><x>1</x><y/><x>2</x><x>3</x></r>"),
            Ok(obj(&[(
                "r",
                obj(&[
                    ("x", Value::Array(vec![s("1"), s("2"), s("3")])),
                    ("y", s(""))
                ])
            )]))
        );
        // Whitespace-only content is empty.
        assert_eq!(xml("<r>\n  \t</r>"), Ok(obj(&[("r", s(""))])));
    }

    #[test]
    fn cdata_entities_comments_and_instructions() {
        assert_eq!(
            xml("<a><![CDATA[ <raw> &amp; ]]></a>"),
            Ok(obj(&[("a", s(" <raw> &amp; "))]))
        );
        assert_eq!(xml("<a>x<![CDATA[y]]>z</a>"), Ok(obj(&[("a", s("xyz"))])));
        assert_eq!(
            xml("<a>&lt;&gt;&amp;&apos;&quot;&#65;&#x42;&#x1F600;</a>"),
            Ok(obj(&[("a", s("<>&'\"AB😀"))]))
        );
        // Unknown entities stay as written; `&amp;lt;` is one level.
        assert_eq!(
            xml("<a>Tom &amp; Jerry &nbsp; &amp;lt; &#0; &#xD800;</a>"),
            Ok(obj(&[("a", s("Tom & Jerry &nbsp; &lt; &#0; &#xD800;"))]))
        );
        assert_eq!(
            xml(r#"<a t="&lt;x&gt; &amp; y"/>"#),
            Ok(obj(&[("a", obj(&[("@_t", s("<x> & y"))]))]))
        );
        // Comments do not split a text run; processing instructions do.
        assert_eq!(
            xml("<a>one <!-- c --> two</a>"),
            Ok(obj(&[("a", s("one  two"))]))
        );
        assert_eq!(
            xml("<a>one <?pi x?> two</a>"),
            Ok(obj(&[("a", s("onetwo"))]))
        );
        // The declaration, top-level comments and PIs and the DOCTYPE are left out.
        let text = "<?xml version=\"1.0\"?>\n<!-- c -->\n<?style x?>\n<!DOCTYPE r>\n<r>1</r>\n<!-- after -->\n";
        assert_eq!(xml(text), Ok(obj(&[("r", s("1"))])));
        assert_eq!(xml("\u{feff}<r/>"), Ok(obj(&[("r", s(""))])));
        assert_eq!(
            xml("<?xml-stylesheet href=\"a.xsl\"?><r/>"),
            Ok(obj(&[("r", s(""))]))
        );
    }

    #[test]
    fn namespaces_are_kept_in_names() {
        let text = r#"<s:root xmlns:s="urn:x"><s:item s:k="v">1</s:item></s:root>"#;
        let item = obj(&[("#text", s("1")), ("@_s:k", s("v"))]);
        assert_eq!(
            xml(text),
            Ok(obj(&[(
                "s:root",
                obj(&[("s:item", item), ("@_xmlns:s", s("urn:x"))])
            )]))
        );
    }

    #[test]
    fn no_entity_expansion_from_a_dtd() {
        let text = r#"<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd"><!ENTITY y "boom">]><r>&x;&y;</r>"#;
        assert_eq!(xml(text), Ok(obj(&[("r", s("&x;&y;"))])));
        let laughs = r#"<!DOCTYPE r [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;">]><r>&b;</r>"#;
        assert_eq!(xml(laughs), Ok(obj(&[("r", s("&b;"))])));
    }

    #[test]
    fn invalid_xml() {
        let invalid = |text: &str| match xml(text) {
            Err(message) => {
                assert!(message.starts_with("xml.parse: invalid XML ("), "{message}");
                message
            }
            Ok(value) => panic!("{text:?} parsed as {value:?}"),
        };
        assert!(invalid("<a><b></a>").contains("expected `</b>`, but `</a>` was found"));
        assert!(invalid("<a><b></b>").contains("unclosed tag <a>"));
        assert!(invalid("<a></a></b>").contains("does not match any open tag"));
        assert!(invalid("not xml at all").contains("text outside the root element"));
        assert!(invalid("<a/>trailing").contains("text outside the root element"));
        assert!(invalid("<a/><b/>").contains("multiple root elements"));
        assert_eq!(invalid(""), "xml.parse: invalid XML (no root element)");
        assert_eq!(invalid("  \n "), "xml.parse: invalid XML (no root element)");
        assert!(invalid("<a b=1/>").contains("attribute"));
        assert!(invalid("<a b/>").contains("attribute"));
        assert!(invalid(r#"<a b="1" b="2"/>"#).contains("attribute"));
        // Attributes are checked even when they are dropped.
        assert!(no_attributes("<a b/>").is_err_and(|m| {
            m.starts_with("xml.parse: invalid XML (error while parsing attribute")
        }));
        assert!(invalid("<1a/>").contains("\"1a\" is not a valid tag name"));
        assert!(invalid(r#"<a 1b="x"/>"#).contains("is not a valid attribute name"));
        assert!(invalid("<a").contains("tag not closed"));
        assert!(invalid("<a><!-- never closed").contains("comment not closed"));
        assert!(invalid("<a><![CDATA[x</a>").contains("CDATA not closed"));
        assert!(
            invalid(" <?xml version=\"1.0\"?><a/>")
                .contains("declaration is allowed only at the start")
        );
        // The line of the failure is named.
        assert!(invalid("<a>\n<b>\n</c>\n</a>").ends_with("at line 3)"));
        assert_eq!(
            parse(&[Value::Null]),
            Err(HostError::invalid("xml.parse: text must be a string"))
        );
    }

    #[test]
    fn line_ends_are_normalised() {
        assert_eq!(xml("<a>x\r\ny\rz</a>"), Ok(obj(&[("a", s("x\ny\nz"))])));
        assert_eq!(
            xml("<a t=\"1\r\n2\"><![CDATA[p\r\nq]]></a>"),
            Ok(obj(&[(
                "a",
                obj(&[("#text", s("p\nq")), ("@_t", s("1\n2"))])
            )]))
        );
        // A character reference is not a line end in the input: it stays a CR.
        assert_eq!(xml("<a>x&#13;y</a>"), Ok(obj(&[("a", s("x\ry"))])));
        // Lines are still counted right in messages.
        assert!(xml("<a>\r\n<b>\r\n</c>\r\n</a>").is_err_and(|m| m.ends_with("at line 3)")));
    }

    #[test]
    fn bare_ampersands_and_unseparated_attributes_are_ill_formed() {
        for text in [
            "<a>Tom & Jerry</a>",
            "<a>&</a>",
            "<a>x &; y</a>",
            "<a t=\"x & y\"/>",
            "<a t=\"&#;\"/>",
            "<a t=\"&#xZ;\"/>",
            "<a t=\"&\"/>",
            r#"<a b="1"c="2"/>"#,
            r#"<a b='1'c="2">x</a>"#,
        ] {
            assert!(
                xml(text).is_err_and(|m| m.starts_with("xml.parse: invalid XML (")),
                "{text:?} was accepted"
            );
        }
        assert!(xml(r#"<a b="1"c="2"/>"#).is_err_and(|m| m.contains("\"c\" has no whitespace")));
        assert_eq!(
            xml("<a t=\"&amp;&#38;&#x26;&nbsp;\" u='\"'\tv=\"'\"\n/>"),
            Ok(obj(&[(
                "a",
                obj(&[("@_t", s("&&&&nbsp;")), ("@_u", s("\"")), ("@_v", s("'"))])
            )]))
        );
    }

    #[test]
    fn many_attributes_on_one_element_stay_linear() {
        // 100,000 attributes: quick-xml's pairwise repeat check would be 5·10⁹ comparisons.
        let n = 100_000;
        let text = format!(
            "<r{}/>",
            (0..n).map(|i| format!(" a{i}=\"{i}\"")).collect::<String>()
        );
        let Ok(Value::Object(root)) = xml(&text) else {
            panic!("parse failed")
        };
        assert!(matches!(&root[0].1, Value::Object(members) if members.len() == n));
        let repeated = format!(
            "<r{} a7=\"again\"/>",
            (0..n).map(|i| format!(" a{i}=\"{i}\"")).collect::<String>()
        );
        assert!(xml(&repeated).is_err_and(|m| m.contains("attribute \"a7\" is repeated")));
    }

    #[test]
    fn nesting_is_capped() {
        let nested = |depth: usize| format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
        let Ok(mut value) = xml(&nested(MAX_DEPTH)) else {
            panic!("the cap itself must parse")
        };
        let mut depth = 0;
        while let Value::Object(mut members) = value {
            depth += 1;
            value = members.pop().map_or(Value::Null, |(_, v)| v);
        }
        assert_eq!((depth, value), (MAX_DEPTH, s("")));
        let message = Err(HostError::limit(
            "xml.parse: elements nest deeper than the 512 level limit",
        ));
        let xml = |text: &str| parse(&[s(text)]);
        assert_eq!(xml(&nested(MAX_DEPTH + 1)), message);
        assert_eq!(
            xml(&format!(
                "{}<a/>{}",
                "<a>".repeat(MAX_DEPTH),
                "</a>".repeat(MAX_DEPTH)
            )),
            message
        );
        // Hostile depth far past the cap, unclosed, fails fast without recursion.
        assert_eq!(xml(&"<a>".repeat(1_000_000)), message);
    }

    #[test]
    fn input_cap_over_by_one() {
        let body = "x".repeat(MAX_HOST_INPUT_CHARS - 7);
        assert_eq!(xml(&format!("<a>{body}</a>")), Ok(obj(&[("a", s(&body))])));
        let over = format!("<a>{body}x</a>");
        assert_eq!(
            parse(&[s(&over)]),
            Err(HostError::new(
                HostErrorCode::InputTooLarge,
                "xml.parse: input exceeds the 5242880 character limit"
            ))
        );
    }

    #[test]
    fn many_distinct_siblings_stay_linear() {
        let text = format!(
            "<r>{}</r>",
            (0..50_000).map(|i| format!("<e{i}/>")).collect::<String>()
        );
        let Ok(Value::Object(root)) = xml(&text) else {
            panic!("parse failed")
        };
        assert!(matches!(&root[0].1, Value::Object(members) if members.len() == 50_000));
    }
}
