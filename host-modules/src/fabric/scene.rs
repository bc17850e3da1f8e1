//! A Fabric.js scene (its `toJSON` shape, or the same written by hand) as an SVG document.
//!
//! Geometry follows Fabric 6's model: an object's `left`/`top` place its origin point
//! (`originX`/`originY`, default `left`/`top`) on the canvas; the object is drawn around its
//! center, with `angle` (degrees), `scaleX`/`scaleY`, `flipX`/`flipY` and `skewX`/`skewY`
//! applied there, and its box includes the stroke width (Fabric's default `strokeWidth` is 1,
//! its default `stroke` none, its default `fill` black). Paths and polylines are drawn in
//! their own coordinates, centered on their bounds; when `left`/`top` are absent they stay
//! where their points are. Group members are placed relative to the group's center.
//! Text uses the bundled DejaVu Sans whatever `fontFamily` says; its box is measured from
//! the font (Fabric's line height 1.16 and size factor 1.13), so alignment and origins match
//! Fabric's closely, not to the pixel.

use resvg::usvg;
use std::fmt::Write as _;

use base64::Engine as _;
use nodetool_protocol::value::Value;
use usvg::tiny_skia_path::{PathBuilder, Rect};

use crate::error::HostError;

/// The most objects a scene may hold, group members included.
pub const MAX_SCENE_OBJECTS: usize = 10_000;

/// The deepest a scene's groups may nest.
pub const MAX_SCENE_DEPTH: usize = 32;

/// The most path segments (and polygon points) a scene may hold in all.
pub const MAX_PATH_SEGMENTS: usize = 500_000;

/// Fabric's text line-height and font-size factors.
const LINE_HEIGHT: f64 = 1.16;
const FONT_SIZE_MULT: f64 = 1.13;

/// What building the SVG counted, against the caps.
struct Budget {
    objects: usize,
    segments: usize,
}

/// The canvas: size and background.
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub background: Option<String>,
}

/// The SVG document of `objects` on `canvas`.
pub fn to_svg(
    at: &str,
    canvas: &Canvas,
    objects: Option<&Value>,
    preamble: bool,
) -> Result<String, HostError> {
    let mut out = String::new();
    if preamble {
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\" ?>\n");
    }
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" version=\"1.1\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">",
        w = canvas.width,
        h = canvas.height
    );
    if let Some(bg) = &canvas.background {
        let _ = writeln!(
            out,
            "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"{}\"/>",
            escape(bg)
        );
    }
    let mut budget = Budget {
        objects: 0,
        segments: 0,
    };
    match objects {
        None | Some(Value::Undefined | Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                object(at, &format!("objects[{i}]"), item, 0, &mut budget, &mut out)?;
            }
        }
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{at}: scene.objects must be an array of objects"
            )));
        }
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// XML-escapes an attribute value or text.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters XML 1.0 forbids.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Number property `key`, finite, or `default`.
fn num(at: &str, label: &str, v: &Value, key: &str, default: f64) -> Result<f64, HostError> {
    match v.get(key) {
        None | Some(Value::Undefined | Value::Null) => Ok(default),
        Some(Value::Number(n)) if n.is_finite() => Ok(*n),
        Some(Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => Ok(n),
            _ => Err(HostError::invalid(format!(
                "{at}: {label}.{key} must be a finite number"
            ))),
        },
        Some(_) => Err(HostError::invalid(format!(
            "{at}: {label}.{key} must be a finite number"
        ))),
    }
}

fn text_prop<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    match v.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A paint (`fill`/`stroke`): a color string, or none. Gradient and pattern objects are not
/// drawn (their first color stop is used for a gradient).
fn paint(v: &Value, key: &str, default: Option<&str>) -> Option<String> {
    match v.get(key) {
        None | Some(Value::Undefined) => default.map(str::to_string),
        Some(Value::String(s)) if s.is_empty() || s == "transparent" => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(g @ Value::Object(_)) => match g.get("colorStops") {
            Some(Value::Array(stops)) => stops
                .first()
                .and_then(|s| text_prop(s, "color"))
                .map(str::to_string),
            _ => None,
        },
        _ => None,
    }
}

fn origin_factor(v: &Value, key: &str, default: f64) -> f64 {
    match v.get(key) {
        Some(Value::String(s)) => match s.as_str() {
            "left" | "top" => 0.0,
            "center" => 0.5,
            "right" | "bottom" => 1.0,
            _ => default,
        },
        Some(Value::Number(n)) if n.is_finite() => *n,
        _ => default,
    }
}

