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
//! Memory: a key with a full bucket and no use in its open period is *idle* and may be
//! dropped at any time. Records are on a recency list (most recent first). When a new key must be
//! held at `max_keys`, an idle key is dropped if one is found near a sweep cursor (every key when
//! there are few), else the least recently used key without quota use. Keys met on the way that
//! do have use are *parked* on their spec's list, so no key is stepped over twice while its use
//! lasts: when the spec's period moves on, its parked keys are stale (their use is of an ended
//! period), and being older than every key on the main list, they go first.

mod cells;
mod share;
mod snapshot;
mod table;

use std::collections::HashMap;
use std::sync::Arc;

pub use cells::{
    is_cell_capacity, Cell, CellBook, CellsAnswer, CellsRenewal, CellsRequest, RenewAnswer,
    MAX_CELLS,
};
pub use share::{GiveBack, ReserveRequest, ShareBook, ShareMode, SharedDecision};
pub use snapshot::{Snapshot, SnapshotError, SnapshotWriter};
pub use table::{words_for, Key, KeyBuf};
use table::{KeyTable, List, Lists, Record, FLAG_PARKED, NIL, NO_PERIOD};

use crate::anomaly::Anomaly;
use crate::bucket::refilled;
use crate::calendar::{Period, PeriodSlot, PeriodSpec, SpecIdentity};
use crate::clock::{ClockSource, SuspendPolicy};
use crate::error::Error;
use crate::kernel::{self, KeyFields};
use crate::limiter::Decision;
use crate::quota::{OpenPeriod, QuotaPolicy};
use crate::reconciler::{Reconciled, Reconciler};
use crate::stats::Counters;

/// A key's limits, validated (`KeyPolicy` with the defaults filled in).
#[derive(Clone, Debug)]
pub struct KeyPolicy {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub quota: Option<QuotaPolicy>,
}

#[derive(Clone, Debug)]
pub struct KeyedConfig {
    /// Every key's limits unless its policy says otherwise.
    pub defaults: KeyPolicy,
    pub suspend_policy: SuspendPolicy,
    /// `None` turns the plausibility check off.
    pub earliest_plausible_wall_ms: Option<f64>,
    pub max_keys: usize,
}

/// Which key a call is for: one held (its record index) or one to hold with a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Held(u32),
    New(PolicyId),
}

/// An interned policy; [`DEFAULT_POLICY`] is the limiter's own options.
pub type PolicyId = u32;
pub const DEFAULT_POLICY: PolicyId = 0;

#[derive(Clone, Copy, Debug)]
struct PolicyQuota {
    limit: u64,
    spec: u32,
}

#[derive(Clone, Copy, Debug)]
struct Policy {
    capacity: f64,
    refill_per_second: f64,
    initial_tokens: f64,
    quota: Option<PolicyQuota>,
    /// Records holding this policy.
    keys: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PolicyIdentity {
    capacity: u64,
    refill_per_second: u64,
    initial_tokens: u64,
    quota: Option<(u64, u32)>,
}

impl Policy {
    fn identity(&self) -> PolicyIdentity {
        PolicyIdentity {
            capacity: self.capacity.to_bits(),
            refill_per_second: self.refill_per_second.to_bits(),
            initial_tokens: self.initial_tokens.to_bits(),
            quota: self.quota.map(|quota| (quota.limit, quota.spec)),
        }
    }
}

#[derive(Debug)]
struct SpecState {
    /// The spec the first policy naming it brought (the limiter's defaults hand theirs over, uncopied).
    spec: Arc<PeriodSpec>,
    period: OpenPeriod,
    /// Keys stepped over by an eviction because they had use in this spec's open period.
    parked: List,
    /// Live policies naming this spec.
    policies: u32,
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
    /// Cells held here, for a key with a shared bucket (`share.bucket`).
    pub cells: Option<u64>,
}

/// Records looked at for an idle key when a new key needs room (all of them when there are
/// fewer), and for idle keys to drop after a new key was held (only in a limiter holding more
/// keys than that and at least half of `max_keys`: a small limiter shrinks only to make room).
const IDLE_SCAN_FOR_ROOM: usize = 64;
const IDLE_SWEEP_PER_NEW_KEY: usize = 2;

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
    /// A limiter with `share.bucket`: every key's cells (one per record); `None` otherwise.
    cells: Option<CellBook>,
}

