//! `nodetool-compiler`: turns a config-only npm manifest entry into an admitted guest module.
//!
//! It will own (spec M3, its own issue): bundling the npm package with rolldown as a library
//! (platform neutral, pinned conditions and main fields, no externals), the scope-aware
//! forbidden-global scan on oxc's semantic analysis, the capability-free admission probe in
//! the guest runtime, and the content-addressed cache that discovery reads through
//! `nodetool_runtime::CompiledLookup`.
//!
//! It must never grant bundled code a capability during admission, and never key its cache by
//! `name@version`: content decides.
