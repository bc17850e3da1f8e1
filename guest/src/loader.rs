//! The loader: the only authority on what a run may import.
//!
//! A run serves exactly its resolved specifiers, the files of each pack's graph to relative
//! imports from inside that pack, and the private bridges to the generated facades. The
//! resolver is consulted for every request, including a second import of a module already
//! loaded, so a cache hit never bypasses it. Once the entry's static graph has been resolved,
//! the resolver is locked: any later request is a dynamic `import()`, refused even for a
//! declared specifier.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use nodetool_jssource::relative::{is_relative, join_relative, relative_candidates};
use nodetool_protocol::catalog::{FileContent, ResolvedKind, ResolvedModule};
use nodetool_protocol::facade::{
    HOST_BRIDGE_SPECIFIER, WASM_BRIDGE_SPECIFIER, host_facade_source, wasm_facade_source,
};
use nodetool_protocol::host::host_module;
use nodetool_protocol::run::RunErrorCode;
use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Ctx, Exception, Module};

use crate::bridge::{HostBridge, WasmBridge};
use crate::compile::BytecodeCache;
use crate::engine::load_module;

const MODULE_PREFIX: &str = "nodetool-sandbox:";
/// Refusals remembered per run (the most recent ones).
const MAX_REMEMBERED_DENIALS: usize = 64;

/// What a module name the engine holds stands for.
#[derive(Debug, Clone)]
pub(crate) enum ModuleBody {
    /// A JS file of a pack's graph.
    PackFile {
        pack: String,
        file_id: String,
        source: Arc<str>,
    },
    /// A generated facade in front of a host or WASM module.
    Facade { bridge: Bridge, source: String },
}

/// The two private bridges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bridge {
    Host,
    Wasm,
}

impl Bridge {
    fn specifier(self) -> &'static str {
        match self {
            Bridge::Host => HOST_BRIDGE_SPECIFIER,
            Bridge::Wasm => WASM_BRIDGE_SPECIFIER,
        }
    }

    fn facade_kind(self) -> &'static str {
        match self {
            Bridge::Host => "host",
            Bridge::Wasm => "WASM",
        }
    }
}

/// A refusal the loader made, remembered so the run's outcome can name it even after the error
/// has travelled through the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denial {
    pub code: RunErrorCode,
    pub specifier: String,
    pub message: String,
}

/// The run's module table and resolver state, shared by the resolver and the loader.
pub(crate) struct ModuleTable {
    /// User-facing specifier to engine module name.
    specifiers: HashMap<String, String>,
    /// Engine module name to body.
    bodies: HashMap<String, ModuleBody>,
    /// Set once the entry's static graph has been resolved.
    pub locked: Cell<bool>,
    pub denials: RefCell<Vec<Denial>>,
    cache: Arc<BytecodeCache>,
    /// A compile failure inside a pack module, kept for the outcome.
    pub compile_failures: RefCell<Vec<String>>,
}

fn pack_file_name(pack: &str, file_id: &str) -> String {
    format!("{MODULE_PREFIX}{pack}|{file_id}")
}

impl ModuleTable {
    pub(crate) fn new(modules: &[ResolvedModule], cache: Arc<BytecodeCache>) -> ModuleTable {
        let mut specifiers = HashMap::new();
        let mut bodies = HashMap::new();
        for m in modules {
            let pack = m.pack_name.as_str();
            for file in &m.graph {
                if let FileContent::Js { source } = &file.content {
                    bodies.insert(
                        pack_file_name(pack, &file.id),
                        ModuleBody::PackFile {
                            pack: pack.to_string(),
                            file_id: file.id.clone(),
                            source: Arc::clone(source),
                        },
                    );
                }
            }
            let (name, facade) = match &m.kind {
                ResolvedKind::Js => (pack_file_name(pack, &m.module_id), None),
                ResolvedKind::Wasm { wasm } => (
                    pack_file_name(pack, &format!("wasm:{}", m.module_id)),
                    Some((
                        Bridge::Wasm,
                        wasm_facade_source(&m.specifier, &wasm.exports),
                    )),
                ),
                ResolvedKind::Host { host_id } => {
                    // Exports come from the registry, never from the resolution.
                    let exports = host_module(host_id).map(|h| h.exports).unwrap_or_default();
                    (
                        pack_file_name(pack, &format!("host:{host_id}")),
                        Some((Bridge::Host, host_facade_source(&m.specifier, exports))),
                    )
                }
            };
            if let Some((bridge, source)) = facade {
                bodies.insert(name.clone(), ModuleBody::Facade { bridge, source });
            }
            specifiers.insert(m.specifier.clone(), name);
        }
        ModuleTable {
            specifiers,
            bodies,
            locked: Cell::new(false),
            denials: RefCell::new(Vec::new()),
            cache,
            compile_failures: RefCell::new(Vec::new()),
        }
    }

