//! Parsing with a depth guard.
//!
//! The HTML5 tree builder walks its stack of open elements on most start tags (the "has an
//! element in scope" checks), so a document that nests a million elements costs a million
//! steps per tag: minutes of host CPU from a 5 MiB string. Browsers cap the tree's depth
//! (Blink at 512); we parse through a sink that records each element's depth as it is inserted
//! and stop feeding the parser, with an error, once an element sits deeper than
//! [`MAX_HTML_DEPTH`]. The input goes in 16 KiB pieces, so the work done before the check
//! notices is bounded too.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use ego_tree::NodeId;
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink};

/// Elements a document may nest.
pub const MAX_HTML_DEPTH: u32 = 1024;

/// Bytes handed to the parser between depth checks.
const PIECE_BYTES: usize = 16 * 1024;

/// Parses a whole document, or names why it will not.
pub fn parse_document(at: &str, source: &str) -> Result<Html, String> {
    let deepest = Rc::new(Cell::new(0u32));
    let sink = Guarded {
        inner: HtmlTreeSink::new(Html::new_document()),
        depths: RefCell::new(HashMap::new()),
        deepest: Rc::clone(&deepest),
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
            return Err(format!(
                "{at}: the document nests elements more than {MAX_HTML_DEPTH} deep"
            ));
        }
    }
    let document = parser.finish();
    if deepest.get() > MAX_HTML_DEPTH {
        return Err(format!(
            "{at}: the document nests elements more than {MAX_HTML_DEPTH} deep"
        ));
    }
    Ok(document)
}

/// scraper's sink, with the depth of each inserted element recorded.
struct Guarded {
    inner: HtmlTreeSink,
    depths: RefCell<HashMap<NodeId, u32>>,
    deepest: Rc<Cell<u32>>,
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
