//! The content-addressed cache of compile outcomes.
//!
//! Layout under the root (`$XDG_CACHE_HOME/nodetool/sandbox-modules`, chosen by the front end):
//!
//! * `entries/<key>.json`: one outcome (an admitted bundle with its exports and warnings, or a
//!   refusal with its code and message) plus every file that decided it. The key is SHA-256
//!   over a canonical JSON document of the compiler contract version, the rolldown version,
//!   the normalized options, the npm name, every input file's content hash and every
//!   resolution input (present with its hash, or absent). Paths in it are relative to the pack
//!   directory, so a checkout digests the same wherever it lives; `name@version` never enters.
//! * `index/<sha256(compilerVersion, realDir, npmName)>.json`: a pointer `{"key"}` per (pack
//!   directory, npm name), which discovery follows synchronously.
//!
//! A read re-hashes every recorded file first; any change (an edited input, a new shadowing
//! copy, a removed file) is a miss, which discovery reports as `pending-compile`. A corrupt
//! entry (unparsable, wrong version, a key that does not match its content, a source that does
//! not match its hash) is evicted and never trusted. Keys are checked to be 64 lowercase hex
//! characters before they touch a path, and every write is a temp file renamed into place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodetool_protocol::catalog::StatusCode;
use nodetool_protocol::limits::NPM_BUNDLE_BYTES;
use nodetool_runtime::{CompileRequest, CompiledArtifact, CompiledLookup, CompiledNpmModule};
use serde::{Deserialize, Serialize};

use crate::bundle::{FileRecords, MAX_INPUT_FILE_BYTES, join_relative};
use crate::{COMPILER_VERSION, ROLLDOWN_VERSION, normalized_options};
use nodetool_protocol::hex::sha256_hex;

/// The entry format tag.
const ENTRY_FORMAT: &str = "nodetool-sandbox-module-cache/1";
/// The largest entry file read back (a 1 MiB bundle escaped in JSON, plus its records).
const MAX_ENTRY_BYTES: u64 = 16 * 1024 * 1024;
/// The largest pointer file read back.
const MAX_POINTER_BYTES: u64 = 4 * 1024;

/// One recorded file: its path relative to the pack directory and its SHA-256, or `absent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    pub path: String,
    pub sha256: String,
}

const ABSENT: &str = "absent";

pub(crate) fn records(files: &FileRecords) -> Vec<Record> {
    files
        .iter()
        .map(|(path, sha)| Record {
            path: path.clone(),
            sha256: sha.clone().unwrap_or_else(|| ABSENT.into()),
        })
        .collect()
}

/// A stored outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase", deny_unknown_fields)]
pub(crate) enum Stored {
    /// Bundled, scanned and probed.
    #[serde(rename_all = "camelCase")]
    Admitted {
        source: String,
        source_sha256: String,
        exports: Vec<String>,
        warnings: Vec<String>,
    },
    /// Refused, with the compiler's code and message.
    Refused { code: StatusCode, message: String },
}

/// One cache entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Entry {
    pub format: String,
    pub key: String,
    pub npm_name: String,
    pub compiler_version: String,
    pub rolldown_version: String,
    pub options_digest: String,
    pub inputs_digest: String,
    pub inputs: Vec<Record>,
    pub resolution: Vec<Record>,
    pub stored: Stored,
}

/// The document the key hashes (field order is the canonical order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyDocument<'a> {
    format: &'a str,
    compiler_version: &'a str,
    rolldown_version: &'a str,
    options: serde_json::Value,
    npm_name: &'a str,
    inputs: &'a [Record],
    resolution: &'a [Record],
}

#[derive(Serialize)]
struct InputsDocument<'a> {
    format: &'a str,
    inputs: Vec<Record>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OptionsDocument<'a> {
    format: &'a str,
    rolldown_version: &'a str,
    options: serde_json::Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PointerName<'a> {
    compiler_version: &'a str,
    real_dir: &'a str,
    npm_name: &'a str,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    key: String,
}

fn digest_json<T: Serialize>(value: &T) -> String {
    sha256_hex(&serde_json::to_vec(value).unwrap_or_default())
}

/// The cache key of an outcome over these records.
pub(crate) fn key_of(npm: &str, inputs: &[Record], resolution: &[Record]) -> String {
    digest_json(&KeyDocument {
        format: "nodetool-sandbox-module-key/1",
        compiler_version: COMPILER_VERSION,
        rolldown_version: ROLLDOWN_VERSION,
        options: normalized_options(),
        npm_name: npm,
        inputs,
        resolution,
    })
}

