//! A pack's dependency closure read from npm's `package-lock.json` (lockfile version 2 or 3:
//! the `packages` map keyed by install path).
//!
//! The closure is what `--ignore-scripts` kept from running: the pack and every package it
//! depends on, found the way Node resolves them (the nearest `node_modules` up the install
//! path). Each member is recorded with its lockfile identity — version, resolved URL and
//! integrity — so `trust` can prove the artifacts on disk are the ones that were installed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One package of a closure as the lockfile names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockedPackage {
    /// The install path, e.g. `node_modules/a/node_modules/b`.
    pub path: String,
    /// The package name (from the path).
    pub name: String,
    pub version: Option<String>,
    pub resolved: Option<String>,
    pub integrity: Option<String>,
}

/// The package name an install path ends with (`node_modules/@s/n` -> `@s/n`).
fn name_of(path: &str) -> &str {
    path.rsplit_once("node_modules/").map_or(path, |(_, t)| t)
}

/// The install path of the package that requires from `from`, one level up (`""` is the root).
fn parent_of(from: &str) -> Option<&str> {
    if from.is_empty() {
        return None;
    }
    Some(from.rfind("/node_modules/").map_or("", |i| &from[..i]))
}

/// Where `dependency`, required from the package at `from`, resolves in `packages`.
fn resolve<'a>(
    packages: &'a serde_json::Map<String, Value>,
    from: &str,
    dependency: &str,
) -> Option<(&'a String, &'a Value)> {
    let mut base = Some(from);
    while let Some(b) = base {
        let candidate = if b.is_empty() {
            format!("node_modules/{dependency}")
        } else {
            format!("{b}/node_modules/{dependency}")
        };
        if let Some(found) = packages.get_key_value(&candidate) {
            return Some(found);
        }
        base = parent_of(b);
    }
    None
}

/// The closure of the pack installed as `node_modules/<name>`, sorted by install path.
///
/// Errors name what is missing: a lockfile without a `packages` map, a pack the lockfile does
/// not list, or a required (non-optional) dependency that resolves nowhere.
pub fn closure(lockfile: &Value, name: &str) -> Result<Vec<LockedPackage>, String> {
    let packages = lockfile
        .get("packages")
        .and_then(Value::as_object)
        .ok_or("it has no \"packages\" map (lockfile version 2 or later is needed)")?;
    let start = format!("node_modules/{name}");
    if !packages.contains_key(&start) {
        return Err(format!("it does not list {name}"));
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut queue = vec![start];
    while let Some(path) = queue.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let Some(entry) = packages.get(&path) else {
            continue;
        };
        // A link points at the directory that holds the real entry.
        let (path, entry) = match (entry.get("link"), entry.get("resolved")) {
            (Some(Value::Bool(true)), Some(Value::String(target))) => match packages
                .get_key_value(target.as_str())
            {
                Some((p, e)) => (p.clone(), e),
                None => return Err(format!("{path} links to {target}, which it does not list")),
            },
            _ => (path, entry),
        };
        let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
        out.insert(
            path.clone(),
            LockedPackage {
                name: text("name").unwrap_or_else(|| name_of(&path).to_string()),
                version: text("version"),
                resolved: text("resolved"),
                integrity: text("integrity"),
                path: path.clone(),
            },
        );
        for (field, required) in [
            ("dependencies", true),
            ("optionalDependencies", false),
            ("peerDependencies", false),
        ] {
            let Some(deps) = entry.get(field).and_then(Value::as_object) else {
                continue;
            };
            for dependency in deps.keys() {
                match resolve(packages, &path, dependency) {
                    Some((found, _)) => queue.push(found.clone()),
                    None if required => {
                        return Err(format!(
                            "{} depends on {dependency}, which it does not list",
                            name_of(&path)
                        ));
                    }
                    None => {}
                }
            }
        }
    }
    Ok(out.into_values().collect())
}

/// Every difference between a recorded closure and the lockfile's current one, each a sentence
/// naming the package and the field.
pub fn differences(recorded: &[LockedPackage], current: &[LockedPackage]) -> Vec<String> {
    let by_path = |list: &[LockedPackage]| -> BTreeMap<String, LockedPackage> {
        list.iter().map(|p| (p.path.clone(), p.clone())).collect()
    };
    let (recorded, current) = (by_path(recorded), by_path(current));
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    let mut out = Vec::new();
    for (path, was) in &recorded {
        let Some(now) = current.get(path) else {
            out.push(format!(
                "{} ({path}) is no longer in the lockfile",
                was.name
            ));
            continue;
        };
        for (field, a, b) in [
            ("version", &was.version, &now.version),
            ("resolved", &was.resolved, &now.resolved),
            ("integrity", &was.integrity, &now.integrity),
        ] {
            if a != b {
                out.push(format!(
                    "{} ({path}): {field} is {} in the lockfile but {} was installed",
                    was.name,
                    show(b),
                    show(a)
                ));
            }
        }
    }
    for (path, now) in &current {
        if !recorded.contains_key(path) {
            out.push(format!(
                "{} ({path}) joined the closure after the install",
                now.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock() -> Value {
        json!({
            "lockfileVersion": 3,
            "packages": {
                "": { "dependencies": { "a": "1" } },
                "node_modules/a": { "version": "1.0.0", "resolved": "r-a", "integrity": "i-a",
                    "dependencies": { "b": "1", "@s/c": "1" }, "optionalDependencies": { "gone": "1" } },
                "node_modules/a/node_modules/b": { "version": "2.0.0", "resolved": "r-b2", "integrity": "i-b2",
                    "dependencies": { "@s/c": "1" } },
                "node_modules/b": { "version": "1.0.0", "resolved": "r-b1", "integrity": "i-b1" },
                "node_modules/@s/c": { "version": "3.0.0", "resolved": "r-c", "integrity": "i-c",
                    "dependencies": { "a": "1" } },
                "node_modules/unrelated": { "version": "9.0.0" }
            }
        })
    }

    #[test]
    fn the_closure_follows_node_resolution_and_stops_at_cycles() {
        let c = closure(&lock(), "a").unwrap_or_default();
        let paths: Vec<&str> = c.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "node_modules/@s/c",
                "node_modules/a",
                "node_modules/a/node_modules/b"
            ]
        );
        assert_eq!(c[0].name, "@s/c");
        assert_eq!(c[2].version.as_deref(), Some("2.0.0"));
    }

    #[test]
    fn a_missing_required_dependency_or_pack_is_an_error() {
        let mut l = lock();
        l["packages"]
            .as_object_mut()
            .map(|p| p.remove("node_modules/@s/c"));
        assert_eq!(
            closure(&l, "a"),
            Err("a depends on @s/c, which it does not list".into())
        );
        assert_eq!(closure(&l, "zz"), Err("it does not list zz".into()));
        assert!(closure(&json!({}), "a").is_err());
    }

    #[test]
    fn differences_name_the_package_and_the_field() {
        let before = closure(&lock(), "a").unwrap_or_default();
        let mut l = lock();
        l["packages"]["node_modules/a/node_modules/b"]["integrity"] = json!("i-evil");
        let after = closure(&l, "a").unwrap_or_default();
        assert_eq!(
            differences(&before, &after),
            [
                "b (node_modules/a/node_modules/b): integrity is i-evil in the lockfile but i-b2 was installed"
            ]
        );
        assert!(differences(&before, &before).is_empty());
        assert_eq!(differences(&before, &after[..1]).len(), 2);
    }
}
