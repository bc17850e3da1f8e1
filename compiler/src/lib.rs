//! `nodetool-compiler`: turns a config-only npm manifest entry (`{"kind": "js", "npm": ...}`)
//! into an admitted guest module, or a named skip.
//!
//! It owns the pipeline [`Compiler::compile`] runs, in order: the cache (a hit re-hashes every
//! recorded input first); bundling with rolldown as a library (platform neutral, conditions
//! `import`, `module`, `default`, main fields `module`, `main`, no externals, no minification,
//! one self-contained ES module whose default is the package's, else the namespace of its
//! named exports; Node builtins become stubs that throw, judged by the rules in `bundle.rs`,
//! with a retry under the `browser` condition); the 1 MiB cap; the scope-aware scan on oxc's
//! semantic analysis (dynamic or leftover imports refused; globals the guest lacks and code
//! from strings as warnings); the admission probe, which imports the bundle in a
//! capability-free guest, with the standard globals and hardening of every run, under tight
//! limits and records its export names; and the write of the outcome to the content-addressed
//! [`Cache`], which is also the synchronous `nodetool_runtime::CompiledLookup` discovery
//! reads. [`npm_entries`] lists the npm entries on a search path for `nodetool packs compile`
//! and compile-on-first-use.
//!
//! A library is refused only when it cannot initialize in the guest (the probe) or by a hard
//! rule: a builtin it cannot run without, a dynamic import, the size cap, a bundle that does
//! not build. Every refusal is a skip with a stable code (`npm-module-builtin-import`,
//! `npm-module-unresolved`, `npm-module-bundle-failed`, `npm-module-too-large`,
//! `npm-module-scan-rejected`, `npm-module-probe-failed`), never a panic of the host and never
//! an error return. (`npm-module-forbidden-global` is no longer produced: such reads are
//! warnings; the code stays for entries cached by compiler version 1.)
//!
//! Architecture invariants: admission grants bundled code no capability (no fetch, workspace,
//! secrets or dispatcher; only the bundle resolves); admission proves initialization only, the
//! runtime loader stays authoritative; the cache is keyed by content, never by
//! `name@version`, and no absolute path enters a key or a message.

mod bundle;
mod cache;
mod entries;
mod probe;
mod scan;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_guest::Sandbox;
use nodetool_protocol::catalog::StatusCode;
use nodetool_protocol::limits::NPM_BUNDLE_BYTES;
use nodetool_runtime::{CompileRequest, CompiledNpmModule};

pub use cache::Cache;
pub use entries::{NpmEntry, npm_entries};
pub use probe::{PROBE_LIMITS, PROBE_SPECIFIER};
pub use scan::FORBIDDEN_GLOBALS;

/// The compiler contract version: part of every cache key and every module digest. Bump it
/// when the pipeline's output or verdicts change for the same input.
pub const COMPILER_VERSION: &str = "2";

/// The rolldown version the workspace pins (checked against Cargo.lock by a test).
pub const ROLLDOWN_VERSION: &str = "1.2.5";

/// The normalized compile options, as they enter the options digest and the cache key.
pub(crate) fn normalized_options() -> serde_json::Value {
    serde_json::json!({
        "bundler": "rolldown",
        "bundle": true,
        "format": "esm",
        "platform": "neutral",
        "conditions": bundle::CONDITIONS,
        "mainFields": bundle::MAIN_FIELDS,
        "browserRetry": {
            "conditions": bundle::BROWSER_CONDITIONS,
            "mainFields": bundle::BROWSER_MAIN_FIELDS,
            "aliasFields": ["browser"],
        },
        "external": [],
        "builtins": "stubs that throw; refused when reachable outside try",
        "minify": false,
        "treeshake": true,
        "codeSplitting": false,
        "comments": { "legal": false, "annotation": true, "jsdoc": false },
        "entry": "export * and the default export, else the namespace as default; a default-only module's keys as named exports",
        "debugComments": false,
        "define": bundle::DEFINES.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "browserRetryWhenTheProbeFails": true,
        "browserRetryWhenNodeGlobalsAreRead": true,
        "maxBytes": NPM_BUNDLE_BYTES,
        "forbiddenGlobals": FORBIDDEN_GLOBALS.as_slice(),
        "probe": {
            "timeoutMs": PROBE_LIMITS.timeout.as_millis() as u64,
            "memoryBytes": PROBE_LIMITS.memory_bytes,
            "stackBytes": PROBE_LIMITS.stack_bytes,
            "logLines": PROBE_LIMITS.log_entries,
            "logChars": PROBE_LIMITS.log_chars,
        },
    })
}

