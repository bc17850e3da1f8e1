//! `nodetool-runtime`: the catalog contract every consumer holds, and the handle it swaps in.
//!
//! It owns [`SandboxModuleCatalog`], the read-only interface split by consumer — summaries for
//! the UI and prompt tier, resolution for the loader, diagnostics for `packs list` and doctor
//! views, skill disclosure for agents, and asynchronous delivery for the browser route — plus
//! [`CatalogHandle`], whose contents swap atomically on reload while runs in flight keep the
//! catalog they captured, and [`CompiledLookup`], through which discovery asks whoever compiles
//! npm modules for an admitted artifact.
//!
//! Architecture invariant: no answer of the catalog carries a filesystem path, and this crate
//! neither discovers, compiles nor executes anything: it is the contract, not an implementation.

pub mod codeact;
pub mod dispatch;
pub mod wasm_contract;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

use nodetool_protocol::catalog::{
    AuthorizedDelivery, Declaration, DeliveryRefusal, RefusalReason, Resolution, SkillDisclosure,
    Status, StatusCode, Summary,
};

/// The future [`SandboxModuleCatalog::authorize_delivery`] returns.
pub type DeliveryFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AuthorizedDelivery, DeliveryRefusal>> + Send + 'a>>;

/// The sandbox module catalog, split by consumer. Implementations are immutable snapshots; a
/// reload builds a new one and swaps it into a [`CatalogHandle`].
pub trait SandboxModuleCatalog: Send + Sync {
    /// One summary per importable specifier, sorted by specifier. Never a body or a path.
    fn summaries(&self) -> &[Summary];

    /// Resolves what a body imports into the modules the loader mounts. Unknown and unavailable
    /// specifiers are error statuses; version and digest drift are warnings that still resolve.
    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution;

    /// Every discovery and catalog-host status.
    fn diagnostics(&self) -> &[Status];

    /// A pack's SKILL.md with its trust flag, when the pack has a valid one.
    fn pack_skill(&self, pack_name: &str) -> Option<SkillDisclosure>;

    /// Whether the operator trusts an installed pack (its SKILL.md registers as an ordinary
    /// skill, and CodeAct sessions allow it by default), whether or not it has a SKILL.md. The
    /// default knows only what [`pack_skill`](Self::pack_skill) discloses.
    fn pack_trusted(&self, pack_name: &str) -> bool {
        self.pack_skill(pack_name).is_some_and(|s| s.trusted)
    }

    /// Authorizes and fetches one deliverable body by opaque id (an entry specifier or a
    /// `<pack>::<file>` graph-file id) in one step, so the two can never drift apart.
    /// Asynchronous because entitlement may need remote state.
    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a>;
}

/// A catalog with nothing in it: every declaration is `module-not-found`.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptyCatalog;

impl SandboxModuleCatalog for EmptyCatalog {
    fn summaries(&self) -> &[Summary] {
        &[]
    }

    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        let mut statuses: Vec<Status> = Vec::new();
        for d in declarations {
            if !statuses
                .iter()
                .any(|s| s.specifier.as_deref() == Some(&d.specifier))
            {
                statuses.push(Status::module_not_found(&d.specifier));
            }
        }
        Resolution {
            modules: Vec::new(),
            statuses,
        }
    }

    fn diagnostics(&self) -> &[Status] {
        &[]
    }

    fn pack_skill(&self, _pack_name: &str) -> Option<SkillDisclosure> {
        None
    }

    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        Box::pin(std::future::ready(Err(DeliveryRefusal {
            reason: RefusalReason::NotFound,
            message: format!("Sandbox module {module_id} is not installed."),
        })))
    }
}

/// The process's current catalog. Consumers take a [`snapshot`](CatalogHandle::snapshot) at the
/// start of a run and keep it; a reload [`replace`](CatalogHandle::replace)s the contents
/// atomically, so in-flight runs keep the resolution they started with.
pub struct CatalogHandle {
    current: RwLock<Arc<dyn SandboxModuleCatalog>>,
}

impl CatalogHandle {
    /// A handle holding `catalog`.
    pub fn new(catalog: Arc<dyn SandboxModuleCatalog>) -> Self {
        CatalogHandle {
            current: RwLock::new(catalog),
        }
    }

