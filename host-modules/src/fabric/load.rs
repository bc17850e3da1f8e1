//! `loadSVG`: usvg's resolved tree as scene objects.
//!
//! Fabric's `loadSVGFromString` gives live Fabric objects; across the sandbox boundary only
//! their plain properties can cross, so this gives the plain objects of the scene format
//! `render` reads, with every transform applied: `path` objects whose `path` is absolute SVG
//! path data (basic shapes, `<use>` copies and transformed groups included), `text` objects
//! (their text, size and fill, placed at their box), and `image` objects (their data URI and
//! box). Gradient paints become their first stop's color; patterns become no paint.

use resvg::usvg;
use std::fmt::Write as _;

use base64::Engine as _;
use nodetool_protocol::value::Value;
use usvg::tiny_skia_path::PathSegment;
use usvg::{Node, Paint};

use crate::error::HostError;

/// The most objects `loadSVG` returns.
const MAX_LOADED_OBJECTS: usize = 100_000;

fn num(n: f32) -> Value {
    Value::Number((f64::from(n) * 10_000.0).round() / 10_000.0)
}

fn color(paint: &Paint) -> Value {
    let c = match paint {
        Paint::Color(c) => Some(*c),
        Paint::LinearGradient(g) => g.stops().first().map(|s| s.color()),
        Paint::RadialGradient(g) => g.stops().first().map(|s| s.color()),
        Paint::Pattern(_) => None,
    };
    c.map_or(Value::Null, |c| {
        Value::String(format!("rgb({},{},{})", c.red, c.green, c.blue))
    })
}

/// The objects and canvas options of `tree`.
pub fn objects_of(at: &str, tree: &usvg::Tree) -> Result<Value, HostError> {
    let mut objects = Vec::new();
    objects_in_group(at, tree.root(), &mut objects)?;
    let size = tree.size();
    Ok(Value::Object(vec![
        ("objects".into(), Value::Array(objects)),
        (
            "options".into(),
            Value::Object(vec![
                ("width".into(), num(size.width())),
                ("height".into(), num(size.height())),
            ]),
        ),
    ]))
}

/// A group's drawables in document order, depth first (recursion bounded by the guard's
/// depth cap, [`super::MAX_SVG_DEPTH`]).
fn objects_in_group(
    at: &str,
    group: &usvg::Group,
    objects: &mut Vec<Value>,
) -> Result<(), HostError> {
    for node in group.children() {
        match node {
            Node::Group(g) => objects_in_group(at, g, objects)?,
            other => leaf(other, objects)?,
        }
        if objects.len() > MAX_LOADED_OBJECTS {
            return Err(HostError::output(format!(
                "{at}: the SVG has more than {MAX_LOADED_OBJECTS} drawable elements"
            )));
        }
    }
    Ok(())
}

fn leaf(node: &Node, objects: &mut Vec<Value>) -> Result<(), HostError> {
    match node {
        Node::Path(p) if p.is_visible() => {
            let Some(data) = p.data().clone().transform(p.abs_transform()) else {
                return Ok(());
            };
            let mut d = String::new();
            for segment in data.segments() {
                let _ = match segment {
                    PathSegment::MoveTo(a) => write!(d, "M {} {} ", a.x, a.y),
                    PathSegment::LineTo(a) => write!(d, "L {} {} ", a.x, a.y),
                    PathSegment::QuadTo(a, b) => write!(d, "Q {} {} {} {} ", a.x, a.y, b.x, b.y),
                    PathSegment::CubicTo(a, b, c) => {
                        write!(d, "C {} {} {} {} {} {} ", a.x, a.y, b.x, b.y, c.x, c.y)
                    }
                    PathSegment::Close => write!(d, "Z "),
                };
            }
            let mut o = vec![
                ("type".into(), Value::String("path".into())),
                ("path".into(), Value::String(d.trim_end().to_string())),
                (
                    "fill".into(),
                    p.fill().map_or(Value::Null, |f| color(f.paint())),
                ),
            ];
            if let Some(f) = p.fill()
                && f.opacity().get() < 1.0
            {
                o.push(("opacity".into(), num(f.opacity().get())));
            }
            match p.stroke() {
                Some(s) => {
                    // The stroke width scales with the transform (its mean scale).
                    let t = p.abs_transform();
                    let scale = ((t.sx * t.sy - t.kx * t.ky).abs()).sqrt();
                    o.push(("stroke".into(), color(s.paint())));
                    o.push(("strokeWidth".into(), num(s.width().get() * scale)));
                }
                None => o.push(("stroke".into(), Value::Null)),
            }
            objects.push(Value::Object(o));
        }
        Node::Text(t) => {
            let text: String = t
                .chunks()
                .iter()
                .map(|c| c.text())
                .collect::<Vec<_>>()
                .join("\n");
            let span = t.chunks().first().and_then(|c| c.spans().first());
            let bbox = t.abs_bounding_box();
            let mut o = vec![
                ("type".into(), Value::String("text".into())),
                ("text".into(), Value::String(text)),
                ("left".into(), num(bbox.x())),
                ("top".into(), num(bbox.y())),
            ];
            if let Some(span) = span {
                o.push(("fontSize".into(), num(span.font_size().get())));
                o.push((
                    "fill".into(),
                    span.fill().map_or(Value::Null, |f| color(f.paint())),
                ));
            }
            objects.push(Value::Object(o));
        }
        Node::Image(i) if i.is_visible() => {
            let (mime, data) = match i.kind() {
                usvg::ImageKind::PNG(d) => ("image/png", d),
                usvg::ImageKind::JPEG(d) => ("image/jpeg", d),
                usvg::ImageKind::GIF(d) => ("image/gif", d),
                usvg::ImageKind::WEBP(d) => ("image/webp", d),
                usvg::ImageKind::SVG(_) => return Ok(()),
            };
            let bbox = i.abs_bounding_box();
            objects.push(Value::Object(vec![
                ("type".into(), Value::String("image".into())),
                (
                    "src".into(),
                    Value::String(format!(
                        "data:{mime};base64,{}",
                        base64::engine::general_purpose::STANDARD.encode(data.as_slice())
                    )),
                ),
                ("left".into(), num(bbox.x())),
                ("top".into(), num(bbox.y())),
                ("width".into(), num(bbox.width())),
                ("height".into(), num(bbox.height())),
            ]));
        }
        _ => {}
    }
    Ok(())
}
