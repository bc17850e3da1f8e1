//! What the server's tests share: isolated worlds of fixture packs (over the harness's
//! `nodetool_tests::world`), in-process requests, and a `nodetool-server` process on a free
//! loopback port.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use nodetool_frontend::search::{Environment, PackSources, RootLabels};
use nodetool_runtime::NoCompiledModules;
use nodetool_server::{Access, AppState, CatalogSource, Discovery, ServerConfig};
use nodetool_tests::world as harness;
use tower::ServiceExt;

pub use nodetool_tests::world::{copy_dir, must};

/// The repo root.
pub fn repo() -> PathBuf {
    harness::repo_root()
}

/// The fixture pack roots.
pub fn fixtures() -> PathBuf {
    harness::fixture_packs()
}

/// The port in-process requests claim to reach (their default `Host` is `127.0.0.1:7777`).
pub const TEST_PORT: u16 = 7777;

/// The headers of a reload as the Packages page sends it.
pub const RELOAD: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("x-nodetool-reload", "1"),
];

/// A small configuration for tests: two runs at once, four waiting, 1 MiB bodies, the
/// loopback access rules on [`TEST_PORT`].
pub fn test_config() -> ServerConfig {
    ServerConfig {
        max_running: 2,
        max_queued: 4,
        max_request_bytes: 1024 * 1024,
        ..ServerConfig::standard(2, Access::loopback(TEST_PORT))
    }
}

/// One isolated world: the harness's world (home, config, data, cache and temporary dirs, the
/// shipped root), a writable pack root, and further pack roots.
pub struct World {
    /// The harness's world; `tmp.path()` is the temp dir everything of this world is under.
    pub tmp: harness::World,
    /// A writable installed root (searched first).
    pub root: PathBuf,
    /// Further `--packs` roots after `root`.
    pub more_roots: Vec<PathBuf>,
}

impl World {
    /// The fixture world: `installed-a`, `installed-b` and `shipped` from the fixtures, plus an
    /// empty writable root in front.
    pub fn fixtures() -> World {
        let world = World::in_world(harness::World::with_shipped(fixtures().join("shipped")));
        World {
            more_roots: vec![
                fixtures().join("installed-a"),
                fixtures().join("installed-b"),
            ],
            ..world
        }
    }

    /// Only a writable root (empty) and an empty shipped root.
    pub fn empty() -> World {
        World::in_world(harness::World::new())
    }

    /// The repo's shipped packs as the shipped root.
    pub fn shipped_packs() -> World {
        World::in_world(harness::World::with_shipped(repo().join("packs")))
    }

    fn in_world(tmp: harness::World) -> World {
        let root = tmp.dir("root");
        World {
            tmp,
            root,
            more_roots: Vec::new(),
        }
    }

    /// The shipped root.
    pub fn shipped(&self) -> &Path {
        self.tmp.shipped()
    }

    /// The `nodetool-server` binary in this world (the harness's isolated environment), no
    /// arguments yet.
    pub fn server_command(&self) -> Command {
        self.tmp.command(env!("CARGO_BIN_EXE_nodetool-server"))
    }

    /// Copies the fixture pack `name` (`@fixture/geo`) from `installed-a` into the writable root.
    pub fn install_fixture(&self, name: &str) {
        copy_dir(
            &fixtures().join("installed-a").join(name),
            &self.root.join(name),
        );
    }

    /// Writes the operator allowlist.
    pub fn trust(&self, names: &[&str]) {
        let dir = self.tmp.config().join("nodetool");
        must(std::fs::create_dir_all(&dir), "create the config dir");
        must(
            std::fs::write(
                dir.join("packs.json"),
                serde_json::json!({ "allowed": names }).to_string(),
            ),
            "write the allowlist",
        );
    }

    pub fn sources(&self) -> PackSources {
        let mut explicit = vec![self.root.clone()];
        explicit.extend(self.more_roots.iter().cloned());
        PackSources {
            explicit,
            env: Environment {
                xdg_config_home: Some(self.tmp.config()),
                xdg_data_home: Some(self.tmp.data()),
                shipped: Some(self.shipped().to_path_buf()),
                ..Environment::default()
            },
            labels: RootLabels::Opaque,
        }
    }

    /// The production catalog source over this world.
    pub fn source(&self) -> Arc<dyn CatalogSource> {
        Arc::new(Discovery {
            sources: self.sources(),
            compiled: Arc::new(NoCompiledModules),
            first_use: None,
        })
    }

