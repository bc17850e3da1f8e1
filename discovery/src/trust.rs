//! The operator's pack allowlist: which packs are *trusted* (their SKILL.md registers as an
//! ordinary skill, and CodeAct sessions allow them by default). A JSON file the caller names
//! (the CLI uses `$XDG_CONFIG_HOME/nodetool/packs.json`): `{"allowed": ["<package name>", ...]}`.

use std::collections::BTreeSet;
use std::path::Path;

/// Reads the allowlist at `path`. A missing file is an empty allowlist; a malformed one is an
/// error naming the file and what is wrong.
pub fn read_allowlist(path: &Path) -> Result<BTreeSet<String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(format!("{}: cannot be read ({e})", path.display())),
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: is not valid JSON ({e})", path.display()))?;
    let allowed = value
        .get("allowed")
        .and_then(|a| a.as_array())
        .ok_or_else(|| {
            format!(
                "{}: expected {{\"allowed\": [\"<package name>\", ...]}}",
                path.display()
            )
        })?;
    allowed
        .iter()
        .map(|v| {
            v.as_str().map(str::to_string).ok_or_else(|| {
                format!(
                    "{}: every allowed entry must be a package name string",
                    path.display()
                )
            })
        })
        .collect()
}

/// Writes the allowlist atomically (a temporary file renamed over the old one), creating the
/// directory if needed.
pub fn write_allowlist(path: &Path, allowed: &BTreeSet<String>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot be created ({e})", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({ "allowed": allowed }))
        .unwrap_or_default();
    write_atomically(path, &text)
}

/// Writes `text` and a final newline to `path` atomically ([`write_bytes_atomically`]).
/// Operator files (the allowlist, the install ledger) are written this way.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    write_bytes_atomically(path, format!("{text}\n").as_bytes())
}

/// Writes `bytes` to `path` through a temporary file beside it (named for this process, so
/// two writers never share one) and a rename, so a reader sees the old file or the new one,
/// never half of either.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    std::fs::write(&temporary, bytes)
        .map_err(|e| format!("{}: cannot be written ({e})", temporary.display()))?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("{}: cannot be replaced ({e})", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("nodetool/packs.json");
        assert_eq!(read_allowlist(&path), Ok(BTreeSet::new()));
        let set = BTreeSet::from(["@acme/geo".to_string()]);
        assert_eq!(write_allowlist(&path, &set), Ok(()));
        assert_eq!(read_allowlist(&path), Ok(set));
        std::fs::write(&path, "{\"allowed\": [1]}").unwrap_or_default();
        assert!(read_allowlist(&path).is_err());
        std::fs::write(&path, "nope").unwrap_or_default();
        assert!(
            read_allowlist(&path)
                .err()
                .unwrap_or_default()
                .contains("not valid JSON")
        );
    }
}
