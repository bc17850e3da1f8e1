//! Discovery of one pack directory: package.json to a checked module graph, or the statuses
//! that say why the pack is withheld. Never executes pack code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use nodetool_protocol::catalog::{
    Bytes, FileContent, ModuleKind, ResolvedKind, Status, StatusCode, StatusLevel,
};
use nodetool_protocol::facade::{
    HOST_FACADE_VERSION, WASM_FACADE_VERSION, host_facade_source, wasm_facade_source,
};
use nodetool_protocol::host::{HostViolation, host_module, host_module_violation};
use nodetool_protocol::limits::{
    AUTHORED_JS_BYTES, NPM_BUNDLE_BYTES, PACK_BYTES, PACKAGE_JSON_BYTES, SKILL_BYTES, WASM_BYTES,
};
use nodetool_protocol::manifest::{ManifestModule, ModuleSource, SandboxManifest, parse_manifest};
use nodetool_protocol::names::{check_package_name, normalize_specifier};
use nodetool_protocol::skill::{SkillDocument, parse_skill_document};
use nodetool_runtime::{CompileRequest, CompiledArtifact, CompiledLookup, CompiledNpmModule};

use crate::digest::{
    DigestCompiled, DigestEntry, DigestFacade, ModuleDigestInput, module_digest, pack_digest,
};
use crate::files::{FileError, check_pack_file, read_capped, read_pack_metadata_file};
use crate::js::scan_module;
use nodetool_jssource::relative::{is_relative, join_relative, relative_candidates};
use nodetool_protocol::hex::sha256_hex;
use nodetool_runtime::wasm_contract::check_wasm;

/// A file of a pack's sandbox graph.
#[derive(Debug, Clone)]
pub(crate) struct PackFile {
    pub id: String,
    pub internal: bool,
    pub dependencies: Vec<String>,
    pub content: FileContent,
    pub sha256: String,
}

impl PackFile {
    fn kind(&self) -> &'static str {
        match self.content {
            FileContent::Js { .. } => "js",
            FileContent::Wasm { .. } => "wasm",
        }
    }

    fn digest_entry(&self) -> DigestEntry<'_> {
        DigestEntry {
            id: &self.id,
            kind: self.kind(),
            internal: self.internal,
            dependencies: &self.dependencies,
            sha256: &self.sha256,
        }
    }
}

/// One module of a discovered pack.
#[derive(Debug, Clone)]
pub(crate) struct PackModule {
    pub specifier: String,
    pub kind: ModuleKind,
    /// The entry's graph id: a file id, `npm:<name>` or `host:<id>`.
    pub module_id: String,
    pub digest: String,
    pub state: ModuleState,
}

/// Whether a module can be mounted.
#[derive(Debug, Clone)]
pub(crate) enum ModuleState {
    Ready {
        /// Graph ids reachable from the entry, sorted (empty for host modules).
        reachable: Vec<String>,
        kind: ResolvedKind,
        /// The generated facade, for host modules.
        facade: Option<Arc<str>>,
    },
    /// Discovered, but there is nothing to execute; the reason in words.
    Unavailable(String),
}

/// A pack that passed discovery.
#[derive(Debug, Clone)]
pub struct PackDiscovery {
    pub(crate) name: String,
    pub(crate) version: Option<String>,
    pub(crate) graph_digest: String,
    pub(crate) files: BTreeMap<String, PackFile>,
    pub(crate) modules: Vec<PackModule>,
    pub(crate) statuses: Vec<Status>,
    pub(crate) skill: Option<SkillDocument>,
}

impl PackDiscovery {
    /// The package name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The package version, when package.json has one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The pack's graph digest (see the digest module for its canonical form).
    pub fn graph_digest(&self) -> &str {
        &self.graph_digest
    }

    /// Statuses discovery attached to the pack (warnings, npm outcomes).
    pub fn statuses(&self) -> &[Status] {
        &self.statuses
    }
}

