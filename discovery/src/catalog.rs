//! The catalog host (ordered search roots to one catalog) and the catalog it builds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodetool_protocol::catalog::{
    AuthorizedDelivery, Declaration, DeliveryBody, DeliveryRefusal, FileContent, GraphFile,
    MediaType, RefusalReason, Resolution, ResolvedKind, ResolvedModule, SkillDisclosure, Status,
    StatusCode, StatusLevel, Summary, graph_file_module_id, parse_graph_file_module_id,
    sanitize_description,
};
use nodetool_protocol::host::host_module;
use nodetool_runtime::{CompiledLookup, DeliveryFuture, SandboxModuleCatalog};

use crate::pack::{ModuleState, PackDiscovery, PackOutcome, discover_pack};
use nodetool_protocol::hex::sha256_hex;

/// Where a search root sits in the order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootKind {
    /// A root packs are installed into (`--packs`, `NODETOOL_PACKS_PATH`, the installed root).
    /// One package name in two installed locations is a `duplicate-pack` error.
    Installed,
    /// The packs shipped with NodeTool. Searched last; an installed pack of the same name is
    /// used instead of a shipped one, and says so (`shipped-pack-shadowed`, a warning), so the
    /// operator's own copy (a fix, a development build) works and is never silent.
    Shipped,
}

/// One node_modules-style directory: packs at `<path>/<name>` and `<path>/@scope/<name>`.
#[derive(Debug, Clone)]
pub struct SearchRoot {
    /// The directory.
    pub path: PathBuf,
    /// Its precedence.
    pub kind: RootKind,
    /// How diagnostics name this root (the caller decides; discovery never prints `path`).
    pub label: String,
}

/// What discovery is given besides the roots. There are no defaults: the caller states both.
pub struct DiscoveryOptions<'a> {
    /// Where compiled npm artifacts come from.
    pub compiled: &'a dyn CompiledLookup,
    /// Package names the operator trusts (decides how a pack's SKILL.md is disclosed).
    pub trusted_packs: &'a BTreeSet<String>,
}

/// The packs a set of roots holds, with their module index.
pub struct DiscoveredCatalog {
    packs: Vec<PackDiscovery>,
    trusted: Vec<bool>,
    /// Per pack: whether it came from the shipped root (its consent identity says so).
    shipped: Vec<bool>,
    by_pack_name: HashMap<String, usize>,
    /// Exact specifier to (pack, module) for every module that may resolve.
    by_specifier: HashMap<String, (usize, usize)>,
    /// Per pack: graph file id to the index of the module whose digest a delivery of that file
    /// carries (the lexicographically first specifier that reaches it).
    file_owner: Vec<HashMap<String, usize>>,
    summaries: Vec<Summary>,
    diagnostics: Vec<Status>,
}