fn f(n: f64) -> String {
    // Short, exact enough, and never exponent notation (SVG number syntax allows it, but this
    // keeps the text readable).
    let r = (n * 10_000.0).round() / 10_000.0;
    if r == 0.0 {
        return "0".into();
    }
    let s = format!("{r:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One object's drawing, local to its center, and its box size (without stroke).
struct Shape {
    body: String,
    width: f64,
    height: f64,
    /// Where `left`/`top` default to, when the object's points fix its place (paths, lines).
    natural_left_top: Option<(f64, f64)>,
}

fn object(
    at: &str,
    label: &str,
    v: &Value,
    depth: usize,
    budget: &mut Budget,
    out: &mut String,
) -> Result<(), HostError> {
    if !matches!(v, Value::Object(_)) {
        return Err(HostError::invalid(format!(
            "{at}: {label} must be an object with a type"
        )));
    }
    budget.objects += 1;
    if budget.objects > MAX_SCENE_OBJECTS {
        return Err(HostError::limit(format!(
            "{at}: the scene has more than {MAX_SCENE_OBJECTS} objects"
        )));
    }
    if matches!(v.get("visible"), Some(Value::Bool(false))) {
        return Ok(());
    }
    let kind = text_prop(v, "type").unwrap_or("").to_ascii_lowercase();
    let stroke = paint(v, "stroke", None);
    let stroke_width = num(at, label, v, "strokeWidth", 1.0)?.max(0.0);
    let sw = if stroke.is_some() { stroke_width } else { 0.0 };
    let shape = match kind.as_str() {
        "rect" => {
            let w = num(at, label, v, "width", 0.0)?.max(0.0);
            let h = num(at, label, v, "height", 0.0)?.max(0.0);
            let rx = num(at, label, v, "rx", 0.0)?.max(0.0);
            let ry = num(at, label, v, "ry", rx)?.max(0.0);
            Shape {
                body: format!(
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"{}\" ry=\"{}\"",
                    f(-w / 2.0),
                    f(-h / 2.0),
                    f(w),
                    f(h),
                    f(rx),
                    f(ry)
                ),
                width: w,
                height: h,
                natural_left_top: None,
            }
        }
        "triangle" => {
            let w = num(at, label, v, "width", 100.0)?.max(0.0);
            let h = num(at, label, v, "height", 100.0)?.max(0.0);
            Shape {
                body: format!(
                    "<polygon points=\"{},{} 0,{} {},{}\"",
                    f(-w / 2.0),
                    f(h / 2.0),
                    f(-h / 2.0),
                    f(w / 2.0),
                    f(h / 2.0)
                ),
                width: w,
                height: h,
                natural_left_top: None,
            }
        }
        "circle" => {
            let r = num(at, label, v, "radius", 0.0)?.max(0.0);
            Shape {
                body: format!("<circle cx=\"0\" cy=\"0\" r=\"{}\"", f(r)),
                width: 2.0 * r,
                height: 2.0 * r,
                natural_left_top: None,
            }
        }
        "ellipse" => {
            let rx = num(at, label, v, "rx", 0.0)?.max(0.0);
            let ry = num(at, label, v, "ry", 0.0)?.max(0.0);
            Shape {
                body: format!(
                    "<ellipse cx=\"0\" cy=\"0\" rx=\"{}\" ry=\"{}\"",
                    f(rx),
                    f(ry)
                ),
                width: 2.0 * rx,
                height: 2.0 * ry,
                natural_left_top: None,
            }
        }
        "line" => {
            let x1 = num(at, label, v, "x1", 0.0)?;
            let y1 = num(at, label, v, "y1", 0.0)?;
            let x2 = num(at, label, v, "x2", 0.0)?;
            let y2 = num(at, label, v, "y2", 0.0)?;
            let (cx, cy) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
            Shape {
                body: format!(
                    "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"",
                    f(x1 - cx),
                    f(y1 - cy),
                    f(x2 - cx),
                    f(y2 - cy)
                ),
                width: (x2 - x1).abs(),
                height: (y2 - y1).abs(),
                natural_left_top: Some((x1.min(x2) - sw / 2.0, y1.min(y2) - sw / 2.0)),
            }
        }
        "path" => {
            let data = path_data(at, label, v.get("path"))?;
            path_shape(at, label, &data, sw, budget)?
        }
        "polygon" | "polyline" => {
            let Some(Value::Array(points)) = v.get("points") else {
                return Err(HostError::invalid(format!(
                    "{at}: {label}.points must be an array of {{x, y}}"
                )));
            };
            let mut d = String::new();
            for (i, p) in points.iter().enumerate() {
                let x = num(at, &format!("{label}.points[{i}]"), p, "x", 0.0)?;
                let y = num(at, &format!("{label}.points[{i}]"), p, "y", 0.0)?;
                let _ = write!(d, "{}{} {} ", if i == 0 { "M" } else { "L" }, f(x), f(y));
            }
            if kind == "polygon" && !points.is_empty() {
                d.push('Z');
            }
            path_shape(at, label, &d, sw, budget)?
        }
        "text" | "i-text" | "itext" | "textbox" => text_shape(at, label, v)?,
        "image" => image_shape(at, label, v)?,
        "group" => {
            if depth + 1 > MAX_SCENE_DEPTH {
                return Err(HostError::limit(format!(
                    "{at}: {label}: groups nest more than {MAX_SCENE_DEPTH} deep"
                )));
            }
            let mut body = String::from("<g");
            let mut inner = String::new();
            if let Some(Value::Array(items)) = v.get("objects") {
                for (i, item) in items.iter().enumerate() {
                    object(
                        at,
                        &format!("{label}.objects[{i}]"),
                        item,
                        depth + 1,
                        budget,
                        &mut inner,
                    )?;
                }
            }
            body.push_str(">\n");
            body.push_str(&inner);
            body.push_str("</g");
            Shape {
                body,
                width: num(at, label, v, "width", 0.0)?.max(0.0),
                height: num(at, label, v, "height", 0.0)?.max(0.0),
                natural_left_top: None,
            }
        }
        other => {
            return Err(HostError::unsupported(format!(
                "{at}: {label}.type {other:?} is not a Fabric object type this module draws (rect, circle, ellipse, triangle, line, path, polygon, polyline, text, textbox, image, group)"
            )));
        }
    };

    let scale_x = num(at, label, v, "scaleX", 1.0)?;
    let scale_y = num(at, label, v, "scaleY", 1.0)?;
    let flip_x = matches!(v.get("flipX"), Some(Value::Bool(true)));
    let flip_y = matches!(v.get("flipY"), Some(Value::Bool(true)));
    let angle = num(at, label, v, "angle", 0.0)?;
    let skew_x = num(at, label, v, "skewX", 0.0)?;
    let skew_y = num(at, label, v, "skewY", 0.0)?;
    let (default_left, default_top) = shape.natural_left_top.unwrap_or((0.0, 0.0));
    let left = num(at, label, v, "left", default_left)?;
    let top = num(at, label, v, "top", default_top)?;
    let ox = origin_factor(v, "originX", 0.0);
    let oy = origin_factor(v, "originY", 0.0);
    // The center: the origin point moved by the (scaled, rotated) half box.
    let bw = (shape.width + sw) * scale_x;
    let bh = (shape.height + sw) * scale_y;
    let (dx, dy) = ((0.5 - ox) * bw, (0.5 - oy) * bh);
    let (sin, cos) = angle.to_radians().sin_cos();
    let cx = left + dx * cos - dy * sin;
    let cy = top + dx * sin + dy * cos;

    let mut transform = format!("translate({} {})", f(cx), f(cy));
    if angle != 0.0 {
        let _ = write!(transform, " rotate({})", f(angle));
    }
    let (sx, sy) = (
        if flip_x { -scale_x } else { scale_x },
        if flip_y { -scale_y } else { scale_y },
    );
    if sx != 1.0 || sy != 1.0 {
        let _ = write!(transform, " scale({} {})", f(sx), f(sy));
    }
    if skew_x != 0.0 {
        let _ = write!(transform, " skewX({})", f(skew_x));
    }
    if skew_y != 0.0 {
        let _ = write!(transform, " skewY({})", f(skew_y));
    }

    let mut style = String::new();
    let default_fill = if matches!(kind.as_str(), "line" | "polyline") {
        None
    } else {
        Some("rgb(0,0,0)")
    };
    if kind != "group" && kind != "image" {
        match paint(v, "fill", default_fill) {
            Some(c) => {
                let _ = write!(style, " fill=\"{}\"", escape(&c));
            }
            None => style.push_str(" fill=\"none\""),
        }
        if let Some(s) = &stroke {
            let _ = write!(
                style,
                " stroke=\"{}\" stroke-width=\"{}\"",
                escape(s),
                f(stroke_width)
            );
            if let Some(cap) = text_prop(v, "strokeLineCap") {
                let _ = write!(style, " stroke-linecap=\"{}\"", escape(cap));
            }
            if let Some(join) = text_prop(v, "strokeLineJoin") {
                let _ = write!(style, " stroke-linejoin=\"{}\"", escape(join));
            }
            if let Some(Value::Array(dash)) = v.get("strokeDashArray") {
                let parts: Vec<String> = dash
                    .iter()
                    .filter_map(|d| match d {
                        Value::Number(n) if n.is_finite() && *n >= 0.0 => Some(f(*n)),
                        _ => None,
                    })
                    .take(64)
                    .collect();
                if !parts.is_empty() {
                    let _ = write!(style, " stroke-dasharray=\"{}\"", parts.join(" "));
                }
            }
        }
        if let Some(rule) = text_prop(v, "fillRule") {
            let _ = write!(style, " fill-rule=\"{}\"", escape(rule));
        }
    }
    let opacity = num(at, label, v, "opacity", 1.0)?.clamp(0.0, 1.0);
    // Fabric applies `opacity` as the context's globalAlpha, to the fill and to the stroke
    // each: that is SVG's fill-opacity and stroke-opacity (no offscreen layer, as group
    // opacity would need). Groups and images keep group opacity.
    let layered = matches!(kind.as_str(), "group" | "image");
    if opacity < 1.0 && !layered {
        let _ = write!(
            style,
            " fill-opacity=\"{o}\" stroke-opacity=\"{o}\"",
            o = f(opacity)
        );
    }
    let _ = write!(out, "<g transform=\"{transform}\"");
    if opacity < 1.0 && layered {
        let _ = write!(out, " opacity=\"{}\"", f(opacity));
    }
    out.push_str(">\n");
    if kind == "group" {
        out.push_str(&shape.body);
        out.push_str(">\n");
    } else if shape.body.ends_with("</text") || shape.body.ends_with("</g") {
        // Text bodies carry their own element list; the paint goes on the wrapper.
        let _ = write!(out, "<g{style}>\n{}>\n</g>\n", shape.body);
    } else {
        let _ = writeln!(out, "{}{style}/>", shape.body);
    }
    out.push_str("</g>\n");
    Ok(())
}

/// A path's data from Fabric's command array (`[["M", 0, 0], ["L", 10, 10], ...]`) or a
/// path string.
fn path_data(at: &str, label: &str, v: Option<&Value>) -> Result<String, HostError> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(commands)) => {
            let mut d = String::new();
            for (i, c) in commands.iter().enumerate() {
                let Value::Array(parts) = c else {
                    return Err(HostError::invalid(format!(
                        "{at}: {label}.path[{i}] must be an array like [\"L\", x, y]"
                    )));
                };
                for (j, p) in parts.iter().enumerate() {
                    match p {
                        Value::String(s) if j == 0 && s.len() == 1 => d.push_str(s),
                        Value::Number(n) if j > 0 && n.is_finite() => {
                            d.push(' ');
                            d.push_str(&f(*n));
                        }
                        _ => {
                            return Err(HostError::invalid(format!(
                                "{at}: {label}.path[{i}] must be a command letter then finite numbers"
                            )));
                        }
                    }
                }
                d.push(' ');
            }
            Ok(d)
        }
        _ => Err(HostError::invalid(format!(
            "{at}: {label}.path must be a path string or Fabric's command array"
        ))),
    }
}