/// What discovering one directory produced.
#[derive(Debug, Clone)]
pub enum PackOutcome {
    /// No package.json, or no `nodetool.sandboxModules`: not a sandbox pack.
    NotAPack,
    /// A pack whose every rule holds.
    Discovered(Box<PackDiscovery>),
    /// A pack withheld whole, with every reason.
    Refused {
        /// Its package name, when package.json had a valid one.
        name: Option<String>,
        /// Why, as error statuses.
        statuses: Vec<Status>,
    },
}

/// A broken rule before it becomes a status.
struct Problem {
    code: StatusCode,
    specifier: Option<String>,
    message: String,
}

struct Problems<'a> {
    pack: &'a str,
    list: Vec<Problem>,
}

impl Problems<'_> {
    fn add(&mut self, code: StatusCode, specifier: Option<&str>, message: String) {
        self.list.push(Problem {
            code,
            specifier: specifier.map(str::to_string),
            message,
        });
    }

    fn into_statuses(self) -> Vec<Status> {
        let pack = self.pack;
        self.list
            .into_iter()
            .map(|p| Status {
                pack_name: pack.to_string(),
                specifier: p.specifier,
                status: StatusLevel::Error,
                code: p.code,
                message: format!("{pack}: {}", p.message),
            })
            .collect()
    }
}

fn failed(label: &str, message: String) -> PackOutcome {
    PackOutcome::Refused {
        name: None,
        statuses: vec![Status {
            pack_name: label.to_string(),
            specifier: None,
            status: StatusLevel::Error,
            code: StatusCode::DiscoveryFailed,
            message: format!("{label}: {message}"),
        }],
    }
}

/// A declared file before it is read: which module(s) own it and what kind it is.
#[derive(Debug, Clone)]
struct Declared {
    specifier: Option<String>,
    internal: bool,
    wasm: bool,
}

impl Declared {
    /// The byte cap of the file: a WASM binary's, or an authored JavaScript file's.
    fn cap(&self) -> u64 {
        if self.wasm {
            WASM_BYTES
        } else {
            AUTHORED_JS_BYTES
        }
    }
}

/// Discovers the pack in `dir`. `label` names the directory in diagnostics when package.json
/// cannot give a name (e.g. `node_modules/@acme/geo`); it is chosen by the caller so no
/// absolute path has to appear.
pub fn discover_pack(dir: &Path, label: &str, compiled: &dyn CompiledLookup) -> PackOutcome {
    let root = match std::fs::canonicalize(dir) {
        Ok(root) => root,
        Err(e) => return failed(label, format!("the pack directory cannot be read ({e})")),
    };
    let package_json = match read_pack_metadata_file(&root, "package.json", PACKAGE_JSON_BYTES) {
        Ok(None) => return PackOutcome::NotAPack,
        Ok(Some(bytes)) => bytes,
        Err(e) => {
            return failed(
                label,
                format!(
                    "package.json {}",
                    describe_file_error("package.json", &e, PACKAGE_JSON_BYTES)
                ),
            );
        }
    };
    let package: serde_json::Value = match serde_json::from_slice(&package_json) {
        Ok(v) => v,
        Err(e) => return failed(label, format!("package.json is not valid JSON ({e})")),
    };
    let Some(nodetool) = package.get("nodetool") else {
        return PackOutcome::NotAPack;
    };
    if nodetool.get("sandboxModules").is_none() {
        return PackOutcome::NotAPack;
    }
    let name = match package.get("name").and_then(|n| n.as_str()) {
        Some(n) if check_package_name(n).is_ok() => n.to_string(),
        _ => return failed(label, "package.json has no valid package name".into()),
    };
    let version = package
        .get("version")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let mut problems = Problems {
        pack: &name,
        list: Vec::new(),
    };
    let manifest = match parse_manifest(nodetool) {
        Ok(Some(m)) => m,
        Ok(None) => return PackOutcome::NotAPack,
        Err(errors) => {
            for e in errors {
                problems.add(
                    StatusCode::ManifestInvalid,
                    None,
                    format!("invalid nodetool manifest: nodetool.{e}"),
                );
            }
            return PackOutcome::Refused {
                name: Some(name.clone()),
                statuses: problems.into_statuses(),
            };
        }
    };
    match Discovery::run(
        &root,
        &name,
        version.as_deref(),
        &manifest,
        compiled,
        &mut problems,
    ) {
        Some(pack) if problems.list.is_empty() => PackOutcome::Discovered(Box::new(pack)),
        _ => PackOutcome::Refused {
            name: Some(name.clone()),
            statuses: problems.into_statuses(),
        },
    }
}

