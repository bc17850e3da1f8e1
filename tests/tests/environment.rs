//! Every environment variable the workspace reads is documented once (`protocol::env`), and
//! README.md's table is the generated one. The source files of every crate (libraries,
//! binaries, benches, build scripts and xtask; not the integration tests, whose variables are
//! the harness's) are scanned for what they read: a `var`/`var_os`/`env!`/`option_env!` of a
//! literal name, and any string literal that is a `NODETOOL_` or `XDG_` name (which is how the
//! readers that pass names around, like `Environment::from_vars`, spell them).
//! Set `NODETOOL_UPDATE_DOCS=1` to rewrite README.md's table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nodetool_protocol::env::{VARIABLES, docs_table, variable};

const BEGIN: &str = "<!-- environment-variables:begin -->\n";
const END: &str = "<!-- environment-variables:end -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Rust files to scan: every `src/`, `benches/` and `build.rs` of the workspace's crates.
fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skip = name.starts_with('.')
                    || matches!(
                        name.as_str(),
                        "target" | "node_modules" | "tests" | "web" | "packs" | "docs" | "fixtures"
                    );
                if !skip {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The names `text` reads or spells.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for opener in ["var_os(\"", "var(\"", "env!(\"", "option_env!(\""] {
        for (at, _) in text.match_indices(opener) {
            let rest = &text[at + opener.len()..];
            if let Some(end) = rest.find('"') {
                found.insert(rest[..end].to_string());
            }
        }
    }
    for (at, _) in text.match_indices('"') {
        let rest = &text[at + 1..];
        if !(rest.starts_with("NODETOOL_") || rest.starts_with("XDG_")) {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if rest[name.len()..].starts_with('"') {
            found.insert(name);
        }
    }
    // Cargo's own variables (`OUT_DIR` too), and prefixes (`"XDG_"`) that are not names.
    found.retain(|n| {
        !n.starts_with("CARGO") && n != "OUT_DIR" && !n.is_empty() && !n.ends_with('_')
    });
    found
}

#[test]
fn every_variable_read_is_documented_and_every_documented_one_is_read() {
    let mut read = BTreeSet::new();
    let mut undocumented = Vec::new();
    for file in sources() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for name in names_in(&text) {
            if variable(&name).is_none() {
                let shown = file
                    .strip_prefix(root())
                    .unwrap_or(&file)
                    .display()
                    .to_string();
                undocumented.push(format!("{name} (read in {shown})"));
            }
            read.insert(name);
        }
    }
    assert!(
        undocumented.is_empty(),
        "variables read but not documented in protocol/src/env.rs:\n  {}",
        undocumented.join("\n  ")
    );
    // HOME and the XDG directories are also read by the tests' harness, so every row but the
    // test-only ones must be read by a scanned source.
    let stale: Vec<&str> = VARIABLES
        .iter()
        .map(|v| v.name)
        .filter(|n| !read.contains(*n))
        .collect();
    assert!(
        stale.is_empty(),
        "protocol/src/env.rs documents variables nothing reads: {stale:?}"
    );
}

#[test]
fn the_readme_table_is_the_generated_one() {
    let path = root().join("README.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("README.md: {e}"));
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("README.md has no {BEGIN:?}..{END:?} block");
    };
    let wanted = docs_table();
    if text[start + BEGIN.len()..end] == wanted {
        return;
    }
    if std::env::var_os("NODETOOL_UPDATE_DOCS").is_some() {
        let updated = format!("{}{wanted}{}", &text[..start + BEGIN.len()], &text[end..]);
        std::fs::write(&path, updated).unwrap_or_else(|e| panic!("README.md: {e}"));
        return;
    }
    panic!(
        "README.md's environment table is stale; run `NODETOOL_UPDATE_DOCS=1 cargo test -p nodetool-tests --test environment`"
    );
}

#[test]
fn the_scanner_finds_each_way_of_reading() {
    let text = r#"std::env::var_os("NO_COLOR"); env::var("BENCH_ONLY"); env!("NODETOOL_LOCKED_X"); path("XDG_DATA_HOME"); const A: &str = "NODETOOL_Y"; "NODETOOL_not a name"; env!("CARGO_MANIFEST_DIR")"#;
    let names: Vec<String> = names_in(text).into_iter().collect();
    assert_eq!(
        names,
        [
            "BENCH_ONLY",
            "NODETOOL_LOCKED_X",
            "NODETOOL_Y",
            "NO_COLOR",
            "XDG_DATA_HOME"
        ]
    );
}
