//! The cell book of a limiter whose buckets are shared by the whole fleet (`share.bucket`): a
//! key's bucket of capacity `C` and refill `R` is `C` cells, each one unit of capacity and `R / C`
//! of the refill, held by the processes through a store (docs: "one rate for the fleet").
//!
//! Per key, beside its record (a parallel vector, like the share book's reservations): the cells
//! held here, the lease they are held on (on the limiter's timeline), whether a store call for
//! them is under way, what the store said of the others (fair share, waiters), and the failOpen
//! outage bucket. The record's `tokens` are the tokens of the key's cells: its refresh uses
//! capacity `cells` and refill `cells·R/C` ([`KeyedLimiter::refresh`]'s branch), and a lapsed
//! lease drops cells and tokens to 0 at the next look.
//!
//! Store calls are the JS face's: this book says when one is needed
//! ([`SharedDecision::NeedsCells`], a tick), what to send ([`CellsRequest`], [`CellsRenewal`]),
//! and takes the answers ([`KeyedLimiter::credit_cells`], [`KeyedLimiter::cells_renewed`]). Times
//! the JS face passes in (`sent_ms`) are the timeline estimates this book gave it.

use std::collections::HashMap;

use super::share::SharedCall;
use super::{refresh_record, KeyBuf, KeyedLimiter, ShareMode, SharedDecision};
use crate::anomaly::Anomaly;
use crate::bucket::{refill_wait_ms, refilled};
use crate::kernel::BucketOf;
use crate::limiter::{Decision, RetryBasis};

/// One key's cells.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// Cells held here (usable only while `timeline < lease_end_ms`).
    pub cells: u64,
    /// The timeline when the lease ends: the last renewing call's send time plus `leaseMs`.
    pub lease_end_ms: f64,
    /// A store call for the key's cells is under way (ticks leave the key alone).
    pub in_flight: bool,
    /// The timeline when the last acquire that granted no cell was sent (-inf: none since).
    pub none_free_at_ms: f64,
    /// `ceil(C / n)` as the store last said.
    pub fair: u64,
    /// Whether the store last said that other processes wait for cells.
    pub waiting: bool,
    /// The timeline of the key's last consume (idle release).
    pub last_used_ms: f64,
    /// A consume since the last tick.
    pub used_since_tick: bool,
    /// The identity of the store record the cells are held in (0: none yet).
    pub record_id: u64,
    /// The store may hold something of this process for the key (cells, a wait): letting go of
    /// the key tells it, even with no cell here.
    pub store_holds: bool,
    /// The failOpen outage bucket `(tokens, credited_at_ms)` (capacity `C`, refill `R`), made
    /// full at the first failOpen call, dropped at the next cells answer.
    pub open: Option<(f64, f64)>,
}

impl Cell {
    fn fresh(now_ms: f64) -> Cell {
        Cell {
            cells: 0,
            lease_end_ms: f64::NEG_INFINITY,
            in_flight: false,
            none_free_at_ms: f64::NEG_INFINITY,
            fair: 0,
            waiting: false,
            last_used_ms: now_ms,
            used_since_tick: false,
            record_id: 0,
            store_holds: false,
            open: None,
        }
    }

    fn holds(&self) -> bool {
        self.cells > 0 || self.store_holds
    }
}

/// What an acquire for a key sends (the store's `cellsAcquire`, with the name, key, instance
/// and leaseMs added by the JS face).
#[derive(Clone, Debug, PartialEq)]
pub struct CellsRequest {
    pub capacity: u64,
    pub refill_per_second: f64,
    /// The key's initial tokens (a new store record starts with them, at most `capacity`).
    pub initial: f64,
    /// Cells held here as the call is sent.
    pub held: u64,
    pub record_id: u64,
    /// The timeline as the call is sent (the lease runs from it).
    pub sent_ms: f64,
}

/// An acquire's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellsAnswer {
    pub granted: u64,
    pub tokens: f64,
    pub held: u64,
    pub fair: u64,
    pub waiting: bool,
    pub record_id: u64,
    pub store_now_ms: f64,
}

/// One key of a renewal (the store's `cellsRenew` key entry): `held` cells kept (0: a release),
/// `tokens` given back with the cells let go.
#[derive(Clone, Debug, PartialEq)]
pub struct CellsRenewal {
    pub key: KeyBuf,
    pub held: u64,
    pub tokens: f64,
    pub record_id: u64,
    pub sent_ms: f64,
}

