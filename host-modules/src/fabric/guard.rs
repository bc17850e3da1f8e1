//! The hostile-input pass every SVG goes through before usvg sees it.
//!
//! usvg converts a document recursively and expands every `<use>` (and every element a
//! `url(#id)` paints with) by copying the referenced subtree, so an input can cost far more
//! than its size: 100,000 nested groups overflow the stack, and ten levels of ten `<use>`s of
//! the level below are 10^10 copies. This pass parses with roxmltree (iteratively, with its
//! node cap and its entity-expansion guard), then measures what the conversion would build,
//! references followed, with an explicit stack: the deepest element ([`MAX_SVG_DEPTH`]) and the
//! number of elements after expansion ([`MAX_SVG_EXPANDED_ELEMENTS`]), and the filter
//! primitives applied ([`MAX_SVG_FILTER_PRIMITIVES`], with per-primitive caps on the
//! attributes that set a primitive's per-pixel work). A reference cycle counts
//! nothing past the first visit (usvg skips recursive references). Only when both fit is the
//! parsed document handed to usvg.

use resvg::usvg;
use std::collections::HashMap;

use usvg::roxmltree::{Document, Node, NodeId, ParsingOptions};

use crate::error::HostError;

/// The deepest element nesting an SVG may have, references expanded (usvg converts
/// recursively; the host-call thread's stack holds far more than this).
pub const MAX_SVG_DEPTH: usize = 256;

/// The most elements an SVG may expand to, every `<use>` and `url(#id)` reference counted at
/// each place it is used.
pub const MAX_SVG_EXPANDED_ELEMENTS: u64 = 200_000;

/// The most XML nodes (elements, text, comments) roxmltree may build for one document.
pub const MAX_SVG_NODES: u32 = 1_000_000;

/// The most filter primitives (`fe*` elements) an SVG may apply, counted where each filter is
/// used: every primitive is a pass over its region's pixels, and resvg cannot be interrupted.
pub const MAX_SVG_FILTER_PRIMITIVES: u64 = 64;

/// Per-pixel work caps of the filter primitives whose cost an attribute sets: turbulence
/// octaves, a convolution kernel's side, a morphology radius (resvg takes each as given).
pub const MAX_TURBULENCE_OCTAVES: f64 = 8.0;
pub const MAX_CONVOLVE_ORDER: f64 = 5.0;
pub const MAX_MORPHOLOGY_RADIUS: f64 = 8.0;

/// Parses `text` and checks it against the caps; the document is ready for usvg.
pub fn parse_checked<'a>(at: &str, text: &'a str) -> Result<Document<'a>, HostError> {
    let options = ParsingOptions {
        allow_dtd: true,
        nodes_limit: MAX_SVG_NODES,
        // External entities (`<!ENTITY x SYSTEM "file:///etc/passwd">`) are never resolved.
        entity_resolver: None,
    };
    let doc = Document::parse_with_options(text, options).map_err(|e| match e {
        usvg::roxmltree::Error::NodesLimitReached => HostError::limit(format!(
            "{at}: the SVG has more than {MAX_SVG_NODES} XML nodes"
        )),
        usvg::roxmltree::Error::EntityReferenceLoop(_) => HostError::limit(format!(
            "{at}: the SVG's entities expand too far (a reference loop or an expansion bomb)"
        )),
        other => HostError::malformed(format!("{at}: the SVG is not well-formed XML: {other}")),
    })?;
    check_expansion(at, &doc)?;
    Ok(doc)
}

/// The element an `href="#id"` or `url(#id)` value points at, if any.
fn reference_ids<'a>(node: Node<'a, '_>) -> Vec<&'a str> {
    let mut ids = Vec::new();
    for attribute in node.attributes() {
        let value = attribute.value();
        if attribute.name() == "href" {
            if let Some(id) = value.trim().strip_prefix('#') {
                ids.push(id);
            }
            continue;
        }
        let mut rest = value;
        while let Some(start) = rest.find("url(") {
            let after = &rest[start + 4..];
            let Some(end) = after.find(')') else { break };
            let inner = after[..end].trim().trim_matches(|c| c == '"' || c == '\'');
            if let Some(id) = inner.strip_prefix('#') {
                ids.push(id);
            }
            rest = &after[end..];
        }
    }
    ids
}

/// What converting one element costs: the elements it expands to and its expanded depth.
#[derive(Clone, Copy)]
struct Cost {
    elements: u64,
    depth: usize,
    filters: u64,
}

