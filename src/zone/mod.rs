//! A `KeyedQuotaClock` whose keys, open periods and clock reconciliation live in a shared
//! memory-mapped file, so that every process of a host that opens it is one limiter
//! (docs/zone.md explains the protocol and its invariants).
//!
//! - The reconciler's state is published lock-free: each open limiter owns a seat of two
//!   slots, writes the one not published and swings the header's `recon_head` to it by CAS; a
//!   failed CAS re-reads the clocks and tries again.
//! - Keys are in groups of [`GROUP_SLOTS`] slots, each group behind its own lock; a key's state
//!   is double-buffered, so a process killed mid-write leaves the state before or after.
//! - Period specs hold their open period double-buffered too, read seqlock-style without a lock
//!   and changed under the spec's own lock.
//! - Every lock records its owner; a waiter that finds the owner dead takes the lock over.

mod blocks;
mod groups;
mod layout;
mod lock;
mod map;
mod open;
mod options;
mod periods;
mod recon;
mod refresh;
mod storage;
#[cfg(test)]
mod tests;

use std::cell::{OnceCell, RefCell};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

pub use blocks::BlockAnswer;
use groups::{read_state, write_state};
#[cfg(test)]
use groups::{write_state_cut, WRITE_STEPS};
use layout::{
    groups_for, Group, InMapping, Intent, Offsets, ReconHead, ReconSlot, Seat, Slot, SlotMeta,
    SpecEntry, INLINE_KEY_BYTES, LONG_KEY_BYTES, META_BLOCKED, META_POLICY_DUE, SEATS, SPECS,
};
pub use layout::{Header, OptionsImage, GROUP_SLOTS, SPEC_IDENTITY_BYTES};
#[cfg(test)]
use layout::{INTENT_RESERVED, META_CURRENT};
pub use lock::owner_id;
use lock::{lock, try_lock, unlock, Acquired};
pub use map::ZoneError;
use options::option_value;
pub use options::{first_difference, options_image};
use periods::{spec_from_identity, spec_identity_bytes, PeriodState};
use recon::{Pending, ReconState};
use storage::{Named, ZoneCall};

use crate::anomaly::{Anomaly, CallDeltas};
use crate::calendar::{Period, PeriodSlot, PeriodSpec, RawPeriodSpec, StartKind};
use crate::clock::{self, ReaderBaseline, SuspendPolicy};
use crate::error::Error;
use crate::kernel::{self, Answer, Idleness, KeyUse, Op};
use crate::keyed::{Key, KeyBuf, KeyPolicy, KeyStatus, PolicyChoice, Snapshot};
use crate::limiter::{Decision, LimiterConfig};
use crate::quota::QuotaPolicy;
use crate::reconciler::ReadingRule;

/// A zone's options, as every process opening it must pass them.
#[derive(Clone, Debug)]
pub struct ZoneConfig {
    pub path: String,
    pub defaults: KeyPolicy,
    pub suspend_policy: SuspendPolicy,
    pub earliest_plausible_wall_ms: Option<f64>,
    pub max_keys: u64,
    /// The clock has CLOCK_BOOTTIME as its elapsed-realtime reader.
    pub reader: bool,
}

impl ZoneConfig {
    /// A zone's options from a limiter's (`max_keys` checked already).
    pub fn of(path: String, limits: &LimiterConfig, max_keys: u64, reader: bool) -> ZoneConfig {
        ZoneConfig {
            path,
            defaults: limits.limits(),
            suspend_policy: limits.suspend_policy,
            earliest_plausible_wall_ms: limits.earliest_plausible_wall_ms,
            max_keys,
            reader,
        }
    }
}

/// What a call does to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Consume,
    Refund,
    Status,
}

/// A call's outcome.
#[derive(Debug)]
pub enum Outcome {
    /// The key is not held and the zone must call `policy(key)` first (nothing was read).
    NeedsPolicy,
    /// The decision, and the slot of the period its quota units count in (for a give-back).
    Decided(Decision, PeriodSlot),
    Refunded,
    Status(KeyStatus),
    /// A consume of a blocked key, denied (nothing taken): what is left of the block, in ms, and
    /// the key's tokens and quota remaining, as its status has them.
    Blocked {
        left_ms: f64,
        tokens: f64,
        quota_remaining: Option<u64>,
    },
}

