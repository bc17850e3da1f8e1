//! `nodetool packs new`: a new pack laid out as `packs doctor` wants it, in a
//! node_modules-style root (`<dir>/@scope/name`), so `--packs <dir>` finds it at once.

use std::path::Path;

use crate::{Failure, Outcome, term};

/// What the new pack's module is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kind {
    /// An authored ES module (`sandbox/index.js`).
    Js,
    /// An npm library, bundled into a sandbox module by `nodetool packs compile`.
    Npm,
    /// A WASM binary behind a scalar facade (`sandbox/module.wasm`, exporting `add`).
    Wasm,
}

/// A module exporting `add(i32, i32) -> i32` and nothing else: the smallest binary the scalar
/// contract admits (no memory, no imports).
const ADD_WASM: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type: (i32, i32) -> i32
    0x03, 0x02, 0x01, 0x00, // function 0 has type 0
    0x07, 0x07, 0x01, 0x03, b'a', b'd', b'd', 0x00, 0x00, // export "add" = function 0
    0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b, // local0 + local1
];

fn files(name: &str, short: &str, kind: Kind) -> Vec<(&'static str, Vec<u8>)> {
    // A SKILL.md name is `[a-z0-9-]`.
    let skill_name: String = short
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let skill = |usage: &str| {
        format!(
            "---\nname: {skill_name}\ndescription: What {name} does, in one sentence an agent can act on.\n---\n# {short}\n\nImport it at the top of the body:\n\n```js\n{usage}\n```\n"
        )
        .into_bytes()
    };
    match kind {
        Kind::Js => vec![
            (
                "package.json",
                serde_json::to_vec_pretty(&serde_json::json!({
                    "name": name,
                    "version": "0.1.0",
                    "description": format!("{short}: a sandbox pack"),
                    "keywords": ["nodetool-sandbox-pack"],
                    "type": "module",
                    "files": ["SKILL.md", "sandbox"],
                    "nodetool": {
                        "apiVersion": 1,
                        "sandboxModules": [{ "name": ".", "kind": "js", "file": "sandbox/index.js" }]
                    }
                }))
                .unwrap_or_default(),
            ),
            (
                "sandbox/index.js",
                b"/** Greets `who`. Plain ES module code: no Node APIs, no eval, no dynamic import. */\nexport function greet(who) {\n  return `hello, ${who}`;\n}\n".to_vec(),
            ),
            (
                "SKILL.md",
                skill(&format!(
                    "import {{ greet }} from \"{name}\";\nreturn greet(\"world\"); // \"hello, world\""
                )),
            ),
        ],
        Kind::Npm => vec![
            (
                "package.json",
                serde_json::to_vec_pretty(&serde_json::json!({
                    "name": name,
                    "version": "0.1.0",
                    "description": format!("{short}: an npm library as a sandbox module"),
                    "keywords": ["nodetool-sandbox-pack"],
                    "files": ["SKILL.md"],
                    "dependencies": { "js-yaml": "5.5.0" },
                    "nodetool": {
                        "apiVersion": 1,
                        "sandboxModules": [{ "name": ".", "kind": "js", "npm": "js-yaml" }]
                    }
                }))
                .unwrap_or_default(),
            ),
            (
                "SKILL.md",
                skill(&format!(
                    "import {{ load }} from \"{name}\";\nreturn load(\"a: 1\"); // {{ a: 1 }}"
                )),
            ),
        ],
        Kind::Wasm => vec![
            (
                "package.json",
                serde_json::to_vec_pretty(&serde_json::json!({
                    "name": name,
                    "version": "0.1.0",
                    "description": format!("{short}: a WASM module behind a scalar facade"),
                    "keywords": ["nodetool-sandbox-pack"],
                    "files": ["SKILL.md", "sandbox"],
                    "nodetool": {
                        "apiVersion": 1,
                        "sandboxModules": [{
                            "name": ".",
                            "kind": "wasm",
                            "file": "sandbox/module.wasm",
                            "memoryPagesMax": 1,
                            "exports": ["add"]
                        }]
                    }
                }))
                .unwrap_or_default(),
            ),
            ("sandbox/module.wasm", ADD_WASM.to_vec()),
            (
                "SKILL.md",
                skill(&format!(
                    "import {{ add }} from \"{name}\";\nreturn await add(2, 3); // 5 (WASM exports return Promises)"
                )),
            ),
        ],
    }
}

/// Writes the pack; refuses a name that is not a package name or a directory that exists.
pub(crate) fn new_pack(name: &str, kind: Kind, root: &Path) -> Outcome {
    nodetool_protocol::names::check_package_name(name)
        .map_err(|e| Failure::Usage(format!("{name:?} {e}")))?;
    let short = name.rsplit('/').next().unwrap_or(name);
    let dir = root.join(name);
    if dir.exists() {
        return Err(Failure::Usage(format!(
            "{} already exists; choose another name or --dir",
            dir.display()
        )));
    }
    let written = files(name, short, kind);
    for (file, bytes) in &written {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::Usage(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, bytes)
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", path.display())))?;
    }
    let root_shown = root.display().to_string();
    let next = match kind {
        Kind::Npm => format!(
            "npm install --ignore-scripts --prefix {0}/{name} && nodetool packs compile --packs {0}",
            root_shown
        ),
        Kind::Js | Kind::Wasm => format!("nodetool packs doctor {name} --packs {root_shown}"),
    };
    if term::json() {
        crate::print_json(&serde_json::json!({
            "ok": true,
            "name": name,
            "dir": dir.display().to_string(),
            "files": written.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            "next": next,
        }));
    } else {
        outln!(
            "created {} ({} files)",
            term::safe(&dir.display().to_string()),
            written.len()
        );
        outln!("next: {}", term::safe(&next));
    }
    Ok(())
}
