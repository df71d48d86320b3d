//! The keyed table as a kernel [`Storage`]: a key's state is its record; a call on a key not held
//! adds it (a consume), looks at what a fresh one would have (a status) or only reconciles (a
//! refund). How a consume's decision is made of the key's parts is the call's [`Layers`]: the
//! key's bucket and period quota ([`Plain`]), or a shared limiter's reservation and slice
//! (`Shared`, `share.rs` and `slices.rs`).

use super::{slot_i32, KeyedLimiter, PolicyId, NO_PERIOD};
use crate::anomaly::{Anomaly, CallDeltas};
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{
    Bucket, BucketOf, CallReading, Decision, KeyUse, Op, Parts, PeriodQuota, Quota, Refill, Storage,
};
use crate::quota::OpenPeriod;
use crate::stats::Counters;
use std::convert::Infallible;

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

/// How a consume on the table is decided: the parts of its decision, lent by the table over a
/// key's refreshed state, and what it answers (see [`Storage::parts`], [`Storage::answer`]).
pub(super) trait Layers {
    /// Whether a key's bucket is its slice of the fleet's, when the layers know it (`None`: the
    /// table says, [`KeyedLimiter::has_slices`]).
    const FLEET_SLICE: Option<bool> = None;
    type Pending;
    type Decided;
    type Bucket<'a>: Bucket<Pending = Self::Pending>
    where
        Self: 'a;
    type Quota<'a>: Quota<Pending = Self::Pending>
    where
        Self: 'a;

    fn parts<'a>(
        &'a mut self,
        table: &'a mut KeyedLimiter,
        index: u32,
        state: &'a mut KeyUse<i32>,
        n: u64,
        reading: &CallReading,
    ) -> Parts<Self::Bucket<'a>, Self::Quota<'a>, &'a mut Counters>;

    fn answer(
        &mut self,
        table: &mut KeyedLimiter,
        index: u32,
        n: u64,
        outcome: Result<Decision, Self::Pending>,
    ) -> Self::Decided;
}

/// The decision on the key's own bucket and its period quota (a limiter without `share`; and
/// the calls that decide nothing, a refund and a status).
#[derive(Clone, Copy, Debug)]
pub(super) struct Plain;

impl Layers for Plain {
    type Pending = Infallible;
    type Decided = Decision;
    type Bucket<'a> = Refill<'a>;
    type Quota<'a> = PeriodQuota<'a, &'a OpenPeriod>;

    #[inline(always)]
    fn parts<'a>(
        &'a mut self,
        table: &'a mut KeyedLimiter,
        index: u32,
        state: &'a mut KeyUse<i32>,
        _: u64,
        reading: &CallReading,
    ) -> Parts<Refill<'a>, PeriodQuota<'a, &'a OpenPeriod>, &'a mut Counters> {
        let KeyedLimiter {
            table: keys,
            policies,
            specs,
            counters,
            ..
        } = table;
        let policy = &policies[keys.records[index as usize].policy as usize];
        let KeyUse {
            tokens, quota_used, ..
        } = state;
        Parts {
            bucket: Refill::new(tokens, policy.refill_per_second),
            quota: policy.quota.map(|quota| {
                let period = &specs[quota.spec as usize].period;
                PeriodQuota::new(quota_used, quota.limit, period, reading.wall_ms)
            }),
            tally: counters,
        }
    }

    #[inline(always)]
    fn answer(
        &mut self,
        _: &mut KeyedLimiter,
        _: u32,
        _: u64,
        outcome: Result<Decision, Infallible>,
    ) -> Decision {
        let Ok(decision) = outcome;
        decision
    }
}

/// One call on the table: the clock it reads, the room made for a key it adds, and how a
/// consume is decided.
pub(super) struct TableCall<'a, C: ?Sized, L> {
    pub(super) table: &'a mut KeyedLimiter,
    pub(super) clock: &'a mut C,
    /// The key to drop for a key the call adds, the table being full.
    pub(super) victim: Option<u32>,
    pub(super) layers: L,
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
    /// slice, `share/slice.rs`; `fleet_slice`: [`Layers::FLEET_SLICE`]).
    #[inline(always)]
    fn use_of(
        &mut self,
        index: u32,
        timeline_ms: f64,
        fleet_slice: Option<bool>,
    ) -> (KeyUse<i32>, BucketOf) {
        debug_assert!(fleet_slice.is_none_or(|fleet| fleet == self.has_slices()));
        if fleet_slice.unwrap_or_else(|| self.has_slices()) {
            return self.slice_use(index, timeline_ms);
        }
        let record = &self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        let bucket = BucketOf {
            capacity: policy.capacity,
            refill_per_second: policy.refill_per_second,
        };
        (record.key_use(), bucket)
    }

    #[inline(always)]
    fn put_use(&mut self, index: u32, state: &KeyUse<i32>) {
        self.table.records[index as usize].set_use(state);
    }
}

