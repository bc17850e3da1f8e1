//! `ocr`: text recognition with Tesseract, the system library (Debian's `libtesseract5`, from
//! the `tesseract-ocr` package), loaded at run time through its C API ([`tesseract`]).
//!
//! The reference ran tesseract.js on the host and kept its contract: `recognize(imageBytes,
//! {language = "eng"})` answers `{text, confidence, words: [{text, confidence, bbox: {x, y,
//! width, height}}]}`, the language is validated against
//! `^[a-z_]{3,}(\+[a-z_]{3,})*$` (case-insensitive), and a page of more than
//! [`MAX_OCR_WORDS`] words is refused.
//!
//! Untrusted bytes never reach a C decoder: the image is decoded in Rust (the `image` crate:
//! PNG, JPEG, GIF, BMP, TIFF, WebP, PNM), its size checked from the header before any pixel is
//! allocated ([`MAX_OCR_PIXELS`], [`MAX_OCR_SIDE`]), flattened onto white and handed to
//! Tesseract as 8-bit grey pixels, so Leptonica never decodes anything. Language data comes from
//! the system (`tesseract-ocr-eng` and friends); nothing is downloaded. Each call loads its own
//! engine (about 70 ms for English) and drops it: an engine kept past the call would be
//! reported by Tesseract as a leak when the process exits, on every `nodetool run`.
//!
//! Where the library or the language data is missing, `recognize` rejects naming the Debian
//! packages to install, and [`availability`] says the same for a front end to show beside the
//! pack (it never runs on a guest's input).

mod tesseract;

use std::collections::HashSet;
use std::ffi::CString;
use std::io::Cursor;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use image::{DynamicImage, ImageDecoder, ImageReader, Limits};
use nodetool_protocol::value::Value;

use crate::error::{HostError, HostErrorCode};
use crate::limits::{js_string, option, options_of, require_bytes};
use tesseract::{Engine, LoadError, ReadError};

/// Words one call reports.
pub const MAX_OCR_WORDS: usize = 20_000;
/// Pixels an image may have (an A4 page scanned at 600 dpi is 35 million).
pub const MAX_OCR_PIXELS: u64 = 40_000_000;
/// Pixels an image may have on either side.
pub const MAX_OCR_SIDE: u32 = 32_767;

/// Bytes the decoder may allocate (the largest image at 16 bits per RGBA channel, plus slack).
const MAX_DECODE_ALLOC: u64 = MAX_OCR_PIXELS * 8 + 64 * 1024 * 1024;

/// The longest one image is recognised for, whatever the run's deadline: Tesseract's own
/// monitor stops it (its noise-filled pages can otherwise take minutes).
pub const MAX_OCR_TIME: std::time::Duration = std::time::Duration::from_secs(30);

const AT: &str = "ocr.recognize";

/// Single languages Tesseract has loaded in this process.
static LOADED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Where a process that cannot open files (a confined sandbox worker) gets a language's data:
/// the contents of `<language>.traineddata`, or why there are none.
pub type LanguageSource = Box<dyn Fn(&str) -> Result<Arc<[u8]>, String> + Send + Sync>;

static LANGUAGE_SOURCE: OnceLock<LanguageSource> = OnceLock::new();

/// Languages' data this process was given by its [`LanguageSource`], kept for the next call.
static GIVEN: Mutex<Vec<(String, Arc<[u8]>)>> = Mutex::new(Vec::new());

/// The most language data a process keeps from its [`LanguageSource`].
const MAX_GIVEN_BYTES: usize = 64 * 1024 * 1024;

/// The largest `.traineddata` file read (the largest published ones are about 25 MB).
pub const MAX_LANGUAGE_DATA_BYTES: u64 = 64 * 1024 * 1024;

/// From now on, language data comes from `source`, never from the filesystem (once per
/// process; a second source is ignored).
pub fn set_language_source(source: LanguageSource) {
    let _ = LANGUAGE_SOURCE.set(source);
}

/// Maps the Tesseract library now, if it is installed (the first call loads it; later ones
/// are free), so a process about to lose file access can still recognise.
pub fn preload() {
    let _ = tesseract::api();
}