/// Discovers every pack under `roots` (in order of precedence) and builds one catalog. Nothing
/// fails out of this function: every problem becomes a diagnostic.
pub fn discover_catalog(roots: &[SearchRoot], options: &DiscoveryOptions<'_>) -> DiscoveredCatalog {
    let mut diagnostics = Vec::new();
    let mut seen_dirs = BTreeSet::new();
    // Package name -> every place it was found, in search order.
    let mut found: BTreeMap<String, Vec<Found>> = BTreeMap::new();

    let candidates = pack_directories(roots);
    let outcomes = discover_all(&candidates, options.compiled);
    for (candidate, outcome) in candidates.iter().zip(outcomes) {
        if let Ok(real) = std::fs::canonicalize(&candidate.dir)
            && !seen_dirs.insert(real)
        {
            continue; // the same directory reached through two roots
        }
        match outcome {
            PackOutcome::NotAPack => {}
            PackOutcome::Discovered(pack) => {
                found
                    .entry(pack.name().to_string())
                    .or_default()
                    .push(Found {
                        kind: candidate.kind,
                        label: candidate.label.clone(),
                        pack: Some(*pack),
                        statuses: Vec::new(),
                    });
            }
            PackOutcome::Refused {
                name: Some(name),
                statuses,
            } => {
                found.entry(name).or_default().push(Found {
                    kind: candidate.kind,
                    label: candidate.label.clone(),
                    pack: None,
                    statuses,
                });
            }
            PackOutcome::Refused {
                name: None,
                statuses,
            } => diagnostics.extend(statuses),
        }
    }

    let mut packs = Vec::new();
    let mut shipped = Vec::new();
    for (name, mut places) in found {
        let installed = places
            .iter()
            .filter(|p| p.kind == RootKind::Installed)
            .count();
        let contenders: Vec<&Found> = if installed > 0 {
            places
                .iter()
                .filter(|p| p.kind == RootKind::Installed)
                .collect()
        } else {
            places.iter().collect()
        };
        if contenders.len() > 1 {
            let where_: Vec<&str> = contenders.iter().map(|p| p.label.as_str()).collect();
            diagnostics.push(Status {
                pack_name: name.clone(),
                specifier: None,
                status: StatusLevel::Error,
                code: StatusCode::DuplicatePack,
                message: format!(
                    "Sandbox package {name} was found in {}. Remove one before its modules can resolve.",
                    where_.join(" and ")
                ),
            });
            // What was wrong with each copy still helps whoever removes one.
            for place in places
                .into_iter()
                .filter(|p| installed == 0 || p.kind == RootKind::Installed)
            {
                diagnostics.extend(place.statuses);
            }
            continue;
        }
        let winner = if installed > 0 {
            places.iter().position(|p| p.kind == RootKind::Installed)
        } else {
            Some(0)
        };
        if let Some(chosen) = winner.map(|i| places.swap_remove(i)) {
            diagnostics.extend(chosen.statuses);
            if chosen.kind == RootKind::Installed
                && let Some(set_aside) = places.iter().find(|p| p.kind == RootKind::Shipped)
            {
                diagnostics.push(Status {
                    pack_name: name.clone(),
                    specifier: None,
                    status: StatusLevel::Warning,
                    code: StatusCode::ShippedPackShadowed,
                    message: format!(
                        "{name} from {} is used instead of the pack of that name shipped with NodeTool ({}); consent given to the shipped pack does not carry over to it.",
                        chosen.label, set_aside.label
                    ),
                });
            }
            if let Some(pack) = chosen.pack {
                packs.push(pack);
                shipped.push(chosen.kind == RootKind::Shipped);
            }
        }
    }
    let mut catalog = DiscoveredCatalog::build(packs, diagnostics, options.trusted_packs);
    catalog.shipped = shipped;
    catalog
}

struct Found {
    kind: RootKind,
    label: String,
    pack: Option<PackDiscovery>,
    statuses: Vec<Status>,
}

struct Candidate {
    dir: PathBuf,
    kind: RootKind,
    /// `<root label>/<name>` as diagnostics show it.
    label: String,
}

/// Every `<root>/<name>` and `<root>/@scope/<name>` directory, roots in order, names sorted.
fn pack_directories(roots: &[SearchRoot]) -> Vec<Candidate> {
    fn sorted_dirs(dir: &Path) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .filter(|(name, path)| !name.starts_with('.') && path.is_dir())
            .collect();
        out.sort();
        out
    }
    let mut candidates = Vec::new();
    for root in roots {
        for (name, path) in sorted_dirs(&root.path) {
            if name.starts_with('@') {
                for (bare, inner) in sorted_dirs(&path) {
                    candidates.push(Candidate {
                        dir: inner,
                        kind: root.kind,
                        label: format!("{}/{name}/{bare}", root.label),
                    });
                }
            } else {
                candidates.push(Candidate {
                    dir: path,
                    kind: root.kind,
                    label: format!("{}/{name}", root.label),
                });
            }
        }
    }
    candidates
}