/// A renewal's answer for one key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenewAnswer {
    pub held: u64,
    pub waiting: bool,
    pub fair: u64,
}

/// The last store answer's times, on the timeline (the store-clock check).
#[derive(Clone, Copy, Debug, PartialEq)]
struct StoreAnchor {
    sent_ms: f64,
    received_ms: f64,
    store_now_ms: f64,
}

#[derive(Debug)]
pub struct CellBook {
    /// One per record, in the records' order.
    cells: Vec<Cell>,
    /// `share.leaseMs`.
    lease_ms: f64,
    /// Releases of keys dropped or deleted, for the next tick, by key (a key held again before
    /// then cancels its own: its first acquire frees those cells in the store, tokens lost, and a
    /// release sent after that acquire would free the cells it brought).
    dropped: HashMap<KeyBuf, CellsRenewal>,
    anchor: Option<StoreAnchor>,
}

/// The most a shared bucket's capacity may be (2**31).
pub const MAX_CELLS: f64 = 2_147_483_648.0;

/// Whether `capacity` suits a shared bucket: an integer from 1 to 2**31.
pub fn is_cell_capacity(capacity: f64) -> bool {
    (1.0..=MAX_CELLS).contains(&capacity) && capacity.fract() == 0.0
}

impl KeyedLimiter {
    /// Shares every key's bucket in cells with leases of `lease_ms` (before any call; a restored
    /// key's tokens are dropped, as its cells are the store's).
    pub fn enable_cells(&mut self, lease_ms: f64) {
        let now_ms = self.timeline_ms;
        let mut cells = Vec::with_capacity(self.table.len());
        for record in &mut self.table.records {
            record.tokens = 0.0;
            cells.push(Cell::fresh(now_ms));
        }
        self.cells = Some(CellBook {
            cells,
            lease_ms,
            dropped: HashMap::new(),
            anchor: None,
        });
    }

    pub fn has_cells(&self) -> bool {
        self.cells.is_some()
    }

    /// A held key's cells (`None`: no shared bucket, or no such record).
    pub fn cell(&self, index: u32) -> Option<&Cell> {
        self.cells.as_ref()?.cells.get(index as usize)
    }

    /// The timeline estimated at the monotonic reading `monotonic_ms` (for calls that reconcile
    /// no clock): the last call's timeline plus the monotonic advance since, never later than the
    /// truth (so leases end early, never late). NaN or an earlier reading: the last call's.
    pub fn timeline_at(&self, monotonic_ms: f64) -> f64 {
        let advance = monotonic_ms - self.reconciler.last_monotonic_ms;
        if advance > 0.0 {
            self.timeline_ms + advance
        } else {
            self.timeline_ms
        }
    }

    /// A new record's cells (called by `hold`): none, and so no tokens.
    pub(super) fn cells_held(&mut self, index: u32) {
        let now_ms = self.timeline_ms;
        if let Some(book) = &mut self.cells {
            debug_assert_eq!(book.cells.len(), index as usize);
            book.cells.push(Cell::fresh(now_ms));
            self.table.records[index as usize].tokens = 0.0;
            if !book.dropped.is_empty() {
                book.dropped.remove(&self.table.key_of(index).to_buf());
            }
        }
    }

    /// A record about to be removed (called by `drop_record`): its cells and tokens go back at
    /// the next tick.
    pub(super) fn cells_dropped(&mut self, index: u32) {
        if self.cells.is_none() {
            return;
        }
        let timeline_ms = self.timeline_ms;
        let slot = self.table.records[index as usize].period_slot;
        self.refresh_cells(index, slot, timeline_ms);
        let release = self.release_cells(index, timeline_ms);
        if let Some(book) = &mut self.cells {
            book.cells.swap_remove(index as usize);
            if let Some(release) = release {
                book.dropped.insert(release.key.clone(), release);
            }
        }
    }

    /// The cells' bucket capacity of a key (its policy's capacity without a shared bucket).
    pub(super) fn bucket_capacity(&self, index: u32) -> f64 {
        match self.cell(index) {
            Some(cell) => cell.cells as f64,
            None => self.policies[self.table.records[index as usize].policy as usize].capacity,
        }
    }