/// The lists a record can be on, for [`KeyTable::remove`].
struct RecordLists<'a> {
    main: &'a mut List,
    policies: &'a [Policy],
    specs: &'a mut [SpecState],
}

impl Lists for RecordLists<'_> {
    fn list(&mut self, record: &Record) -> &mut List {
        match self.policies[record.policy as usize].quota {
            Some(quota) if record.flags & FLAG_PARKED != 0 => {
                &mut self.specs[quota.spec as usize].parked
            }
            _ => self.main,
        }
    }
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
            cells: None,
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

    fn policy_of(&self, target: Target) -> &Policy {
        match target {
            Target::Held(index) => {
                &self.policies[self.table.records[index as usize].policy as usize]
            }
            Target::New(policy) => &self.policies[policy as usize],
        }
    }

    /// The capacity `n` is checked against.
    #[inline(always)]
    pub fn capacity_of(&self, target: Target) -> f64 {
        self.policy_of(target).capacity
    }

    /// A policy's id, shared with every key of equal limits.
    pub fn intern(&mut self, policy: KeyPolicy) -> PolicyId {
        let quota = policy.quota.map(|quota| PolicyQuota {
            limit: quota.limit,
            spec: self.intern_spec(quota.spec),
        });
        let entry = Policy {
            capacity: policy.capacity,
            refill_per_second: policy.refill_per_second,
            initial_tokens: policy.initial_tokens,
            quota,
            keys: 0,
        };
        if let Some(&id) = self.policy_ids.get(&entry.identity()) {
            if let Some(quota) = quota {
                self.release_spec(quota.spec);
            }
            return id;
        }
        let id = match self.free_policies.pop() {
            Some(id) => {
                self.policies[id as usize] = entry;
                id
            }
            None => {
                self.policies.push(entry);
                (self.policies.len() - 1) as PolicyId
            }
        };
        self.policy_ids.insert(entry.identity(), id);
        id
    }

    /// Takes a reference on the spec's state (made if new).
    fn intern_spec(&mut self, spec: Arc<PeriodSpec>) -> u32 {
        let identity = spec.identity();
        if let Some(&id) = self.spec_ids.get(&identity) {
            self.specs[id as usize].policies += 1;
            return id;
        }
        let state = SpecState {
            spec,
            period: OpenPeriod::default(),
            parked: List::default(),
            policies: 1,
        };
        let id = match self.free_specs.pop() {
            Some(id) => {
                self.specs[id as usize] = state;
                id
            }
            None => {
                self.specs.push(state);
                (self.specs.len() - 1) as u32
            }
        };
        self.spec_ids.insert(identity, id);
        id
    }

    fn release_spec(&mut self, spec: u32) {
        let state = &mut self.specs[spec as usize];
        state.policies -= 1;
        if state.policies == 0 {
            self.spec_ids.remove(&state.spec.identity());
            self.free_specs.push(spec);
        }
    }

    /// Frees a policy no key holds (the defaults stay).
    pub fn release_if_unused(&mut self, policy: PolicyId) {
        let entry = self.policies[policy as usize];
        if policy == DEFAULT_POLICY
            || entry.keys > 0
            || self.policy_ids.get(&entry.identity()) != Some(&policy)
        {
            return;
        }
        self.policy_ids.remove(&entry.identity());
        self.free_policies.push(policy);
        if let Some(quota) = entry.quota {
            self.release_spec(quota.spec);
        }
    }

    /// The usual call for a held key, on readings already taken: the clocks agree, nothing is
    /// latched, and the key's quota period (if any) holds the wall reading. Then it decides
    /// exactly as [`KeyedLimiter::try_consume`] would; `None` changes nothing.
    #[inline(always)]
    pub fn try_consume_quiet(
        &mut self,
        index: u32,
        n: u64,
        monotonic_ms: f64,
        wall_ms: f64,
    ) -> Option<Decision> {
        self.enter_quiet(index, monotonic_ms, wall_ms)?;
        Some(self.decide(index, n, wall_ms))
    }

    /// The quiet calls' steps before their decision ([`KeyedLimiter::try_consume_quiet`],
    /// [`KeyedLimiter::consume_shared_quiet`]): `None` (nothing changed) unless the clocks agree,
    /// nothing is latched and the key's quota period (if any) holds `wall_ms`; then the readings
    /// are taken as the call's and the key's record is brought up to date.
    #[inline(always)]
    fn enter_quiet(&mut self, index: u32, monotonic_ms: f64, wall_ms: f64) -> Option<()> {
        let dm = self.reconciler.quiet_delta(monotonic_ms, wall_ms)?;
        let policy = self.policies[self.table.records[index as usize].policy as usize];
        let open_slot = match policy.quota {
            None => NO_PERIOD,
            Some(quota) => {
                let state = &mut self.specs[quota.spec as usize];
                if !(self.reconciler.is_plausible(wall_ms) && state.period.contains(wall_ms)) {
                    return None;
                }
                state.period.hold();
                slot_i32(state.period.slot())
            }
        };
        self.timeline_ms += dm;
        self.reconciler.anchor(monotonic_ms, wall_ms);
        self.refresh(index, open_slot);
        self.touch(index);
        Some(())
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
        self.consume_with(
            key,
            target,
            clock,
            anomalies,
            |limiter, index, wall_ms, _| limiter.decide(index, n, wall_ms),
        )
    }

    /// A consume's steps around its decision: reads and reconciles the clocks, holds a new key
    /// (making room at `max_keys`), brings the record up to date, then `decide(self, index,
    /// wall_ms, monotonic_ms)`.
    #[inline(always)]
    fn consume_with<C: ClockSource + ?Sized, R>(
        &mut self,
        key: Key<'_>,
        target: Target,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
        decide: impl FnOnce(&mut Self, u32, f64, f64) -> R,
    ) -> Result<R, Error> {
        let spec = self.policy_of(target).quota.map(|quota| quota.spec);
        let first_anomaly = anomalies.len();
        let reconciled = self.reconciler.read(clock, spec.is_some(), anomalies)?;
        let victim = match target {
            Target::New(_) if self.table.len() >= self.max_keys => {
                let victim = self.room_for_a_key(&reconciled);
                if victim.is_none() {
                    // Nothing changes: the readings are not even taken in.
                    anomalies.truncate(first_anomaly);
                    self.counters.key_limit_refusals += 1;
                    return Err(Error::KeyLimit {
                        max_keys: self.max_keys as u64,
                    });
                }
                victim
            }
            _ => None,
        };
        let open_slot = self.apply(&reconciled, spec, anomalies)?;
        let index = match target {
            Target::Held(index) => {
                self.refresh(index, open_slot);
                self.touch(index);
                index
            }
            Target::New(policy) => {
                if let Some(victim) = victim {
                    // Pinned: the victim may be the last key of this very policy.
                    self.policies[policy as usize].keys += 1;
                    self.drop_record(victim);
                    self.counters.evicted += 1;
                    self.policies[policy as usize].keys -= 1;
                }
                self.hold(key, policy, open_slot)
            }
        };
        let decision = decide(self, index, reconciled.wall_ms, reconciled.monotonic_ms);
        if matches!(target, Target::New(_))
            && self.table.len() > IDLE_SCAN_FOR_ROOM
            && self.table.len() * 2 >= self.max_keys
        {
            self.sweep_idle(key);
        }
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        Ok(decision)
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
        let held = self.find(key);
        let spec = held.and_then(|index| {
            self.policy_of(Target::Held(index))
                .quota
                .map(|quota| quota.spec)
        });
        let first_anomaly = anomalies.len();
        let reconciled = self.reconciler.read(clock, spec.is_some(), anomalies)?;
        let open_slot = self.apply(&reconciled, spec, anomalies)?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        if let Some(index) = held {
            self.refresh(index, open_slot);
            let capacity = self.bucket_capacity(index);
            let record = &mut self.table.records[index as usize];
            record.tokens = (record.tokens + n as f64).min(capacity);
            record.quota_used = record.quota_used.saturating_sub(n);
            self.touch(index);
            self.reservation_used(index, reconciled.monotonic_ms);
        }
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
        let policy = *self.policy_of(Target::Held(index));
        let open_slot = policy.quota.map_or(NO_PERIOD, |quota| {
            slot_i32(self.specs[quota.spec as usize].period.slot())
        });
        let capacity = self.bucket_capacity(index);
        let record = &mut self.table.records[index as usize];
        record.tokens = (record.tokens + n as f64).min(capacity);
        if slot.is_some_and(|slot| {
            slot != NO_PERIOD && record.period_slot == slot && open_slot == slot
        }) {
            record.quota_used = record.quota_used.saturating_sub(n);
        }
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
        let spec = policy.quota.map(|quota| quota.spec);
        let first_anomaly = anomalies.len();
        let reconciled = self.reconciler.read(clock, spec.is_some(), anomalies)?;
        let open_slot = self.apply(&reconciled, spec, anomalies)?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        let (tokens, quota_used) = match target {
            Target::Held(index) => {
                self.refresh(index, open_slot);
                let record = &self.table.records[index as usize];
                (record.tokens, record.quota_used)
            }
            Target::New(_) if self.has_cells() => (0.0, 0),
            Target::New(_) => (policy.initial_tokens, 0),
        };
        // A shared key's remaining is the store's view plus the local reservation (see share.rs).
        let quota_remaining = policy.quota.map(|quota| match target {
            Target::Held(index) if self.share.is_some() => {
                self.sync_reservation(index);
                self.shared_remaining(index)
            }
            _ => quota.limit.saturating_sub(quota_used),
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
            cells: match target {
                Target::Held(index) => self.cell(index).map(|cell| cell.cells),
                Target::New(_) => self.has_cells().then_some(0),
            },
        })
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

    /// Credits the reading to the timeline, re-anchors (or fails the call for policy `refuse`),
    /// and moves the call's spec's period; returns that period's slot.
    fn apply(
        &mut self,
        reconciled: &Reconciled,
        spec: Option<u32>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<i32, Error> {
        self.timeline_ms += reconciled.deltas.credited_ms;
        self.reconciler.commit(reconciled)?;
        let Some(spec) = spec else {
            return Ok(NO_PERIOD);
        };
        let state = &mut self.specs[spec as usize];
        state.period.observe(
            &state.spec,
            reconciled.wall_ms,
            self.timeline_ms,
            reconciled.deltas,
            anomalies,
        );
        Ok(slot_i32(state.period.slot()))
    }

    /// Brings a record up to the timeline (the refresh rule, [`kernel::refresh`]); a key of a
    /// shared bucket, by its cells (`cells.rs`).
    #[inline(always)]
    fn refresh(&mut self, index: u32, open_slot: i32) {
        if self.cells.is_some() {
            return self.refresh_cells(index, open_slot, self.timeline_ms);
        }
        let record = &mut self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        refresh_record(
            record,
            policy.capacity,
            policy.refill_per_second,
            self.timeline_ms,
            open_slot,
        );
    }

    /// Takes `n` if the key's bucket and quota both have it, else says how long to wait (the
    /// decision rule, [`kernel::decide`]).
    #[inline(always)]
    fn decide(&mut self, index: u32, n: u64, wall_ms: f64) -> Decision {
        let record = &mut self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        let specs = &self.specs;
        kernel::decide(
            &mut record.tokens,
            &mut record.quota_used,
            n,
            policy.refill_per_second,
            policy.quota.map(|quota| quota.limit),
            || {
                policy.quota.map_or(0.0, |quota| {
                    specs[quota.spec as usize].period.wait_ms(wall_ms)
                })
            },
            &mut self.counters,
        )
    }

    /// Makes a record the most recently used (it leaves a parked list, if it was on one).
    #[inline(always)]
    fn touch(&mut self, index: u32) {
        if self.main.head == index {
            return;
        }
        let record = self.table.records[index as usize];
        if record.flags & FLAG_PARKED != 0 {
            let spec = self.parked_spec(&record);
            self.table
                .unlink(index, &mut self.specs[spec as usize].parked);
            self.table.records[index as usize].flags &= !FLAG_PARKED;
        } else {
            self.table.unlink(index, &mut self.main);
        }
        self.table.push_front(index, &mut self.main);
    }

    fn parked_spec(&self, record: &Record) -> u32 {
        // Only keys with a quota are ever parked.
        self.policies[record.policy as usize]
            .quota
            .map_or(0, |quota| quota.spec)
    }

    /// Holds a new key at the head of the recency list.
    fn hold(&mut self, key: Key<'_>, policy: PolicyId, open_slot: i32) -> u32 {
        let entry = &mut self.policies[policy as usize];
        entry.keys += 1;
        let record = KeyTable::blank(policy, entry.initial_tokens, self.timeline_ms, open_slot);
        let index = self.table.insert(key, record);
        self.table.push_front(index, &mut self.main);
        self.reservation_held(index);
        self.cells_held(index);
        index
    }

    /// Removes a record from its list and the table, and lets go of its policy.
    fn drop_record(&mut self, index: u32) {
        self.reservation_dropped(index);
        self.cells_dropped(index);
        let record = self.table.records[index as usize];
        let mut lists = RecordLists {
            main: &mut self.main,
            policies: &self.policies,
            specs: &mut self.specs,
        };
        let list = lists.list(&record);
        self.table.unlink(index, list);
        self.table.remove(index, &mut lists);
        self.policies[record.policy as usize].keys -= 1;
        self.release_if_unused(record.policy);
    }

    /// The slot of a record's spec's period as it would be after the reading
    /// `(wall_ms, timeline_ms)` (`None` for the reading: as it is now), in the table's form;
    /// `None` when the record's policy has no quota.
    fn slot_after(&self, record: &Record, reading: Option<(f64, f64)>) -> Option<i32> {
        let quota = self.policies[record.policy as usize].quota?;
        let state = &self.specs[quota.spec as usize];
        let slot = match reading {
            Some((wall_ms, timeline_ms)) => Some(OpenPeriod::slot_after(
                state.period.view(),
                &state.spec,
                wall_ms,
                timeline_ms,
            )),
            None => state.period.slot(),
        };
        Some(slot_i32(slot))
    }

    /// Whether a record has use in its spec's period as it would be after the reading
    /// `(wall_ms, timeline_ms)` (`None`: as it is now).
    fn has_current_use(&self, record: &Record, reading: Option<(f64, f64)>) -> bool {
        record.quota_used > 0 && self.slot_after(record, reading) == Some(record.period_slot)
    }

    /// Whether dropping the record changes no later decision (the idle rule, [`KeyUse::idleness`](crate::kernel::KeyUse::idleness)).
    fn is_idle(&self, record: &Record, timeline_ms: f64, wall_ms: Option<f64>) -> bool {
        let reading = wall_ms.map(|wall_ms| (wall_ms, timeline_ms));
        let policy = &self.policies[record.policy as usize];
        record
            .key_use()
            .idleness(
                policy.capacity,
                policy.refill_per_second,
                timeline_ms,
                || self.slot_after(record, reading),
            )
            .idle
    }

    /// the key to drop so a new one fits (the limiter is full), judged on readings not
    /// yet applied: an idle key, else the least recently used key without quota use. `None`: every
    /// key has use in its open period.
    fn room_for_a_key(&mut self, reconciled: &Reconciled) -> Option<u32> {
        let timeline_ms = self.timeline_ms + reconciled.deltas.credited_ms;
        let wall_ms = Some(reconciled.wall_ms);
        let reading = Some((reconciled.wall_ms, timeline_ms));
        let len = self.table.len();
        for _ in 0..len.min(IDLE_SCAN_FOR_ROOM) {
            self.sweep_cursor %= len;
            let index = self.sweep_cursor;
            self.sweep_cursor += 1;
            if self.is_idle(&self.table.records[index], timeline_ms, wall_ms) {
                return Some(index as u32);
            }
        }
        // Parked keys whose period has ended are older than every key on the main list.
        for state in &self.specs {
            let tail = state.parked.tail;
            if tail != NIL && !self.has_current_use(&self.table.records[tail as usize], reading) {
                return Some(tail);
            }
        }
        loop {
            let tail = self.main.tail;
            if tail == NIL {
                return None;
            }
            let record = self.table.records[tail as usize];
            if !self.has_current_use(&record, reading) {
                return Some(tail);
            }
            let spec = self.parked_spec(&record);
            self.table.unlink(tail, &mut self.main);
            self.table
                .push_front(tail, &mut self.specs[spec as usize].parked);
            self.table.records[tail as usize].flags |= FLAG_PARKED;
        }
    }

    /// Drops a few idle keys at the sweep cursor (never `keep`, the key just held).
    fn sweep_idle(&mut self, keep: Key<'_>) {
        for _ in 0..IDLE_SWEEP_PER_NEW_KEY {
            let len = self.table.len();
            if len == 0 {
                return;
            }
            self.sweep_cursor %= len;
            let index = self.sweep_cursor;
            let record = self.table.records[index];
            if self.is_idle(&record, self.timeline_ms, None)
                && self.table.key_of(index as u32) != keep
            {
                // The last record moves into `index`: look at it next.
                self.drop_record(index as u32);
                self.counters.evicted += 1;
            } else {
                self.sweep_cursor += 1;
            }
        }
    }

    /// Every held key from the least to the most recently used: the parked ones, then the main list.
    fn keys_oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        let lists = self
            .specs
            .iter()
            .map(|state| state.parked.tail)
            .chain(std::iter::once(self.main.tail));
        lists.flat_map(move |tail| {
            std::iter::successors((tail != NIL).then_some(tail), move |&index| {
                let prev = self.table.records[index as usize].prev;
                (prev != NIL).then_some(prev)
            })
        })
    }
}

