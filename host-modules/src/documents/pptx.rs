//! `pptx`: the text of a PowerPoint file, whole (`extractText`) or per slide (`extractSlides`),
//! from its PresentationML parts (zip + quick-xml).
//!
//! The reference ran office-text-extractor for the whole text and matched `<a:t>` with a regular
//! expression per `ppt/slides/slideN.xml` for slides, sorted by file number. This module reads
//! the slides in the order the presentation lists them (`ppt/presentation.xml`, which is the
//! order a viewer shows; file numbers need not follow it), one line per paragraph rather than
//! one per run (a sentence split over bold and plain runs stays one line), and adds each
//! slide's `title` (its title placeholder) and `notes` (the speaker notes), as the issue asks.
//! Hidden slides are included and marked `hidden: true`.
//!
//! Bounds: [`MAX_PPTX_ENTRIES`] entries, [`MAX_PPTX_INFLATED_BYTES`] inflated in all,
//! [`MAX_SLIDES`] slides, the XML depth cap, and the text budget of every document call.

use std::collections::HashMap;

use nodetool_protocol::value::Value;

use super::{
    DocError, TextBudget, XmlNode, XmlWalker, attr, check_deadline, folder_of, local,
    relationships, rels_part_of,
};
use crate::archive::{ArchiveLimits, SafeArchive};
use crate::error::HostError;
use crate::limits::require_bytes;

/// Entries a .pptx may hold.
pub const MAX_PPTX_ENTRIES: usize = 10_000;
/// Bytes one call may inflate from a .pptx, every part read together.
pub const MAX_PPTX_INFLATED_BYTES: u64 = 100 * 1024 * 1024;
/// Slides one presentation may have.
pub const MAX_SLIDES: usize = 5_000;

/// One slide's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slide {
    pub title: String,
    pub text: String,
    pub notes: String,
    pub hidden: bool,
}

/// `extractText(bytes)` -> every slide's text, in presentation order, joined by a blank line.
pub fn extract_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "pptx.extractText";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let slides = read_slides(bytes).map_err(|e| e.at(AT))?;
    let texts: Vec<&str> = slides
        .iter()
        .map(|s| s.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Value::String(texts.join("\n\n")))
}

/// `extractSlides(bytes)` -> `[{index, slideNumber, title, text, notes, hidden}]`.
pub fn extract_slides(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "pptx.extractSlides";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let slides = read_slides(bytes).map_err(|e| e.at(AT))?;
    Ok(Value::Array(
        slides
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                Value::Object(vec![
                    ("index".into(), Value::Number(i as f64)),
                    ("slideNumber".into(), Value::Number((i + 1) as f64)),
                    ("title".into(), Value::String(s.title)),
                    ("text".into(), Value::String(s.text)),
                    ("notes".into(), Value::String(s.notes)),
                    ("hidden".into(), Value::Bool(s.hidden)),
                ])
            })
            .collect(),
    ))
}