/// A refusal: the stable code and the message (which leads with the npm name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code.
    pub code: StatusCode,
    /// The message.
    pub message: String,
    /// Whether the verdict may change without any input changing (a deadline under load, an
    /// unexpected bundler failure): such a refusal is reported but never cached.
    pub transient: bool,
}

impl Refusal {
    pub(crate) fn new(code: StatusCode, message: String) -> Refusal {
        Refusal {
            code,
            message,
            transient: false,
        }
    }
}

/// A step of one compile, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the cache (re-hashing the recorded inputs).
    Cache,
    /// Bundling with rolldown.
    Bundle,
    /// The forbidden-global scan.
    Scan,
    /// The admission probe in the guest.
    Probe,
    /// Writing the outcome to the cache.
    Store,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 5] = [
        Stage::Cache,
        Stage::Bundle,
        Stage::Scan,
        Stage::Probe,
        Stage::Store,
    ];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Cache => "checking the cache",
            Stage::Bundle => "bundling",
            Stage::Scan => "scanning",
            Stage::Probe => "probing",
            Stage::Store => "storing",
        }
    }
}

/// How a compile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Bundled, scanned and probed now.
    Compiled,
    /// Served from the cache.
    Cached,
    /// Refused (now or from the cache): see the report's code and message.
    Skipped,
}

impl Outcome {
    /// `compiled`, `cached` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Compiled => "compiled",
            Outcome::Cached => "cached",
            Outcome::Skipped => "skipped",
        }
    }
}

/// What one compile produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// What discovery will be told.
    pub module: CompiledNpmModule,
    /// The sorted export names (admitted modules).
    pub exports: Vec<String>,
    /// The cache could not be written (the outcome is still reported; discovery will not see
    /// it until a compile stores it).
    pub store_error: Option<String>,
    /// How long each stage that ran took, in order.
    pub timings: Vec<(Stage, Duration)>,
}

impl Report {
    fn refused(refusal: Refusal) -> Report {
        Report {
            outcome: Outcome::Skipped,
            module: CompiledNpmModule::Refused {
                code: refusal.code,
                message: refusal.message,
            },
            exports: Vec::new(),
            store_error: None,
            timings: Vec::new(),
        }
    }

    /// The bundle size, for admitted modules.
    pub fn bytes(&self) -> Option<usize> {
        match &self.module {
            CompiledNpmModule::Admitted(a) => Some(a.source.len()),
            CompiledNpmModule::Refused { .. } => None,
        }
    }

    /// The skip code, for refused modules.
    pub fn code(&self) -> Option<StatusCode> {
        match &self.module {
            CompiledNpmModule::Refused { code, .. } => Some(*code),
            CompiledNpmModule::Admitted(_) => None,
        }
    }

    /// The skip message, or the admitted module's first warning.
    pub fn message(&self) -> Option<&str> {
        match &self.module {
            CompiledNpmModule::Refused { message, .. } => Some(message),
            CompiledNpmModule::Admitted(a) => a.warnings.first().map(String::as_str),
        }
    }
}

/// The compiler: a cache, an async runtime for rolldown, and a guest for the probe.
pub struct Compiler {
    cache: Cache,
    runtime: tokio::runtime::Runtime,
    sandbox: Sandbox,
}

impl Compiler {
    /// A compiler storing its outcomes under `cache`.
    pub fn new(cache: Cache) -> Result<Compiler, String> {
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("nodetool-compiler")
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the compiler's runtime: {e}"))?;
        Ok(Compiler {
            cache,
            runtime,
            sandbox: Sandbox::new(),
        })
    }

    /// The cache the compiler writes (and discovery reads).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Compiles one npm entry, reporting each stage to `progress` as it starts.
    pub fn compile(&self, request: &CompileRequest<'_>, progress: &mut dyn FnMut(Stage)) -> Report {
        let mut timings: Vec<(Stage, Duration)> = Vec::new();
        let mut current: Option<(Stage, Instant)> = None;
        let mut report = {
            let mut enter = |stage: Stage| {
                if let Some((previous, started)) = current.replace((stage, Instant::now())) {
                    timings.push((previous, started.elapsed()));
                }
                progress(stage);
            };
            self.compile_stages(request, &mut enter)
        };
        if let Some((last, started)) = current {
            timings.push((last, started.elapsed()));
        }
        report.timings = timings;
        report
    }

