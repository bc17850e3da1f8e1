//! `nodetool-host-modules`: NodeTool's own native implementations behind `kind: "host"` entries.
//!
//! It will own (spec M6, its own issues): the per-run host dispatcher (re-checking the registry
//! pin from `nodetool-protocol`), and the csv, xml, xlsx, zip, diff, html and ocr
//! implementations with their input caps.
//!
//! A pack names a host id and nothing else: this crate must never load code a pack supplies.
