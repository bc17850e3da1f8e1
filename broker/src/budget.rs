//! What one run may have in flight through its authority at once: bytes (fetch request bodies,
//! response bodies still being read or not yet handed over, workspace file contents), fetches
//! and workspace operations. Every charge is a guard that gives its share back when dropped, so
//! nothing a failed or abandoned operation held stays counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The limits of one run's [`Budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    /// Bytes in flight through the authority at once.
    pub bytes: usize,
    /// Fetches in flight at once.
    pub fetches: usize,
    /// Workspace operations in flight at once.
    pub workspace_ops: usize,
}

impl BudgetLimits {
    /// NodeTool's standard: 64 MiB, 8 fetches, 8 workspace operations.
    pub const STANDARD: BudgetLimits = BudgetLimits {
        bytes: 64 * 1024 * 1024,
        fetches: 8,
        workspace_ops: 8,
    };
}

#[derive(Debug, Default)]
struct Counters {
    /// Set when the run ends: nothing more is charged.
    closed: AtomicBool,
    bytes: AtomicUsize,
    fetches: AtomicUsize,
    workspace_ops: AtomicUsize,
}

/// One run's budget. Cheap to clone (the clones share the counters).
#[derive(Debug, Clone)]
pub struct Budget {
    limits: BudgetLimits,
    used: Arc<Counters>,
}

/// Which count an [`Slot`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// A fetch.
    Fetch,
    /// A workspace operation.
    Workspace,
}

impl Budget {
    /// A fresh budget with `limits`.
    pub fn new(limits: BudgetLimits) -> Budget {
        Budget {
            limits,
            used: Arc::new(Counters::default()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// Ends the run's budget: every later charge or growth is refused, so a read the run
    /// abandoned stops at its next chunk.
    pub fn close(&self) {
        self.used.closed.store(true, Ordering::Release);
    }

    /// Bytes in flight now.
    pub fn bytes_in_flight(&self) -> usize {
        self.used.bytes.load(Ordering::Relaxed)
    }

    /// Takes one operation slot, or says which limit is reached.
    pub fn slot(&self, kind: SlotKind) -> Result<Slot, String> {
        let (counter, max, what) = match kind {
            SlotKind::Fetch => (&self.used.fetches, self.limits.fetches, "fetch calls"),
            SlotKind::Workspace => (
                &self.used.workspace_ops,
                self.limits.workspace_ops,
                "workspace calls",
            ),
        };
        if take(counter, 1, max) {
            Ok(Slot {
                kind,
                used: Arc::clone(&self.used),
            })
        } else {
            Err(format!(
                "{max} {what} are already in flight in this run; await some before starting more"
            ))
        }
    }

    /// Charges `bytes` more, or says the run has too much in flight.
    pub fn charge(&self, bytes: usize) -> Result<Charge, String> {
        let mut charge = Charge {
            bytes: 0,
            used: Arc::clone(&self.used),
            max: self.limits.bytes,
        };
        charge.grow(bytes)?;
        Ok(charge)
    }
}

fn take(counter: &AtomicUsize, n: usize, max: usize) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            now.checked_add(n).filter(|total| *total <= max)
        })
        .is_ok()
}

/// An operation slot; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    kind: SlotKind,
    used: Arc<Counters>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let counter = match self.kind {
            SlotKind::Fetch => &self.used.fetches,
            SlotKind::Workspace => &self.used.workspace_ops,
        };
        counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Bytes charged to a run's budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    bytes: usize,
    used: Arc<Counters>,
    max: usize,
}

impl Charge {
    /// Charges `more` bytes to the same budget, or says the run has too much in flight (what
    /// this charge already holds stays held).
    pub fn grow(&mut self, more: usize) -> Result<(), String> {
        if self.used.closed.load(Ordering::Acquire) {
            return Err("the run has ended".to_string());
        }
        if take(&self.used.bytes, more, self.max) {
            self.bytes += more;
            Ok(())
        } else {
            Err(format!(
                "this run already has {} in flight through the host, and {} more would pass its {} limit; await some calls before starting more",
                quantity(self.used.bytes.load(Ordering::Relaxed)),
                quantity(more),
                quantity(self.max)
            ))
        }
    }

    /// The bytes this charge holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.used.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// A byte count as a person reads a limit: whole MiB or KiB when it is one, bytes otherwise.
pub fn quantity(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_given_back_when_dropped_and_never_pass_the_limit() -> Result<(), String> {
        let budget = Budget::new(BudgetLimits {
            bytes: 100,
            fetches: 2,
            workspace_ops: 1,
        });
        let a = budget.charge(60)?;
        let refused = budget.charge(41).err().unwrap_or_default();
        assert!(refused.contains("100 bytes limit"), "{refused}");
        let mut b = budget.charge(40)?;
        assert_eq!(budget.bytes_in_flight(), 100);
        assert!(b.grow(1).is_err());
        assert_eq!(b.bytes(), 40);
        drop(a);
        b.grow(60)?;
        drop(b);
        assert_eq!(budget.bytes_in_flight(), 0);
        Ok(())
    }

    #[test]
    fn a_closed_budget_charges_nothing_more() -> Result<(), String> {
        let budget = Budget::new(BudgetLimits::STANDARD);
        let mut reading = budget.charge(10)?;
        budget.close();
        assert_eq!(reading.grow(1).err().as_deref(), Some("the run has ended"));
        drop(reading);
        assert_eq!(budget.bytes_in_flight(), 0);
        Ok(())
    }

    #[test]
    fn slots_are_capped_per_kind() -> Result<(), String> {
        let budget = Budget::new(BudgetLimits {
            bytes: 1,
            fetches: 2,
            workspace_ops: 1,
        });
        let one = budget.slot(SlotKind::Fetch)?;
        let _two = budget.slot(SlotKind::Fetch)?;
        let refused = budget.slot(SlotKind::Fetch).err().unwrap_or_default();
        assert!(
            refused.contains("2 fetch calls are already in flight"),
            "{refused}"
        );
        let _w = budget.slot(SlotKind::Workspace)?;
        assert!(budget.slot(SlotKind::Workspace).is_err());
        drop(one);
        assert!(budget.slot(SlotKind::Fetch).is_ok());
        Ok(())
    }

    #[test]
    fn many_threads_charging_at_once_never_pass_the_limit() {
        let budget = Budget::new(BudgetLimits {
            bytes: 1000,
            fetches: 1,
            workspace_ops: 1,
        });
        let held = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        if let Ok(c) = budget.charge(7) {
                            assert!(budget.bytes_in_flight() <= 1000);
                            held.lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(c);
                        }
                    }
                });
            }
        });
        assert!(budget.bytes_in_flight() <= 1000);
        assert_eq!(budget.bytes_in_flight(), 994);
        drop(held);
        assert_eq!(budget.bytes_in_flight(), 0);
    }
}
