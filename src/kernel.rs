//! The rules every limiter shares, written once: the decision ([`decide`], on a key's [`Bucket`]
//! and [`Quota`]), how a key's state is brought up to the limiter's timeline ([`KeyUse::refresh`])
//! and when dropping a key changes no later decision ([`KeyUse::idleness`]); and [`call`] and
//! its fast arm [`call_quiet`], which chain them over a limiter's [`Storage`]. `QuotaClock`'s
//! limiter keeps its one bucket in its fields, the keyed table a key's in its records, the zone in
//! shared memory; each hands the rules its state (as a [`KeyUse`]) and lends the decision its
//! parts ([`Storage::parts`]), never deciding itself, and stores the result back. The period rule is
//! [`OpenPeriod::next`](crate::quota::OpenPeriod::next), the reading rule
//! [`ReadingRule::read`](crate::reconciler::ReadingRule::read).

use std::convert::Infallible;
use std::marker::PhantomData;

use crate::anomaly::{Anomaly, CallDeltas};
use crate::bucket::{given_back, refill_wait_ms, refilled};
use crate::error::Error;
use crate::quota::{remaining, wait_until_ms, OpenPeriod};
use crate::stats::Counters;

/// Which wait a denial reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryBasis {
    MonotonicRefill,
    WallPeriod,
}

impl RetryBasis {
    /// Every basis, once.
    pub const ALL: [RetryBasis; 2] = [RetryBasis::MonotonicRefill, RetryBasis::WallPeriod];

    pub fn as_str(self) -> &'static str {
        match self {
            RetryBasis::MonotonicRefill => "monotonic-refill",
            RetryBasis::WallPeriod => "wall-period",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub retry_after_ms: f64,
    pub retry_after_basis: Option<RetryBasis>,
    pub tokens: f64,
    pub quota_remaining: Option<u64>,
}

impl Decision {
    #[inline(always)]
    pub(crate) fn allowed(tokens: f64, quota_remaining: Option<u64>) -> Decision {
        Decision {
            allowed: true,
            retry_after_ms: 0.0,
            retry_after_basis: None,
            tokens,
            quota_remaining,
        }
    }

    #[inline(always)]
    pub(crate) fn denied(
        retry_after_ms: f64,
        basis: RetryBasis,
        tokens: f64,
        quota_remaining: Option<u64>,
    ) -> Decision {
        Decision {
            allowed: false,
            retry_after_ms,
            retry_after_basis: Some(basis),
            tokens,
            quota_remaining,
        }
    }
}

/// a denial waits the longer of the waits that apply; a tie goes to the calendar.
#[inline(always)]
pub(crate) fn longer_wait(bucket_wait_ms: f64, quota_wait_ms: Option<f64>) -> (f64, RetryBasis) {
    match quota_wait_ms {
        Some(quota_wait_ms) if quota_wait_ms >= bucket_wait_ms => {
            (quota_wait_ms, RetryBasis::WallPeriod)
        }
        _ => (bucket_wait_ms, RetryBasis::MonotonicRefill),
    }
}

/// Where a decision is counted: the in-process limiters' `stats()` counters, or nowhere (the
/// zone counts each call's outcome once, around the decision).
pub trait Tally {
    fn allowed(&mut self);
    fn denied(&mut self);
}

impl Tally for Counters {
    #[inline(always)]
    fn allowed(&mut self) {
        self.allowed += 1;
    }
    #[inline(always)]
    fn denied(&mut self) {
        self.denied += 1;
    }
}

impl<T: Tally> Tally for &mut T {
    #[inline(always)]
    fn allowed(&mut self) {
        (**self).allowed();
    }
    #[inline(always)]
    fn denied(&mut self) {
        (**self).denied();
    }
}

impl Tally for () {
    #[inline(always)]
    fn allowed(&mut self) {}
    #[inline(always)]
    fn denied(&mut self) {}
}

/// A key's bucket as the decision sees it: the tokens a decision takes from and how long a call
/// they do not cover waits; a layer around it (a shared bucket's slice, `keyed/share/layer.rs`) may
/// hold a call back before its decision ([`Bucket::pending`]) and keep books after it.
pub trait Bucket {
    /// What the bucket's holder does instead of a decision ([`Bucket::pending`]).
    type Pending;
    /// The tokens a decision takes from.
    fn tokens(&mut self) -> &mut f64;
    /// A call before anything is decided: `Err`, the call is not decided now (nothing is taken
    /// or counted); the holder does the step instead.
    #[inline(always)]
    fn pending(&mut self, _n: u64) -> Result<(), Self::Pending> {
        Ok(())
    }
    /// How long a call for `wanted` tokens the bucket refuses waits (asked only then).
    fn wait_ms(&self, wanted: f64) -> f64;
    /// After the decision (a layer's books).
    #[inline(always)]
    fn decided(&mut self, _n: u64, _decision: &Decision) {}
}

/// A bucket refilled here, at `refill_per_second`: a refused call waits for the refill. `P`: the
/// quota's pending step, when the quota beside it has one.
pub struct Refill<'a, P = Infallible> {
    pub tokens: &'a mut f64,
    pub refill_per_second: f64,
    pending: PhantomData<P>,
}