/// Digest of the normalized options and the rolldown version.
pub(crate) fn options_digest() -> String {
    digest_json(&OptionsDocument {
        format: "nodetool-sandbox-module-options/1",
        rolldown_version: ROLLDOWN_VERSION,
        options: normalized_options(),
    })
}

/// Digest of the bundled inputs, each named from its package's directory on (the part after
/// the last `node_modules/`), so that it, and the module digest discovery builds from it, is
/// the same wherever the pack sits. The resolution records (which do depend on the layout
/// around the pack) key the cache but not this digest; the bundle's own hash covers what they
/// decided.
pub(crate) fn inputs_digest(inputs: &[Record], _resolution: &[Record]) -> String {
    let mut placed: Vec<Record> = inputs
        .iter()
        .map(|r| Record {
            path: r
                .path
                .rfind("node_modules/")
                .map_or(r.path.as_str(), |at| &r.path[at + "node_modules/".len()..])
                .to_string(),
            sha256: r.sha256.clone(),
        })
        .collect();
    placed.sort_by(|a, b| (&a.path, &a.sha256).cmp(&(&b.path, &b.sha256)));
    digest_json(&InputsDocument {
        format: "nodetool-sandbox-module-inputs/2",
        inputs: placed,
    })
}

/// Whether `key` is 64 lowercase hex characters (the only shape that may become a file name).
pub(crate) fn valid_key(key: &str) -> bool {
    key.len() == 64
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Entry {
    /// Builds an entry for an outcome over these records.
    pub(crate) fn new(
        npm: &str,
        inputs: Vec<Record>,
        resolution: Vec<Record>,
        stored: Stored,
    ) -> Entry {
        Entry {
            format: ENTRY_FORMAT.into(),
            key: key_of(npm, &inputs, &resolution),
            npm_name: npm.into(),
            compiler_version: COMPILER_VERSION.into(),
            rolldown_version: ROLLDOWN_VERSION.into(),
            options_digest: options_digest(),
            inputs_digest: inputs_digest(&inputs, &resolution),
            inputs,
            resolution,
            stored,
        }
    }

    /// Whether the entry is whole: its own key, this compiler, a source matching its hash.
    fn is_sound(&self, key: &str) -> bool {
        let stored_ok = match &self.stored {
            Stored::Admitted {
                source,
                source_sha256,
                ..
            } => {
                source.len() as u64 <= NPM_BUNDLE_BYTES
                    && sha256_hex(source.as_bytes()) == *source_sha256
            }
            Stored::Refused { code, .. } => matches!(
                code,
                StatusCode::NpmModuleTooLarge
                    | StatusCode::NpmModuleBuiltinImport
                    | StatusCode::NpmModuleUnresolved
                    | StatusCode::NpmModuleBundleFailed
                    | StatusCode::NpmModuleForbiddenGlobal
                    | StatusCode::NpmModuleScanRejected
                    | StatusCode::NpmModuleProbeFailed
            ),
        };
        self.format == ENTRY_FORMAT
            && self.key == key
            && self.compiler_version == COMPILER_VERSION
            && self.rolldown_version == ROLLDOWN_VERSION
            && self.options_digest == options_digest()
            && self.inputs_digest == inputs_digest(&self.inputs, &self.resolution)
            && key_of(&self.npm_name, &self.inputs, &self.resolution) == key
            && !self
                .inputs
                .iter()
                .chain(&self.resolution)
                .any(|r| join_relative(Path::new("/"), &r.path).is_none())
            && stored_ok
    }

    /// What discovery is told.
    pub(crate) fn module(&self) -> CompiledNpmModule {
        match &self.stored {
            Stored::Admitted {
                source, warnings, ..
            } => CompiledNpmModule::Admitted(CompiledArtifact {
                source: Arc::from(source.as_str()),
                compiler_version: self.compiler_version.clone(),
                options_digest: self.options_digest.clone(),
                inputs_digest: self.inputs_digest.clone(),
                warnings: warnings.clone(),
            }),
            Stored::Refused { code, message } => CompiledNpmModule::Refused {
                code: *code,
                message: message.clone(),
            },
        }
    }
}

/// The cache under one root directory. Reading never fails: every problem is a miss.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry_path(&self, key: &str) -> Option<PathBuf> {
        valid_key(key).then(|| self.root.join("entries").join(format!("{key}.json")))
    }

    fn pointer_path(&self, pack_dir: &Path, npm: &str) -> PathBuf {
        let name = digest_json(&PointerName {
            compiler_version: COMPILER_VERSION,
            real_dir: &pack_dir.to_string_lossy(),
            npm_name: npm,
        });
        self.root.join("index").join(format!("{name}.json"))
    }

    /// The entry stored under `key`, when it is sound; a corrupt one is evicted.
    pub(crate) fn load_entry(&self, key: &str) -> Option<Entry> {
        let path = self.entry_path(key)?;
        let bytes = read_capped(&path, MAX_ENTRY_BYTES)?;
        match serde_json::from_slice::<Entry>(&bytes) {
            Ok(entry) if entry.is_sound(key) => Some(entry),
            _ => {
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// The entry for `npm` in `pack_dir` (canonical), when every file it records still hashes
    /// the same.
    pub(crate) fn read(&self, pack_dir: &Path, npm: &str) -> Option<Entry> {
        let pointer_path = self.pointer_path(pack_dir, npm);
        let bytes = read_capped(&pointer_path, MAX_POINTER_BYTES)?;
        let key = match serde_json::from_slice::<Pointer>(&bytes) {
            Ok(p) if valid_key(&p.key) => p.key,
            _ => {
                let _ = std::fs::remove_file(&pointer_path);
                return None;
            }
        };
        let Some(entry) = self.load_entry(&key) else {
            let _ = std::fs::remove_file(&pointer_path);
            return None;
        };
        if entry.npm_name != npm || entry.inputs.is_empty() && entry.resolution.is_empty() {
            return None;
        }
        let current = entry
            .inputs
            .iter()
            .chain(&entry.resolution)
            .all(|r| still_matches(pack_dir, r));
        current.then_some(entry)
    }

    /// Stores `entry` and points (`pack_dir`, `npm`) at it.
    pub(crate) fn write(&self, pack_dir: &Path, npm: &str, entry: &Entry) -> Result<(), String> {
        let path = self
            .entry_path(&entry.key)
            .ok_or_else(|| "the cache key is malformed".to_string())?;
        let text =
            serde_json::to_vec(entry).map_err(|e| format!("cannot encode the cache entry: {e}"))?;
        write_atomic(&path, &text)?;
        self.point(pack_dir, npm, &entry.key)
    }

    /// Points (`pack_dir`, `npm`) at `key`.
    pub(crate) fn point(&self, pack_dir: &Path, npm: &str, key: &str) -> Result<(), String> {
        let pointer = serde_json::to_vec(&Pointer { key: key.into() })
            .map_err(|e| format!("cannot encode the cache pointer: {e}"))?;
        write_atomic(&self.pointer_path(pack_dir, npm), &pointer)
    }
}

impl CompiledLookup for Cache {
    fn lookup(&self, request: &CompileRequest<'_>) -> Option<CompiledNpmModule> {
        let dir = std::fs::canonicalize(request.pack_dir).ok()?;
        self.read(&dir, request.npm).map(|e| e.module())
    }
}

/// Whether the file a record names still has the recorded content (or is still absent).
fn still_matches(pack_dir: &Path, record: &Record) -> bool {
    let Some(path) = join_relative(pack_dir, &record.path) else {
        return false;
    };
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => record.sha256 == ABSENT,
        Err(_) => false,
        Ok(meta) if !meta.is_file() || meta.len() > MAX_INPUT_FILE_BYTES => false,
        Ok(_) => {
            record.sha256 != ABSENT
                && std::fs::read(&path).is_ok_and(|bytes| sha256_hex(&bytes) == record.sha256)
        }
    }
}

fn read_capped(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > cap {
        return None;
    }
    std::fs::read(path).ok()
}

/// Writes `bytes` to `path` atomically (`nodetool_discovery::atomic`), creating its directory.
/// A file a crash leaves short fails its checks on read and is evicted.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    nodetool_discovery::atomic::write_atomic(path, bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated_before_they_touch_a_path() {
        let cache = Cache::new("/nonexistent");
        assert!(cache.entry_path(&"a".repeat(64)).is_some());
        for bad in [
            "../../etc/passwd",
            &"A".repeat(64),
            &"a".repeat(63),
            &"g".repeat(64),
            "",
        ] {
            assert!(cache.entry_path(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_key_covers_every_record_and_the_name() {
        let inputs = vec![Record {
            path: "../node_modules/x/index.js".into(),
            sha256: "a".repeat(64),
        }];
        let resolution = vec![Record {
            path: "node_modules/x/package.json".into(),
            sha256: ABSENT.into(),
        }];
        let key = key_of("x", &inputs, &resolution);
        assert!(valid_key(&key));
        assert_ne!(key, key_of("y", &inputs, &resolution));
        assert_ne!(key, key_of("x", &inputs, &[]));
        let mut edited = inputs.clone();
        edited[0].sha256 = "b".repeat(64);
        assert_ne!(key, key_of("x", &edited, &resolution));
    }
}