/// A path drawn in its own coordinates, centered on its bounds.
fn path_shape(
    at: &str,
    label: &str,
    d: &str,
    sw: f64,
    budget: &mut Budget,
) -> Result<Shape, HostError> {
    let mut builder = PathBuilder::new();
    for segment in svgtypes::SimplifyingPathParser::from(d) {
        budget.segments += 1;
        if budget.segments > MAX_PATH_SEGMENTS {
            return Err(HostError::limit(format!(
                "{at}: the scene's paths have more than {MAX_PATH_SEGMENTS} segments"
            )));
        }
        let segment = segment.map_err(|e| {
            HostError::malformed(format!("{at}: {label}.path is not valid path data: {e}"))
        })?;
        use svgtypes::SimplePathSegment as S;
        match segment {
            S::MoveTo { x, y } => builder.move_to(x as f32, y as f32),
            S::LineTo { x, y } => builder.line_to(x as f32, y as f32),
            S::Quadratic { x1, y1, x, y } => {
                builder.quad_to(x1 as f32, y1 as f32, x as f32, y as f32)
            }
            S::CurveTo {
                x1,
                y1,
                x2,
                y2,
                x,
                y,
            } => builder.cubic_to(
                x1 as f32, y1 as f32, x2 as f32, y2 as f32, x as f32, y as f32,
            ),
            S::ClosePath => builder.close(),
        }
    }
    let bounds = builder
        .finish()
        .and_then(|p| p.compute_tight_bounds())
        .or_else(|| Rect::from_xywh(0.0, 0.0, 0.0, 0.0));
    let (x, y, w, h) = bounds.map_or((0.0, 0.0, 0.0, 0.0), |b| {
        (
            f64::from(b.x()),
            f64::from(b.y()),
            f64::from(b.width()),
            f64::from(b.height()),
        )
    });
    Ok(Shape {
        body: format!(
            "<path transform=\"translate({} {})\" d=\"{}\"",
            f(-(x + w / 2.0)),
            f(-(y + h / 2.0)),
            escape(d)
        ),
        width: w,
        height: h,
        natural_left_top: Some((x - sw / 2.0, y - sw / 2.0)),
    })
}

