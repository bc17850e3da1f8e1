//! The dispatcher contract between generated facades and the host side of host and WASM
//! modules. The guest calls it through its private bridges; `nodetool-host-modules` and
//! `nodetool-wasm-host` implement it. It lives here, not in the guest, so an implementation
//! never links the JavaScript engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use nodetool_protocol::value::Value;

/// A failed dispatcher call; thrown in the guest as an `Error` with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchError {
    /// The message (by convention `<id>.<export>: ...` for host modules).
    pub message: String,
}

/// What a dispatcher call resolves to.
pub type DispatchFuture = Pin<Box<dyn Future<Output = Result<Value, DispatchError>> + Send>>;

/// The host side of generated facades. WASM and host modules implement it; the guest calls it
/// with the facade's module key (its specifier), the export name and the argument list. Every
/// check that makes a call legitimate belongs to the implementation: the bridge is private,
/// but hiding is not the boundary.
pub trait Dispatcher: Send + Sync {
    /// Starts one call. The future is polled by the run's event loop and dropped if the run ends
    /// first. `deadline` is the run's: an implementation that works on the caller's thread (as
    /// the WASM host does, to keep a call in microseconds) must not run past it.
    fn call(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> DispatchFuture;
}