/// Every slide of the presentation, in the order it shows them.
pub fn read_slides(bytes: &[u8]) -> Result<Vec<Slide>, DocError> {
    let limits = ArchiveLimits {
        max_entries: MAX_PPTX_ENTRIES,
        max_inflated: MAX_PPTX_INFLATED_BYTES,
    };
    let mut archive =
        SafeArchive::open(bytes, limits).map_err(|e| DocError::archive(e, "a .pptx"))?;
    let archive_error = |e| DocError::archive(e, "a .pptx");
    let presentation = "ppt/presentation.xml";
    let Some(xml) = archive.read_text(presentation).map_err(archive_error)? else {
        return Err(DocError::NotDocument(
            "the bytes are not a .pptx file (it has no ppt/presentation.xml)".into(),
        ));
    };
    let rels_name = rels_part_of(presentation);
    let rels: HashMap<String, String> =
        match archive.read_text(&rels_name).map_err(archive_error)? {
            Some(r) => relationships(&r, &rels_name, "ppt")?
                .into_iter()
                .filter(|(_, kind, _, external)| kind == "slide" && !external)
                .map(|(id, _, target, _)| (id, target))
                .collect(),
            None => HashMap::new(),
        };
    let mut parts = Vec::new();
    let mut walker = XmlWalker::new(&xml, presentation, false);
    while let Some(node) = walker.next()? {
        if let XmlNode::Open(start) = node
            && local(&start) == b"sldId"
            && let Some(target) = relationship_id(&start).and_then(|rid| rels.get(&rid))
        {
            parts.push(target.clone());
            if parts.len() > MAX_SLIDES {
                return Err(DocError::TooLarge(format!(
                    "the presentation has more than {MAX_SLIDES} slides"
                )));
            }
        }
    }
    let mut budget = TextBudget::standard();
    let mut slides = Vec::with_capacity(parts.len());
    for part in parts {
        check_deadline()?;
        let Some(xml) = archive.read_text(&part).map_err(archive_error)? else {
            continue;
        };
        let content = shapes_text(&xml, &part, &mut budget)?;
        let slide_rels = rels_part_of(&part);
        let notes_part = match archive.read_text(&slide_rels).map_err(archive_error)? {
            Some(r) => relationships(&r, &slide_rels, folder_of(&part))?
                .into_iter()
                .find(|(_, kind, _, external)| kind == "notesSlide" && !external)
                .map(|(_, _, target, _)| target),
            None => None,
        };
        let notes = match notes_part {
            Some(notes_part) => match archive.read_text(&notes_part).map_err(archive_error)? {
                Some(xml) => shapes_text(&xml, &notes_part, &mut budget)?.notes_body,
                None => String::new(),
            },
            None => String::new(),
        };
        slides.push(Slide {
            title: content.title,
            text: content.text,
            notes,
            hidden: content.hidden,
        });
    }
    Ok(slides)
}

/// The text of one slide (or notes) part.
struct PartText {
    title: String,
    text: String,
    /// The text of the body placeholders only (for a notes part: the notes themselves, not the
    /// slide number or the slide's picture).
    notes_body: String,
    hidden: bool,
}

fn shapes_text(xml: &str, part: &str, budget: &mut TextBudget) -> Result<PartText, DocError> {
    let mut walker = XmlWalker::new(xml, part, false);
    let mut out = PartText {
        title: String::new(),
        text: String::new(),
        notes_body: String::new(),
        hidden: false,
    };
    // The placeholder type of the shape being read, and the depth its shape opened at.
    let mut shape: Option<(usize, String)> = None;
    let mut paragraph = String::new();
    let mut in_paragraph = false;
    while let Some(node) = walker.next()? {
        match node {
            XmlNode::Open(start) => match local(&start).as_slice() {
                b"sld" => {
                    out.hidden = attr(&start, "show").is_some_and(|v| v == "0" || v == "false")
                }
                b"sp" | b"graphicFrame" => shape = Some((walker.depth(), String::new())),
                b"ph" => {
                    if let Some((_, kind)) = shape.as_mut() {
                        *kind = attr(&start, "type").unwrap_or_else(|| "body".into());
                    }
                }
                b"p" => {
                    in_paragraph = true;
                    paragraph.clear();
                }
                b"t" if in_paragraph => paragraph.push_str(&walker.element_text()?),
                b"br" if in_paragraph => paragraph.push('\n'),
                _ => {}
            },
            XmlNode::Close(name) => match name.as_slice() {
                b"p" if in_paragraph => {
                    in_paragraph = false;
                    let line = paragraph.trim_end();
                    if line.is_empty() {
                        continue;
                    }
                    budget.charge(line.len() * 2)?;
                    let kind = shape.as_ref().map_or("", |(_, k)| k.as_str());
                    push_line(&mut out.text, line);
                    if matches!(kind, "title" | "ctrTitle") {
                        push_line(&mut out.title, line);
                    }
                    if kind == "body" {
                        push_line(&mut out.notes_body, line);
                    }
                }
                b"sp" | b"graphicFrame"
                    if shape.as_ref().is_some_and(|(d, _)| *d > walker.depth()) =>
                {
                    shape = None;
                }
                _ => {}
            },
            XmlNode::Text(_) => {}
        }
    }
    Ok(out)
}

/// The `r:id` of an element (the relationship id; a plain `id` beside it is something else).
fn relationship_id(start: &quick_xml::events::BytesStart<'_>) -> Option<String> {
    start
        .attributes()
        .with_checks(false)
        .flatten()
        .find(|a| a.key.local_name().as_ref() == b"id" && a.key.prefix().is_some())
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
}

