//! `nodetool-host-modules`: NodeTool's own native implementations behind `kind: "host"`
//! entries, and the per-run dispatcher the generated host facades call.
//!
//! A pack names a host id and nothing else; the id resolves through the protocol's registry,
//! which pins the one package allowed to declare it. [`HostDispatcher::for_resolution`] repeats
//! discovery's two checks (the id is in the registry; the pack is the pinned one), because a
//! resolution can come from a catalog this process did not build. Every call then checks the
//! module key (a host module this run declared), the export name (an own registry export) and
//! the argument list. Each implementation enforces its library's own limits (input caps, the
//! zip inflation cap, the workbook size caps) in the code the guest cannot bypass.
//!
//! Architecture invariant: this crate never loads code a pack supplies, and links no
//! JavaScript engine (it implements `nodetool_runtime::dispatch::Dispatcher`).
//!
//! Untrusted-input invariant: every argument of a host call is guest data, and most are the
//! bytes of files nobody vetted (archives, workbooks, PDFs, Office and EPUB documents, images,
//! HTML, XML, CSV). Every module guarantees, in code the guest cannot bypass:
//! - caps before work: the shared input caps ([`limits::require_text`], [`limits::require_bytes`])
//!   and the module's own (entries, inflation, nesting, cells, pixels, pages, result bytes) are
//!   checked before or while the work is done, never after it has been materialized;
//! - no panic reaches the host: no `unwrap`/`expect` on untrusted data, the third-party readers
//!   that are fuzzed but not proven run under `catch_unwind`, and the dispatcher catches the rest
//!   (the guest gets `host-internal`, the log one line without the build machine's paths);
//! - no filesystem path and no host state in a message: a message names the module and export,
//!   the argument, entry, part, sheet or cap, never where something lives on the host;
//! - the run's deadline: long work (OCR, diff, document walks) looks at `call_deadline()` and
//!   stops by it.
//!
//! Errors are typed ([`HostError`]): a stable [`HostErrorCode`] declared once in [`error`],
//! with its meaning and what to do, and a message starting `<id>.<export>: ` that the
//! dispatcher renders as the guest's `Error` text.

mod archive;
mod aws;
mod csv;
mod diff;
mod documents;
pub mod error;
mod exif;
mod expr;
mod fabric;
mod html;
mod ics;
pub mod limits;
mod ocr;
mod services;
mod sqlite;
mod subtitle;
mod tokens;
mod xlsx;
mod xml;
mod zip;

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Once};
use std::time::Instant;

use nodetool_protocol::catalog::{Resolution, ResolvedKind, pack_name_of};
use nodetool_protocol::host::{HOST_MODULES, HostModuleSpec, host_module};
use nodetool_protocol::packed::Packed;
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::{DispatchError, DispatchFuture, Dispatcher, Reply, ReplyFuture};

pub use error::{HostError, HostErrorCode};

/// One host export's implementation: the arguments in, the result or the typed error out (its
/// message already prefixed `<id>.<export>: `).
pub type HostFn = fn(&[Value]) -> Result<Value, HostError>;