/// Every declared file, with who declares it.
fn declared_files(manifest: &SandboxManifest, specifiers: &[String]) -> BTreeMap<String, Declared> {
    let mut declared: BTreeMap<String, Declared> = BTreeMap::new();
    for (m, specifier) in manifest.modules.iter().zip(specifiers) {
        if let Some(file) = m.source.file() {
            let wasm = matches!(m.source, ModuleSource::Wasm { .. });
            declared.insert(
                file.to_string(),
                Declared {
                    specifier: Some(specifier.clone()),
                    internal: false,
                    wasm,
                },
            );
        }
    }
    for file in &manifest.internal {
        declared.insert(
            file.clone(),
            Declared {
                specifier: None,
                internal: true,
                wasm: false,
            },
        );
    }
    declared
}

/// The admitted npm artifacts as pack files (`npm:<name>`).
fn add_npm_files(
    files: &mut BTreeMap<String, PackFile>,
    artifacts: &BTreeMap<String, CompiledArtifact>,
) {
    for (npm, artifact) in artifacts {
        let id = npm_module_id(npm);
        files.insert(
            id.clone(),
            PackFile {
                id,
                internal: false,
                dependencies: Vec::new(),
                sha256: sha256_hex(artifact.source.as_bytes()),
                content: FileContent::Js {
                    source: Arc::clone(&artifact.source),
                },
            },
        );
    }
}

fn describe_file_error(id: &str, e: &FileError, cap: u64) -> String {
    match e {
        FileError::Unreadable(why) => why.clone(),
        FileError::Escapes => "escapes the package directory".into(),
        FileError::Symlink(prefix) if prefix == id => {
            "is a symlink; symlinks are not allowed in sandbox packs".into()
        }
        FileError::Symlink(prefix) => format!(
            "is reached through the symlink {prefix}; symlinks are not allowed in sandbox packs"
        ),
        FileError::TooLarge(size) => format!("is {size} bytes, over the {cap} byte cap"),
    }
}

struct Discovery<'a> {
    name: &'a str,
    version: Option<&'a str>,
}

/// What sizing the declared files found: the bytes they add up to, and the ids under their
/// caps (to be read).
struct Sized {
    total: u64,
    readable: Vec<String>,
}

/// What the compiler answered for the pack's npm entries.
#[derive(Default)]
struct NpmEntries {
    /// Admitted artifacts, by npm name.
    artifacts: BTreeMap<String, CompiledArtifact>,
    /// Why an npm entry has no artifact: its skip code and message, for the import error.
    skips: BTreeMap<String, (StatusCode, String)>,
    /// One status per entry (and its warnings).
    statuses: Vec<Status>,
    /// The admitted artifacts' bytes, counted in the pack cap.
    bytes: u64,
}