    /// [`KeyedLimiter::refresh`] for a key of a shared bucket, at `timeline_ms`: a lapsed lease
    /// drops cells and tokens, then the bucket of capacity `cells` refills at `cells·R/C`.
    #[inline(never)]
    pub(super) fn refresh_cells(&mut self, index: u32, open_slot: i32, timeline_ms: f64) {
        let Some(bucket) = self.cells_bucket(index, timeline_ms) else {
            return;
        };
        let record = &mut self.table.records[index as usize];
        refresh_record(
            record,
            bucket.capacity,
            bucket.refill_per_second,
            timeline_ms,
            open_slot,
        );
    }

    /// A key's bucket as its cells make it (capacity `cells`, refill `cells·R/C`), readied for
    /// the refresh rule at `timeline_ms`: the cells of a lapsed lease are gone, and the tokens are
    /// no more than the cells held (capped before the refresh, which caps at the same capacity:
    /// the same as capping after it). `None`: no shared bucket.
    pub(super) fn cells_bucket(&mut self, index: u32, timeline_ms: f64) -> Option<BucketOf> {
        let book = self.cells.as_mut()?;
        let cell = &mut book.cells[index as usize];
        let record = &mut self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        if cell.cells > 0 && timeline_ms >= cell.lease_end_ms {
            cell.cells = 0;
            record.tokens = 0.0;
        }
        let held = cell.cells as f64;
        if record.tokens > held {
            record.tokens = held;
        }
        // Every cell: exactly the unshared bucket's refill (no rounding of `C·R/C`).
        let refill_per_second = if held == policy.capacity {
            policy.refill_per_second
        } else {
            held * policy.refill_per_second / policy.capacity
        };
        Some(BucketOf {
            capacity: held,
            refill_per_second,
        })
    }

    /// Brings a held key's cells up to `timeline_ms` (its quota use left as it is).
    fn look_at_cells(&mut self, index: u32, timeline_ms: f64) {
        let slot = self.table.records[index as usize].period_slot;
        self.refresh_cells(index, slot, timeline_ms);
    }

    /// Lets go of every cell and token of a key (refreshed): the release to send, if the store
    /// may hold anything of it.
    fn release_cells(&mut self, index: u32, timeline_ms: f64) -> Option<CellsRenewal> {
        let key = self.table.key_of(index).to_buf();
        let record = &mut self.table.records[index as usize];
        let cell = &mut self.cells.as_mut()?.cells[index as usize];
        if !cell.holds() {
            return None;
        }
        let tokens = std::mem::take(&mut record.tokens);
        cell.cells = 0;
        cell.store_holds = false;
        Some(CellsRenewal {
            key,
            held: 0,
            tokens,
            record_id: cell.record_id,
            sent_ms: timeline_ms,
        })
    }

