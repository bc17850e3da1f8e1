//! `nodetool-tests`: cross-crate contract tests, the fixture packs they read, and the guest
//! contract fixtures.
//!
//! The fixture packs live in `tests/fixtures/packs/` (two install roots and a shipped root) and
//! together produce every status code; `tests/tests/` drives them through discovery and the
//! catalog and snapshots the diagnostics with insta.
//!
//! The library half is [`contract`]: the loading, denial, hardening, limit and value fixtures
//! of the guest runtime as data. `cargo xtask fixtures` runs them against the Rust guest,
//! `cargo xtask export` writes them to `tests/contract/fixtures.json` for other runners, and
//! `cargo test` does both checks. [`render`] draws text into images for the OCR tests, and
//! [`chromium`] drives headless Chromium for the browser tests and the browser run of the
//! fixtures.

pub mod chromium;
pub mod contract;
pub mod render;
pub mod skill;
pub mod world;
