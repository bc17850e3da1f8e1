//! `nodetool-guest`: the QuickJS (quickjs-ng, through rquickjs) sandbox a Code node body runs in.
//!
//! It will own (spec M1, its own issue): one fresh runtime and context per run with the memory,
//! stack and deadline limits; hardening before any module evaluates; the entry builder that
//! hoists static imports; the resolver/loader pair that serves only a run's resolved specifiers;
//! the facades' private bridges and the dispatcher trait that WASM and host modules implement.
//!
//! The loader, not static analysis, is the boundary: it must never resolve a specifier the
//! run's resolution does not serve, and never hand guest code a filesystem path.
