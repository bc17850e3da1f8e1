//! `exif`: the EXIF tags of a JPEG, TIFF, HEIC/HEIF, PNG or WebP image (kamadak-exif), in
//! the shape the reference's library (exifr 7, default options) gives.
//!
//! `parse(bytes)` -> one merged object, or `null` when the image has no EXIF:
//! - Blocks: IFD0 (the main image), the Exif IFD and the GPS IFD; not the thumbnail's IFD1,
//!   not Interop, MakerNote, UserComment, XMP, IPTC or ICC (exifr's defaults). IFD pointers
//!   are dropped.
//! - Keys: exifr's (ExifTool's) tag names (`Make`, `ModifyDate`, `ISO`, `CreateDate`,
//!   `ExifImageWidth`, `LensInfo`, ...); a tag without a name keeps its number as the key.
//! - Values: ASCII as trimmed text (an empty one is left out), one number for a one-value
//!   numeric tag, an array for several, a rational as its quotient, BYTE and UNDEFINED data as
//!   bytes (a Uint8Array); the enumerations exifr translates (Orientation, ExposureProgram,
//!   MeteringMode, LightSource, Flash, ...) as its words; `ExifVersion`/`FlashpixVersion`
//!   as exifr writes them (`"0232"` is `"2.3.2"`, `"0220"` is `"2.2"`), `GPSVersionID` as
//!   `"2.3.0.0"`, `GPSTimeStamp` as `"h:m:s"`.
//! - Dates (`ModifyDate`, `DateTimeOriginal`, `CreateDate`): exifr gives a `Date` in the
//!   host's local time zone; across the sandbox boundary this is the ISO text without a zone
//!   (`"2024-05-01T12:34:56"`), which `new Date(text)` reads as that same local time.
//! - GPS: `latitude` and `longitude` in signed decimal degrees, when both are present.
//! - PNG: exifr's IHDR fields (`ImageWidth`, `ImageHeight`, `BitDepth`, `ColorType`,
//!   `Compression`, `Filter`, `Interlace`) and `tEXt` key/value pairs, then the `eXIf` chunk.
//!
//! Hostile input: kamadak-exif refuses an IFD visited twice (a cycle), more than 8 chained
//! IFDs, and an entry whose value runs past the data; entries it could not read are skipped
//! (as exifr's silent errors are). The values read are counted against
//! [`MAX_EXIF_VALUE_BYTES`] (many entries pointing at one large region cannot multiply it),
//! and a PNG's chunks against [`MAX_PNG_CHUNKS`].

use std::io::Cursor;

use exif::{Context, In, Reader};
use nodetool_protocol::value::Value;

use crate::error::HostError;
use crate::limits::require_bytes;

const AT: &str = "exif.parse";

/// The most bytes of tag values one call may read (the values of all entries added up).
pub const MAX_EXIF_VALUE_BYTES: usize = 16 * 1024 * 1024;

/// The most PNG chunks walked looking for metadata.
pub const MAX_PNG_CHUNKS: usize = 100_000;

/// `parse(bytes)` -> the merged tag object, or `null`.
pub fn parse(args: &[Value]) -> Result<Value, HostError> {
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let mut out: Vec<(String, Value)> = Vec::new();
    let tiff = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(bytes, &mut out)?
    } else {
        let mut reader = Reader::new();
        reader.continue_on_error(true);
        match reader.read_from_container(&mut Cursor::new(bytes)) {
            Ok(exif) => Some(exif),
            Err(e) => match e.distill_partial_result(|_| {}) {
                Ok(exif) => Some(exif),
                Err(exif::Error::NotFound(_)) => None,
                Err(exif::Error::InvalidFormat("Unknown image format")) => {
                    return Err(HostError::unsupported(format!(
                        "{AT}: the bytes are not a JPEG, TIFF, HEIC/HEIF, PNG or WebP image"
                    )));
                }
                Err(e) => {
                    return Err(HostError::malformed(format!(
                        "{AT}: the image's EXIF could not be read: {e}"
                    )));
                }
            },
        }
    };
    if let Some(exif) = tiff {
        tags(&exif, &mut out)?;
    }
    if out.is_empty() {
        return Ok(Value::Null);
    }
    Ok(Value::Object(out))
}

/// Sets `key` (replacing an earlier value, as `Object.assign` does).
fn set(out: &mut Vec<(String, Value)>, key: String, value: Value) {
    match out.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => out.push((key, value)),
    }
}