/// The contents of one language's `.traineddata` file, from the data directory Tesseract
/// itself uses (`TESSDATA_PREFIX`, else the Debian and common install locations), for a
/// process that may open files to hand to one that may not. The code is checked first, so
/// no guest text reaches a path beyond a language code.
pub fn language_data(language: &str) -> Result<Vec<u8>, String> {
    let language = language.to_ascii_lowercase();
    if language.contains('+') || !is_language_code(&language) {
        return Err(format!(
            "{AT}: \"{language}\" is not a single Tesseract language code"
        ));
    }
    let missing = || {
        format!(
            "{AT}: Tesseract has no language data for \"{language}\" on this host (Debian: apt-get install {})",
            language_package(&language)
        )
    };
    let file = format!("{language}.traineddata");
    let mut directories: Vec<std::path::PathBuf> = Vec::new();
    if let Some(prefix) = std::env::var_os("TESSDATA_PREFIX") {
        let prefix = std::path::PathBuf::from(prefix);
        directories.push(prefix.join("tessdata"));
        directories.push(prefix);
    }
    for known in [
        "/usr/share/tesseract-ocr/5/tessdata",
        "/usr/share/tesseract-ocr/4.00/tessdata",
        "/usr/share/tessdata",
        "/usr/local/share/tessdata",
        "/opt/homebrew/share/tessdata",
    ] {
        directories.push(known.into());
    }
    for directory in directories {
        let path = directory.join(&file);
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        if !metadata.is_file() || metadata.len() > MAX_LANGUAGE_DATA_BYTES {
            continue;
        }
        if let Ok(bytes) = std::fs::read(&path) {
            return Ok(bytes);
        }
    }
    Err(missing())
}

/// A language's data from the process's [`LanguageSource`], kept for later calls.
fn given_data(source: &LanguageSource, language: &str) -> Result<Arc<[u8]>, String> {
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, data)) = given.iter().find(|(l, _)| l == language) {
        return Ok(Arc::clone(data));
    }
    drop(given);
    let data = source(language)?;
    given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    given.push((language.to_string(), Arc::clone(&data)));
    // The oldest go first when the kept data grows past the cap.
    while given.len() > 1 && given.iter().map(|(_, d)| d.len()).sum::<usize>() > MAX_GIVEN_BYTES {
        given.remove(0);
    }
    Ok(data)
}

/// `recognize(imageBytes, {language = "eng"})` -> `{text, confidence, words}`.
pub fn recognize(args: &[Value]) -> Result<Value, HostError> {
    let bytes = require_bytes(AT, args.first(), "image")?;
    let options = options_of(args.get(1));
    let language = option(options, "language").map_or_else(|| "eng".to_string(), js_string);
    let language = match language.trim() {
        "" => "eng".to_string(),
        l => l.to_string(),
    };
    if !is_language_code(&language) {
        return Err(HostError::invalid(format!(
            "{AT}: \"{language}\" is not a Tesseract language code (e.g. \"eng\", \"eng+deu\")"
        )));
    }
    let language = language.to_ascii_lowercase();
    let (pixels, width, height) = decode(bytes)?;
    let api = tesseract::api()
        .map_err(|e| HostError::unavailable(format!("{AT}: {}", not_installed(&e, &language))))?;
    let mut engine = engine_for(api, &language)?;
    let budget = std::time::Instant::now() + MAX_OCR_TIME;
    let deadline = crate::call_deadline().map_or(budget, |run| run.min(budget));
    read(&mut engine, &pixels, width, height, deadline)
}

/// The Debian package for one language's data (`chi_sim` -> `tesseract-ocr-chi-sim`).
fn language_package(language: &str) -> String {
    format!("tesseract-ocr-{}", language.replace('_', "-"))
}