impl<'a, P> Refill<'a, P> {
    #[inline(always)]
    pub fn new(tokens: &'a mut f64, refill_per_second: f64) -> Refill<'a, P> {
        Refill {
            tokens,
            refill_per_second,
            pending: PhantomData,
        }
    }
}

impl<P> Bucket for Refill<'_, P> {
    type Pending = P;
    #[inline(always)]
    fn tokens(&mut self) -> &mut f64 {
        self.tokens
    }
    #[inline(always)]
    fn wait_ms(&self, wanted: f64) -> f64 {
        refill_wait_ms(*self.tokens, wanted, self.refill_per_second)
    }
}

/// The quota part of a decision, however it is counted: a period's use against its limit here
/// ([`PeriodQuota`]), or a shared key's reservation (the share layer's, `keyed/share/layer.rs`).
pub trait Quota {
    /// What the quota's holder does instead of a decision ([`Quota::pending`]); `Infallible`
    /// for a quota that always lets the decision be made.
    type Pending;
    /// Whether `n` more units are admitted.
    fn admits(&self, n: u64) -> bool;
    /// A call the bucket admits, before the quota admits (`admits`) or refuses it: `Err`, the
    /// call is not decided now (nothing is taken or counted); the holder does the step instead.
    #[inline(always)]
    fn pending(&mut self, _n: u64, _admits: bool) -> Result<(), Self::Pending> {
        Ok(())
    }
    /// Takes `n` (admitted).
    fn take(&mut self, n: u64);
    /// What a decision reports as remaining.
    fn remaining(&self) -> u64;
    /// How long a call the quota refuses waits (asked only then).
    fn wait_ms(&self) -> f64;
}

/// When a quota's open period ends, as its holder keeps it (read only when a refused call waits).
pub trait PeriodEnd {
    /// `None`: no period is open.
    fn end_ms(&self) -> Option<f64>;

    /// How long a call waits at `wall_ms` for the period to end (0: none open).
    #[inline(always)]
    fn wait_ms(&self, wall_ms: f64) -> f64 {
        self.end_ms()
            .map_or(0.0, |end_ms| wait_until_ms(end_ms, wall_ms))
    }
}

impl PeriodEnd for &OpenPeriod {
    #[inline(always)]
    fn end_ms(&self) -> Option<f64> {
        self.open.as_ref().map(|open| open.end_ms)
    }
}

impl PeriodEnd for Option<f64> {
    #[inline(always)]
    fn end_ms(&self) -> Option<f64> {
        *self
    }
}

/// A quota counted here: `used` of `limit` in the open period, which `ends`; a refused call
/// waits from `wall_ms` to its end. `P`: the bucket's pending step, when the bucket beside it
/// has one.
pub struct PeriodQuota<'a, E, P = Infallible> {
    pub used: &'a mut u64,
    pub limit: u64,
    pub ends: E,
    pub wall_ms: f64,
    pending: PhantomData<P>,
}

impl<'a, E, P> PeriodQuota<'a, E, P> {
    #[inline(always)]
    pub fn new(used: &'a mut u64, limit: u64, ends: E, wall_ms: f64) -> PeriodQuota<'a, E, P> {
        PeriodQuota {
            used,
            limit,
            ends,
            wall_ms,
            pending: PhantomData,
        }
    }
}

impl<E: PeriodEnd, P> Quota for PeriodQuota<'_, E, P> {
    type Pending = P;
    #[inline(always)]
    fn admits(&self, n: u64) -> bool {
        n <= remaining(self.limit, *self.used)
    }
    #[inline(always)]
    fn take(&mut self, n: u64) {
        *self.used += n;
    }
    #[inline(always)]
    fn remaining(&self) -> u64 {
        remaining(self.limit, *self.used)
    }
    #[inline(always)]
    fn wait_ms(&self) -> f64 {
        self.ends.wait_ms(self.wall_ms)
    }
}

/// A quota lent to a decision, its holder keeping it for its own steps after.
impl<Q: Quota> Quota for &mut Q {
    type Pending = Q::Pending;
    #[inline(always)]
    fn admits(&self, n: u64) -> bool {
        (**self).admits(n)
    }
    #[inline(always)]
    fn pending(&mut self, n: u64, admits: bool) -> Result<(), Self::Pending> {
        (**self).pending(n, admits)
    }
    #[inline(always)]
    fn take(&mut self, n: u64) {
        (**self).take(n);
    }
    #[inline(always)]
    fn remaining(&self) -> u64 {
        (**self).remaining()
    }
    #[inline(always)]
    fn wait_ms(&self) -> f64 {
        (**self).wait_ms()
    }
}

