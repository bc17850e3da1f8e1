//! The run gate: how many runs execute at once, how many may wait, and a clean refusal beyond.
//!
//! A run holds a permit from admission until its blocking work ends (not until its request
//! ends: a client that disconnects cancels the run, but the permit is released only when the
//! guest has actually stopped). Beyond `running + queued` the gate answers at once, so a burst
//! gets `503` instead of slowing every run down.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bounds concurrent runs and the queue in front of them.
pub struct RunGate {
    running: Arc<Semaphore>,
    admitted: AtomicUsize,
    slots: usize,
    capacity: usize,
}

/// The gate is full: every run slot is busy and the queue is at its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// A place at the gate: counts toward the bound until dropped.
struct Place(Arc<RunGate>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The right to run now. Move it into the blocking work; dropping it frees the slot.
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
    _place: Place,
}

impl RunGate {
    /// A gate running at most `running` at once with at most `queued` waiting.
    pub fn new(running: usize, queued: usize) -> Arc<RunGate> {
        let running = running.max(1);
        Arc::new(RunGate {
            running: Arc::new(Semaphore::new(running)),
            admitted: AtomicUsize::new(0),
            slots: running,
            capacity: running + queued,
        })
    }

    /// Waits for a run slot, or refuses at once when the queue is full.
    pub async fn admit(self: &Arc<Self>) -> Result<Admitted, Busy> {
        let before = self.admitted.fetch_add(1, Ordering::AcqRel);
        let place = Place(Arc::clone(self));
        if before >= self.capacity {
            return Err(Busy);
        }
        // The semaphore is never closed, so acquiring fails only if that ever changes.
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|_| Busy)?;
        Ok(Admitted {
            _permit: permit,
            _place: place,
        })
    }

    /// Runs running or waiting now.
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::Acquire)
    }

    /// Runs holding a slot now.
    pub fn running(&self) -> usize {
        self.slots.saturating_sub(self.running.available_permits())
    }

    /// Runs waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.admitted().saturating_sub(self.running())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_beyond_running_plus_queued_and_frees_on_drop() {
        let gate = RunGate::new(1, 1);
        let first = gate.admit().await;
        assert!(first.is_ok());
        // The second waits (queued); the third is refused at once.
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.admit().await.is_ok() }
        });
        while gate.admitted() < 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.admit().await.err(), Some(Busy));
        assert_eq!(gate.admitted(), 2, "a refusal leaves no trace");
        drop(first);
        assert!(matches!(waiting.await, Ok(true)));
        assert_eq!(gate.admitted(), 0);
    }
}
