//! The fabric and exif host packs through `nodetool run` (a confined sandbox worker, which opens
//! no file after start-up: text rendering here proves the font is compiled in). Rendered PNGs
//! are decoded and checked by their pixels; EXIF is read from a camera-like JPEG; every SKILL.md
//! example runs as written.

use nodetool_tests::world::{World, shipped_packs};
use serde_json::{Value, json};

fn run_in(code: &str, workspace: Option<&std::path::Path>) -> (Value, i32) {
    let world = World::with_shipped(shipped_packs());
    let mut extra: Vec<String> = Vec::new();
    if let Some(dir) = workspace {
        extra.push("--workspace".into());
        extra.push(dir.display().to_string());
    }
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .args(&extra)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (json, output.status.code().unwrap_or(-1))
}

/// A JPEG whose APP1 holds IFD0 (Make "Canon", Orientation 6, ModifyDate) and a GPS IFD
/// (48°51'29.5"N 2°17'40"W).
pub fn camera_jpeg() -> Vec<u8> {
    let mut t: Vec<u8> = b"II*\0\x08\0\0\0".to_vec();
    // IFD0 at 8: 4 entries -> 2 + 48 + 4 = 54 bytes; data from 62.
    let data_at = 8 + 2 + 4 * 12 + 4;
    let make_at = data_at;
    let date_at = make_at + 6;
    let gps_at = date_at + 20;
    let entry = |t: &mut Vec<u8>, tag: u16, typ: u16, count: u32, value: u32| {
        t.extend_from_slice(&tag.to_le_bytes());
        t.extend_from_slice(&typ.to_le_bytes());
        t.extend_from_slice(&count.to_le_bytes());
        t.extend_from_slice(&value.to_le_bytes());
    };
    t.extend_from_slice(&4u16.to_le_bytes());
    entry(&mut t, 0x010f, 2, 6, make_at as u32);
    entry(&mut t, 0x0112, 3, 1, 6);
    entry(&mut t, 0x0132, 2, 20, date_at as u32);
    entry(&mut t, 0x8825, 4, 1, gps_at as u32);
    t.extend_from_slice(&0u32.to_le_bytes());
    t.extend_from_slice(b"Canon\0");
    t.extend_from_slice(b"2024:05:01 12:34:56\0");
    // GPS IFD: 4 entries, then the two rationals triples.
    let rationals_at = gps_at + 2 + 4 * 12 + 4;
    t.extend_from_slice(&4u16.to_le_bytes());
    entry(&mut t, 1, 2, 2, u32::from_le_bytes(*b"N\0\0\0"));
    entry(&mut t, 2, 5, 3, rationals_at as u32);
    entry(&mut t, 3, 2, 2, u32::from_le_bytes(*b"W\0\0\0"));
    entry(&mut t, 4, 5, 3, (rationals_at + 24) as u32);
    t.extend_from_slice(&0u32.to_le_bytes());
    for (num, den) in [(48u32, 1u32), (51, 1), (295, 10), (2, 1), (17, 1), (40, 1)] {
        t.extend_from_slice(&num.to_le_bytes());
        t.extend_from_slice(&den.to_le_bytes());
    }
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&t);
    let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe1];
    jpeg.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
    jpeg.extend_from_slice(&app1);
    jpeg.extend_from_slice(&[0xff, 0xd9]);
    jpeg
}