/// Discovers every candidate, spread over the machine's cores (each pack is independent).
fn discover_all(candidates: &[Candidate], compiled: &dyn CompiledLookup) -> Vec<PackOutcome> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(candidates.len().max(1));
    if workers <= 1 {
        return candidates
            .iter()
            .map(|c| discover_pack(&c.dir, &c.label, compiled))
            .collect();
    }
    let chunk = candidates.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let handles: Vec<_> = candidates
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|c| discover_pack(&c.dir, &c.label, compiled))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(candidates.len());
        for (handle, part) in handles.into_iter().zip(candidates.chunks(chunk)) {
            match handle.join() {
                Ok(outcomes) => out.extend(outcomes),
                // A panic in discovery is a bug; the packs of that chunk are reported, not lost.
                Err(_) => out.extend(part.iter().map(|c| PackOutcome::Refused {
                    name: None,
                    statuses: vec![Status {
                        pack_name: c.label.clone(),
                        specifier: None,
                        status: StatusLevel::Error,
                        code: StatusCode::DiscoveryFailed,
                        message: format!("{}: discovery failed unexpectedly", c.label),
                    }],
                })),
            }
        }
        out
    })
}

impl DiscoveredCatalog {
    /// Builds a catalog from discovered packs (one per package name) plus the catalog host's
    /// own diagnostics.
    pub fn build(
        packs: Vec<PackDiscovery>,
        mut diagnostics: Vec<Status>,
        trusted: &BTreeSet<String>,
    ) -> Self {
        // Specifiers are compared without regard to ASCII case: two packs whose specifiers
        // differ only in case would be one import on a case-insensitive filesystem and a
        // spoofing opportunity everywhere.
        let mut claims: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
        for (p, pack) in packs.iter().enumerate() {
            diagnostics.extend(pack.statuses.iter().cloned());
            for (m, module) in pack.modules.iter().enumerate() {
                claims
                    .entry(module.specifier.to_ascii_lowercase())
                    .or_default()
                    .push((p, m));
            }
        }
        let mut by_specifier = HashMap::new();
        for claimants in claims.into_values() {
            if claimants.len() > 1 {
                let names: Vec<String> = claimants
                    .iter()
                    .map(|&(p, m)| format!("{} ({})", packs[p].modules[m].specifier, packs[p].name))
                    .collect();
                for &(p, m) in &claimants {
                    diagnostics.push(Status {
                        pack_name: packs[p].name.clone(),
                        specifier: Some(packs[p].modules[m].specifier.clone()),
                        status: StatusLevel::Error,
                        code: StatusCode::DuplicateSpecifier,
                        message: format!(
                            "{}: the specifier is claimed by more than one pack: {}. Neither resolves until one is removed.",
                            packs[p].modules[m].specifier,
                            names.join(", ")
                        ),
                    });
                }
                continue;
            }
            for (p, m) in claimants {
                by_specifier.insert(packs[p].modules[m].specifier.clone(), (p, m));
            }
        }

        let mut summaries: Vec<Summary> = by_specifier
            .values()
            .map(|&(p, m)| {
                let pack = &packs[p];
                let module = &pack.modules[m];
                let description = pack
                    .skill
                    .as_ref()
                    .map(|s| s.description.as_str())
                    .or_else(|| match &module.state {
                        ModuleState::Ready {
                            kind: ResolvedKind::Host { host_id },
                            ..
                        } => host_module(host_id).map(|h| h.description),
                        _ => None,
                    })
                    .map(sanitize_description)
                    .filter(|d| !d.is_empty());
                Summary {
                    specifier: module.specifier.clone(),
                    pack_name: pack.name.clone(),
                    pack_version: pack.version.clone(),
                    kind: module.kind,
                    description,
                    content_digest: module.digest.clone(),
                }
            })
            .collect();
        summaries.sort_by(|a, b| a.specifier.cmp(&b.specifier));

        let mut file_owner: Vec<HashMap<String, usize>> = vec![HashMap::new(); packs.len()];
        let mut owned: Vec<(&str, usize, usize)> = by_specifier
            .iter()
            .map(|(s, &(p, m))| (s.as_str(), p, m))
            .collect();
        owned.sort_unstable();
        for (_, p, m) in owned {
            if let ModuleState::Ready { reachable, .. } = &packs[p].modules[m].state {
                for id in reachable {
                    file_owner[p].entry(id.clone()).or_insert(m);
                }
            }
        }

        let trusted_flags = packs.iter().map(|p| trusted.contains(&p.name)).collect();
        let by_pack_name = packs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        DiscoveredCatalog {
            shipped: vec![false; packs.len()],
            packs,
            trusted: trusted_flags,
            by_pack_name,
            by_specifier,
            file_owner,
            summaries,
            diagnostics,
        }
    }

