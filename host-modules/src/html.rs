//! `html`: CSS selection, Markdown and text conversion, and link, media and metadata extraction,
//! on scraper (html5ever, the HTML5 parsing algorithm, and Servo's `selectors` engine).
//!
//! The reference ran cheerio (parse5) and turndown on the host; this module keeps its contract:
//! argument shapes, return shapes, messages, the `select` limit (default 100, clamped to 1000)
//! and the 1,000-item cap of every extractor. Markdown comes from our own walker
//! ([`markdown`]), not a port of turndown: ATX headings, fenced code with its language, `-`
//! bullets, nested lists, links, images and GFM tables.
//!
//! Untrusted input must not be able to take the host down, so beyond the reference's caps: a
//! document may nest elements at most [`parse::MAX_HTML_DEPTH`] deep (the parser's scope checks
//! cost a step per open element, see [`parse`]), every walk over the tree is iterative anyway,
//! a selector is at most [`MAX_SELECTOR_CHARS`] long and nests at most
//! [`MAX_SELECTOR_NESTING`] brackets (the selector parser recurses), `:has()` is refused on a
//! document nested deeper than [`MAX_HAS_DEPTH`] (its matcher recurses once per level), and a
//! result may not exceed [`MAX_HTML_OUTPUT_BYTES`] (nested matches repeat their text, so 1,000
//! of them could otherwise return the page a thousand times).

mod markdown;
mod parse;

use ego_tree::NodeRef;
use ego_tree::iter::Edge;
use nodetool_protocol::value::Value;
use scraper::{ElementRef, Html, Node, Selector};
use url::Url;

use crate::error::{HostError, HostErrorCode};
use crate::limits::{
    is_js_space, js_string, js_to_number, js_trim, option, options_of, require_text,
};

/// Matches `select` returns when the caller names no limit.
pub const DEFAULT_SELECT_HTML_LIMIT: usize = 100;
/// Ceiling for `select`'s `limit` option.
pub const MAX_SELECT_HTML_LIMIT: usize = 1000;
/// Largest number of items any extractor returns.
pub const MAX_EXTRACT_HTML_ITEMS: usize = 1000;
/// Characters a selector may have.
pub const MAX_SELECTOR_CHARS: usize = 10_000;
/// Brackets (`(`, `[`) a selector may nest.
pub const MAX_SELECTOR_NESTING: usize = 32;
/// Element depth past which a `:has()` selector is refused.
pub const MAX_HAS_DEPTH: usize = 256;
/// Bytes of text one call may return.
pub const MAX_HTML_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// What `extractReadableText` answers for a page without text.
const NO_MAIN_CONTENT: &str = "No main content found";

// ---------------------------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------------------------

/// `select(html, selector, {attr?, limit=100})` -> the trimmed text of each match, or the value
/// of attribute `attr` (matches without it are skipped), in document order, at most `limit`.
pub fn select(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.select";
    let source = require_text(AT, args.first(), "html")?;
    let selector = match args.get(1) {
        Some(Value::String(s)) if !js_trim(s).is_empty() => s.as_str(),
        _ => {
            return Err(HostError::invalid(format!(
                "{AT}: selector must be a non-empty string"
            )));
        }
    };
    let options = options_of(args.get(2));
    let attr = option(options, "attr")
        .map(js_string)
        .filter(|a| !a.is_empty());
    let limit = limit_option(options);
    let compiled = parse_selector(AT, selector)?;
    let document = parse::parse_document(AT, source)?;
    guard_has(AT, selector, &document)?;
    let mut budget = Budget::new(AT);
    let mut out = Vec::new();
    for element in matching(&document, &compiled) {
        if out.len() >= limit {
            break;
        }
        let value = match &attr {
            Some(name) => match element.value().attr(name) {
                Some(value) => value.to_string(),
                None => continue,
            },
            None => js_trim(&text_of(element)).to_string(),
        };
        budget.take(value.len())?;
        out.push(Value::String(value));
    }
    Ok(Value::Array(out))
}

/// `toMarkdown(html, {turndown?})` -> the page as Markdown (see [`markdown`] for the rules and
/// the options honoured).
pub fn to_markdown(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.toMarkdown";
    let source = require_text(AT, args.first(), "html")?;
    let options = options_of(args.get(1));
    let style = markdown::Style::from_options(options_of(option(options, "turndown")));
    let document = parse::parse_document(AT, source)?;
    let text = markdown::convert(&document, &style);
    Budget::new(AT).take(text.len())?;
    Ok(Value::String(text))
}