/// The decision rule: takes `n` from the bucket's tokens and, with a quota, from the quota, if
/// both have it; else says how long to wait, the longer of the bucket's wait
/// ([`Bucket::wait_ms`]) and the quota's ([`Quota::wait_ms`], asked only when the quota refuses).
/// A call is decided only when the bucket has nothing [pending](Bucket::pending) for it and,
/// the bucket admitting it, neither has the quota ([`Quota::pending`]); else `Err`, the layer's
/// step instead, nothing taken or counted. `n` is a positive integer no larger than capacity
/// (checked by the caller).
#[inline(always)]
pub fn decide<B: Bucket, Q: Quota<Pending = B::Pending>>(
    mut bucket: B,
    n: u64,
    quota: Option<Q>,
    mut tally: impl Tally,
) -> Result<Decision, B::Pending> {
    bucket.pending(n)?;
    let decision = decide_on(&mut bucket, n, quota, &mut tally)?;
    bucket.decided(n, &decision);
    Ok(decision)
}

#[inline(always)]
fn decide_on<B: Bucket, Q: Quota<Pending = B::Pending>>(
    bucket: &mut B,
    n: u64,
    quota: Option<Q>,
    tally: &mut impl Tally,
) -> Result<Decision, B::Pending> {
    // n ≤ capacity is a safe integer, so the signed conversion (one instruction) is exact.
    let wanted = n as i64 as f64;
    let bucket_admits = *bucket.tokens() >= wanted;
    // One branch on the quota's presence, so a limiter without one decides on its bucket alone.
    let Some(mut quota) = quota else {
        if bucket_admits {
            *bucket.tokens() -= wanted;
            tally.allowed();
            return Ok(Decision::allowed(*bucket.tokens(), None));
        }
        let wait_ms = bucket.wait_ms(wanted);
        tally.denied();
        let tokens = *bucket.tokens();
        return Ok(Decision::denied(
            wait_ms,
            RetryBasis::MonotonicRefill,
            tokens,
            None,
        ));
    };
    let quota_admits = quota.admits(n);
    if bucket_admits {
        quota.pending(n, quota_admits)?;
        if quota_admits {
            *bucket.tokens() -= wanted;
            quota.take(n);
            tally.allowed();
            return Ok(Decision::allowed(*bucket.tokens(), Some(quota.remaining())));
        }
    }
    let bucket_wait_ms = if bucket_admits {
        0.0
    } else {
        bucket.wait_ms(wanted)
    };
    let quota_wait_ms = (!quota_admits).then(|| quota.wait_ms());
    let (retry_after_ms, basis) = longer_wait(bucket_wait_ms, quota_wait_ms);
    tally.denied();
    let tokens = *bucket.tokens();
    Ok(Decision::denied(
        retry_after_ms,
        basis,
        tokens,
        Some(quota.remaining()),
    ))
}

/// A key's bucket and quota use, however its storage keeps them. `S` is the storage's form of a
/// period slot (the key table's 32-bit one, the zone's [`PeriodSlot`](crate::calendar::PeriodSlot)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyUse<S> {
    pub tokens: f64,
    /// The limiter's timeline (credited ms) when `tokens` was last brought up to date.
    pub credited_at_ms: f64,
    /// Quota use in the period `period_slot` of the key's spec.
    pub quota_used: u64,
    /// The period the use belongs to.
    pub period_slot: S,
}

/// A held key, however its storage keeps it, as a give-back reading no clock sees it.
pub trait HeldUse {
    type Period: Copy + PartialEq;
    /// Its use as stored (not refreshed), its capacity, its quota's open period as last read.
    fn stored(&self) -> (KeyUse<Self::Period>, f64, Option<Self::Period>);
    fn store(&mut self, state: &KeyUse<Self::Period>);
}

/// A give-back reading no clock (an all-or-nothing rollback, which must not fail on a clock): the
/// give-back rule ([`KeyUse::give_back`]) on the key's use as stored.
pub fn give_back_unread<K: HeldUse>(key: &mut K, n: u64, taken_in: Option<K::Period>) {
    let (mut state, capacity, open) = key.stored();
    state.give_back(n, capacity, taken_in, open);
    key.store(&state);
}

/// What the idle rule finds of a key ([`KeyUse::idleness`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idleness {
    /// Dropping the key changes no later decision: a full bucket and no use in its open period.
    pub idle: bool,
    /// It has quota use in its spec's open period (dropping it would give that use back).
    pub has_use: bool,
}