/// The policy a call on a key that is not held gets.
#[derive(Clone, Copy, Debug)]
pub enum PolicyChoice<'a> {
    /// The limiter has no `policy` function: its defaults.
    Defaults,
    /// `policy(key)` has not been asked yet: the limiter asks for it if the key is not held.
    Ask,
    /// What `policy(key)` returned.
    Given(&'a KeyPolicy),
}

impl<'a> PolicyChoice<'a> {
    /// `returned`: what `policy(key)` returned, if it was asked; `has_policy`: the limiter has a
    /// `policy` function.
    pub fn of(returned: Option<&'a KeyPolicy>, has_policy: bool) -> PolicyChoice<'a> {
        match returned {
            Some(policy) => PolicyChoice::Given(policy),
            None if has_policy => PolicyChoice::Ask,
            None => PolicyChoice::Defaults,
        }
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
    kernel::refresh(
        KeyFields {
            tokens: &mut record.tokens,
            credited_at_ms: &mut record.credited_at_ms,
            quota_used: &mut record.quota_used,
            period_slot: &mut record.period_slot,
        },
        capacity,
        refill_per_second,
        timeline_ms,
        open_slot,
    );
}

fn slot_i32(slot: Option<PeriodSlot>) -> i32 {
    slot.map_or(NO_PERIOD, PeriodSlot::compact)
}

#[cfg(test)]
mod stats_tests;
#[cfg(test)]
mod tests;
