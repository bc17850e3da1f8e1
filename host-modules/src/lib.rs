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

mod csv;
mod diff;
mod html;
pub mod limits;
mod ocr;
mod xlsx;
mod xml;
mod zip;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use nodetool_protocol::catalog::{Resolution, ResolvedKind, pack_name_of};
use nodetool_protocol::host::{HOST_MODULES, HostModuleSpec, host_module};
use nodetool_protocol::packed::Packed;
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::{DispatchError, DispatchFuture, Dispatcher, Reply, ReplyFuture};

/// One host export's implementation: the arguments in, the result or the message out (already
/// prefixed `<id>.<export>: `).
pub type HostFn = fn(&[Value]) -> Result<Value, String>;

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
        _ => return None,
    };
    Some(f)
}

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
type PackedFn = fn(&[Value]) -> Result<Packed, String>;

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

/// Why a dispatcher could not be built for a resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostModuleError(pub String);

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
                return Err(HostModuleError(format!(
                    "{specifier}: \"{host_id}\" is not a host module NodeTool implements — host modules are first-party only, and a pack cannot bring its own"
                )));
            };
            // The pack is read off the specifier, not taken from the resolution's say-so.
            let pack = pack_name_of(specifier);
            if spec.pack_name != pack || module.pack_name != pack {
                return Err(HostModuleError(format!(
                    "{specifier}: host module \"{host_id}\" belongs to {}",
                    spec.pack_name
                )));
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
    ) -> Result<(Implementation, String), String> {
        let Some(spec) = self.declared.get(module_key) else {
            return Err(format!(
                "{} is not a host sandbox module declared by this node",
                describe(module_key)
            ));
        };
        if !spec.exports.contains(&export) {
            return Err(format!(
                "{module_key} has no export named {}",
                describe(export)
            ));
        }
        let at = format!("{}.{export}", spec.id);
        if let Some(f) = packed_implementation(spec.id, export).filter(|_| packed) {
            return Ok((Implementation::Packed(f), at));
        }
        let Some(f) = implementation(spec.id, export) else {
            return Err(format!(
                "{module_key}: {export} has no implementation in this runtime"
            ));
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
        _deadline: std::time::Instant,
    ) -> DispatchFuture {
        match self.check(module_key, export, false) {
            Err(message) => Box::pin(std::future::ready(Err(DispatchError { message }))),
            Ok((implementation, at)) => {
                let reply = spawn(implementation, at, args);
                Box::pin(async move { reply.await.and_then(Reply::into_value) })
            }
        }
    }

    fn call_for_guest(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        _deadline: std::time::Instant,
    ) -> ReplyFuture {
        match self.check(module_key, export, true) {
            Err(message) => Box::pin(std::future::ready(Err(DispatchError { message }))),
            Ok((implementation, at)) => spawn(implementation, at, args),
        }
    }
}

/// Runs the implementation on its own thread, so the run's event loop keeps its deadline (and
/// concurrent calls from one run proceed in parallel). What the answer was made from (the
/// arguments, a tree that was packed) is freed after the answer is handed over, so the guest
/// converts it meanwhile rather than waiting for the frees.
fn spawn(implementation: Implementation, at: String, args: Vec<Value>) -> ReplyFuture {
    Box::pin(nodetool_runtime::dispatch::on_own_thread(move |deliver| {
        let mut packed_tree: Option<Value> = None;
        // An implementation that panics is a bug; the guest still gets an error, the host keeps
        // running.
        let answer = std::panic::catch_unwind(AssertUnwindSafe(|| match implementation {
            Implementation::Value(f) => f(&args).map(Reply::Value),
            Implementation::Packed(PackedImplementation::Direct(f)) => f(&args).map(Reply::Packed),
            Implementation::Packed(PackedImplementation::FromTree(f)) => f(&args).map(|tree| {
                let packed = Packed::from_value(&tree);
                packed_tree = Some(tree);
                Reply::Packed(packed)
            }),
        }))
        .unwrap_or_else(|_| Err(format!("{at}: the host module failed unexpectedly")))
        .map_err(|message| DispatchError { message });
        deliver.send(answer);
        drop(packed_tree);
        drop(args);
    }))
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
        assert!(e.is_some_and(|e| e.0.contains("belongs to @nodetool-ai/sandbox-csv")));
        // A resolution that lies about its pack name is refused too.
        let e = HostDispatcher::for_resolution(&resolution(vec![host(
            "@evil/pack",
            "@nodetool-ai/sandbox-csv",
            "csv",
        )]))
        .err();
        assert!(e.is_some_and(|e| e.0.contains("belongs to")));
        let e =
            HostDispatcher::for_resolution(&resolution(vec![host("@acme/x", "@acme/x", "shell")]))
                .err();
        assert!(e.is_some_and(|e| e.0.contains("is not a host module NodeTool implements")));
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