    /// Adds statuses only the front end can know, after discovery (a host module's native
    /// library is missing on this host: discovery loads no library). They are reported with
    /// the rest and change nothing that resolves.
    pub fn add_diagnostics(&mut self, statuses: impl IntoIterator<Item = Status>) {
        self.diagnostics.extend(statuses);
    }

    /// Every pack, as consent identifies it: `(name, from the shipped root, graph digest)`
    /// ([`crate::trust::identities`]).
    pub fn pack_origins(&self) -> impl Iterator<Item = (&str, bool, &str)> {
        self.packs
            .iter()
            .zip(&self.shipped)
            .map(|(p, &shipped)| (p.name.as_str(), shipped, p.graph_digest.as_str()))
    }

    /// Takes the trust of the pack named `pack_name` away (its consent was given to another
    /// identity: [`crate::trust::apply_consent`]). Trust is never granted after the build.
    pub fn withhold_trust(&mut self, pack_name: &str) {
        if let Some(&i) = self.by_pack_name.get(pack_name) {
            self.trusted[i] = false;
        }
    }

    /// The names of the packs this catalog trusts (a CodeAct session's default allowlist).
    pub fn trusted_packs(&self) -> BTreeSet<String> {
        self.packs
            .iter()
            .zip(&self.trusted)
            .filter(|(_, t)| **t)
            .map(|(p, _)| p.name.clone())
            .collect()
    }

    fn graph_file(pack: &PackDiscovery, id: &str) -> Option<GraphFile> {
        pack.files.get(id).map(|f| GraphFile {
            id: f.id.clone(),
            internal: f.internal,
            dependencies: f.dependencies.clone(),
            content: f.content.clone(),
        })
    }

    fn resolve_one(&self, declaration: &Declaration, resolution: &mut Resolution) {
        let specifier = declaration.specifier.as_str();
        let Some(&(p, m)) = self.by_specifier.get(specifier) else {
            resolution
                .statuses
                .push(Status::module_not_found(specifier));
            return;
        };
        let pack = &self.packs[p];
        let module = &pack.modules[m];
        let (reachable, kind) = match &module.state {
            ModuleState::Ready {
                reachable, kind, ..
            } => (reachable, kind),
            ModuleState::Unavailable(why) => {
                resolution
                    .statuses
                    .push(Status::module_unavailable(&pack.name, specifier, why));
                return;
            }
        };
        if let Some(saved) = &declaration.resolved_pack_version
            && Some(saved) != pack.version.as_ref()
        {
            resolution.statuses.push(Status::version_mismatch(
                &pack.name,
                specifier,
                saved,
                pack.version.as_deref(),
            ));
        }
        if declaration
            .content_digest
            .as_ref()
            .is_some_and(|d| *d != module.digest)
        {
            resolution
                .statuses
                .push(Status::content_digest_mismatch(&pack.name, specifier));
        }
        resolution.modules.push(ResolvedModule {
            specifier: module.specifier.clone(),
            pack_name: pack.name.clone(),
            pack_version: pack.version.clone(),
            content_digest: module.digest.clone(),
            module_id: module.module_id.clone(),
            graph: reachable
                .iter()
                .filter_map(|id| Self::graph_file(pack, id))
                .collect(),
            kind: kind.clone(),
        });
    }