/// The implementation of `<id>.<export>`, by exact match.
pub fn implementation(id: &str, export: &str) -> Option<HostFn> {
    let f: HostFn = match (id, export) {
        ("csv", "parse") => csv::parse,
        ("csv", "stringify") => csv::stringify,
        ("html", "select") => html::select,
        ("html", "toMarkdown") => html::to_markdown,
        ("html", "toText") => html::to_text,
        ("html", "extractLinks") => html::extract_links,
        ("html", "extractImages") => html::extract_images,
        ("html", "extractAudio") => html::extract_audio,
        ("html", "extractVideos") => html::extract_videos,
        ("html", "extractMetadata") => html::extract_metadata,
        ("html", "extractReadableText") => html::extract_readable_text,
        ("ocr", "recognize") => ocr::recognize,
        ("xml", "parse") => xml::parse,
        ("xlsx", "parse") => xlsx::parse,
        ("xlsx", "write") => xlsx::write,
        ("zip", "unzip") => zip::unzip,
        ("zip", "zip") => zip::zip,
        ("diff", "unified") => diff::unified,
        ("pdf", "extractText") => documents::pdf::extract_text,
        ("pdf", "extractPages") => documents::pdf::extract_pages,
        ("docx", "build") => documents::docx::build,
        ("mammoth", "extractRawText") => documents::mammoth::extract_raw_text,
        ("mammoth", "convertToHtml") => documents::mammoth::convert_to_html,
        ("epub", "metadata") => documents::epub::metadata,
        ("epub", "tableOfContents") => documents::epub::table_of_contents,
        ("epub", "extractText") => documents::epub::extract_text,
        ("epub", "extractChapters") => documents::epub::extract_chapters,
        ("pptx", "extractText") => documents::pptx::extract_text,
        ("pptx", "extractSlides") => documents::pptx::extract_slides,
        ("pdflib", "build") => documents::pdflib::build,
        ("pdflib", "merge") => documents::pdflib::merge,
        ("pptxgen", "build") => documents::pptxgen::build,
        ("sqlite", "query") => sqlite::query,
        ("sqlite", "run") => sqlite::run,
        ("tokens", "count") => tokens::count,
        ("tokens", "encode") => tokens::encode,
        ("tokens", "decode") => tokens::decode,
        ("ics", "createEvent") => ics::create_event,
        ("ics", "createEvents") => ics::create_events,
        ("subtitle", "parse") => subtitle::parse,
        ("subtitle", "stringify") => subtitle::stringify,
        ("expr", "evaluate") => expr::evaluate,
        ("exif", "parse") => exif::parse,
        ("fabric", "render") => fabric::render,
        ("fabric", "renderSVG") => fabric::render_svg,
        ("fabric", "loadSVG") => fabric::load_svg,
        ("fabric", "toDataURL") => fabric::to_data_url,
        ("aws", "sigv4") => aws::sigv4,
        ("aws", "presign") => aws::presign,
        ("notion", "request") => services::notion::request,
        ("notion", "plainText") => services::notion::plain_text,
        ("notion", "toMarkdown") => services::notion::to_markdown,
        ("supabase", "from") => services::supabase::from,
        ("supabase", "rpc") => services::supabase::rpc,
        ("twilio", "request") => services::twilio::request,
        ("apify", "startRun") => services::apify::start_run,
        ("apify", "runStatus") => services::apify::run_status,
        ("apify", "datasetItems") => services::apify::dataset_items,
        _ => return None,
    };
    Some(f)
}

/// Maps the native libraries host modules load at run time (Tesseract, when installed), for a
/// process about to give up opening files (a confined sandbox worker).
pub fn preload_native_libraries() {
    ocr::preload();
}

/// OCR's language data for a process that cannot open files: where it comes from
/// ([`set_ocr_language_source`]), and how a process that can reads it ([`ocr_language_data`]).
pub use ocr::{
    LanguageSource, language_data as ocr_language_data,
    set_language_source as set_ocr_language_source,
};

/// Whether the native library host module `id` loads at run time is usable on this host:
/// `None` when the module needs nothing beyond this binary, else `Ok(version)` or `Err` with
/// the sentence saying what to install. Loading the library is the check (OCR: Tesseract with
/// its English data, about 100 ms until it first succeeds; a success is remembered).
pub fn library_status(id: &str) -> Option<Result<String, String>> {
    match id {
        "ocr" => Some(ocr::availability()),
        _ => None,
    }
}

/// An export whose result the guest receives packed (see `nodetool_protocol::packed`): the
/// same result as its [`HostFn`], without a `Value` per string.
type PackedFn = fn(&[Value]) -> Result<Packed, HostError>;

/// How the guest receives an export's result packed: written packed as it is made, or made
/// as a `Value` tree (whose shape is only known at the end) and packed on the host's thread.
#[derive(Clone, Copy)]
enum PackedImplementation {
    Direct(PackedFn),
    FromTree(HostFn),
}

/// The packed implementation of `<id>.<export>`, for the exports whose results are large trees
/// of small values.
fn packed_implementation(id: &str, export: &str) -> Option<PackedImplementation> {
    Some(match (id, export) {
        ("csv", "parse") => PackedImplementation::Direct(csv::parse_packed),
        ("xml", "parse") => PackedImplementation::FromTree(xml::parse),
        _ => return None,
    })
}

/// Registry rows without an implementation, and implementations without a row (a test keeps
/// both lists empty for the ids this build serves).
pub fn registry_drift() -> Vec<String> {
    let mut drift = Vec::new();
    for spec in HOST_MODULES {
        for export in spec.exports {
            if implementation(spec.id, export).is_none() {
                drift.push(format!(
                    "{}.{export} is declared but not implemented",
                    spec.id
                ));
            }
        }
    }
    drift.sort();
    drift
}

