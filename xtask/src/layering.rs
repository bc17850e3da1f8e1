//! The crate map ARCHITECTURE.md draws is the one Cargo builds: every edge between workspace
//! crates (normal dependencies) that the table shows exists, and no other does.
//!
//! The table is the fenced block under "## Crates and their invariants". A line that starts a
//! row reads `<crate>[, <crate>...] [-> <dep>, <dep>...]  <what it is>`: the names before the
//! arrow are crates (without the `nodetool-` prefix), the list after it their workspace
//! dependencies, and the row's text starts after two or more spaces. A row without an arrow
//! depends on no workspace crate. Lines that start with a space continue the previous row's
//! text; a name ending in `/` is a directory that is not a crate (the browser runner).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The edges the table draws, by crate (full package names).
pub fn drawn(architecture: &str) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let section = architecture
        .split("## Crates and their invariants")
        .nth(1)
        .ok_or("ARCHITECTURE.md has no \"## Crates and their invariants\" section")?;
    let block = section
        .split("```")
        .nth(1)
        .ok_or("the crates section of ARCHITECTURE.md has no fenced table")?;
    let mut table = BTreeMap::new();
    for line in block.lines().skip(1) {
        if line.trim().is_empty() || line.starts_with(char::is_whitespace) {
            continue;
        }
        let head = line.split("  ").next().unwrap_or(line).trim();
        let (names, deps) = match head.split_once("->") {
            Some((names, deps)) => (names, deps),
            None => (head, ""),
        };
        let crates: Vec<String> = names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if crates.iter().any(|n| n.ends_with('/')) {
            continue;
        }
        let deps: BTreeSet<String> = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| format!("nodetool-{d}"))
            .collect();
        for name in crates {
            if table
                .insert(format!("nodetool-{name}"), deps.clone())
                .is_some()
            {
                return Err(format!("ARCHITECTURE.md's crate table lists {name} twice"));
            }
        }
    }
    Ok(table)
}

/// The edges Cargo builds: each workspace package's normal dependencies on workspace packages,
/// read from `cargo metadata` output.
pub fn built(metadata: &serde_json::Value) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata printed no packages")?;
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut table = BTreeMap::new();
    for package in packages {
        let Some(name) = package["name"].as_str() else {
            continue;
        };
        let deps = package["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| names.contains(d))
            .map(str::to_string)
            .collect();
        table.insert(name.to_string(), deps);
    }
    Ok(table)
}

/// Every way the two maps differ, one sentence each (empty when they agree).
pub fn differences(
    drawn: &BTreeMap<String, BTreeSet<String>>,
    built: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, deps) in built {
        let Some(shown) = drawn.get(name) else {
            out.push(format!(
                "{name} is a workspace crate the table does not show"
            ));
            continue;
        };
        for dep in deps.difference(shown) {
            out.push(format!(
                "{name} depends on {dep}, which the table does not draw"
            ));
        }
        for dep in shown.difference(deps) {
            out.push(format!(
                "the table draws {name} -> {dep}, which Cargo.toml does not have"
            ));
        }
    }
    for name in drawn.keys().filter(|n| !built.contains_key(*n)) {
        out.push(format!(
            "the table shows {name}, which is not a workspace crate"
        ));
    }
    out
}

/// Checks the table in `root/ARCHITECTURE.md` against `cargo metadata` (run by `metadata`).
pub fn check(
    root: &Path,
    metadata: impl FnOnce() -> Result<serde_json::Value, String>,
) -> Result<usize, String> {
    let path = root.join("ARCHITECTURE.md");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read ARCHITECTURE.md: {e}"))?;
    let drawn = drawn(&text)?;
    let built = built(&metadata()?)?;
    let wrong = differences(&drawn, &built);
    if wrong.is_empty() {
        Ok(built.values().map(BTreeSet::len).sum())
    } else {
        Err(format!(
            "ARCHITECTURE.md's crate table is not the workspace's:\n  - {}\nfix the table (or the dependency) so the map is true",
            wrong.join("\n  - ")
        ))
    }
}