/// `toText(html)` -> the document's text without scripts and styles: runs of spaces and tabs
/// become one space, three or more line breaks become two, and the ends are trimmed.
pub fn to_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.toText";
    let source = require_text(AT, args.first(), "html")?;
    let document = parse::parse_document(AT, source)?;
    let mut text = String::new();
    collect_text(document.tree.root(), &["script", "style"], &mut text);
    Ok(Value::String(js_trim(&squeeze_text(&text)).to_string()))
}

/// `extractLinks(html, baseUrl?)` -> `[{href, text, type}]` for every `a[href]`: `href` as
/// written, its trimmed text, and `"internal"` or `"external"`.
pub fn extract_links(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.extractLinks";
    let source = require_text(AT, args.first(), "html")?;
    let base = base_url(args.get(1));
    let base_parsed = (!base.is_empty()).then(|| Url::parse(&base).ok()).flatten();
    let document = parse::parse_document(AT, source)?;
    let selector = fixed_selector(AT, "a[href]")?;
    let mut budget = Budget::new(AT);
    let mut out = Vec::new();
    for element in matching(&document, &selector).take(MAX_EXTRACT_HTML_ITEMS) {
        let href = element.value().attr("href").unwrap_or_default();
        let text = js_trim(&text_of(element)).to_string();
        budget.take(href.len() + text.len())?;
        let kind = if is_internal(href, base_parsed.as_ref()) {
            "internal"
        } else {
            "external"
        };
        out.push(Value::Object(vec![
            ("href".into(), Value::String(href.to_string())),
            ("text".into(), Value::String(text)),
            ("type".into(), Value::String(kind.into())),
        ]));
    }
    Ok(Value::Array(out))
}

/// `extractImages(html, baseUrl?)` -> the `src` of every `img[src]`, resolved against `baseUrl`.
pub fn extract_images(args: &[Value]) -> Result<Value, HostError> {
    extract_sources("html.extractImages", args, "img[src]")
}

/// `extractAudio(html, baseUrl?)` -> the `src` of every `audio[src]` and `audio source[src]`.
pub fn extract_audio(args: &[Value]) -> Result<Value, HostError> {
    extract_sources("html.extractAudio", args, "audio[src], audio source[src]")
}

/// `extractVideos(html, baseUrl?)` -> the `src` of every `video[src]`, `video source[src]` and
/// `iframe[src]`.
pub fn extract_videos(args: &[Value]) -> Result<Value, HostError> {
    extract_sources(
        "html.extractVideos",
        args,
        "video[src], video source[src], iframe[src]",
    )
}

/// `extractMetadata(html)` -> `{title, description, keywords}`: the first `<title>`'s text (an
/// empty one is `null`) and the `content` of the first `meta[name=description]` and
/// `meta[name=keywords]` (`null` when absent).
pub fn extract_metadata(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.extractMetadata";
    let source = require_text(AT, args.first(), "html")?;
    let document = parse::parse_document(AT, source)?;
    let title = matching(&document, &fixed_selector(AT, "title")?)
        .next()
        .map(text_of)
        .filter(|t| !t.is_empty());
    let meta = |name: &str| -> Result<Option<String>, HostError> {
        let selector = fixed_selector(AT, &format!("meta[name=\"{name}\"]"))?;
        Ok(matching(&document, &selector)
            .next()
            .and_then(|m| m.value().attr("content"))
            .map(str::to_string))
    };
    let (description, keywords) = (meta("description")?, meta("keywords")?);
    let or_null = |v: Option<String>| v.map_or(Value::Null, Value::String);
    Ok(Value::Object(vec![
        ("title".into(), or_null(title)),
        ("description".into(), or_null(description)),
        ("keywords".into(), or_null(keywords)),
    ]))
}

/// `extractReadableText(html)` -> the main content's text, whitespace collapsed: scripts,
/// styles, `nav`, `aside`, `footer` and `header` are removed, then the first non-empty text of
/// `article`, `main`, `[id*=content]`, `[class*=content]` or `body` is taken (each the first
/// element that matches). A page without any is `"No main content found"`.
pub fn extract_readable_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "html.extractReadableText";
    let source = require_text(AT, args.first(), "html")?;
    let mut document = parse::parse_document(AT, source)?;
    let boilerplate = fixed_selector(AT, "script, style, nav, aside, footer, header")?;
    let removed: Vec<_> = matching(&document, &boilerplate).map(|e| e.id()).collect();
    for id in removed {
        if let Some(mut node) = document.tree.get_mut(id) {
            node.detach();
        }
    }
    let mut main = String::new();
    for candidate in [
        "article",
        "main",
        "[id*=\"content\"]",
        "[class*=\"content\"]",
        "body",
    ] {
        let selector = fixed_selector(AT, candidate)?;
        if let Some(element) = matching(&document, &selector).next() {
            main = text_of(element);
            if !main.is_empty() {
                break;
            }
        }
    }
    let cleaned = collapse_js_space(&main);
    Ok(Value::String(if cleaned.is_empty() {
        NO_MAIN_CONTENT.into()
    } else {
        cleaned
    }))
}