/// Why a dispatcher could not be built for a resolution (the front end reports it under the
/// run code `host-module-error`; [`std::fmt::Display`] is the sentence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostModuleError {
    /// The resolution names a host id the registry does not have.
    UnknownId { specifier: String, host_id: String },
    /// The id is declared by a package other than its pinned one.
    WrongPack {
        specifier: String,
        host_id: String,
        pinned: &'static str,
    },
}

impl std::fmt::Display for HostModuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostModuleError::UnknownId { specifier, host_id } => write!(
                f,
                "{specifier}: \"{host_id}\" is not a host module NodeTool implements — host modules are first-party only, and a pack cannot bring its own"
            ),
            HostModuleError::WrongPack {
                specifier,
                host_id,
                pinned,
            } => write!(
                f,
                "{specifier}: host module \"{host_id}\" belongs to {pinned}"
            ),
        }
    }
}

impl std::error::Error for HostModuleError {}

/// The per-run dispatcher for host modules.
pub struct HostDispatcher {
    /// Declared specifier -> its registry row.
    declared: HashMap<String, &'static HostModuleSpec>,
}

fn describe(value: &str) -> String {
    format!("{value:?}")
}

impl HostDispatcher {
    /// The dispatcher for the host modules of `resolution`, or `None` when it has none. Refuses
    /// an id NodeTool does not implement and an id declared by a package other than its pinned
    /// one, whatever the resolution claims.
    pub fn for_resolution(
        resolution: &Resolution,
    ) -> Result<Option<Arc<HostDispatcher>>, HostModuleError> {
        let mut declared = HashMap::new();
        for module in &resolution.modules {
            let ResolvedKind::Host { host_id } = &module.kind else {
                continue;
            };
            let specifier = &module.specifier;
            let Some(spec) = host_module(host_id) else {
                return Err(HostModuleError::UnknownId {
                    specifier: specifier.clone(),
                    host_id: host_id.clone(),
                });
            };
            // The pack is read off the specifier, not taken from the resolution's say-so.
            let pack = pack_name_of(specifier);
            if spec.pack_name != pack || module.pack_name != pack {
                return Err(HostModuleError::WrongPack {
                    specifier: specifier.clone(),
                    host_id: host_id.clone(),
                    pinned: spec.pack_name,
                });
            }
            declared.insert(specifier.clone(), spec);
        }
        Ok((!declared.is_empty()).then(|| Arc::new(HostDispatcher { declared })))
    }

    /// Validates one call and returns the implementation to run (packed when `packed` and the
    /// export has one) and the `<id>.<export>` its messages start with.
    fn check(
        &self,
        module_key: &str,
        export: &str,
        packed: bool,
    ) -> Result<(Implementation, String), HostError> {
        let Some(spec) = self.declared.get(module_key) else {
            return Err(HostError::invalid(format!(
                "{} is not a host sandbox module declared by this node",
                describe(module_key)
            )));
        };
        if !spec.exports.contains(&export) {
            return Err(HostError::invalid(format!(
                "{module_key} has no export named {}",
                describe(export)
            )));
        }
        let at = format!("{}.{export}", spec.id);
        if let Some(f) = packed_implementation(spec.id, export).filter(|_| packed) {
            return Ok((Implementation::Packed(f), at));
        }
        let Some(f) = implementation(spec.id, export) else {
            return Err(HostError::internal(format!(
                "{module_key}: {export} has no implementation in this runtime"
            )));
        };
        Ok((Implementation::Value(f), at))
    }
}

/// What a checked call runs.
enum Implementation {
    Value(HostFn),
    Packed(PackedImplementation),
}

impl Dispatcher for HostDispatcher {
    fn call(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        deadline: std::time::Instant,
    ) -> DispatchFuture {
        match self.check(module_key, export, false) {
            Err(e) => Box::pin(std::future::ready(Err(DispatchError {
                message: e.into_message(),
            }))),
            Ok((implementation, at)) => {
                let reply = spawn(implementation, at, args, deadline);
                Box::pin(async move { reply.await.and_then(Reply::into_value) })
            }
        }
    }