/// Why Tesseract cannot be used, and what to install (the languages beyond English, whose data
/// `tesseract-ocr` brings, each name their package).
fn not_installed(error: &LoadError, language: &str) -> String {
    let extra: String = language
        .split('+')
        .filter(|l| !matches!(*l, "eng" | "osd"))
        .map(|l| format!(" {}", language_package(l)))
        .collect();
    match error {
        LoadError::NotInstalled { tried, why } => format!(
            "Tesseract is not installed on this host (none of {tried} loads: {why}; Debian: apt-get install tesseract-ocr{extra})"
        ),
        LoadError::MissingSymbol { library, symbol } => format!(
            "{library} is not a usable Tesseract 4 or 5 library (it has no {symbol}; Debian: apt-get install tesseract-ocr{extra})"
        ),
    }
}

/// Whether `recognize` can work here with its default language: `Ok` naming Tesseract's version
/// and the library loaded (`Tesseract 5.3.0 (libtesseract.so.5)`), or the sentence saying what
/// to install. The library is loaded and an English engine built
/// once (about 100 ms); a success is remembered for the process, a failure is asked again.
pub fn availability() -> Result<String, String> {
    static AVAILABLE: OnceLock<String> = OnceLock::new();
    if let Some(version) = AVAILABLE.get() {
        return Ok(version.clone());
    }
    let api = tesseract::api().map_err(|e| not_installed(&e, "eng"))?;
    let no_english = || {
        format!(
            "Tesseract {} is installed but has no English language data, the default of recognize() (Debian: apt-get install {})",
            api.version(),
            language_package("eng")
        )
    };
    let mut engine = api.engine().ok_or_else(no_english)?;
    // Tesseract's own complaint about missing data would land on the front end's stderr beside
    // this answer; its messages go nowhere during the probe, then back to stderr.
    engine.set_variable(c"debug_file", c"/dev/null");
    let loaded = engine.init(c"eng");
    engine.set_variable(c"debug_file", c"");
    drop(engine);
    if !loaded {
        return Err(no_english());
    }
    Ok(AVAILABLE
        .get_or_init(|| format!("Tesseract {} ({})", api.version(), api.loaded_as))
        .clone())
}

/// `^[a-z_]{3,}(\+[a-z_]{3,})*$`, case-insensitive.
fn is_language_code(language: &str) -> bool {
    language
        .split('+')
        .all(|part| part.len() >= 3 && part.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_'))
}

/// The image as 8-bit grey on white, with its width and height.
fn decode(bytes: &[u8]) -> Result<(Vec<u8>, u32, u32), HostError> {
    let not_decoded = |code: HostErrorCode, why: String| {
        HostError::new(
            code,
            format!("{AT}: the image could not be decoded ({why})"),
        )
    };
    // What the `image` crate says: a format or variant it does not read, one past the decode
    // limits, or bytes broken past reading.
    let image_error = |e: image::ImageError| {
        let code = match e {
            image::ImageError::Unsupported(_) => HostErrorCode::Unsupported,
            image::ImageError::Limits(_) => HostErrorCode::LimitExceeded,
            _ => HostErrorCode::MalformedInput,
        };
        not_decoded(code, e.to_string())
    };
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| not_decoded(HostErrorCode::MalformedInput, e.to_string()))?;
    if reader.format().is_none() {
        return Err(not_decoded(
            HostErrorCode::Unsupported,
            "it is not a PNG, JPEG, GIF, BMP, TIFF, WebP or PNM image".into(),
        ));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_OCR_SIDE);
    limits.max_image_height = Some(MAX_OCR_SIDE);
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(image_error)?;
    let (width, height) = decoder.dimensions();
    let pixels = u64::from(width) * u64::from(height);
    if pixels > MAX_OCR_PIXELS || width > MAX_OCR_SIDE || height > MAX_OCR_SIDE {
        return Err(HostError::limit(format!(
            "{AT}: the image is {width}x{height} pixels, over the {MAX_OCR_PIXELS} pixel limit ({MAX_OCR_SIDE} on a side)"
        )));
    }
    if pixels == 0 {
        return Err(HostError::invalid(format!(
            "{AT}: the image is empty ({width}x{height} pixels)"
        )));
    }
    let image = DynamicImage::from_decoder(decoder).map_err(image_error)?;
    let grey = if image.color().has_alpha() {
        // Transparent pixels read as white paper, not as black ink.
        image
            .to_luma_alpha8()
            .pixels()
            .map(|p| {
                let [luma, alpha] = p.0;
                let (luma, alpha) = (u32::from(luma), u32::from(alpha));
                ((luma * alpha + 255 * (255 - alpha) + 127) / 255) as u8
            })
            .collect()
    } else {
        image.to_luma8().into_raw()
    };
    Ok((grey, width, height))
}

