//! Parsing with a depth guard.
//!
//! The HTML5 tree builder walks its stack of open elements on most start tags (the "has an
//! element in scope" checks), so a document that nests a million elements costs a million
//! steps per tag: minutes of host CPU from a 5 MiB string. Browsers cap the tree's depth
//! (Blink at 512); we parse through a sink that records each element's depth as it is inserted
//! and stop feeding the parser, with an error, once an element sits deeper than
//! [`MAX_HTML_DEPTH`]. The input goes in 16 KiB pieces, so the work done before the check
//! notices is bounded too.
//!
//! Attributes are the other quadratic path. The tokenizer checks each attribute of a tag
//! against every one before it (one element with 40,000 attributes took 4.2 s), and scraper
//! merges the attributes of a repeated `<html>` or `<body>` into the first by sorted insertion.
//! Before parsing, [`attribute_pairs`] bounds the first work in one linear pass, and the
//! document is refused past [`MAX_HTML_ATTRIBUTE_PAIRS`]; the sink counts the second and stops
//! past [`MAX_MERGED_ATTRIBUTES`].

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use ego_tree::NodeId;
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink};

use crate::error::HostError;

/// Elements a document may nest.
pub const MAX_HTML_DEPTH: u32 = 1024;

/// Attribute pairs the tokenizer's repeat check may compare over a document: the sum over tags
/// of n(n-1)/2 for n attributes, about 0.2 s of parsing at most. One element may carry 8,000
/// attributes, and 100,000 elements 25 each.
pub const MAX_HTML_ATTRIBUTE_PAIRS: u64 = 1 << 25;

/// Attributes repeated `<html>` and `<body>` tags may bring to the first one.
pub const MAX_MERGED_ATTRIBUTES: usize = 4096;

/// Bytes handed to the parser between depth checks.
const PIECE_BYTES: usize = 16 * 1024;

/// Parses a whole document, or names why it will not.
pub fn parse_document(at: &str, source: &str) -> Result<Html, HostError> {
    let pairs = attribute_pairs(source.as_bytes());
    if pairs > MAX_HTML_ATTRIBUTE_PAIRS {
        return Err(HostError::limit(format!(
            "{at}: the document's tags carry too many attributes (the parser would compare {pairs} pairs of them, over the {MAX_HTML_ATTRIBUTE_PAIRS} limit; one element may have about 8,000)"
        )));
    }
    let deepest = Rc::new(Cell::new(0u32));
    let merged = Rc::new(Cell::new(0usize));
    let sink = Guarded {
        inner: HtmlTreeSink::new(Html::new_document()),
        depths: RefCell::new(HashMap::new()),
        deepest: Rc::clone(&deepest),
        merged: Rc::clone(&merged),
    };
    let too_many_merged = || {
        HostError::limit(format!(
            "{at}: repeated <html> and <body> tags bring more than {MAX_MERGED_ATTRIBUTES} attributes"
        ))
    };
    let mut parser = html5ever::driver::parse_document(sink, Default::default());
    let mut rest = source;
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE_BYTES);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        parser.process(StrTendril::from_slice(piece));
        rest = tail;
        if deepest.get() > MAX_HTML_DEPTH {
            return Err(HostError::limit(format!(
                "{at}: the document nests elements more than {MAX_HTML_DEPTH} deep"
            )));
        }
        if merged.get() > MAX_MERGED_ATTRIBUTES {
            return Err(too_many_merged());
        }
    }
    let document = parser.finish();
    if merged.get() > MAX_MERGED_ATTRIBUTES {
        return Err(too_many_merged());
    }
    if deepest.get() > MAX_HTML_DEPTH {
        return Err(HostError::limit(format!(
            "{at}: the document nests elements more than {MAX_HTML_DEPTH} deep"
        )));
    }
    Ok(document)
}

/// scraper's sink, with the depth of each inserted element recorded.
struct Guarded {
    inner: HtmlTreeSink,
    depths: RefCell<HashMap<NodeId, u32>>,
    deepest: Rc<Cell<u32>>,
    /// Attributes handed to `add_attrs_if_missing` so far.
    merged: Rc<Cell<usize>>,
}

impl Guarded {
    fn depth(&self, node: &NodeId) -> u32 {
        self.depths.borrow().get(node).copied().unwrap_or(0)
    }