impl<C: ?Sized, L: Layers> TableCall<'_, C, L> {
    /// [`Storage::load`] of a key not held (apart, so that a held key's stays small on the hot
    /// path): a consume adds it (dropping the victim room was made for), a status looks at a
    /// fresh one, a refund at nothing.
    #[inline(never)]
    fn load_not_held(
        &mut self,
        named: Named<'_>,
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
        let (state, bucket) = table.use_of(index, reading.timeline_ms, L::FLEET_SLICE);
        (Some(index), state, bucket)
    }
}

impl<'k, C, L> Storage for TableCall<'k, C, L>
where
    C: ClockSource + ?Sized,
    L: Layers,
{
    type Key = Named<'k>;
    type Held = Option<u32>;
    type Slot = i32;
    type Pending = L::Pending;
    type Decided = L::Decided;
    type Bucket<'a>
        = L::Bucket<'a>
    where
        Self: 'a;
    type Quota<'a>
        = L::Quota<'a>
    where
        Self: 'a;
    type Tally<'a>
        = &'a mut Counters
    where
        Self: 'a;

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

    /// A held key's quiet call (see [`Storage::quiet`]); a key not held is never quiet.
    #[inline(always)]
    fn quiet(
        &mut self,
        named: Named<'k>,
        monotonic_ms: f64,
        wall_ms: f64,
    ) -> Option<(CallReading, i32)> {
        let Named::Held(index) = named else {
            return None;
        };
        let table = &mut *self.table;
        let reconciler = &mut table.reconciler;
        let dm = reconciler.quiet_delta(monotonic_ms, wall_ms)?;
        let policy = &table.policies[table.table.records[index as usize].policy as usize];
        let open_slot = match policy.quota {
            None => NO_PERIOD,
            Some(quota) => {
                let state = &mut table.specs[quota.spec as usize];
                if !(reconciler.is_plausible(wall_ms) && state.period.hold_if_inside(wall_ms)) {
                    return None;
                }
                slot_i32(state.period.slot())
            }
        };
        let deltas = CallDeltas {
            monotonic_delta_ms: dm,
            wall_delta_ms: wall_ms - reconciler.last_wall_ms,
            credited_ms: dm,
        };
        reconciler.anchor(monotonic_ms, wall_ms);
        table.timeline_ms += dm;
        let reading = CallReading {
            monotonic_ms,
            wall_ms,
            timeline_ms: table.timeline_ms,
            deltas,
        };
        Some((reading, open_slot))
    }

    #[inline(always)]
    fn load(
        &mut self,
        named: Named<'k>,
        _: Op,
        reading: &CallReading,
        open_slot: i32,
    ) -> (Option<u32>, KeyUse<i32>, BucketOf) {
        let Named::Held(index) = named else {
            return self.load_not_held(named, reading, open_slot);
        };
        let (state, bucket) = self
            .table
            .use_of(index, reading.timeline_ms, L::FLEET_SLICE);
        (Some(index), state, bucket)
    }

    #[inline(always)]
    fn parts<'a>(
        &'a mut self,
        held: Option<u32>,
        state: &'a mut KeyUse<i32>,
        n: u64,
        reading: &CallReading,
    ) -> Parts<L::Bucket<'a>, L::Quota<'a>, &'a mut Counters> {
        let Some(index) = held else {
            unreachable!("a consume names a key it holds or adds")
        };
        self.layers.parts(self.table, index, state, n, reading)
    }

    #[inline(always)]
    fn answer(
        &mut self,
        held: Option<u32>,
        n: u64,
        outcome: Result<Decision, L::Pending>,
    ) -> L::Decided {
        let Some(index) = held else {
            unreachable!("a consume names a key it holds or adds")
        };
        self.layers.answer(self.table, index, n, outcome)
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