    fn compile_stages(
        &self,
        request: &CompileRequest<'_>,
        progress: &mut dyn FnMut(Stage),
    ) -> Report {
        let npm = request.npm;
        let Ok(pack_dir) = std::fs::canonicalize(request.pack_dir) else {
            return Report::refused(Refusal {
                transient: true,
                ..Refusal::new(
                    StatusCode::NpmModuleBundleFailed,
                    format!("{npm}: the pack directory cannot be read"),
                )
            });
        };
        progress(Stage::Cache);
        if let Some(entry) = self.cache.read(&pack_dir, npm) {
            return Report::from_entry(&entry, Outcome::Cached);
        }
        progress(Stage::Bundle);
        let bundled = bundle::bundle(&self.runtime, &pack_dir, npm);
        let mut inputs = cache::records(&bundled.inputs);
        let mut resolution = cache::records(&bundled.resolution);
        // The same content compiled from another directory: no need to scan and probe again.
        let key = cache::key_of(npm, &inputs, &resolution);
        if let Some(entry) = self.cache.load_entry(&key) {
            let mut report = Report::from_entry(&entry, Outcome::Cached);
            report.store_error = self.cache.point(&pack_dir, npm, &key).err();
            return report;
        }
        let was_browser = bundled.browser;
        let mut browser_used = was_browser;
        let bundle_warnings = bundled.warnings;
        let first_source = bundled.result.as_ref().ok().cloned();
        let mut verdict = bundled
            .result
            .and_then(|source| self.admit(npm, source, progress))
            .map(|(source, probed, warnings)| {
                let mut all = bundle_warnings;
                all.extend(warnings);
                (source, probed, all)
            });
        // A default build that does not initialize in the guest: its browser build may.
        if let Err(refusal) = &verdict
            && refusal.code == StatusCode::NpmModuleProbeFailed
            && !refusal.transient
            && !was_browser
        {
            let why = refusal.message.clone();
            let browser = bundle::bundle_browser(&self.runtime, &pack_dir, npm);
            if let Ok(source) = browser.result
                && Some(&source) != first_source.as_ref()
                && let Ok((source, probed, warnings)) = self.admit(npm, source, progress)
            {
                let mut all = vec![format!(
                    "{npm} was bundled with the browser condition: its default entry does not initialize in the guest ({why})"
                )];
                all.extend(browser.warnings);
                all.extend(warnings);
                verdict = Ok((source, probed, all));
                browser_used = true;
                inputs = cache::records(&browser.inputs);
                resolution = cache::records(&browser.resolution);
            }
        }
        // A default build that reads Node's globals (Buffer, process, ...) is a Node build: the
        // browser build is kept instead when it reads none.
        let node_reads = |warnings: &[String]| -> Vec<String> {
            let mut names: Vec<String> = warnings
                .iter()
                .filter_map(|w| scan::node_global_read(npm, w))
                .map(str::to_string)
                .collect();
            names.dedup();
            names
        };
        if !browser_used
            && let Ok((_, _, warnings)) = &verdict
            && let names = node_reads(warnings)
            && !names.is_empty()
        {
            let browser = bundle::bundle_browser(&self.runtime, &pack_dir, npm);
            if let Ok(source) = browser.result
                && Some(&source) != first_source.as_ref()
                && let Ok((source, probed, warnings)) = self.admit(npm, source, progress)
                && node_reads(&warnings).is_empty()
            {
                let mut all = vec![format!(
                    "{npm} was bundled with the browser condition: its default entry reads Node's {}",
                    names.join(", ")
                )];
                all.extend(browser.warnings);
                all.extend(warnings);
                verdict = Ok((source, probed, all));
                inputs = cache::records(&browser.inputs);
                resolution = cache::records(&browser.resolution);
                browser_used = true;
            }
        }
        let verdict = verdict.map(|admitted| {
            self.with_named_exports(&pack_dir, npm, browser_used, admitted, progress)
        });
        progress(Stage::Store);
        let stored = match &verdict {
            Ok((source, exports, warnings)) => cache::Stored::Admitted {
                source_sha256: nodetool_protocol::hex::sha256_hex(source.as_bytes()),
                source: source.to_string(),
                exports: exports.clone(),
                warnings: warnings.clone(),
            },
            Err(refusal) => cache::Stored::Refused {
                code: refusal.code,
                message: refusal.message.clone(),
            },
        };
        let transient = verdict.as_ref().err().is_some_and(|r| r.transient);
        let entry = cache::Entry::new(npm, inputs, resolution, stored);
        let store_error = if transient {
            None
        } else {
            self.cache.write(&pack_dir, npm, &entry).err()
        };
        let mut report = match verdict {
            Ok(_) => Report::from_entry(&entry, Outcome::Compiled),
            Err(refusal) => Report::refused(refusal),
        };
        report.store_error = store_error;
        report
    }

