//! The share layer around the one decision ([`kernel::decide`]): a shared key's bucket, as the
//! keyed limiter chose its kind (its own, [`OwnBucket`], or its slice of the fleet's,
//! [`FleetSlice`]), and its reservation as its quota ([`ReservedQuota`]).

use std::marker::PhantomData;

use super::reservation::{Reservation, ShareBook};
use super::slice::{fleet_tokens_of, Slice, SliceBook};
use super::{ShareMode, SharedDecision, Step};
use crate::bucket::{refill_wait_ms, refilled};
use crate::kernel::{self, Bucket, CallReading, KeyUse, Parts, PeriodEnd, Refill};
use crate::keyed::policies::{Policy, SpecState};
use crate::keyed::storage::Layers;
use crate::keyed::KeyedLimiter;
use crate::limiter::Decision;
use crate::stats::Counters;

/// A shared consume, decided by the share layer (see [`Layers`]) on the key's bucket `K` (its
/// own, or its slice of the fleet's): a call its reservation or its slice does not cover goes as
/// `mode` says.
#[derive(Clone, Copy, Debug)]
pub(in crate::keyed) struct Shared<K> {
    mode: ShareMode,
    /// The key's slice covered the call (set by `parts`).
    covered: bool,
    bucket: PhantomData<K>,
}

impl<K> Shared<K> {
    pub(in crate::keyed) fn new(mode: ShareMode) -> Shared<K> {
        Shared {
            mode,
            covered: false,
            bucket: PhantomData,
        }
    }
}

/// A shared key's quota as the one decision sees it ([`kernel::Quota`]): the units admitted in
/// the period (the record's `quota_used`) against its reservation, under the call's [`ShareMode`].
/// A call the bucket admits that the reservation does not cover asks the store first, or (with
/// `failOpen`) is admitted beyond it, the units beyond owed to the store.
pub(in crate::keyed) struct ReservedQuota<'a> {
    reservation: &'a mut Reservation,
    admitted: &'a mut u64,
    /// The key's limit.
    limit: u64,
    mode: ShareMode,
    /// The key's period spec (`specs[spec]`), whose open period a refused call waits out from
    /// `wall_ms`: looked up only for a refused call.
    specs: &'a [SpecState],
    spec: u32,
    wall_ms: f64,
    /// The limiter's timeline, against which the key's short mark is read.
    timeline_ms: f64,
}

impl ReservedQuota<'_> {
    /// Whether a call its reservation does not cover is decided on the store's last answer:
    /// right after it (`AfterStore`), or a `Reserved` call while the key is short
    /// ([`is_short`](super::book::StoreHold::is_short)). Read only for such a call, so a
    /// covered one reads no mark.
    #[inline(always)]
    fn on_answer(&self) -> bool {
        match self.mode {
            ShareMode::AfterStore => true,
            ShareMode::Reserved => self.reservation.hold.is_short(self.timeline_ms),
            ShareMode::FailOpen => false,
        }
    }
}

impl kernel::Quota for ReservedQuota<'_> {
    type Pending = Step;

    /// Not known short: no more than this process's limit for the key, and covered or (decided
    /// on the store's last answer) no more than the reservation and the store together have.
    #[inline(always)]
    fn admits(&self, n: u64) -> bool {
        let short = n > self.limit
            || (n > self.reservation.left(*self.admitted)
                && self.on_answer()
                && self.remaining() < n);
        !short
    }

    /// Short on the store's last answer, with units left here (and `n` within the limit: a call
    /// over it is refused whatever the mode): they go back first
    /// ([`KeyedLimiter::release_then_store`]). Not covered (and not `failOpen`): the store is
    /// asked for what is lacking (a fetch already under way did not come in time).
    #[inline(always)]
    fn pending(&mut self, n: u64, admits: bool) -> Result<(), Step> {
        let left = self.reservation.left(*self.admitted);
        if !admits {
            if left > 0 && n <= self.limit {
                return Err(Step::ReleaseThenStore);
            }
            return Ok(());
        }
        if n > left && self.mode != ShareMode::FailOpen {
            let reservation = &mut *self.reservation;
            reservation.late |= reservation.hold.in_flight;
            reservation.hold.in_flight = true;
            return Err(Step::Store { lacking: n - left });
        }
        Ok(())
    }

    /// Admitted beyond the reservation (`failOpen`): the units beyond are owed to the store.
    #[inline(always)]
    fn take(&mut self, n: u64) {
        let left = self.reservation.left(*self.admitted);
        if n > left {
            let owed = n - left;
            self.reservation.reserved += owed;
            self.reservation.uncharged += owed;
        }
        *self.admitted += n;
    }

    #[inline(always)]
    fn remaining(&self) -> u64 {
        self.reservation.remaining(*self.admitted)
    }

    #[inline(always)]
    fn wait_ms(&self) -> f64 {
        (&self.specs[self.spec as usize].period).wait_ms(self.wall_ms)
    }
}