    fn call_for_guest(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        deadline: std::time::Instant,
    ) -> ReplyFuture {
        match self.check(module_key, export, true) {
            Err(e) => Box::pin(std::future::ready(Err(DispatchError {
                message: e.into_message(),
            }))),
            Ok((implementation, at)) => spawn(implementation, at, args, deadline),
        }
    }
}

thread_local! {
    /// The host call this thread runs: its `<id>.<export>` and its run's deadline.
    static CALL: RefCell<Option<(String, Instant)>> = const { RefCell::new(None) };
}

/// The deadline of the run whose host call this thread is running (`None` outside a
/// dispatched call, as in a direct call of an implementation). Work that can be long (OCR)
/// stops by it, so it never outlives its run.
pub(crate) fn call_deadline() -> Option<Instant> {
    CALL.with(|call| call.borrow().as_ref().map(|(_, deadline)| *deadline))
}

/// A panic on a host-call thread is a bug in a host module, and the guest gets an error for it
/// (see [`spawn`]); it is logged as one line naming the module and export, never as the
/// default report, whose location and backtrace carry the build machine's paths. Panics
/// anywhere else go to the hook that was installed before.
fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = CALL.with(|call| call.borrow().as_ref().map(|(at, _)| at.clone()));
            let Some(at) = at else {
                return previous(info);
            };
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a non-text panic");
            eprintln!("{}", panic_line(&at, message));
        }));
    });
}

/// The log line of a host module's panic: one line, the message cut to 200 characters with
/// its line breaks and control characters escaped (the message may quote the input).
fn panic_line(at: &str, message: &str) -> String {
    let message: String = message
        .chars()
        .take(200)
        .flat_map(char::escape_debug)
        .collect();
    format!("host module {at} panicked (the guest got an error): {message}")
}

/// Runs the implementation on its own thread, so the run's event loop keeps its deadline (and
/// concurrent calls from one run proceed in parallel). What the answer was made from (the
/// arguments, a tree that was packed) is freed after the answer is handed over, so the guest
/// converts it meanwhile rather than waiting for the frees.
fn spawn(
    implementation: Implementation,
    at: String,
    args: Vec<Value>,
    deadline: Instant,
) -> ReplyFuture {
    install_panic_hook();
    Box::pin(nodetool_runtime::dispatch::on_own_thread(move |deliver| {
        CALL.with(|call| *call.borrow_mut() = Some((at.clone(), deadline)));
        let mut packed_tree: Option<Value> = None;
        let answer =
            run_caught(implementation, &at, &args, &mut packed_tree).map_err(|e| DispatchError {
                message: e.into_message(),
            });
        CALL.with(|call| *call.borrow_mut() = None);
        deliver.send(answer);
        drop(packed_tree);
        drop(args);
    }))
}