    fn place(&self, child: &NodeOrText<NodeId>, depth: u32) {
        if let NodeOrText::AppendNode(id) = child {
            self.depths.borrow_mut().insert(*id, depth);
            if depth > self.deepest.get() {
                self.deepest.set(depth);
            }
        }
    }
}

impl TreeSink for Guarded {
    type Handle = NodeId;
    type Output = Html;
    type ElemName<'a>
        = <HtmlTreeSink as TreeSink>::ElemName<'a>
    where
        Self: 'a;

    fn finish(self) -> Html {
        self.inner.finish()
    }

    fn parse_error(&self, msg: Cow<'static, str>) {
        self.inner.parse_error(msg);
    }

    fn get_document(&self) -> NodeId {
        self.inner.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a NodeId) -> Self::ElemName<'a> {
        self.inner.elem_name(target)
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> NodeId {
        self.inner.create_element(name, attrs, flags)
    }

    fn create_comment(&self, text: StrTendril) -> NodeId {
        self.inner.create_comment(text)
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> NodeId {
        self.inner.create_pi(target, data)
    }

    fn append(&self, parent: &NodeId, child: NodeOrText<NodeId>) {
        self.place(&child, self.depth(parent) + 1);
        self.inner.append(parent, child);
    }

    fn append_based_on_parent_node(
        &self,
        element: &NodeId,
        prev_element: &NodeId,
        child: NodeOrText<NodeId>,
    ) {
        let depth = self.depth(element).max(self.depth(prev_element) + 1);
        self.place(&child, depth);
        self.inner
            .append_based_on_parent_node(element, prev_element, child);
    }

    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id);
    }

    fn mark_script_already_started(&self, node: &NodeId) {
        self.inner.mark_script_already_started(node);
    }

    fn pop(&self, node: &NodeId) {
        self.inner.pop(node);
    }

    fn get_template_contents(&self, target: &NodeId) -> NodeId {
        let contents = self.inner.get_template_contents(target);
        let depth = self.depth(target) + 1;
        self.depths.borrow_mut().insert(contents, depth);
        contents
    }

    fn same_node(&self, x: &NodeId, y: &NodeId) -> bool {
        self.inner.same_node(x, y)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode);
    }

    fn append_before_sibling(&self, sibling: &NodeId, new_node: NodeOrText<NodeId>) {
        self.place(&new_node, self.depth(sibling));
        self.inner.append_before_sibling(sibling, new_node);
    }

    fn add_attrs_if_missing(&self, target: &NodeId, attrs: Vec<Attribute>) {
        let merged = self.merged.get().saturating_add(attrs.len());
        self.merged.set(merged);
        if merged > MAX_MERGED_ATTRIBUTES {
            // Refused once this piece is through; nothing more is merged meanwhile.
            return;
        }
        self.inner.add_attrs_if_missing(target, attrs);
    }

    fn associate_with_form(
        &self,
        target: &NodeId,
        form: &NodeId,
        nodes: (&NodeId, Option<&NodeId>),
    ) {
        self.inner.associate_with_form(target, form, nodes);
    }

    fn remove_from_parent(&self, target: &NodeId) {
        self.inner.remove_from_parent(target);
    }

    fn reparent_children(&self, node: &NodeId, new_parent: &NodeId) {
        self.inner.reparent_children(node, new_parent);
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &NodeId) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }

    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number);
    }

    fn allow_declarative_shadow_roots(&self, intended_parent: &NodeId) -> bool {
        self.inner.allow_declarative_shadow_roots(intended_parent)
    }

    fn attach_declarative_shadow(
        &self,
        location: &NodeId,
        template: &NodeId,
        attrs: &[Attribute],
    ) -> bool {
        self.inner
            .attach_declarative_shadow(location, template, attrs)
    }
}

/// Where the tokenizer can be inside a tag (the HTML standard's tag and attribute states).
#[derive(Clone, Copy)]
enum TagState {
    Name,
    BeforeAttributeName,
    AttributeName,
    AfterAttributeName,
    BeforeValue,
    DoubleQuoted,
    SingleQuoted,
    Unquoted,
    AfterQuoted,
    SelfClosing,
}

const TAG_STATES: usize = 10;

