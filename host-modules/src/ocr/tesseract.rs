//! The part of Tesseract's C API (`tesseract/capi.h`, Tesseract 4 and 5) `ocr` uses, loaded at
//! run time with `libloading`: building needs no Tesseract, Leptonica, clang or pkg-config, and
//! a binary runs (without OCR) where the library is absent.
//!
//! The library is opened once per process and never closed, so the function pointers taken from
//! it stay valid for the life of the process. A failed load is not remembered: a host that
//! installs Tesseract later is picked up by the next call. This is the crate's only `unsafe`;
//! each block says why it holds.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::OnceLock;

use libloading::Library;

/// The names the library is looked up by, through the system's dynamic loader, in order: the
/// Tesseract 5 soname (Debian 12: `libtesseract5`, pulled in by `tesseract-ocr`), Tesseract 4's,
/// the development link, and macOS's.
pub const LIBRARY_NAMES: &[&str] = &[
    "libtesseract.so.5",
    "libtesseract.so.4",
    "libtesseract.so",
    "libtesseract.5.dylib",
    "libtesseract.dylib",
];

/// `TessBaseAPI *`, opaque.
type Handle = *mut c_void;

/// The loaded library and the entry points `ocr` calls.
pub struct Api {
    /// Kept open for as long as the pointers below are used (the life of the process).
    _library: Library,
    /// The name it was loaded by.
    pub loaded_as: &'static str,
    version: unsafe extern "C" fn() -> *const c_char,
    create: unsafe extern "C" fn() -> Handle,
    delete: unsafe extern "C" fn(Handle),
    set_variable: unsafe extern "C" fn(Handle, *const c_char, *const c_char) -> c_int,
    init3: unsafe extern "C" fn(Handle, *const c_char, *const c_char) -> c_int,
    /// `TessBaseAPIInit5`: a language's data from memory (Tesseract 4.1 and later).
    init5: Option<Init5>,
    set_image: unsafe extern "C" fn(Handle, *const u8, c_int, c_int, c_int, c_int),
    recognize: unsafe extern "C" fn(Handle, *mut c_void) -> c_int,
    get_utf8_text: unsafe extern "C" fn(Handle) -> *mut c_char,
    get_tsv_text: unsafe extern "C" fn(Handle, c_int) -> *mut c_char,
    mean_text_conf: unsafe extern "C" fn(Handle) -> c_int,
    delete_text: unsafe extern "C" fn(*const c_char),
    monitor_create: unsafe extern "C" fn() -> Monitor,
    monitor_delete: unsafe extern "C" fn(Monitor),
    monitor_set_deadline: unsafe extern "C" fn(Monitor, c_int),
}

/// `TessBaseAPIInit5(handle, data, data_size, language, mode, configs, configs_size,
/// vars_vec, vars_values, vars_vec_size, set_only_non_debug_params)`.
type Init5 = unsafe extern "C" fn(
    Handle,
    *const c_char,
    c_int,
    *const c_char,
    c_int,
    *mut *mut c_char,
    c_int,
    *mut *mut c_char,
    *mut *mut c_char,
    usize,
    c_int,
) -> c_int;

/// `OEM_DEFAULT`: whichever engine the language data supports.
const OEM_DEFAULT: c_int = 3;

/// `ETEXT_DESC *`, Tesseract's progress monitor: opaque.
type Monitor = *mut c_void;

/// The library could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No name in the list loaded (the last loader message).
    NotInstalled { tried: String, why: String },
    /// A library loaded but lacks an entry point (not a Tesseract 4 or 5 C API).
    MissingSymbol {
        library: &'static str,
        symbol: String,
    },
}

static API: OnceLock<Api> = OnceLock::new();

/// The process's Tesseract, loading it on first use.
pub fn api() -> Result<&'static Api, LoadError> {
    if let Some(api) = API.get() {
        return Ok(api);
    }
    let api = load(LIBRARY_NAMES)?;
    // Two threads may both load it; one keeps its copy and the other's handle is closed (the
    // loader counts references, so the library stays mapped).
    Ok(API.get_or_init(|| api))
}

