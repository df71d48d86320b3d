//! `KeyedQuotaClock`'s core. One limiter holds the bucket and quota of every key:
//!
//! - one [`Reconciler`] for the whole limiter: every call, whatever its key, takes one monotonic
//!   and one wall reading; the credited times add up to the limiter's *timeline*, and a key's
//!   bucket refills by the timeline's advance since that key was last brought up to date;
//! - policies (a key's limits) are shared: keys with equal limits point at one [`Policy`], and
//!   policies with equal period specs at one [`SpecState`], which holds the spec's open period
//!   (opened, advanced, held and reported once for all its keys);
//! - a key is a fixed-size, pointer-free [`table::Record`] found through a SwissTable.
//!
//! Policies and their specs: `policies.rs`; which keys are held and which are dropped (the
//! recency lists, idle keys, room for a new key): `memory.rs`.

mod memory;
mod policies;
mod refresh;
mod share;

mod snapshot;
mod storage;
mod table;

use std::collections::HashMap;

use memory::IDLE_SCAN_FOR_ROOM;
pub use policies::{KeyPolicy, PolicyChoice, PolicyId, DEFAULT_POLICY};
use policies::{Policy, PolicyIdentity, SpecState};
pub use share::{
    bucket_kept_ms, hunger_ms, write_off_after_ms, GiveBack, More, Reservation, ReserveAnswer,
    ReserveRequest, ShareBook, ShareMode, SharedDecision, Slice, SliceAnswer, SliceBook,
    SliceRequest, QUOTA_SHORT_MS, RECORD_KEPT_AFTER_MS, SHARE_REFILL_MS, WRITE_OFF_FACTOR,
    WRITE_OFF_MARGIN_MS,
};
use share::{FleetSlice, OwnBucket, Shared};

/// A shared key's bucket kind ([`KeyedLimiter::bucket_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BucketKind {
    /// Its own, refilled here (a shared quota alone).
    Own,
    /// Its slice of the fleet's bucket (`share.bucket`).
    FleetSlice,
}
pub use snapshot::{Snapshot, SnapshotError, SnapshotWriter};
use storage::{Layers, Named, Plain, TableCall};
pub use table::{words_for, Key, KeyBuf};
use table::{KeyTable, List, Record, NO_PERIOD};

use crate::anomaly::Anomaly;
use crate::calendar::{Period, PeriodSlot, SpecIdentity};
use crate::clock::{ClockSource, SuspendPolicy, Unread};
use crate::error::Error;
use crate::kernel::{self, Answer, KeyUse, Op};
use crate::limiter::{Decision, LimiterConfig};
use crate::reconciler::Reconciler;
use crate::stats::Counters;

#[derive(Clone, Debug)]
pub struct KeyedConfig {
    /// Every key's limits unless its policy says otherwise.
    pub defaults: KeyPolicy,
    pub suspend_policy: SuspendPolicy,
    /// `None` turns the plausibility check off.
    pub earliest_plausible_wall_ms: Option<f64>,
    pub max_keys: usize,
}

impl KeyedConfig {
    /// A keyed limiter's settings from its options' (`max_keys` checked already; more keys than
    /// memory could ever hold are as good as no bound).
    pub fn of(limits: &LimiterConfig, max_keys: f64) -> KeyedConfig {
        KeyedConfig {
            defaults: limits.limits(),
            suspend_policy: limits.suspend_policy,
            earliest_plausible_wall_ms: limits.earliest_plausible_wall_ms,
            max_keys: max_keys.min(usize::MAX as f64) as usize,
        }
    }
}

/// Which key a call is for: one held (its record index) or one to hold with a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Held(u32),
    New(PolicyId),
}

/// `status()` of one key, with the limits in force.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyStatus {
    pub tokens: f64,
    pub quota_used: Option<u64>,
    pub quota_remaining: Option<u64>,
    pub period: Option<Period>,
    /// The open period's zone (chrono-tz's spelling).
    pub time_zone: Option<&'static str>,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub quota_limit: Option<u64>,
    /// A shared bucket's key (`share.bucket`): the store's tokens at this process's last store
    /// call for the key, refilled since at `R` (at most `C`; `C` before any call).
    pub fleet_tokens: Option<f64>,
}

