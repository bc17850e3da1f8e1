//! `nodetool-frontend`: what the two front ends (`nodetool` and `nodetool-server`) share, so a
//! question asked on the command line and over HTTP has one answer.
//!
//! It owns the pack search path ([`search`]: `--packs` roots, `NODETOOL_PACKS_PATH`, the
//! installed root, the shipped root, and the operator's allowlist file, all from values the
//! front end read), a body's run end to end ([`run`]: its static imports resolved through the
//! catalog, the dispatchers its facades need, the guest run, the import located when the guest
//! could not), and the JSON answers both front ends print or serve ([`answers`]: `run --json`,
//! `validate --json`, `packs list --json`, and what to do about each status code), and installing
//! and trusting packs ([`install`]: scripts-disabled installs, the ledger, the integrity-bound
//! rebuild).
//!
//! Architecture invariant: it reads no environment variable and no global configuration (the
//! front end passes what it read in, as [`search::Environment`]; the one exception is the
//! sandbox worker's debug-build test switch, `NODETOOL_TEST_UNCONFINABLE`), and no answer it builds for a remote client carries a
//! filesystem path unless the caller chose path labels. It sits above every engine crate and
//! below `cli` and `server` (and `xtask`, which drives the runner for the browser fixtures and
//! the benches); no engine crate depends on it.

pub mod answers;
pub mod fetch;
pub mod first_use;
pub mod install;
pub mod run;
pub mod search;
pub mod shipped;
pub mod worker;
