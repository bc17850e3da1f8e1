//! `GET /metrics`: the Prometheus text format (OpenMetrics 1.0, which Prometheus scrapes),
//! written by `prometheus-client`. Every label value comes from a closed set (a route kind, a
//! stable run or refusal code), never from a request, so the series are bounded and nothing a
//! client sent appears in a scrape.
//!
//! | metric | what |
//! |---|---|
//! | `nodetool_runs_total{kind, outcome}` | runs (`kind="run"`) and host calls (`kind="host-call"`) by outcome: `ok` or the run error code |
//! | `nodetool_run_duration_seconds{kind}` | their durations as the runner measured them |
//! | `nodetool_gate_total{kind, answer}` | requests at the run gate: `admitted`, or `rejected` (a `503`, full or draining) |
//! | `nodetool_run_queue_depth`, `nodetool_runs_running` | waiting for a slot, and running, now |
//! | `nodetool_worker_restarts_total{cause}` | sandbox workers replaced: `timeout` (killed at the deadline), `crash`, `recycle` |
//! | `nodetool_workers_started_total`, `nodetool_workers_ready` | workers started so far, idle now |
//! | `nodetool_catalog_reloads_total{result}` | reloads, `ok` or `failed` |
//! | `nodetool_catalog_modules`, `nodetool_catalog_diagnostics` | in the current catalog |
//! | `nodetool_deliveries_total{answer}` | delivery route answers: `ok` (a body), `not-modified` (`304`), `forbidden`, `not-found` |
//! | `nodetool_http_refusals_total{rule}` | requests refused before they reached the gate, by rule (`host`, `origin`, `token`, `head-size`, `content-type`, `body-size`, `body-timeout`, `json-depth`, `malformed`, `operator`) |

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nodetool_frontend::worker::WorkerPool;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::gate::RunGate;

/// The media type of a scrape.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = [(&'static str, &'static str); 2];
type Label = [(&'static str, &'static str); 1];

/// What the server counts. Cheap to update from any thread.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<Labels, Counter>,
    run_seconds: Family<Label, Histogram>,
    gate: Family<Labels, Counter>,
    reloads: Family<Label, Counter>,
    deliveries: Family<Label, Counter>,
    refusals: Family<Label, Counter>,
    catalog_modules: Gauge,
    catalog_diagnostics: Gauge,
}

/// Values read at scrape time from the gate and the worker pool.
struct Live {
    gate: Arc<RunGate>,
    pool: Option<WorkerPool>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Live")
    }
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauge(
            &mut encoder,
            "nodetool_run_queue_depth",
            "Requests waiting for a run slot now.",
            self.gate.queued() as i64,
        )?;
        gauge(
            &mut encoder,
            "nodetool_runs_running",
            "Runs, validations and host calls executing now.",
            self.gate.running() as i64,
        )?;
        let Some(pool) = &self.pool else {
            return Ok(());
        };
        let counts = pool.counts();
        let restarts = ConstCounter::new(0u64);
        let mut family = encoder.encode_descriptor(
            "nodetool_worker_restarts",
            "Sandbox workers replaced, by cause.",
            None,
            restarts.metric_type(),
        )?;
        for (cause, value) in [
            ("timeout", &counts.killed),
            ("crash", &counts.crashed),
            ("recycle", &counts.recycled),
        ] {
            let labels = [("cause", cause)];
            ConstCounter::new(value.load(Ordering::Relaxed))
                .encode(family.encode_family(&labels)?)?;
        }
        let started = ConstCounter::new(counts.started.load(Ordering::Relaxed));
        let metric = encoder.encode_descriptor(
            "nodetool_workers_started",
            "Sandbox workers started (the first ones and every replacement).",
            None,
            started.metric_type(),
        )?;
        started.encode(metric)?;
        gauge(
            &mut encoder,
            "nodetool_workers_ready",
            "Sandbox workers idle and ready now.",
            pool.ready() as i64,
        )
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
    gauge.encode(metric)
}

impl Metrics {
    /// The metrics of a server whose runs pass `gate` and execute in `pool` (when isolated).
    pub fn new(gate: Arc<RunGate>, pool: Option<WorkerPool>) -> Metrics {
        let mut registry = Registry::default();
        let runs = Family::<Labels, Counter>::default();
        registry.register(
            "nodetool_runs",
            "Runs and host calls by outcome (ok or the run error code).",
            runs.clone(),
        );
        let run_seconds = Family::<Label, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.0005, 2.0, 17))) as fn() -> Histogram,
        );
        registry.register(
            "nodetool_run_duration_seconds",
            "Run and host call durations as the runner measured them.",
            run_seconds.clone(),
        );
        let gate_family = Family::<Labels, Counter>::default();
        registry.register(
            "nodetool_gate",
            "Requests at the run gate: admitted, or rejected with 503 (full or draining).",
            gate_family.clone(),
        );
        let reloads = Family::<Label, Counter>::default();
        registry.register(
            "nodetool_catalog_reloads",
            "Catalog reloads, ok or failed.",
            reloads.clone(),
        );
        let catalog_modules = Gauge::default();
        registry.register(
            "nodetool_catalog_modules",
            "Modules in the current catalog.",
            catalog_modules.clone(),
        );
        let catalog_diagnostics = Gauge::default();
        registry.register(
            "nodetool_catalog_diagnostics",
            "Diagnostics of the current catalog.",
            catalog_diagnostics.clone(),
        );
        let deliveries = Family::<Label, Counter>::default();
        registry.register(
            "nodetool_deliveries",
            "Delivery route answers: ok, not-modified (304), forbidden, not-found.",
            deliveries.clone(),
        );
        let refusals = Family::<Label, Counter>::default();
        registry.register(
            "nodetool_http_refusals",
            "Requests refused before they reached the run gate, by rule.",
            refusals.clone(),
        );
        registry.register_collector(Box::new(Live { gate, pool }));
        Metrics {
            registry,
            runs,
            run_seconds,
            gate: gate_family,
            reloads,
            deliveries,
            refusals,
            catalog_modules,
            catalog_diagnostics,
        }
    }

    /// A run (`kind`: `run` or `host-call`) ended with `outcome` (`ok` or its error code).
    pub fn ran(&self, kind: &'static str, outcome: &'static str, duration: Duration) {
        self.runs
            .get_or_create(&[("kind", kind), ("outcome", outcome)])
            .inc();
        self.run_seconds
            .get_or_create(&[("kind", kind)])
            .observe(duration.as_secs_f64());
    }

    /// A request of `kind` was admitted at the gate (`true`) or rejected with 503.
    pub fn gated(&self, kind: &'static str, admitted: bool) {
        let answer = if admitted { "admitted" } else { "rejected" };
        self.gate
            .get_or_create(&[("kind", kind), ("answer", answer)])
            .inc();
    }

    /// A reload ended.
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.reloads.get_or_create(&[("result", result)]).inc();
    }

    /// The delivery route answered.
    pub fn delivered(&self, answer: &'static str) {
        self.deliveries.get_or_create(&[("answer", answer)]).inc();
    }

    /// The guard refused a request.
    pub fn refused(&self, rule: &'static str) {
        self.refusals.get_or_create(&[("rule", rule)]).inc();
    }

    /// The scrape, with the catalog's current counts.
    pub fn encode(&self, modules: usize, diagnostics: usize) -> Result<String, std::fmt::Error> {
        self.catalog_modules.set(modules as i64);
        self.catalog_diagnostics.set(diagnostics as i64);
        let mut text = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}