/// Opens the first of `names` that loads and takes every entry point from it.
pub fn load(names: &[&'static str]) -> Result<Api, LoadError> {
    let mut why = String::from("no library name to try");
    for &name in names {
        // SAFETY: loading runs the library's initialisers. Tesseract's (and those of the
        // libraries it links: Leptonica, the C++ runtime, its image codecs) only set up
        // process-global tables; none of them reads input or starts a thread.
        match unsafe { Library::new(name) } {
            Ok(library) => return Api::from_library(library, name),
            Err(e) => why = e.to_string(),
        }
    }
    Err(LoadError::NotInstalled {
        tried: names.join(", "),
        why,
    })
}

impl Api {
    fn from_library(library: Library, name: &'static str) -> Result<Api, LoadError> {
        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the pointer type is the one `capi.h` declares for this symbol (the
                // declarations are identical in Tesseract 4 and 5); `_library` is kept in the
                // returned `Api`, so the copied pointer never outlives the mapping.
                let symbol = unsafe { library.get(concat!($name, "\0").as_bytes()) };
                *symbol.map_err(|_| LoadError::MissingSymbol {
                    library: name,
                    symbol: $name.to_string(),
                })?
            }};
        }
        Ok(Api {
            version: symbol!("TessVersion"),
            create: symbol!("TessBaseAPICreate"),
            delete: symbol!("TessBaseAPIDelete"),
            set_variable: symbol!("TessBaseAPISetVariable"),
            init3: symbol!("TessBaseAPIInit3"),
            // SAFETY: as for `symbol!`; an older library without it leaves it `None`.
            init5: unsafe { library.get::<Init5>(b"TessBaseAPIInit5\0") }
                .ok()
                .map(|s| *s),
            set_image: symbol!("TessBaseAPISetImage"),
            recognize: symbol!("TessBaseAPIRecognize"),
            get_utf8_text: symbol!("TessBaseAPIGetUTF8Text"),
            get_tsv_text: symbol!("TessBaseAPIGetTsvText"),
            mean_text_conf: symbol!("TessBaseAPIMeanTextConf"),
            delete_text: symbol!("TessDeleteText"),
            monitor_create: symbol!("TessMonitorCreate"),
            monitor_delete: symbol!("TessMonitorDelete"),
            monitor_set_deadline: symbol!("TessMonitorSetDeadlineMSecs"),
            loaded_as: name,
            _library: library,
        })
    }

    /// Tesseract's version string (`5.3.0`).
    pub fn version(&self) -> String {
        // SAFETY: TessVersion takes nothing and returns a pointer to a static NUL-terminated
        // string (or, defensively, null).
        let text = unsafe { (self.version)() };
        if text.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated, static: never freed.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    /// A new engine, not yet initialised.
    pub fn engine(&'static self) -> Option<Engine> {
        // SAFETY: TessBaseAPICreate takes nothing and returns a new handle (null only when the
        // allocation failed), which `Engine` deletes exactly once.
        let handle = NonNull::new(unsafe { (self.create)() })?;
        Some(Engine { api: self, handle })
    }

    /// Takes a string Tesseract allocated and frees it.
    fn take_text(&self, text: *mut c_char) -> Option<String> {
        if text.is_null() {
            return None;
        }
        // SAFETY: `text` is a NUL-terminated string Tesseract allocated for us; it is read once
        // and then freed with TessDeleteText, its matching deallocator, and never used again.
        unsafe {
            let owned = CStr::from_ptr(text).to_string_lossy().into_owned();
            (self.delete_text)(text);
            Some(owned)
        }
    }
}

/// One `TessBaseAPI`, deleted when dropped. Used on one thread (it is not `Send`).
pub struct Engine {
    api: &'static Api,
    handle: NonNull<c_void>,
}

impl Engine {
    /// Sets a Tesseract parameter (false when the name is unknown).
    pub fn set_variable(&mut self, name: &CStr, value: &CStr) -> bool {
        // SAFETY: a live handle and two NUL-terminated strings that outlive the call (Tesseract
        // copies the value).
        unsafe { (self.api.set_variable)(self.handle.as_ptr(), name.as_ptr(), value.as_ptr()) != 0 }
    }

    /// Loads `language` (`eng`, `eng+deu`) from the default data directory; false when any
    /// language could not be loaded at all.
    pub fn init(&mut self, language: &CStr) -> bool {
        // SAFETY: a live handle; a null data path means Tesseract's default (TESSDATA_PREFIX or
        // its compiled-in directory); the language is NUL-terminated and outlives the call.
        unsafe { (self.api.init3)(self.handle.as_ptr(), std::ptr::null(), language.as_ptr()) == 0 }
    }

    /// Loads one language from `data` (the contents of its `.traineddata` file) rather than
    /// from the data directory; false when the library cannot (before Tesseract 4.1) or the
    /// data does not load.
    pub fn init_from_memory(&mut self, language: &CStr, data: &[u8]) -> bool {
        let (Some(init5), Ok(size)) = (self.api.init5, c_int::try_from(data.len())) else {
            return false;
        };
        // SAFETY: a live handle; `data` is readable for `size` bytes and outlives the call
        // (Tesseract copies what it keeps); the language is NUL-terminated; no configs and no
        // variables (null lists of length 0).
        unsafe {
            init5(
                self.handle.as_ptr(),
                data.as_ptr().cast(),
                size,
                language.as_ptr(),
                OEM_DEFAULT,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                0,
            ) == 0
        }
    }