impl<'a> Discovery<'a> {
    /// One pack's discovery, phase by phase: what is declared, the sizes (so the pack cap holds
    /// before anything large is read), the compiler's answers for npm entries, the reads and
    /// checks of every file, the WASM contracts and host pins, cycles, then the modules and
    /// the digest. Any problem withholds the whole pack.
    fn run(
        root: &'a Path,
        name: &'a str,
        version: Option<&'a str>,
        manifest: &'a SandboxManifest,
        compiled: &dyn CompiledLookup,
        problems: &mut Problems<'_>,
    ) -> Option<PackDiscovery> {
        let d = Discovery { name, version };
        let specifiers: Vec<String> = manifest
            .modules
            .iter()
            .map(|m| {
                normalize_specifier(name, &m.name).unwrap_or_else(|_| format!("{name}/{}", m.name))
            })
            .collect();
        let declared = declared_files(manifest, &specifiers);
        let sized = d.size_files(root, &declared, problems);
        let npm = d.compile_npm_entries(root, manifest, &specifiers, compiled);
        let total = sized.total + npm.bytes;
        if total > PACK_BYTES {
            problems.add(
                StatusCode::PackTooLarge,
                None,
                format!("sandbox files total {total} bytes, over the {PACK_BYTES} byte pack cap"),
            );
            return None;
        }
        let mut files = d.read_files(root, &sized.readable, &declared, problems);
        add_npm_files(&mut files, &npm.artifacts);
        d.check_contracts_and_pins(manifest, &specifiers, &files, problems);
        if let Some(cycle) = find_cycle(&files) {
            problems.add(
                StatusCode::ModuleCycle,
                None,
                format!("module cycle: {}", cycle.join(" -> ")),
            );
        }
        if !problems.list.is_empty() {
            return None;
        }
        Some(d.assemble(root, manifest, &specifiers, files, npm))
    }

    /// Each declared file's size, checked against its cap; the ids under their caps.
    fn size_files(
        &self,
        root: &Path,
        declared: &BTreeMap<String, Declared>,
        problems: &mut Problems<'_>,
    ) -> Sized {
        let mut sized = Sized {
            total: 0,
            readable: Vec::new(),
        };
        for (id, decl) in declared {
            let cap = decl.cap();
            match check_pack_file(root, id) {
                Ok(size) if size > cap => {
                    let what = if decl.wasm {
                        "a WASM binary"
                    } else {
                        "an authored JavaScript file"
                    };
                    problems.add(
                        StatusCode::FileTooLarge,
                        decl.specifier.as_deref(),
                        format!("{id} is {size} bytes, over the {cap} byte cap for {what}"),
                    );
                }
                Ok(size) => {
                    sized.total += size;
                    sized.readable.push(id.clone());
                }
                Err(e) => self.file_problem(problems, decl.specifier.as_deref(), id, &e, cap),
            }
        }
        sized
    }

    /// Asks whoever compiles npm entries for each one's artifact.
    fn compile_npm_entries(
        &self,
        root: &Path,
        manifest: &SandboxManifest,
        specifiers: &[String],
        compiled: &dyn CompiledLookup,
    ) -> NpmEntries {
        let name = self.name;
        let mut npm_entries = NpmEntries::default();
        for (m, specifier) in manifest.modules.iter().zip(specifiers) {
            let ModuleSource::JsNpm { npm } = &m.source else {
                continue;
            };
            let request = CompileRequest {
                pack_name: name,
                pack_dir: root,
                npm,
            };
            let status = |level, code, message: String| Status {
                pack_name: name.to_string(),
                specifier: Some(specifier.clone()),
                status: level,
                code,
                message: format!("{name}: {message}"),
            };
            let statuses = &mut npm_entries.statuses;
            match compiled.lookup(&request) {
                None => statuses.push(status(
                    StatusLevel::Skipped,
                    StatusCode::PendingCompile,
                    format!("npm module {npm} is not compiled yet; run `nodetool packs compile` to build it"),
                )),
                Some(CompiledNpmModule::Refused { code, message }) => {
                    // The compiler's messages already name the dependency.
                    npm_entries.skips.insert(npm.clone(), (code, message.clone()));
                    statuses.push(status(StatusLevel::Skipped, code, message));
                }
                Some(CompiledNpmModule::Admitted(artifact)) => {
                    let size = artifact.source.len() as u64;
                    if size > NPM_BUNDLE_BYTES {
                        statuses.push(status(
                            StatusLevel::Skipped,
                            StatusCode::NpmModuleTooLarge,
                            format!("npm module {npm} compiles to {size} bytes, over the {NPM_BUNDLE_BYTES} byte cap"),
                        ));
                        continue;
                    }
                    npm_entries.bytes += size;
                    for w in &artifact.warnings {
                        statuses.push(status(StatusLevel::Warning, StatusCode::NpmModuleWarning, format!("npm module {npm}: {w}")));
                    }
                    statuses.push(status(
                        StatusLevel::Ready,
                        StatusCode::NpmModuleCompiled,
                        format!("npm module {npm} compiled to {size} bytes"),
                    ));
                    npm_entries.artifacts.insert(npm.clone(), artifact);
                }
            }
        }
        npm_entries
    }