fn png_of(v: &Value) -> image::RgbaImage {
    use base64::Engine as _;
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

#[test]
fn fabric_and_exif_work_in_the_confined_worker() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("photo.jpg"), camera_jpeg()).unwrap_or_else(|e| panic!("{e}"));
    let (out, code) = run_in(
        r##"
import { render, renderSVG, loadSVG, toDataURL } from "@nodetool-ai/sandbox-fabric";
import { parse } from "@nodetool-ai/sandbox-exif";
const scene = {
  width: 120, height: 60, backgroundColor: "#ffffff",
  objects: [
    { type: "rect", left: 0, top: 0, width: 40, height: 60, fill: "red" },
    { type: "text", left: 50, top: 10, text: "Hi", fontSize: 30, fill: "black" },
  ],
};
const png = await render(scene);
const svg = await renderSVG(scene);
const loaded = await loadSVG(svg);
const url = await toDataURL({ width: 8, height: 8 });
const tags = await parse(await workspace.readBytes("photo.jpg"));
const errors = [];
try { await render({ width: 100000, height: 10 }); } catch (e) { errors.push(e.message); }
try { await parse(new TextEncoder().encode("not an image")); } catch (e) { errors.push(e.message); }
return { png, svg: svg.slice(0, 5), kinds: loaded.objects.map((o) => o.type), url: url.slice(0, 22), tags, errors,
  isBytes: png instanceof Uint8Array };
"##,
        Some(dir.path()),
    );
    assert_eq!(code, 0, "{out}");
    let r = &out["result"];
    let img = png_of(&r["png"]);
    assert_eq!(img.dimensions(), (120, 60));
    assert_eq!(img.get_pixel(20, 30).0, [255, 0, 0, 255], "the red rect");
    assert_eq!(img.get_pixel(110, 55).0, [255, 255, 255, 255], "background");
    // The text was drawn with the bundled font: dark pixels right of the rect.
    let ink = img
        .enumerate_pixels()
        .filter(|(x, _, p)| *x > 45 && p.0[0] < 100)
        .count();
    assert!(ink > 50, "only {ink} text pixels");
    assert_eq!(r["svg"], "<?xml");
    assert_eq!(r["kinds"], json!(["path", "path", "text"]));
    assert_eq!(r["url"], "data:image/png;base64,");
    assert_eq!(r["isBytes"], true);
    let tags = &r["tags"];
    assert_eq!(tags["Make"], "Canon");
    assert_eq!(tags["Orientation"], "Rotate 90 CW");
    assert_eq!(tags["ModifyDate"], "2024-05-01T12:34:56");
    let lat = tags["latitude"].as_f64().unwrap_or_default();
    let lon = tags["longitude"].as_f64().unwrap_or_default();
    assert!(
        (lat - (48.0 + 51.0 / 60.0 + 29.5 / 3600.0)).abs() < 1e-9,
        "{lat}"
    );
    assert!(
        (lon + (2.0 + 17.0 / 60.0 + 40.0 / 3600.0)).abs() < 1e-9,
        "{lon}"
    );
    assert_eq!(
        r["errors"],
        json!([
            "fabric.render: width must be a positive number up to 8192",
            "exif.parse: the bytes are not a JPEG, TIFF, HEIC/HEIF, PNG or WebP image"
        ])
    );
}

#[test]
fn every_fabric_and_exif_skill_example_runs() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("photo.jpg"), camera_jpeg()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("logo.svg"),
        "<svg xmlns='http://www.w3.org/2000/svg' width='64' height='64'><circle cx='32' cy='32' r='20' fill='navy'/></svg>",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let packs = concat!(env!("CARGO_MANIFEST_DIR"), "/../packs/@nodetool-ai");
    let mut results = Vec::new();
    for id in ["fabric", "exif"] {
        let skill = std::fs::read_to_string(format!("{packs}/sandbox-{id}/SKILL.md"))
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        for block in nodetool_tests::skill::js_blocks(&skill).into_iter().skip(1) {
            let (out, code) = run_in(&block, Some(dir.path()));
            assert_eq!(code, 0, "sandbox-{id} example failed:\n{block}\n{out}");
            results.push(out["result"].clone());
        }
    }
    assert_eq!(results.len(), 5);
    assert!(
        results[0].as_u64().is_some_and(|n| n > 100),
        "{}",
        results[0]
    );
    // loadSVG's example recolors the circle green and renders it.
    let img = png_of(&results[2]);
    assert_eq!(img.get_pixel(32, 32).0, [0x16, 0xa3, 0x4a, 255]);
    assert!(
        results[3]
            .as_str()
            .is_some_and(|s| s.starts_with("<img src=\"data:image/jpeg;base64,"))
    );
    assert_eq!(results[4]["camera"], "Canon");
    assert_eq!(results[4]["taken"], "Wed May 01 2024");
    assert!(dir.path().join("card.png").is_file());
    assert!(dir.path().join("shape.svg").is_file());
}
