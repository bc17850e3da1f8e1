//! The connection loop: hyper's HTTP/1.1 server under the router, with hyper's own header read
//! timer, a cap on the request head, a cap on open connections, and the shutdown sequence.
//!
//! - **Connections**: at most `max_connections` open at once. The loop takes a place before it
//!   accepts, so beyond the cap new connections wait in the kernel's listen backlog until one
//!   closes; every connection that does nothing is closed by the header timer, so a place is
//!   never held for long without a request in it.
//! - **Header read timeout**: hyper's `header_read_timeout` (with tokio's timer). hyper starts
//!   it when it begins reading a request head and again when a kept-alive connection goes idle,
//!   so the same value is the idle keep-alive timeout. A connection whose head does not arrive
//!   in time is closed without an answer: there is no request yet to answer.
//! - **Head size**: hyper's parser refuses a head above [`PARSER_HEAD_CEILING`] with a bare
//!   `431`; the guard refuses one above `access::MAX_HEAD_BYTES` (well below) with the usual
//!   JSON `detail`.
//! - **Shutdown**: when `shutdown` completes the server drains: `/readyz` answers `503`, new
//!   runs are refused (`503` with `Retry-After`), runs waiting for a worker end, and it goes on
//!   accepting and answering while runs are in flight (each ends by its deadline plus the
//!   grace), so a load balancer polling `/readyz` sees the drain. Then it stops accepting,
//!   closes idle connections and waits for the requests still in flight, within the same bound.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt as _;

use crate::{AppState, router};

/// The most hyper's parser reads of a request head before it answers `431` itself.
pub const PARSER_HEAD_CEILING: usize = 64 * 1024;

/// How often a draining server looks whether its runs have ended.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// Serves `state`'s router on `listener` until `shutdown` completes, then drains and stops as
/// the module documentation says.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let config = state.config().clone();
    let app = router(state.clone());
    let places = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .max_header_size(PARSER_HEAD_CEILING)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let open = |(place, stream, peer): (OwnedSemaphorePermit, TcpStream, SocketAddr)| {
        let _ = stream.set_nodelay(true);
        let service = app
            .clone()
            .map_request(move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            });
        let connection = graceful.watch(
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
        );
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(place);
        });
    };

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(&listener, &places) => open(accepted),
        }
    }

    let runner = state.runner();
    let grace = runner.pool().map_or(Duration::ZERO, |p| p.options().grace);
    state.begin_draining();
    let bound = Instant::now() + state.remaining_deadlines() + grace + Duration::from_millis(200);
    while state.runs_admitted() > 0 {
        if Instant::now() >= bound {
            tracing::warn!("runs were still in flight at the end of the shutdown bound; stopping");
            break;
        }
        tokio::select! {
            accepted = accept(&listener, &places) => open(accepted),
            () = tokio::time::sleep(DRAIN_POLL) => {}
        }
    }
    drop(listener);
    let left = bound
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(left) => {
            tracing::warn!("requests were still in flight at the end of the shutdown bound; stopping");
        }
    }
    Ok(())
}

/// The next connection, once a place is free. Errors of one connection are skipped; any other
/// (out of file descriptors) is logged and retried after a pause, as `axum::serve` does.
async fn accept(
    listener: &TcpListener,
    places: &Arc<Semaphore>,
) -> (OwnedSemaphorePermit, TcpStream, SocketAddr) {
    // The semaphore is never closed, so acquiring cannot fail; were that to change, waiting for
    // ever is the safe answer.
    let Ok(place) = Arc::clone(places).acquire_owned().await else {
        return std::future::pending().await;
    };
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => return (place, stream, peer),
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                tracing::error!(error = %e, "accepting a connection failed; retrying in a second");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