/// A shared key's bucket, as the share layer makes it for the one decision: the key's own
/// ([`OwnBucket`], a shared quota alone) or its slice of the fleet's ([`FleetSlice`]).
pub(in crate::keyed) trait SharedBucket {
    /// The key's slice of the fleet's bucket (else its own).
    const FLEET_SLICE: bool;
    type Bucket<'a>: kernel::Bucket<Pending = Step>;

    /// The key's bucket for the consume `call`, and whether its slice covers the call (then a
    /// background fetch may be due after it).
    fn bucket(call: KeyCall<'_>) -> (Self::Bucket<'_>, bool);
}

/// A shared consume as a key's bucket sees it: the limiter's slice book (a shared bucket's),
/// the key's policy, its record (its index, its `tokens`), the units asked for, the call's mode
/// and the limiter's timeline.
#[derive(Debug)]
pub(in crate::keyed) struct KeyCall<'a> {
    slices: &'a mut Option<SliceBook>,
    policy: &'a Policy,
    tokens: &'a mut f64,
    index: u32,
    n: u64,
    mode: ShareMode,
    timeline_ms: f64,
}

/// The key's own bucket, refilled here.
#[derive(Clone, Copy, Debug)]
pub(in crate::keyed) struct OwnBucket;

impl SharedBucket for OwnBucket {
    const FLEET_SLICE: bool = false;
    type Bucket<'a> = Refill<'a, Step>;

    #[inline(always)]
    fn bucket(call: KeyCall<'_>) -> (Refill<'_, Step>, bool) {
        (
            Refill::new(call.tokens, call.policy.refill_per_second),
            false,
        )
    }
}

/// The share layer around the one decision: the key's bucket (`K`) and its reservation as its
/// quota ([`ReservedQuota`], see [`reserved_quota`]). After the decision, the next reservation
/// is fetched in the background if this one runs low, and the next slice if the call was
/// covered and left it low.
impl<K: SharedBucket> Layers for Shared<K> {
    const FLEET_SLICE: Option<bool> = Some(K::FLEET_SLICE);
    type Pending = Step;
    type Decided = SharedDecision;
    type Bucket<'a>
        = K::Bucket<'a>
    where
        K: 'a;
    type Quota<'a>
        = ReservedQuota<'a>
    where
        K: 'a;

    #[inline(always)]
    fn parts<'a>(
        &'a mut self,
        table: &'a mut KeyedLimiter,
        index: u32,
        state: &'a mut KeyUse<i32>,
        n: u64,
        reading: &CallReading,
    ) -> Parts<K::Bucket<'a>, ReservedQuota<'a>, &'a mut Counters> {
        let KeyedLimiter {
            table: keys,
            policies,
            specs,
            counters,
            share,
            slices,
            timeline_ms,
            ..
        } = table;
        let policy = &policies[keys.records[index as usize].policy as usize];
        let KeyUse {
            tokens,
            quota_used,
            period_slot,
            ..
        } = state;
        let call = KeyCall {
            slices,
            policy,
            tokens,
            index,
            n,
            mode: self.mode,
            timeline_ms: *timeline_ms,
        };
        let (bucket, covered) = K::bucket(call);
        self.covered = covered;
        let quota = reserved_quota(
            share,
            specs,
            policy,
            index,
            quota_used,
            *period_slot,
            self.mode,
            reading,
        );
        Parts {
            bucket,
            quota,
            tally: counters,
        }
    }

    #[inline(always)]
    fn answer(
        &mut self,
        table: &mut KeyedLimiter,
        index: u32,
        n: u64,
        outcome: Result<Decision, Step>,
    ) -> SharedDecision {
        let answer = table.shared_answer(index, n, outcome);
        if self.covered {
            table.fetch_if_low(index, table.timeline_ms);
        }
        answer
    }
}

/// A shared key's reservation as the one decision's quota ([`ReservedQuota`]), `None` for a key
/// without a quota: the reservation follows the key's period (`period_slot`), and the key was
/// used now.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(in crate::keyed) fn reserved_quota<'a>(
    share: &'a mut Option<ShareBook>,
    specs: &'a [SpecState],
    policy: &Policy,
    index: u32,
    admitted: &'a mut u64,
    period_slot: i32,
    mode: ShareMode,
    reading: &CallReading,
) -> Option<ReservedQuota<'a>> {
    let (quota, book) = policy.quota.zip(share.as_mut())?;
    let reservation = &mut book.entries[index as usize];
    reservation.follow(period_slot, quota.limit);
    reservation.hold.last_used_ms = reading.monotonic_ms;
    Some(ReservedQuota {
        reservation,
        admitted,
        limit: quota.limit,
        mode,
        specs,
        spec: quota.spec,
        wall_ms: reading.wall_ms,
        timeline_ms: reading.timeline_ms,
    })
}

