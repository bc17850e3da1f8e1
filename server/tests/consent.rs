//! Consent bound to identity on the server: a pack allowed for another identity is untrusted on
//! the Packages page's view and in its docs disclosure, and its diagnostics say why and what to
//! run; allowing it for its identity now (what `nodetool packs allow` records) restores it.

mod support;

use axum::http::StatusCode;
use nodetool_discovery::trust::{self, Allowlist};
use nodetool_frontend::answers;
use nodetool_runtime::NoCompiledModules;
use serde_json::{Value, json};
use support::{World, get, must, test_config};

fn write_allowlist(world: &World, allowlist: &Allowlist) {
    let path = world.tmp.path().join("config/nodetool/packs.json");
    must(allowlist.write(&path), "write the allowlist");
}

fn pack(view: &Value, name: &str) -> Value {
    view["packs"]
        .as_array()
        .and_then(|packs| packs.iter().find(|p| p["name"] == json!(name)))
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not in the view: {view}"))
}

#[tokio::test]
async fn a_pack_allowed_for_another_identity_is_untrusted_and_says_why() {
    let world = World::empty();
    world.install_fixture("@fixture/geo");
    let mut allowlist = Allowlist::default();
    allowlist.allow("@fixture/geo", trust::digest_identity(&"0".repeat(64)));
    write_allowlist(&world, &allowlist);

    let state = world.state(test_config());
    let answer = get(&state, "/api/packs").await;
    assert_eq!(answer.status, StatusCode::OK);
    let geo = pack(&answer.json(), "@fixture/geo");
    assert_eq!(geo["mode"], json!("untrusted"), "{geo}");
    let diagnostics = geo["diagnostics"].as_array().cloned().unwrap_or_default();
    let changed = diagnostics
        .iter()
        .find(|d| d["code"] == json!("consent-identity-changed"))
        .unwrap_or_else(|| panic!("no consent diagnostic: {geo}"));
    let message = changed["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "@fixture/geo is untrusted: allowed for a different identity: was sha256:{}, now sha256:",
            "0".repeat(64)
        )) && message.ends_with("run `nodetool packs allow @fixture/geo` to trust the pack now installed"),
        "{message}"
    );
    assert_eq!(changed["status"], json!("warning"));
    assert_eq!(
        changed["advice"],
        json!(answers::advice(
            nodetool_protocol::catalog::StatusCode::ConsentIdentityChanged
        ))
    );
    let docs = get(&state, "/api/packs/@fixture/geo/docs").await;
    assert_eq!(docs.status, StatusCode::OK);
    assert_eq!(docs.json()["trusted"], json!(false));
    answer.assert_no_path(&world.paths());

    // Allowed for the identity it has now: trusted, and nothing to say.
    let catalog = must(
        world
            .sources()
            .discover_for_run(&Allowlist::default(), &NoCompiledModules),
        "discover",
    );
    let identity = trust::identities(&catalog, &|_| None)
        .remove("@fixture/geo")
        .unwrap_or_else(|| panic!("geo has an identity"));
    allowlist.allow("@fixture/geo", identity);
    write_allowlist(&world, &allowlist);
    let state = world.state(test_config());
    let geo = pack(&get(&state, "/api/packs").await.json(), "@fixture/geo");
    assert_eq!(geo["mode"], json!("trusted"), "{geo}");
    assert!(!geo.to_string().contains("consent-identity"), "{geo}");
    let docs = get(&state, "/api/packs/@fixture/geo/docs").await;
    assert_eq!(docs.json()["trusted"], json!(true));
}
