//! A catalog that serves a fixture's modules, so a runner outside this process (the browser)
//! can fetch them through the server's real delivery route and verify them as it would any
//! pack: every body with its own SHA-256, its dependency ids, and the host facade or WASM
//! contract headers. It stands where discovery would, because many fixture modules are
//! exactly what discovery refuses (a pack module importing `node:fs`, a private bridge or a
//! missing file), and the loader must refuse them again.

use nodetool_protocol::catalog::{
    AuthorizedDelivery, Declaration, DeliveryBody, DeliveryRefusal, FileContent, GraphFile,
    MediaType, RefusalReason, Resolution, ResolvedKind, ResolvedModule, SkillDisclosure, Status,
    Summary, graph_file_module_id, parse_graph_file_module_id,
};
use nodetool_protocol::facade::host_facade_source;
use nodetool_protocol::hex::sha256_hex;
use nodetool_protocol::host::host_module;
use nodetool_runtime::{DeliveryFuture, SandboxModuleCatalog};

/// The modules of one fixture, served as a catalog.
#[derive(Debug, Clone, Default)]
pub struct FixtureCatalog {
    modules: Vec<ResolvedModule>,
    summaries: Vec<Summary>,
}

impl FixtureCatalog {
    /// A catalog of exactly `modules`.
    pub fn new(modules: Vec<ResolvedModule>) -> FixtureCatalog {
        let mut summaries: Vec<Summary> = modules
            .iter()
            .map(|m| Summary {
                specifier: m.specifier.clone(),
                pack_name: m.pack_name.clone(),
                pack_version: m.pack_version.clone(),
                kind: m.module_kind(),
                description: None,
                content_digest: m.content_digest.clone(),
            })
            .collect();
        summaries.sort_by(|a, b| a.specifier.cmp(&b.specifier));
        FixtureCatalog { modules, summaries }
    }

    fn not_found(id: &str) -> DeliveryRefusal {
        DeliveryRefusal {
            reason: RefusalReason::NotFound,
            message: format!("Sandbox module {id} is not installed."),
        }
    }

    fn file_delivery(
        id: &str,
        module: &ResolvedModule,
        file: &GraphFile,
        public_entry: bool,
    ) -> AuthorizedDelivery {
        let (media_type, body) = match &file.content {
            FileContent::Js { source } => {
                (MediaType::JavaScript, DeliveryBody::Source(source.clone()))
            }
            FileContent::Wasm { bytes } => (MediaType::Wasm, DeliveryBody::Bytes(bytes.clone())),
        };
        let wasm = match &module.kind {
            ResolvedKind::Wasm { wasm } if public_entry => Some(wasm.clone()),
            _ => None,
        };
        AuthorizedDelivery {
            module_id: id.to_string(),
            file_id: file.id.clone(),
            internal: file.internal,
            pack_name: module.pack_name.clone(),
            pack_version: module.pack_version.clone(),
            content_digest: module.content_digest.clone(),
            content_sha256: sha256_hex(body.as_bytes()),
            dependencies: file
                .dependencies
                .iter()
                .map(|d| graph_file_module_id(&module.pack_name, d))
                .collect(),
            media_type,
            body,
            wasm,
            host_id: None,
        }
    }

    fn deliver(&self, id: &str) -> Result<AuthorizedDelivery, DeliveryRefusal> {
        if let Some(module) = self.modules.iter().find(|m| m.specifier == id) {
            if let ResolvedKind::Host { host_id } = &module.kind {
                let exports = host_module(host_id).map(|h| h.exports).unwrap_or_default();
                let source = host_facade_source(&module.specifier, exports);
                return Ok(AuthorizedDelivery {
                    module_id: id.to_string(),
                    file_id: module.module_id.clone(),
                    internal: false,
                    pack_name: module.pack_name.clone(),
                    pack_version: module.pack_version.clone(),
                    content_digest: module.content_digest.clone(),
                    content_sha256: sha256_hex(source.as_bytes()),
                    dependencies: Vec::new(),
                    media_type: MediaType::JavaScript,
                    body: DeliveryBody::Source(source.into()),
                    wasm: None,
                    host_id: Some(host_id.clone()),
                });
            }
            let entry = module.entry().ok_or_else(|| Self::not_found(id))?;
            return Ok(Self::file_delivery(id, module, entry, true));
        }
        let (pack, file_id) = parse_graph_file_module_id(id).ok_or_else(|| Self::not_found(id))?;
        self.modules
            .iter()
            .filter(|m| m.pack_name == pack)
            .find_map(|m| {
                m.graph
                    .iter()
                    .find(|f| f.id == file_id)
                    .map(|f| Self::file_delivery(id, m, f, false))
            })
            .ok_or_else(|| Self::not_found(id))
    }
}

impl SandboxModuleCatalog for FixtureCatalog {
    fn summaries(&self) -> &[Summary] {
        &self.summaries
    }

    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        let mut resolution = Resolution::default();
        for d in declarations {
            match self.modules.iter().find(|m| m.specifier == d.specifier) {
                Some(m) => resolution.modules.push(m.clone()),
                None => resolution
                    .statuses
                    .push(Status::module_not_found(&d.specifier)),
            }
        }
        resolution
    }

    fn diagnostics(&self) -> &[Status] {
        &[]
    }

    fn pack_skill(&self, _pack_name: &str) -> Option<SkillDisclosure> {
        None
    }

    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        Box::pin(std::future::ready(self.deliver(module_id)))
    }
}