/// An engine for `language`. Each language of a `+` combination is first checked to load on
/// its own (once per process), since Tesseract skips one that does not and carries on.
fn engine_for(api: &'static tesseract::Api, language: &str) -> Result<Engine, HostError> {
    if language.contains('+') {
        for part in language.split('+') {
            let known = LOADED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|loaded| loaded.contains(part));
            if !known {
                new_engine(api, part)?;
            }
        }
    }
    new_engine(api, language)
}

fn new_engine(api: &'static tesseract::Api, language: &str) -> Result<Engine, HostError> {
    let missing = || {
        HostError::unavailable(format!(
            "{AT}: Tesseract has no language data for \"{language}\" on this host (Debian: apt-get install {})",
            language_package(language)
        ))
    };
    let code = CString::new(language).map_err(|_| missing())?;
    let mut engine = api.engine().ok_or_else(|| {
        HostError::unavailable(format!("{AT}: Tesseract could not create an engine"))
    })?;
    match LANGUAGE_SOURCE.get() {
        // A process without file access (a confined sandbox worker): one language's data at a
        // time, handed over in memory.
        Some(_) if language.contains('+') => {
            return Err(HostError::unsupported(format!(
                "{AT}: combining languages (\"{language}\") is not available in a confined sandbox worker; recognize with one language at a time"
            )));
        }
        Some(source) => {
            // The source's sentence already names the call and what to install.
            let data = given_data(source, language).map_err(HostError::unavailable)?;
            if !engine.init_from_memory(&code, &data) {
                return Err(HostError::unavailable(format!(
                    "{AT}: Tesseract could not load the language data for \"{language}\" from memory (it needs Tesseract 4.1 or later)"
                )));
            }
        }
        None => {
            if !engine.init(&code) {
                return Err(missing());
            }
        }
    }
    if !language.contains('+') {
        LOADED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(HashSet::new)
            .insert(language.to_string());
    }
    Ok(engine)
}

/// Recognizes one grey image, stopping at `deadline`.
fn read(
    engine: &mut Engine,
    pixels: &[u8],
    width: u32,
    height: u32,
    deadline: std::time::Instant,
) -> Result<Value, HostError> {
    let (text, confidence, tsv) = engine
        .read(pixels, width, height, deadline)
        .map_err(|e| match e {
            ReadError::Deadline => HostError::deadline(format!(
                "{AT}: recognition stopped at its time limit (the run's deadline, or {} s for one image)",
                MAX_OCR_TIME.as_secs()
            )),
            ReadError::Step(what) => HostError::internal(format!("{AT}: Tesseract could not {what}")),
        })?;
    let words = words_of(&tsv)?;
    Ok(Value::Object(vec![
        ("text".into(), Value::String(text)),
        ("confidence".into(), Value::Number(f64::from(confidence))),
        ("words".into(), Value::Array(words)),
    ]))
}

