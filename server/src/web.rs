//! `GET /web/{file}`: the built browser runner (`web/dist`: `runner.js`, its workers and
//! QuickJS's `emscripten-module.wasm`). The files are read once, when the server starts, from
//! one flat directory and served from memory, so no request turns into a filesystem lookup. A
//! server whose runner was not built answers `404` saying how to build it.
//!
//! The directory is found relative to the executable ([`runner_dirs_beside`]), never through a
//! path of the machine it was built on: a runner copied beside the binary, one under an install
//! prefix's `share/nodetool/web`, or the `web/dist` of the checkout whose `target/` holds the
//! binary. The runner is built by npm, not embedded by `cargo build`: embedding would make every
//! build of the Rust workspace need Node.js, npm and the registry, for a page most uses of the
//! CLI never open.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// Where `npm run build --prefix web` writes the runner in this source tree (the tests and
/// `cargo xtask` read it there). The server itself never uses this path; it looks beside its
/// executable ([`web_dir`]).
pub const DEFAULT_WEB_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../web/dist");

/// How to build the runner, as the answers say it.
pub const BUILD_HINT: &str = "the browser runner is not built: run `npm ci --ignore-scripts --prefix web && npm run build --prefix web` in the repository (a binary in its target/ finds web/dist), or copy a built web/dist to <directory of the binary>/../share/nodetool/web, then restart the server (or point --web-dir / NODETOOL_WEB_DIR at a built runner; `nodetool info` shows where it looks)";

/// The most a built runner may weigh in memory (it is about 1 MiB).
const MAX_TOTAL_BYTES: u64 = 32 * 1024 * 1024;

/// The policy of the runner's scripts and workers: same-origin scripts, WebAssembly
/// compilation (QuickJS and WASM packs are WebAssembly), and requests to this server only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One served file: its media type and bytes.
type Asset = (&'static str, Arc<[u8]>);

/// The built runner's files, by name.
#[derive(Debug, Clone, Default)]
pub struct WebAssets {
    files: Arc<HashMap<String, Asset>>,
    /// Why nothing is served (not built, unreadable), for the 404's message.
    missing: Option<String>,
}

impl WebAssets {
    /// No runner: every request is `404` with the build hint.
    pub fn none() -> WebAssets {
        WebAssets {
            files: Arc::default(),
            missing: Some(BUILD_HINT.to_string()),
        }
    }

    /// Reads every servable file of `dir` (flat: regular files whose names are safe URL
    /// segments, with a known media type). A missing directory is not an error: the runner is
    /// simply not served.
    pub fn load(dir: &Path) -> WebAssets {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return WebAssets::none();
        };
        let mut files = HashMap::new();
        let mut total: u64 = 0;
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(media) = media_type(&name) else {
                continue;
            };
            // symlink_metadata: a link in the build output is not followed.
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if !meta.is_file() || !safe_name(&name) {
                continue;
            }
            total = total.saturating_add(meta.len());
            if total > MAX_TOTAL_BYTES {
                tracing::warn!(dir = %dir.display(), "the browser runner is larger than {MAX_TOTAL_BYTES} bytes; not served");
                return WebAssets::none();
            }
            match std::fs::read(entry.path()) {
                Ok(bytes) => {
                    files.insert(name, (media, Arc::from(bytes)));
                }
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "a browser runner file is unreadable")
                }
            }
        }
        if !files.contains_key("runner.js") {
            return WebAssets::none();
        }
        tracing::info!(files = files.len(), bytes = total, "browser runner loaded");
        WebAssets {
            files: Arc::new(files),
            missing: None,
        }
    }

    /// Whether the runner is served.
    pub fn is_built(&self) -> bool {
        self.missing.is_none()
    }

    fn get(&self, name: &str) -> Option<&Asset> {
        self.files.get(name)
    }
}

/// The directory the runner is read from: `--web-dir`, else `NODETOOL_WEB_DIR`, else the first
/// of [`runner_dirs_beside`] the running executable that holds a built runner (else the first
/// of them, so the answer says where one would be read from).
pub fn web_dir(flag: Option<PathBuf>, env: Option<std::ffi::OsString>) -> PathBuf {
    flag.or_else(|| env.filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| {
            let candidates = std::env::current_exe()
                .map(|exe| runner_dirs_beside(&exe))
                .unwrap_or_default();
            candidates
                .iter()
                .find(|dir| dir.join("runner.js").is_file())
                .or(candidates.first())
                .cloned()
                .unwrap_or_default()
        })
}

/// Where a built runner is looked for, relative to the executable `exe`, in order:
/// `<bin>/web` (copied beside the binary), `<bin>/../share/nodetool/web` (an install prefix:
/// `~/.cargo/bin/nodetool` reads `~/.cargo/share/nodetool/web`), `<bin>/../../web/dist` (the
/// binary in a checkout's `target/<profile>/`).
pub fn runner_dirs_beside(exe: &Path) -> Vec<PathBuf> {
    let mut ancestors = exe.ancestors().skip(1);
    let bin = ancestors.next();
    let prefix = ancestors.next();
    let checkout = ancestors.next();
    [
        bin.map(|d| d.join("web")),
        prefix.map(|d| d.join("share/nodetool/web")),
        checkout.map(|d| d.join("web/dist")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn safe_name(name: &str) -> bool {
    !name.starts_with('.')
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn media_type(name: &str) -> Option<&'static str> {
    let extension = name.rsplit_once('.')?.1;
    Some(match extension {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "json" => "application/json",
        "css" => "text/css; charset=utf-8",
        "html" => "text/html; charset=utf-8",
        "map" => "application/json",
        _ => return None,
    })
}

/// `GET /web/{file}`.
pub async fn asset(State(state): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    let web = state.web();
    if let Some(why) = &web.missing {
        return ApiError::NotFound(why.clone()).into_response();
    }
    let Some((media, bytes)) = web.get(&name) else {
        return ApiError::NotFound(format!("the browser runner has no file {name:?}"))
            .into_response();
    };
    let headers: [(HeaderName, HeaderValue); 4] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(media)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
    ];
    (StatusCode::OK, headers, bytes.to_vec()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_is_looked_for_beside_the_executable() {
        assert_eq!(
            runner_dirs_beside(Path::new("/opt/nodetool/bin/nodetool")),
            [
                PathBuf::from("/opt/nodetool/bin/web"),
                PathBuf::from("/opt/nodetool/share/nodetool/web"),
                PathBuf::from("/opt/web/dist"),
            ]
        );
        assert_eq!(
            runner_dirs_beside(Path::new("/src/checkout/target/release/nodetool"))[2],
            PathBuf::from("/src/checkout/web/dist")
        );
    }

    #[test]
    fn the_flag_wins_then_the_variable_then_the_executable() {
        assert_eq!(
            web_dir(Some("/a".into()), Some("/b".into())),
            PathBuf::from("/a")
        );
        assert_eq!(web_dir(None, Some("/b".into())), PathBuf::from("/b"));
        let exe = std::env::current_exe().unwrap_or_default();
        let found = web_dir(None, Some("".into()));
        assert!(
            runner_dirs_beside(&exe).contains(&found),
            "{}",
            found.display()
        );
    }
}
