//! `fabric`: Fabric.js scenes and SVG documents rendered natively (usvg + resvg on tiny-skia),
//! where the reference runs Fabric.js on node-canvas.
//!
//! - `render(scene, {format, quality, multiplier})` -> PNG (or JPEG) bytes.
//! - `renderSVG(scene, {suppressPreamble})` -> the scene as SVG text.
//! - `toDataURL(scene, options)` -> `data:image/png;base64,...` (or JPEG).
//! - `loadSVG(svg)` -> `{objects, options}`: the SVG's drawable elements as scene objects
//!   (`path`, `text`, `image`, in document coordinates) that `render` draws back.
//!
//! A scene is Fabric's JSON (`{width, height, backgroundColor, objects: [...]}`, or that JSON
//! as a string). `render` and `toDataURL` also take an SVG document (a string starting with
//! `<`), which the reference cannot. The scene becomes an SVG ([`scene`]), every SVG goes
//! through the hostile-input pass ([`guard`]), and usvg converts it with these rules:
//! - Fonts: only the bundled DejaVu Sans (compiled in; no system font is looked up, so output
//!   is the same on every machine and the confined worker opens no file). Every family maps
//!   to it.
//! - Images: only `data:` URIs of PNG, JPEG, GIF or WebP whose header declares at most
//!   [`MAX_IMAGE_PIXELS`]; any other `href` (a file path, `file:`, `http:`) is dropped
//!   unread, and an SVG nested in a data URI is dropped too (no recursion through images).
//! - Size: each side at most [`MAX_DIMENSION`] (the reference's cap) and the output (size
//!   times `multiplier`, at most 4) at most [`MAX_OUTPUT_PIXELS`], checked before anything is
//!   allocated.
//! - Time: the run's deadline is checked before parsing and before rasterizing; resvg cannot
//!   be interrupted mid-render, so the caps (pixels, expanded elements, path segments, filter
//!   primitives and their per-pixel work) bound the work of one render instead.

mod guard;
mod load;
mod scene;

use resvg::usvg;
use std::io::Cursor;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use nodetool_protocol::value::Value;
use usvg::fontdb;

use crate::error::HostError;
use crate::limits::{option, options_of, require_text};

#[allow(unused_imports)]
pub use guard::{
    MAX_CONVOLVE_ORDER, MAX_MORPHOLOGY_RADIUS, MAX_SVG_DEPTH, MAX_SVG_EXPANDED_ELEMENTS,
    MAX_SVG_FILTER_PRIMITIVES, MAX_SVG_NODES, MAX_TURBULENCE_OCTAVES,
};
#[allow(unused_imports)]
pub use scene::{MAX_PATH_SEGMENTS, MAX_SCENE_DEPTH, MAX_SCENE_OBJECTS};

/// The largest canvas side, in pixels (the reference's `MAX_FABRIC_DIMENSION`).
pub const MAX_DIMENSION: u32 = 8192;

/// The most pixels one rendered image may have (after `multiplier`): 32 Mi pixels, a 128 MiB
/// RGBA buffer (8192 x 4096).
pub const MAX_OUTPUT_PIXELS: u64 = 32 * 1024 * 1024;

/// The most pixels an embedded raster image may declare.
pub const MAX_IMAGE_PIXELS: u64 = 32 * 1024 * 1024;

/// The largest `multiplier` (the reference clamps to 4).
const MAX_MULTIPLIER: f64 = 4.0;

/// DejaVu Sans 2.37 (see `assets/fonts/LICENSE`).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The font family the bundled font declares.
const FAMILY: &str = "DejaVu Sans";

fn font_db() -> Arc<fontdb::Database> {
    static DB: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = fontdb::Database::new();
        db.load_font_data(FONT.to_vec());
        db.set_serif_family(FAMILY);
        db.set_sans_serif_family(FAMILY);
        db.set_monospace_family(FAMILY);
        db.set_cursive_family(FAMILY);
        db.set_fantasy_family(FAMILY);
        Arc::new(db)
    })
    .clone()
}