// ---------------------------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------------------------

/// `limit`: `Number(limit ?? 100)` floored and clamped to 0..=1000; not finite is 100.
fn limit_option(options: &[(String, Value)]) -> usize {
    let Some(raw) = option(options, "limit") else {
        return DEFAULT_SELECT_HTML_LIMIT;
    };
    let n = js_to_number(raw);
    if n.is_finite() {
        n.floor().clamp(0.0, MAX_SELECT_HTML_LIMIT as f64) as usize
    } else {
        DEFAULT_SELECT_HTML_LIMIT
    }
}

/// A caller's selector, compiled, or the message naming it.
fn parse_selector(at: &str, selector: &str) -> Result<Selector, HostError> {
    let invalid = |code: HostErrorCode, why: &str| {
        HostError::new(
            code,
            format!("{at}: invalid selector \"{selector}\" ({why})"),
        )
    };
    if selector.chars().count() > MAX_SELECTOR_CHARS {
        return Err(invalid(
            HostErrorCode::LimitExceeded,
            &format!("longer than {MAX_SELECTOR_CHARS} characters"),
        ));
    }
    let mut depth = 0usize;
    for c in selector.chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                if depth > MAX_SELECTOR_NESTING {
                    return Err(invalid(
                        HostErrorCode::LimitExceeded,
                        &format!("nested more than {MAX_SELECTOR_NESTING} levels deep"),
                    ));
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Selector::parse(selector)
        .map_err(|e| invalid(HostErrorCode::InvalidArgument, &selector_error(&e)))
}

/// A selector error in one line (scraper's own text for some kinds is a debug dump).
fn selector_error(error: &scraper::error::SelectorErrorKind<'_>) -> String {
    use scraper::error::SelectorErrorKind as K;
    match error {
        K::UnexpectedSelectorParseError(kind) => {
            let text = format!("{kind:?}");
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        }
        other => other.to_string(),
    }
}

/// One of this module's own selectors.
fn fixed_selector(at: &str, selector: &str) -> Result<Selector, HostError> {
    Selector::parse(selector).map_err(|e| {
        HostError::new(
            HostErrorCode::Internal,
            format!("{at}: internal selector {selector:?} failed to parse ({e})"),
        )
    })
}

/// Refuses a `:has()` selector on a document nested deeper than [`MAX_HAS_DEPTH`]: the
/// matcher recurses once per level below the element it tests. Any selector that could spell
/// `has` (escapes included) counts.
fn guard_has(at: &str, selector: &str, document: &Html) -> Result<(), HostError> {
    let may_have_has = selector.contains('\\') || selector.to_ascii_lowercase().contains("has");
    if !may_have_has {
        return Ok(());
    }
    let depth = depth_of(document);
    if depth > MAX_HAS_DEPTH {
        return Err(HostError::limit(format!(
            "{at}: :has() cannot be used on a document nested {depth} elements deep (the limit is {MAX_HAS_DEPTH})"
        )));
    }
    Ok(())
}

/// The deepest element nesting in the document.
fn depth_of(document: &Html) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for edge in document.tree.root().traverse() {
        match edge {
            Edge::Open(node) if node.value().is_element() => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Edge::Close(node) if node.value().is_element() => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Every element matching `selector`, in document order (the `<html>` element included).
fn matching<'a>(
    document: &'a Html,
    selector: &'a Selector,
) -> impl Iterator<Item = ElementRef<'a>> + 'a {
    let root = document.tree.root().children().find_map(ElementRef::wrap);
    root.into_iter().flat_map(move |root| {
        std::iter::once(root)
            .filter(move |r| selector.matches(r))
            .chain(root.select(selector))
    })
}

/// An element's text content (every descendant text node, as `textContent`).
fn text_of(element: ElementRef<'_>) -> String {
    element.text().collect()
}

/// The text under `node`, leaving out the subtrees of elements named in `skip`.
fn collect_text(node: NodeRef<'_, Node>, skip: &[&str], out: &mut String) {
    let mut skipping = None;
    for edge in node.traverse() {
        match edge {
            Edge::Open(node) if skipping.is_none() => match node.value() {
                Node::Text(text) => out.push_str(text),
                Node::Element(element) if skip.contains(&element.name()) => {
                    skipping = Some(node.id());
                }
                _ => {}
            },
            Edge::Close(node) if skipping == Some(node.id()) => skipping = None,
            _ => {}
        }
    }
}

/// `text.replace(/[ \t]+/g, " ").replace(/\n{3,}/g, "\n\n")`.
fn squeeze_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut newlines = 0usize;
    let mut in_blank = false;
    for c in text.chars() {
        match c {
            ' ' | '\t' => {
                if !in_blank {
                    out.push(' ');
                }
                in_blank = true;
                newlines = 0;
            }
            '\n' => {
                in_blank = false;
                newlines += 1;
                if newlines <= 2 {
                    out.push('\n');
                }
            }
            c => {
                in_blank = false;
                newlines = 0;
                out.push(c);
            }
        }
    }
    out
}

/// `text.replace(/\s+/g, " ").trim()`.
fn collapse_js_space(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(is_js_space).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// URLs
// ---------------------------------------------------------------------------------------------

/// The `baseUrl` argument as the reference reads it: absent or null is "", anything else is
/// `String(baseUrl)`.
fn base_url(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Undefined | Value::Null) => String::new(),
        Some(v) => js_string(v),
    }
}