/// Runs one implementation on this thread. An implementation that panics is a bug: the guest
/// still gets an error ([`HostErrorCode::Internal`]), the host keeps running. A tree made to be
/// packed is left in `packed_tree`, for the caller to free after handing the answer over.
fn run_caught(
    implementation: Implementation,
    at: &str,
    args: &[Value],
    packed_tree: &mut Option<Value>,
) -> Result<Reply, HostError> {
    std::panic::catch_unwind(AssertUnwindSafe(|| match implementation {
        Implementation::Value(f) => f(args).map(Reply::Value),
        Implementation::Packed(PackedImplementation::Direct(f)) => f(args).map(Reply::Packed),
        Implementation::Packed(PackedImplementation::FromTree(f)) => f(args).map(|tree| {
            let packed = Packed::from_value(&tree);
            *packed_tree = Some(tree);
            Reply::Packed(packed)
        }),
    }))
    .unwrap_or_else(|_| {
        Err(HostError::internal(format!(
            "{at}: the host module failed unexpectedly"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodetool_protocol::catalog::ResolvedModule;
    use std::task::{Context, Poll, Waker};

    fn host(specifier: &str, pack: &str, id: &str) -> ResolvedModule {
        ResolvedModule {
            specifier: specifier.into(),
            pack_name: pack.into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: format!("host:{id}"),
            graph: vec![],
            kind: ResolvedKind::Host { host_id: id.into() },
        }
    }

    fn resolution(modules: Vec<ResolvedModule>) -> Resolution {
        Resolution {
            modules,
            statuses: vec![],
        }
    }

    fn far() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(60)
    }

    fn block_on(f: DispatchFuture) -> Result<Value, DispatchError> {
        let mut f = f;
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn no_host_modules_no_dispatcher() {
        assert!(matches!(
            HostDispatcher::for_resolution(&resolution(vec![])),
            Ok(None)
        ));
    }

    #[test]
    fn forged_resolutions_are_refused() {
        let e = HostDispatcher::for_resolution(&resolution(vec![host(
            "@evil/pack",
            "@evil/pack",
            "csv",
        )]))
        .err();
        assert_eq!(
            e,
            Some(HostModuleError::WrongPack {
                specifier: "@evil/pack".into(),
                host_id: "csv".into(),
                pinned: "@nodetool-ai/sandbox-csv",
            })
        );
        assert_eq!(
            e.map(|e| e.to_string()).as_deref(),
            Some("@evil/pack: host module \"csv\" belongs to @nodetool-ai/sandbox-csv")
        );
        // A resolution that lies about its pack name is refused too.
        let e = HostDispatcher::for_resolution(&resolution(vec![host(
            "@evil/pack",
            "@nodetool-ai/sandbox-csv",
            "csv",
        )]))
        .err();
        assert!(e.is_some_and(|e| e.to_string().contains("belongs to")));
        let e =
            HostDispatcher::for_resolution(&resolution(vec![host("@acme/x", "@acme/x", "shell")]))
                .err();
        assert!(e.is_some_and(|e| {
            matches!(e, HostModuleError::UnknownId { .. })
                && e.to_string()
                    .contains("is not a host module NodeTool implements")
        }));
    }

    fn panics(_: &[Value]) -> Result<Value, HostError> {
        panic!("index out of range\nin /home/builder/src/lib.rs")
    }

    /// With `NODETOOL_PANIC_CHILD` set (by the test below), a host call that panics; otherwise
    /// nothing.
    #[test]
    fn panic_child() {
        if std::env::var_os("NODETOOL_PANIC_CHILD").is_none() {
            return;
        }
        let reply = spawn(
            Implementation::Value(panics),
            "xlsx.parse".into(),
            vec![],
            far(),
        );
        let answer = block_on(Box::pin(
            async move { reply.await.and_then(Reply::into_value) },
        ));
        assert_eq!(
            answer.err().map(|e| e.message).as_deref(),
            Some("xlsx.parse: the host module failed unexpectedly")
        );
    }

    #[test]
    fn a_host_module_panic_is_one_log_line() {
        let Ok(exe) = std::env::current_exe() else {
            panic!("no test executable")
        };
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "tests::panic_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("NODETOOL_PANIC_CHILD", "1")
            .env("RUST_BACKTRACE", "full")
            .output();
        let Ok(out) = out else {
            panic!("child did not run")
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("panicked")).collect();
        assert_eq!(
            lines,
            [
                "host module xlsx.parse panicked (the guest got an error): index out of range\\nin /home/builder/src/lib.rs"
            ]
        );
        // No location, no backtrace.
        assert!(!stderr.contains("lib.rs:"), "{stderr}");
        assert!(!stderr.contains("stack backtrace"), "{stderr}");
    }

    #[test]
    fn calls_are_checked() {
        let d = HostDispatcher::for_resolution(&resolution(vec![host(
            "@nodetool-ai/sandbox-diff",
            "@nodetool-ai/sandbox-diff",
            "diff",
        )]))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("dispatcher"));
        let e = block_on(d.call("@nodetool-ai/sandbox-csv", "parse", vec![], far()))
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("\"@nodetool-ai/sandbox-csv\" is not a host sandbox module declared by this node")
        );
        let e = block_on(d.call("@nodetool-ai/sandbox-diff", "constructor", vec![], far()))
            .err()
            .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("@nodetool-ai/sandbox-diff has no export named \"constructor\"")
        );
        let e = block_on(d.call("@nodetool-ai/sandbox-diff", "__proto__", vec![], far()))
            .err()
            .map(|e| e.message);
        assert!(e.is_some_and(|m| m.contains("has no export named")));
        let ok = block_on(d.call(
            "@nodetool-ai/sandbox-diff",
            "unified",
            vec![Value::String("a\n".into()), Value::String("b\n".into())],
            far(),
        ));
        assert!(matches!(ok, Ok(Value::String(s)) if s.contains("-a\n+b")));
    }
}
