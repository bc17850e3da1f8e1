//! `nodetool-cli`: the `nodetool` command-line front end.
//!
//! It will own (its own issue): argument parsing, the pack search path (`--packs`,
//! `NODETOOL_PACKS_PATH`, the installed root, the shipped root), wiring the catalog, guest,
//! WASM and host-module layers together, and rendering results for people and for `--json`.
//!
//! It must stay thin: validation, allowlists, prompt tiers and docs disclosure live in library
//! crates so the server reuses them.