    pub fn state(&self, config: ServerConfig) -> AppState {
        must(
            AppState::new(config, self.source()),
            "build the server state",
        )
    }

    /// Every path a leak check looks for.
    pub fn paths(&self) -> Vec<String> {
        vec![
            self.tmp.path().display().to_string(),
            fixtures().display().to_string(),
            repo().display().to_string(),
        ]
    }
}

/// One answer, read whole.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Fails when the body names any of `paths`.
    pub fn assert_no_path(&self, paths: &[String]) {
        let text = self.text();
        for path in paths {
            assert!(!text.contains(path.as_str()), "a path leaked: {text}");
        }
        for (name, value) in &self.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            for path in paths {
                assert!(
                    !value.contains(path.as_str()),
                    "a path leaked in {name}: {value}"
                );
            }
        }
    }
}

/// Sends one request through the router in-process, as from `127.0.0.1` to
/// `127.0.0.1:`[`TEST_PORT`] (a `host` in `headers` replaces that `Host`).
pub async fn send(
    state: &AppState,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Answer {
    send_from(state, "127.0.0.1:40000", method, uri, headers, body).await
}

/// [`send`] from the peer address `peer`.
pub async fn send_from(
    state: &AppState,
    peer: &str,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request = request.header("host", format!("127.0.0.1:{TEST_PORT}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let peer: std::net::SocketAddr = must(peer.parse(), "parse a peer address");
    let request = request.extension(axum::extract::ConnectInfo(peer));
    let request = must(request.body(body.into()), "build a request");
    let response = must(
        nodetool_server::router(state.clone())
            .oneshot(request)
            .await,
        "route a request",
    );
    let status = response.status();
    let headers = response.headers().clone();
    let body = must(
        axum::body::to_bytes(response.into_body(), usize::MAX).await,
        "read a response body",
    );
    Answer {
        status,
        headers,
        body: body.to_vec(),
    }
}

pub async fn get(state: &AppState, uri: &str) -> Answer {
    send(state, Method::GET, uri, &[], Body::empty()).await
}

pub async fn post_json(state: &AppState, uri: &str, json: &serde_json::Value) -> Answer {
    send(
        state,
        Method::POST,
        uri,
        &[("content-type", "application/json")],
        json.to_string(),
    )
    .await
}

/// The result of `id.export(...args)` through the host-module route the browser runner calls
/// (`POST /api/host-modules/<id>/<export>`), which must answer 200.
pub async fn host_result(
    state: &AppState,
    id: &str,
    export: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let answer = post_json(
        state,
        &format!("/api/host-modules/{id}/{export}"),
        &serde_json::json!({ "args": args }),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "{id}.{export}: {}",
        answer.text()
    );
    answer.json()["result"].clone()
}

/// A `nodetool-server` process on a free loopback port (`--port 0`; the address is its first
/// stdout line). Killed on drop if still running.
pub struct ServerProcess {
    pub child: Child,
    pub base: String,
}

impl ServerProcess {
    pub fn start(world: &World, extra: &[&str]) -> ServerProcess {
        ServerProcess::start_with_env(world, extra, &[])
    }

    /// [`ServerProcess::start`] with further environment variables.
    pub fn start_with_env(
        world: &World,
        extra: &[&str],
        vars: &[(&str, &std::ffi::OsStr)],
    ) -> ServerProcess {
        let mut command = world.server_command();
        command
            .args(["--host", "127.0.0.1", "--port", "0", "--packs"])
            .arg(&world.root)
            .args(extra)
            .env("RUST_LOG", "info,nodetool_server=debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for root in &world.more_roots {
            command.arg("--packs").arg(root);
        }
        for (name, value) in vars {
            command.env(name, value);
        }
        let mut child = must(command.spawn(), "start nodetool-server");
        let stdout = child
            .stdout
            .take()
            .unwrap_or_else(|| panic!("no stdout pipe"));
        let mut line = String::new();
        must(
            BufReader::new(stdout).read_line(&mut line),
            "read the listening line",
        );
        let base = line
            .trim()
            .strip_prefix("nodetool-server listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_string();
        ServerProcess { child, base }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = must(
            Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status(),
            "run kill",
        );
        assert!(status.success(), "kill -TERM failed");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