    fn deny<'js>(
        &self,
        ctx: &Ctx<'js>,
        code: RunErrorCode,
        specifier: &str,
        message: String,
    ) -> rquickjs::Error {
        let mut denials = self.denials.borrow_mut();
        // A body may refuse-and-retry in a loop; only the recent refusals are needed to name
        // an uncaught one, so the record stays bounded.
        if denials.len() >= MAX_REMEMBERED_DENIALS {
            denials.remove(0);
        }
        denials.push(Denial {
            code,
            specifier: specifier.to_string(),
            message: message.clone(),
        });
        drop(denials);
        Exception::throw_message(ctx, &message)
    }

    fn resolve_name(&self, base: &str, name: &str) -> Result<String, (RunErrorCode, String)> {
        if self.locked.get() {
            return Err((
                RunErrorCode::DynamicImportDenied,
                format!("dynamic import() is not allowed in the sandbox (requested \"{name}\")"),
            ));
        }
        for bridge in [Bridge::Host, Bridge::Wasm] {
            if name == bridge.specifier() {
                return match self.bodies.get(base) {
                    Some(ModuleBody::Facade { bridge: b, .. }) if *b == bridge => {
                        Ok(name.to_string())
                    }
                    _ => Err((
                        RunErrorCode::ModuleDenied,
                        format!(
                            "\"{name}\" is private to the sandbox's generated {} facades and cannot be imported",
                            bridge.facade_kind()
                        ),
                    )),
                };
            }
        }
        if let Some(target) = self.specifiers.get(name) {
            return Ok(target.clone());
        }
        if is_relative(name)
            && let Some(ModuleBody::PackFile { pack, file_id, .. }) = self.bodies.get(base)
        {
            let found = join_relative(file_id, name).and_then(|target| {
                relative_candidates(&target)
                    .into_iter()
                    .map(|candidate| pack_file_name(pack, &candidate))
                    .find(|candidate| {
                        matches!(
                            self.bodies.get(candidate),
                            Some(ModuleBody::PackFile { .. })
                        )
                    })
            });
            return found.ok_or_else(|| {
                (
                    RunErrorCode::ModuleDenied,
                    format!("\"{name}\" is not a file of the {pack} sandbox package"),
                )
            });
        }
        Err((
            RunErrorCode::ModuleDenied,
            format!(
                "\"{name}\" is not a sandbox package this run serves — only an installed pack the code imports resolves"
            ),
        ))
    }
}

/// The resolver half, holding the shared table.
pub(crate) struct SandboxResolver(pub Rc<ModuleTable>);

impl Resolver for SandboxResolver {
    fn resolve<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        self.0
            .resolve_name(base, name)
            .map_err(|(code, message)| self.0.deny(ctx, code, name, message))
    }
}

/// The loader half: serves only names the resolver produced.
pub(crate) struct SandboxLoader(pub Rc<ModuleTable>);

impl Loader for SandboxLoader {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        let table = &self.0;
        match name {
            HOST_BRIDGE_SPECIFIER => {
                return Module::declare_def::<HostBridge, _>(ctx.clone(), name);
            }
            WASM_BRIDGE_SPECIFIER => {
                return Module::declare_def::<WasmBridge, _>(ctx.clone(), name);
            }
            _ => {}
        }
        let compiled = match table.bodies.get(name) {
            Some(ModuleBody::PackFile { source, .. }) => {
                table.cache.get_or_compile_shared(name, source)
            }
            Some(ModuleBody::Facade { source, .. }) => table.cache.get_or_compile(name, source),
            None => {
                return Err(Exception::throw_message(
                    ctx,
                    &format!("Module \"{name}\" is not available"),
                ));
            }
        };
        match compiled {
            Ok(bytecode) => load_module(ctx, &bytecode),
            Err(e) => {
                let shown = name
                    .strip_prefix(MODULE_PREFIX)
                    .unwrap_or(name)
                    .replace('|', "/");
                let message = format!("{shown}: {}", e.message);
                table.compile_failures.borrow_mut().push(message.clone());
                Err(Exception::throw_syntax(ctx, &message))
            }
        }
    }
}