impl<S: Copy + PartialEq> KeyUse<S> {
    /// The refresh rule: the bucket refilled up to `timeline_ms` (at most `capacity`), and the
    /// use zeroed if it belongs to a period other than the open one (`open_slot`).
    #[inline(always)]
    pub fn refresh(
        &mut self,
        capacity: f64,
        refill_per_second: f64,
        timeline_ms: f64,
        open_slot: S,
    ) {
        self.tokens = refilled(
            self.tokens,
            timeline_ms - self.credited_at_ms,
            refill_per_second,
            capacity,
        );
        // Calls on one key are in timeline order (the zone holds the key's group lock across the
        // reconciliation; the key table has one owner), so this only moves forward. (A plain
        // compare: neither is NaN.)
        if timeline_ms > self.credited_at_ms {
            self.credited_at_ms = timeline_ms;
        }
        if self.period_slot != open_slot {
            self.period_slot = open_slot;
            self.quota_used = 0;
        }
    }

    /// The give-back rule (a refund, and the HTTP middleware's all-or-nothing rollback): `n`
    /// tokens back, up to `capacity`, and `n` quota units back (never below zero) only when they
    /// were taken in the period `taken_in` and that period is still the key's and the open one
    /// (`open`). A refund in a call, after the refresh, passes the open slot as both.
    #[inline]
    pub fn give_back(&mut self, n: u64, capacity: f64, taken_in: Option<S>, open: Option<S>) {
        self.tokens = given_back(self.tokens, n as f64, capacity);
        if taken_in.is_some() && taken_in == open && taken_in == Some(self.period_slot) {
            self.quota_used = self.quota_used.saturating_sub(n);
        }
    }

    /// The idle rule, judged at `timeline_ms`: a full bucket then, and no use in the period
    /// that would be open (`slot_after`: that period's slot, `None` when the key has no quota;
    /// asked only when the key has use).
    #[inline]
    pub fn idleness(
        &self,
        capacity: f64,
        refill_per_second: f64,
        timeline_ms: f64,
        slot_after: impl FnOnce() -> Option<S>,
    ) -> Idleness {
        let tokens = refilled(
            self.tokens,
            timeline_ms - self.credited_at_ms,
            refill_per_second,
            capacity,
        );
        let has_use = self.quota_used > 0 && slot_after() == Some(self.period_slot);
        Idleness {
            idle: tokens >= capacity && !has_use,
            has_use,
        }
    }
}

/// What a call asks of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Take `n` (a positive integer no larger than the key's capacity, checked by the caller).
    Consume(u64),
    /// Give back `n` tokens (up to capacity) and `n` quota units of the open period (down to zero).
    Refund(u64),
    /// Consume nothing; report the key's state.
    Status,
}

/// One call's readings, reconciled and taken in by its storage ([`Storage::reconcile`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallReading {
    pub monotonic_ms: f64,
    pub wall_ms: f64,
    /// The storage's timeline (credited ms) with this call's credit: what the key is refreshed to.
    pub timeline_ms: f64,
    /// The call's deltas and credit (the period rule reports them with its anomalies).
    pub deltas: CallDeltas,
}

/// A key's bucket as the refresh rule sees it: its capacity and refill (a shared bucket's key:
/// those of the cells it holds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketOf {
    pub capacity: f64,
    pub refill_per_second: f64,
}

/// What [`call`] answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer<D, S> {
    /// A consume's answer ([`Storage::answer`]: the decision, or a layer's step instead).
    Decided(D),
    Refunded,
    /// The key's state, refreshed to the reading (a key not held: what a fresh one would have).
    Status(KeyUse<S>),
}

/// What a consume's decision is made of, as a storage lends it for the one decision: the key's
/// bucket (over its state's tokens, or a layer around them), its quota (over its state's use, or
/// a shared key's reservation; `None`: no quota) and where the decision is counted.
pub struct Parts<B, Q, T> {
    pub bucket: B,
    pub quota: Option<Q>,
    pub tally: T,
}

/// Where a limiter keeps its keys' state, seen by [`call`] one step at a time: the one key of a
/// `QuotaClock` (`limiter/`), the keyed table (`keyed/`), the zone's shared file (`zone/`). A
/// storage applies the rules and only the rules: the reading rule when it reconciles, the period
/// rule when it moves a period; it lends the decision its parts ([`Storage::parts`]) and never
/// decides: [`call`] refreshes the key, decides ([`decide`]) or refunds, and has it store the
/// result.
pub trait Storage {
    /// A key as a call names it (held, or to be added, or only looked at).
    type Key: Copy;
    /// A key's state once found or made (`load`), where `save` writes it back.
    type Held: Copy;
    /// The storage's form of a period slot.
    type Slot: Copy + PartialEq;
    /// A layer's step instead of a decision (`Infallible`: every consume is decided).
    type Pending;
    /// What a consume answers.
    type Decided;
    /// The key's bucket, as the decision sees it.
    type Bucket<'a>: Bucket<Pending = Self::Pending>
    where
        Self: 'a;
    /// The key's quota, as the decision sees it.
    type Quota<'a>: Quota<Pending = Self::Pending>
    where
        Self: 'a;
    /// Where the decision is counted.
    type Tally<'a>: Tally
    where
        Self: 'a;

