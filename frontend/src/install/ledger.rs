//! The install ledger, `nodetool-packs.json` beside the installed root's `node_modules`:
//! `{"version": 1, "packs": {"<name>": <record>}}`, one record per pack this tool installed.
//!
//! A ledger that does not parse is an error, never an empty ledger: an install over it would
//! forget which packs ran their scripts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::lockfile::LockedPackage;

/// What the installed manifest asks of the host, read from the artifact on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `nodetool.sandboxModules` and no `register`: runs only inside the sandbox.
    SandboxOnly,
    /// `nodetool.register` and no sandbox modules: host code.
    Register,
    /// Both.
    Hybrid,
    /// No `nodetool` block NodeTool can read: never trusted.
    Unknown,
}

impl Mode {
    /// The wire word (`sandbox-only`, `register`, `hybrid`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::SandboxOnly => "sandbox-only",
            Mode::Register => "register",
            Mode::Hybrid => "hybrid",
            Mode::Unknown => "unknown",
        }
    }

    /// A sentence saying what the mode means, for a person choosing whether to trust.
    pub fn meaning(self) -> &'static str {
        match self {
            Mode::SandboxOnly => {
                "runs inside your workflows with the node's capabilities; no host code, no install scripts"
            }
            Mode::Register => {
                "ships host code that runs outside the sandbox; inactive, its install scripts not run, until trusted"
            }
            Mode::Hybrid => {
                "ships host code and sandbox modules; inactive, its install scripts not run, until trusted"
            }
            Mode::Unknown => "declares nothing NodeTool can use; it can never be trusted",
        }
    }
}

/// Classifies a package from its installed `package.json`.
pub fn classify(manifest: &serde_json::Value) -> Mode {
    let Some(block) = manifest.get("nodetool").and_then(|b| b.as_object()) else {
        return Mode::Unknown;
    };
    let sandbox = block
        .get("sandboxModules")
        .is_some_and(serde_json::Value::is_array);
    let register = block
        .get("register")
        .is_some_and(|r| !r.is_null() && r != &serde_json::Value::Bool(false));
    match (sandbox, register) {
        (true, false) => Mode::SandboxOnly,
        (false, true) => Mode::Register,
        (true, true) => Mode::Hybrid,
        (false, false) => Mode::Unknown,
    }
}

/// Whether a pack's lifecycle scripts have run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scripts {
    Skipped,
    Ran,
}

impl Scripts {
    pub fn as_str(self) -> &'static str {
        match self {
            Scripts::Skipped => "skipped",
            Scripts::Ran => "ran",
        }
    }
}

/// One installed pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    pub pack_name: String,
    pub version: String,
    /// What the user asked to install (a registry spec, or the local file's name).
    pub spec: String,
    pub mode: Mode,
    pub active: bool,
    pub scripts: Scripts,
    /// The pack and every package in its dependency closure, as the lockfile named them at
    /// install time.
    pub closure: Vec<LockedPackage>,
}

/// The whole ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    pub version: u32,
    pub packs: BTreeMap<String, Record>,
}

impl Record {
    /// The lockfile integrity of the installed artifact itself (the closure's entry at
    /// `node_modules/<name>`): the pack's identity for consent
    /// ([`nodetool_discovery::trust::Identity`]).
    pub fn integrity(&self) -> Option<&str> {
        let path = format!("node_modules/{}", self.pack_name);
        self.closure
            .iter()
            .find(|p| p.path == path)
            .and_then(|p| p.integrity.as_deref())
            .filter(|i| !i.is_empty())
    }

    /// The row `packs list --json` shows under `installed` (and the install answers carry):
    /// `{"packName", "version", "mode", "active", "scripts"}`. No path.
    pub fn row_json(&self) -> serde_json::Value {
        serde_json::json!({
            "packName": self.pack_name,
            "version": self.version,
            "mode": self.mode.as_str(),
            "active": self.active,
            "scripts": self.scripts.as_str(),
        })
    }
}

impl Ledger {
    /// Every row, in name order (`packs list --json`'s `installed`).
    pub fn rows_json(&self) -> serde_json::Value {
        serde_json::Value::Array(self.packs.values().map(Record::row_json).collect())
    }