    /// The size cap, the scan and the probe.
    #[allow(clippy::type_complexity)]
    fn admit(
        &self,
        npm: &str,
        source: String,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<(Arc<str>, probe::Probed, Vec<String>), Refusal> {
        let size = source.len() as u64;
        if size > NPM_BUNDLE_BYTES {
            return Err(Refusal::new(
                StatusCode::NpmModuleTooLarge,
                format!(
                    "{npm} bundles to {size} bytes, over the {NPM_BUNDLE_BYTES} byte sandbox module cap"
                ),
            ));
        }
        progress(Stage::Scan);
        // The parser and semantic analysis see untrusted text: a panic in them is a skip.
        let warnings = std::panic::catch_unwind(|| scan::scan_bundle(npm, &source))
            .unwrap_or_else(|_| {
                Err(Refusal::new(
                    StatusCode::NpmModuleScanRejected,
                    format!("{npm}: the scan failed unexpectedly"),
                ))
            })?;
        progress(Stage::Probe);
        let source: Arc<str> = source.into();
        let probed = probe::probe(&self.sandbox, npm, Arc::clone(&source))?;
        Ok((source, probed, warnings))
    }

    /// A module whose only export is its default (CommonJS, or an ES module exporting one
    /// object): bundled again with the default's keys as named exports, as Node's CommonJS
    /// interop offers them, when that bundle passes too; otherwise as it was.
    #[allow(clippy::type_complexity)]
    fn with_named_exports(
        &self,
        pack_dir: &Path,
        npm: &str,
        browser: bool,
        admitted: (Arc<str>, probe::Probed, Vec<String>),
        progress: &mut dyn FnMut(Stage),
    ) -> (Arc<str>, Vec<String>, Vec<String>) {
        let (source, probed, warnings) = admitted;
        let names: Vec<String> = probed
            .default_keys
            .iter()
            .filter(|k| bundle::is_plain_identifier(k))
            .cloned()
            .collect();
        if probed.exports != ["default"] || names.is_empty() {
            return (source, probed.exports, warnings);
        }
        let named = bundle::bundle_named(&self.runtime, pack_dir, npm, browser, &names);
        if let Ok(named_source) = named.result
            && let Ok((named_source, named_probed, named_warnings)) =
                self.admit(npm, named_source, progress)
            && named_probed.exports.len() > 1
        {
            // The scan of the second bundle says what the first did (same code, another entry).
            let _ = named_warnings;
            return (named_source, named_probed.exports, warnings);
        }
        (source, probed.exports, warnings)
    }

    /// Looks `request` up in the cache without compiling (the re-hash included).
    pub fn cached(&self, request: &CompileRequest<'_>) -> Option<Report> {
        let dir = std::fs::canonicalize(request.pack_dir).ok()?;
        self.cache
            .read(&dir, request.npm)
            .map(|e| Report::from_entry(&e, Outcome::Cached))
    }
}

impl Report {
    fn from_entry(entry: &cache::Entry, outcome: Outcome) -> Report {
        let module = entry.module();
        let (outcome, exports) = match &entry.stored {
            cache::Stored::Admitted { exports, .. } => (outcome, exports.clone()),
            cache::Stored::Refused { .. } => (Outcome::Skipped, Vec::new()),
        };
        Report {
            outcome,
            module,
            exports,
            store_error: None,
            timings: Vec::new(),
        }
    }

    /// How long `stage` took, when it ran.
    pub fn time_of(&self, stage: Stage) -> Option<Duration> {
        self.timings
            .iter()
            .find(|(s, _)| *s == stage)
            .map(|(_, d)| *d)
    }

    /// The whole compile's duration.
    pub fn total_time(&self) -> Duration {
        self.timings.iter().map(|(_, d)| *d).sum()
    }
}

/// The default cache root under a cache home (`$XDG_CACHE_HOME`, or `$HOME/.cache`).
pub fn cache_root(cache_home: &Path) -> std::path::PathBuf {
    cache_home.join("nodetool").join("sandbox-modules")
}