    /// Reads the clocks, applies the reading rule and takes the reading in (and, for a key to be
    /// added, makes room for it). An error changes nothing but what the reading rule keeps.
    fn reconcile(
        &mut self,
        key: Self::Key,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<CallReading, Error>;

    /// Applies the period rule to the key's quota spec: the slot open after `reading` (the
    /// storage's "no period" for a key without a quota).
    fn move_period(
        &mut self,
        key: Self::Key,
        reading: &CallReading,
        anomalies: &mut Vec<Anomaly>,
    ) -> Self::Slot;

    /// [`Storage::reconcile`] and [`Storage::move_period`] of a quiet call (see [`call_quiet`])
    /// on readings already taken: `None`, changing nothing, unless both clocks moved forward
    /// together (the reading rule's first row), nothing is latched and the key's open period (if
    /// any) holds the wall reading (the period rule's first branch); then the readings are
    /// taken in and the open slot is what the period rule would give.
    #[inline(always)]
    fn quiet(
        &mut self,
        _key: Self::Key,
        _monotonic_ms: f64,
        _wall_ms: f64,
    ) -> Option<(CallReading, Self::Slot)> {
        None
    }

    /// The key's state and bucket: a held key's as stored, a new one's fresh at the reading (a
    /// consume adds it here).
    fn load(
        &mut self,
        key: Self::Key,
        op: Op,
        reading: &CallReading,
        open_slot: Self::Slot,
    ) -> (Self::Held, KeyUse<Self::Slot>, BucketOf);

    /// The parts of a consume of `n`'s decision over the refreshed `state` (the storage's layers
    /// take their own steps before it here).
    fn parts<'a>(
        &'a mut self,
        held: Self::Held,
        state: &'a mut KeyUse<Self::Slot>,
        n: u64,
        reading: &CallReading,
    ) -> Parts<Self::Bucket<'a>, Self::Quota<'a>, Self::Tally<'a>>;

    /// What a consume of `n` answers, once its state is saved: the decision, or the step a layer
    /// took instead (its layers' steps after it here).
    fn answer(
        &mut self,
        held: Self::Held,
        n: u64,
        outcome: Result<Decision, Self::Pending>,
    ) -> Self::Decided;

    /// Writes the state back after `op` (a storage may leave a status's refresh unwritten).
    fn save(&mut self, held: Self::Held, state: &KeyUse<Self::Slot>, op: Op, reading: &CallReading);
}

/// One call on one key, the same for every storage: reconcile the clocks, move the key's period,
/// refresh the key ([`KeyUse::refresh`]), then decide, refund or report, and store the result.
#[inline(always)]
pub fn call<S: Storage>(
    storage: &mut S,
    key: S::Key,
    op: Op,
    anomalies: &mut Vec<Anomaly>,
) -> Result<Answer<S::Decided, S::Slot>, Error> {
    let reading = storage.reconcile(key, anomalies)?;
    let open_slot = storage.move_period(key, &reading, anomalies);
    Ok(match op {
        Op::Consume(n) => Answer::Decided(consume(storage, key, n, &reading, open_slot)),
        Op::Refund(n) => {
            let (held, mut state, bucket) = load(storage, key, op, &reading, open_slot);
            state.give_back(n, bucket.capacity, Some(open_slot), Some(open_slot));
            storage.save(held, &state, op, &reading);
            Answer::Refunded
        }
        Op::Status => {
            let (held, state, _) = load(storage, key, op, &reading, open_slot);
            storage.save(held, &state, op, &reading);
            Answer::Status(state)
        }
    })
}

/// The kernel's fast arm, the hot path: a consume of `n` on readings already taken, when the
/// call is a quiet one ([`Storage::quiet`]); then the same steps as [`call`]'s, with no
/// `Result`, clock or anomaly list in the way. `None` changes nothing: the caller takes
/// [`call`].
#[inline(always)]
pub fn call_quiet<S: Storage>(
    storage: &mut S,
    key: S::Key,
    n: u64,
    monotonic_ms: f64,
    wall_ms: f64,
) -> Option<S::Decided> {
    let (reading, open_slot) = storage.quiet(key, monotonic_ms, wall_ms)?;
    Some(consume(storage, key, n, &reading, open_slot))
}