/// A PNG's IHDR and tEXt fields into `out`, and its eXIf chunk's TIFF, if any.
fn png(bytes: &[u8], out: &mut Vec<(String, Value)>) -> Result<Option<exif::Exif>, HostError> {
    let mut offset = 8usize;
    let mut exif_chunk: Option<&[u8]> = None;
    let mut chunks = 0usize;
    while offset + 8 <= bytes.len() {
        chunks += 1;
        if chunks > MAX_PNG_CHUNKS {
            return Err(HostError::limit(format!(
                "{AT}: the PNG has more than {MAX_PNG_CHUNKS} chunks"
            )));
        }
        let size = u32::from_be_bytes([
            bytes[offset],
            bytes[offset + 1],
            bytes[offset + 2],
            bytes[offset + 3],
        ]) as usize;
        let kind = &bytes[offset + 4..offset + 8];
        let start = offset + 8;
        let Some(end) = start.checked_add(size).filter(|e| *e <= bytes.len()) else {
            // A chunk cut short: what was read so far stands (exifr reads no further either).
            break;
        };
        let data = &bytes[start..end];
        match kind {
            b"IHDR" if data.len() >= 13 => {
                let be32 = |i: usize| {
                    f64::from(u32::from_be_bytes([
                        data[i],
                        data[i + 1],
                        data[i + 2],
                        data[i + 3],
                    ]))
                };
                set(out, "ImageWidth".into(), Value::Number(be32(0)));
                set(out, "ImageHeight".into(), Value::Number(be32(4)));
                set(out, "BitDepth".into(), Value::Number(f64::from(data[8])));
                let word = |v: u8, words: &[(u8, &str)]| {
                    words
                        .iter()
                        .find(|(k, _)| *k == v)
                        .map_or("Unknown", |(_, w)| w)
                        .to_string()
                };
                let color = word(
                    data[9],
                    &[
                        (0, "Grayscale"),
                        (2, "RGB"),
                        (3, "Palette"),
                        (4, "Grayscale with Alpha"),
                        (6, "RGB with Alpha"),
                    ],
                );
                set(out, "ColorType".into(), Value::String(color));
                let compression = word(data[10], &[(0, "Deflate/Inflate")]);
                set(out, "Compression".into(), Value::String(compression));
                let filter = word(data[11], &[(0, "Adaptive")]);
                set(out, "Filter".into(), Value::String(filter));
                let interlace = word(data[12], &[(0, "Noninterlaced"), (1, "Adam7 Interlace")]);
                set(out, "Interlace".into(), Value::String(interlace));
            }
            b"tEXt" => {
                let mut parts = data.split(|b| *b == 0);
                let key = parts.next().map(latin1).unwrap_or_default();
                let value = parts.next().map(latin1).unwrap_or_default();
                set(out, key, Value::String(value));
            }
            b"eXIf" if exif_chunk.is_none() => exif_chunk = Some(data),
            b"IEND" => break,
            _ => {}
        }
        // Length, type, data, CRC.
        offset = end + 4;
    }
    let Some(chunk) = exif_chunk else {
        return Ok(None);
    };
    let mut reader = Reader::new();
    reader.continue_on_error(true);
    match reader.read_raw(chunk.to_vec()) {
        Ok(exif) => Ok(Some(exif)),
        Err(e) => Ok(e.distill_partial_result(|_| {}).ok()),
    }
}

fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|b| char::from(*b)).collect()
}

/// The block a field belongs to, when it is one exifr reads by default.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Ifd0,
    Exif,
    Gps,
}