/// The advance width of `text` in the bundled font, in ems.
fn measure(text: &str) -> f64 {
    static FACE: OnceLock<Option<ttf_parser::Face<'static>>> = OnceLock::new();
    let Some(face) = FACE.get_or_init(|| ttf_parser::Face::parse(FONT, 0).ok()) else {
        return 0.0;
    };
    let units = f64::from(face.units_per_em().max(1));
    text.chars()
        .map(|c| {
            face.glyph_index(c)
                .and_then(|g| face.glyph_hor_advance(g))
                .map_or(0.0, f64::from)
        })
        .sum::<f64>()
        / units
}

/// The bytes of a base64 (or percent-free plain) `data:` URI; `None` for anything else.
fn data_uri_bytes(uri: &str) -> Option<Vec<u8>> {
    let rest = uri.trim().strip_prefix("data:")?;
    let (meta, payload) = rest.split_once(',')?;
    if meta.ends_with(";base64") {
        let cleaned: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(cleaned.as_bytes())
            .ok()
    } else {
        Some(payload.as_bytes().to_vec())
    }
}

/// A raster image's MIME type and declared size, read from its header only; refuses a format
/// other than PNG, JPEG, GIF and WebP and a size past [`MAX_IMAGE_PIXELS`].
fn raster_header(
    at: &str,
    label: &str,
    bytes: &[u8],
) -> Result<(&'static str, u32, u32), HostError> {
    let reader = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|_| HostError::malformed(format!("{at}: {label} could not be read")))?;
    let mime = match reader.format() {
        Some(image::ImageFormat::Png) => "image/png",
        Some(image::ImageFormat::Jpeg) => "image/jpeg",
        Some(image::ImageFormat::Gif) => "image/gif",
        Some(image::ImageFormat::WebP) => "image/webp",
        _ => {
            return Err(HostError::unsupported(format!(
                "{at}: {label} is not a PNG, JPEG, GIF or WebP image"
            )));
        }
    };
    let (w, h) = reader.into_dimensions().map_err(|_| {
        HostError::malformed(format!("{at}: {label}: the image header is not readable"))
    })?;
    if u64::from(w) * u64::from(h) > MAX_IMAGE_PIXELS {
        return Err(HostError::limit(format!(
            "{at}: {label} is {w}x{h}, past the {MAX_IMAGE_PIXELS}-pixel cap for embedded images"
        )));
    }
    Ok((mime, w, h))
}

/// usvg's options: the bundled font only, and `data:` raster images only.
fn usvg_options() -> usvg::Options<'static> {
    let mut options = usvg::Options {
        font_family: FAMILY.into(),
        fontdb: font_db(),
        ..usvg::Options::default()
    };
    options.image_href_resolver = usvg::ImageHrefResolver {
        resolve_data: Box::new(|mime, data, _| {
            let kind = match (mime, raster_header("", "", &data)) {
                (_, Err(_)) => return None,
                (_, Ok(("image/png", ..))) => usvg::ImageKind::PNG(data),
                (_, Ok(("image/jpeg", ..))) => usvg::ImageKind::JPEG(data),
                (_, Ok(("image/gif", ..))) => usvg::ImageKind::GIF(data),
                (_, Ok(("image/webp", ..))) => usvg::ImageKind::WEBP(data),
                _ => return None,
            };
            Some(kind)
        }),
        // File paths and URLs are never read.
        resolve_string: Box::new(|_, _| None),
    };
    options
}

/// The deadline check between stages.
fn check_deadline(at: &str, stage: &str) -> Result<(), HostError> {
    if crate::call_deadline().is_some_and(|d| std::time::Instant::now() >= d) {
        return Err(HostError::deadline(format!(
            "{at}: the run's deadline passed before {stage}"
        )));
    }
    Ok(())
}

/// What the first argument is: a scene (object or JSON text) or an SVG document.
enum Input {
    Scene(Value),
    Svg(String),
}

