//! The fixture list. The first sixteen are the reference's shared loading/denial fixtures, in
//! its order and under its names; the rest extend them.

use std::collections::BTreeMap;

use nodetool_protocol::catalog::ResolvedModule;
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use serde_json::json;

use super::packs::{
    evil, geo, geo_extra, host, host_csv, js_file, js_module, one_file, other, reader, rel, sneaky,
    timer,
};
use super::wasm::adder;
use super::{Expect, ExpectError, ExpectResult, Fixture};

/// The loader's refusal of a static import it does not serve.
const NOT_SERVED: &str = "is not a sandbox package this run serves";
/// The refusal of every dynamic `import()`.
const DYNAMIC: &str = "dynamic import() is not allowed in the sandbox";
/// The refusal of every code-generation path.
const NO_CODEGEN: &str = "is not allowed in the sandbox";

/// `["undefined", ...]`, `n` times.
fn undefined_times(n: usize) -> serde_json::Value {
    serde_json::Value::Array(vec![json!("undefined"); n])
}

fn case(name: &str, description: &str, modules: Vec<ResolvedModule>, code: &str) -> Fixture {
    Fixture {
        name: name.into(),
        description: description.into(),
        modules,
        code: code.into(),
        inputs: None,
        secrets: None,
        timeout_ms: None,
        expect: Expect::Error(ExpectError {
            error_code: None,
            error_contains: vec![],
            error_line: None,
        }),
        catches_error: false,
    }
}

impl Fixture {
    fn result(mut self, value: serde_json::Value) -> Fixture {
        self.expect = Expect::Result(ExpectResult {
            result: Value::from_json(value),
        });
        self
    }

    fn error(mut self, code: RunErrorCode, contains: &[&str]) -> Fixture {
        self.expect = Expect::Error(ExpectError {
            error_code: Some(code),
            error_contains: contains.iter().map(|s| s.to_string()).collect(),
            error_line: None,
        });
        self
    }

    fn caught(mut self, contains: &[&str]) -> Fixture {
        self.expect = Expect::Error(ExpectError {
            error_code: None,
            error_contains: contains.iter().map(|s| s.to_string()).collect(),
            error_line: None,
        });
        self.catches_error = true;
        self
    }

    fn on_line(mut self, line: u32) -> Fixture {
        if let Expect::Error(e) = &mut self.expect {
            e.error_line = Some(line);
        }
        self
    }

    fn inputs(mut self, inputs: serde_json::Value) -> Fixture {
        self.inputs = Some(Value::from_json(inputs));
        self
    }