/// The key loaded and refreshed to the reading.
#[inline(always)]
fn load<S: Storage>(
    storage: &mut S,
    key: S::Key,
    op: Op,
    reading: &CallReading,
    open_slot: S::Slot,
) -> (S::Held, KeyUse<S::Slot>, BucketOf) {
    let (held, mut state, bucket) = storage.load(key, op, reading, open_slot);
    state.refresh(
        bucket.capacity,
        bucket.refill_per_second,
        reading.timeline_ms,
        open_slot,
    );
    (held, state, bucket)
}

/// A consume's steps after the reading: load and refresh, decide on the storage's parts, save,
/// answer.
#[inline(always)]
fn consume<S: Storage>(
    storage: &mut S,
    key: S::Key,
    n: u64,
    reading: &CallReading,
    open_slot: S::Slot,
) -> S::Decided {
    let op = Op::Consume(n);
    let (held, mut state, _) = load(storage, key, op, reading, open_slot);
    let Parts {
        bucket,
        quota,
        tally,
    } = storage.parts(held, &mut state, n, reading);
    let outcome = decide(bucket, n, quota, tally);
    storage.save(held, &state, op, reading);
    storage.answer(held, n, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quota of `used` of `limit` that holds back every call the bucket admits while `held`.
    struct Held {
        used: u64,
        limit: u64,
        held: bool,
    }

    impl Quota for Held {
        type Pending = &'static str;
        fn admits(&self, n: u64) -> bool {
            n <= self.limit - self.used
        }
        fn pending(&mut self, _n: u64, _admits: bool) -> Result<(), &'static str> {
            if self.held {
                Err("a store call first")
            } else {
                Ok(())
            }
        }
        fn take(&mut self, n: u64) {
            self.used += n;
        }
        fn remaining(&self) -> u64 {
            self.limit - self.used
        }
        fn wait_ms(&self) -> f64 {
            500.0
        }
    }

    #[test]
    fn a_period_quota_takes_its_use_and_a_refused_call_waits_the_longer_of_the_two() {
        let (mut tokens, mut used, mut counters) = (3.0, 8, Counters::default());
        let call = |tokens: &mut f64, used: &mut u64, n: u64, counters: &mut Counters| {
            let quota: PeriodQuota<_> = PeriodQuota::new(used, 10, Some(6_000.0), 1_000.0);
            let Ok(decision) = decide(Refill::new(tokens, 1.0), n, Some(quota), counters);
            decision
        };
        assert_eq!(
            call(&mut tokens, &mut used, 2, &mut counters),
            Decision::allowed(1.0, Some(0))
        );
        assert_eq!(used, 10);
        assert_eq!(
            call(&mut tokens, &mut used, 1, &mut counters),
            Decision::denied(5_000.0, RetryBasis::WallPeriod, 1.0, Some(0))
        );
        assert_eq!(
            call(&mut tokens, &mut used, 2, &mut counters),
            Decision::denied(5_000.0, RetryBasis::WallPeriod, 1.0, Some(0))
        );
        let no_quota: Option<PeriodQuota<'_, Option<f64>>> = None;
        let Ok(decision) = decide(Refill::new(&mut tokens, 1.0), 3, no_quota, &mut counters);
        assert_eq!(
            decision,
            Decision::denied(2_000.0, RetryBasis::MonotonicRefill, 1.0, None)
        );
        assert_eq!((counters.allowed, counters.denied), (1, 3));
    }

    #[test]
    fn a_call_the_quota_holds_back_is_not_decided_and_a_bucket_short_one_is() {
        let mut counters = Counters::default();
        let mut quota = Held {
            used: 0,
            limit: 5,
            held: true,
        };
        let mut tokens = 4.0;
        assert_eq!(
            decide(
                Refill::new(&mut tokens, 1.0),
                2,
                Some(&mut quota),
                &mut counters
            ),
            Err("a store call first")
        );
        assert_eq!(
            (tokens, quota.used, counters),
            (4.0, 0, Counters::default())
        );
        // The bucket refuses first: decided (denied) whatever the quota holds back.
        assert_eq!(
            decide(
                Refill::new(&mut tokens, 1.0),
                6,
                Some(&mut quota),
                &mut counters
            ),
            Ok(Decision::denied(
                2_000.0,
                RetryBasis::MonotonicRefill,
                4.0,
                Some(5)
            ))
        );
        quota.held = false;
        assert_eq!(
            decide(
                Refill::new(&mut tokens, 1.0),
                2,
                Some(&mut quota),
                &mut counters
            ),
            Ok(Decision::allowed(2.0, Some(3)))
        );
        assert_eq!((quota.used, counters.allowed, counters.denied), (2, 1, 1));
    }

    /// A layer's bucket: its tokens, its own wait (as a shared bucket's fleet wait), a call held
    /// back while `held`, and the decisions it saw.
    struct Layer {
        tokens: f64,
        wait_ms: f64,
        held: bool,
        seen: Vec<bool>,
    }

    impl Bucket for &mut Layer {
        type Pending = &'static str;
        fn tokens(&mut self) -> &mut f64 {
            &mut self.tokens
        }
        fn pending(&mut self, _n: u64) -> Result<(), &'static str> {
            if self.held {
                Err("a slice first")
            } else {
                Ok(())
            }
        }
        fn wait_ms(&self, _wanted: f64) -> f64 {
            self.wait_ms
        }
        fn decided(&mut self, _n: u64, decision: &Decision) {
            self.seen.push(decision.allowed);
        }
    }

    #[test]
    fn a_bucket_layer_holds_a_call_back_before_anything_and_its_wait_counts_as_the_buckets() {
        let mut counters = Counters::default();
        let mut layer = Layer {
            tokens: 1.0,
            wait_ms: 3_000.0,
            held: true,
            seen: Vec::new(),
        };
        // Held back: nothing taken, counted or seen, the quota not even asked.
        let mut quota = Held {
            used: 0,
            limit: 5,
            held: true,
        };
        assert_eq!(
            decide(&mut layer, 1, Some(&mut quota), &mut counters),
            Err("a slice first")
        );
        assert_eq!(
            (layer.tokens, counters, layer.seen.len()),
            (1.0, Counters::default(), 0)
        );
        layer.held = false;
        // The bucket refuses and the quota admits: the layer's wait.
        let mut quota = Held {
            used: 0,
            limit: 5,
            held: false,
        };
        assert_eq!(
            decide(&mut layer, 2, Some(&mut quota), &mut counters),
            Ok(Decision::denied(
                3_000.0,
                RetryBasis::MonotonicRefill,
                1.0,
                Some(5)
            ))
        );
        // Both refuse: the longer wait, the layer's (3 s) over the quota's (500 ms) ...
        let mut spent = Held {
            used: 5,
            limit: 5,
            held: false,
        };
        assert_eq!(
            decide(&mut layer, 2, Some(&mut spent), &mut counters),
            Ok(Decision::denied(
                3_000.0,
                RetryBasis::MonotonicRefill,
                1.0,
                Some(0)
            ))
        );
        // ... or the quota's when it is the longer.
        layer.wait_ms = 100.0;
        assert_eq!(
            decide(&mut layer, 2, Some(&mut spent), &mut counters),
            Ok(Decision::denied(
                500.0,
                RetryBasis::WallPeriod,
                1.0,
                Some(0)
            ))
        );
        assert_eq!(
            decide(&mut layer, 1, Some(&mut quota), &mut counters),
            Ok(Decision::allowed(0.0, Some(4)))
        );
        assert_eq!(layer.seen, [false, false, false, true]);
        assert_eq!((counters.allowed, counters.denied), (1, 3));
    }

    #[test]
    fn a_refresh_refills_to_capacity_and_zeroes_the_use_of_an_ended_period() {
        let mut key = KeyUse {
            tokens: 1.0,
            credited_at_ms: 1_000.0,
            quota_used: 3,
            period_slot: 7,
        };
        key.refresh(10.0, 2.0, 3_000.0, 7);
        assert_eq!(
            (key.tokens, key.credited_at_ms, key.quota_used),
            (5.0, 3_000.0, 3)
        );
        key.refresh(10.0, 2.0, 60_000.0, 8);
        assert_eq!((key.tokens, key.quota_used, key.period_slot), (10.0, 0, 8));
    }

    #[test]
    fn a_key_is_idle_with_a_full_bucket_and_no_use_in_the_period_that_would_be_open() {
        let key = KeyUse {
            tokens: 9.0,
            credited_at_ms: 0.0,
            quota_used: 1,
            period_slot: 4,
        };
        let judged = |timeline_ms, slot| key.idleness(10.0, 1.0, timeline_ms, || slot);
        assert_eq!(
            judged(500.0, Some(5)),
            Idleness {
                idle: false,
                has_use: false
            }
        );
        assert_eq!(
            judged(1_000.0, Some(5)),
            Idleness {
                idle: true,
                has_use: false
            }
        );
        assert_eq!(
            judged(1_000.0, Some(4)),
            Idleness {
                idle: false,
                has_use: true
            }
        );
        assert_eq!(
            judged(1_000.0, None),
            Idleness {
                idle: true,
                has_use: false
            }
        );
    }

    /// A storage of one key in memory that writes down the steps `call` takes.
    struct Logged {
        state: KeyUse<u32>,
        slot: u32,
        fail: bool,
        steps: Vec<&'static str>,
    }

    impl Storage for Logged {
        type Key = ();
        type Held = ();
        type Slot = u32;
        type Pending = Infallible;
        type Decided = Decision;
        type Bucket<'a> = Refill<'a>;
        type Quota<'a> = PeriodQuota<'a, Option<f64>>;
        type Tally<'a> = ();

        fn reconcile(&mut self, _: (), _: &mut Vec<Anomaly>) -> Result<CallReading, Error> {
            self.steps.push("reconcile");
            if self.fail {
                return Err(Error::KeyLimit { max_keys: 1 });
            }
            Ok(CallReading {
                monotonic_ms: 2_000.0,
                wall_ms: 5_000.0,
                timeline_ms: 2_000.0,
                deltas: CallDeltas {
                    monotonic_delta_ms: 1_000.0,
                    wall_delta_ms: 1_000.0,
                    credited_ms: 1_000.0,
                },
            })
        }

        fn move_period(&mut self, _: (), _: &CallReading, _: &mut Vec<Anomaly>) -> u32 {
            self.steps.push("period");
            self.slot
        }

        fn load(&mut self, _: (), _: Op, _: &CallReading, _: u32) -> ((), KeyUse<u32>, BucketOf) {
            self.steps.push("load");
            let bucket = BucketOf {
                capacity: 10.0,
                refill_per_second: 2.0,
            };
            ((), self.state, bucket)
        }

        fn parts<'a>(
            &'a mut self,
            _: (),
            state: &'a mut KeyUse<u32>,
            _: u64,
            _: &CallReading,
        ) -> Parts<Refill<'a>, PeriodQuota<'a, Option<f64>>, ()> {
            self.steps.push("parts");
            Parts {
                bucket: Refill::new(&mut state.tokens, 2.0),
                quota: Some(PeriodQuota::new(
                    &mut state.quota_used,
                    5,
                    Some(65_000.0),
                    5_000.0,
                )),
                tally: (),
            }
        }

        fn answer(&mut self, _: (), _: u64, outcome: Result<Decision, Infallible>) -> Decision {
            self.steps.push("answer");
            let Ok(decision) = outcome;
            decision
        }

        fn save(&mut self, _: (), state: &KeyUse<u32>, _: Op, _: &CallReading) {
            self.steps.push("save");
            self.state = *state;
        }
    }

    fn logged(slot: u32) -> Logged {
        Logged {
            state: KeyUse {
                tokens: 1.0,
                credited_at_ms: 1_000.0,
                quota_used: 4,
                period_slot: 7,
            },
            slot,
            fail: false,
            steps: Vec::new(),
        }
    }

    #[test]
    fn a_call_reconciles_moves_the_period_refreshes_then_decides_and_saves() {
        let mut storage = logged(7);
        let answer = call(&mut storage, (), Op::Consume(2), &mut Vec::new()).unwrap();
        assert_eq!(
            storage.steps,
            ["reconcile", "period", "load", "parts", "save", "answer"]
        );
        // Refreshed first (1 + 1 s at 2/s = 3 tokens), then 2 taken: 1 left, use 4 + 2 = 6 > 5.
        let Answer::Decided(decision) = answer else {
            panic!("a consume is decided")
        };
        assert!(!decision.allowed);
        assert_eq!(decision.retry_after_basis, Some(RetryBasis::WallPeriod));
        assert_eq!((storage.state.tokens, storage.state.quota_used), (3.0, 4));
        assert_eq!(storage.state.credited_at_ms, 2_000.0);
        // In a new period the use starts again at zero, and the call is admitted.
        let mut storage = logged(8);
        let answer = call(&mut storage, (), Op::Consume(2), &mut Vec::new()).unwrap();
        assert!(matches!(answer, Answer::Decided(decision) if decision.allowed));
        assert_eq!(
            (
                storage.state.tokens,
                storage.state.quota_used,
                storage.state.period_slot
            ),
            (1.0, 2, 8)
        );
    }

    #[test]
    fn a_refund_gives_back_up_to_capacity_and_down_to_zero_use_and_a_status_decides_nothing() {
        let mut storage = logged(7);
        call(&mut storage, (), Op::Refund(20), &mut Vec::new()).unwrap();
        assert_eq!((storage.state.tokens, storage.state.quota_used), (10.0, 0));
        let mut storage = logged(7);
        let answer = call(&mut storage, (), Op::Status, &mut Vec::new()).unwrap();
        assert_eq!(storage.steps, ["reconcile", "period", "load", "save"]);
        assert!(matches!(answer, Answer::Status(state) if state.tokens == 3.0));
    }

    #[test]
    fn a_reading_refused_ends_the_call_before_any_other_step() {
        let mut storage = logged(7);
        storage.fail = true;
        assert!(call(&mut storage, (), Op::Consume(1), &mut Vec::new()).is_err());
        assert_eq!(storage.steps, ["reconcile"]);
        assert_eq!(storage.state.tokens, 1.0);
    }
}