    /// A shared consume of a key with a shared bucket (see [`KeyedLimiter::decide_shared`]):
    /// its cells decide the bucket part, then the quota part decides as for any shared key.
    #[inline(never)]
    pub(super) fn decide_cells(&mut self, index: u32, call: SharedCall) -> SharedDecision {
        let SharedCall { n, mode, .. } = call;
        let timeline_ms = self.timeline_ms;
        let record = self.table.records[index as usize];
        let policy = self.policies[record.policy as usize];
        let (capacity, refill) = (policy.capacity, policy.refill_per_second);
        let Some(book) = &mut self.cells else {
            return self.decide_shared_step(index, call);
        };
        let lease_ms = book.lease_ms;
        let cell = &mut book.cells[index as usize];
        cell.last_used_ms = timeline_ms;
        cell.used_since_tick = true;
        let wanted = n as i64 as f64;
        let held = cell.cells;
        let leased = held > 0 && timeline_ms < cell.lease_end_ms;
        if leased && record.tokens >= wanted {
            // (With the store away too: a process decides from its cells while its lease holds.)
            return self.decide_shared_step(index, call);
        }
        if mode == ShareMode::FailOpen {
            // The outage bucket decides, in the record's place for the call.
            let (tokens, at) = cell.open.unwrap_or((capacity, timeline_ms));
            let kept = record.tokens;
            self.table.records[index as usize].tokens =
                refilled(tokens, timeline_ms - at, refill, capacity);
            let outcome = self.decide_shared_step(index, call);
            let record = &mut self.table.records[index as usize];
            let open = std::mem::replace(&mut record.tokens, kept);
            if let Some(book) = &mut self.cells {
                book.cells[index as usize].open = Some((open, timeline_ms));
            }
            return outcome;
        }
        let none_free_until_ms = cell.none_free_at_ms + lease_ms / 4.0;
        let recent = timeline_ms < none_free_until_ms;
        let all = leased && held as f64 >= capacity;
        if !(all || recent || mode == ShareMode::AfterStore) {
            return SharedDecision::NeedsCells;
        }
        let retry_after_ms = if all {
            refill_wait_ms(record.tokens, wanted, refill)
        } else if n <= held {
            refill_wait_ms(record.tokens, wanted, held as f64 * refill / capacity)
        } else if none_free_until_ms.is_finite() {
            (none_free_until_ms - timeline_ms).ceil().max(1.0)
        } else {
            // (Cells came, too few for `n`: at least what the whole bucket would take.)
            refill_wait_ms(record.tokens, wanted, refill).max(1.0)
        };
        let quota_remaining = policy.quota.map(|_| {
            self.sync_reservation(index);
            self.shared_remaining(index)
        });
        self.counters.denied += 1;
        SharedDecision::Decided {
            decision: Decision::denied(
                retry_after_ms,
                RetryBasis::MonotonicRefill,
                record.tokens,
                quota_remaining,
            ),
            refill: false,
        }
    }

    /// What an acquire for a held key sends; marks it in flight. `None`: no shared bucket.
    pub fn cells_request(&mut self, index: u32, monotonic_ms: f64) -> Option<CellsRequest> {
        self.cells.as_ref()?;
        let timeline_ms = self.timeline_at(monotonic_ms);
        self.look_at_cells(index, timeline_ms);
        let record = self.table.records[index as usize];
        let policy = self.policies[record.policy as usize];
        let book = self.cells.as_mut()?;
        let lease_ms = book.lease_ms;
        let cell = &mut book.cells[index as usize];
        cell.in_flight = true;
        // A record this key knew cannot have expired before the shortest TTL the store gave it
        // at our last renewing call (the key's refill time or the reclaim margin, plus a minute):
        // missing sooner, it was lost (a restarted or flushed store), and a full new record would
        // admit C more on top of what the lost one admitted, so it is made again empty.
        let shortest_ttl_ms = (policy.capacity / policy.refill_per_second * 1000.0)
            .ceil()
            .max(lease_ms * 1.1 + 1000.0)
            + 60_000.0;
        let lost =
            cell.record_id != 0 && timeline_ms < cell.lease_end_ms - lease_ms + shortest_ttl_ms;
        Some(CellsRequest {
            capacity: policy.capacity as u64,
            refill_per_second: policy.refill_per_second,
            initial: if lost {
                0.0
            } else {
                policy.initial_tokens.min(policy.capacity)
            },
            held: cell.cells,
            record_id: cell.record_id,
            sent_ms: timeline_ms,
        })
    }

    /// An acquire's answer for a held key sent at `sent_ms`: the key holds `held` cells, with
    /// `tokens` more (up to them), on a lease from `sent_ms`. `false`: the key has no shared
    /// bucket (the caller gives the cells back). A `store-clock-step` anomaly, if the store's
    /// clock disagrees, is counted and returned.
    pub fn credit_cells(
        &mut self,
        index: u32,
        sent_ms: f64,
        answer: CellsAnswer,
        monotonic_ms: f64,
    ) -> (bool, Option<Anomaly>) {
        let store_now_ms = answer.store_now_ms;
        self.take_answer(
            index,
            sent_ms,
            store_now_ms,
            monotonic_ms,
            |cell, tokens, lease_ms| {
                cell.cells = answer.held;
                *tokens = (*tokens + answer.tokens).min(answer.held as f64);
                cell.lease_end_ms = sent_ms + lease_ms;
                cell.fair = answer.fair;
                cell.waiting = answer.waiting;
                cell.none_free_at_ms = if answer.granted == 0 {
                    sent_ms
                } else {
                    f64::NEG_INFINITY
                };
                cell.open = None;
                cell.record_id = answer.record_id;
                cell.store_holds = true;
                true
            },
        )
    }

