//! `cargo xtask fixtures --browser`: every guest contract fixture of
//! `tests/contract/fixtures.json` through the browser runner (`web/`), in Debian's headless
//! Chromium, against this repository's server.
//!
//! The server is `nodetool-server`'s router, started in this process on a loopback port with
//! an ephemeral number and serving the freshly built runner under `/web/`. Its catalog is the
//! fixture's own modules ([`FixtureCatalog`]), swapped in before each case through the
//! server's reload, so the browser fetches every module through the real delivery route and
//! verifies every body against its `X-Content-Sha256` as it would a discovered pack's. A
//! fixture's modules cannot go through discovery instead: many are exactly what discovery
//! withholds (a pack module importing `node:fs`, a private bridge, a file it does not ship),
//! and the loader must refuse them again.
//!
//! One more case is not a fixture: the server is made to serve one module body with one byte
//! changed, and the browser must refuse it, naming the module, and cache nothing of it.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use nodetool_frontend::search::SourceError;
use nodetool_protocol::catalog::ResolvedModule;
use nodetool_runtime::SandboxModuleCatalog;
use nodetool_server::{AppState, CatalogSource, ServerConfig, WebAssets};
use nodetool_tests::chromium::{Browser, Cdp, find_chromium};
use nodetool_tests::contract::catalog::FixtureCatalog;
use nodetool_tests::contract::{Fixture, FixtureFile, check_answer};
use serde_json::{Value, json};

/// The catalog the server reloads: whatever fixture is current.
struct FixtureSource(Arc<Mutex<Vec<ResolvedModule>>>);

impl CatalogSource for FixtureSource {
    fn load(&self) -> Result<Arc<dyn SandboxModuleCatalog>, SourceError> {
        let modules = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Ok(Arc::new(FixtureCatalog::new(modules)))
    }
}

/// The delivery id whose body the server corrupts (one byte flipped), if any.
type Tamper = Arc<Mutex<Option<String>>>;

fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = path
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Flips the first byte of the tampered module's body, leaving every header (its
/// `X-Content-Sha256` included) as the route wrote it.
async fn tamper_body(State(tamper): State<Tamper>, request: Request, next: Next) -> Response {
    let path = percent_decode(request.uri().path());
    let target = tamper
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .map(|id| format!("/api/sandbox-modules/{id}"));
    let response = next.run(request).await;
    if target.as_deref() != Some(path.as_str()) || response.status() != 200 {
        return response;
    }
    let (parts, body) = response.into_parts();
    let mut bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes.to_vec(),
        Err(_) => Vec::new(),
    };
    if let Some(first) = bytes.first_mut() {
        *first ^= 1;
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// `NODETOOL_CHROMIUM`, else `chromium` or `chromium-browser` on `PATH`.
/// Installs (from the committed lockfile, no install scripts) and builds the runner.
pub fn build_web(root: &Path) -> Result<(), String> {
    let web = root.join("web");
    let npm = |args: &[&str], what: &str| -> Result<(), String> {
        println!("xtask: {what}");
        let status = Command::new("npm")
            .args(args)
            .arg("--prefix")
            .arg(&web)
            .status()
            .map_err(|e| format!("cannot run npm (needed to build the browser runner): {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{what} failed ({status})"))
        }
    };
    if !web.join("node_modules/.package-lock.json").is_file() {
        npm(
            &["ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            "npm ci --ignore-scripts --prefix web",
        )?;
    }
    npm(&["run", "build", "--silent"], "npm run build --prefix web")
}

/// A headless Chromium with its DevTools endpoint; killed on drop.
/// The server in this process: the router, the catalog it reloads, the tamper switch.
struct Server {
    runtime: tokio::runtime::Runtime,
    state: AppState,
    current: Arc<Mutex<Vec<ResolvedModule>>>,
    tamper: Tamper,
    base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Server {
    fn start(root: &Path) -> Result<Server, String> {
        let web = WebAssets::load(&root.join("web/dist"));
        if !web.is_built() {
            return Err("web/dist has no built runner".into());
        }
        let current = Arc::new(Mutex::new(Vec::new()));
        let source = Arc::new(FixtureSource(Arc::clone(&current)));
        let tamper: Tamper = Arc::new(Mutex::new(None));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
            .map_err(|e| format!("cannot listen on loopback: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("cannot read the listening address: {e}"))?;
        // The server's own Host rule: loopback names and addresses on the bound port.
        let config = ServerConfig {
            max_running: 2,
            ..ServerConfig::standard(2, nodetool_server::Access::loopback(address.port()))
        };
        let state = AppState::with_web(config, source, web).map_err(|e| e.to_string())?;
        let router = nodetool_server::router(state.clone()).layer(middleware::from_fn_with_state(
            Arc::clone(&tamper),
            tamper_body,
        ));
        let (send, receive) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = receive.await;
                })
                .await;
        });
        Ok(Server {
            runtime,
            state,
            current,
            tamper,
            base: format!("http://{address}"),
            shutdown: Some(send),
        })
    }

    /// Serves `modules` from now on (the server's own reload swaps the catalog in).
    fn serve(&self, modules: &[ResolvedModule]) -> Result<(), String> {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = modules.to_vec();
        self.runtime
            .block_on(self.state.reload())
            .map(|_| ())
            .map_err(|e| format!("reload: {e:?}"))
    }

    fn tamper_with(&self, id: Option<&str>) {
        *self.tamper.lock().unwrap_or_else(PoisonError::into_inner) = id.map(str::to_string);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(send) = self.shutdown.take() {
            let _ = send.send(());
        }
    }
}