    /// Reads and checks every readable file: bytes under the cap, JavaScript as UTF-8 with
    /// its relative imports checked.
    fn read_files(
        &self,
        root: &Path,
        readable: &[String],
        declared: &BTreeMap<String, Declared>,
        problems: &mut Problems<'_>,
    ) -> BTreeMap<String, PackFile> {
        let mut files: BTreeMap<String, PackFile> = BTreeMap::new();
        for id in readable {
            let Some(decl) = declared.get(id) else {
                continue;
            };
            let cap = decl.cap();
            let bytes = match read_capped(root, id, cap) {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.file_problem(problems, decl.specifier.as_deref(), id, &e, cap);
                    continue;
                }
            };
            let sha256 = sha256_hex(&bytes);
            let (content, dependencies) = if decl.wasm {
                (
                    FileContent::Wasm {
                        bytes: Bytes::from(bytes),
                    },
                    Vec::new(),
                )
            } else {
                let Ok(source) = String::from_utf8(bytes) else {
                    problems.add(
                        StatusCode::JsInvalid,
                        decl.specifier.as_deref(),
                        format!("{id}: invalid JavaScript: the file is not UTF-8"),
                    );
                    continue;
                };
                let dependencies = self.js_dependencies(
                    problems,
                    decl.specifier.as_deref(),
                    id,
                    &source,
                    declared,
                );
                (
                    FileContent::Js {
                        source: source.into(),
                    },
                    dependencies,
                )
            };
            files.insert(
                id.clone(),
                PackFile {
                    id: id.clone(),
                    internal: decl.internal,
                    dependencies,
                    content,
                    sha256,
                },
            );
        }
        files
    }

    /// Every WASM module against its declared contract, and every host id against the
    /// registry's pin.
    fn check_contracts_and_pins(
        &self,
        manifest: &SandboxManifest,
        specifiers: &[String],
        files: &BTreeMap<String, PackFile>,
        problems: &mut Problems<'_>,
    ) {
        let name = self.name;
        for (m, specifier) in manifest.modules.iter().zip(specifiers) {
            match &m.source {
                ModuleSource::Wasm { file, contract } => {
                    if let Some(PackFile {
                        content: FileContent::Wasm { bytes },
                        ..
                    }) = files.get(file)
                        && let Err(errors) = check_wasm(&bytes.0, contract)
                    {
                        for e in errors {
                            problems.add(e.code, Some(specifier), format!("{file}: {}", e.message));
                        }
                    }
                }
                ModuleSource::Host { host } => {
                    if let Some(v) = host_module_violation(name, host) {
                        let code = match v {
                            HostViolation::Unknown(_) => StatusCode::HostModuleUnknown,
                            HostViolation::Foreign(_) => StatusCode::HostModuleForeign,
                        };
                        // The root module's specifier is the pack name, which the status
                        // already leads with.
                        let message = if specifier == name {
                            v.message().to_string()
                        } else {
                            format!("{specifier}: {}", v.message())
                        };
                        problems.add(code, Some(specifier), message);
                    }
                }
                ModuleSource::JsFile { .. } | ModuleSource::JsNpm { .. } => {}
            }
        }
    }

    /// The discovered pack: its modules (a skipped npm entry saying why), its graph digest,
    /// its SKILL.md and every status.
    fn assemble(
        &self,
        root: &Path,
        manifest: &SandboxManifest,
        specifiers: &[String],
        files: BTreeMap<String, PackFile>,
        npm: NpmEntries,
    ) -> PackDiscovery {
        let (name, version) = (self.name, self.version);
        let modules = manifest
            .modules
            .iter()
            .zip(specifiers)
            .map(|(m, specifier)| {
                let mut module = self.module(m, specifier, &files, &npm.artifacts);
                // A skipped npm entry says why when a body imports it.
                if let (ModuleSource::JsNpm { npm: entry }, ModuleState::Unavailable(why)) =
                    (&m.source, &mut module.state)
                    && let Some((code, message)) = npm.skips.get(entry)
                {
                    *why = format!("the compiler skipped npm module {entry} ({code}): {message}");
                }
                module
            })
            .collect();
        let compiled_identity: Vec<DigestCompiled<'_>> = npm
            .artifacts
            .iter()
            .map(|(entry, a)| (entry, a, files.get(&npm_module_id(entry))))
            .map(|(entry, a, file)| DigestCompiled {
                id: entry,
                compiler_version: &a.compiler_version,
                options_digest: &a.options_digest,
                inputs_digest: &a.inputs_digest,
                sha256: file.map_or("", |f| f.sha256.as_str()),
            })
            .collect();
        let graph_digest = pack_digest(
            name,
            version,
            &manifest.modules,
            &manifest.internal,
            files
                .values()
                .filter(|f| !f.id.starts_with("npm:"))
                .map(PackFile::digest_entry)
                .collect(),
            compiled_identity,
        );
        let (skill, skill_status) = read_skill(root, name);
        let mut statuses = npm.statuses;
        statuses.extend(skill_status);
        PackDiscovery {
            name: name.to_string(),
            version: version.map(str::to_string),
            graph_digest,
            files,
            modules,
            statuses,
            skill,
        }
    }

    fn file_problem(
        &self,
        problems: &mut Problems<'_>,
        specifier: Option<&str>,
        id: &str,
        e: &FileError,
        cap: u64,
    ) {
        let code = match e {
            FileError::Unreadable(_) => StatusCode::FileUnreadable,
            FileError::Escapes => StatusCode::FileEscapesPackage,
            FileError::Symlink(_) => StatusCode::SymlinkNotAllowed,
            FileError::TooLarge(_) => StatusCode::FileTooLarge,
        };
        problems.add(
            code,
            specifier,
            format!("{id} {}", describe_file_error(id, e, cap)),
        );
    }

    /// Resolves a JS file's static imports onto declared files of this pack.
    fn js_dependencies(
        &self,
        problems: &mut Problems<'_>,
        specifier: Option<&str>,
        id: &str,
        source: &str,
        declared: &BTreeMap<String, Declared>,
    ) -> Vec<String> {
        let imports = match scan_module(source) {
            Ok(imports) => imports,
            Err(errors) => {
                for e in errors {
                    problems.add(e.code, specifier, format!("{id}: {}", e.message));
                }
                return Vec::new();
            }
        };
        let mut dependencies = BTreeSet::new();
        for import in imports {
            let at = format!("{id}:{}:{}", import.line, import.column);
            let request = &import.source;
            if !is_relative(request) {
                problems.add(
                    StatusCode::ImportOutsidePack,
                    specifier,
                    format!("{at}: import outside the pack: {request:?} (a pack module may only import its own files by relative path)"),
                );
                continue;
            }
            let Some(target) = join_relative(id, request) else {
                problems.add(
                    StatusCode::ImportEscapesPack,
                    specifier,
                    format!("{at}: import escapes the package: {request:?}"),
                );
                continue;
            };
            let found = relative_candidates(&target)
                .into_iter()
                .find_map(|c| declared.get_key_value(&c));
            match found {
                Some((file, decl)) if decl.wasm => problems.add(
                    StatusCode::ImportNotJs,
                    specifier,
                    format!("{at}: JS import targets non-JS module {file} (import its specifier's facade instead)"),
                ),
                Some((file, _)) => {
                    dependencies.insert(file.clone());
                }
                None => problems.add(
                    StatusCode::ImportUndeclaredFile,
                    specifier,
                    format!("{at}: imported file {target} is not declared as a public or internal file"),
                ),
            }
        }
        dependencies.into_iter().collect()
    }

    fn module(
        &self,
        m: &ManifestModule,
        specifier: &str,
        files: &BTreeMap<String, PackFile>,
        npm_artifacts: &BTreeMap<String, CompiledArtifact>,
    ) -> PackModule {
        let base = |kind: ModuleKind,
                    module_id: String,
                    entries: Vec<DigestEntry<'_>>,
                    facade,
                    compiled| {
            let digest = module_digest(ModuleDigestInput {
                package_name: self.name,
                package_version: self.version,
                specifier,
                module_id: &module_id,
                kind: kind.as_str(),
                declaration: m,
                entries,
                facade,
                compiled,
            });
            (module_id, digest)
        };
        match &m.source {
            ModuleSource::JsFile { file } | ModuleSource::Wasm { file, .. } => {
                let reachable = reachable_from(file, files);
                let entries = reachable
                    .iter()
                    .filter_map(|id| files.get(id))
                    .map(PackFile::digest_entry)
                    .collect();
                let (kind, resolved, facade) = match &m.source {
                    ModuleSource::Wasm { contract, .. } => {
                        let facade = wasm_facade_source(specifier, &contract.exports);
                        (
                            ModuleKind::Wasm,
                            ResolvedKind::Wasm {
                                wasm: contract.clone(),
                            },
                            Some(facade),
                        )
                    }
                    _ => (ModuleKind::Js, ResolvedKind::Js, None),
                };
                let digest_facade = facade.as_deref().map(|source| DigestFacade {
                    version: WASM_FACADE_VERSION,
                    source,
                });
                let (module_id, digest) = base(kind, file.clone(), entries, digest_facade, None);
                PackModule {
                    specifier: specifier.to_string(),
                    kind,
                    module_id,
                    digest,
                    state: ModuleState::Ready {
                        reachable,
                        kind: resolved,
                        facade: None,
                    },
                }
            }
            ModuleSource::JsNpm { npm } => {
                let id = npm_module_id(npm);
                match (npm_artifacts.get(npm), files.get(&id)) {
                    (Some(a), Some(file)) => {
                        let compiled = DigestCompiled {
                            id: npm,
                            compiler_version: &a.compiler_version,
                            options_digest: &a.options_digest,
                            inputs_digest: &a.inputs_digest,
                            sha256: &file.sha256,
                        };
                        let (module_id, digest) = base(
                            ModuleKind::Js,
                            id.clone(),
                            vec![file.digest_entry()],
                            None,
                            Some(compiled),
                        );
                        PackModule {
                            specifier: specifier.to_string(),
                            kind: ModuleKind::Js,
                            module_id,
                            digest,
                            state: ModuleState::Ready {
                                reachable: vec![id],
                                kind: ResolvedKind::Js,
                                facade: None,
                            },
                        }
                    }
                    _ => {
                        // Not compiled (or refused): still digested, over what the manifest says.
                        let (module_id, digest) = base(ModuleKind::Js, id, Vec::new(), None, None);
                        PackModule {
                            specifier: specifier.to_string(),
                            kind: ModuleKind::Js,
                            module_id,
                            digest,
                            state: ModuleState::Unavailable(format!(
                                "npm module {npm} has no admitted compiled artifact"
                            )),
                        }
                    }
                }
            }
            ModuleSource::Host { host } => {
                let exports = host_module(host).map(|h| h.exports).unwrap_or_default();
                let facade: Arc<str> = host_facade_source(specifier, exports).into();
                let (module_id, digest) = base(
                    ModuleKind::Host,
                    format!("host:{host}"),
                    Vec::new(),
                    Some(DigestFacade {
                        version: HOST_FACADE_VERSION,
                        source: &facade,
                    }),
                    None,
                );
                PackModule {
                    specifier: specifier.to_string(),
                    kind: ModuleKind::Host,
                    module_id,
                    digest,
                    state: ModuleState::Ready {
                        reachable: Vec::new(),
                        kind: ResolvedKind::Host {
                            host_id: host.clone(),
                        },
                        facade: Some(facade),
                    },
                }
            }
        }
    }
}

