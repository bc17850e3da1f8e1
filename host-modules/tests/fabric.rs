//! `fabric` at the host level: scenes and SVGs rendered and checked by their pixels, the
//! round trip through `loadSVG`, and every cap against the input that tries to break it.

use std::time::{Duration, Instant};

use nodetool_host_modules::{HostDispatcher, HostErrorCode, implementation};
use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::Dispatcher;

fn call(export: &str, args: &[Value]) -> Result<Value, nodetool_host_modules::HostError> {
    let f = implementation("fabric", export).unwrap_or_else(|| panic!("fabric.{export}"));
    f(args)
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn n(v: f64) -> Value {
    Value::Number(v)
}

fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn pixels(v: Result<Value, nodetool_host_modules::HostError>) -> image::RgbaImage {
    match v {
        Ok(Value::Bytes(b)) => match image::load_from_memory(&b) {
            Ok(img) => img.to_rgba8(),
            Err(e) => panic!("not an image: {e}"),
        },
        other => panic!("expected bytes, got {other:?}"),
    }
}

fn code(v: Result<Value, nodetool_host_modules::HostError>) -> (HostErrorCode, String) {
    match v {
        Err(e) => (e.code(), e.message().to_string()),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

fn svg(body: &str) -> Value {
    s(&format!(
        "<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' width='40' height='40'>{body}</svg>"
    ))
}

#[test]
fn shapes_land_where_fabric_puts_them() {
    let scene = obj(&[
        ("width", n(200.0)),
        ("height", n(100.0)),
        ("backgroundColor", s("white")),
        (
            "objects",
            Value::Array(vec![
                obj(&[
                    ("type", s("circle")),
                    ("left", n(10.0)),
                    ("top", n(10.0)),
                    ("radius", n(20.0)),
                    ("fill", s("#00ff00")),
                ]),
                // Centered origin: the center is at (150, 50).
                obj(&[
                    ("type", s("Rect")),
                    ("left", n(150.0)),
                    ("top", n(50.0)),
                    ("originX", s("center")),
                    ("originY", s("center")),
                    ("width", n(20.0)),
                    ("height", n(20.0)),
                    ("fill", s("blue")),
                    ("angle", n(45.0)),
                ]),
                obj(&[
                    ("type", s("path")),
                    (
                        "path",
                        Value::Array(vec![
                            Value::Array(vec![s("M"), n(60.0), n(60.0)]),
                            Value::Array(vec![s("L"), n(90.0), n(60.0)]),
                            Value::Array(vec![s("L"), n(90.0), n(90.0)]),
                            Value::Array(vec![s("Z")]),
                        ]),
                    ),
                    ("fill", s("rgb(255,0,0)")),
                ]),
            ]),
        ),
    ]);
    let img = pixels(call("render", &[scene]));
    assert_eq!(img.get_pixel(30, 30).0, [0, 255, 0, 255], "circle center");
    assert_eq!(img.get_pixel(150, 50).0, [0, 0, 255, 255], "rect center");
    // The rotated square's corner region along the axis is blue (a 45° square reaches
    // 14 px out along x), and outside its diagonal it is white.
    assert_eq!(img.get_pixel(162, 50).0, [0, 0, 255, 255]);
    assert_eq!(img.get_pixel(159, 41).0, [255, 255, 255, 255]);
    // The path stays at its own coordinates: the triangle's inside is red.
    assert_eq!(img.get_pixel(85, 65).0, [255, 0, 0, 255]);
    assert_eq!(img.get_pixel(65, 85).0, [255, 255, 255, 255]);
}

#[test]
fn jpeg_data_urls_and_multiplier() {
    let scene = obj(&[
        ("width", n(10.0)),
        ("height", n(10.0)),
        ("backgroundColor", s("red")),
    ]);
    let Ok(Value::String(url)) = call("toDataURL", std::slice::from_ref(&scene)) else {
        panic!("no data URL")
    };
    assert!(url.starts_with("data:image/png;base64,"));
    let jpeg = call("render", &[scene.clone(), obj(&[("format", s("jpeg"))])]);
    let Ok(Value::Bytes(b)) = &jpeg else {
        panic!("no JPEG")
    };
    assert!(b.starts_with(&[0xff, 0xd8]));
    let img = pixels(call("render", &[scene, obj(&[("multiplier", n(3.0))])]));
    assert_eq!(img.dimensions(), (30, 30));
    assert_eq!(img.get_pixel(15, 15).0, [255, 0, 0, 255]);
}

#[test]
fn scenes_as_json_text_are_read_and_bad_json_is_malformed() {
    let img = pixels(call(
        "render",
        &[s(
            r##"{"width": 6, "height": 6, "backgroundColor": "#0000ff"}"##,
        )],
    ));
    assert_eq!(img.get_pixel(3, 3).0, [0, 0, 255, 255]);
    let (c, m) = code(call("render", &[s("{not json")]));
    assert_eq!(c, HostErrorCode::MalformedInput);
    assert!(
        m.starts_with("fabric.render: scene JSON could not be parsed"),
        "{m}"
    );
    let (c, m) = code(call("render", &[n(3.0)]));
    assert_eq!(c, HostErrorCode::InvalidArgument, "{m}");
    let (c, m) = code(call(
        "render",
        &[obj(&[(
            "objects",
            Value::Array(vec![obj(&[("type", s("sprite"))])]),
        )])],
    ));
    assert_eq!(c, HostErrorCode::Unsupported, "{m}");
}

#[test]
fn render_svg_gives_svg_that_renders_the_same() {
    let scene = obj(&[
        ("width", n(50.0)),
        ("height", n(50.0)),
        (
            "objects",
            Value::Array(vec![obj(&[
                ("type", s("rect")),
                ("left", n(0.0)),
                ("top", n(0.0)),
                ("width", n(25.0)),
                ("height", n(50.0)),
                ("fill", s("red\" onload=\"alert(1)")),
            ])]),
        ),
    ]);
    let Ok(Value::String(text)) = call("renderSVG", std::slice::from_ref(&scene)) else {
        panic!("no SVG")
    };
    assert!(text.starts_with("<?xml"));
    // Attribute values are escaped: no injected attribute.
    assert!(!text.contains("\" onload="), "{text}");
    let direct = pixels(call("render", &[scene]));
    let through_svg = pixels(call("render", &[s(&text)]));
    assert_eq!(direct, through_svg);
}

#[test]
fn load_svg_gives_objects_render_draws_back() {
    let text = "<svg xmlns='http://www.w3.org/2000/svg' width='60' height='40'>\
        <g transform='translate(10 5)'><rect x='0' y='0' width='20' height='10' fill='#ff0000'/></g>\
        <circle cx='45' cy='25' r='8' fill='blue' stroke='black' stroke-width='2'/>\
        <text x='2' y='38' font-size='10' fill='green'>Hi</text></svg>";
    let Ok(loaded) = call("loadSVG", &[s(text)]) else {
        panic!("loadSVG failed")
    };
    let Some(Value::Array(objects)) = loaded.get("objects") else {
        panic!("no objects: {loaded:?}")
    };
    assert_eq!(objects.len(), 3, "{objects:?}");
    assert_eq!(objects[0].get("type"), Some(&s("path")));
    assert_eq!(objects[0].get("fill"), Some(&s("rgb(255,0,0)")));
    assert_eq!(objects[2].get("text"), Some(&s("Hi")));
    assert_eq!(
        loaded.get("options").and_then(|o| o.get("width")),
        Some(&n(60.0))
    );
    let scene = obj(&[
        ("width", n(60.0)),
        ("height", n(40.0)),
        ("objects", Value::Array(objects[..2].to_vec())),
    ]);
    let img = pixels(call("render", &[scene]));
    assert_eq!(
        img.get_pixel(15, 8).0,
        [255, 0, 0, 255],
        "the translated rect"
    );
    assert_eq!(img.get_pixel(45, 25).0, [0, 0, 255, 255], "the circle");
}

#[test]
fn images_take_bytes_or_data_uris_only() {
    let mut png = Vec::new();
    let red = image::RgbaImage::from_pixel(4, 4, image::Rgba([255, 0, 0, 255]));
    if let Err(e) = red.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png) {
        panic!("{e}")
    }
    let scene = |src: Value| {
        obj(&[
            ("width", n(20.0)),
            ("height", n(20.0)),
            (
                "objects",
                Value::Array(vec![obj(&[
                    ("type", s("image")),
                    ("src", src),
                    ("left", n(0.0)),
                    ("top", n(0.0)),
                    ("width", n(20.0)),
                    ("height", n(20.0)),
                ])]),
            ),
        ])
    };
    let img = pixels(call("render", &[scene(Value::Bytes(png.clone()))]));
    assert_eq!(img.get_pixel(10, 10).0, [255, 0, 0, 255]);
    let (c, m) = code(call("render", &[scene(s("file:///etc/passwd"))]));
    assert_eq!(c, HostErrorCode::InvalidArgument, "{m}");
    let (c, _) = code(call("render", &[scene(s("http://127.0.0.1:9/x.png"))]));
    assert_eq!(c, HostErrorCode::InvalidArgument);
    // An image declaring 100,000 x 100,000 pixels is refused from its header.
    let mut huge = png.clone();
    huge[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    huge[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(&huge[12..29]);
    huge[29..33].copy_from_slice(&crc.sum().to_be_bytes());
    let (c, m) = code(call("render", &[scene(Value::Bytes(huge))]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
}

#[test]
fn svg_external_references_are_never_read() {
    // A red PNG on disk, referenced by path and by file: URL; and a loopback URL.
    let dir = std::env::temp_dir().join(format!("fabric-ext-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("red.png");
    let red = image::RgbaImage::from_pixel(4, 4, image::Rgba([255, 0, 0, 255]));
    if let Err(e) = red.save(&file) {
        panic!("{e}")
    }
    let path = file.display().to_string();
    for href in [
        path.clone(),
        format!("file://{path}"),
        "file:///etc/passwd".into(),
        "http://127.0.0.1:9/red.png".into(),
    ] {
        let doc = svg(&format!(
            "<image href='{href}' x='0' y='0' width='40' height='40'/><image xlink:href='{href}' x='0' y='0' width='40' height='40'/>"
        ));
        let img = pixels(call("render", std::slice::from_ref(&doc)));
        assert!(img.pixels().all(|p| p.0[3] == 0), "{href} was drawn");
        let Ok(loaded) = call("loadSVG", &[doc]) else {
            panic!("loadSVG failed")
        };
        assert_eq!(loaded.get("objects"), Some(&Value::Array(vec![])));
    }
    // An external entity is not resolved either.
    let xxe = s(
        "<?xml version='1.0'?><!DOCTYPE svg [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>\
         <svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><text y='5'>&x;</text></svg>",
    );
    match call("loadSVG", &[xxe]) {
        Err(e) => assert!(!e.message().contains("root:"), "{}", e.message()),
        Ok(v) => assert!(!format!("{v:?}").contains("root:"), "{v:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn self_referencing_and_exponential_use_is_bounded() {
    let started = Instant::now();
    // A <use> of itself, and two that use each other: usvg drops them; the render ends.
    let selfish = svg(
        "<g id='a'><rect width='10' height='10' fill='red'/><use href='#a'/></g><use id='b' href='#c'/><use id='c' href='#b'/>",
    );
    let img = pixels(call("render", &[selfish]));
    assert_eq!(img.get_pixel(5, 5).0, [255, 0, 0, 255]);
    // Ten levels, each using the level below ten times: 10^10 copies once expanded.
    let mut body = String::from("<defs><rect id='l0' width='1' height='1'/>");
    for level in 1..=10 {
        body.push_str(&format!("<g id='l{level}'>"));
        for _ in 0..10 {
            body.push_str(&format!("<use href='#l{}'/>", level - 1));
        }
        body.push_str("</g>");
    }
    body.push_str("</defs><use href='#l10'/>");
    let (c, m) = code(call("render", &[svg(&body)]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(m.contains("expands to more than"), "{m}");
    // A chain of 1,000 <use>s, each of the one before: shallow as written, 2,000 deep expanded.
    let mut chain = String::from("<defs><rect id='u0' width='1' height='1'/>");
    for i in 1..1000 {
        chain.push_str(&format!("<g id='u{i}'><use href='#u{}'/></g>", i - 1));
    }
    chain.push_str("</defs><use href='#u999'/>");
    let (c, m) = code(call("loadSVG", &[svg(&chain)]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn deep_nesting_is_refused_without_recursion() {
    let depth = 100_000;
    let text = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'>{}<rect width='1' height='1'/>{}</svg>",
        "<g>".repeat(depth),
        "</g>".repeat(depth)
    );
    for export in ["render", "loadSVG"] {
        let (c, m) = code(call(export, &[s(&text)]));
        assert_eq!(c, HostErrorCode::LimitExceeded, "{export}: {m}");
        assert!(m.contains("nests elements more than 256 deep"), "{m}");
    }
    // Scene groups nest at most 32 deep.
    let mut group = obj(&[("type", s("rect")), ("width", n(1.0)), ("height", n(1.0))]);
    for _ in 0..40 {
        group = obj(&[("type", s("group")), ("objects", Value::Array(vec![group]))]);
    }
    let (c, _) = code(call(
        "render",
        &[obj(&[("objects", Value::Array(vec![group]))])],
    ));
    assert_eq!(c, HostErrorCode::LimitExceeded);
}

#[test]
fn entity_expansion_bombs_are_refused() {
    let mut dtd = String::from("<!ENTITY lol0 'lollollollollollollollollollol'>");
    for i in 1..10 {
        let refs: String = (0..10).map(|_| format!("&lol{};", i - 1)).collect();
        dtd.push_str(&format!("<!ENTITY lol{i} '{refs}'>"));
    }
    let text = format!(
        "<?xml version='1.0'?><!DOCTYPE svg [{dtd}]><svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><text>&lol9;</text></svg>"
    );
    let started = Instant::now();
    let (c, m) = code(call("render", &[s(&text)]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn huge_path_data_is_capped() {
    // 600,000 segments in a scene path (past the 500,000 cap).
    let mut d = String::from("M0 0");
    for i in 0..600_000 {
        d.push_str(if i % 2 == 0 { "L1 1" } else { "L0 0" });
    }
    let scene = obj(&[(
        "objects",
        Value::Array(vec![obj(&[("type", s("path")), ("path", s(&d))])]),
    )]);
    let (c, m) = code(call("render", &[scene]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    // 100,000 segments in an SVG path render, within the element caps.
    let long: String = std::iter::once("M0 0".to_string())
        .chain((0..100_000).map(|i| format!("L{} {}", i % 40, (i * 7) % 40)))
        .collect();
    let img = pixels(call(
        "render",
        &[svg(&format!(
            "<path d='{long}' stroke='black' fill='none'/>"
        ))],
    ));
    assert!(img.pixels().any(|p| p.0[3] > 0));
}

#[test]
fn huge_canvases_are_refused_before_any_allocation() {
    for (w, h) in [(1e9, 1e9), (8193.0, 10.0), (-5.0, 10.0), (f64::NAN, 10.0)] {
        let (c, m) = code(call("render", &[obj(&[("width", n(w)), ("height", n(h))])]));
        assert_eq!(c, HostErrorCode::LimitExceeded, "{w}x{h}: {m}");
    }
    // Each side allowed, the product too large: 8192 x 8192 is 64 Mi pixels.
    let (c, m) = code(call(
        "render",
        &[obj(&[("width", n(8192.0)), ("height", n(8192.0))])],
    ));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(m.contains("pixel cap"), "{m}");
    // The multiplier is clamped to 4 (the reference's rule): a 40 px SVG gives 160 px.
    let img = pixels(call("render", &[svg(""), obj(&[("multiplier", n(1e9))])]));
    assert_eq!(img.dimensions(), (160, 160));
    let big = s("<svg xmlns='http://www.w3.org/2000/svg' width='100000' height='100000'/>");
    let (c, _) = code(call("render", &[big]));
    assert_eq!(c, HostErrorCode::LimitExceeded);
}

#[test]
fn a_passed_deadline_stops_the_call() {
    let specifier = "@nodetool-ai/sandbox-fabric";
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: specifier.into(),
            pack_name: specifier.into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "host:fabric".into(),
            graph: vec![],
            kind: ResolvedKind::Host {
                host_id: "fabric".into(),
            },
        }],
        statuses: vec![],
    };
    let Ok(Some(dispatcher)) = HostDispatcher::for_resolution(&resolution) else {
        panic!("no dispatcher")
    };
    let future = dispatcher.call(
        specifier,
        "render",
        vec![obj(&[("width", n(10.0)), ("height", n(10.0))])],
        Instant::now(),
    );
    let answer = futures_lite_block_on(future);
    let message = answer.err().map(|e| e.message).unwrap_or_default();
    assert!(message.contains("deadline passed"), "{message}");
}

fn futures_lite_block_on<T>(
    mut f: std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>,
) -> T {
    use std::task::{Context, Poll, Waker};
    let started = Instant::now();
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no answer");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn filter_work_is_capped() {
    let octaves = svg(
        "<filter id='t'><feTurbulence baseFrequency='0.05' numOctaves='1000000000'/></filter><rect width='40' height='40' filter='url(#t)'/>",
    );
    let (c, m) = code(call("render", &[octaves]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(m.contains("numOctaves"), "{m}");
    let morphology = svg(
        "<filter id='m'><feMorphology radius='5000'/></filter><rect width='40' height='40' filter='url(#m)'/>",
    );
    let (c, _) = code(call("render", &[morphology]));
    assert_eq!(c, HostErrorCode::LimitExceeded);
    let convolve = svg(
        "<filter id='k'><feConvolveMatrix order='300'/></filter><rect width='40' height='40' filter='url(#k)'/>",
    );
    let (c, _) = code(call("render", &[convolve]));
    assert_eq!(c, HostErrorCode::LimitExceeded);
    // One blur used by 100 elements is 100 passes.
    let uses: String = (0..100)
        .map(|_| "<rect width='40' height='40' filter='url(#b)'/>")
        .collect();
    let fan_out = svg(&format!(
        "<filter id='b'><feGaussianBlur stdDeviation='3'/></filter>{uses}"
    ));
    let (c, m) = code(call("render", &[fan_out]));
    assert_eq!(c, HostErrorCode::LimitExceeded, "{m}");
    assert!(m.contains("filter primitives"), "{m}");
    // Within the caps a filter renders.
    let ok = svg(
        "<filter id='b'><feGaussianBlur stdDeviation='2'/></filter><rect x='10' y='10' width='20' height='20' fill='red' filter='url(#b)'/>",
    );
    let img = pixels(call("render", &[ok]));
    assert!(img.get_pixel(20, 20).0[3] > 200);
}