pub struct KeyedLimiter {
    reconciler: Reconciler,
    /// Real elapsed time credited so far (the sum of every call's credit), in ms.
    timeline_ms: f64,
    table: KeyTable,
    /// Recency list of the records not parked.
    main: List,
    policies: Vec<Policy>,
    policy_ids: HashMap<PolicyIdentity, PolicyId>,
    free_policies: Vec<PolicyId>,
    specs: Vec<SpecState>,
    spec_ids: HashMap<SpecIdentity, u32>,
    free_specs: Vec<u32>,
    max_keys: usize,
    sweep_cursor: usize,
    /// What it has done since construction (`stats()`).
    counters: Counters,
    /// A shared limiter's reservations (one per record, in the records' order); `None` for a
    /// limiter without `share`, whose records and hot path are untouched by it.
    share: Option<ShareBook>,
    /// A limiter with `share.bucket`: every key's slice of the fleet's bucket (one per record);
    /// `None` otherwise.
    slices: Option<SliceBook>,
    /// When held keys' policies are asked again (`refresh.rs`).
    refresh: refresh::Refresh,
}

impl KeyedLimiter {
    /// Takes the starting readings; the default spec's first period opens at the first plausible
    /// one, construction included.
    pub fn new(config: KeyedConfig, clock: &mut dyn ClockSource) -> Result<KeyedLimiter, Error> {
        let (reconciler, wall_ms) = Reconciler::new(
            config.suspend_policy,
            config.earliest_plausible_wall_ms,
            clock,
        )?;
        let mut limiter = KeyedLimiter {
            reconciler,
            timeline_ms: 0.0,
            table: KeyTable::new(),
            main: List::default(),
            policies: Vec::new(),
            policy_ids: HashMap::new(),
            free_policies: Vec::new(),
            specs: Vec::new(),
            spec_ids: HashMap::new(),
            free_specs: Vec::new(),
            max_keys: config.max_keys,
            sweep_cursor: 0,
            counters: Counters::default(),
            share: None,
            slices: None,
            refresh: refresh::Refresh::default(),
        };
        let default = limiter.intern(config.defaults);
        debug_assert_eq!(default, DEFAULT_POLICY);
        limiter.open_first_period(DEFAULT_POLICY, wall_ms);
        Ok(limiter)
    }