    /// Recognises `pixels` (8-bit grey, `width` × `height`, rows packed) and returns the text,
    /// the mean confidence and the TSV rendering (`Err` names the step that failed). Recognition
    /// stops at `deadline`: Tesseract's monitor checks it between words, and a page stopped
    /// there is [`ReadError::Deadline`].
    pub fn read(
        &mut self,
        pixels: &[u8],
        width: u32,
        height: u32,
        deadline: std::time::Instant,
    ) -> Result<(String, i32, String), ReadError> {
        let w = c_int::try_from(width).map_err(|_| ReadError::Step("take an image this wide"))?;
        let h = c_int::try_from(height).map_err(|_| ReadError::Step("take an image this tall"))?;
        let expected = usize::try_from(u64::from(width) * u64::from(height))
            .map_err(|_| ReadError::Step("take an image this large"))?;
        if pixels.len() != expected {
            return Err(ReadError::Step(
                "take the image (its pixel count does not match its size)",
            ));
        }
        // Whole milliseconds left, at least one (zero would mean "no deadline" to Tesseract).
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(ReadError::Deadline);
        }
        let left_ms = c_int::try_from(left.as_millis())
            .unwrap_or(c_int::MAX)
            .max(1);
        let handle = self.handle.as_ptr();
        // SAFETY: a live handle; `pixels` holds exactly `height` rows of `width` one-byte
        // pixels (checked above), which is what bytes_per_pixel 1 and bytes_per_line `w`
        // describe. Tesseract copies the pixels into its own image before returning, and
        // `pixels` is borrowed for this whole function anyway.
        unsafe { (self.api.set_image)(handle, pixels.as_ptr(), w, h, 1, w) };
        let monitor = MonitorGuard::new(self.api).ok_or(ReadError::Step("make a monitor"))?;
        // SAFETY: a live monitor; Tesseract stores the deadline as now + `left_ms`.
        unsafe { (self.api.monitor_set_deadline)(monitor.0, left_ms) };
        // SAFETY: a live handle with an image set and a live monitor with no callbacks (only
        // the deadline), which outlives the call.
        let status = unsafe { (self.api.recognize)(handle, monitor.0) };
        drop(monitor);
        if std::time::Instant::now() >= deadline {
            return Err(ReadError::Deadline);
        }
        if status != 0 {
            return Err(ReadError::Step("read the image"));
        }
        // SAFETY: a live handle after a successful Recognize; the result is taken and freed by
        // `take_text`.
        let text = self
            .api
            .take_text(unsafe { (self.api.get_utf8_text)(handle) })
            .ok_or(ReadError::Step("return the text"))?;
        // SAFETY: as above.
        let confidence = unsafe { (self.api.mean_text_conf)(handle) };
        // SAFETY: as for the text; page 0 is the only page.
        let tsv = self
            .api
            .take_text(unsafe { (self.api.get_tsv_text)(handle, 0) })
            .ok_or(ReadError::Step("return the words"))?;
        Ok((text, confidence, tsv))
    }
}

/// Why [`Engine::read`] gave no page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The deadline passed before the page was read.
    Deadline,
    /// A step failed: what Tesseract "could not" do.
    Step(&'static str),
}

/// One `ETEXT_DESC`, deleted when dropped.
struct MonitorGuard(Monitor, &'static Api);

impl MonitorGuard {
    fn new(api: &'static Api) -> Option<MonitorGuard> {
        // SAFETY: TessMonitorCreate takes nothing and returns a new monitor (null only when the
        // allocation failed), which the guard deletes exactly once.
        let monitor = unsafe { (api.monitor_create)() };
        (!monitor.is_null()).then_some(MonitorGuard(monitor, api))
    }
}

impl Drop for MonitorGuard {
    fn drop(&mut self) {
        // SAFETY: the monitor came from TessMonitorCreate, no Recognize using it is running
        // (the guard is dropped after the call returned) and it is deleted exactly once.
        unsafe { (self.1.monitor_delete)(self.0) }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: the handle came from TessBaseAPICreate and is deleted exactly once, here
        // (TessBaseAPIDelete ends the engine first); nothing borrowed from it outlives `self`.
        unsafe { (self.api.delete)(self.handle.as_ptr()) }
    }
}
