//! `nodetool-jssource`: the JS-source rules of the sandbox, each written once, and the offline
//! validation of Code node bodies built on them.
//!
//! - [`relative`]: how a `./` or `../` request inside a pack names a file, and the candidate
//!   order (discovery admits with it, the guest loader serves with it; the browser runner is
//!   checked against its [`relative::CASES`]).
//! - [`position`]: 1-based line and column of a byte offset.
//! - [`dynamic`]: the `import()` / `require()` finder.
//! - [`imports`]: a module's static requests.
//! - [`entry`]: a Code node body made an ES module (the entry builder), and its static imports.
//! - [`exports`]: what a resolved module exports and what a body imports by name.
//! - [`validate`]: offline validation of a workflow's Code nodes, with typed [`IssueCode`]s.
//!
//! Invariants: this crate links no JavaScript or WASM engine and executes nothing: it parses
//! with oxc and reads strings. It does no I/O. Every input here is untrusted source, so nothing
//! panics on it; a parse failure is a value.

pub mod dynamic;
pub mod entry;
pub mod exports;
pub mod imports;
mod issue;
pub mod position;
pub mod relative;
pub mod validate;

pub use entry::{BodyImport, BodySyntaxError, body_imports};
pub use issue::{CODES, IssueCode, IssueCodeDoc};
pub use position::{Positions, position};