    /// Reads the ledger at `path`; a missing file is an empty ledger.
    pub fn read(path: &Path) -> Result<Ledger, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Ledger {
                    version: 1,
                    packs: BTreeMap::new(),
                });
            }
            Err(e) => return Err(format!("{}: cannot be read ({e})", path.display())),
        };
        let ledger: Ledger = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: the install ledger is corrupt ({e}); fix or remove it by hand",
                path.display()
            )
        })?;
        if ledger.version != 1 {
            return Err(format!(
                "{}: the install ledger has version {}, this nodetool reads version 1",
                path.display(),
                ledger.version
            ));
        }
        for (name, record) in &ledger.packs {
            if *name != record.pack_name {
                return Err(format!(
                    "{}: the install ledger is corrupt (the row {name:?} records {:?})",
                    path.display(),
                    record.pack_name
                ));
            }
        }
        Ok(ledger)
    }

    /// Writes the ledger atomically: a temporary file beside it, renamed over it.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("the install ledger cannot be encoded ({e})"))?;
        nodetool_discovery::trust::write_atomically(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classification_reads_the_nodetool_block() {
        let c = |v| classify(&v);
        assert_eq!(
            c(json!({"nodetool": {"sandboxModules": []}})),
            Mode::SandboxOnly
        );
        assert_eq!(
            c(json!({"nodetool": {"register": "./x.js"}})),
            Mode::Register
        );
        assert_eq!(
            c(json!({"nodetool": {"register": "./x.js", "sandboxModules": []}})),
            Mode::Hybrid
        );
        assert_eq!(c(json!({"nodetool": {}})), Mode::Unknown);
        assert_eq!(c(json!({"name": "x"})), Mode::Unknown);
        assert_eq!(c(json!({"nodetool": "sandbox"})), Mode::Unknown);
        assert_eq!(
            c(json!({"nodetool": {"sandboxModules": "x"}})),
            Mode::Unknown
        );
    }

    #[test]
    fn a_records_identity_is_the_integrity_of_the_pack_itself() {
        let locked = |path: &str, integrity: Option<&str>| LockedPackage {
            path: path.into(),
            name: path
                .rsplit("node_modules/")
                .next()
                .unwrap_or_default()
                .into(),
            version: Some("1.0.0".into()),
            resolved: None,
            integrity: integrity.map(str::to_string),
        };
        let mut record = Record {
            pack_name: "@acme/geo".into(),
            version: "1.0.0".into(),
            spec: "./geo.tgz".into(),
            mode: Mode::SandboxOnly,
            active: true,
            scripts: Scripts::Skipped,
            closure: vec![
                locked("node_modules/dep", Some("sha512-dep")),
                locked("node_modules/@acme/geo", Some("sha512-geo")),
            ],
        };
        assert_eq!(record.integrity(), Some("sha512-geo"));
        record.closure[1].integrity = Some(String::new());
        assert_eq!(record.integrity(), None);
        record.closure.truncate(1);
        assert_eq!(record.integrity(), None);
    }

    #[test]
    fn a_missing_ledger_is_empty_and_a_corrupt_one_is_an_error() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let Ok(dir) = dir else { return };
        let path = dir.path().join("nodetool-packs.json");
        assert_eq!(Ledger::read(&path).map(|l| l.packs.len()), Ok(0));
        let _ = std::fs::write(&path, "{\"version\": 1, \"packs\": [");
        let error = Ledger::read(&path).err().unwrap_or_default();
        assert!(error.contains("install ledger is corrupt"), "{error}");
        let _ = std::fs::write(&path, "{\"version\": 2, \"packs\": {}}");
        let error = Ledger::read(&path).err().unwrap_or_default();
        assert!(error.contains("version 2"), "{error}");
        let ledger = Ledger {
            version: 1,
            packs: BTreeMap::new(),
        };
        assert_eq!(ledger.write(&path), Ok(()));
        assert_eq!(Ledger::read(&path), Ok(ledger));
    }
}
