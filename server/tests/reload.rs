//! A run in flight during a reload that removes its pack finishes with the catalog it started
//! with; runs admitted after the reload see the new one.
//!
//! Deterministic: the first catalog holds the run inside `resolve_for_execution` (after the run
//! took its snapshot) until the test has removed the pack, reloaded, and checked that the new
//! catalog no longer serves it.

mod support;

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use nodetool_frontend::search::SourceError;
use nodetool_protocol::catalog::{Declaration, Resolution, SkillDisclosure, Status, Summary};
use nodetool_runtime::{DeliveryFuture, SandboxModuleCatalog};
use nodetool_server::{AppState, CatalogSource};
use serde_json::json;
use support::{World, get, must, post_json, send, test_config};

/// A catalog that stops a run inside resolution until released.
struct Held {
    inner: Arc<dyn SandboxModuleCatalog>,
    entered: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
}

impl SandboxModuleCatalog for Held {
    fn summaries(&self) -> &[Summary] {
        self.inner.summaries()
    }
    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        let _ = self
            .entered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(());
        let _ = self
            .release
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv_timeout(Duration::from_secs(30));
        self.inner.resolve_for_execution(declarations)
    }
    fn diagnostics(&self) -> &[Status] {
        self.inner.diagnostics()
    }
    fn pack_skill(&self, pack_name: &str) -> Option<SkillDisclosure> {
        self.inner.pack_skill(pack_name)
    }
    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        self.inner.authorize_delivery(module_id)
    }
}

/// The first load is held; every later load is the plain discovery.
struct FirstHeld {
    discovery: Arc<dyn CatalogSource>,
    hold: Mutex<Option<(Sender<()>, Receiver<()>)>>,
}

impl CatalogSource for FirstHeld {
    fn load(&self) -> Result<Arc<dyn SandboxModuleCatalog>, SourceError> {
        let inner = self.discovery.load()?;
        let hold = self
            .hold
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(match hold {
            Some((entered, release)) => Arc::new(Held {
                inner,
                entered: Mutex::new(entered),
                release: Mutex::new(release),
            }),
            None => inner,
        })
    }
}

const BODY: &str = "import { haversine } from \"@fixture/geo\";\nreturn haversine(1, 3);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_keeps_its_catalog_across_a_reload_that_removes_its_pack() {
    let world = World::empty();
    world.install_fixture("@fixture/geo");
    let (entered_tx, entered_rx) = channel();
    let (release_tx, release_rx) = channel();
    let state = must(
        AppState::new(
            test_config(),
            Arc::new(FirstHeld {
                discovery: world.source(),
                hold: Mutex::new(Some((entered_tx, release_rx))),
            }),
        ),
        "build the state",
    );

    let in_flight = tokio::spawn({
        let state = state.clone();
        async move { post_json(&state, "/api/run", &json!({ "code": BODY })).await }
    });
    // The run has its snapshot and is inside resolution.
    let entered = tokio::task::spawn_blocking(move || {
        entered_rx.recv_timeout(Duration::from_secs(30)).is_ok()
    })
    .await;
    assert!(matches!(entered, Ok(true)), "the run never started");

    // The pack goes away and the reload swaps in a catalog without it.
    must(
        std::fs::remove_dir_all(world.root.join("@fixture/geo")),
        "remove the pack",
    );
    let reloaded = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        support::RELOAD,
        Body::empty(),
    )
    .await;
    assert_eq!(reloaded.status, StatusCode::OK);
    assert_eq!(reloaded.json()["modules"], json!(0));
    let listed = get(&state, "/api/packs/sandbox-modules").await.json();
    assert_eq!(listed["summaries"], json!([]));
    let delivery = get(&state, "/api/sandbox-modules/@fixture/geo").await;
    assert_eq!(delivery.status, StatusCode::NOT_FOUND);
    // A run admitted now sees the new catalog.
    let after = post_json(&state, "/api/run", &json!({ "code": BODY }))
        .await
        .json();
    assert_eq!(after["ok"], json!(false));
    assert_eq!(after["error"]["code"], json!("module-not-found"));

    // The run in flight finishes with the catalog it started with.
    must(release_tx.send(()), "release the run");
    let answer = must(in_flight.await, "the run task");
    assert_eq!(answer.status, StatusCode::OK);
    let out = answer.json();
    assert_eq!(out["ok"], json!(true), "{out}");
    assert_eq!(out["result"], json!(222));
    assert_eq!(state.runs_admitted(), 0);
}