    fn deliver(&self, module_id: &str) -> Result<AuthorizedDelivery, DeliveryRefusal> {
        let not_found = || DeliveryRefusal {
            reason: RefusalReason::NotFound,
            message: format!("Sandbox module {module_id} is not installed."),
        };
        let unavailable = |why: &str| DeliveryRefusal {
            reason: RefusalReason::Unavailable,
            message: format!("Sandbox module {module_id} is not available for delivery: {why}"),
        };
        if let Some(&(p, m)) = self.by_specifier.get(module_id) {
            let pack = &self.packs[p];
            let module = &pack.modules[m];
            return match &module.state {
                ModuleState::Unavailable(why) => Err(unavailable(why)),
                ModuleState::Ready {
                    kind: ResolvedKind::Host { host_id },
                    facade,
                    ..
                } => {
                    let Some(source) = facade.clone() else {
                        return Err(unavailable("it has no host facade"));
                    };
                    Ok(AuthorizedDelivery {
                        module_id: module_id.to_string(),
                        file_id: module.module_id.clone(),
                        internal: false,
                        pack_name: pack.name.clone(),
                        pack_version: pack.version.clone(),
                        content_digest: module.digest.clone(),
                        content_sha256: sha256_hex(source.as_bytes()),
                        dependencies: Vec::new(),
                        media_type: MediaType::JavaScript,
                        body: DeliveryBody::Source(source),
                        wasm: None,
                        host_id: Some(host_id.clone()),
                    })
                }
                ModuleState::Ready { kind, .. } => {
                    let wasm = match kind {
                        ResolvedKind::Wasm { wasm } => Some(wasm.clone()),
                        _ => None,
                    };
                    self.deliver_file(p, &module.module_id, module_id, &module.digest, wasm)
                        .ok_or_else(not_found)
                }
            };
        }
        let (pack_name, file_id) = parse_graph_file_module_id(module_id).ok_or_else(not_found)?;
        let p = *self.by_pack_name.get(pack_name).ok_or_else(not_found)?;
        let owner = *self.file_owner[p].get(file_id).ok_or_else(not_found)?;
        let digest = self.packs[p].modules[owner].digest.clone();
        self.deliver_file(p, file_id, module_id, &digest, None)
            .ok_or_else(not_found)
    }

    fn deliver_file(
        &self,
        p: usize,
        file_id: &str,
        module_id: &str,
        digest: &str,
        wasm: Option<nodetool_protocol::manifest::WasmContract>,
    ) -> Option<AuthorizedDelivery> {
        let pack = &self.packs[p];
        let file = pack.files.get(file_id)?;
        let (media_type, body) = match &file.content {
            FileContent::Js { source } => (
                MediaType::JavaScript,
                DeliveryBody::Source(Arc::clone(source)),
            ),
            FileContent::Wasm { bytes } => (MediaType::Wasm, DeliveryBody::Bytes(bytes.clone())),
        };
        Some(AuthorizedDelivery {
            module_id: module_id.to_string(),
            file_id: file.id.clone(),
            internal: file.internal,
            pack_name: pack.name.clone(),
            pack_version: pack.version.clone(),
            content_digest: digest.to_string(),
            content_sha256: file.sha256.clone(),
            dependencies: file
                .dependencies
                .iter()
                .map(|d| graph_file_module_id(&pack.name, d))
                .collect(),
            media_type,
            body,
            wasm,
            host_id: None,
        })
    }
}

impl SandboxModuleCatalog for DiscoveredCatalog {
    fn summaries(&self) -> &[Summary] {
        &self.summaries
    }

    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        let mut resolution = Resolution::default();
        let mut seen = BTreeSet::new();
        for d in declarations {
            if seen.insert(d.specifier.as_str()) {
                self.resolve_one(d, &mut resolution);
            }
        }
        resolution
    }

    fn diagnostics(&self) -> &[Status] {
        &self.diagnostics
    }

    fn pack_skill(&self, pack_name: &str) -> Option<SkillDisclosure> {
        let &i = self.by_pack_name.get(pack_name)?;
        let pack = &self.packs[i];
        pack.skill.as_ref().map(|skill| SkillDisclosure {
            pack_name: pack.name.clone(),
            pack_version: pack.version.clone(),
            trusted: self.trusted[i],
            skill: skill.clone(),
        })
    }

    fn pack_trusted(&self, pack_name: &str) -> bool {
        self.by_pack_name
            .get(pack_name)
            .is_some_and(|&i| self.trusted[i])
    }

    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        // v1 policy: everything this catalog serves is deliverable to whoever reaches the
        // route; `forbidden` exists for an entitlement-aware catalog.
        Box::pin(std::future::ready(self.deliver(module_id)))
    }
}
