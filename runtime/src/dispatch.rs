//! The dispatcher contract between generated facades and the host side of host and WASM
//! modules. The guest calls it through its private bridges; `nodetool-host-modules` and
//! `nodetool-wasm-host` implement it. It lives here, not in the guest, so an implementation
//! never links the JavaScript engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use nodetool_protocol::packed::Packed;
use nodetool_protocol::value::Value;

/// A failed dispatcher call; thrown in the guest as an `Error` with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchError {
    /// The message (by convention `<id>.<export>: ...` for host modules).
    pub message: String,
}

/// What a dispatcher call resolves to.
pub type DispatchFuture = Pin<Box<dyn Future<Output = Result<Value, DispatchError>> + Send>>;

/// What a call made for the guest resolves to: a [`Value`], or a result the implementation
/// packed for the trip into JavaScript (many small values, such as `csv.parse`'s records).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A value, converted into the guest as it is.
    Value(Value),
    /// A packed value, which stands for [`Packed::to_value`].
    Packed(Packed),
}

impl Reply {
    /// The value this reply stands for.
    pub fn into_value(self) -> Result<Value, DispatchError> {
        match self {
            Reply::Value(value) => Ok(value),
            Reply::Packed(packed) => packed.to_value().map_err(|e| DispatchError {
                message: format!("the result could not be read: {e}"),
            }),
        }
    }
}

/// What a dispatcher call made for the guest resolves to.
pub type ReplyFuture = Pin<Box<dyn Future<Output = Result<Reply, DispatchError>> + Send>>;

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

    /// [`call`](Dispatcher::call) made by the guest's bridge: the same checks and the same
    /// result, which an implementation may answer packed ([`Reply::Packed`]) when converting a
    /// [`Value`] tree would cost more than the call itself. By default, `call`'s value.
    fn call_for_guest(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> ReplyFuture {
        let call = self.call(module_key, export, args, deadline);
        Box::pin(async move { call.await.map(Reply::Value) })
    }
}

/// Host work executing now in this process, on threads of its own (a host-module call, a
/// `fetch`), counted from its thread's start to its end. A sandbox worker asks after each run:
/// work the run did not wait for is still computing, and only ending the process ends it.
static HOST_WORK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How much host work is executing in this process now (see [`on_own_thread`]).
pub fn host_work_running() -> usize {
    HOST_WORK.load(std::sync::atomic::Ordering::Acquire)
}

/// One piece of host work, counted while this value lives.
#[derive(Debug)]
struct HostWork(());

impl HostWork {
    fn start() -> HostWork {
        HOST_WORK.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        HostWork(())
    }
}

impl Drop for HostWork {
    fn drop(&mut self) {
        HOST_WORK.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Where a host-work thread leaves its answer and finds whom to wake.
struct Slot<T> {
    answer: Option<T>,
    waker: Option<std::task::Waker>,
}

type Shared<T> = std::sync::Arc<std::sync::Mutex<Slot<T>>>;

fn lock<T>(slot: &Shared<T>) -> std::sync::MutexGuard<'_, Slot<T>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands a host-work thread's answer to the future [`on_own_thread`] returned.
pub struct Deliver<T>(Shared<T>);

impl<T> Deliver<T> {
    /// Settles the future with `answer` and wakes whoever polls it.
    pub fn send(self, answer: T) {
        let mut slot = lock(&self.0);
        slot.answer = Some(answer);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
    }
}

/// The future of a host-work thread's answer.
pub struct Delivered<T>(Shared<T>);

impl<T> Future for Delivered<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
        let mut slot = lock(&self.0);
        match slot.answer.take() {
            Some(answer) => std::task::Poll::Ready(answer),
            None => {
                slot.waker = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        }
    }
}

/// A future and the handle that settles it, for an answer another thread (or a channel's
/// reader) will deliver.
pub fn answer_slot<T>() -> (Deliver<T>, Delivered<T>) {
    let slot: Shared<T> = std::sync::Arc::new(std::sync::Mutex::new(Slot {
        answer: None,
        waker: None,
    }));
    (Deliver(std::sync::Arc::clone(&slot)), Delivered(slot))
}

/// Waits on this thread for `future` (its waker unparks the thread).
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(answer) = future.as_mut().poll(&mut cx) {
            return answer;
        }
        std::thread::park();
    }
}

/// Runs `work` on a thread of its own, counted as host work ([`host_work_running`]) until the
/// thread ends (so work that outlives its answer, such as freeing what it was made from, is
/// still counted), and returns the future of what `work` delivers.
pub fn on_own_thread<T: Send + 'static>(
    work: impl FnOnce(Deliver<T>) + Send + 'static,
) -> Delivered<T> {
    let (deliver, delivered) = answer_slot();
    let running = HostWork::start();
    std::thread::spawn(move || {
        let _running = running;
        work(deliver);
    });
    delivered
}