impl KeyedLimiter {
    /// What a shared consume answers: its decision (the next reservation fetched in the
    /// background if this one runs low), or the step its layers took instead.
    #[inline(always)]
    pub(in crate::keyed) fn shared_answer(
        &mut self,
        index: u32,
        n: u64,
        outcome: Result<Decision, Step>,
    ) -> SharedDecision {
        match outcome {
            Ok(decision) => SharedDecision::Decided {
                decision,
                refill: decision.allowed && self.next_reservation_due(index),
            },
            Err(Step::Store { lacking }) => SharedDecision::NeedsStore { lacking },
            Err(Step::ReleaseThenStore) => self.release_then_store(index, n),
            Err(Step::Slice) => SharedDecision::NeedsSlice,
        }
    }
}

/// A key's slice of the fleet's bucket (`share.bucket`), as the share layer's bucket
/// ([`SliceBucket`]).
#[derive(Clone, Copy, Debug)]
pub(in crate::keyed) struct FleetSlice;

impl SharedBucket for FleetSlice {
    const FLEET_SLICE: bool = true;
    type Bucket<'a> = SliceBucket<'a>;

    #[inline(always)]
    fn bucket(call: KeyCall<'_>) -> (SliceBucket<'_>, bool) {
        let KeyCall {
            slices,
            policy,
            tokens,
            index,
            n,
            mode,
            timeline_ms,
        } = call;
        let Some(book) = slices else {
            unreachable!("a shared bucket's limiter has a slice book")
        };
        // The slice's books: used now, busy or not, its demand; a covered call's spend.
        let lease_ms = book.terms.lease_ms;
        let slice = &mut book.entries[index as usize];
        slice.busy = timeline_ms - slice.hold.last_used_ms < lease_ms / 2.0;
        slice.hold.last_used_ms = timeline_ms;
        slice.demand += n as f64;
        let covered = *tokens >= n as i64 as f64 && timeline_ms < slice.lease_end_ms;
        let (mut outage, mut denied_here, mut fleet_wait_ms) = (None, false, 0.0);
        if covered {
            slice.spent_at_ms = timeline_ms;
        } else if mode == ShareMode::FailOpen {
            let (open, at) = slice.outage().unwrap_or((policy.capacity, timeline_ms));
            outage = Some(refilled(
                open,
                timeline_ms - at,
                policy.refill_per_second,
                policy.capacity,
            ));
        } else {
            denied_here = slice.hold.is_short(timeline_ms) || mode == ShareMode::AfterStore;
            if denied_here {
                let fleet = fleet_tokens_of(slice, policy, timeline_ms);
                // (A denial waits at least 1 ms, even when the estimate holds `n` already.)
                fleet_wait_ms = refill_wait_ms(fleet, n as f64, policy.refill_per_second).max(1.0);
            }
        }
        let bucket = SliceBucket {
            tokens,
            slice,
            covered,
            outage,
            denied_here,
            fleet_wait_ms,
            refill_per_second: policy.refill_per_second,
            timeline_ms,
        };
        (bucket, covered)
    }
}

/// A key's slice as the one decision sees it: its tokens when the slice covers the call (held
/// and within its lease); with failOpen, the outage bucket's in their place; when the key is
/// denied here (the store said the bucket was short, or the call comes right after a store
/// answer), the slice's with the fleet's wait (the time until the store's bucket, as last heard
/// of, holds `n`); else the call is not decided: the store is asked for a slice first
/// ([`Step::Slice`]).
pub(in crate::keyed) struct SliceBucket<'a> {
    /// The key's tokens (its slice's left).
    tokens: &'a mut f64,
    slice: &'a mut Slice,
    covered: bool,
    /// failOpen: the outage bucket's tokens, which decide in the slice's place (capacity `C`,
    /// refill `R`); what it admits is taken from the store's bucket at its next answer.
    outage: Option<f64>,
    /// Not covered: the call is denied here, with the fleet's wait.
    denied_here: bool,
    fleet_wait_ms: f64,
    refill_per_second: f64,
    timeline_ms: f64,
}

impl Bucket for SliceBucket<'_> {
    type Pending = Step;
    #[inline(always)]
    fn tokens(&mut self) -> &mut f64 {
        match &mut self.outage {
            Some(tokens) => tokens,
            None => self.tokens,
        }
    }
    #[inline(always)]
    fn pending(&mut self, _: u64) -> Result<(), Step> {
        if self.covered || self.outage.is_some() || self.denied_here {
            Ok(())
        } else {
            Err(Step::Slice)
        }
    }
    #[inline(always)]
    fn wait_ms(&self, wanted: f64) -> f64 {
        if self.denied_here {
            return self.fleet_wait_ms;
        }
        let tokens = self.outage.unwrap_or(*self.tokens);
        refill_wait_ms(tokens, wanted, self.refill_per_second)
    }
    #[inline(always)]
    fn decided(&mut self, n: u64, decision: &Decision) {
        // The call a take it spends at once was for: what it does not spend is no token the store
        // counts as out to this process, so it is never spent later.
        if std::mem::take(&mut self.slice.spend_pending) && !decision.allowed {
            *self.tokens = 0.0;
        }
        if let Some(tokens) = self.outage {
            self.slice.set_outage(Some((tokens, self.timeline_ms)));
            if decision.allowed {
                self.slice.owed = self.slice.owed.saturating_add(n);
            }
        }
    }
}
