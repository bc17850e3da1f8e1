//! `exif.parse` against exifr 7.1.3 (the reference's library, `conformance/node_modules`) on
//! camera-like files made by Pillow: JPEG, PNG (`eXIf`), TIFF and WebP with the tags cameras
//! write (make, model, lens, exposure, dates, orientation, GPS with version, altitude and time
//! stamp), plus truncated copies, a JPEG without EXIF and a non-image.
//!
//! The tools are the CI machine's: Debian's python3 with python3-pil, and node with
//! `npm ci` run in `conformance/`. On a machine without them the test says what is missing
//! and passes, unless `CI` is set, where a missing tool fails it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use base64::Engine as _;
use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

fn missing(note: &str) {
    assert!(std::env::var_os("CI").is_none(), "{note}");
    eprintln!("skipped: {note}");
}

/// Runs `cmd` with `input` on stdin; its stdout, or `None` when it could not run.
fn run(cmd: &mut Command, input: &[u8]) -> Option<Vec<u8>> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    Some(out.stdout)
}

/// The generator: deterministic (seeded) camera-like files, as `{"files": [{name, base64}]}`.
const GENERATOR: &str = r##"
import io, json, base64, random, sys
from PIL import Image
from PIL.TiffImagePlugin import IFDRational
from PIL import ExifTags
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 60
makers = [("Canon", "Canon EOS R5"), ("NIKON CORPORATION", "NIKON Z 6_2"), ("Apple", "iPhone 15 Pro"),
          ("SONY", "ILCE-7M4"), ("FUJIFILM", "X-T5"), ("Google", "Pixel 8"), ("OLYMPUS CORPORATION", "E-M1MarkIII")]
def dms(v):
    v = abs(v); d = int(v); m = int((v - d) * 60); s = round(((v - d) * 60 - m) * 60, 2)
    return (IFDRational(d, 1), IFDRational(m, 1), IFDRational(int(s * 100), 100))