    /// The catalog as of now. Holding the snapshot keeps it alive across reloads.
    pub fn snapshot(&self) -> Arc<dyn SandboxModuleCatalog> {
        // A poisoned lock only means a writer panicked between taking and releasing it; the Arc
        // inside is always a whole catalog, so reading it is still sound.
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Swaps in `next` and returns the catalog it replaced.
    pub fn replace(&self, next: Arc<dyn SandboxModuleCatalog>) -> Arc<dyn SandboxModuleCatalog> {
        let mut guard = self.current.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *guard, next)
    }
}

impl Default for CatalogHandle {
    fn default() -> Self {
        CatalogHandle::new(Arc::new(EmptyCatalog))
    }
}

/// What discovery asks the compiler's cache about: one npm entry of one pack.
#[derive(Debug, Clone, Copy)]
pub struct CompileRequest<'a> {
    /// The pack declaring the entry.
    pub pack_name: &'a str,
    /// The pack's directory, from which the dependency resolves. Used to find the artifact;
    /// never part of any catalog answer.
    pub pack_dir: &'a Path,
    /// The npm dependency named by the entry.
    pub npm: &'a str,
}

/// What the compiler decided about an npm entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompiledNpmModule {
    /// Bundled, scanned and probed: the guest may load it.
    Admitted(CompiledArtifact),
    /// Refused, with the compiler's stable code (`npm-module-builtin-import`, ...) and message.
    Refused {
        /// The compiler's code.
        code: StatusCode,
        /// Its message.
        message: String,
    },
}

/// An admitted bundle and the identity of what produced it (all of which joins the digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledArtifact {
    /// The bundled ESM source.
    pub source: Arc<str>,
    /// The compiler's version string.
    pub compiler_version: String,
    /// Digest of the normalized bundling options.
    pub options_digest: String,
    /// Digest of every input file and resolution input.
    pub inputs_digest: String,
    /// Warnings to surface (feature-detected globals).
    pub warnings: Vec<String>,
}

/// How discovery learns about compiled npm modules without depending on the compiler.
pub trait CompiledLookup: Send + Sync {
    /// The artifact for `request`, or `None` when nothing has compiled it yet.
    fn lookup(&self, request: &CompileRequest<'_>) -> Option<CompiledNpmModule>;
}

/// A lookup that knows of no compiled modules: every npm entry is `pending-compile`.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCompiledModules;

impl CompiledLookup for NoCompiledModules {
    fn lookup(&self, _request: &CompileRequest<'_>) -> Option<CompiledNpmModule> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_catalog_reports_each_specifier_once() {
        let r = EmptyCatalog.resolve_for_execution(&[
            Declaration::of("@acme/geo"),
            Declaration::of("@acme/geo"),
            Declaration::of("@acme/other"),
        ]);
        assert!(r.modules.is_empty());
        assert_eq!(r.statuses.len(), 2);
        assert!(
            r.statuses
                .iter()
                .all(|s| s.code == StatusCode::ModuleNotFound)
        );
    }

    #[test]
    fn a_snapshot_survives_a_reload() {
        struct Named(Vec<Summary>);
        impl SandboxModuleCatalog for Named {
            fn summaries(&self) -> &[Summary] {
                &self.0
            }
            fn resolve_for_execution(&self, d: &[Declaration]) -> Resolution {
                EmptyCatalog.resolve_for_execution(d)
            }
            fn diagnostics(&self) -> &[Status] {
                &[]
            }
            fn pack_skill(&self, _: &str) -> Option<SkillDisclosure> {
                None
            }
            fn authorize_delivery<'a>(&'a self, id: &'a str) -> DeliveryFuture<'a> {
                EmptyCatalog.authorize_delivery(id)
            }
        }
        let summary = Summary {
            specifier: "@acme/geo".into(),
            pack_name: "@acme/geo".into(),
            pack_version: None,
            kind: nodetool_protocol::catalog::ModuleKind::Js,
            description: None,
            content_digest: "a".repeat(64),
        };
        let handle = CatalogHandle::default();
        let before = handle.snapshot();
        let old = handle.replace(Arc::new(Named(vec![summary])));
        assert!(old.summaries().is_empty());
        assert!(
            before.summaries().is_empty(),
            "the captured snapshot must not change"
        );
        assert_eq!(handle.snapshot().summaries().len(), 1);
    }
}