fn push_line(out: &mut String, line: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::pptxgen;
    use crate::documents::tests::{bytes, mutants, obj, png, s, text_of, zip_of};

    pub(crate) fn sample() -> Vec<u8> {
        let png = png(4, 2, 255);
        let spec = obj(&[
            ("title", s("Deck & co")),
            (
                "slides",
                Value::Array(vec![
                    obj(&[
                        ("title", s("Welcome")),
                        ("notes", s("Say hello\nThen start")),
                        (
                            "items",
                            Value::Array(vec![
                                obj(&[
                                    ("type", s("text")),
                                    ("text", s("First <line>")),
                                    ("bold", Value::Bool(true)),
                                ]),
                                obj(&[
                                    ("type", s("shape")),
                                    ("shape", s("ellipse")),
                                    ("fill", s("#f00")),
                                ]),
                            ]),
                        ),
                    ]),
                    obj(&[
                        ("title", s("Agenda")),
                        ("background", s("#EEEEEE")),
                        (
                            "items",
                            Value::Array(vec![
                                obj(&[
                                    ("type", s("text")),
                                    (
                                        "bullets",
                                        Value::Array(vec![
                                            s("one"),
                                            obj(&[
                                                ("text", s("two")),
                                                ("level", Value::Number(1.0)),
                                            ]),
                                        ]),
                                    ),
                                ]),
                                obj(&[
                                    ("type", s("image")),
                                    ("data", Value::Bytes(png)),
                                    ("w", Value::Number(2.0)),
                                ]),
                                obj(&[
                                    ("type", s("table")),
                                    ("header", Value::Bool(true)),
                                    (
                                        "rows",
                                        Value::Array(vec![
                                            Value::Array(vec![s("k"), s("v")]),
                                            Value::Array(vec![s("a"), Value::Number(1.0)]),
                                        ]),
                                    ),
                                ]),
                            ]),
                        ),
                    ]),
                ]),
            ),
        ]);
        match pptxgen::build(&[spec]) {
            Ok(Value::Bytes(b)) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pptxgen_build_then_extract() {
        let deck = sample();
        assert_eq!(sample(), deck, "equal descriptions give equal bytes");
        assert_eq!(
            read_slides(&deck),
            Ok(vec![
                Slide {
                    title: "Welcome".into(),
                    text: "Welcome\nFirst <line>".into(),
                    notes: "Say hello\nThen start".into(),
                    hidden: false,
                },
                Slide {
                    title: "Agenda".into(),
                    text: "Agenda\none\ntwo\nk\nv\na\n1".into(),
                    notes: String::new(),
                    hidden: false,
                },
            ])
        );
        assert_eq!(
            text_of(extract_text(&[bytes(deck.clone())])),
            "Welcome\nFirst <line>\n\nAgenda\none\ntwo\nk\nv\na\n1"
        );
        let Ok(Value::Array(slides)) = extract_slides(&[bytes(deck)]) else {
            panic!("slides")
        };
        assert_eq!(
            slides[0],
            obj(&[
                ("index", Value::Number(0.0)),
                ("slideNumber", Value::Number(1.0)),
                ("title", s("Welcome")),
                ("text", s("Welcome\nFirst <line>")),
                ("notes", s("Say hello\nThen start")),
                ("hidden", Value::Bool(false)),
            ])
        );
    }

    #[test]
    fn pptxgen_argument_errors() {
        let e = |spec: Value| {
            pptxgen::build(&[spec])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert_eq!(e(obj(&[])), "pptxgen.build: provide at least one slide");
        assert_eq!(
            e(obj(&[("slides", Value::Array(vec![obj(&[]); 201]))])),
            "pptxgen.build: at most 200 slides"
        );
        assert_eq!(
            e(obj(&[("slides", Value::Array(vec![s("x")]))])),
            "pptxgen.build: slides[0] must be an object"
        );
        assert_eq!(
            e(obj(&[(
                "slides",
                Value::Array(vec![obj(&[(
                    "items",
                    Value::Array(vec![obj(&[("type", s("video"))])])
                )])])
            )])),
            "pptxgen.build: slides[0].items[0] has unknown type \"video\""
        );
        assert!(
            e(obj(&[(
                "slides",
                Value::Array(vec![obj(&[(
                    "items",
                    Value::Array(vec![obj(&[("type", s("image"))])])
                )])])
            )]))
            .starts_with("pptxgen.build: slides[0].items[0]: data must be a Uint8Array")
        );
    }

    #[test]
    fn slides_follow_the_presentation_order_not_file_numbers() {
        // Swap the two slides in the presentation's list: the reading order follows.
        let deck = sample();
        let mut archive =
            ::zip::ZipArchive::new(std::io::Cursor::new(&deck)).unwrap_or_else(|e| panic!("{e}"));
        let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..archive.len() {
            use std::io::Read;
            let mut f = archive.by_index(i).unwrap_or_else(|e| panic!("{e}"));
            let mut data = Vec::new();
            f.read_to_end(&mut data).unwrap_or_else(|e| panic!("{e}"));
            if f.name() == "ppt/presentation.xml" {
                let xml = String::from_utf8_lossy(&data)
                    .replace("r:id=\"rIdSlide1\"", "r:id=\"TMP\"")
                    .replace("r:id=\"rIdSlide2\"", "r:id=\"rIdSlide1\"")
                    .replace("r:id=\"TMP\"", "r:id=\"rIdSlide2\"");
                data = xml.into_bytes();
            }
            parts.push((f.name().to_string(), data));
        }
        let mut w = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, data) in &parts {
            use std::io::Write;
            w.start_file(name.as_str(), ::zip::write::SimpleFileOptions::default())
                .unwrap_or_else(|e| panic!("{e}"));
            w.write_all(data).unwrap_or_else(|e| panic!("{e}"));
        }
        let swapped = w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        let titles: Vec<String> = read_slides(&swapped)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .map(|s| s.title)
            .collect();
        assert_eq!(titles, ["Agenda", "Welcome"]);
    }

    #[test]
    fn hostile_pptx_files() {
        let e = |b: Vec<u8>| {
            extract_text(&[bytes(b)])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert!(
            e(b"PK junk".to_vec())
                .starts_with("pptx.extractText: the bytes are not a .pptx file (not a ZIP archive")
        );
        assert_eq!(
            e(zip_of(&[("a.txt", b"x")])),
            "pptx.extractText: the bytes are not a .pptx file (it has no ppt/presentation.xml)"
        );
        // More slides listed than allowed.
        let ids: String = (0..=MAX_SLIDES)
            .map(|i| format!("<p:sldId id=\"{}\" r:id=\"rId1\"/>", 256 + i))
            .collect();
        let presentation = format!(
            "<p:presentation xmlns:p=\"p\" xmlns:r=\"r\"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>"
        );
        let rels = "<Relationships><Relationship Id=\"rId1\" Type=\"x/slide\" Target=\"slides/slide1.xml\"/></Relationships>";
        assert_eq!(
            e(zip_of(&[
                ("ppt/presentation.xml", presentation.as_bytes()),
                ("ppt/_rels/presentation.xml.rels", rels.as_bytes())
            ])),
            "pptx.extractText: the presentation has more than 5000 slides"
        );
        // One slide part listed many times is read, and charged, every time: 100 listings of a
        // 2 MiB slide pass the inflation budget.
        let ids: String = (0..100)
            .map(|i| format!("<p:sldId id=\"{}\" r:id=\"rId1\"/>", 256 + i))
            .collect();
        let presentation = format!(
            "<p:presentation xmlns:p=\"p\" xmlns:r=\"r\"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>"
        );
        let slide = format!("<p:sld xmlns:p=\"p\">{}</p:sld>", " ".repeat(2 << 20));
        assert_eq!(
            e(zip_of(&[
                ("ppt/presentation.xml", presentation.as_bytes()),
                ("ppt/_rels/presentation.xml.rels", rels.as_bytes()),
                ("ppt/slides/slide1.xml", slide.as_bytes()),
            ])),
            "pptx.extractText: the archive inflates past the 104857600 byte limit"
        );
    }

    #[test]
    fn mutated_pptx_files_never_panic() {
        let real = sample();
        for m in mutants(&real, 0xdead_beef, 200) {
            let r = std::panic::catch_unwind(|| read_slides(&m));
            assert!(r.is_ok(), "a mutated .pptx panicked the reader");
        }
    }
}