files = []
for i in range(N):
    fmt = ["jpeg", "jpeg", "jpeg", "png", "tiff", "webp"][i % 6]
    img = Image.new("RGB", (random.randint(8, 64), random.randint(8, 64)), (random.randint(0,255), 90, 160))
    ex = Image.Exif()
    make, model = random.choice(makers)
    ex[0x010f] = make; ex[0x0110] = model
    ex[0x0112] = random.randint(1, 8)
    ex[0x0131] = random.choice(["GIMP 2.10", "Adobe Photoshop 25.0", "HDR+ 1.0", "Ver.1.10"])
    y, mo, d = random.randint(2000, 2025), random.randint(1, 12), random.randint(1, 28)
    h, mi, s = random.randint(0, 23), random.randint(0, 59), random.randint(0, 59)
    stamp = f"{y:04}:{mo:02}:{d:02} {h:02}:{mi:02}:{s:02}"
    ex[0x0132] = stamp
    ex[0x011a] = IFDRational(72, 1); ex[0x011b] = IFDRational(72, 1); ex[0x0128] = random.choice([2, 3])
    if random.random() < 0.5: ex[0x013b] = "Jane Doe"
    if random.random() < 0.5: ex[0x8298] = "(c) 2024 Example"
    e = ex.get_ifd(0x8769)
    e[0x9003] = stamp; e[0x9004] = stamp
    e[0x829a] = IFDRational(1, random.choice([30, 60, 125, 250, 1000]))
    e[0x829d] = IFDRational(random.choice([14, 18, 28, 40, 56, 80]), 10)
    e[0x8827] = random.choice([100, 200, 400, 800, 3200])
    e[0x8822] = random.randint(0, 8)
    e[0x9207] = random.choice([0, 1, 2, 3, 5, 255])
    e[0x9209] = random.choice([0, 1, 16, 24, 25, 32])
    e[0x920a] = IFDRational(random.randint(10, 200) * 10, 10)
    e[0x9000] = b"0232"
    e[0xa001] = 1
    e[0xa402] = random.randint(0, 2); e[0xa403] = random.randint(0, 1); e[0xa406] = random.randint(0, 3)
    e[0xa434] = random.choice(["RF24-105mm F4 L IS USM", "NIKKOR Z 50mm f/1.8 S", "iPhone 15 Pro back camera 6.765mm f/1.78"])
    e[0xa433] = make
    e[0x9010] = "+02:00"
    if random.random() < 0.8:
        g = ex.get_ifd(0x8825)
        lat = random.uniform(-80, 80); lon = random.uniform(-179, 179)
        g[0] = b"\x02\x03\x00\x00"
        g[1] = "N" if lat >= 0 else "S"; g[2] = dms(lat)
        g[3] = "E" if lon >= 0 else "W"; g[4] = dms(lon)
        g[5] = b"\x00"; g[6] = IFDRational(random.randint(0, 40000), 10)
        g[7] = (IFDRational(h, 1), IFDRational(mi, 1), IFDRational(s, 1))
        g[0x1d] = f"{y:04}:{mo:02}:{d:02}"
    buf = io.BytesIO()
    if fmt == "jpeg":
        img.save(buf, "JPEG", exif=ex.tobytes(), quality=80)
    elif fmt == "png":
        img.save(buf, "PNG", exif=ex.tobytes())
    elif fmt == "tiff":
        img.save(buf, "TIFF", exif=ex)
    else:
        img.save(buf, "WEBP", exif=ex.tobytes())
    data = buf.getvalue()
    files.append({"name": f"{i:03}.{fmt}", "base64": base64.b64encode(data).decode()})
    if i % 10 == 0:
        files.append({"name": f"{i:03}-truncated.{fmt}", "base64": base64.b64encode(data[: len(data) // 3]).decode()})
buf = io.BytesIO(); Image.new("RGB", (4, 4)).save(buf, "JPEG")
files.append({"name": "no-exif.jpeg", "base64": base64.b64encode(buf.getvalue()).decode()})
files.append({"name": "not-an-image.txt", "base64": base64.b64encode(b"just some text, not an image").decode()})
json.dump({"files": files}, sys.stdout)
"##;

fn equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn exif_parse_agrees_with_exifr() {
    let conformance = repo().join("conformance");
    if !conformance.join("node_modules/exifr").is_dir() {
        return missing("exifr is not installed (run `npm ci` in conformance/)");
    }
    let python = std::env::var("NODETOOL_INTEROP_PYTHON").unwrap_or("/usr/bin/python3".into());
    let Some(files) = run(
        Command::new(&python).args(["-c", GENERATOR, "7", "120"]),
        b"",
    ) else {
        return missing("python3 with Pillow is not installed (Debian: python3-pil)");
    };
    let Some(theirs) = run(
        Command::new("node")
            .arg("exif.mjs")
            .current_dir(&conformance),
        &files,
    ) else {
        return missing("node is not installed (Debian: nodejs)");
    };
    let files: serde_json::Value = serde_json::from_slice(&files).unwrap_or_default();
    let theirs: serde_json::Value = serde_json::from_slice(&theirs).unwrap_or_default();
    let (Some(files), Some(theirs)) = (files["files"].as_array(), theirs["results"].as_array())
    else {
        panic!("the generator or exif.mjs gave no list")
    };
    assert_eq!(files.len(), theirs.len());
    let Some(parse) = implementation("exif", "parse") else {
        panic!("exif.parse is not implemented")
    };

    let (mut compared_files, mut equal_files) = (0, 0);
    let (mut keys, mut equal_keys) = (0, 0);
    let mut we_read_more = Vec::new();
    let mut differences = Vec::new();
    for (file, reference) in files.iter().zip(theirs) {
        let name = file["name"].as_str().unwrap_or("?");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(file["base64"].as_str().unwrap_or(""))
            .unwrap_or_default();
        let ours = parse(&[Value::Bytes(bytes)]);
        let ok = reference["ok"].as_bool() == Some(true);
        let value = &reference["value"];
        // exifr reports a file it could not read as `{errors: [...]}` or an exception.
        let reference_read = ok && value.is_object() && value.get("errors").is_none();
        if !reference_read {
            // Where exifr read nothing (a truncated file, WebP, which exifr 7 does not read),
            // ours may read what is there, give null, or a typed error; never a panic.
            if let Ok(v) = &ours
                && !matches!(v, Value::Null)
            {
                we_read_more.push(name.to_string());
            }
            continue;
        }
        compared_files += 1;
        let ours = match ours {
            Ok(v) => v.to_json(),
            Err(e) => {
                differences.push(format!("{name}: ours failed: {}", e.message()));
                continue;
            }
        };
        let (Some(a), Some(b)) = (ours.as_object(), value.as_object()) else {
            if ours == *value {
                equal_files += 1;
            } else {
                differences.push(format!("{name}: ours {ours}, exifr {value}"));
            }
            continue;
        };
        let mut all = true;
        let mut union: Vec<&String> = a.keys().chain(b.keys()).collect();
        union.sort();
        union.dedup();
        for key in union {
            keys += 1;
            match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) if equal(x, y) => equal_keys += 1,
                (x, y) => {
                    all = false;
                    differences.push(format!(
                        "{name}.{key}: ours {}, exifr {}",
                        x.map_or("absent".into(), |v| v.to_string()),
                        y.map_or("absent".into(), |v| v.to_string())
                    ));
                }
            }
        }
        if all {
            equal_files += 1;
        }
    }
    eprintln!(
        "exif.parse vs exifr 7.1.3: {equal_files}/{compared_files} files identical, {equal_keys}/{keys} tags equal; read where exifr read nothing: {we_read_more:?}"
    );
    for d in differences.iter().take(40) {
        eprintln!("  {d}");
    }
    assert!(compared_files >= 80, "only {compared_files} files compared");
    assert!(differences.is_empty(), "{} differences", differences.len());
}