/// The source files that allow `unsafe_code` (the workspace denies it), as paths from `root`.
pub fn unsafe_files(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.')
                    || matches!(
                        name.as_str(),
                        "target" | "node_modules" | "tests" | "benches"
                    ))
                {
                    stack.push(path);
                }
            } else if name.ends_with(".rs")
                && std::fs::read_to_string(&path).is_ok_and(|t| {
                    t.lines().any(|l| {
                        let l = l.trim_start();
                        l.starts_with("#![allow(unsafe_code)]")
                            || l.starts_with("#[allow(unsafe_code)]")
                    })
                })
            {
                let shown = path.strip_prefix(root).unwrap_or(&path);
                found.push(shown.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

/// Every file with `unsafe` is named in ARCHITECTURE.md's map (a row whose text says
/// `unsafe`, or a directory such a row names), so the claim of where it lives stays true.
pub fn check_unsafe(root: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .map_err(|e| format!("cannot read ARCHITECTURE.md: {e}"))?;
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('|') && (l.contains("unsafe") || l.contains("C API")))
        .collect();
    let files = unsafe_files(root);
    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| {
            let dir = f.rsplit_once('/').map_or("", |(d, _)| d);
            !rows
                .iter()
                .any(|r| r.contains(&format!("`{f}`")) || r.contains(&format!("`{dir}/`")))
        })
        .collect();
    if unnamed.is_empty() {
        Ok(files.len())
    } else {
        Err(format!(
            "these files allow unsafe_code but ARCHITECTURE.md's map does not name them: {}",
            unnamed
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# A\n\n## Crates and their invariants\n\n```\nprotocol            types\nruntime -> protocol  the contract\n                     more text\ncli, server -> runtime, protocol   front ends\nweb/   (npm)   the browser runner\n```\n";

    fn metadata(edges: &[(&str, &[&str])]) -> serde_json::Value {
        let packages: Vec<serde_json::Value> = edges
            .iter()
            .map(|(name, deps)| {
                let mut dependencies: Vec<serde_json::Value> = deps
                    .iter()
                    .map(|d| serde_json::json!({"name": d, "kind": null}))
                    .collect();
                // Dev and external dependencies are not edges of the map.
                dependencies.push(serde_json::json!({"name": "nodetool-tests", "kind": "dev"}));
                dependencies.push(serde_json::json!({"name": "serde", "kind": null}));
                serde_json::json!({"name": name, "dependencies": dependencies})
            })
            .collect();
        serde_json::json!({ "packages": packages })
    }

    #[test]
    fn a_true_table_passes_and_every_kind_of_drift_is_named() -> Result<(), String> {
        let drawn = drawn(DOC)?;
        let both = ["nodetool-runtime", "nodetool-protocol"];
        let truth = metadata(&[
            ("nodetool-protocol", &[]),
            ("nodetool-runtime", &["nodetool-protocol"]),
            ("nodetool-cli", &both),
            ("nodetool-server", &both),
            ("nodetool-tests", &[]),
        ]);
        // nodetool-tests is in the workspace but not in the table.
        assert_eq!(
            differences(&drawn, &built(&truth)?),
            vec!["nodetool-tests is a workspace crate the table does not show".to_string()]
        );
        let drifted = metadata(&[
            ("nodetool-protocol", &["nodetool-runtime"]),
            ("nodetool-runtime", &[]),
            ("nodetool-cli", &both),
        ]);
        let wrong = differences(&drawn, &built(&drifted)?);
        assert_eq!(
            wrong,
            vec![
                "nodetool-protocol depends on nodetool-runtime, which the table does not draw",
                "the table draws nodetool-runtime -> nodetool-protocol, which Cargo.toml does not have",
                "the table shows nodetool-server, which is not a workspace crate",
            ]
        );
        Ok(())
    }

    #[test]
    fn every_file_with_unsafe_is_on_the_map() -> Result<(), String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let files = check_unsafe(&root)?;
        assert!(files >= 4, "{files} files with unsafe");
        Ok(())
    }

    #[test]
    fn the_committed_table_is_the_workspace() -> Result<(), String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let edges = check(&root, || {
            let output = std::process::Command::new(env!("CARGO"))
                .args([
                    "metadata",
                    "--format-version",
                    "1",
                    "--no-deps",
                    "--offline",
                ])
                .current_dir(&root)
                .output()
                .map_err(|e| format!("cargo metadata: {e}"))?;
            serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))
        })?;
        assert!(edges > 10, "{edges} edges");
        Ok(())
    }
}