    /// A store answer for a held key sent at `sent_ms`: its cells brought up to now and no longer
    /// in flight, then `apply(cell, tokens, lease_ms)` (what it returns is the first of the
    /// result), then the store-clock check. `(false, None)` without a shared bucket.
    fn take_answer(
        &mut self,
        index: u32,
        sent_ms: f64,
        store_now_ms: f64,
        monotonic_ms: f64,
        apply: impl FnOnce(&mut Cell, &mut f64, f64) -> bool,
    ) -> (bool, Option<Anomaly>) {
        if self.cells.is_none() {
            return (false, None);
        }
        let timeline_ms = self.timeline_at(monotonic_ms);
        self.look_at_cells(index, timeline_ms);
        let record = &mut self.table.records[index as usize];
        let Some(book) = &mut self.cells else {
            return (false, None);
        };
        let lease_ms = book.lease_ms;
        let cell = &mut book.cells[index as usize];
        cell.in_flight = false;
        let outcome = apply(cell, &mut record.tokens, lease_ms);
        let anomaly = self.check_store_clock(sent_ms, timeline_ms, store_now_ms);
        (outcome, anomaly)
    }

    /// A held key's store call (an acquire or a renewal) failed: it is no longer in flight; the
    /// store may hold what it held (the next tick renews or releases it again).
    pub fn cells_failed(&mut self, index: u32) {
        if let Some(cell) = self
            .cells
            .as_mut()
            .and_then(|book| book.cells.get_mut(index as usize))
        {
            cell.in_flight = false;
            cell.store_holds = true;
        }
    }

    /// A tick at the monotonic reading `monotonic_ms`: for every key not in flight that holds
    /// cells (or that the store may hold something of), what a renewal sends: a release of a key
    /// idle for `idle_ms`, a give-back to waiters beyond the fair share (every cell of a key not
    /// used since the last tick; tokens in proportion), else a plain renewal; with
    /// `urgent_only`, the give-backs alone. Then the releases of keys dropped since. What is
    /// given back leaves at once; the keys sent are in flight.
    pub fn cells_tick(
        &mut self,
        idle_ms: f64,
        urgent_only: bool,
        monotonic_ms: f64,
    ) -> Vec<CellsRenewal> {
        if self.cells.is_none() {
            return Vec::new();
        }
        let timeline_ms = self.timeline_at(monotonic_ms);
        let mut sent = Vec::new();
        for index in 0..self.table.len() as u32 {
            let Some(&cell) = self.cell(index) else {
                break;
            };
            if cell.in_flight || !cell.holds() {
                continue;
            }
            self.look_at_cells(index, timeline_ms);
            let idle = timeline_ms - cell.last_used_ms >= idle_ms;
            let renewal = if idle && !urgent_only {
                self.release_cells(index, timeline_ms)
            } else {
                self.renew_cells(index, urgent_only, timeline_ms)
            };
            if let Some(renewal) = renewal {
                sent.push(renewal);
                if let Some(book) = &mut self.cells {
                    let cell = &mut book.cells[index as usize];
                    cell.in_flight = true;
                    cell.used_since_tick = false;
                }
            }
        }
        if let Some(book) = &mut self.cells {
            sent.extend(book.dropped.drain().map(|(_, release)| release));
        }
        sent
    }

    /// One key's renewal (refreshed): a give-back when others wait and this process holds more
    /// than its fair share, else (unless `urgent_only`) a plain renewal; none for a key holding no
    /// cell.
    fn renew_cells(
        &mut self,
        index: u32,
        urgent_only: bool,
        timeline_ms: f64,
    ) -> Option<CellsRenewal> {
        let key = self.table.key_of(index).to_buf();
        let record = &mut self.table.records[index as usize];
        let cell = &mut self.cells.as_mut()?.cells[index as usize];
        if cell.cells == 0 {
            // Nothing to renew; a wait the store keeps for this process stays until the key is
            // idle (a release then), so holders go on learning of it.
            return None;
        }
        let give = if cell.waiting && cell.cells > cell.fair {
            if cell.used_since_tick {
                cell.cells - cell.fair
            } else {
                cell.cells
            }
        } else {
            0
        };
        if give == 0 && urgent_only {
            return None;
        }
        let tokens = if give == 0 {
            0.0
        } else {
            record.tokens * give as f64 / cell.cells as f64
        };
        cell.cells -= give;
        record.tokens = (record.tokens - tokens).max(0.0).min(cell.cells as f64);
        cell.store_holds = cell.cells > 0;
        Some(CellsRenewal {
            key,
            held: cell.cells,
            tokens,
            record_id: cell.record_id,
            sent_ms: timeline_ms,
        })
    }