    fn secrets(mut self, secrets: &[(&str, &str)]) -> Fixture {
        self.secrets = Some(
            secrets
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        self
    }

    fn timeout_ms(mut self, ms: u64) -> Fixture {
        self.timeout_ms = Some(ms);
        self
    }
}

/// The static imports every runner must refuse by name: (fixture name, specifier, a part of
/// the specifier the message must name, what it tries).
const STATIC_DENIALS: &[(&str, &str, &str, &str)] = &[
    (
        "deny-node-builtin",
        "node:buffer",
        "node:buffer",
        "a Node builtin",
    ),
    (
        "deny-compat-module",
        "buffer",
        "buffer",
        "a bare compat module name a QuickJS wrapper may pre-warm",
    ),
    (
        "deny-absolute-path",
        "/etc/passwd",
        "/etc/passwd",
        "an absolute path",
    ),
    (
        "deny-relative-escape",
        "../secrets.js",
        "../secrets.js",
        "a relative path out of the body",
    ),
    (
        "deny-encoded-traversal",
        "%2e%2e/secrets.js",
        "%2e%2e/secrets.js",
        "a percent-encoded traversal",
    ),
    (
        "deny-undeclared-specifier",
        "@acme/other",
        "@acme/other",
        "a pack specifier the run did not resolve",
    ),
    (
        "deny-other-pack-internal",
        "@other/nodetool-pack/sandbox/internal/secret.js",
        "sandbox/internal/secret.js",
        "another pack's internal helper by its package path",
    ),
    (
        "deny-own-internal-from-user-code",
        "sandbox/internal/round.js",
        "sandbox/internal/round.js",
        "a declared pack's internal helper by its file id",
    ),
];

/// Every fixture, in a fixed order.
pub fn fixtures() -> Vec<Fixture> {
    let mut all = reference();
    all.extend(static_denials_without_modules());
    all.extend(more_denials());
    all.extend(intra_pack());
    all.extend(hardening());
    all.extend(bridges());
    all.extend(dynamic_imports_from_packs());
    all.extend(capabilities());
    all.extend(limits());
    all.extend(positions());
    all.extend(values());
    all.extend(standard_globals());
    all.extend(host_facades());
    all.extend(wasm_facades());
    all
}

/// Every host pack's facade (the whole registry): each module's default export holds the
/// registry's exports, in its order, and each is an async function (no call crosses: the
/// fixtures run without a host dispatcher).
fn host_facades() -> Vec<Fixture> {
    let ids: Vec<&str> = nodetool_protocol::host::HOST_MODULES
        .iter()
        .map(|m| m.id)
        .collect();
    let imports: String = ids
        .iter()
        .map(|id| format!("import {id} from \"@nodetool-ai/sandbox-{id}\";\n"))
        .collect();
    let code = format!(
        "{imports}const all = {{ {} }};\nreturn Object.entries(all).map(([id, m]) => [id, Object.keys(m), Object.values(m).every((f) => f.constructor.name === \"AsyncFunction\")]);",
        ids.join(", ")
    );
    let expected: Vec<serde_json::Value> = nodetool_protocol::host::HOST_MODULES
        .iter()
        .map(|m| json!([m.id, m.exports, true]))
        .collect();
    vec![
        case(
            "host-facades",
            "Every host pack's facade exposes the registry's exports in order, each async.",
            ids.iter().map(|id| host(id)).collect(),
            &code,
        )
        .result(json!(expected)),
    ]
}

/// The reference's shared fixtures (§3 of the contract facts), same names, same order.
fn reference() -> Vec<Fixture> {
    let mut all = vec![
        case(
            "declared-import",
            "A declared pack's named export is importable and runs.",
            vec![geo()],
            "import { haversine } from \"@acme/geo\";\nreturn haversine(1, 3);",
        )
        .result(json!(222)),
        case(
            "two-modules-one-pack",
            "Two modules of one pack resolve side by side.",
            vec![geo(), geo_extra()],
            "import { haversine } from \"@acme/geo\";\nimport { label } from \"@acme/geo/extra\";\nreturn label() + \":\" + haversine(0, 1);",
        )
        .result(json!("extra:111")),
        case(
            "internal-helper",
            "A pack module's relative import of its internal helper resolves (the result is only right if round ran).",
            vec![geo()],
            "import { haversine } from \"@acme/geo\";\nreturn haversine(0, 0.001);",
        )
        .result(json!(0.11)),
    ];
    for (name, specifier, named, what) in STATIC_DENIALS {
        let modules = if *name == "deny-own-internal-from-user-code" {
            vec![geo()]
        } else {
            vec![geo(), other()]
        };
        all.push(
            case(
                name,
                &format!("A static import of {what} is refused by name."),
                modules,
                &format!("import {specifier:?};\nreturn 1;"),
            )
            .error(RunErrorCode::ModuleDenied, &[named, NOT_SERVED]),
        );
    }
    all.extend([
        case(
            "deny-dynamic-import-of-declared",
            "A dynamic import() is refused even for a declared, already loaded pack.",
            vec![geo()],
            "import { haversine } from \"@acme/geo\";\ntry {\n  await import(\"@acme/geo\");\n  return \"loaded\";\n} catch (e) {\n  return e.message;\n}",
        )
        .caught(&["dynamic import()", "\"@acme/geo\""]),
        case(
            "deny-computed-dynamic-import",
            "A dynamic import() of a computed specifier is refused, naming what it computed to.",
            vec![geo()],
            "try {\n  await import(\"node:\" + \"buffer\");\n  return \"loaded\";\n} catch (e) {\n  return e.message;\n}",
        )
        .caught(&["dynamic import()", "\"node:buffer\""]),
        case(
            "deny-variable-dynamic-import",
            "A dynamic import() of a specifier held in a variable is refused.",
            vec![geo()],
            "const name = [\"f\", \"s\"].join(\"\");\ntry {\n  await import(name);\n  return \"loaded\";\n} catch (e) {\n  return e.message;\n}",
        )
        .caught(&["dynamic import()", "\"fs\""]),
        case(
            "harden-module-top-level-timer",
            "Timer globals are gone before any module evaluates (dependencies evaluate before the entry).",
            vec![timer()],
            "import { value } from \"@acme/timer\";\nreturn value;",
        )
        .error(RunErrorCode::RuntimeError, &["setTimeout"]),
        case(
            "harden-module-eval",
            "eval is refused inside a pack module's top level.",
            vec![evil()],
            "import { value } from \"@acme/evil\";\nreturn value;",
        )
        .error(RunErrorCode::RuntimeError, &["eval"]),
    ]);
    all
}

/// Each static denial again with nothing resolved: the loader is there even when no module is.
fn static_denials_without_modules() -> Vec<Fixture> {
    STATIC_DENIALS
        .iter()
        .map(|(name, specifier, named, what)| {
            case(
                &format!("{name}-no-modules"),
                &format!(
                    "A static import of {what} is refused by name when the run resolved no module at all."
                ),
                vec![],
                &format!("import {specifier:?};\nreturn 1;"),
            )
            .error(RunErrorCode::ModuleDenied, &[named, NOT_SERVED])
        })
        .collect()
}

fn more_denials() -> Vec<Fixture> {
    let mut all = vec![];
    for (name, specifier, what) in [
        (
            "deny-pack-name-as-specifier",
            "@acme/nodetool-geo",
            "the pack name of a declared module whose specifier differs",
        ),
        (
            "deny-specifier-case-variant",
            "@Acme/geo",
            "a declared specifier spelled in another case",
        ),
        ("deny-file-url", "file:///etc/passwd", "a file: URL"),
        (
            "deny-data-url",
            "data:text/javascript,export default 1",
            "a data: URL",
        ),
        (
            "deny-relative-pack-file-from-user-code",
            "./sandbox/geo.js",
            "a declared pack's file by a relative path from the body",
        ),
        (
            "deny-undeclared-host-module",
            "@nodetool-ai/sandbox-csv",
            "a host module the run did not resolve",
        ),
        (
            "deny-declared-pack-file-by-package-path",
            "@acme/nodetool-geo/sandbox/internal/round.js",
            "a declared pack's internal helper by its package path",
        ),
        (
            "deny-specifier-trailing-slash",
            "@acme/geo/",
            "a declared specifier with a trailing slash",
        ),
        (
            "deny-engine-module-name",
            "nodetool-sandbox:@acme/nodetool-geo|sandbox/internal/round.js",
            "the name the Rust guest's engine gives a declared pack's internal file",
        ),
        (
            "deny-entry-module-name",
            "code",
            "the name the Rust guest's engine gives the body's own module",
        ),
    ] {
        all.push(
            case(
                name,
                &format!("A static import of {what} is refused by name."),
                vec![geo()],
                &format!("import {specifier:?};\nreturn 1;"),
            )
            .error(RunErrorCode::ModuleDenied, &[specifier, NOT_SERVED]),
        );
    }
    all.push(
        case(
            "deny-node-builtin-from-pack-module",
            "A pack module's import of a Node builtin is refused as the body's would be.",
            vec![one_file(
                "@acme/fs-reader",
                "import { readFileSync } from 'node:fs';\nexport const got = typeof readFileSync;\n",
            )],
            "import { got } from \"@acme/fs-reader\";\nreturn got;",
        )
        .error(RunErrorCode::ModuleDenied, &["\"node:fs\"", NOT_SERVED]),
    );
    all.push(
        case(
            "deny-prelude-from-user-code",
            "The Rust guest's hardening prelude is not a module the body may import.",
            vec![geo()],
            "import \"nodetool:prelude\";\nreturn 1;",
        )
        .error(RunErrorCode::ModuleDenied, &["\"nodetool:prelude\""]),
    );
    all.push(
        case(
            "deny-prelude-from-pack-module",
            "The Rust guest's hardening prelude is not a module a pack module may import.",
            vec![one_file(
                "@acme/prelude-thief",
                "import 'nodetool:prelude';\nexport const got = 1;\n",
            )],
            "import { got } from \"@acme/prelude-thief\";\nreturn got;",
        )
        .error(RunErrorCode::ModuleDenied, &["\"nodetool:prelude\""]),
    );
    all.push(
        case(
            "plain-body-without-modules",
            "A body with no imports runs when nothing is resolved.",
            vec![],
            "return 1 + 1;",
        )
        .result(json!(2)),
    );
    all
}

/// Relative imports between a pack's own files, and relative imports that try to leave it.
fn intra_pack() -> Vec<Fixture> {
    let body = "import { got } from \"@acme/rel\";\nreturn got;";
    vec![
        case(
            "intra-pack-relative-file",
            "A pack module imports its sibling by `./x.js`.",
            vec![rel("./x.js")],
            body,
        )
        .result(json!("x")),
        case(
            "intra-pack-relative-without-extension",
            "`./x` resolves to the pack's `x.js`.",
            vec![rel("./x")],
            body,
        )
        .result(json!("x")),
        case(
            "intra-pack-relative-directory",
            "`./dir` resolves to the pack's `dir/index.js`, which imports `../x.js`.",
            vec![rel("./dir")],
            body,
        )
        .result(json!("dir+x")),
        case(
            "intra-pack-relative-directory-index",
            "`./dir/index.js` resolves as written, and its `../x.js` climbs back within the pack.",
            vec![rel("./dir/index.js")],
            body,
        )
        .result(json!("dir+x")),
        case(
            "deny-intra-pack-missing-file",
            "A relative import of a file the pack's graph does not hold is refused, naming the pack.",
            vec![rel("./missing.js")],
            body,
        )
        .error(
            RunErrorCode::ModuleDenied,
            &["\"./missing.js\" is not a file of the @acme/nodetool-rel sandbox package"],
        ),
        case(
            "deny-pack-relative-escape-to-other-pack",
            "A pack module cannot climb out of its package to another pack's file.",
            vec![
                other(),
                sneaky("../../../@other/nodetool-pack/sandbox/internal/secret.js"),
            ],
            "import { got } from \"@acme/sneaky\";\nreturn got;",
        )
        .error(
            RunErrorCode::ModuleDenied,
            &[
                "\"../../../@other/nodetool-pack/sandbox/internal/secret.js\" is not a file of the @acme/nodetool-sneaky sandbox package",
            ],
        ),
        case(
            "deny-pack-relative-path-of-other-pack",
            "A relative path that names a file only another declared pack has is resolved within the importer's pack, and refused.",
            vec![other(), sneaky("./internal/secret.js")],
            "import { got } from \"@acme/sneaky\";\nreturn got;",
        )
        .error(
            RunErrorCode::ModuleDenied,
            &["\"./internal/secret.js\" is not a file of the @acme/nodetool-sneaky sandbox package"],
        ),
    ]
}

/// Code generation, timers and host globals.
fn hardening() -> Vec<Fixture> {
    let mut all = vec![];
    for (name, code, what) in [
        ("codegen-eval", "eval(\"1 + 1\");", "eval"),
        ("codegen-indirect-eval", "(0, eval)(\"1 + 1\");", "eval"),
        (
            "codegen-new-function",
            "new Function(\"return 1\");",
            "the Function constructor",
        ),
        (
            "codegen-function-call",
            "Function(\"return 1\");",
            "the Function constructor",
        ),
        (
            "codegen-function-constructor-property",
            "(function () {}).constructor(\"return 1\");",
            "the Function constructor",
        ),
        (
            "codegen-async-function-constructor",
            "(async function () {}).constructor(\"return 1\");",
            "the AsyncFunction constructor",
        ),
        (
            "codegen-arrow-async-function-constructor",
            "Object.getPrototypeOf(async () => {}).constructor(\"return 1\");",
            "the AsyncFunction constructor",
        ),
        (
            "codegen-generator-function-constructor",
            "(function* () {}).constructor(\"yield 1\");",
            "the GeneratorFunction constructor",
        ),
        (
            "codegen-async-generator-function-constructor",
            "(async function* () {}).constructor(\"yield 1\");",
            "the AsyncGeneratorFunction constructor",
        ),
        (
            "codegen-reflect-construct-function",
            "Reflect.construct(Function, [\"return 1\"]);",
            "the Function constructor",
        ),
    ] {
        all.push(
            case(
                name,
                &format!("{what} is refused by name."),
                vec![],
                &format!("{code}\nreturn \"generated\";"),
            )
            .error(RunErrorCode::RuntimeError, &[what, NO_CODEGEN]),
        );
    }
    all.extend([
        case(
            "harden-module-function-constructor",
            "The Function constructor is refused inside a pack module's top level.",
            vec![one_file(
                "@acme/maker",
                "export const value = new Function('return 1')();\n",
            )],
            "import { value } from \"@acme/maker\";\nreturn value;",
        )
        .error(
            RunErrorCode::RuntimeError,
            &["the Function constructor", NO_CODEGEN],
        ),
        case(
            "codegen-guard-traps-and-prototypes-leak-nothing",
            "A guard's proxy handler inherits nothing the body can plant (a `get` or \
             `getPrototypeOf` trap on Object.prototype sees no constructor), and the prototype \
             of every guarded constructor is the Function guard, never the real Function.",
            vec![],
            "const seen = [];\n\
             Object.prototype.get = function (t, k, r) { seen.push(t); return Reflect.get(t, k, r); };\n\
             Object.prototype.getPrototypeOf = function (t) { seen.push(t); return Reflect.getPrototypeOf(t); };\n\
             void Function.length;\n\
             void Object.getPrototypeOf(async function () {}).constructor.name;\n\
             void Object.getPrototypeOf(Object.getPrototypeOf(function* () {}).constructor);\n\
             delete Object.prototype.get;\n\
             delete Object.prototype.getPrototypeOf;\n\
             const parents = [async function () {}, function* () {}, async function* () {}]\n\
               .map((f) => Object.getPrototypeOf(Object.getPrototypeOf(f).constructor));\n\
             const outcomes = [...seen, ...parents].map((c) => {\n\
               try { c(\"return 1\"); return \"generated\"; } catch (e) { return e.name; }\n\
             });\n\
             return { seen: seen.length, parentIsGuard: parents.every((p) => p === Function), outcomes };",
        )
        .result(json!({ "seen": 0, "parentIsGuard": true, "outcomes": ["EvalError", "EvalError", "EvalError"] })),
        case(
            "timers-are-undefined",
            "No timer global exists for the body.",
            vec![],
            "return [typeof setTimeout, typeof setInterval, typeof setImmediate, typeof clearTimeout, typeof clearInterval, typeof clearImmediate];",
        )
        .result(undefined_times(6)),
        case(
            "timers-are-undefined-in-pack-module",
            "No timer global exists for a pack module either.",
            vec![one_file(
                "@acme/peek",
                "export const seen = [typeof setTimeout, typeof setInterval, typeof setImmediate, typeof clearTimeout, typeof clearInterval, typeof clearImmediate];\n",
            )],
            "import { seen } from \"@acme/peek\";\nreturn seen;",
        )
        .result(undefined_times(6)),
        case(
            "host-globals-are-undefined",
            "The host-flavoured globals the reference deletes do not exist.",
            vec![],
            "return [typeof process, typeof Buffer, typeof require, typeof env, typeof Headers, typeof Request, typeof Response, typeof fetch];",
        )
        .result(undefined_times(8)),
    ]);
    all
}

/// The standard web globals (`guest/src/globals.js`, shared by both runtimes): known answers
/// and the errors' names and messages, so the browser runner is checked against the guest.
fn standard_globals() -> Vec<Fixture> {
    vec![
        case(
            "globals-text-encoding",
            "TextEncoder writes UTF-8 (a lone surrogate as U+FFFD); TextDecoder replaces malformed input per maximal subpart, drops one BOM unless ignoreBOM, streams, and throws when fatal.",
            vec![],
            "const e = new TextEncoder();\nconst d = (bytes, opts) => Array.from(new TextDecoder(\"utf-8\", opts).decode(new Uint8Array(bytes)), (c) => c.codePointAt(0));\nconst s = new TextDecoder();\nconst streamed = s.decode(new Uint8Array([0xe2, 0x82]), { stream: true }) + s.decode(new Uint8Array([0xac]));\nlet fatal;\ntry { new TextDecoder(\"utf-8\", { fatal: true }).decode(new Uint8Array([0xc0, 0x80])); } catch (err) { fatal = [err.name, err.message]; }\nlet label;\ntry { new TextDecoder(\"utf-16le\"); } catch (err) { label = err.name; }\nreturn [Array.from(e.encode(\"a\\u00e9\\u20ac\\ud83d\\udca9\\ud800\")), d([0xef, 0xbb, 0xbf, 0x68, 0xff, 0xe0, 0x80, 0x69]), d([0xef, 0xbb, 0xbf, 0x68], { ignoreBOM: true }), streamed, fatal, label, e.encodeInto(\"ab\\u20ac\", new Uint8Array(4))];",
        )
        .result(json!([
            [97, 195, 169, 226, 130, 172, 240, 159, 146, 169, 239, 191, 189],
            [104, 65533, 65533, 65533, 105],
            [65279, 104],
            "\u{20ac}",
            ["TypeError", "TextDecoder.decode: the input is not valid UTF-8"],
            "RangeError",
            { "read": 2, "written": 2 }
        ])),
        case(
            "globals-base64-and-hex",
            "atob/btoa and the byte helpers follow RFC 4648 (forgiving on decode: whitespace and missing padding), and name what they refuse.",
            vec![],
            "const v = [\"\", \"f\", \"fo\", \"foo\", \"foob\", \"fooba\", \"foobar\"];\nconst names = [];\nfor (const f of [() => btoa(\"\\u0100\"), () => atob(\"Zm9v!\"), () => fromBase64(\"Z\"), () => fromHex(\"abc\")]) { try { f(); names.push(\"none\"); } catch (e) { names.push(e.name + \": \" + e.message); } }\nreturn [v.map((x) => btoa(x)), v.map((x) => atob(btoa(x).replace(/=/g, \"\"))), atob(\" Zm9v\\nYmFy \"), toBase64(\"\\u00e9\"), toBase64(new Uint8Array([0, 255])), Array.from(fromBase64(\"AP8=\")), toHex(\"\\u00e9\"), Array.from(fromHex(\"00ABff\")), names];",
        )
        .result(json!([
            ["", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"],
            ["", "f", "fo", "foo", "foob", "fooba", "foobar"],
            "foobar",
            "w6k=",
            "AP8=",
            [0, 255],
            "c3a9",
            [0, 171, 255],
            [
                "InvalidCharacterError: btoa: the string contains a character outside Latin-1",
                "InvalidCharacterError: atob: the string is not valid base64",
                "SyntaxError: fromBase64: the string is not valid base64",
                "SyntaxError: fromHex: the string has an odd number of digits"
            ]
        ])),
        case(
            "globals-crypto-random",
            "crypto.randomUUID is a version 4 UUID that does not repeat; getRandomValues fills integer arrays in place and refuses floats and more than 65536 bytes.",
            vec![],
            "const shape = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;\nconst ids = new Set();\nfor (let i = 0; i < 200; i++) ids.add(crypto.randomUUID());\nconst a = new Uint32Array(8);\nconst errors = [];\nfor (const f of [() => crypto.getRandomValues(new Uint8Array(65537)), () => crypto.getRandomValues(new Float32Array(1))]) { try { f(); } catch (e) { errors.push(e.name); } }\nreturn [ids.size, [...ids].every((id) => shape.test(id)), crypto.getRandomValues(a) === a, a.some((x) => x !== 0), errors];",
        )
        .result(json!([200, true, true, true, ["QuotaExceededError", "TypeMismatchError"]])),
        case(
            "globals-crypto-digest",
            "crypto.subtle.digest answers SHA-1/256/384/512 (FIPS 180 vectors) as a Promise of an ArrayBuffer and rejects other algorithms.",
            vec![],
            "const abc = new TextEncoder().encode(\"abc\");\nconst out = [];\nfor (const name of [\"SHA-1\", \"SHA-256\", \"sha-384\", { name: \"SHA-512\" }]) { const p = crypto.subtle.digest(name, abc); out.push(p instanceof Promise); const d = await p; out.push(d instanceof ArrayBuffer, toHex(d)); }\ntry { await crypto.subtle.digest(\"MD5\", abc); } catch (e) { out.push(e.name); }\nreturn out;",
        )
        .result(json!([
            true, true, "a9993e364706816aba3e25717850c26c9cd0d89d",
            true, true, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            true, true, "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            true, true, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "NotSupportedError"
        ])),
        case(
            "globals-structured-clone",
            "structuredClone copies cycles, Maps, Sets, Dates, RegExps, typed arrays and errors, and refuses functions and symbols with DataCloneError.",
            vec![],
            "const a = { d: new Date(7), r: /x/g, m: new Map([[\"k\", [1]]]), s: new Set([2]), t: new Int16Array([-1]), e: new TypeError(\"t\") };\na.self = a;\nconst c = structuredClone(a);\nconst refused = [];\nfor (const v of [() => 1, Symbol(\"s\")]) { try { structuredClone(v); } catch (e) { refused.push(e.name); } }\nreturn [c !== a, c.self === c, c.d.getTime(), c.r.source + c.r.flags, c.m.get(\"k\")[0], c.m.get(\"k\") !== a.m.get(\"k\"), c.s.has(2), c.t[0], c.e instanceof TypeError, c.e.message, refused];",
        )
        .result(json!([true, true, 7, "xg", 1, true, true, -1, true, "t", ["DataCloneError", "DataCloneError"]])),
        case(
            "globals-url",
            "URL and URLSearchParams follow the WHATWG URL standard: parsing against a base, setters, and search parameters kept in step with the URL.",
            vec![],
            "const u = new URL(\"../c/d?x=1#h\", \"HTTPS://User:Pw@Example.COM:443/a/b/\");\nconst out = [u.href, u.origin, u.host, u.pathname, u.search, u.hash];\nu.searchParams.append(\"q\", \"a b&\\u00e9\");\nout.push(u.href);\nu.port = \"8443\"; u.hash = \"\"; u.pathname = \"/x y\";\nout.push(u.href);\nu.searchParams.delete(\"x\"); u.searchParams.delete(\"q\");\nout.push(u.href);\nlet threw;\ntry { new URL(\"no scheme\"); } catch (e) { threw = e.name; }\nconst p = new URLSearchParams(\"?b=2&a=1&a=0\");\np.sort();\nreturn [out, threw, URL.canParse(\"x\", \"https://h/\"), URL.parse(\"::\"), p.toString(), p.getAll(\"a\"), p.size, String(new URL(\"http://[::1]:80/\"))];",
        )
        .result(json!([
            [
                "https://User:Pw@example.com/a/c/d?x=1#h",
                "https://example.com",
                "example.com",
                "/a/c/d",
                "?x=1",
                "#h",
                "https://User:Pw@example.com/a/c/d?x=1&q=a+b%26%C3%A9#h",
                "https://User:Pw@example.com:8443/x%20y?x=1&q=a+b%26%C3%A9",
                "https://User:Pw@example.com:8443/x%20y"
            ],
            "TypeError",
            true,
            null,
            "a=1&a=0&b=2",
            ["1", "0"],
            3,
            "http://[::1]/"
        ])),
        case(
            "globals-microtask-performance-sleep",
            "queueMicrotask runs after the current job; performance.now() is whole milliseconds; sleep resolves to undefined and refuses a wait past the run's deadline.",
            vec![],
            "const order = [];\nqueueMicrotask(() => order.push(\"micro\"));\norder.push(\"sync\");\nawait null;\nconst t0 = performance.now();\nconst slept = await sleep(25);\nconst t1 = performance.now();\nlet refused;\ntry { await sleep(1e9); } catch (e) { refused = [e.name, e.message]; }\nreturn [order, Number.isInteger(t0) && Number.isInteger(t1), t1 - t0 >= 20, slept, refused];",
        )
        .result(json!([
            ["sync", "micro"],
            true,
            true,
            null,
            ["RangeError", "sleep(1000000000) would end after the run's deadline"]
        ])),
        case(
            "globals-read-only",
            "Every standard global is a read-only, non-configurable binding; Intl and the timers stay absent.",
            vec![],
            "const names = [\"TextEncoder\", \"TextDecoder\", \"atob\", \"btoa\", \"crypto\", \"structuredClone\", \"URL\", \"URLSearchParams\", \"queueMicrotask\", \"performance\", \"toBase64\", \"fromBase64\", \"toHex\", \"fromHex\", \"sleep\"];\nconst locked = names.filter((n) => { const d = Object.getOwnPropertyDescriptor(globalThis, n); return d && !d.writable && !d.configurable; });\nlet replaced = false;\ntry { crypto.randomUUID = () => \"x\"; replaced = crypto.randomUUID() === \"x\"; } catch (_) {}\nreturn [locked.length, replaced, typeof Intl, typeof setTimeout, typeof setInterval];",
        )
        .result(json!([15, false, "undefined", "undefined", "undefined"])),
    ]
}

/// The private bridges behind the generated facades.
fn bridges() -> Vec<Fixture> {
    let hidden = "[typeof __nodetoolHostDispatch, typeof __nodetoolWasmDispatch, typeof __hostCall, typeof __wasmCall, typeof __capabilityCall, typeof __call]";
    let mut all = vec![];
    for (bridge, kind) in [("host", "host"), ("wasm", "WASM")] {
        let specifier = format!("nodetool:{bridge}-bridge");
        let message = format!(
            "\"{specifier}\" is private to the sandbox's generated {kind} facades and cannot be imported"
        );
        all.push(
            case(
                &format!("deny-{bridge}-bridge-from-user-code"),
                &format!("The body cannot import the private {kind} bridge."),
                vec![host_csv()],
                &format!("import {{ __call }} from {specifier:?};\nreturn typeof __call;"),
            )
            .error(RunErrorCode::ModuleDenied, &[&message]),
        );
        all.push(
            case(
                &format!("deny-{bridge}-bridge-from-pack-module"),
                &format!("A pack module cannot import the private {kind} bridge."),
                vec![
                    host_csv(),
                    one_file(
                        "@acme/thief",
                        &format!(
                            "import {{ __call }} from '{specifier}';\nexport const got = typeof __call;\n"
                        ),
                    ),
                ],
                "import { got } from \"@acme/thief\";\nreturn got;",
            )
            .error(RunErrorCode::ModuleDenied, &[&message]),
        );
    }
    all.extend([
        case(
            "dispatch-globals-are-undefined",
            "With a host facade loaded, no dispatcher binding is visible to the body.",
            vec![host_csv()],
            &format!(
                "import csv from \"@nodetool-ai/sandbox-csv\";\nreturn [...{hidden}, typeof csv.parse];"
            ),
        )
        .result({
            let mut seen = undefined_times(6);
            if let serde_json::Value::Array(items) = &mut seen {
                items.push(json!("function"));
            }
            seen
        }),
        case(
            "dispatch-globals-are-undefined-in-pack-module",
            "With a host facade loaded, no dispatcher binding is visible to a pack module.",
            vec![
                host_csv(),
                one_file("@acme/peek", &format!("export const seen = {hidden};\n")),
            ],
            "import csv from \"@nodetool-ai/sandbox-csv\";\nimport { seen } from \"@acme/peek\";\nreturn seen;",
        )
        .result(undefined_times(6)),
    ]);
    all
}

/// Dynamic imports made by pack code.
fn dynamic_imports_from_packs() -> Vec<Fixture> {
    vec![
        case(
            "deny-dynamic-import-in-pack-module-evaluation",
            "A pack module's top-level dynamic import() of a declared pack is refused.",
            vec![
                geo(),
                one_file(
                    "@acme/late",
                    "export const got = await import('@acme/geo');\n",
                ),
            ],
            "import { got } from \"@acme/late\";\nreturn typeof got;",
        )
        .error(
            RunErrorCode::DynamicImportDenied,
            &[DYNAMIC, "(requested \"@acme/geo\")"],
        ),
        case(
            "deny-dynamic-import-of-own-file-in-pack-module",
            "A pack module's top-level dynamic import() of its own graph file is refused (and catchable).",
            vec![js_rel_late()],
            "import { got } from \"@acme/late\";\nreturn got;",
        )
        .caught(&[DYNAMIC, "(requested \"./x.js\")"]),
        case(
            "deny-dynamic-import-from-pack-function",
            "A dynamic import() a pack function makes when the body calls it is refused.",
            vec![one_file(
                "@acme/late",
                "export function load() { return import('@acme/late'); }\n",
            )],
            "import { load } from \"@acme/late\";\ntry {\n  await load();\n  return \"loaded\";\n} catch (e) {\n  return e.message;\n}",
        )
        .caught(&[DYNAMIC, "(requested \"@acme/late\")"]),
        case(
            "deny-dynamic-import-uncaught",
            "An uncaught dynamic import() ends the run as dynamic-import-denied, naming the specifier.",
            vec![],
            "await import(\"node:\" + \"fs\");\nreturn 1;",
        )
        .error(
            RunErrorCode::DynamicImportDenied,
            &[DYNAMIC, "(requested \"node:fs\")"],
        ),
    ]
}

/// `@acme/late` with a sibling `sandbox/x.js` that its top level imports dynamically.
fn js_rel_late() -> ResolvedModule {
    js_module(
        "@acme/late",
        "@acme/late",
        vec![
            js_file(
                "sandbox/main.js",
                false,
                &[],
                "export const got = await import('./x.js').then(() => 'loaded', (e) => e.message);\n",
            ),
            js_file("sandbox/x.js", false, &[], "export const x = 1;\n"),
        ],
    )
}

/// Capabilities are the node's, and a pack module shares exactly them.
fn capabilities() -> Vec<Fixture> {
    let body = "import { seen } from \"@acme/reader\";\nreturn seen;";
    vec![
        case(
            "capability-secret-granted-to-pack-module",
            "A pack module reading a secret at its top level sees it when the run grants it.",
            vec![reader()],
            body,
        )
        .secrets(&[("TOKEN", "s3cret")])
        .result(json!("s3cret")),
        case(
            "capability-no-secrets-no-getsecret",
            "With no secrets granted, a pack module has no getSecret at all.",
            vec![reader()],
            body,
        )
        .result(json!("no getSecret")),
        case(
            "capability-secret-not-granted-by-name",
            "A pack module asking for a secret the run did not grant is refused by name.",
            vec![reader()],
            body,
        )
        .secrets(&[("OTHER", "x")])
        .result(json!(
            "getSecret: the secret \"TOKEN\" was not granted to this run"
        )),
        case(
            "capability-absent-in-user-code",
            "With no secrets granted, the body has no getSecret either.",
            vec![],
            "return typeof getSecret;",
        )
        .result(json!("undefined")),
    ]
}

/// Limits end runs with typed outcomes.
fn limits() -> Vec<Fixture> {
    vec![
        case(
            "limit-timeout",
            "An endless loop ends at the run's deadline.",
            vec![],
            "while (true) {}",
        )
        .timeout_ms(200)
        .error(RunErrorCode::Timeout, &["200 ms"]),
        case(
            "limit-timeout-in-pack-module",
            "An endless loop in a pack module's top level ends at the run's deadline.",
            vec![one_file(
                "@acme/spin",
                "while (true) {}\nexport const value = 1;\n",
            )],
            "import { value } from \"@acme/spin\";\nreturn value;",
        )
        .timeout_ms(200)
        .error(RunErrorCode::Timeout, &["200 ms"]),
        case(
            "limit-stack-overflow",
            "Unbounded recursion ends as a stack overflow, not a crash.",
            vec![],
            "function f() { return f() + 1; }\nreturn f();",
        )
        .error(RunErrorCode::StackOverflow, &[]),
        case(
            "limit-memory",
            "An allocation bomb ends at the memory limit.",
            vec![],
            "const a = [];\nwhile (true) a.push(new Array(100000).fill(1));",
        )
        .error(RunErrorCode::MemoryLimit, &[]),
        case(
            "limit-memory-string",
            "A doubling string ends at the memory limit.",
            vec![],
            "let s = \"x\";\nwhile (true) s += s;",
        )
        .error(RunErrorCode::MemoryLimit, &[]),
        case(
            "limit-never-settles",
            "A result that awaits a promise nothing can resolve ends the run instead of hanging.",
            vec![],
            "return new Promise(() => {});",
        )
        .error(RunErrorCode::RuntimeError, &["never settles"]),
    ]
}

/// Errors carry the body position.
fn positions() -> Vec<Fixture> {
    vec![
        case(
            "syntax-error-line",
            "A body that does not parse fails as a syntax error on its line.",
            vec![],
            "const a = 1;\nconst = 2;",
        )
        .error(RunErrorCode::SyntaxError, &[])
        .on_line(2),
        case(
            "syntax-error-line-after-imports",
            "Hoisting the imports keeps the body's line numbers.",
            vec![geo()],
            "import { haversine } from \"@acme/geo\";\nconst a = 1;\nconst = 2;",
        )
        .error(RunErrorCode::SyntaxError, &[])
        .on_line(3),
        case(
            "syntax-error-in-pack-module",
            "A pack module that does not parse fails the run as a syntax error naming its file.",
            vec![one_file("@acme/broken", "export const = 1;\n")],
            "import x from \"@acme/broken\";\nreturn 1;",
        )
        .error(RunErrorCode::SyntaxError, &["sandbox/main.js"]),
        case(
            "runtime-error-line",
            "A thrown error reports the body line it was thrown on.",
            vec![],
            "const a = 1;\nconst b = 2;\nnull.x;",
        )
        .error(RunErrorCode::RuntimeError, &["TypeError"])
        .on_line(3),
        case(
            "runtime-error-line-after-imports",
            "A thrown error after hoisted imports reports its body line and message.",
            vec![geo()],
            "import { haversine } from \"@acme/geo\";\nconst a = 1;\nthrow new Error(\"boom\");",
        )
        .error(RunErrorCode::RuntimeError, &["Error: boom"])
        .on_line(3),
        case(
            "body-cannot-export",
            "A body is not a module author: an export is a syntax error.",
            vec![],
            "export const a = 1;",
        )
        .error(RunErrorCode::SyntaxError, &["export"]),
    ]
}

/// Values across the boundary.
fn values() -> Vec<Fixture> {
    vec![
        case(
            "values-inputs-round-trip",
            "Inputs of every kind, bytes included, come back unchanged.",
            vec![],
            "return { ...inputs, isBytes: inputs.b instanceof Uint8Array, doubled: inputs.n * 2 };",
        )
        .inputs(json!({
            "n": 21,
            "f": 0.5,
            "s": "héllo ✓",
            "t": true,
            "z": null,
            "b": { "$bytes": "AQID/w==" },
            "a": [1, null, false, "x", { "$bytes": "" }],
            "o": { "k": { "deep": [0.25] } }
        }))
        .result(json!({
            "n": 21,
            "f": 0.5,
            "s": "héllo ✓",
            "t": true,
            "z": null,
            "b": { "$bytes": "AQID/w==" },
            "a": [1, null, false, "x", { "$bytes": "" }],
            "o": { "k": { "deep": [0.25] } },
            "isBytes": true,
            "doubled": 42
        })),
        case(
            "values-inputs-are-frozen",
            "The inputs global is deeply frozen.",
            vec![],
            "let threw = \"no\";\ntry { inputs.o.k = 2; } catch (e) { threw = e.name; }\nreturn [Object.isFrozen(inputs), Object.isFrozen(inputs.o), threw, inputs.o.k];",
        )
        .inputs(json!({ "o": { "k": 1 } }))
        .result(json!([true, true, "TypeError", 1])),
        case(
            "values-typed-arrays-cross-as-bytes",
            "Any typed array leaves the guest as its bytes.",
            vec![],
            "return { u8: new Uint8Array([1, 2, 255]), u16: new Uint16Array([1, 258]) };",
        )
        .result(json!({
            "u8": { "$bytes": "AQL/" },
            "u16": { "$bytes": "AQACAQ==" }
        })),
        case(
            "values-empty-body-is-null",
            "A body that returns nothing succeeds with undefined (null on the wire).",
            vec![],
            "",
        )
        .result(json!(null)),
        case(
            "values-pack-module-result",
            "A value a pack module computes crosses like the body's own.",
            vec![geo(), geo_extra()],
            "import { haversine } from \"@acme/geo\";\nimport { label } from \"@acme/geo/extra\";\nreturn { label: label(), d: [haversine(0, 1), haversine(0, 0.001)] };",
        )
        .result(json!({ "label": "extra", "d": [111, 0.11] })),
        case(
            "missing-export-named",
            "A named import its module lacks is a missing-export link error on the name, naming the specifier (never an engine module id) and the closest export.",
            vec![geo()],
            "const a = 1;\nimport { Haversine } from \"@acme/geo\";\nreturn Haversine(0, 1);",
        )
        .error(
            RunErrorCode::MissingExport,
            &["\"@acme/geo\" has no export named \"Haversine\"; did you mean haversine?"],
        )
        .on_line(2),
        case(
            "throw-caret-on-the-throw",
            "An uncaught throw whose message is a template literal is placed on its line (the caret rule then puts it on the `throw`, in both runtimes).",
            vec![],
            "const x = 1;\nthrow new Error(`bad value ${x}`);",
        )
        .error(RunErrorCode::RuntimeError, &["Error: bad value 1"])
        .on_line(2),
        case(
            "missing-export-default",
            "A default import of a module without a default export is a missing-export link error.",
            vec![geo()],
            "import geo from \"@acme/geo\";\nreturn geo;",
        )
        .error(
            RunErrorCode::MissingExport,
            &["\"@acme/geo\" has no default export"],
        )
        .on_line(1),
    ]
}

/// A WASM pack through its scalar facade (`super::wasm::adder`): the facade's shape, calls,
/// the exact-argument rule and a missing export. The calls need a WASM dispatcher, which both
/// runners have (the Node test of the browser runner skips the two that reach a Web Worker).
fn wasm_facades() -> Vec<Fixture> {
    vec![
        case(
            "wasm-facade-exports",
            "A WASM pack's facade exports each declared name as an async function, and nothing else.",
            vec![adder()],
            "import * as adder from \"@acme/adder\";\nreturn [Object.keys(adder).sort(), adder.add.constructor.name, adder.sum.constructor.name];",
        )
        .result(json!([["add", "sum"], "AsyncFunction", "AsyncFunction"])),
        case(
            "wasm-call",
            "A call through a WASM facade answers the export's result as a number, under each declared name.",
            vec![adder()],
            "import { add, sum } from \"@acme/adder\";\nreturn [await add(2, 40), await sum(-5, 3)];",
        )
        .result(json!([42, -2])),
        case(
            "wasm-call-is-a-promise",
            "A WASM facade call answers a Promise, never the value itself.",
            vec![adder()],
            "import { add } from \"@acme/adder\";\nconst p = add(1, 2);\nreturn [p instanceof Promise, await p];",
        )
        .result(json!([true, 3])),
        case(
            "wasm-argument-refused",
            "An argument the scalar contract cannot carry exactly is refused before the call, naming the module, the export and the argument.",
            vec![adder()],
            "import { add } from \"@acme/adder\";\ntry { await add(1.5, 2); return \"called\"; } catch (e) { return String(e.message); }",
        )
        .caught(&["@acme/adder: add argument 1 expects i32, received the non-integer 1.5"]),
        case(
            "wasm-arity-refused",
            "A call with the wrong number of arguments is refused before the call.",
            vec![adder()],
            "import { add } from \"@acme/adder\";\ntry { await add(1); return \"called\"; } catch (e) { return String(e.message); }",
        )
        .caught(&["@acme/adder: add takes 2 arguments, received 1"]),
        case(
            "wasm-missing-export",
            "A name the WASM contract does not export is a missing-export link error naming the specifier.",
            vec![adder()],
            "import { sub } from \"@acme/adder\";\nreturn await sub(1, 2);",
        )
        .error(RunErrorCode::MissingExport, &["@acme/adder", "sub"]),
    ]
}
