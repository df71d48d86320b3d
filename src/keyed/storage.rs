//! The keyed table as a kernel [`Storage`]: a key's state is its record; a call on a key not held
//! adds it (a consume), looks at what a fresh one would have (a status) or only reconciles (a
//! refund). A shared limiter's decision is a layer around the kernel's (`share.rs`, `slices.rs`),
//! passed in as the call's `decide`.

use super::{slot_i32, KeyedLimiter, PolicyId, NO_PERIOD};
use crate::anomaly::Anomaly;
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{BucketOf, CallReading, KeyUse, Op, Storage};

/// A key as a call on the table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Named<'k> {
    /// A held key, by its record.
    Held(u32),
    /// A key not held that a consume adds, with its policy.
    Add(PolicyId, super::Key<'k>),
    /// A key not held that a status looks at: what a fresh key of the policy would have.
    Look(PolicyId),
    /// A key not held that a refund names: the clocks are reconciled, nothing else happens.
    Absent,
}

/// One call on the table: the clock it reads, the room made for a key it adds, and how it
/// decides (the decision rule, or the share layer around it).
pub(super) struct TableCall<'a, C: ?Sized, D> {
    pub(super) table: &'a mut KeyedLimiter,
    pub(super) clock: &'a mut C,
    /// The key to drop for a key the call adds, the table being full.
    pub(super) victim: Option<u32>,
    /// `decide(table, index, wall_ms, monotonic_ms)`, taken by the call's one decision.
    pub(super) decide: Option<D>,
}

impl KeyedLimiter {
    /// The quota spec a call on `named` moves.
    fn spec_of(&self, named: Named<'_>) -> Option<u32> {
        let policy = match named {
            Named::Held(index) => self.table.records[index as usize].policy,
            Named::Add(policy, _) | Named::Look(policy) => policy,
            Named::Absent => return None,
        };
        self.policies[policy as usize].quota.map(|quota| quota.spec)
    }

    /// A held key's state, and its bucket as the refresh rule sees it (a shared bucket's: its
    /// slice, `slices.rs`).
    fn use_of(&mut self, index: u32, timeline_ms: f64) -> (KeyUse<i32>, BucketOf) {
        let bucket = self.slice_bucket(index, timeline_ms).unwrap_or_else(|| {
            let policy = &self.policies[self.table.records[index as usize].policy as usize];
            BucketOf {
                capacity: policy.capacity,
                refill_per_second: policy.refill_per_second,
            }
        });
        (self.table.records[index as usize].key_use(), bucket)
    }

    fn put_use(&mut self, index: u32, state: &KeyUse<i32>) {
        self.table.records[index as usize].set_use(state);
    }
}

impl<'k, C, D, R> Storage for TableCall<'k, C, D>
where
    C: ClockSource + ?Sized,
    D: FnOnce(&mut KeyedLimiter, u32, f64, f64) -> R,
{
    type Key = Named<'k>;
    type Held = Option<u32>;
    type Slot = i32;
    type Decided = R;

    fn reconcile(
        &mut self,
        named: Named<'k>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<CallReading, Error> {
        let table = &mut *self.table;
        let first_anomaly = anomalies.len();
        let spec = table.spec_of(named);
        let reconciled = table
            .reconciler
            .read(self.clock, spec.is_some(), anomalies)?;
        if matches!(named, Named::Add(..)) && table.table.len() >= table.max_keys {
            self.victim = table.room_for_a_key(&reconciled);
            if self.victim.is_none() {
                // Nothing changes: the readings are not even taken in.
                anomalies.truncate(first_anomaly);
                table.counters.key_limit_refusals += 1;
                return Err(Error::KeyLimit {
                    max_keys: table.max_keys as u64,
                });
            }
        }
        table.timeline_ms += reconciled.deltas.credited_ms;
        table.reconciler.commit(&reconciled)?;
        Ok(reconciled.reading(table.timeline_ms))
    }

    fn move_period(
        &mut self,
        named: Named<'k>,
        reading: &CallReading,
        anomalies: &mut Vec<Anomaly>,
    ) -> i32 {
        let Some(spec) = self.table.spec_of(named) else {
            return NO_PERIOD;
        };
        let state = &mut self.table.specs[spec as usize];
        state.period.observe(
            &state.spec,
            reading.wall_ms,
            reading.timeline_ms,
            reading.deltas,
            anomalies,
        );
        slot_i32(state.period.slot())
    }

    fn load(
        &mut self,
        named: Named<'k>,
        _: Op,
        reading: &CallReading,
        open_slot: i32,
    ) -> (Option<u32>, KeyUse<i32>, BucketOf) {
        let table = &mut *self.table;
        let index = match named {
            Named::Held(index) => index,
            Named::Add(policy, key) => {
                if let Some(victim) = self.victim {
                    // Pinned: the victim may be the last key of this very policy.
                    table.policies[policy as usize].keys += 1;
                    table.drop_record(victim);
                    table.counters.evicted += 1;
                    table.policies[policy as usize].keys -= 1;
                }
                table.hold(key, policy, open_slot)
            }
            Named::Look(policy) => {
                let policy = &table.policies[policy as usize];
                let fresh = KeyUse {
                    // (A shared bucket's key holds no slice until it asks the store for one.)
                    tokens: if table.has_slices() {
                        0.0
                    } else {
                        policy.initial_tokens
                    },
                    credited_at_ms: reading.timeline_ms,
                    quota_used: 0,
                    period_slot: open_slot,
                };
                let bucket = BucketOf {
                    capacity: policy.capacity,
                    refill_per_second: policy.refill_per_second,
                };
                return (None, fresh, bucket);
            }
            Named::Absent => {
                let nothing = KeyUse {
                    tokens: 0.0,
                    credited_at_ms: reading.timeline_ms,
                    quota_used: 0,
                    period_slot: NO_PERIOD,
                };
                let no_bucket = BucketOf {
                    capacity: 0.0,
                    refill_per_second: 0.0,
                };
                return (None, nothing, no_bucket);
            }
        };
        let (state, bucket) = table.use_of(index, reading.timeline_ms);
        (Some(index), state, bucket)
    }

    fn decide(
        &mut self,
        held: Option<u32>,
        state: &mut KeyUse<i32>,
        _: u64,
        reading: &CallReading,
    ) -> R {
        let (Some(index), Some(decide)) = (held, self.decide.take()) else {
            unreachable!("a consume names a key it holds or adds, and decides once")
        };
        // The decision (or the share layer around it) works on the record in place.
        self.table.put_use(index, state);
        let decided = decide(self.table, index, reading.wall_ms, reading.monotonic_ms);
        let record = &self.table.table.records[index as usize];
        state.tokens = record.tokens;
        state.quota_used = record.quota_used;
        decided
    }

    fn save(&mut self, held: Option<u32>, state: &KeyUse<i32>, op: Op, reading: &CallReading) {
        let Some(index) = held else {
            return;
        };
        self.table.put_use(index, state);
        match op {
            Op::Consume(_) => self.table.touch(index),
            Op::Refund(_) => {
                self.table.touch(index);
                self.table.reservation_used(index, reading.monotonic_ms);
            }
            // (A status does not count as use.)
            Op::Status => {}
        }
    }
}
