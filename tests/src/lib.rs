//! `nodetool-tests`: cross-crate contract tests and the fixture packs they read.
//!
//! The fixture packs live in `tests/fixtures/packs/` (two install roots and a shipped root) and
//! together produce every status code; `tests/tests/` drives them through discovery and the
//! catalog and snapshots the diagnostics with insta. This crate has no library code.