/// Refuses a filter primitive whose attributes ask for unbounded per-pixel work.
fn check_primitive(at: &str, node: Node<'_, '_>) -> Result<(), HostError> {
    let (attribute, cap) = match node.tag_name().name() {
        "feTurbulence" => ("numOctaves", MAX_TURBULENCE_OCTAVES),
        "feConvolveMatrix" => ("order", MAX_CONVOLVE_ORDER),
        "feMorphology" => ("radius", MAX_MORPHOLOGY_RADIUS),
        _ => return Ok(()),
    };
    let Some(value) = node.attribute(attribute) else {
        return Ok(());
    };
    for part in value.split(|c: char| c == ',' || c.is_whitespace()) {
        if part.is_empty() {
            continue;
        }
        match part.parse::<f64>() {
            Ok(n) if n.abs() <= cap => {}
            _ => {
                return Err(HostError::limit(format!(
                    "{at}: <{}> {attribute}=\"{}\" is past the cap of {cap}",
                    node.tag_name().name(),
                    value.chars().take(40).collect::<String>()
                )));
            }
        }
    }
    Ok(())
}

fn check_expansion(at: &str, doc: &Document<'_>) -> Result<(), HostError> {
    let mut by_id: HashMap<&str, NodeId> = HashMap::new();
    for node in doc.descendants().filter(Node::is_element) {
        if let Some(id) = node.attribute("id") {
            by_id.entry(id).or_insert(node.id());
        }
        check_primitive(at, node)?;
    }
    // Memoized post-order over the graph of children and references, with an explicit stack;
    // `None` in `cost` while an element is being measured (a reference back to it is a cycle
    // and costs nothing, as usvg drops it).
    let mut cost: HashMap<NodeId, Option<Cost>> = HashMap::new();
    let root = doc.root_element();
    // (element, its successors, how many were already pushed)
    let mut stack: Vec<(NodeId, Vec<NodeId>, usize)> = Vec::new();
    let successors = |node: Node<'_, '_>| -> Vec<NodeId> {
        let mut next: Vec<NodeId> = node
            .children()
            .filter(Node::is_element)
            .map(|n| n.id())
            .collect();
        for id in reference_ids(node) {
            if let Some(target) = by_id.get(id) {
                next.push(*target);
            }
        }
        next
    };
    cost.insert(root.id(), None);
    stack.push((root.id(), successors(root), 0));
    loop {
        if stack.len() > MAX_SVG_DEPTH {
            return Err(depth_error(at));
        }
        let Some(top) = stack.last_mut() else { break };
        let (id, next, done) = (top.0, &top.1, top.2);
        if done < next.len() {
            let child = next[done];
            top.2 += 1;
            if cost.contains_key(&child) {
                continue;
            }
            let Some(node) = doc.get_node(child) else {
                continue;
            };
            cost.insert(child, None);
            let children = successors(node);
            stack.push((child, children, 0));
            continue;
        }
        let is_primitive = doc
            .get_node(id)
            .is_some_and(|n| n.tag_name().name().starts_with("fe"));
        let mut total = Cost {
            elements: 1,
            depth: 1,
            filters: u64::from(is_primitive),
        };
        for child in next {
            if let Some(Some(c)) = cost.get(child) {
                total.elements = total.elements.saturating_add(c.elements);
                total.depth = total.depth.max(c.depth + 1);
                total.filters = total.filters.saturating_add(c.filters);
            }
        }
        if total.filters > MAX_SVG_FILTER_PRIMITIVES {
            return Err(HostError::limit(format!(
                "{at}: the SVG applies more than {MAX_SVG_FILTER_PRIMITIVES} filter primitives once its references are followed"
            )));
        }
        if total.elements > MAX_SVG_EXPANDED_ELEMENTS {
            return Err(HostError::limit(format!(
                "{at}: the SVG expands to more than {MAX_SVG_EXPANDED_ELEMENTS} elements once its <use> and url(#…) references are followed"
            )));
        }
        if total.depth > MAX_SVG_DEPTH {
            return Err(depth_error(at));
        }
        cost.insert(id, Some(total));
        stack.pop();
    }
    Ok(())
}

fn depth_error(at: &str) -> HostError {
    HostError::limit(format!(
        "{at}: the SVG nests elements more than {MAX_SVG_DEPTH} deep (references followed)"
    ))
}