/// The graph id of a compiled npm bundle.
pub(crate) fn npm_module_id(npm: &str) -> String {
    format!("npm:{npm}")
}

fn reachable_from(entry: &str, files: &BTreeMap<String, PackFile>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![entry.to_string()];
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if let Some(f) = files.get(&id) {
            stack.extend(f.dependencies.iter().cloned());
        }
    }
    seen.into_iter().collect()
}

/// A cycle among the pack's JS files, as the ids along it, if there is one.
fn find_cycle(files: &BTreeMap<String, PackFile>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Active,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    for start in files.keys() {
        if marks.contains_key(start.as_str()) {
            continue;
        }
        // Iterative DFS: (file, index of the next dependency to visit).
        let mut path: Vec<(&str, usize)> = vec![(start.as_str(), 0)];
        marks.insert(start.as_str(), Mark::Active);
        while let Some((id, next)) = path.last().copied() {
            let deps = files.get(id).map_or(&[][..], |f| f.dependencies.as_slice());
            if let Some(dep) = deps.get(next) {
                if let Some(last) = path.last_mut() {
                    last.1 += 1;
                }
                match marks.get(dep.as_str()) {
                    Some(Mark::Active) => {
                        let from = path
                            .iter()
                            .position(|(p, _)| *p == dep.as_str())
                            .unwrap_or(0);
                        let mut cycle: Vec<String> =
                            path[from..].iter().map(|(p, _)| p.to_string()).collect();
                        cycle.push(dep.clone());
                        return Some(cycle);
                    }
                    Some(Mark::Done) => {}
                    None => {
                        marks.insert(dep.as_str(), Mark::Active);
                        path.push((dep.as_str(), 0));
                    }
                }
            } else {
                marks.insert(id, Mark::Done);
                path.pop();
            }
        }
    }
    None
}