/// The words of Tesseract's TSV (level 5 rows: `level page block par line word left top width
/// height conf text`).
fn words_of(tsv: &str) -> Result<Vec<Value>, HostError> {
    let rows: Vec<[&str; 12]> = tsv
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let row: [&str; 12] = std::array::from_fn(|_| fields.next().unwrap_or_default());
            (row[0] == "5" && fields.next().is_none() && !row[11].trim().is_empty()).then_some(row)
        })
        .collect();
    if rows.len() > MAX_OCR_WORDS {
        return Err(HostError::output(format!(
            "{AT}: {} words exceeds the {MAX_OCR_WORDS} word limit",
            rows.len()
        )));
    }
    let number = |s: &str| s.trim().parse::<f64>().unwrap_or(0.0);
    Ok(rows
        .into_iter()
        .map(|[_, _, _, _, _, _, left, top, width, height, conf, text]| {
            Value::Object(vec![
                ("text".into(), Value::String(text.to_string())),
                ("confidence".into(), Value::Number(number(conf).max(0.0))),
                (
                    "bbox".into(),
                    Value::Object(vec![
                        ("x".into(), Value::Number(number(left))),
                        ("y".into(), Value::Number(number(top))),
                        ("width".into(), Value::Number(number(width))),
                        ("height".into(), Value::Number(number(height))),
                    ]),
                ),
            ])
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn call(bytes: Vec<u8>, language: Option<&str>) -> Result<Value, HostError> {
        let mut args = vec![Value::Bytes(bytes)];
        if let Some(l) = language {
            args.push(Value::Object(vec![(
                "language".into(),
                Value::String(l.into()),
            )]));
        }
        recognize(&args)
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::GrayImage::from_pixel(width, height, image::Luma([255]));
        let mut out = Cursor::new(Vec::new());
        image
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap_or_else(|e| panic!("{e}"));
        out.into_inner()
    }

    #[test]
    fn languages_are_validated() {
        for bad in ["en", "eng+", "eng+de", "e-n-g", "../eng", "eng deu"] {
            assert_eq!(
                call(png(8, 8), Some(bad)),
                Err(HostError::invalid(format!(
                    "ocr.recognize: \"{bad}\" is not a Tesseract language code (e.g. \"eng\", \"eng+deu\")"
                ))),
                "{bad}"
            );
        }
        for good in ["eng", "ENG", "eng+deu", "chi_sim"] {
            assert!(is_language_code(good), "{good}");
        }
    }

    #[test]
    fn bytes_that_are_not_an_image_are_a_clear_error() {
        let e = call(b"hello, not an image".to_vec(), None).err();
        assert_eq!(
            e,
            Some(HostError::unsupported(
                "ocr.recognize: the image could not be decoded (it is not a PNG, JPEG, GIF, BMP, TIFF, WebP or PNM image)"
            ))
        );
        // A PNG signature with a broken body.
        let mut broken = png(8, 8);
        broken.truncate(40);
        let e = call(broken, None)
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with("ocr.recognize: the image could not be decoded ("),
            "{e}"
        );
        assert_eq!(
            recognize(&[Value::String("x".into())])
                .err()
                .map(HostError::into_message)
                .as_deref(),
            Some(
                "ocr.recognize: image must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
            )
        );
    }

    #[test]
    fn the_pixel_cap_is_checked_before_decoding() {
        // A valid header claiming 30000x30000 over a tiny body: refused from the header.
        let mut header = Vec::new();
        header.extend_from_slice(b"\x89PNG\r\n\x1a\n");
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(b"IHDR");
        ihdr.extend_from_slice(&30_000u32.to_be_bytes());
        ihdr.extend_from_slice(&30_000u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        header.extend_from_slice(&13u32.to_be_bytes());
        header.extend_from_slice(&ihdr);
        header.extend_from_slice(&crc32(&ihdr).to_be_bytes());
        for chunk in [&b"IDAT"[..], &b"IEND"[..]] {
            header.extend_from_slice(&0u32.to_be_bytes());
            header.extend_from_slice(chunk);
            header.extend_from_slice(&crc32(chunk).to_be_bytes());
        }
        let e = call(header, None)
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "ocr.recognize: the image is 30000x30000 pixels, over the 40000000 pixel limit (32767 on a side)"
        );
    }

    #[test]
    fn a_blank_page_has_no_words() {
        let out = call(png(200, 80), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.get("words"), Some(&Value::Array(vec![])));
        assert!(matches!(out.get("text"), Some(Value::String(t)) if t.trim().is_empty()));
    }

    /// `side`×`side` grey noise, the pixels Tesseract finds hardest (minutes when unbounded).
    fn noise(side: u32) -> Vec<u8> {
        let mut state: u32 = 0x2545_f491;
        (0..side * side)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn recognition_stops_at_the_deadline() {
        let api = tesseract::api().unwrap_or_else(|e| panic!("{e:?}"));
        let mut engine = engine_for(api, "eng").unwrap_or_else(|e| panic!("{e}"));
        let pixels = noise(2000);
        // A deadline already passed never starts Tesseract.
        let past = std::time::Instant::now();
        let e = read(&mut engine, &pixels, 2000, 2000, past)
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "ocr.recognize: recognition stopped at its time limit (the run's deadline, or 30 s for one image)"
        );
        // A near one stops it part-way (unbounded, this page took 84 s).
        let soon = std::time::Instant::now() + std::time::Duration::from_millis(300);
        let e = read(&mut engine, &pixels, 2000, 2000, soon)
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(e.contains("stopped at its time limit"), "{e}");
        // The engine still reads the next image.
        let out = read(
            &mut engine,
            &noise(16),
            16,
            16,
            std::time::Instant::now() + MAX_OCR_TIME,
        );
        assert!(out.is_ok(), "{out:?}");
    }

    #[test]
    fn an_unknown_language_is_named() {
        let e = call(png(8, 8), Some("zzz"))
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "ocr.recognize: Tesseract has no language data for \"zzz\" on this host (Debian: apt-get install tesseract-ocr-zzz)"
        );
        let e = call(png(8, 8), Some("eng+zzz"))
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(e.contains("no language data for \"zzz\""), "{e}");
    }

    #[test]
    fn tsv_rows_become_words() {
        let tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
                   1\t1\t0\t0\t0\t0\t0\t0\t100\t50\t-1\t\n\
                   5\t1\t1\t1\t1\t1\t10\t12\t40\t20\t96.5\tHello\n\
                   5\t1\t1\t1\t1\t2\t55\t12\t45\t20\t91\tworld\n";
        let words = words_of(tsv).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(words.len(), 2);
        assert_eq!(
            words[0],
            Value::Object(vec![
                ("text".into(), Value::String("Hello".into())),
                ("confidence".into(), Value::Number(96.5)),
                (
                    "bbox".into(),
                    Value::Object(vec![
                        ("x".into(), Value::Number(10.0)),
                        ("y".into(), Value::Number(12.0)),
                        ("width".into(), Value::Number(40.0)),
                        ("height".into(), Value::Number(20.0)),
                    ])
                ),
            ])
        );
        let many: String = (0..MAX_OCR_WORDS + 2)
            .map(|i| format!("5\t1\t1\t1\t1\t{i}\t0\t0\t1\t1\t90\tw\n"))
            .collect();
        assert_eq!(
            words_of(&many)
                .err()
                .map(HostError::into_message)
                .as_deref(),
            Some("ocr.recognize: 20002 words exceeds the 20000 word limit")
        );
    }

    #[test]
    fn a_missing_library_names_what_to_install() {
        let error = tesseract::load(&["libnodetool-test-no-such-tesseract.so.5"])
            .err()
            .unwrap_or_else(|| panic!("a library that does not exist loaded"));
        let message = not_installed(&error, "eng");
        assert!(
            message.starts_with(
                "Tesseract is not installed on this host (none of libnodetool-test-no-such-tesseract.so.5 loads: "
            ),
            "{message}"
        );
        assert!(
            message.ends_with("; Debian: apt-get install tesseract-ocr)"),
            "{message}"
        );
        // Each language beyond English is its own package.
        assert!(
            not_installed(&error, "eng+deu+chi_sim").ends_with(
                "apt-get install tesseract-ocr tesseract-ocr-deu tesseract-ocr-chi-sim)"
            ),
        );
    }

    #[test]
    fn the_library_loads_at_run_time_where_it_is_installed() {
        let version = availability().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            version.starts_with("Tesseract 4.") || version.starts_with("Tesseract 5."),
            "{version}"
        );
        let api = tesseract::api().unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            api.loaded_as.starts_with("libtesseract"),
            "{}",
            api.loaded_as
        );
    }

    /// The CRC-32 PNG chunks and ZIP entries carry.
    pub(crate) fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
