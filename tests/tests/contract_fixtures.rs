//! The guest contract fixtures: well-formed, all passing on the Rust guest, and exported
//! exactly as committed.

use nodetool_guest::Sandbox;
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use nodetool_tests::contract::{
    Expect, ExpectError, ExpectResult, FIXTURES_JSON_PATH, Fixture, FixtureFile, fixture_file,
    fixtures, fixtures_json, problems, run_all, run_fixture,
};

fn named(name: &str) -> Fixture {
    fixtures()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no fixture named {name}"))
}

#[test]
fn every_fixture_passes_on_the_rust_guest() {
    let all = fixtures();
    let failures: Vec<String> = run_all(&all)
        .into_iter()
        .filter_map(|(f, outcome)| outcome.err().map(|why| format!("{}: {why}", f.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn the_fixtures_are_well_formed() {
    let all = fixtures();
    assert!(all.len() >= 30, "only {} fixtures", all.len());
    let problems = problems(&all);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_reference_fixture_is_present_in_its_order() {
    let reference = [
        "declared-import",
        "two-modules-one-pack",
        "internal-helper",
        "deny-node-builtin",
        "deny-compat-module",
        "deny-absolute-path",
        "deny-relative-escape",
        "deny-encoded-traversal",
        "deny-undeclared-specifier",
        "deny-other-pack-internal",
        "deny-own-internal-from-user-code",
        "deny-dynamic-import-of-declared",
        "deny-computed-dynamic-import",
        "deny-variable-dynamic-import",
        "harden-module-top-level-timer",
        "harden-module-eval",
    ];
    let names: Vec<String> = fixtures().into_iter().map(|f| f.name).collect();
    assert_eq!(&names[..reference.len()], reference.as_slice());
}

#[test]
fn the_committed_json_matches_the_fixtures() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = std::fs::read_to_string(root.join(FIXTURES_JSON_PATH)).unwrap_or_default();
    let generated = fixtures_json().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        committed == generated,
        "{FIXTURES_JSON_PATH} is stale: run `cargo xtask export` and commit the result"
    );
}

#[test]
fn the_json_reads_back_as_the_same_fixtures() {
    let text = fixtures_json().unwrap_or_else(|e| panic!("{e}"));
    let back: FixtureFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, fixture_file());
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let first = &json["fixtures"][0];
    assert_eq!(first["name"], "declared-import");
    assert_eq!(first["expect"]["result"], 222);
    assert_eq!(first["modules"][0]["contentDigest"], "a".repeat(64));
    assert_eq!(first["modules"][0]["kind"], "js");
    let denial = &json["fixtures"][3]["expect"];
    assert_eq!(denial["errorCode"], "module-denied");
    let caught = &json["fixtures"][11];
    assert_eq!(caught["catchesError"], true);
    assert!(caught["expect"].get("errorCode").is_none());
    let bytes = fixtures()
        .into_iter()
        .find(|f| f.name == "values-inputs-round-trip")
        .and_then(|f| f.inputs)
        .and_then(|i| i.get("b").cloned());
    assert_eq!(bytes, Some(Value::Bytes(vec![1, 2, 3, 255])));
    assert!(text.contains(r#""$bytes": "AQID/w==""#));
}

#[test]
fn the_json_form_is_strict() {
    for bad in [
        r#"{"result": 1, "errorContains": []}"#,
        r#"{"errorCode": "no-such-code", "errorContains": []}"#,
        r#"{"errorCode": "timeout", "errorContains": [], "extra": 1}"#,
    ] {
        assert!(
            serde_json::from_str::<Expect>(bad).is_err(),
            "{bad} was accepted"
        );
    }
    let null: Expect =
        serde_json::from_str(r#"{"result": null}"#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        null,
        Expect::Result(ExpectResult {
            result: Value::Null
        })
    );
}

#[test]
fn the_runner_notices_a_wrong_expectation() {
    let sandbox = Sandbox::new();
    let mut wrong_value = named("declared-import");
    wrong_value.expect = Expect::Result(ExpectResult {
        result: Value::Number(223.0),
    });
    let why = run_fixture(&sandbox, &wrong_value)
        .err()
        .unwrap_or_default();
    assert!(why.contains("expected result 223, got 222"), "{why}");

    let mut wrong_code = named("deny-node-builtin");
    wrong_code.expect = Expect::Error(ExpectError {
        error_code: Some(RunErrorCode::DynamicImportDenied),
        error_contains: vec![],
        error_line: None,
    });
    let why = run_fixture(&sandbox, &wrong_code).err().unwrap_or_default();
    assert!(
        why.contains("expected error code dynamic-import-denied"),
        "{why}"
    );

    let mut wrong_text = named("deny-dynamic-import-of-declared");
    if let Expect::Error(e) = &mut wrong_text.expect {
        e.error_contains.push("no such words".into());
    }
    let why = run_fixture(&sandbox, &wrong_text).err().unwrap_or_default();
    assert!(why.contains("lacks [\"no such words\"]"), "{why}");

    let mut wrong_line = named("syntax-error-line");
    if let Expect::Error(e) = &mut wrong_line.expect {
        e.error_line = Some(1);
    }
    let why = run_fixture(&sandbox, &wrong_line).err().unwrap_or_default();
    assert!(
        why.contains("expected the error on line 1, got line 2"),
        "{why}"
    );

    let mut succeeds = named("declared-import");
    succeeds.expect = named("deny-node-builtin").expect;
    let why = run_fixture(&sandbox, &succeeds).err().unwrap_or_default();
    assert!(why.contains("it returned 222"), "{why}");

    let mut uncaught = named("deny-dynamic-import-uncaught");
    uncaught.catches_error = true;
    let why = run_fixture(&sandbox, &uncaught).err().unwrap_or_default();
    assert!(
        why.contains("expected the body to catch the error"),
        "{why}"
    );
}

#[test]
fn the_browser_runners_host_registry_matches_the_protocol() {
    use nodetool_tests::contract::{HOST_MODULES_JSON_PATH, host_modules_json};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = std::fs::read_to_string(root.join(HOST_MODULES_JSON_PATH)).unwrap_or_default();
    let generated = host_modules_json().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        committed == generated,
        "{HOST_MODULES_JSON_PATH} is stale: run `cargo xtask export` and commit the result"
    );
}

#[test]
fn the_fixture_catalog_delivers_every_graph_file_with_its_hash() {
    use nodetool_protocol::catalog::{DeliveryBody, graph_file_module_id};
    use nodetool_runtime::SandboxModuleCatalog;
    use nodetool_tests::contract::catalog::FixtureCatalog;
    for fixture in fixtures() {
        let catalog = FixtureCatalog::new(fixture.modules.clone());
        for m in &fixture.modules {
            let entry = futures_ready(catalog.authorize_delivery(&m.specifier))
                .unwrap_or_else(|e| panic!("{}: {}: {e:?}", fixture.name, m.specifier));
            assert_eq!(entry.file_id, m.module_id, "{}", fixture.name);
            for file in &m.graph {
                let id = graph_file_module_id(&m.pack_name, &file.id);
                let d = futures_ready(catalog.authorize_delivery(&id))
                    .unwrap_or_else(|e| panic!("{}: {id}: {e:?}", fixture.name));
                let body = match &d.body {
                    DeliveryBody::Source(s) => s.as_bytes().to_vec(),
                    DeliveryBody::Bytes(b) => b.0.to_vec(),
                };
                assert_eq!(d.content_sha256.len(), 64);
                assert!(!body.is_empty() || d.content_sha256.starts_with("e3b0"));
            }
        }
        assert!(futures_ready(catalog.authorize_delivery("@nowhere/pack")).is_err());
    }
}

/// Polls a future that is ready at once (the fixture catalog's are).
fn futures_ready<T>(future: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("the fixture catalog's delivery is immediate"),
    }
}