impl TagState {
    const ALL: [TagState; TAG_STATES] = [
        TagState::Name,
        TagState::BeforeAttributeName,
        TagState::AttributeName,
        TagState::AfterAttributeName,
        TagState::BeforeValue,
        TagState::DoubleQuoted,
        TagState::SingleQuoted,
        TagState::Unquoted,
        TagState::AfterQuoted,
        TagState::SelfClosing,
    ];

    /// The state after byte `b`, `None` when it ends the tag, and whether `b` starts an
    /// attribute.
    fn step(self, b: u8) -> (Option<TagState>, bool) {
        use TagState::*;
        let space = matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ');
        match self {
            Name if space => (Some(BeforeAttributeName), false),
            Name if b == b'/' => (Some(SelfClosing), false),
            Name if b == b'>' => (None, false),
            Name => (Some(Name), false),
            BeforeAttributeName | AfterQuoted | SelfClosing if space => {
                (Some(BeforeAttributeName), false)
            }
            BeforeAttributeName | AfterQuoted | SelfClosing if b == b'/' => {
                (Some(SelfClosing), false)
            }
            BeforeAttributeName | AfterQuoted | SelfClosing | AfterAttributeName if b == b'>' => {
                (None, false)
            }
            BeforeAttributeName | AfterQuoted | SelfClosing => (Some(AttributeName), true),
            AttributeName if space => (Some(AfterAttributeName), false),
            AttributeName if b == b'/' => (Some(SelfClosing), false),
            AttributeName if b == b'>' => (None, false),
            AttributeName | AfterAttributeName if b == b'=' => (Some(BeforeValue), false),
            AttributeName => (Some(AttributeName), false),
            AfterAttributeName if space => (Some(AfterAttributeName), false),
            AfterAttributeName if b == b'/' => (Some(SelfClosing), false),
            AfterAttributeName => (Some(AttributeName), true),
            BeforeValue if space => (Some(BeforeValue), false),
            BeforeValue if b == b'"' => (Some(DoubleQuoted), false),
            BeforeValue if b == b'\'' => (Some(SingleQuoted), false),
            BeforeValue if b == b'>' => (None, false),
            BeforeValue | Unquoted if !space && b != b'>' => (Some(Unquoted), false),
            Unquoted if space => (Some(BeforeAttributeName), false),
            BeforeValue | Unquoted => (None, false),
            DoubleQuoted if b == b'"' => (Some(AfterQuoted), false),
            DoubleQuoted => (Some(DoubleQuoted), false),
            SingleQuoted if b == b'\'' => (Some(AfterQuoted), false),
            SingleQuoted => (Some(SingleQuoted), false),
        }
    }
}

/// An upper bound, found in one pass, on the attribute pairs the tokenizer compares over
/// `source` (each attribute against those before it in its tag).
///
/// Where a tag starts depends on the tree builder (a `<` inside a script, a comment or an
/// attribute value starts none), so every `<name` and `</name` is taken as a possible start,
/// and the pass follows every reading at once: one per tag state, merged by keeping the largest
/// attribute count. The real tokenizer is always in one of the readings followed, so its count
/// never exceeds the one kept, and at each byte the pairs the largest new attribute adds are
/// counted.
pub fn attribute_pairs(source: &[u8]) -> u64 {
    let mut readings: [Option<u64>; TAG_STATES] = [None; TAG_STATES];
    let mut live = false;
    let mut pairs: u64 = 0;
    for (i, &b) in source.iter().enumerate() {
        let starts_tag = b.is_ascii_alphabetic()
            && i > 0
            && (source[i - 1] == b'<' || (source[i - 1] == b'/' && i > 1 && source[i - 2] == b'<'));
        if !live && !starts_tag {
            continue;
        }
        let mut next: [Option<u64>; TAG_STATES] = [None; TAG_STATES];
        let mut added: Option<u64> = None;
        for (state, count) in TagState::ALL.iter().zip(readings) {
            let Some(count) = count else { continue };
            let (after, starts_attribute) = state.step(b);
            let count = if starts_attribute {
                added = added.max(Some(count));
                count + 1
            } else {
                count
            };
            if let Some(after) = after {
                let slot = &mut next[after as usize];
                *slot = (*slot).max(Some(count));
            }
        }
        if starts_tag {
            let slot = &mut next[TagState::Name as usize];
            *slot = (*slot).max(Some(0));
        }
        pairs = pairs.saturating_add(added.unwrap_or(0));
        live = next.iter().any(Option::is_some);
        readings = next;
    }
    pairs
}
