//! Source to bytecode, outside the sandbox.
//!
//! Each thread that runs guests keeps one eval-capable *compiler* runtime whose only job is to
//! compile module source into bytecode; nothing it compiles is ever evaluated there. Sandbox
//! contexts are built without the `Eval` intrinsic, so they can only load what this module
//! produced. Pack module bytecode is cached per process keyed by the SHA-256 of (module name,
//! source), so a pack module is compiled once and loaded into every fresh context; user code is
//! compiled per run and never cached.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Context, Ctx, Module, Runtime, WriteOptions};
use sha2::{Digest as _, Sha256};

/// Compiles before the compiler runtime is rebuilt: QuickJS keeps every module definition a
/// context ever compiled, so a long-lived compiler is recycled to bound its memory.
const COMPILES_PER_COMPILER: usize = 2_000;

/// A compile failure with the engine's position (1-based), if it reported one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompileError {
    pub message: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// Accepts every import while compiling: compile-time resolution only has to find *a* module
/// so the engine can record the request; the sandbox's own resolver decides what it really is.
struct AnyName;

impl Resolver for AnyName {
    fn resolve<'js>(
        &mut self,
        _: &Ctx<'js>,
        _: &str,
        name: &str,
        _: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        Ok(format!("compile-stub:{name}"))
    }
}

impl Loader for AnyName {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        Module::declare(ctx.clone(), name, "")
    }
}

struct Compiler {
    _runtime: Runtime,
    context: Context,
    compiles: usize,
}

impl Compiler {
    fn new() -> rquickjs::Result<Compiler> {
        let runtime = Runtime::new()?;
        runtime.set_loader(AnyName, AnyName);
        let context = Context::full(&runtime)?;
        Ok(Compiler {
            _runtime: runtime,
            context,
            compiles: 0,
        })
    }
}

thread_local! {
    static COMPILER: RefCell<Option<Compiler>> = const { RefCell::new(None) };
}

/// Compiles `source` as an ES module named `name` into bytecode.
pub(crate) fn compile_module(name: &str, source: &str) -> Result<Vec<u8>, CompileError> {
    with_compiler(|ctx| {
        let module = Module::declare(ctx.clone(), name, source).map_err(|e| exception(&ctx, e))?;
        module
            .write(WriteOptions::default())
            .map_err(|e| exception(&ctx, e))
    })
}

/// Compiles `source` as strict global script code into bytecode.
pub(crate) fn compile_script(name: &str, source: &str) -> Result<Vec<u8>, CompileError> {
    with_compiler(|ctx| {
        crate::engine::compile_script(&ctx, name, source).map_err(|e| exception(&ctx, e))
    })
}

fn with_compiler<T>(f: impl FnOnce(Ctx<'_>) -> Result<T, CompileError>) -> Result<T, CompileError> {
    COMPILER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot
            .as_ref()
            .is_none_or(|c| c.compiles >= COMPILES_PER_COMPILER)
        {
            *slot = None; // drop the old runtime before building its replacement
            *slot = Some(Compiler::new().map_err(|e| CompileError {
                message: format!("the compiler runtime could not start: {e}"),
                line: None,
                column: None,
            })?);
        }
        let Some(compiler) = slot.as_mut() else {
            return Err(CompileError {
                message: "the compiler runtime is unavailable".into(),
                line: None,
                column: None,
            });
        };
        compiler.compiles += 1;
        compiler.context.with(f)
    })
}

fn exception(ctx: &Ctx<'_>, error: rquickjs::Error) -> CompileError {
    if !error.is_exception() {
        return CompileError {
            message: error.to_string(),
            line: None,
            column: None,
        };
    }
    let caught = ctx.catch();
    let Some(object) = caught.as_object() else {
        let message = caught
            .as_string()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| error.to_string());
        return CompileError {
            message,
            line: None,
            column: None,
        };
    };
    let name: String = object.get("name").unwrap_or_else(|_| "Error".into());
    let message: String = object.get("message").unwrap_or_default();
    let line: Option<i32> = object.get("lineNumber").ok();
    let column: Option<i32> = object.get("columnNumber").ok();
    CompileError {
        message: format!("{name}: {message}"),
        line: line.and_then(|l| u32::try_from(l).ok()),
        column: column.and_then(|c| u32::try_from(c).ok()),
    }
}

/// The per-process bytecode cache for pack modules.
#[derive(Default)]
pub(crate) struct BytecodeCache {
    /// SHA-256 of (name, source) to bytecode: one compile per distinct module text.
    entries: Mutex<HashMap<[u8; 32], Arc<[u8]>>>,
    /// The same answers keyed by the address of a catalog's shared source: a module a catalog
    /// serves run after run is found without hashing its text again. Each entry holds the
    /// source, so an address is never reused while it is a key.
    by_source: Mutex<HashMap<usize, SourceAlias>>,
    prelude: std::sync::OnceLock<Result<Arc<[u8]>, CompileError>>,
}

struct SourceAlias {
    source: Arc<str>,
    name: String,
    bytecode: Arc<[u8]>,
}

/// Entries either map holds before it is emptied (a soft reload can retire whole catalogs; the
/// cache must not keep every old version alive).
const MAX_CACHE_ENTRIES: usize = 4_096;

impl BytecodeCache {
    /// The bytecode of the hardening's one script (`harden::SAMPLES`), compiled once per
    /// process.
    pub(crate) fn prelude(&self, name: &str, source: &str) -> Result<Arc<[u8]>, CompileError> {
        self.prelude
            .get_or_init(|| compile_script(name, source).map(Arc::from))
            .clone()
    }

    /// The bytecode for (name, source), compiling on first use.
    /// The bytecode for a catalog-shared source under `name`, compiling on first use.
    pub(crate) fn get_or_compile_shared(
        &self,
        name: &str,
        source: &Arc<str>,
    ) -> Result<Arc<[u8]>, CompileError> {
        let address = Arc::as_ptr(source).cast::<u8>() as usize;
        {
            let aliases = self
                .by_source
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(alias) = aliases.get(&address)
                && Arc::ptr_eq(&alias.source, source)
                && alias.name == name
            {
                return Ok(Arc::clone(&alias.bytecode));
            }
        }
        let bytecode = self.get_or_compile(name, source)?;
        let mut aliases = self
            .by_source
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if aliases.len() >= MAX_CACHE_ENTRIES {
            aliases.clear();
        }
        aliases.insert(
            address,
            SourceAlias {
                source: Arc::clone(source),
                name: name.to_string(),
                bytecode: Arc::clone(&bytecode),
            },
        );
        Ok(bytecode)
    }

    /// The bytecode for (name, source), compiling on first use.
    pub(crate) fn get_or_compile(
        &self,
        name: &str,
        source: &str,
    ) -> Result<Arc<[u8]>, CompileError> {
        let mut hasher = Sha256::new();
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(source.as_bytes());
        let key: [u8; 32] = hasher.finalize().into();
        if let Some(hit) = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(hit));
        }
        let bytes: Arc<[u8]> = compile_module(name, source)?.into();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_CACHE_ENTRIES {
            entries.clear();
        }
        entries.insert(key, Arc::clone(&bytes));
        Ok(bytes)
    }
}
