//! One body per validation issue code, each producing exactly that code, with a snapshot of the
//! issue as a front end shows it (ruff-style: a change to a message is a reviewed snapshot diff).

use nodetool_jssource::validate::{CODE_NODE_TYPE, CODES, Issue, IssueCode, validate_graph};
use nodetool_protocol::catalog::{
    Declaration, Resolution, ResolvedKind, ResolvedModule, SkillDisclosure, Status, Summary,
};
use nodetool_runtime::{DeliveryFuture, EmptyCatalog, SandboxModuleCatalog};

/// A catalog with one host module (`@nodetool-ai/sandbox-csv`, exports `parse`, `stringify`)
/// whose declarations saved with a digest other than `"d1"` drift; everything else is not
/// installed.
struct OneHostModule;

const CSV: &str = "@nodetool-ai/sandbox-csv";

impl SandboxModuleCatalog for OneHostModule {
    fn summaries(&self) -> &[Summary] {
        &[]
    }

    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        let (ours, others): (Vec<Declaration>, Vec<Declaration>) = declarations
            .iter()
            .cloned()
            .partition(|d| d.specifier == CSV);
        let mut resolution = EmptyCatalog.resolve_for_execution(&others);
        if let Some(d) = ours.first() {
            resolution.modules.push(ResolvedModule {
                specifier: CSV.into(),
                pack_name: CSV.into(),
                pack_version: Some("1.0.0".into()),
                content_digest: "d1".into(),
                module_id: "host:csv".into(),
                graph: Vec::new(),
                kind: ResolvedKind::Host {
                    host_id: "csv".into(),
                },
            });
            if d.content_digest.as_deref().is_some_and(|seen| seen != "d1") {
                resolution
                    .statuses
                    .push(Status::content_digest_mismatch(CSV, CSV));
            }
        }
        resolution
    }

    fn diagnostics(&self) -> &[Status] {
        &[]
    }

    fn pack_skill(&self, _pack_name: &str) -> Option<SkillDisclosure> {
        None
    }

    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        EmptyCatalog.authorize_delivery(module_id)
    }
}

/// The issues of one Code node with `code` (and `stamps`, what `nodetool lock` recorded).
fn issues(code: &str, stamps: serde_json::Value) -> Vec<Issue> {
    let graph = serde_json::json!({ "nodes": [
        { "id": "n1", "type": CODE_NODE_TYPE, "data": { "code": code, "sandboxModules": stamps } }
    ] });
    validate_graph(&graph, &OneHostModule).unwrap_or_else(|e| panic!("{e:?}"))
}

/// A body for each code a front end can see, and what it stands for.
fn body_for(code: IssueCode) -> Option<(&'static str, serde_json::Value)> {
    let none = serde_json::json!([]);
    Some(match code {
        IssueCode::Syntax => ("const = 1;", none),
        IssueCode::Module => ("const m = await import('x');\nreturn m;", none),
        IssueCode::UndefinedName => ("setTimeout(() => 1, 10);\nreturn 1;", none),
        IssueCode::UnawaitedCall => (
            "import { parse } from \"@nodetool-ai/sandbox-csv\";\nreturn parse('a,b').length;",
            none,
        ),
        IssueCode::PackageUnavailable => ("import x from \"@acme/thing\";\nreturn x;", none),
        IssueCode::MissingExport => (
            "import { prase } from \"@nodetool-ai/sandbox-csv\";\nreturn await prase('a');",
            none,
        ),
        IssueCode::PackageMismatch => (
            "import { parse } from \"@nodetool-ai/sandbox-csv\";\nreturn await parse('a');",
            serde_json::json!([{ "specifier": CSV, "contentDigest": "d0" }]),
        ),
        // Consumed by the catalog phase; never in a result (asserted below).
        IssueCode::NamespaceMember => return None,
    })
}

#[test]
fn each_code_has_a_body_that_produces_exactly_it_and_its_message_is_snapshotted() {
    for doc in CODES {
        let Some((code, stamps)) = body_for(doc.code) else {
            continue;
        };
        let found = issues(code, stamps);
        let kinds: Vec<IssueCode> = found.iter().map(Issue::kind).collect();
        assert_eq!(kinds, [doc.code], "{}: {found:?}", doc.name);
        insta::assert_json_snapshot!(doc.name, found[0]);
    }
}

#[test]
fn namespace_member_notes_never_reach_a_result() {
    let found = issues(
        "import * as csv from \"@nodetool-ai/sandbox-csv\";\nreturn await csv.prase('a');",
        serde_json::json!([]),
    );
    let kinds: Vec<IssueCode> = found.iter().map(Issue::kind).collect();
    assert_eq!(kinds, [IssueCode::MissingExport], "{found:?}");
}