/// A text object: one `<text>` per line, in the bundled font, measured with it.
fn text_shape(at: &str, label: &str, v: &Value) -> Result<Shape, HostError> {
    let text = text_prop(v, "text").unwrap_or("");
    let size = num(at, label, v, "fontSize", 40.0)?.clamp(0.0, 10_000.0);
    let line_height = num(at, label, v, "lineHeight", LINE_HEIGHT)?.clamp(0.0, 100.0);
    let lines: Vec<&str> = text.split('\n').collect();
    let widths: Vec<f64> = lines.iter().map(|l| super::measure(l) * size).collect();
    let measured = widths.iter().copied().fold(0.0, f64::max);
    let width = match v.get("width") {
        Some(Value::Number(n)) if n.is_finite() && *n > 0.0 => *n,
        _ => measured,
    };
    let line = size * FONT_SIZE_MULT * line_height;
    let height = size * FONT_SIZE_MULT * (line_height * (lines.len() as f64 - 1.0) + 1.0);
    let align = text_prop(v, "textAlign").unwrap_or("left");
    let (x, anchor) = match align {
        "center" => (0.0, "middle"),
        "right" => (width / 2.0, "end"),
        _ => (-width / 2.0, "start"),
    };
    let weight = match v.get("fontWeight") {
        Some(Value::String(s)) => escape(s),
        Some(Value::Number(n)) if n.is_finite() => f(*n),
        _ => "normal".into(),
    };
    let style = text_prop(v, "fontStyle").map_or("normal".into(), escape);
    let mut body = String::new();
    for (i, l) in lines.iter().enumerate() {
        // The baseline sits at the line's top plus the font's ascent share of the size.
        let baseline = -height / 2.0 + i as f64 * line + size * 0.93;
        let _ = writeln!(
            body,
            "<text xml:space=\"preserve\" font-family=\"DejaVu Sans\" font-size=\"{}\" font-weight=\"{weight}\" font-style=\"{style}\" text-anchor=\"{anchor}\" x=\"{}\" y=\"{}\">{}</text>",
            f(size),
            f(x),
            f(baseline),
            escape(l)
        );
    }
    // Drop the trailing newline: the writer closes the wrapper itself.
    let body = format!("<g>\n{}</g", body);
    Ok(Shape {
        body,
        width,
        height,
        natural_left_top: None,
    })
}