fn read_skill(root: &Path, name: &str) -> (Option<SkillDocument>, Option<Status>) {
    let warning = |code, message: String| Status {
        pack_name: name.to_string(),
        specifier: None,
        status: StatusLevel::Warning,
        code,
        message: format!("{name}: {message}; agent discoverability is disabled"),
    };
    match read_pack_metadata_file(root, "SKILL.md", SKILL_BYTES) {
        Ok(None) => (
            None,
            Some(warning(
                StatusCode::SkillMissing,
                "SKILL.md is missing".into(),
            )),
        ),
        Err(e) => (
            None,
            Some(warning(
                StatusCode::SkillInvalid,
                format!(
                    "SKILL.md {}",
                    describe_file_error("SKILL.md", &e, SKILL_BYTES)
                ),
            )),
        ),
        Ok(Some(bytes)) => match String::from_utf8(bytes) {
            Err(_) => (
                None,
                Some(warning(
                    StatusCode::SkillInvalid,
                    "SKILL.md is not UTF-8".into(),
                )),
            ),
            Ok(text) => match parse_skill_document(&text) {
                Ok(doc) => (Some(doc), None),
                Err(why) => (
                    None,
                    Some(warning(
                        StatusCode::SkillInvalid,
                        format!("SKILL.md is invalid: {why}"),
                    )),
                ),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_joins() {
        assert_eq!(
            join_relative("sandbox/geo.js", "./internal/round.js").as_deref(),
            Some("sandbox/internal/round.js")
        );
        assert_eq!(
            join_relative("sandbox/a/b.js", "../c.js").as_deref(),
            Some("sandbox/c.js")
        );
        assert_eq!(join_relative("sandbox/geo.js", "../../x.js"), None);
        assert_eq!(join_relative("geo.js", "../x.js"), None);
        assert_eq!(join_relative("geo.js", "./x").as_deref(), Some("x"));
    }
}