/// The page's request for one fixture (the fixture's modules are the run's resolution).
fn request(fixture: &Fixture) -> Value {
    json!({
        "code": fixture.code,
        "input": fixture.inputs.as_ref().map_or(Value::Null, nodetool_protocol::value::Value::to_json),
        "secrets": fixture.secrets,
        "timeoutMs": fixture.timeout_ms,
        "modules": fixture.modules.iter().map(|m| m.specifier.clone()).collect::<Vec<_>>(),
    })
}

fn run_in_page(cdp: &mut Cdp, request: &Value) -> Result<Value, String> {
    cdp.eval(&format!("window.__nodetoolRunner.run({request})"))
}

/// Runs every fixture in the browser: one line per failure, then `N passed, M failed`.
/// Returns whether none failed; `Err` when the harness itself could not run.
pub fn fixtures(root: &Path) -> Result<bool, String> {
    let chromium = find_chromium().ok_or(
        "no chromium on this machine (Debian: apt-get install chromium; or set NODETOOL_CHROMIUM)",
    )?;
    build_web(root)?;
    let path = root.join(nodetool_tests::contract::FIXTURES_JSON_PATH);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let file: FixtureFile = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a fixture file: {e}", path.display()))?;

    let server = Server::start(root)?;
    let mut browser = Browser::launch(&chromium, None)?;
    let cdp = &mut browser.cdp;
    cdp.open_page()?;
    cdp.call(
        "Page.navigate",
        json!({ "url": format!("{}/", server.base) }),
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while cdp.eval("document.readyState")? != json!("complete") {
        if Instant::now() > deadline {
            return Err("the Packages page never finished loading".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cdp.eval(
        "import('/web/runner.js').then((m) => { window.__nodetoolRunner = m.createRunner(); return true; })",
    )?;
    println!(
        "xtask: {} fixtures in {} against {}",
        file.fixtures.len(),
        chromium.display(),
        server.base
    );

    let started = Instant::now();
    let mut passed = 0;
    let mut failed = 0;
    for fixture in &file.fixtures {
        server.serve(&fixture.modules)?;
        let outcome =
            run_in_page(cdp, &request(fixture)).and_then(|answer| check_answer(fixture, &answer));
        match outcome {
            Ok(()) => passed += 1,
            Err(why) => {
                failed += 1;
                println!("FAILED {}: {why}", fixture.name);
            }
        }
        let _ = std::io::stdout().flush();
    }

    // A tampered body: one byte of an internal helper flipped on the wire.
    match tampered_body_is_refused(&server, cdp, &file.fixtures) {
        Ok(line) => {
            passed += 1;
            println!("xtask: {line}");
        }
        Err(why) => {
            failed += 1;
            println!("FAILED tampered-body-refused: {why}");
        }
    }
    println!(
        "xtask: browser fixtures took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("{passed} passed, {failed} failed");
    Ok(failed == 0)
}

fn tampered_body_is_refused(
    server: &Server,
    cdp: &mut Cdp,
    fixtures: &[Fixture],
) -> Result<String, String> {
    let fixture = fixtures
        .iter()
        .find(|f| f.name == "declared-import")
        .ok_or("the declared-import fixture is missing")?;
    let target = "@acme/nodetool-geo::sandbox/internal/round.js";
    server.serve(&fixture.modules)?;
    // Nothing of the module may be cached from an earlier case: a fresh runner.
    cdp.eval("window.__nodetoolTamperRunner?.close(); import('/web/runner.js').then((m) => { window.__nodetoolTamperRunner = m.createRunner(); return true; })")?;
    server.tamper_with(Some(target));
    let answer = cdp.eval(&format!(
        "window.__nodetoolTamperRunner.run({})",
        request(fixture)
    ));
    server.tamper_with(None);
    let answer = answer?;
    if answer["ok"] != json!(false) {
        return Err(format!("the tampered body ran: {answer}"));
    }
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    if !message.contains(target) || !message.contains("failed verification") {
        return Err(format!(
            "the refusal does not name the module and the check: {answer}"
        ));
    }
    let stats = cdp.eval("window.__nodetoolTamperRunner.stats")?;
    // The same runner, the honest body again: it must run (nothing bad was cached).
    let again = cdp.eval(&format!(
        "window.__nodetoolTamperRunner.run({})",
        request(fixture)
    ))?;
    check_answer(fixture, &again).map_err(|why| format!("after the refusal: {why}"))?;
    Ok(format!(
        "tampered body refused: {} — {message} (refused {} body, then ran the honest one)",
        answer["error"]["code"].as_str().unwrap_or_default(),
        stats["refused"]
    ))
}
