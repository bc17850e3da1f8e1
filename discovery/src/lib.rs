//! `nodetool-discovery`: finds sandbox packs on disk and builds the catalog from them, without
//! ever executing pack code.
//!
//! It owns the static checks of a pack (manifest rules, realpath containment, no symlink in any
//! path component, every size cap, the oxc scan of authored JavaScript, the wasmparser checks of
//! WASM binaries against the scalar contract, the host-registry pin, SKILL.md as warning-grade),
//! the module and pack graph digests ([`digest`] documents their canonical form), the catalog
//! host over ordered search roots ([`discover_catalog`]), and [`DiscoveredCatalog`], which
//! implements `nodetool_runtime::SandboxModuleCatalog`.
//!
//! Architecture invariants: this crate links no engine (no QuickJS, wasmtime or rolldown; check
//! with `cargo tree -p nodetool-discovery`); every malformed input becomes a [`Status`] with a
//! stable code, never a panic and never a half-admitted module; no filesystem path appears in
//! any catalog answer (diagnostics name directories by the labels the caller gives its roots).
//!
//! ```no_run
//! use std::collections::BTreeSet;
//! use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
//! use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};
//! use nodetool_protocol::catalog::Declaration;
//!
//! let roots = [SearchRoot { path: "packs".into(), kind: RootKind::Shipped, label: "shipped".into() }];
//! let trusted = BTreeSet::new();
//! let catalog = discover_catalog(&roots, &DiscoveryOptions { compiled: &NoCompiledModules, trusted_packs: &trusted });
//! let resolution = catalog.resolve_for_execution(&[Declaration::of("@nodetool-ai/sandbox-csv")]);
//! for status in catalog.diagnostics().iter().chain(&resolution.statuses) {
//!     println!("{} {}: {}", status.pack_name, status.code, status.message);
//! }
//! ```
//!
//! [`Status`]: nodetool_protocol::catalog::Status

pub mod atomic;
mod catalog;
pub mod digest;
mod files;
mod js;
mod pack;
pub mod trust;

pub use catalog::{DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
pub use pack::{PackDiscovery, PackOutcome, discover_pack};
