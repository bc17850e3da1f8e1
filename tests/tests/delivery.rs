//! The delivery half of the catalog: opaque ids in, bodies with their digests out, and nothing
//! resolved through anything but the catalog's own index (traversal ids are plain misses).

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog,
};
use nodetool_protocol::catalog::{
    AuthorizedDelivery, DeliveryBody, DeliveryRefusal, MediaType, RefusalReason,
};
use nodetool_protocol::facade::host_facade_source;
use nodetool_protocol::hex::sha256_hex;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

fn catalog() -> DiscoveredCatalog {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/packs");
    let roots: Vec<SearchRoot> = [
        ("installed-a", RootKind::Installed),
        ("installed-b", RootKind::Installed),
        ("shipped", RootKind::Shipped),
    ]
    .into_iter()
    .map(|(label, kind)| SearchRoot {
        path: dir.join(label),
        kind,
        label: label.into(),
    })
    .collect();
    let trusted = BTreeSet::new();
    discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    )
}

/// The catalog's delivery future never waits on anything external here, so one poll settles it.
fn deliver(catalog: &DiscoveredCatalog, id: &str) -> Result<AuthorizedDelivery, DeliveryRefusal> {
    let mut future = pin!(catalog.authorize_delivery(id));
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("delivery of {id} did not settle"),
    }
}

fn digest_of(catalog: &DiscoveredCatalog, specifier: &str) -> String {
    catalog
        .summaries()
        .iter()
        .find(|s| s.specifier == specifier)
        .map(|s| s.content_digest.clone())
        .unwrap_or_else(|| panic!("{specifier} has no summary"))
}

#[test]
fn an_entry_specifier_delivers_its_source_and_dependency_ids() {
    let catalog = catalog();
    let d = deliver(&catalog, "@fixture/geo").unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(d.file_id, "sandbox/geo.js");
    assert!(!d.internal);
    assert_eq!(d.media_type, MediaType::JavaScript);
    assert_eq!(d.dependencies, ["@fixture/geo::sandbox/internal/round.js"]);
    assert_eq!(d.content_sha256, sha256_hex(d.body.as_bytes()));
    assert_eq!(d.content_digest, digest_of(&catalog, "@fixture/geo"));
    assert_eq!(d.pack_name, "@fixture/geo");
    let on_disk = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/packs/installed-a/@fixture/geo/sandbox/geo.js"),
    )
    .unwrap_or_default();
    assert_eq!(d.body.as_bytes(), on_disk.as_slice());
}

#[test]
fn a_graph_file_id_delivers_an_internal_helper_under_its_owner_digest() {
    let catalog = catalog();
    let d = deliver(&catalog, "@fixture/geo::sandbox/internal/round.js")
        .unwrap_or_else(|r| panic!("{r:?}"));
    assert!(d.internal);
    assert_eq!(d.file_id, "sandbox/internal/round.js");
    assert!(d.dependencies.is_empty());
    assert_eq!(d.content_digest, digest_of(&catalog, "@fixture/geo"));
    assert_eq!(d.content_sha256, sha256_hex(d.body.as_bytes()));
}

#[test]
fn a_wasm_entry_carries_its_contract_and_its_graph_file_does_not() {
    let catalog = catalog();
    let entry = deliver(&catalog, "@fixture/wasm-scalar").unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(entry.media_type, MediaType::Wasm);
    assert!(matches!(entry.body, DeliveryBody::Bytes(_)));
    assert!(entry.body.as_bytes().starts_with(b"\0asm"));
    let contract = entry.wasm.as_ref().unwrap_or_else(|| panic!("no contract"));
    assert_eq!(contract.memory_pages_max, 2);
    assert!(
        contract
            .exports
            .iter()
            .any(|e| e.wasm == "sum-f32" && e.as_name == "sumF32")
    );
    let file = deliver(&catalog, "@fixture/wasm-scalar::sandbox/scalar.wasm")
        .unwrap_or_else(|r| panic!("{r:?}"));
    assert!(file.wasm.is_none());
    assert_eq!(file.content_sha256, entry.content_sha256);
}

#[test]
fn a_host_entry_delivers_the_generated_facade() {
    let catalog = catalog();
    let d = deliver(&catalog, "@nodetool-ai/sandbox-csv").unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(d.host_id.as_deref(), Some("csv"));
    assert_eq!(d.file_id, "host:csv");
    let expected = host_facade_source("@nodetool-ai/sandbox-csv", &["parse", "stringify"]);
    assert_eq!(d.body.as_bytes(), expected.as_bytes());
    assert_eq!(d.content_sha256, sha256_hex(expected.as_bytes()));
    // The installed copy (2.0.0) shadows the shipped one.
    assert_eq!(d.pack_version.as_deref(), Some("2.0.0"));
}

#[test]
fn an_uncompiled_npm_module_is_unavailable() {
    let refusal = deliver(&catalog(), "@fixture/npm")
        .err()
        .unwrap_or_else(|| panic!("delivered an uncompiled module"));
    assert_eq!(refusal.reason, RefusalReason::Unavailable);
    assert!(
        refusal.message.contains("@fixture/npm"),
        "{}",
        refusal.message
    );
}

#[test]
fn anything_else_is_not_found_and_says_which_id() {
    let catalog = catalog();
    for id in [
        "",
        "::",
        "@fixture/nope",
        "@fixture/geo/nope",
        "@fixture/geo::",
        "::sandbox/geo.js",
        "@fixture/geo::package.json",
        "@fixture/geo::SKILL.md",
        "@fixture/geo::../package.json",
        "@fixture/geo::sandbox/internal/../geo.js",
        "@fixture/geo::./sandbox/geo.js",
        "@fixture/geo::/etc/passwd",
        "@fixture/geo::sandbox%2fgeo.js",
        "@fixture/geo::sandbox/geo.js::x",
        "@fixture/duplicate-pack",
        "@fixture/case",
        "@fixture/Case",
        "@fixture/wasm-imports",
        "@fixture/wasm-imports::sandbox/module.wasm",
        "sandbox/geo.js",
        "node:fs",
    ] {
        match deliver(&catalog, id) {
            Ok(d) => panic!("{id:?} delivered {}", d.file_id),
            Err(r) => {
                assert_eq!(r.reason, RefusalReason::NotFound, "{id:?}");
                assert!(r.message.contains(id), "{id:?}: {}", r.message);
                assert!(
                    !r.message.contains(env!("CARGO_MANIFEST_DIR")),
                    "a path leaked: {}",
                    r.message
                );
            }
        }
    }
}