/// The reference's classification: empty or `#...` is internal; `mailto:`, `tel:` and
/// `javascript:` are external; with a base that parses, the same origin (as `URL.origin`
/// serializes it) is internal; otherwise anything without a scheme and not
/// protocol-relative is internal.
fn is_internal(href: &str, base: Option<&Url>) -> bool {
    if href.is_empty() || href.starts_with('#') {
        return true;
    }
    let lower = href.get(..11).unwrap_or(href).to_ascii_lowercase();
    if ["mailto:", "tel:", "javascript:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
    {
        return false;
    }
    if let Some(base) = base
        && let Ok(url) = Url::options().base_url(Some(base)).parse(href)
    {
        return url.origin().ascii_serialization() == base.origin().ascii_serialization();
    }
    !(has_scheme(href) || href.starts_with("//"))
}

/// `/^[a-z][a-z0-9+.-]*:/i`.
fn has_scheme(href: &str) -> bool {
    let mut chars = href.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    for c in chars {
        match c {
            ':' => return true,
            c if c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-') => {}
            _ => return false,
        }
    }
    false
}

/// `new URL(src, baseUrl || undefined).href`, or `src` when that throws.
fn resolve(src: &str, base: &str, base_parsed: Option<&Url>) -> String {
    let parsed = if base.is_empty() {
        Url::parse(src)
    } else {
        match base_parsed {
            Some(base) => Url::options().base_url(Some(base)).parse(src),
            None => return src.to_string(),
        }
    };
    parsed.map_or_else(|_| src.to_string(), String::from)
}

/// The extractors of `src` attributes.
fn extract_sources(at: &'static str, args: &[Value], selector: &str) -> Result<Value, HostError> {
    let source = require_text(at, args.first(), "html")?;
    let base = base_url(args.get(1));
    let base_parsed = (!base.is_empty()).then(|| Url::parse(&base).ok()).flatten();
    let document = parse::parse_document(at, source)?;
    let selector = fixed_selector(at, selector)?;
    let mut budget = Budget::new(at);
    let mut out = Vec::new();
    for element in matching(&document, &selector) {
        if out.len() >= MAX_EXTRACT_HTML_ITEMS {
            break;
        }
        let Some(src) = element.value().attr("src").filter(|s| !s.is_empty()) else {
            continue;
        };
        let url = resolve(src, &base, base_parsed.as_ref());
        budget.take(url.len())?;
        out.push(Value::String(url));
    }
    Ok(Value::Array(out))
}

// ---------------------------------------------------------------------------------------------
// Output budget
// ---------------------------------------------------------------------------------------------

/// Counts the bytes a call returns against [`MAX_HTML_OUTPUT_BYTES`].
struct Budget {
    at: &'static str,
    used: usize,
}

impl Budget {
    fn new(at: &'static str) -> Self {
        Budget { at, used: 0 }
    }

    fn take(&mut self, bytes: usize) -> Result<(), HostError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_HTML_OUTPUT_BYTES {
            return Err(HostError::output(format!(
                "{}: the result exceeds the {MAX_HTML_OUTPUT_BYTES} byte limit",
                self.at
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