/// An image object: `src` is a data URI or bytes; its natural size fills a missing
/// `width`/`height`.
fn image_shape(at: &str, label: &str, v: &Value) -> Result<Shape, HostError> {
    let bytes: Vec<u8> = match v.get("src") {
        Some(Value::Bytes(b)) => b.clone(),
        Some(Value::String(s)) => super::data_uri_bytes(s).ok_or_else(|| {
            HostError::invalid(format!(
                "{at}: {label}.src must be bytes or a base64 data: URI (no file or network URL is read)"
            ))
        })?,
        _ => {
            return Err(HostError::invalid(format!(
                "{at}: {label}.src must be image bytes (Uint8Array) or a data: URI"
            )));
        }
    };
    let (mime, natural_w, natural_h) = super::raster_header(at, label, &bytes)?;
    let w = num(at, label, v, "width", f64::from(natural_w))?.max(0.0);
    let h = num(at, label, v, "height", f64::from(natural_h))?.max(0.0);
    let uri = format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&bytes)
    );
    Ok(Shape {
        body: format!(
            "<image x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" preserveAspectRatio=\"none\" href=\"{uri}\"",
            f(-w / 2.0),
            f(-h / 2.0),
            f(w),
            f(h)
        ),
        width: w,
        height: h,
        natural_left_top: None,
    })
}