fn input(at: &str, spec: Option<&Value>, svg_allowed: bool) -> Result<Input, HostError> {
    match spec {
        Some(Value::String(_)) => {
            let text = require_text(at, spec, "scene")?;
            if svg_allowed && text.trim_start().starts_with('<') {
                return Ok(Input::Svg(text.to_string()));
            }
            let json: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                HostError::malformed(format!("{at}: scene JSON could not be parsed: {e}"))
            })?;
            Ok(Input::Scene(Value::from_json(json)))
        }
        Some(v @ Value::Object(_)) => Ok(Input::Scene(v.clone())),
        None | Some(Value::Undefined | Value::Null) => Ok(Input::Scene(Value::Object(vec![]))),
        Some(_) => Err(HostError::invalid(format!(
            "{at}: scene must be an object (Fabric's JSON), its JSON text{}",
            if svg_allowed {
                ", or an SVG document"
            } else {
                ""
            }
        ))),
    }
}

/// A canvas side: the scene's, else the option's, else the default; positive and at most
/// [`MAX_DIMENSION`], rounded.
fn dimension(
    at: &str,
    scene: &Value,
    options: &[(String, Value)],
    key: &str,
    default: f64,
) -> Result<u32, HostError> {
    let value = scene
        .get(key)
        .filter(|v| !matches!(v, Value::Undefined | Value::Null))
        .or_else(|| option(options, key));
    let n = match value {
        None => default,
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => s.trim().parse::<f64>().unwrap_or(f64::NAN),
        Some(_) => f64::NAN,
    };
    if !n.is_finite() || n <= 0.0 || n > f64::from(MAX_DIMENSION) {
        return Err(HostError::limit(format!(
            "{at}: {key} must be a positive number up to {MAX_DIMENSION}"
        )));
    }
    Ok((n.round() as u32).max(1))
}

