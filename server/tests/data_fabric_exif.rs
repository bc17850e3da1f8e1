//! The fabric and exif host modules through the server's host-module route (the one the browser
//! runner calls; bytes cross as `{"$bytes": ...}` both ways): a rendered PNG checked by its
//! pixels, an SVG to PNG, EXIF out of a camera-like JPEG, and the typed errors.

mod support;

use axum::http::StatusCode;
use base64::Engine as _;
use serde_json::{Value, json};
use support::{World, post_json, test_config};

async fn call(
    state: &nodetool_server::AppState,
    id: &str,
    export: &str,
    args: Value,
) -> (StatusCode, Value) {
    let answer = post_json(
        state,
        &format!("/api/host-modules/{id}/{export}"),
        &json!({ "args": args }),
    )
    .await;
    (answer.status, answer.json())
}

fn pixels(v: &Value) -> image::RgbaImage {
    let b64 = v["$bytes"]
        .as_str()
        .unwrap_or_else(|| panic!("not bytes: {v}"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_else(|e| panic!("{e}"));
    image::load_from_memory(&bytes)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_rgba8()
}

/// A TIFF-in-JPEG with Make "NIKON", Model "Z 6", Orientation 3.
fn camera_jpeg() -> Vec<u8> {
    let mut t: Vec<u8> = b"MM\0*\0\0\0\x08".to_vec();
    let data_at: u32 = 8 + 2 + 3 * 12 + 4;
    t.extend_from_slice(&3u16.to_be_bytes());
    for (tag, typ, count, value) in [
        (0x010fu16, 2u16, 6u32, data_at),
        (0x0110, 2, 4, u32::from_be_bytes(*b"Z 6\0")),
        (0x0112, 3, 1, 3 << 16),
    ] {
        t.extend_from_slice(&tag.to_be_bytes());
        t.extend_from_slice(&typ.to_be_bytes());
        t.extend_from_slice(&count.to_be_bytes());
        t.extend_from_slice(&value.to_be_bytes());
    }
    t.extend_from_slice(&0u32.to_be_bytes());
    t.extend_from_slice(b"NIKON\0");
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&t);
    let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe1];
    jpeg.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
    jpeg.extend_from_slice(&app1);
    jpeg.extend_from_slice(&[0xff, 0xd9]);
    jpeg
}

#[tokio::test]
async fn the_host_module_route_serves_fabric_and_exif() {
    let world = World::shipped_packs();
    let state = world.state(test_config());

    let scene = json!({
        "width": 50, "height": 50, "backgroundColor": "white",
        "objects": [{ "type": "circle", "left": 5, "top": 5, "radius": 20, "fill": "#0000ff" }],
    });
    let (status, answer) = call(&state, "fabric", "render", json!([scene.clone()])).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let img = pixels(&answer["result"]);
    assert_eq!(img.get_pixel(25, 25).0, [0, 0, 255, 255]);
    assert_eq!(img.get_pixel(1, 1).0, [255, 255, 255, 255]);

    let (status, answer) = call(&state, "fabric", "renderSVG", json!([scene])).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let svg = answer["result"].as_str().unwrap_or_default().to_string();
    assert!(svg.contains("<circle"), "{svg}");
    let (_, answer) = call(&state, "fabric", "render", json!([svg])).await;
    assert_eq!(
        pixels(&answer["result"]).get_pixel(25, 25).0,
        [0, 0, 255, 255]
    );

    let (_, answer) = call(
        &state,
        "fabric",
        "loadSVG",
        json!(["<svg xmlns='http://www.w3.org/2000/svg' width='9' height='9'><rect width='4' height='4'/></svg>"]),
    )
    .await;
    assert_eq!(
        answer["result"]["options"],
        json!({ "width": 9, "height": 9 })
    );
    assert_eq!(answer["result"]["objects"][0]["type"], "path");

    let (_, answer) = call(
        &state,
        "fabric",
        "toDataURL",
        json!([{ "width": 4, "height": 4 }]),
    )
    .await;
    assert!(
        answer["result"]
            .as_str()
            .is_some_and(|u| u.starts_with("data:image/png;base64,")),
        "{answer}"
    );

    let jpeg = base64::engine::general_purpose::STANDARD.encode(camera_jpeg());
    let (status, answer) = call(&state, "exif", "parse", json!([{ "$bytes": jpeg }])).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["result"],
        json!({ "Make": "NIKON", "Model": "Z 6", "Orientation": "Rotate 180" })
    );
}

#[tokio::test]
async fn hostile_calls_get_the_modules_typed_errors() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    let (status, answer) = call(
        &state,
        "fabric",
        "render",
        json!([{ "width": 8192, "height": 8192 }, { "multiplier": 4 }]),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer["detail"].as_str().is_some_and(|d| d.starts_with("fabric.render: the output would be 32768x32768 pixels")),
        "{status}: {answer}"
    );
    let deep = format!(
        "<svg xmlns='http://www.w3.org/2000/svg'>{}{}</svg>",
        "<g>".repeat(100_000),
        "</g>".repeat(100_000)
    );
    let (status, answer) = call(&state, "fabric", "loadSVG", json!([deep])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer["detail"]
            .as_str()
            .is_some_and(|d| d.contains("nests elements more than 256 deep")),
        "{answer}"
    );
    let (status, answer) = call(
        &state,
        "exif",
        "parse",
        json!([{ "$bytes": base64::engine::general_purpose::STANDARD.encode(b"GIF89a....") }]),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer["detail"]
            == json!("exif.parse: the bytes are not a JPEG, TIFF, HEIC/HEIF, PNG or WebP image"),
        "{answer}"
    );
}