/// A held key as `snapshot()` saves it.
pub struct HeldKey {
    pub key: KeyBuf,
    /// As of the last reading.
    pub tokens: f64,
    /// In the open period of `period`'s spec.
    pub quota_used: u64,
    /// The key's spec and its open period's id, when it has use there.
    pub period: Option<(Arc<PeriodSpec>, String)>,
    /// The timeline when it was last used.
    pub used_at_ms: f64,
}

const NO_LIMIT: u64 = u64::MAX;
const NO_SLOT: PeriodSlot = PeriodSlot::NONE;
/// Groups looked at for a key to drop before the least recently used one found is taken.
const VICTIM_SCAN_GROUPS: usize = 64;
/// Tries of making room before a new key is refused.
const MAKE_ROOM_TRIES: usize = 16;

/// A held key's bucket and quota use, as its slot stores them.
type KeyState = KeyUse<PeriodSlot>;

/// A held key's limits, as its slot stores them.
#[derive(Clone, Copy, Debug)]
struct Limits {
    capacity: f64,
    refill_per_second: f64,
    quota_limit: Option<u64>,
    spec: Option<usize>,
}

/// The key's hash: a folded multiply over its words, seeded per zone (stable across builds, as
/// the file outlives them).
fn hash_key(seed: u64, key: Key<'_>) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |x: u64| {
        let product = u128::from(x) * u128::from(K);
        (product >> 64) as u64 ^ product as u64
    };
    let mut hash = mix(seed ^ (u64::from(key.len) << 1 | u64::from(key.wide)));
    for &word in key.words {
        hash = mix(hash ^ word);
    }
    mix(hash ^ seed.rotate_left(17))
}

fn tag_of(hash: u64) -> u16 {
    (hash as u16) | 1
}

/// Releases a lock when dropped (a panic unwinding out of a call included).
struct LockGuard<'a>(&'a AtomicU64);

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        unlock(self.0);
    }
}

/// A key group's lock: released when dropped; a panic unwinding out of a call first repairs the
/// group as a takeover would (a key being added is in, or its room in `held` is given back).
struct GroupGuard<'a> {
    zone: &'a Zone,
    group: usize,
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.zone.repair_group(self.group);
        }
        unlock(&self.zone.group(self.group).lock);
    }
}

/// A key's record in a zone, its group locked, as a give-back that reads no clock sees it.
struct LockedKey<'a> {
    zone: &'a Zone,
    record: &'a Slot,
}

impl kernel::HeldUse for LockedKey<'_> {
    type Period = PeriodSlot;
    fn stored(&self) -> (KeyState, f64, Option<PeriodSlot>) {
        let limits = self.zone.limits_of(self.record);
        let open = limits
            .spec
            .map(|spec| self.zone.read_period(spec))
            .filter(|period| period.open)
            .map(|period| period.slot);
        (read_state(self.record), limits.capacity, open)
    }
    fn store(&mut self, state: &KeyState) {
        write_state(self.record, *state);
    }
}