/// The scene as SVG text, with its canvas.
fn scene_svg(
    at: &str,
    scene: &Value,
    options: &[(String, Value)],
    preamble: bool,
) -> Result<(String, u32, u32), HostError> {
    let width = dimension(at, scene, options, "width", 800.0)?;
    let height = dimension(at, scene, options, "height", 600.0)?;
    // Fabric's own JSON (`canvas.toJSON()`) names the color `background`; the reference's
    // examples write `backgroundColor` (which Fabric's `loadFromJSON` then clears): both paint.
    let background = match scene
        .get("backgroundColor")
        .or_else(|| scene.get("background"))
    {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let canvas = scene::Canvas {
        width,
        height,
        background,
    };
    let svg = scene::to_svg(at, &canvas, scene.get("objects"), preamble)?;
    Ok((svg, width, height))
}

/// Parses an SVG through the guard into usvg's tree.
fn svg_tree(at: &str, svg: &str) -> Result<usvg::Tree, HostError> {
    check_deadline(at, "parsing")?;
    let doc = guard::parse_checked(at, svg)?;
    usvg::Tree::from_xmltree(&doc, &usvg_options())
        .map_err(|e| HostError::malformed(format!("{at}: the SVG could not be converted: {e}")))
}

/// The output format, quality and multiplier, as the reference reads them.
struct Encoding {
    jpeg: bool,
    quality: f64,
    multiplier: f64,
}

fn encoding(options: &[(String, Value)]) -> Encoding {
    let format = match option(options, "format") {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        _ => "png".into(),
    };
    let multiplier = match option(options, "multiplier") {
        Some(Value::Number(n)) if n.is_finite() && *n > 0.0 => n.min(MAX_MULTIPLIER),
        _ => 1.0,
    };
    let quality = match option(options, "quality") {
        Some(Value::Number(n)) if (0.0..=1.0).contains(n) => *n,
        _ => 1.0,
    };
    Encoding {
        jpeg: format == "jpeg" || format == "jpg",
        quality,
        multiplier,
    }
}

/// Rasterizes `tree` at `width`x`height` times the multiplier and encodes it.
fn rasterize(
    at: &str,
    tree: &usvg::Tree,
    width: f64,
    height: f64,
    enc: &Encoding,
) -> Result<Vec<u8>, HostError> {
    let out_w = (width * enc.multiplier).round().max(1.0);
    let out_h = (height * enc.multiplier).round().max(1.0);
    if out_w > f64::from(MAX_DIMENSION) * MAX_MULTIPLIER
        || out_h > f64::from(MAX_DIMENSION) * MAX_MULTIPLIER
        || out_w * out_h > MAX_OUTPUT_PIXELS as f64
    {
        return Err(HostError::limit(format!(
            "{at}: the output would be {out_w}x{out_h} pixels, past the {MAX_OUTPUT_PIXELS}-pixel cap"
        )));
    }
    let (out_w, out_h) = (out_w as u32, out_h as u32);
    check_deadline(at, "rendering")?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(out_w, out_h).ok_or_else(|| {
        HostError::limit(format!("{at}: a {out_w}x{out_h} canvas cannot be made"))
    })?;
    let size = tree.size();
    let transform = resvg::tiny_skia::Transform::from_scale(
        out_w as f32 / size.width(),
        out_h as f32 / size.height(),
    );
    resvg::render(tree, transform, &mut pixmap.as_mut());
    if enc.jpeg {
        // Premultiplied RGB is the image over black, as a canvas's JPEG export gives it.
        let rgb: Vec<u8> = pixmap
            .data()
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect();
        let mut out = Vec::new();
        let quality = (enc.quality * 100.0).round().clamp(1.0, 100.0) as u8;
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
            .encode(&rgb, out_w, out_h, image::ExtendedColorType::Rgb8)
            .map_err(|e| HostError::output(format!("{at}: JPEG encoding failed: {e}")))?;
        Ok(out)
    } else {
        pixmap
            .encode_png()
            .map_err(|e| HostError::output(format!("{at}: PNG encoding failed: {e}")))
    }
}

/// The encoded image of the first argument (scene or SVG) with the second's options.
fn render_bytes(at: &str, args: &[Value]) -> Result<(Vec<u8>, bool), HostError> {
    let options = options_of(args.get(1));
    let enc = encoding(options);
    match input(at, args.first(), true)? {
        Input::Scene(scene) => {
            let (svg, w, h) = scene_svg(at, &scene, options, false)?;
            let tree = svg_tree(at, &svg)?;
            Ok((
                rasterize(at, &tree, f64::from(w), f64::from(h), &enc)?,
                enc.jpeg,
            ))
        }
        Input::Svg(svg) => {
            let tree = svg_tree(at, &svg)?;
            let size = tree.size();
            let (w, h) = (f64::from(size.width()), f64::from(size.height()));
            if w > f64::from(MAX_DIMENSION) || h > f64::from(MAX_DIMENSION) {
                return Err(HostError::limit(format!(
                    "{at}: the SVG is {w}x{h}; each side may be at most {MAX_DIMENSION}"
                )));
            }
            Ok((rasterize(at, &tree, w, h, &enc)?, enc.jpeg))
        }
    }
}

/// `render(scene | svg, {format, quality, multiplier})` -> image bytes (PNG by default).
pub fn render(args: &[Value]) -> Result<Value, HostError> {
    render_bytes("fabric.render", args).map(|(bytes, _)| Value::Bytes(bytes))
}

/// `toDataURL(scene | svg, options)` -> `data:image/png;base64,...`.
pub fn to_data_url(args: &[Value]) -> Result<Value, HostError> {
    let (bytes, jpeg) = render_bytes("fabric.toDataURL", args)?;
    Ok(Value::String(format!(
        "data:image/{};base64,{}",
        if jpeg { "jpeg" } else { "png" },
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )))
}

/// `renderSVG(scene, {suppressPreamble})` -> the scene as an SVG document. The document is
/// checked to convert (so what this returns, `render` draws).
pub fn render_svg(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "fabric.renderSVG";
    let options = options_of(args.get(1));
    let preamble = !matches!(option(options, "suppressPreamble"), Some(Value::Bool(true)));
    let Input::Scene(scene) = input(AT, args.first(), false)? else {
        return Err(HostError::invalid(format!("{AT}: scene must be an object")));
    };
    let (svg, _, _) = scene_svg(AT, &scene, options, preamble)?;
    Ok(Value::String(svg))
}

/// `loadSVG(svg)` -> `{objects, options: {width, height}}`.
pub fn load_svg(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "fabric.loadSVG";
    let svg = require_text(AT, args.first(), "svg")?;
    let tree = svg_tree(AT, svg)?;
    load::objects_of(AT, &tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(members: &[(&str, Value)]) -> Value {
        Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn n(x: f64) -> Value {
        Value::Number(x)
    }

    fn s(x: &str) -> Value {
        Value::String(x.into())
    }

    fn png(bytes: &[u8]) -> image::RgbaImage {
        match image::load_from_memory(bytes) {
            Ok(img) => img.to_rgba8(),
            Err(e) => panic!("not an image: {e}"),
        }
    }

    #[test]
    fn a_red_rect_is_red_where_it_is() {
        let scene = obj(&[
            ("width", n(100.0)),
            ("height", n(80.0)),
            ("backgroundColor", s("#ffffff")),
            (
                "objects",
                Value::Array(vec![obj(&[
                    ("type", s("rect")),
                    ("left", n(10.0)),
                    ("top", n(20.0)),
                    ("width", n(30.0)),
                    ("height", n(40.0)),
                    ("fill", s("red")),
                ])]),
            ),
        ]);
        let Ok(Value::Bytes(bytes)) = render(&[scene]) else {
            panic!("no bytes")
        };
        let img = png(&bytes);
        assert_eq!(img.dimensions(), (100, 80));
        assert_eq!(img.get_pixel(25, 40).0, [255, 0, 0, 255]);
        assert_eq!(img.get_pixel(5, 5).0, [255, 255, 255, 255]);
        assert_eq!(img.get_pixel(45, 40).0, [255, 255, 255, 255]);
    }

    #[test]
    fn fabric_json_background_key_paints_too() {
        let scene = obj(&[
            ("width", n(4.0)),
            ("height", n(4.0)),
            ("background", s("#00ff00")),
        ]);
        let Ok(Value::Bytes(bytes)) = render(&[scene]) else {
            panic!("no bytes")
        };
        assert_eq!(png(&bytes).get_pixel(2, 2).0, [0, 255, 0, 255]);
    }

    #[test]
    fn text_is_drawn_with_the_bundled_font() {
        let scene = obj(&[
            ("width", n(200.0)),
            ("height", n(60.0)),
            (
                "objects",
                Value::Array(vec![obj(&[
                    ("type", s("text")),
                    ("text", s("Hello")),
                    ("fontFamily", s("No Such Font")),
                    ("left", n(5.0)),
                    ("top", n(5.0)),
                    ("fontSize", n(40.0)),
                ])]),
            ),
        ]);
        let Ok(Value::Bytes(bytes)) = render(&[scene]) else {
            panic!("no bytes")
        };
        let img = png(&bytes);
        let inked = img.pixels().filter(|p| p.0[3] > 128).count();
        assert!(inked > 200, "only {inked} pixels of text");
        // "Hello" at 40px in DejaVu Sans is about 110 px wide: nothing right of 150.
        assert!(
            img.enumerate_pixels()
                .all(|(x, _, p)| x < 150 || p.0[3] == 0)
        );
    }

    #[test]
    fn huge_canvases_are_refused_before_allocation() {
        let e = render(&[obj(&[("width", n(100_000.0)), ("height", n(10.0))])]).err();
        assert!(e.is_some_and(|e| e.message().contains("up to 8192")));
        let e = render(&[
            obj(&[("width", n(8192.0)), ("height", n(8192.0))]),
            obj(&[("multiplier", n(4.0))]),
        ])
        .err();
        assert!(e.is_some_and(|e| e.message().contains("pixel cap")));
        let e = render(&[s(
            "<svg xmlns='http://www.w3.org/2000/svg' width='1000000' height='1000000'/>",
        )])
        .err();
        assert!(e.is_some_and(|e| e.message().contains("at most 8192")));
    }
}
