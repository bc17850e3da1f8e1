//! The fixture packs: hand-built resolved modules, as the catalog would hand them to a run.
//!
//! The first five are the reference's shared packs (GEO, GEO_EXTRA, OTHER, TIMER, EVIL); the
//! rest are ours. Every digest is `"a"` × 64 and every version `1.0.0`.

use nodetool_protocol::catalog::{FileContent, GraphFile, ResolvedKind, ResolvedModule};

/// A JavaScript graph file.
pub fn js_file(id: &str, internal: bool, dependencies: &[&str], source: &str) -> GraphFile {
    let mut dependencies: Vec<String> = dependencies.iter().map(|d| d.to_string()).collect();
    dependencies.sort();
    GraphFile {
        id: id.into(),
        internal,
        dependencies,
        content: FileContent::Js {
            source: source.into(),
        },
    }
}

/// A `js` module whose entry is the first file; the graph is stored sorted by id.
pub fn js_module(specifier: &str, pack: &str, files: Vec<GraphFile>) -> ResolvedModule {
    let module_id = files.first().map(|f| f.id.clone()).unwrap_or_default();
    let mut graph = files;
    graph.sort_by(|a, b| a.id.cmp(&b.id));
    ResolvedModule {
        specifier: specifier.into(),
        pack_name: pack.into(),
        pack_version: Some("1.0.0".into()),
        content_digest: "a".repeat(64),
        module_id,
        graph,
        kind: ResolvedKind::Js,
    }
}

/// A one-file `js` module whose specifier is its pack name (module `"."`), entry `sandbox/main.js`.
pub fn one_file(pack: &str, source: &str) -> ResolvedModule {
    js_module(
        pack,
        pack,
        vec![js_file("sandbox/main.js", false, &[], source)],
    )
}

/// GEO: `@acme/geo` of `@acme/nodetool-geo`; `haversine(a, b) = round(|a - b| * 111)` with
/// `round` in the internal helper `sandbox/internal/round.js`.
pub fn geo() -> ResolvedModule {
    js_module(
        "@acme/geo",
        "@acme/nodetool-geo",
        vec![
            js_file(
                "sandbox/geo.js",
                false,
                &["sandbox/internal/round.js"],
                "import { round } from './internal/round.js';\nexport function haversine(a, b) { return round(Math.abs(a - b) * 111); }\n",
            ),
            js_file(
                "sandbox/internal/round.js",
                true,
                &[],
                "export function round(n) { return Math.round(n * 100) / 100; }\n",
            ),
        ],
    )
}

/// GEO_EXTRA: `@acme/geo/extra`, the same pack; `label() = 'extra'`.
pub fn geo_extra() -> ResolvedModule {
    js_module(
        "@acme/geo/extra",
        "@acme/nodetool-geo",
        vec![js_file(
            "sandbox/extra.js",
            false,
            &[],
            "export function label() { return 'extra'; }\n",
        )],
    )
}

/// OTHER: `@other/pack` of `@other/nodetool-pack`, with the internal `sandbox/internal/secret.js`.
pub fn other() -> ResolvedModule {
    js_module(
        "@other/pack",
        "@other/nodetool-pack",
        vec![
            js_file(
                "sandbox/main.js",
                false,
                &["sandbox/internal/secret.js"],
                "import { secret } from './internal/secret.js';\nexport function hi() { return 'hi'; }\nexport const sealed = secret.length > 0;\n",
            ),
            js_file(
                "sandbox/internal/secret.js",
                true,
                &[],
                "export const secret = 'other-pack-secret';\n",
            ),
        ],
    )
}

/// TIMER: `@acme/timer`, whose top level calls `setTimeout`.
pub fn timer() -> ResolvedModule {
    one_file(
        "@acme/timer",
        "setTimeout(() => {}, 0);\nexport const value = 1;\n",
    )
}

/// EVIL: `@acme/evil`, exporting `value = eval("1 + 1")`.
pub fn evil() -> ResolvedModule {
    one_file("@acme/evil", "export const value = eval(\"1 + 1\");\n")
}

/// REL: `@acme/rel` of `@acme/nodetool-rel`: an entry whose only statement imports `request`
/// (which must name `x` or `dir`) and re-exports what it got as `got`. `sandbox/x.js` exports
/// `value = 'x'`; `sandbox/dir/index.js` imports `../x.js` and exports `value = 'dir+x'`.
pub fn rel(request: &str) -> ResolvedModule {
    let x = js_file("sandbox/x.js", false, &[], "export const value = 'x';\n");
    let dir_index = js_file(
        "sandbox/dir/index.js",
        false,
        &["sandbox/x.js"],
        "import { value as x } from '../x.js';\nexport const value = 'dir+' + x;\n",
    );
    let entry_source = format!("import {{ value }} from '{request}';\nexport const got = value;\n");
    let (dependency, mut rest) = if request.contains("dir") {
        ("sandbox/dir/index.js", vec![dir_index, x])
    } else {
        ("sandbox/x.js", vec![x])
    };
    let mut files = vec![js_file(
        "sandbox/main.js",
        false,
        &[dependency],
        &entry_source,
    )];
    files.append(&mut rest);
    js_module("@acme/rel", "@acme/nodetool-rel", files)
}

/// SNEAKY: `@acme/sneaky` of `@acme/nodetool-sneaky`, whose entry imports `request` (meant to
/// reach a file of another pack).
pub fn sneaky(request: &str) -> ResolvedModule {
    js_module(
        "@acme/sneaky",
        "@acme/nodetool-sneaky",
        vec![js_file(
            "sandbox/main.js",
            false,
            &[],
            &format!("import {{ secret }} from '{request}';\nexport const got = secret;\n"),
        )],
    )
}

/// READER: `@acme/reader`, which reads the secret `TOKEN` at its top level (or says it has no
/// `getSecret`, or what `getSecret` refused).
pub fn reader() -> ResolvedModule {
    one_file(
        "@acme/reader",
        "export const seen = typeof getSecret === 'function'\n  ? await getSecret('TOKEN').catch((e) => e.message)\n  : 'no getSecret';\n",
    )
}

/// The csv host module, fronted by its generated facade (no call is made in the fixtures).
/// NodeTool's shipped host pack for `id` (`@nodetool-ai/sandbox-<id>`).
pub fn host(id: &str) -> ResolvedModule {
    let pack = format!("@nodetool-ai/sandbox-{id}");
    ResolvedModule {
        specifier: pack.clone(),
        pack_name: pack,
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: format!("host:{id}"),
        graph: vec![],
        kind: ResolvedKind::Host { host_id: id.into() },
    }
}

pub fn host_csv() -> ResolvedModule {
    ResolvedModule {
        specifier: "@nodetool-ai/sandbox-csv".into(),
        pack_name: "@nodetool-ai/sandbox-csv".into(),
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: "host:csv".into(),
        graph: vec![],
        kind: ResolvedKind::Host {
            host_id: "csv".into(),
        },
    }
}