    /// Opens a policy's spec's period at the construction reading, if it is plausible and no
    /// call has been made yet (restore needs each spec's open period at restore time).
    fn open_first_period(&mut self, policy: PolicyId, wall_ms: f64) {
        if let Some(quota) = self.policies[policy as usize].quota {
            let state = &mut self.specs[quota.spec as usize];
            if state.period.open.is_none() && self.reconciler.is_plausible(wall_ms) {
                state
                    .period
                    .enter(state.spec.period_for(wall_ms), self.timeline_ms);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// Decisions, anomalies, evictions and key-limit refusals since construction; reads no clock.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    #[inline(always)]
    pub fn find(&self, key: Key<'_>) -> Option<u32> {
        self.table.find(key)
    }

    /// The usual call for a held key, on readings already taken: the clocks agree, nothing is
    /// latched, and the key's quota period (if any) holds the wall reading. Then it decides
    /// exactly as [`KeyedLimiter::try_consume`] would, through the kernel's fast arm
    /// ([`kernel::call_quiet`]); `None` changes nothing.
    #[inline(always)]
    pub fn try_consume_quiet(
        &mut self,
        index: u32,
        n: u64,
        monotonic_ms: f64,
        wall_ms: f64,
    ) -> Option<Decision> {
        self.call_quiet(index, n, monotonic_ms, wall_ms, Plain)
    }

    /// A quiet consume of a held key through the kernel's fast arm, decided by `layers`.
    #[inline(always)]
    fn call_quiet<L: Layers>(
        &mut self,
        index: u32,
        n: u64,
        monotonic_ms: f64,
        wall_ms: f64,
        layers: L,
    ) -> Option<L::Decided> {
        let mut storage = TableCall {
            table: self,
            clock: &mut Unread,
            victim: None,
            layers,
        };
        kernel::call_quiet(&mut storage, Named::Held(index), n, monotonic_ms, wall_ms)
    }

    /// `tryConsume(key, n)`: `n` is a positive integer no larger than the target's
    /// capacity (checked by the caller, as the order of checks says: before the clocks are read).
    pub fn try_consume<C: ClockSource + ?Sized>(
        &mut self,
        key: Key<'_>,
        target: Target,
        n: u64,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Decision, Error> {
        self.consume_with(key, target, n, Plain, clock, anomalies)
    }

    /// A consume through the kernel ([`kernel::call`]): reads and reconciles the clocks, holds a
    /// new key (making room at `max_keys`), brings the record up to date, then decides as
    /// `layers` make the decision (its own bucket and quota, or the share layer's).
    #[inline(always)]
    fn consume_with<C: ClockSource + ?Sized, L: Layers>(
        &mut self,
        key: Key<'_>,
        target: Target,
        n: u64,
        layers: L,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<L::Decided, Error> {
        let named = match target {
            Target::Held(index) => Named::Held(index),
            Target::New(policy) => Named::Add(policy, key),
        };
        let first_anomaly = anomalies.len();
        let answer = self.call(named, Op::Consume(n), clock, layers, anomalies)?;
        let Answer::Decided(decision) = answer else {
            unreachable!("a consume is decided")
        };
        if matches!(target, Target::New(_))
            && self.table.len() > IDLE_SCAN_FOR_ROOM
            && self.table.len() * 2 >= self.max_keys
        {
            self.sweep_idle(key);
        }
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        Ok(decision)
    }

    /// A shared key's bucket kind, which this limiter alone chooses: with `share.bucket`, the
    /// key's slice of the fleet's bucket; else its own bucket, refilled here.
    #[inline(always)]
    fn bucket_kind(&self) -> BucketKind {
        if self.slices.is_some() {
            BucketKind::FleetSlice
        } else {
            BucketKind::Own
        }
    }

    /// The quiet case of a shared consume (see [`KeyedLimiter::try_consume_quiet`]): a held key,
    /// clocks that agree, inside the key's open period. `None` changes nothing.
    #[inline(always)]
    pub fn consume_shared_quiet(
        &mut self,
        index: u32,
        n: u64,
        mode: ShareMode,
        monotonic_ms: f64,
        wall_ms: f64,
    ) -> Option<SharedDecision> {
        match self.bucket_kind() {
            BucketKind::FleetSlice => {
                let layers = Shared::<FleetSlice>::new(mode);
                self.call_quiet(index, n, monotonic_ms, wall_ms, layers)
            }
            BucketKind::Own => {
                let layers = Shared::<OwnBucket>::new(mode);
                self.call_quiet(index, n, monotonic_ms, wall_ms, layers)
            }
        }
    }

    /// A shared consume on readings from `clock` (any key, any readings).
    pub fn consume_shared<C: crate::clock::ClockSource + ?Sized>(
        &mut self,
        key: Key<'_>,
        target: Target,
        n: u64,
        mode: ShareMode,
        clock: &mut C,
        anomalies: &mut Vec<crate::anomaly::Anomaly>,
    ) -> Result<SharedDecision, crate::error::Error> {
        match self.bucket_kind() {
            BucketKind::FleetSlice => {
                let layers = Shared::<FleetSlice>::new(mode);
                self.consume_with(key, target, n, layers, clock, anomalies)
            }
            BucketKind::Own => {
                let layers = Shared::<OwnBucket>::new(mode);
                self.consume_with(key, target, n, layers, clock, anomalies)
            }
        }
    }

    /// One call on the table through the kernel (see `storage.rs`).
    #[inline(always)]
    fn call<C: ClockSource + ?Sized, L: Layers>(
        &mut self,
        named: Named<'_>,
        op: Op,
        clock: &mut C,
        layers: L,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Answer<L::Decided, i32>, Error> {
        let mut storage = TableCall {
            table: self,
            clock,
            victim: None,
            layers,
        };
        kernel::call(&mut storage, named, op, anomalies)
    }

    /// `refund(key, n)`: reconciles, then gives back `n` tokens (up to capacity) and `n`
    /// quota units if the key's use is in the open period (down to zero). A key not held: the
    /// clocks are reconciled and nothing else happens.
    pub fn refund<C: ClockSource + ?Sized>(
        &mut self,
        key: Key<'_>,
        n: u64,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<(), Error> {
        let named = self.find(key).map_or(Named::Absent, Named::Held);
        let first_anomaly = anomalies.len();
        self.call(named, Op::Refund(n), clock, Plain, anomalies)?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        Ok(())
    }

    /// The slot of the period a held key's quota use counts in (`NO_PERIOD` without a quota).
    #[inline(always)]
    pub fn period_slot_of(&self, index: u32) -> i32 {
        self.table.records[index as usize].period_slot
    }

    /// Gives back what a decision for `key` took, reading no clock: `n` tokens (capped at the
    /// key's capacity) and, when the period they were taken in (`slot`,
    /// [`KeyedLimiter::period_slot_of`] after the decision) is still the key's and its spec's
    /// open period, `n` quota units (never below zero). A key not held is left alone.
    pub fn give_back(&mut self, key: Key<'_>, n: u64, slot: Option<i32>) {
        let Some(index) = self.find(key) else {
            return;
        };
        let taken_in = slot.filter(|&slot| slot != NO_PERIOD);
        let mut held = HeldKey {
            limiter: self,
            index,
        };
        kernel::give_back_unread(&mut held, n, taken_in);
        self.touch(index);
    }

    /// `status(key)`: consumes nothing and does not count as use. For a key not held
    /// (`Target::New`), what a fresh key of that policy would have, without holding it.
    pub fn status<C: ClockSource + ?Sized>(
        &mut self,
        target: Target,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<KeyStatus, Error> {
        let policy = *self.policy_of(target);
        let named = match target {
            Target::Held(index) => Named::Held(index),
            Target::New(policy) => Named::Look(policy),
        };
        let first_anomaly = anomalies.len();
        let answer = self.call(named, Op::Status, clock, Plain, anomalies)?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        let Answer::Status(KeyUse {
            tokens, quota_used, ..
        }) = answer
        else {
            unreachable!("a status reports")
        };
        // A shared key's remaining is the store's view plus the local reservation (see share/reservation.rs).
        let quota_remaining = policy.quota.map(|quota| match target {
            Target::Held(index) if self.share.is_some() => {
                self.sync_reservation(index);
                self.shared_remaining(index)
            }
            _ => crate::quota::remaining(quota.limit, quota_used),
        });
        let state = policy.quota.map(|quota| &self.specs[quota.spec as usize]);
        Ok(KeyStatus {
            tokens,
            quota_used: policy.quota.zip(quota_remaining).map(|(quota, remaining)| {
                if self.share.is_some() {
                    quota.limit.saturating_sub(remaining)
                } else {
                    quota_used
                }
            }),
            quota_remaining,
            period: state.and_then(|state| state.period.open.clone()),
            time_zone: state.map(|state| state.spec.time_zone_name()),
            capacity: policy.capacity,
            refill_per_second: policy.refill_per_second,
            quota_limit: policy.quota.map(|quota| quota.limit),
            fleet_tokens: match target {
                Target::Held(index) => self.fleet_tokens(index, self.timeline_ms),
                Target::New(_) => self.has_slices().then_some(policy.capacity),
            },
        })
    }

    /// `status(key)` of a key held from now on: a key not held is held as a consume would hold
    /// it (room made at `max_keys`), its bucket untouched (`block(key, forMs)` holds its key).
    pub fn status_holding<C: ClockSource + ?Sized>(
        &mut self,
        key: Key<'_>,
        target: Target,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<KeyStatus, Error> {
        let Target::New(policy) = target else {
            return self.status(target, clock, anomalies);
        };
        let first_anomaly = anomalies.len();
        self.call(Named::Add(policy, key), Op::Status, clock, Plain, anomalies)?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        let index = self.find(key).ok_or(Error::KeyLimit {
            max_keys: self.max_keys as u64,
        })?;
        // (Its status on the reading just taken: a manual clock's, or the system's again.)
        self.status(Target::Held(index), clock, anomalies)
    }

    /// `delete(key)`: drops the key and all its state. Reads no clock.
    pub fn delete(&mut self, key: Key<'_>) -> bool {
        match self.find(key) {
            Some(index) => {
                self.drop_record(index);
                true
            }
            None => false,
        }
    }
}

/// A held key of the table as a give-back that reads no clock sees it.
struct HeldKey<'a> {
    limiter: &'a mut KeyedLimiter,
    index: u32,
}

impl kernel::HeldUse for HeldKey<'_> {
    type Period = i32;
    fn stored(&self) -> (KeyUse<i32>, f64, Option<i32>) {
        let (limiter, index) = (&*self.limiter, self.index);
        let open_slot = limiter
            .policy_of(Target::Held(index))
            .quota
            .map_or(NO_PERIOD, |quota| {
                slot_i32(limiter.specs[quota.spec as usize].period.slot())
            });
        let state = limiter.table.records[index as usize].key_use();
        (state, limiter.bucket_capacity(index), Some(open_slot))
    }
    fn store(&mut self, state: &KeyUse<i32>) {
        self.limiter.table.records[self.index as usize].set_use(state);
    }
}

/// The refresh rule on a record: its bucket of `capacity` refilled at `refill_per_second` up to
/// `timeline_ms`, its use zeroed if of a period other than `open_slot`.
#[inline(always)]
fn refresh_record(
    record: &mut Record,
    capacity: f64,
    refill_per_second: f64,
    timeline_ms: f64,
    open_slot: i32,
) {
    let mut state = record.key_use();
    state.refresh(capacity, refill_per_second, timeline_ms, open_slot);
    record.set_use(&state);
}

fn slot_i32(slot: Option<PeriodSlot>) -> i32 {
    slot.map_or(NO_PERIOD, PeriodSlot::compact)
}

#[cfg(test)]
mod stats_tests;
#[cfg(test)]
mod tests;