    /// A renewal's answer for a held key sent at `sent_ms`: it holds at most `held` cells, on a
    /// lease from `sent_ms` if any. Returns whether a give-back to waiters is due now, and the
    /// `store-clock-step` anomaly if the store's clock disagrees (counted).
    pub fn cells_renewed(
        &mut self,
        index: u32,
        sent_ms: f64,
        answer: RenewAnswer,
        store_now_ms: f64,
        monotonic_ms: f64,
    ) -> (bool, Option<Anomaly>) {
        self.take_answer(
            index,
            sent_ms,
            store_now_ms,
            monotonic_ms,
            |cell, tokens, lease_ms| {
                cell.cells = cell.cells.min(answer.held);
                *tokens = tokens.min(cell.cells as f64);
                if answer.held > 0 {
                    cell.lease_end_ms = cell.lease_end_ms.max(sent_ms + lease_ms);
                }
                cell.store_holds = answer.held > 0 || cell.cells > 0;
                cell.fair = answer.fair;
                cell.waiting = answer.waiting;
                cell.waiting && cell.cells > cell.fair
            },
        )
    }

    /// Every key's release (close): all cells and tokens, and the releases of dropped keys.
    pub fn cells_release_all(&mut self, monotonic_ms: f64) -> Vec<CellsRenewal> {
        let Some(book) = &mut self.cells else {
            return Vec::new();
        };
        let mut sent: Vec<CellsRenewal> =
            book.dropped.drain().map(|(_, release)| release).collect();
        let timeline_ms = self.timeline_at(monotonic_ms);
        for index in 0..self.table.len() as u32 {
            self.look_at_cells(index, timeline_ms);
            sent.extend(self.release_cells(index, timeline_ms));
        }
        sent
    }

    /// Whether a key holds cells, the store may hold something of one, or releases wait: the tick
    /// timer is needed.
    pub fn holds_cells(&self) -> bool {
        self.cells
            .as_ref()
            .is_some_and(|book| !book.dropped.is_empty() || book.cells.iter().any(Cell::holds))
    }

    /// The store-clock check: the store's clock advanced `T2 - T1` between two answers;
    /// this process's timeline says between `s2 - r1` and `r2 - s1`, give or take
    /// `250 + 0.0005·(r2 - s1)` ms. Outside that, a `store-clock-step` anomaly (counted); then the
    /// answer is the new anchor. The store's clock never refills anything.
    fn check_store_clock(
        &mut self,
        sent_ms: f64,
        received_ms: f64,
        store_now_ms: f64,
    ) -> Option<Anomaly> {
        let book = self.cells.as_mut()?;
        if !(sent_ms.is_finite() && store_now_ms.is_finite()) {
            return None;
        }
        let now = StoreAnchor {
            sent_ms,
            received_ms,
            store_now_ms,
        };
        let last = book.anchor.replace(now)?;
        let store_delta_ms = store_now_ms - last.store_now_ms;
        let shortest_ms = sent_ms - last.received_ms;
        let longest_ms = received_ms - last.sent_ms;
        let tolerance_ms = 250.0 + 0.0005 * longest_ms;
        let step_ms = if store_delta_ms > longest_ms + tolerance_ms {
            store_delta_ms - longest_ms
        } else if store_delta_ms < shortest_ms - tolerance_ms {
            store_delta_ms - shortest_ms
        } else {
            return None;
        };
        let anomaly = Anomaly::store_clock_step(
            received_ms - last.received_ms,
            store_delta_ms,
            step_ms,
            (shortest_ms, longest_ms),
        );
        self.counters
            .count_anomalies(std::slice::from_ref(&anomaly));
        Some(anomaly)
    }
}

#[cfg(test)]
#[path = "cells_tests.rs"]
mod tests;