#[cfg(test)]
thread_local! {
    /// Set by a test: the next key added on this thread panics after it is counted in `held`
    /// and before its tag is published.
    static PANIC_BEFORE_TAG: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One process's handle on a zone.
pub struct Zone {
    mapping: map::Mapping,
    offsets: Offsets,
    groups: usize,
    seed: u64,
    me: u64,
    seat: usize,
    /// The suspend policy and the earliest plausible wall reading (`check_plausible` set per
    /// call).
    rule: ReadingRule,
    max_keys: u64,
    defaults: KeyPolicy,
    /// This process's copies of the zone's specs, by index.
    specs: Vec<OnceCell<Arc<PeriodSpec>>>,
    /// Whether this open made the file (a restore applies only then).
    pub created: bool,
    /// What this limiter (in this process) has done, for `stats()`.
    counters: RefCell<crate::stats::Counters>,
    /// `policyTtlMs` in this process (`refresh.rs`).
    policy_ttl_ms: std::cell::Cell<Option<f64>>,
}

// SAFETY: the mapping is shared memory reached only as `InMapping` types (atomics, and the
// header's plain fields, written once before link(2) published the file); the `OnceCell`s and
// `RefCell`s are this handle's own, and a handle moves between threads only whole.
unsafe impl Send for Zone {}

impl Zone {
    // ---- the mapping's regions -------------------------------------------------------------

    fn header(&self) -> &Header {
        self.at(0)
    }

    /// The `T` at `offset` of the mapping. The bounds are checked on every access (a panic is
    /// caught at the N-API boundary and repairs a locked group, see `GroupGuard`).
    fn at<T: InMapping>(&self, offset: usize) -> &T {
        assert!(
            offset
                .checked_add(std::mem::size_of::<T>())
                .is_some_and(|end| end <= self.mapping.len),
            "an access outside the zone's mapping"
        );
        debug_assert_eq!(offset % std::mem::align_of::<T>(), 0);
        // SAFETY: in bounds (checked above) and aligned (the mapping is page-aligned and
        // `Offsets` aligns every region to its type); `T: InMapping` is valid for any bytes and
        // shared soundly between processes.
        unsafe { &*self.mapping.base.as_ptr().add(offset).cast::<T>() }
    }

    fn seat_at(&self, index: usize) -> &Seat {
        self.at(self.offsets.seats + index * std::mem::size_of::<Seat>())
    }

    fn spec_entry(&self, index: usize) -> &SpecEntry {
        self.at(self.offsets.specs + index * std::mem::size_of::<SpecEntry>())
    }

    fn group(&self, index: usize) -> &Group {
        self.at(self.offsets.groups + index * std::mem::size_of::<Group>())
    }

    fn slot(&self, group: usize, slot: usize) -> &Slot {
        self.at(self.offsets.slots + (group * GROUP_SLOTS + slot) * std::mem::size_of::<Slot>())
    }

    fn long_key(&self, group: usize, slot: usize) -> &[AtomicU64; LONG_KEY_BYTES / 8] {
        self.at(self.offsets.long_keys + (group * GROUP_SLOTS + slot) * LONG_KEY_BYTES)
    }

    fn recon_slot(&self, index: u64) -> &ReconSlot {
        let index = index as usize;
        &self.seat_at((index / 2) % SEATS).slots[index % 2]
    }

    /// `tryConsume`, `refund` or `status` of `key`. `policy`: the policy a key that is not held
    /// gets; `count` checks `n` against the key's capacity (before any reading).
    #[inline(always)]
    pub fn call(
        &self,
        key: Key<'_>,
        operation: Operation,
        n: u64,
        policy: PolicyChoice<'_>,
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let first = anomalies.len();
        let outcome = self.call_inner(key, (operation, n, policy), count, anomalies);
        let mut counters = self.counters.borrow_mut();
        counters.count_anomalies(&anomalies[first.min(anomalies.len())..]);
        match &outcome {
            Ok(Outcome::Decided(decision, _)) if decision.allowed => counters.allowed += 1,
            Ok(Outcome::Decided(..) | Outcome::Blocked { .. }) => counters.denied += 1,
            Err(Error::KeyLimit { .. }) => counters.key_limit_refusals += 1,
            _ => {}
        }
        outcome
    }

    /// What this limiter has done since it was opened (in this process).
    pub fn counters(&self) -> crate::stats::Counters {
        *self.counters.borrow()
    }

    /// [`Zone::call`] but for counting its outcome.
    fn call_inner(
        &self,
        key: Key<'_>,
        (operation, n, policy): (Operation, u64, PolicyChoice<'_>),
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        // The usual call: the key is in one of its two groups (found by its tag, then checked
        // under that group's lock).
        for group in [first, second] {
            if !self.has_tag(group, hash) {
                continue;
            }
            let guard = self.lock_group(group);
            if let Some(slot) = self.find_in(group, key, hash) {
                let outcome = self.call_held(group, slot, (operation, n, policy), count, anomalies);
                drop(guard);
                return outcome;
            }
            drop(guard);
            if first == second {
                break;
            }
        }
        // Not found without the locks: under both (in group order), the key's membership is
        // settled, as only a holder of both adds it.
        let (low, high) = (first.min(second), first.max(second));
        let low_guard = self.lock_group(low);
        let high_guard = (high != low).then(|| self.lock_group(high));
        for group in [low, high] {
            if let Some(slot) = self.find_in(group, key, hash) {
                let outcome = self.call_held(group, slot, (operation, n, policy), count, anomalies);
                drop(high_guard);
                drop(low_guard);
                return outcome;
            }
        }
        let group = if self.free_slots(second) > self.free_slots(first) {
            second
        } else {
            first
        };
        let guard = (low_guard, high_guard);
        if operation == Operation::Refund {
            drop(guard);
            let nothing = Limits {
                capacity: 0.0,
                refill_per_second: 0.0,
                quota_limit: None,
                spec: None,
            };
            return self.call_kernel(nothing, Named::Absent, Op::Refund(n), anomalies);
        }
        let Some((policy, limits)) = self.chosen_policy(policy)? else {
            return Ok(Outcome::NeedsPolicy);
        };
        if operation == Operation::Status {
            drop(guard);
            let initial_tokens = policy.initial_tokens;
            let named = Named::Look { initial_tokens };
            return self.call_kernel(limits, named, Op::Status, anomalies);
        }
        let n = count(policy.capacity)?;
        let named = Named::Add {
            group,
            key,
            hash,
            policy: &policy,
        };
        let outcome = self.call_kernel(limits, named, Op::Consume(n), anomalies);
        drop(guard);
        outcome
    }

    /// A call on a held key (its group locked), its policy renewed first when it is due.
    fn call_held(
        &self,
        group: usize,
        slot: usize,
        (operation, n, policy): (Operation, u64, PolicyChoice<'_>),
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        // One look at the slot's meta word: a key with its policy due or maybe blocked (or a zone
        // with policyTtlMs) goes the long way first.
        let meta = self.slot(group, slot).meta.load(Ordering::Acquire);
        if meta & (META_POLICY_DUE | META_BLOCKED) != 0 || self.policy_ttl_ms.get().is_some() {
            if let Some(outcome) =
                self.call_held_marked(group, slot, operation, policy, anomalies)?
            {
                return Ok(outcome);
            }
        }
        let limits = self.limits_of(self.slot(group, slot));
        let op = match operation {
            Operation::Consume => Op::Consume(count(limits.capacity)?),
            Operation::Refund => Op::Refund(n),
            Operation::Status => Op::Status,
        };
        self.call_kernel(limits, Named::Held { group, slot }, op, anomalies)
    }

    /// [`Zone::call_held`]'s long way: the key's policy renewed when due, then a consume of a
    /// blocked key denied; `None`: go on with the call.
    #[cold]
    #[inline(never)]
    fn call_held_marked(
        &self,
        group: usize,
        slot: usize,
        operation: Operation,
        policy: PolicyChoice<'_>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Option<Outcome>, Error> {
        if let Some(outcome) = self.renew_if_due(group, slot, policy, anomalies)? {
            return Ok(Some(outcome));
        }
        let meta = self.slot(group, slot).meta.load(Ordering::Acquire);
        if operation != Operation::Consume || meta & META_BLOCKED == 0 {
            return Ok(None);
        }
        let limits = self.limits_of(self.slot(group, slot));
        self.blocked_call(group, slot, limits, anomalies)
    }

    /// One call through the kernel ([`kernel::call`]) on the key `named` (see `storage.rs`).
    fn call_kernel(
        &self,
        limits: Limits,
        named: Named<'_>,
        op: Op,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let mut storage = ZoneCall::new(self, limits);
        let answer = kernel::call(&mut storage, named, op, anomalies)?;
        Ok(match answer {
            Answer::Decided(decision) => Outcome::Decided(decision, storage.open_slot()),
            Answer::Refunded => Outcome::Refunded,
            Answer::Status(state) => Outcome::Status(self.status_of(
                &limits,
                state.tokens,
                state.quota_used,
                limits.spec,
                storage.period,
            )),
        })
    }

    fn status_of(
        &self,
        limits: &Limits,
        tokens: f64,
        quota_used: u64,
        spec: Option<usize>,
        period: Option<PeriodState>,
    ) -> KeyStatus {
        let quota = limits.quota_limit;
        let period = spec
            .zip(period)
            .filter(|(_, period)| period.open)
            .map(|(spec, period)| {
                let mut full = self.local_spec(spec).period_for(period.start_ms);
                full.end_ms = period.end_ms;
                full
            });
        KeyStatus {
            tokens,
            quota_used: quota.map(|_| quota_used),
            quota_remaining: quota.map(|limit| crate::quota::remaining(limit, quota_used)),
            period,
            time_zone: spec.map(|spec| self.local_spec(spec).time_zone_name()),
            capacity: limits.capacity,
            refill_per_second: limits.refill_per_second,
            quota_limit: quota,
            fleet_tokens: None,
        }
    }

    /// `delete(key)`: drops the key and all its state. Reads no clock.
    pub fn delete(&self, key: Key<'_>) -> bool {
        self.with_held(key, |group, slot| self.remove(group, slot))
            .is_some()
    }

    /// Gives back what a decision for `key` took, reading no clock (the HTTP middleware's
    /// all-or-nothing rollback): `n` tokens, and `n` quota units if `slot` (the decision's
    /// period) is still the key's and its spec's open period.
    pub fn give_back(&self, key: Key<'_>, n: u64, slot: Option<PeriodSlot>) {
        self.with_held(key, |group, index| {
            let record = self.slot(group, index);
            kernel::give_back_unread(&mut LockedKey { zone: self, record }, n, slot);
        });
    }

    /// Locks taken over from processes that died holding them, since the zone was made.
    pub fn takeovers(&self) -> u64 {
        self.header().takeovers.load(Ordering::Relaxed)
    }

    /// Keys held now, by every process.
    pub fn len(&self) -> usize {
        self.header().held.load(Ordering::Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every held key, least recently used first (each read under its group's lock): the key,
    /// its tokens as of the last reading, its quota use in its spec's open period, and that spec.
    pub fn keys(&self) -> Vec<HeldKey> {
        let (_, recon) = self.read_recon();
        let mut keys = Vec::new();
        self.each_held(|group, slot| {
            let record = self.slot(group, slot);
            let limits = self.limits_of(record);
            let mut state = read_state(record);
            let period = limits.spec.map(|spec| self.read_period(spec));
            let timeline_ms = recon.timeline_ms.max(state.credited_at_ms);
            refresh(&limits, &mut state, timeline_ms, period);
            let saved = match (limits.spec, period) {
                (Some(spec), Some(period)) if period.open && state.quota_used > 0 => {
                    let local = self.specs[spec].get().cloned();
                    local.map(|local| {
                        let id = local.period_for(period.start_ms).id;
                        (local, id)
                    })
                }
                _ => None,
            };
            let used = if saved.is_some() { state.quota_used } else { 0 };
            keys.push(HeldKey {
                key: self.key_at(group, slot),
                tokens: state.tokens,
                quota_used: used,
                period: saved,
                used_at_ms: read_state(record).credited_at_ms,
            });
        });
        keys.sort_by(|a, b| a.used_at_ms.total_cmp(&b.used_at_ms));
        keys
    }

    /// The policy a call brings (a key met, or a held key's renewed) and its limits in this
    /// zone; `None`: JavaScript is asked for it first.
    fn chosen_policy(
        &self,
        policy: PolicyChoice<'_>,
    ) -> Result<Option<(KeyPolicy, Limits)>, Error> {
        let policy = match policy {
            PolicyChoice::Given(policy) => policy.clone(),
            PolicyChoice::Ask => return Ok(None),
            PolicyChoice::Defaults => self.defaults.clone(),
        };
        let spec = policy
            .quota
            .as_ref()
            .map(|quota| self.spec_index(&quota.spec))
            .transpose()?;
        let limits = policy_limits(&policy, spec);
        Ok(Some((policy, limits)))
    }

    /// Gives this limiter's reconciler seat back (the file and its keys stay).
    pub fn close(&self) {
        // Free at once, even when one of its slots is the published one: a next owner writes only
        // its slot that is not published, and readers check the head again after reading.
        let owner = &self.seat_at(self.seat).owner;
        let _ = owner.compare_exchange(self.me, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

impl Drop for Zone {
    fn drop(&mut self) {
        self.close();
    }
}

fn policy_limits(policy: &KeyPolicy, spec: Option<usize>) -> Limits {
    Limits {
        capacity: policy.capacity,
        refill_per_second: policy.refill_per_second,
        quota_limit: policy
            .quota
            .as_ref()
            .filter(|_| spec.is_some())
            .map(|quota: &QuotaPolicy| quota.limit),
        spec,
    }
}

/// Brings a key's state up to the timeline: refill since it was last used, and zero use if
/// its use belongs to a period that has ended.
fn refresh(limits: &Limits, state: &mut KeyState, timeline_ms: f64, period: Option<PeriodState>) {
    let open_slot = period
        .filter(|period| period.open)
        .map_or(NO_SLOT, |period| period.slot);
    state.refresh(
        limits.capacity,
        limits.refill_per_second,
        timeline_ms,
        open_slot,
    );
}

impl Zone {
    /// `snapshot()` of the zone: every held key (reads no clock).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut writer = crate::keyed::SnapshotWriter::default();
        for held in self.keys() {
            let use_in = held
                .period
                .as_ref()
                .map(|(spec, id)| (spec.as_ref(), id.as_str(), held.quota_used));
            writer.key(held.key.key(), held.tokens, use_in);
        }
        writer.finish()
    }
}