/// The tags of IFD0, Exif and GPS into `out`, exifr's way.
fn tags(exif: &exif::Exif, out: &mut Vec<(String, Value)>) -> Result<(), HostError> {
    let mut read = 0usize;
    let mut blocks: [Vec<(u16, Value)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut lat: Option<(Vec<f64>, String)> = None;
    let mut lon: Option<(Vec<f64>, String)> = None;
    let (mut lat_ref, mut lon_ref) = (String::new(), String::new());
    for field in exif.fields() {
        read = read.saturating_add(value_size(&field.value));
        if read > MAX_EXIF_VALUE_BYTES {
            return Err(HostError::limit(format!(
                "{AT}: the EXIF values add up to more than {MAX_EXIF_VALUE_BYTES} bytes"
            )));
        }
        if field.ifd_num != In::PRIMARY {
            continue;
        }
        let block = match field.tag.context() {
            Context::Tiff => Block::Ifd0,
            Context::Exif => Block::Exif,
            Context::Gps => Block::Gps,
            _ => continue,
        };
        let number = field.tag.number();
        if dropped(block, number) {
            continue;
        }
        if block == Block::Gps {
            match number {
                1 => lat_ref = ascii(&field.value).unwrap_or_default(),
                3 => lon_ref = ascii(&field.value).unwrap_or_default(),
                2 => lat = Some((numbers(&field.value), String::new())),
                4 => lon = Some((numbers(&field.value), String::new())),
                _ => {}
            }
        }
        let Some(value) = convert(block, number, &field.value) else {
            continue;
        };
        let index = block as usize;
        blocks[index].push((number, value));
    }
    for (index, block) in [Block::Ifd0, Block::Exif, Block::Gps]
        .into_iter()
        .enumerate()
    {
        for (number, value) in std::mem::take(&mut blocks[index]) {
            let key = name(block, number).map_or_else(|| number.to_string(), str::to_string);
            set(out, key, value);
        }
    }
    if let (Some((lat, _)), Some((lon, _))) = (lat, lon) {
        set(
            out,
            "latitude".into(),
            Value::Number(degrees(&lat, &lat_ref)),
        );
        set(
            out,
            "longitude".into(),
            Value::Number(degrees(&lon, &lon_ref)),
        );
    }
    Ok(())
}

/// Degrees, minutes and seconds as signed decimal degrees (south and west negative).
fn degrees(dms: &[f64], reference: &str) -> f64 {
    let part = |i: usize| dms.get(i).copied().unwrap_or(f64::NAN);
    let dd = part(0) + part(1) / 60.0 + part(2) / 3600.0;
    if reference == "S" || reference == "W" {
        -dd
    } else {
        dd
    }
}

/// How many bytes a value holds, as read.
fn value_size(value: &exif::Value) -> usize {
    use exif::Value as V;
    match value {
        V::Byte(v) | V::Undefined(v, _) => v.len(),
        V::Ascii(v) => v.iter().map(Vec::len).sum(),
        V::Short(v) => v.len() * 2,
        V::SShort(v) => v.len() * 2,
        V::Long(v) => v.len() * 4,
        V::SLong(v) => v.len() * 4,
        V::Float(v) => v.len() * 4,
        V::SByte(v) => v.len(),
        V::Rational(v) => v.len() * 8,
        V::SRational(v) => v.len() * 8,
        V::Double(v) => v.len() * 8,
        V::Unknown(..) => 0,
    }
}

/// Tags exifr's `sanitize` leaves out, or whose blocks it does not read by default.
fn dropped(block: Block, number: u16) -> bool {
    match block {
        // Exif, GPS and Interop pointers, XMP, IPTC, ICC.
        Block::Ifd0 => matches!(number, 0x8769 | 0x8825 | 0xa005 | 0x02bc | 0x83bb | 0x8773),
        // Interop pointer, MakerNote, UserComment.
        Block::Exif => matches!(number, 0xa005 | 0x927c | 0x9286),
        Block::Gps => false,
    }
}

/// ASCII text as exifr gives it: up to the first NUL, trimmed; `None` when empty.
fn ascii(value: &exif::Value) -> Option<String> {
    let exif::Value::Ascii(parts) = value else {
        return None;
    };
    let joined: Vec<u8> = parts.join(&0u8);
    let text = String::from_utf8_lossy(&joined);
    let text = text.trim_end_matches('\0').trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Every numeric value as f64 (rationals as quotients).
fn numbers(value: &exif::Value) -> Vec<f64> {
    use exif::Value as V;
    match value {
        V::Byte(v) | V::Undefined(v, _) => v.iter().map(|x| f64::from(*x)).collect(),
        V::Short(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::Long(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::SByte(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::SShort(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::SLong(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::Float(v) => v.iter().map(|x| f64::from(*x)).collect(),
        V::Double(v) => v.clone(),
        V::Rational(v) => v
            .iter()
            .map(|r| f64::from(r.num) / f64::from(r.denom))
            .collect(),
        V::SRational(v) => v
            .iter()
            .map(|r| f64::from(r.num) / f64::from(r.denom))
            .collect(),
        V::Ascii(_) | V::Unknown(..) => Vec::new(),
    }
}

/// One field's value as exifr gives it with its revivers and value words.
fn convert(block: Block, number: u16, value: &exif::Value) -> Option<Value> {
    use exif::Value as V;
    let raw = match value {
        V::Ascii(_) => Value::String(ascii(value)?),
        V::Byte(b) | V::Undefined(b, _) => Value::Bytes(b.clone()),
        V::Unknown(..) => return None,
        _ => {
            let n = numbers(value);
            if n.len() == 1 {
                Value::Number(n[0])
            } else {
                Value::Array(n.into_iter().map(Value::Number).collect())
            }
        }
    };
    match (block, number) {
        (Block::Ifd0, 0x0132) | (Block::Exif, 0x9003 | 0x9004) => Some(match &raw {
            Value::String(s) => Value::String(date(s).unwrap_or_else(|| s.clone())),
            _ => raw,
        }),
        (Block::Exif, 0x9000 | 0xa000) => Some(match &raw {
            Value::Bytes(b) => Value::String(version(b)),
            _ => raw,
        }),
        (Block::Gps, 0x0000) => Some(join(value, ".").unwrap_or(raw)),
        (Block::Gps, 0x0007) => Some(join(value, ":").unwrap_or(raw)),
        // One-byte FileSource and SceneType are unpacked to their number, then translated.
        (Block::Exif, 0xa300 | 0xa301) => {
            let raw = match &raw {
                Value::Bytes(b) if b.len() == 1 => Value::Number(f64::from(b[0])),
                _ => raw,
            };
            Some(translate(block, number, raw))
        }
        // exifr unwraps a one-element array for the Exif image size.
        (Block::Exif, 0xa002 | 0xa003) => Some(match raw {
            Value::Array(mut a) if !a.is_empty() => a.swap_remove(0),
            other => other,
        }),
        _ => Some(translate(block, number, raw)),
    }
}

/// The values of a numeric tag joined by `sep` (GPS version and time stamp).
fn join(value: &exif::Value, sep: &str) -> Option<Value> {
    let n = numbers(value);
    if n.is_empty() {
        return None;
    }
    let parts: Vec<String> = n.iter().map(|x| crate::limits::js_number(*x)).collect();
    Some(Value::String(parts.join(sep)))
}

/// `ExifVersion` bytes ("0232") as exifr writes them ("2.3.2"): leading digit dropped, a
/// trailing zero too.
fn version(bytes: &[u8]) -> String {
    let tail: Vec<u8> = bytes.iter().skip(1).copied().collect();
    let chars = tail.get(1).is_some_and(|b| *b > 0x0f);
    let mut parts: Vec<String> = if chars {
        tail.iter().map(|b| char::from(*b).to_string()).collect()
    } else {
        tail.iter().map(|b| b.to_string()).collect()
    };
    if parts.get(2).is_some_and(|p| p == "0") {
        parts.pop();
    }
    parts.join(".")
}

/// An EXIF date ("2024:05:01 12:34:56", or with `-`) as local ISO text.
fn date(text: &str) -> Option<String> {
    let fields: Vec<&str> = text.trim().split(['-', ':', ' ']).collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u32>().ok());
    let (year, month, day) = (num(0)?, num(1)?, num(2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (h, m, s) = match (num(3), num(4), num(5)) {
        (Some(h), Some(m), Some(s)) if h < 24 && m < 60 && s < 60 => (h, m, s),
        _ => (0, 0, 0),
    };
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}"
    ))
}

/// A number replaced by exifr's word for it, when its tag has words.
fn translate(block: Block, number: u16, raw: Value) -> Value {
    let Value::Number(n) = raw else { return raw };
    if n.fract() != 0.0 || !(0.0..=65535.0).contains(&n) {
        return raw;
    }
    let table: &[(u16, &str)] = match (block, number) {
        (Block::Ifd0, 0x0112) => ORIENTATION,
        (Block::Ifd0, 0x0128) => &[(1, "None"), (2, "inches"), (3, "cm")],
        (Block::Exif, 0x8822) => EXPOSURE_PROGRAM,
        (Block::Exif, 0x9207) => METERING_MODE,
        (Block::Exif, 0x9208) => LIGHT_SOURCE,
        (Block::Exif, 0x9209) => FLASH,
        (Block::Exif, 0xa217) => SENSING_METHOD,
        (Block::Exif, 0xa300) => &[
            (1, "Film Scanner"),
            (2, "Reflection Print Scanner"),
            (3, "Digital Camera"),
        ],
        (Block::Exif, 0xa301) => &[(1, "Directly photographed")],
        (Block::Exif, 0xa401) => CUSTOM_RENDERED,
        (Block::Exif, 0xa402) => &[(0, "Auto"), (1, "Manual"), (2, "Auto bracket")],
        (Block::Exif, 0xa403) => &[(0, "Auto"), (1, "Manual")],
        (Block::Exif, 0xa406) => &[
            (0, "Standard"),
            (1, "Landscape"),
            (2, "Portrait"),
            (3, "Night"),
            (4, "Other"),
        ],
        (Block::Exif, 0xa407) => &[
            (0, "None"),
            (1, "Low gain up"),
            (2, "High gain up"),
            (3, "Low gain down"),
            (4, "High gain down"),
        ],
        (Block::Exif, 0xa40c) => &[(0, "Unknown"), (1, "Macro"), (2, "Close"), (3, "Distant")],
        (Block::Exif, 0xa460) => &[
            (0, "Unknown"),
            (1, "Not a Composite Image"),
            (2, "General Composite Image"),
            (3, "Composite Image Captured While Shooting"),
        ],
        (Block::Exif, 0x9210 | 0xa210) => &[
            (1, "No absolute unit of measurement"),
            (2, "Inch"),
            (3, "Centimeter"),
        ],
        (Block::Exif, 0xa408..=0xa40a) => &[(0, "Normal"), (1, "Low"), (2, "High")],
        _ => return raw,
    };
    let key = n as u16;
    // exifr's lookup is `words[value] || value`: a word, else the number.
    match table.iter().find(|(k, _)| *k == key) {
        Some((_, word)) => Value::String((*word).to_string()),
        None => raw,
    }
}

const ORIENTATION: &[(u16, &str)] = &[
    (1, "Horizontal (normal)"),
    (2, "Mirror horizontal"),
    (3, "Rotate 180"),
    (4, "Mirror vertical"),
    (5, "Mirror horizontal and rotate 270 CW"),
    (6, "Rotate 90 CW"),
    (7, "Mirror horizontal and rotate 90 CW"),
    (8, "Rotate 270 CW"),
];

const EXPOSURE_PROGRAM: &[(u16, &str)] = &[
    (0, "Not defined"),
    (1, "Manual"),
    (2, "Normal program"),
    (3, "Aperture priority"),
    (4, "Shutter priority"),
    (5, "Creative program"),
    (6, "Action program"),
    (7, "Portrait mode"),
    (8, "Landscape mode"),
];

const METERING_MODE: &[(u16, &str)] = &[
    (0, "Unknown"),
    (1, "Average"),
    (2, "CenterWeightedAverage"),
    (3, "Spot"),
    (4, "MultiSpot"),
    (5, "Pattern"),
    (6, "Partial"),
    (255, "Other"),
];

const LIGHT_SOURCE: &[(u16, &str)] = &[
    (0, "Unknown"),
    (1, "Daylight"),
    (2, "Fluorescent"),
    (3, "Tungsten (incandescent light)"),
    (4, "Flash"),
    (9, "Fine weather"),
    (10, "Cloudy weather"),
    (11, "Shade"),
    (12, "Daylight fluorescent (D 5700 - 7100K)"),
    (13, "Day white fluorescent (N 4600 - 5400K)"),
    (14, "Cool white fluorescent (W 3900 - 4500K)"),
    (15, "White fluorescent (WW 3200 - 3700K)"),
    (17, "Standard light A"),
    (18, "Standard light B"),
    (19, "Standard light C"),
    (20, "D55"),
    (21, "D65"),
    (22, "D75"),
    (23, "D50"),
    (24, "ISO studio tungsten"),
    (255, "Other"),
];

const FLASH: &[(u16, &str)] = &[
    (0x00, "Flash did not fire"),
    (0x01, "Flash fired"),
    (0x05, "Strobe return light not detected"),
    (0x07, "Strobe return light detected"),
    (0x09, "Flash fired, compulsory flash mode"),
    (
        0x0D,
        "Flash fired, compulsory flash mode, return light not detected",
    ),
    (
        0x0F,
        "Flash fired, compulsory flash mode, return light detected",
    ),
    (0x10, "Flash did not fire, compulsory flash mode"),
    (0x18, "Flash did not fire, auto mode"),
    (0x19, "Flash fired, auto mode"),
    (0x1D, "Flash fired, auto mode, return light not detected"),
    (0x1F, "Flash fired, auto mode, return light detected"),
    (0x20, "No flash function"),
    (0x41, "Flash fired, red-eye reduction mode"),
    (
        0x45,
        "Flash fired, red-eye reduction mode, return light not detected",
    ),
    (
        0x47,
        "Flash fired, red-eye reduction mode, return light detected",
    ),
    (
        0x49,
        "Flash fired, compulsory flash mode, red-eye reduction mode",
    ),
    (
        0x4D,
        "Flash fired, compulsory flash mode, red-eye reduction mode, return light not detected",
    ),
    (
        0x4F,
        "Flash fired, compulsory flash mode, red-eye reduction mode, return light detected",
    ),
    (0x59, "Flash fired, auto mode, red-eye reduction mode"),
    (
        0x5D,
        "Flash fired, auto mode, return light not detected, red-eye reduction mode",
    ),
    (
        0x5F,
        "Flash fired, auto mode, return light detected, red-eye reduction mode",
    ),
];

const SENSING_METHOD: &[(u16, &str)] = &[
    (1, "Not defined"),
    (2, "One-chip color area sensor"),
    (3, "Two-chip color area sensor"),
    (4, "Three-chip color area sensor"),
    (5, "Color sequential area sensor"),
    (7, "Trilinear sensor"),
    (8, "Color sequential linear sensor"),
];

const CUSTOM_RENDERED: &[(u16, &str)] = &[
    (0, "Normal"),
    (1, "Custom"),
    (2, "HDR (no original saved)"),
    (3, "HDR (original saved)"),
    (4, "Original (for HDR)"),
    (6, "Panorama"),
    (7, "Portrait HDR"),
    (8, "Portrait"),
];

/// ExifTool's name of a tag (exifr's dictionary), by block and number.
fn name(block: Block, number: u16) -> Option<&'static str> {
    let table: &[(u16, &str)] = match block {
        Block::Ifd0 => IFD0_NAMES,
        Block::Exif => EXIF_NAMES,
        Block::Gps => GPS_NAMES,
    };
    table.iter().find(|(n, _)| *n == number).map(|(_, s)| *s)
}

const IFD0_NAMES: &[(u16, &str)] = &[
    (0x0100, "ImageWidth"),
    (0x0101, "ImageHeight"),
    (0x0102, "BitsPerSample"),
    (0x0103, "Compression"),
    (0x0106, "PhotometricInterpretation"),
    (0x010e, "ImageDescription"),
    (0x010f, "Make"),
    (0x0110, "Model"),
    (0x0111, "StripOffsets"),
    (0x0112, "Orientation"),
    (0x0115, "SamplesPerPixel"),
    (0x0116, "RowsPerStrip"),
    (0x0117, "StripByteCounts"),
    (0x011a, "XResolution"),
    (0x011b, "YResolution"),
    (0x011c, "PlanarConfiguration"),
    (0x0128, "ResolutionUnit"),
    (0x012d, "TransferFunction"),
    (0x0131, "Software"),
    (0x0132, "ModifyDate"),
    (0x013b, "Artist"),
    (0x013c, "HostComputer"),
    (0x013d, "Predictor"),
    (0x013e, "WhitePoint"),
    (0x013f, "PrimaryChromaticities"),
    (0x0201, "ThumbnailOffset"),
    (0x0202, "ThumbnailLength"),
    (0x0211, "YCbCrCoefficients"),
    (0x0212, "YCbCrSubSampling"),
    (0x0213, "YCbCrPositioning"),
    (0x0214, "ReferenceBlackWhite"),
    (0x8298, "Copyright"),
    (0x014a, "SubIFD"),
    (0x9c9b, "XPTitle"),
    (0x9c9c, "XPComment"),
    (0x9c9d, "XPAuthor"),
    (0x9c9e, "XPKeywords"),
    (0x9c9f, "XPSubject"),
];

const EXIF_NAMES: &[(u16, &str)] = &[
    (0x829a, "ExposureTime"),
    (0x829d, "FNumber"),
    (0x8822, "ExposureProgram"),
    (0x8824, "SpectralSensitivity"),
    (0x8827, "ISO"),
    (0x882a, "TimeZoneOffset"),
    (0x882b, "SelfTimerMode"),
    (0x8830, "SensitivityType"),
    (0x8831, "StandardOutputSensitivity"),
    (0x8832, "RecommendedExposureIndex"),
    (0x8833, "ISOSpeed"),
    (0x8834, "ISOSpeedLatitudeyyy"),
    (0x8835, "ISOSpeedLatitudezzz"),
    (0x9000, "ExifVersion"),
    (0x9003, "DateTimeOriginal"),
    (0x9004, "CreateDate"),
    (0x9009, "GooglePlusUploadCode"),
    (0x9010, "OffsetTime"),
    (0x9011, "OffsetTimeOriginal"),
    (0x9012, "OffsetTimeDigitized"),
    (0x9101, "ComponentsConfiguration"),
    (0x9102, "CompressedBitsPerPixel"),
    (0x9201, "ShutterSpeedValue"),
    (0x9202, "ApertureValue"),
    (0x9203, "BrightnessValue"),
    (0x9204, "ExposureCompensation"),
    (0x9205, "MaxApertureValue"),
    (0x9206, "SubjectDistance"),
    (0x9207, "MeteringMode"),
    (0x9208, "LightSource"),
    (0x9209, "Flash"),
    (0x920a, "FocalLength"),
    (0x9211, "ImageNumber"),
    (0x9212, "SecurityClassification"),
    (0x9213, "ImageHistory"),
    (0x9214, "SubjectArea"),
    (0x9290, "SubSecTime"),
    (0x9291, "SubSecTimeOriginal"),
    (0x9292, "SubSecTimeDigitized"),
    (0x9400, "AmbientTemperature"),
    (0x9401, "Humidity"),
    (0x9402, "Pressure"),
    (0x9403, "WaterDepth"),
    (0x9404, "Acceleration"),
    (0x9405, "CameraElevationAngle"),
    (0xa000, "FlashpixVersion"),
    (0xa001, "ColorSpace"),
    (0xa002, "ExifImageWidth"),
    (0xa003, "ExifImageHeight"),
    (0xa004, "RelatedSoundFile"),
    (0xa20b, "FlashEnergy"),
    (0xa20e, "FocalPlaneXResolution"),
    (0xa20f, "FocalPlaneYResolution"),
    (0xa210, "FocalPlaneResolutionUnit"),
    (0xa214, "SubjectLocation"),
    (0xa215, "ExposureIndex"),
    (0xa217, "SensingMethod"),
    (0xa300, "FileSource"),
    (0xa301, "SceneType"),
    (0xa302, "CFAPattern"),
    (0xa401, "CustomRendered"),
    (0xa402, "ExposureMode"),
    (0xa403, "WhiteBalance"),
    (0xa404, "DigitalZoomRatio"),
    (0xa405, "FocalLengthIn35mmFormat"),
    (0xa406, "SceneCaptureType"),
    (0xa407, "GainControl"),
    (0xa408, "Contrast"),
    (0xa409, "Saturation"),
    (0xa40a, "Sharpness"),
    (0xa40c, "SubjectDistanceRange"),
    (0xa420, "ImageUniqueID"),
    (0xa430, "OwnerName"),
    (0xa431, "SerialNumber"),
    (0xa432, "LensInfo"),
    (0xa433, "LensMake"),
    (0xa434, "LensModel"),
    (0xa435, "LensSerialNumber"),
    (0xa460, "CompositeImage"),
    (0xa461, "CompositeImageCount"),
    (0xa462, "CompositeImageExposureTimes"),
    (0xa500, "Gamma"),
    (0xea1c, "Padding"),
    (0xea1d, "OffsetSchema"),
    (0xfde8, "OwnerName"),
    (0xfde9, "SerialNumber"),
    (0xfdea, "Lens"),
];

const GPS_NAMES: &[(u16, &str)] = &[
    (0x0000, "GPSVersionID"),
    (0x0001, "GPSLatitudeRef"),
    (0x0002, "GPSLatitude"),
    (0x0003, "GPSLongitudeRef"),
    (0x0004, "GPSLongitude"),
    (0x0005, "GPSAltitudeRef"),
    (0x0006, "GPSAltitude"),
    (0x0007, "GPSTimeStamp"),
    (0x0008, "GPSSatellites"),
    (0x0009, "GPSStatus"),
    (0x000A, "GPSMeasureMode"),
    (0x000B, "GPSDOP"),
    (0x000C, "GPSSpeedRef"),
    (0x000D, "GPSSpeed"),
    (0x000E, "GPSTrackRef"),
    (0x000F, "GPSTrack"),
    (0x0010, "GPSImgDirectionRef"),
    (0x0011, "GPSImgDirection"),
    (0x0012, "GPSMapDatum"),
    (0x0013, "GPSDestLatitudeRef"),
    (0x0014, "GPSDestLatitude"),
    (0x0015, "GPSDestLongitudeRef"),
    (0x0016, "GPSDestLongitude"),
    (0x0017, "GPSDestBearingRef"),
    (0x0018, "GPSDestBearing"),
    (0x0019, "GPSDestDistanceRef"),
    (0x001A, "GPSDestDistance"),
    (0x001B, "GPSProcessingMethod"),
    (0x001C, "GPSAreaInformation"),
    (0x001D, "GPSDateStamp"),
    (0x001E, "GPSDifferential"),
    (0x001F, "GPSHPositioningError"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian TIFF with IFD0 entries `(tag, type, count, value-or-offset)` and extra
    /// data appended after the IFD.
    fn tiff(entries: &[(u16, u16, u32, u32)], next: u32, tail: &[u8]) -> Vec<u8> {
        let mut t = b"II*\0\x08\0\0\0".to_vec();
        t.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        for (tag, typ, count, value) in entries {
            t.extend_from_slice(&tag.to_le_bytes());
            t.extend_from_slice(&typ.to_le_bytes());
            t.extend_from_slice(&count.to_le_bytes());
            t.extend_from_slice(&value.to_le_bytes());
        }
        t.extend_from_slice(&next.to_le_bytes());
        t.extend_from_slice(tail);
        t
    }

    fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
        v.get(key)
    }

    #[test]
    fn orientation_and_make_from_a_tiff() {
        // Make at offset 8 + 2 + 2*12 + 4 = 38.
        let t = tiff(&[(0x010f, 2, 6, 38), (0x0112, 3, 1, 6)], 0, b"Canon\0");
        let Ok(v) = parse(&[Value::Bytes(t)]) else {
            panic!("parse failed")
        };
        assert_eq!(get(&v, "Make"), Some(&Value::String("Canon".into())));
        assert_eq!(
            get(&v, "Orientation"),
            Some(&Value::String("Rotate 90 CW".into()))
        );
    }

    #[test]
    fn an_ifd_chain_that_cycles_ends() {
        // IFD0's next pointer is IFD0 itself.
        let t = tiff(&[(0x0112, 3, 1, 1)], 8, b"");
        let v = parse(&[Value::Bytes(t)]);
        assert!(
            matches!(&v, Ok(v) if get(v, "Orientation") == Some(&Value::String("Horizontal (normal)".into()))),
            "{v:?}"
        );
    }

    #[test]
    fn offsets_past_the_end_and_huge_counts_are_skipped() {
        let t = tiff(
            &[
                (0x010f, 2, 100, 0x00ff_ffff),
                (0x0110, 1, u32::MAX, 40),
                (0x0112, 3, 1, 3),
            ],
            0,
            b"",
        );
        let Ok(v) = parse(&[Value::Bytes(t)]) else {
            panic!("parse failed")
        };
        assert_eq!(get(&v, "Make"), None);
        assert_eq!(get(&v, "Model"), None);
        assert_eq!(
            get(&v, "Orientation"),
            Some(&Value::String("Rotate 180".into()))
        );
    }

    #[test]
    fn many_entries_over_one_region_hit_the_value_cap() {
        // 3,000 entries each reading the same 8 KiB: 24 MiB of values from a small file.
        let entries: Vec<(u16, u16, u32, u32)> =
            (0..3000u16).map(|i| (0x9000 + i, 1, 8192, 8)).collect();
        let t = tiff(&entries, 0, &vec![0u8; 8192]);
        let e = parse(&[Value::Bytes(t)]).err();
        assert!(
            e.as_ref()
                .is_some_and(|e| e.code() == crate::error::HostErrorCode::LimitExceeded),
            "{e:?}"
        );
    }

    #[test]
    fn not_an_image_is_refused_and_no_exif_is_null() {
        let e = parse(&[Value::Bytes(b"hello, world".to_vec())]).err();
        assert!(e.is_some_and(|e| e.message().starts_with("exif.parse: the bytes are not")));
        // A JPEG with no APP1.
        let jpeg = b"\xff\xd8\xff\xdb\x00\x04\x00\x00\xff\xd9".to_vec();
        assert!(matches!(parse(&[Value::Bytes(jpeg)]), Ok(Value::Null)));
        let e = parse(&[Value::String("x".into())]).err();
        assert!(e.is_some_and(|e| e.code() == crate::error::HostErrorCode::InvalidArgument));
    }

    /// An ISO base media box.
    fn isobox(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut b = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind);
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn heic_exif_items_are_read() {
        // Make at 8 + 2 + 12 + 4 = 26.
        let t = tiff(&[(0x010f, 2, 6, 26)], 0, b"Apple\x00");
        let mut item = 0u32.to_be_bytes().to_vec();
        item.extend_from_slice(&t);
        let mut infe = vec![2, 0, 0, 0, 0, 1, 0, 0];
        infe.extend_from_slice(b"Exif\x00");
        let mut iinf = vec![0, 0, 0, 0, 0, 1];
        iinf.extend_from_slice(&isobox(b"infe", &infe));
        // Version 1, 4-byte offsets and lengths, one item in the ItemDataBox (method 1).
        let mut iloc = vec![1, 0, 0, 0, 0x44, 0x00, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1];
        iloc.extend_from_slice(&0u32.to_be_bytes());
        iloc.extend_from_slice(&(item.len() as u32).to_be_bytes());
        let mut meta = vec![0, 0, 0, 0];
        meta.extend_from_slice(&isobox(b"iinf", &iinf));
        meta.extend_from_slice(&isobox(b"iloc", &iloc));
        meta.extend_from_slice(&isobox(b"idat", &item));
        let mut heic = isobox(b"ftyp", b"heic\x00\x00\x00\x00heicmif1");
        heic.extend_from_slice(&isobox(b"meta", &meta));
        let v = parse(&[Value::Bytes(heic.clone())]);
        assert!(
            matches!(&v, Ok(v) if get(v, "Make") == Some(&Value::String("Apple".into()))),
            "{v:?}"
        );
        // Cut anywhere, it is read or refused, never a panic.
        for cut in 0..heic.len() {
            if let Err(e) = parse(&[Value::Bytes(heic[..cut].to_vec())]) {
                assert!(e.message().starts_with("exif.parse: "), "{e:?}");
            }
        }
    }

    #[test]
    fn truncated_files_never_panic() {
        let t = tiff(
            &[(0x010f, 2, 6, 50), (0x0112, 3, 1, 6), (0x0132, 2, 20, 56)],
            0,
            b"Canon\x002024:05:01 12:34:56\x00",
        );
        let mut app1 = b"Exif\0\0".to_vec();
        app1.extend_from_slice(&t);
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe1];
        jpeg.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
        jpeg.extend_from_slice(&app1);
        jpeg.extend_from_slice(&[0xff, 0xd9]);
        let whole = parse(&[Value::Bytes(jpeg.clone())]);
        assert!(
            matches!(&whole, Ok(v) if get(v, "Make") == Some(&Value::String("Canon".into()))),
            "{whole:?}"
        );
        for cut in 0..jpeg.len() {
            for bytes in [&jpeg[..cut], &t[..cut.min(t.len())]] {
                // Each prefix is read, found empty, or refused with a typed error.
                match parse(&[Value::Bytes(bytes.to_vec())]) {
                    Ok(_) => {}
                    Err(e) => assert!(e.message().starts_with("exif.parse: "), "{e:?}"),
                }
            }
        }
    }

    #[test]
    fn dates_and_versions_are_revived() {
        assert_eq!(
            date("2024:05:01 12:34:56").as_deref(),
            Some("2024-05-01T12:34:56")
        );
        assert_eq!(date("2024:05:01").as_deref(), Some("2024-05-01T00:00:00"));
        assert_eq!(date("    :  :     :  :  "), None);
        assert_eq!(version(b"0232"), "2.3.2");
        assert_eq!(version(b"0220"), "2.2");
        assert_eq!(version(b"0100"), "1.0");
        assert_eq!(
            degrees(&[48.0, 51.0, 29.5], "N"),
            48.0 + 51.0 / 60.0 + 29.5 / 3600.0
        );
        assert!(degrees(&[2.0, 17.0, 40.0], "W") < 0.0);
    }
}
