//! The reservation book of a shared limiter (`share`): the quota of a key is counted in a store
//! that every process shares, and a process admits quota units only from what it reserved there.
//!
//! Per key, beside its record (a parallel vector, so the 72-byte records of limiters without
//! `share` are untouched): the period the reservation belongs to, the units reserved in it, what
//! the store had unreserved at the last answer, failOpen units admitted but not yet charged to
//! the store, whether a store call is under way, and when the key was last used.
//!
//! The record's `quota_used` counts the units admitted in the period, so the units left locally
//! are `reserved - quota_used`; a refund lowers `quota_used` and so returns units to the
//! reservation. Store calls are made by the JS face: this book says when one is needed
//! ([`SharedDecision::NeedsStore`], or a background refill), what to ask ([`ReserveRequest`]),
//! and takes the answers ([`KeyedLimiter::credit_reservation`]).

use super::policies::{Policy, SpecState};
use super::slices::{FleetSlice, SliceBook};
use super::storage::Layers;
use super::table::NO_PERIOD;
use super::{slot_i32, KeyBuf, KeyedLimiter, Target};
use crate::kernel::{self, CallReading, KeyUse, Parts, Refill};
use crate::limiter::Decision;
use crate::quota::OpenPeriod;
use crate::stats::Counters;
use std::marker::PhantomData;

/// One key's reservation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reservation {
    /// The period slot the reservation belongs to ([`NO_PERIOD`]: none).
    pub period_slot: i32,
    /// Units reserved from the store in that period and not given back, the admitted ones
    /// included (failOpen admissions count as reserved: they are owed to the store).
    pub reserved: u64,
    /// What the store had unreserved at its last answer for this period (the key's limit before
    /// any answer).
    pub store_unreserved: u64,
    /// Units admitted with `failOpen` and not yet added to the store's count.
    pub uncharged: u64,
    /// A store call for the key is under way: no background refill is asked for meanwhile.
    pub in_flight: bool,
    /// The key's last background fetch came after its reservation ran out (a call waited for
    /// it): the next one is asked for lower down, when an eighth of what it would bring is left,
    /// so that each store call brings more. (A process whose event loop does not turn between
    /// calls, an awaited loop of covered calls, reads a fetch's answer only once a call waits.)
    pub late: bool,
    /// The monotonic reading of the key's last consume or refund (idle give-back).
    pub last_used_ms: f64,
    /// The identity of the store record the reservation was made in, as its last answer said
    /// (0: none yet). A store call that finds another record (the store lost its data) charges
    /// it with `reserved` again.
    pub record_id: u64,
    /// The store may count units as held by this process for the key (a store call reported
    /// some): letting go of the key tells it 0 even when no unit goes back.
    pub store_holds: bool,
}

/// How a shared consume treats a call its reservation does not cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// Asks for a store call (nothing consumed).
    Reserved,
    /// Right after a store answer: denied with the quota wait when the reservation and the store
    /// together have fewer than `n`, else asks for another store call.
    AfterStore,
    /// The store is unavailable and `failOpen` is on: decided as if the quota had room; the units
    /// beyond the reservation are owed to the store.
    FailOpen,
}

/// A shared consume, decided by the share layer (see [`Layers`]) on the key's bucket `K` (its
/// own, or its slice of the fleet's): a call its reservation or its slice does not cover goes as
/// `mode` says.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shared<K> {
    mode: ShareMode,
    /// The key's slice covered the call (set by `parts`).
    covered: bool,
    bucket: PhantomData<K>,
}

impl<K> Shared<K> {
    fn new(mode: ShareMode) -> Shared<K> {
        Shared {
            mode,
            covered: false,
            bucket: PhantomData,
        }
    }
}

/// A shared consume's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum SharedDecision {
    /// `refill`: the reservation ran low and a background store call should fetch the next one
    /// (the key is marked in flight).
    Decided { decision: Decision, refill: bool },
    /// The reservation does not cover the call: nothing was consumed; a store call must reserve
    /// at least `lacking` more units (the key is marked in flight).
    NeedsStore { lacking: u64 },
    /// A shared bucket's slice here does not cover the call (`share.bucket`): nothing was
    /// consumed; the JS face makes (or joins) a store call that takes a slice.
    NeedsSlice,
}

/// What a shared consume does instead of a decision (nothing taken or counted).
pub(super) enum Step {
    /// The reservation does not cover the call: a store call reserves `lacking` more units.
    Store { lacking: u64 },
    /// The units left here go back to the store before the call asks it again
    /// (`KeyedLimiter::release_then_store`).
    ReleaseThenStore,
    /// The key's slice does not cover the call: a store call takes one (`slices.rs`).
    Slice,
}

/// A shared key's quota as the one decision sees it ([`kernel::Quota`]): the units admitted in
/// the period (the record's `quota_used`) against its reservation, under the call's [`ShareMode`].
/// A call the bucket admits that the reservation does not cover asks the store first, or (with
/// `failOpen`) is admitted beyond it, the units beyond owed to the store.
pub(super) struct ReservedQuota<'a> {
    reservation: &'a mut Reservation,
    admitted: &'a mut u64,
    /// The key's limit.
    limit: u64,
    mode: ShareMode,
    /// The open period, which a refused call waits out from `wall_ms`.
    ends: &'a OpenPeriod,
    wall_ms: f64,
}

impl kernel::Quota for ReservedQuota<'_> {
    type Pending = Step;

    /// Not known short: no more than this process's limit for the key, and (right after the
    /// store answered) covered or no more than the reservation and the store together have.
    #[inline(always)]
    fn admits(&self, n: u64) -> bool {
        let short = n > self.limit
            || (self.mode == ShareMode::AfterStore
                && n > self.reservation.left(*self.admitted)
                && self.remaining() < n);
        !short
    }

    /// Short right after the store answered, with units left here (and `n` within the limit):
    /// they go back first ([`KeyedLimiter::release_then_store`]). Not covered (and not
    /// `failOpen`): the store is asked for what is lacking (a fetch already under way did not come
    /// in time).
    #[inline(always)]
    fn pending(&mut self, n: u64, admits: bool) -> Result<(), Step> {
        let left = self.reservation.left(*self.admitted);
        if !admits {
            if self.mode == ShareMode::AfterStore && left > 0 && n <= self.limit {
                return Err(Step::ReleaseThenStore);
            }
            return Ok(());
        }
        if n > left && self.mode != ShareMode::FailOpen {
            let reservation = &mut *self.reservation;
            reservation.late |= reservation.in_flight;
            reservation.in_flight = true;
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
        self.ends.wait_ms(self.wall_ms)
    }
}

/// What a store call for a key asks (the store protocol's `reserve` arguments, with the name
/// added by the JS face).
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveRequest {
    /// Identifies the period in the answer ([`KeyedLimiter::credit_reservation`]).
    pub period_slot: i32,
    pub period_id: String,
    pub period_end_ms: f64,
    pub limit: u64,
    pub lease_units: u64,
    pub lacking: u64,
    /// FailOpen units to add to the store's count; the book has let go of them (a failed call
    /// hands them back through [`KeyedLimiter::reservation_failed`]).
    pub charge: u64,
    /// Units the key holds reserved and not admitted, as the call is made (the store records
    /// them, plus what it grants, as this process's `held`).
    pub held: u64,
    /// Units this process reserved in the period and did not give back, less `charge`: what a
    /// record found gone or remade is charged with again.
    pub owned: u64,
    /// The identity of the record the key's reservation was made in (0: none yet).
    pub record_id: u64,
}

/// Units to return to the store for one key's period (`units`), and failOpen units still to be
/// added to its count (`charge`, what the returned units could not cancel out).
#[derive(Clone, Debug, PartialEq)]
pub struct GiveBack {
    pub key: KeyBuf,
    pub period_id: String,
    /// The period's end (when the store's record may expire).
    pub period_end_ms: f64,
    pub units: u64,
    pub charge: u64,
    /// The identity of the record the units were reserved in (0: none known): a record of
    /// another identity never takes them back.
    pub record_id: u64,
}

#[derive(Debug)]
pub struct ShareBook {
    /// One per record, in the records' order.
    reservations: Vec<Reservation>,
    /// `share.leaseUnits`; `None`: 1% of the key's limit, at least 1.
    lease_units: Option<u64>,
    /// Give-backs of keys dropped or deleted, for the JS face to send.
    dropped: Vec<GiveBack>,
}

impl Reservation {
    fn fresh(period_slot: i32, limit: u64, now_ms: f64) -> Reservation {
        Reservation {
            period_slot,
            reserved: 0,
            store_unreserved: limit,
            uncharged: 0,
            in_flight: false,
            late: false,
            last_used_ms: now_ms,
            record_id: 0,
            store_holds: false,
        }
    }

    /// What decisions report: the store's unreserved at its last answer, less what it is owed,
    /// plus the units left here.
    fn remaining(&self, admitted: u64) -> u64 {
        self.store_unreserved
            .saturating_sub(self.uncharged)
            .saturating_add(self.left(admitted))
    }

    /// Units reserved and not admitted.
    fn left(&self, admitted: u64) -> u64 {
        self.reserved.saturating_sub(admitted)
    }

    /// Lets go of the units left and of the failOpen units owed: returns the units the store
    /// gets back and the units it is still to be charged (the two netted against each other).
    fn release(&mut self, admitted: u64) -> (u64, u64) {
        let left = self.left(admitted);
        let netted = left.min(self.uncharged);
        let (units, charge) = (left - netted, self.uncharged - netted);
        self.uncharged = 0;
        self.reserved -= left;
        (units, charge)
    }

    /// After an admission: whether the next slice is to be fetched now (then the key is marked
    /// in flight). Before this one runs out: below half of what the next store call would bring
    /// (a lease, or an eighth of what the store had unreserved, whichever is less), or below half
    /// a lease when failOpen units are owed to the store; below an eighth of it when the last
    /// fetch came too late (`late`).
    #[inline(always)]
    fn next_slice_due(&mut self, admitted: u64, lease: u64) -> bool {
        let next_grant = if self.uncharged > 0 {
            lease
        } else {
            lease.min(self.store_unreserved.div_ceil(8))
        };
        let low = self
            .left(admitted)
            .saturating_mul(if self.late { 8 } else { 2 })
            < next_grant;
        let refill = !self.in_flight && low;
        if refill {
            self.in_flight = true;
            self.late = false;
        }
        refill
    }

    /// Whether letting go would send anything to the store (units, a charge, or that it holds
    /// nothing now).
    fn holds(&self, admitted: u64) -> bool {
        self.left(admitted) > 0 || self.uncharged > 0 || self.store_holds
    }
}

/// The most units one store call reserves for a key of quota `limit`: `share.leaseUnits`, or
/// (none given) 1% of the limit, at least 1.
#[inline(always)]
fn lease_units_for(lease_units: Option<u64>, limit: u64) -> u64 {
    lease_units.unwrap_or((limit / 100).max(1))
}

impl KeyedLimiter {
    /// Makes this a shared limiter (before any call; a restored key's quota use is dropped, as
    /// the store holds it).
    pub fn enable_share(&mut self, lease_units: Option<u64>) {
        let now_ms = self.reconciler.last_monotonic_ms;
        let mut reservations = Vec::with_capacity(self.table.len());
        for record in &mut self.table.records {
            record.quota_used = 0;
            let limit = self.policies[record.policy as usize]
                .quota
                .map_or(0, |quota| quota.limit);
            reservations.push(Reservation::fresh(record.period_slot, limit, now_ms));
        }
        self.share = Some(ShareBook {
            reservations,
            lease_units,
            dropped: Vec::new(),
        });
    }

    pub fn is_shared(&self) -> bool {
        self.share.is_some()
    }

    /// A held key's reservation (`None`: not shared, or no such record).
    pub fn reservation(&self, index: u32) -> Option<&Reservation> {
        self.share.as_ref()?.reservations.get(index as usize)
    }

    /// The most units one store call reserves for a key of this limit.
    fn lease_for(&self, limit: u64) -> u64 {
        lease_units_for(self.share.as_ref().and_then(|book| book.lease_units), limit)
    }

    fn limit_of(&self, index: u32) -> Option<u64> {
        self.policy_of(Target::Held(index))
            .quota
            .map(|quota| quota.limit)
    }

    /// A held key's limit changed from `old` to `new` (SPEC §18): the store's room as last heard
    /// of moves with it, until the key's next store call (which sends the new limit) says.
    pub(super) fn reservation_limit_changed(&mut self, index: u32, old: u64, new: u64) {
        if let Some(reservation) = self
            .share
            .as_mut()
            .and_then(|book| book.reservations.get_mut(index as usize))
        {
            let room = i128::from(reservation.store_unreserved) + i128::from(new) - i128::from(old);
            reservation.store_unreserved = room.clamp(0, i128::from(u64::MAX)) as u64;
        }
    }

    /// A new record's reservation (called by `hold`).
    pub(super) fn reservation_held(&mut self, index: u32) {
        let record = self.table.records[index as usize];
        let limit = self.limit_of(index).unwrap_or(0);
        let now_ms = self.reconciler.last_monotonic_ms;
        if let Some(book) = &mut self.share {
            debug_assert_eq!(book.reservations.len(), index as usize);
            book.reservations
                .push(Reservation::fresh(record.period_slot, limit, now_ms));
        }
    }

    /// A record about to be removed (called by `drop_record`): its unused units of the open
    /// period go back; its reservation leaves the book as the record leaves the table.
    pub(super) fn reservation_dropped(&mut self, index: u32) {
        if self.share.is_none() {
            return;
        }
        let give_back = self.release_reservation(index);
        if let Some(book) = &mut self.share {
            book.reservations.swap_remove(index as usize);
            book.dropped.extend(give_back);
        }
    }

    /// A consume or refund of a shared key: its reservation follows the record's period, and the
    /// key was used now.
    pub(super) fn reservation_used(&mut self, index: u32, monotonic_ms: f64) {
        self.sync_reservation(index);
        if let Some(book) = &mut self.share {
            book.reservations[index as usize].last_used_ms = monotonic_ms;
        }
    }

    /// A reservation of an ended period starts over in the record's period.
    pub(super) fn sync_reservation(&mut self, index: u32) {
        let record = self.table.records[index as usize];
        let limit = self.limit_of(index).unwrap_or(0);
        if let Some(book) = &mut self.share {
            let reservation = &mut book.reservations[index as usize];
            if reservation.period_slot != record.period_slot {
                *reservation = Reservation {
                    in_flight: reservation.in_flight,
                    ..Reservation::fresh(record.period_slot, limit, reservation.last_used_ms)
                };
            }
        }
    }

    /// What the store had unreserved at the last answer plus the local reservation left (less
    /// the failOpen units it is owed).
    pub(super) fn shared_remaining(&self, index: u32) -> u64 {
        let admitted = self.table.records[index as usize].quota_used;
        self.reservation(index)
            .map_or(0, |reservation| reservation.remaining(admitted))
    }

    /// The open period's id of a record's spec, when the reservation belongs to it.
    fn open_period_of(&self, index: u32) -> Option<(i32, &crate::calendar::Period)> {
        let quota = self.policy_of(Target::Held(index)).quota?;
        let open = self.specs[quota.spec as usize].period.open.as_ref()?;
        Some((slot_i32(Some(open.slot)), open))
    }

    /// Lets go of a key's unused units if they belong to its spec's open period.
    fn release_reservation(&mut self, index: u32) -> Option<GiveBack> {
        let (open_slot, period_id, period_end_ms) = self
            .open_period_of(index)
            .map(|(slot, open)| (slot, open.id.clone(), open.end_ms))?;
        let record = self.table.records[index as usize];
        let key = self.table.key_of(index).to_buf();
        let book = self.share.as_mut()?;
        let reservation = &mut book.reservations[index as usize];
        let told = std::mem::take(&mut reservation.store_holds);
        if reservation.period_slot != open_slot || record.period_slot != open_slot {
            // (An ended period's record needs no word about what this process holds.)
            return None;
        }
        let (units, charge) = reservation.release(record.quota_used);
        (units > 0 || charge > 0 || told).then_some(GiveBack {
            key,
            period_id,
            period_end_ms,
            units,
            charge,
            record_id: reservation.record_id,
        })
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
        if self.slices.is_some() {
            let layers = Shared::<FleetSlice>::new(mode);
            return self.call_quiet(index, n, monotonic_ms, wall_ms, layers);
        }
        let layers = Shared::<OwnBucket>::new(mode);
        self.call_quiet(index, n, monotonic_ms, wall_ms, layers)
    }

    /// A shared consume on readings from `clock` (any key, any readings).
    pub fn consume_shared<C: crate::clock::ClockSource + ?Sized>(
        &mut self,
        key: super::Key<'_>,
        target: Target,
        n: u64,
        mode: ShareMode,
        clock: &mut C,
        anomalies: &mut Vec<crate::anomaly::Anomaly>,
    ) -> Result<SharedDecision, crate::error::Error> {
        if self.slices.is_some() {
            let layers = Shared::<FleetSlice>::new(mode);
            return self.consume_with(key, target, n, layers, clock, anomalies);
        }
        let layers = Shared::<OwnBucket>::new(mode);
        self.consume_with(key, target, n, layers, clock, anomalies)
    }

    /// Right after the store answered, a call the reservation and the store together cannot
    /// cover, with units left here: they go back to the store first (another process may complete
    /// its call with them, as this one may with theirs), then the call asks the store for all of
    /// `n`. Without this, units split between processes (1 left in each, 2 wanted) would never be
    /// admitted by anyone.
    #[cold]
    fn release_then_store(&mut self, index: u32, n: u64) -> SharedDecision {
        if let Some(give_back) = self.release_reservation(index) {
            if let Some(book) = &mut self.share {
                book.dropped.push(give_back);
            }
        }
        if let Some(book) = &mut self.share {
            book.reservations[index as usize].in_flight = true;
        }
        let admitted = self.table.records[index as usize].quota_used;
        let left = self
            .reservation(index)
            .map_or(0, |reservation| reservation.left(admitted));
        SharedDecision::NeedsStore {
            lacking: n.saturating_sub(left).max(1),
        }
    }

    /// After an admission: whether the key's reservation runs low, so that the next one is
    /// fetched in the background (the key is then marked in flight).
    #[inline(always)]
    fn next_reservation_due(&mut self, index: u32) -> bool {
        let record = &self.table.records[index as usize];
        let Some(quota) = self.policies[record.policy as usize].quota else {
            return false;
        };
        let Some(book) = self.share.as_mut() else {
            return false;
        };
        let lease = lease_units_for(book.lease_units, quota.limit);
        book.reservations[index as usize].next_slice_due(record.quota_used, lease)
    }

    /// What a store call for a held key should ask: `lacking` units at least (0 for a background
    /// refill), or what the calls waiting for the key lack together (`demand` units asked for by
    /// them, less the units left here), as far as the store had that many unreserved at its last
    /// answer. Takes the key's failOpen units as the call's charge and marks it in flight.
    /// `None`: the key has no quota or its spec has no open period.
    pub fn reserve_request(
        &mut self,
        index: u32,
        lacking: u64,
        demand: u64,
    ) -> Option<ReserveRequest> {
        self.share.as_ref()?;
        self.sync_reservation(index);
        let limit = self.limit_of(index)?;
        let lease = self.lease_for(limit);
        let (open_slot, period_id, period_end_ms) = self
            .open_period_of(index)
            .map(|(slot, open)| (slot, open.id.clone(), open.end_ms))?;
        let book = self.share.as_mut()?;
        let reservation = &mut book.reservations[index as usize];
        if reservation.period_slot != open_slot {
            return None;
        }
        reservation.in_flight = true;
        let admitted = self.table.records[index as usize].quota_used;
        // What the key holds unadmitted stays within one lease (what a process that dies strands),
        // the units that waiting calls take at once aside.
        let lease_units = lease.saturating_sub(reservation.left(admitted));
        let together = demand
            .saturating_sub(reservation.left(admitted))
            .min(reservation.store_unreserved);
        let lacking = lacking.max(together);
        let charge = std::mem::take(&mut reservation.uncharged);
        let held = reservation.left(admitted);
        reservation.store_holds |= held > 0;
        Some(ReserveRequest {
            period_slot: open_slot,
            period_id,
            period_end_ms,
            limit,
            lease_units,
            lacking,
            charge,
            held,
            owned: reservation.reserved.saturating_sub(charge),
            record_id: reservation.record_id,
        })
    }

    /// A store answer for a held key's call made for `period_slot`: `granted` units are now the
    /// key's, reserved in the record of identity `record_id` (0: the store named none). `false`:
    /// the key's reservation is of another period now, so the caller gives the units back.
    pub fn credit_reservation(
        &mut self,
        index: u32,
        period_slot: i32,
        granted: u64,
        unreserved: u64,
        record_id: u64,
    ) -> bool {
        self.sync_reservation(index);
        let Some(book) = self.share.as_mut() else {
            return false;
        };
        let Some(reservation) = book.reservations.get_mut(index as usize) else {
            return false;
        };
        reservation.in_flight = false;
        if reservation.period_slot != period_slot || period_slot == NO_PERIOD {
            return false;
        }
        reservation.reserved = reservation.reserved.saturating_add(granted);
        reservation.store_unreserved = unreserved;
        reservation.store_holds |= granted > 0;
        if record_id != 0 {
            reservation.record_id = record_id;
        }
        true
    }

    /// A held key's store call failed: the key is no longer in flight, and the failOpen units
    /// it was to charge are owed again (if its period is still the reservation's).
    pub fn reservation_failed(&mut self, index: u32, period_slot: i32, charge: u64) {
        self.sync_reservation(index);
        if let Some(reservation) = self
            .share
            .as_mut()
            .and_then(|book| book.reservations.get_mut(index as usize))
        {
            reservation.in_flight = false;
            if reservation.period_slot == period_slot {
                reservation.uncharged = reservation.uncharged.saturating_add(charge);
            }
        }
    }

    /// Lets go of the unused units of every key not used since `now_ms - idle_ms` (every key
    /// with `idle_ms` 0, in flight or not) and of the keys dropped since the last call; returns
    /// what goes back to the store.
    pub fn give_back_idle(&mut self, now_ms: f64, idle_ms: f64) -> Vec<GiveBack> {
        let mut give_backs = match &mut self.share {
            Some(book) => std::mem::take(&mut book.dropped),
            None => return Vec::new(),
        };
        for index in 0..self.table.len() as u32 {
            let Some(reservation) = self.reservation(index) else {
                break;
            };
            let idle = idle_ms <= 0.0
                || (!reservation.in_flight && now_ms - reservation.last_used_ms >= idle_ms);
            let admitted = self.table.records[index as usize].quota_used;
            if idle && reservation.holds(admitted) {
                give_backs.extend(self.release_reservation(index));
            }
        }
        give_backs
    }

    pub fn has_dropped_give_backs(&self) -> bool {
        self.share
            .as_ref()
            .is_some_and(|book| !book.dropped.is_empty())
    }

    /// The give-backs of keys dropped or deleted since the last call.
    pub fn take_dropped_give_backs(&mut self) -> Vec<GiveBack> {
        self.share
            .as_mut()
            .map(|book| std::mem::take(&mut book.dropped))
            .unwrap_or_default()
    }

    /// Whether a key holds units it has not admitted (or give-backs wait): the idle timer is
    /// needed.
    pub fn holds_reservations(&self) -> bool {
        let Some(book) = &self.share else {
            return false;
        };
        !book.dropped.is_empty()
            || book
                .reservations
                .iter()
                .zip(&self.table.records)
                .any(|(reservation, record)| reservation.holds(record.quota_used))
    }
}

/// A shared key's bucket, as the share layer makes it for the one decision: the key's own
/// ([`OwnBucket`], a shared quota alone) or its slice of the fleet's (`FleetSlice`, `slices.rs`).
pub(super) trait SharedBucket {
    type Bucket<'a>: kernel::Bucket<Pending = Step>;

    /// The key's bucket over its record's `tokens` for a consume of `n`, and whether its slice
    /// covers the call (then a background fetch may be due after it).
    #[allow(clippy::too_many_arguments)]
    fn bucket<'a>(
        slices: &'a mut Option<SliceBook>,
        index: u32,
        policy: &Policy,
        tokens: &'a mut f64,
        n: u64,
        mode: ShareMode,
        timeline_ms: f64,
    ) -> (Self::Bucket<'a>, bool);
}

/// The key's own bucket, refilled here.
#[derive(Clone, Copy, Debug)]
pub(super) struct OwnBucket;

impl SharedBucket for OwnBucket {
    type Bucket<'a> = Refill<'a, Step>;

    #[inline(always)]
    fn bucket<'a>(
        _: &'a mut Option<SliceBook>,
        _: u32,
        policy: &Policy,
        tokens: &'a mut f64,
        _: u64,
        _: ShareMode,
        _: f64,
    ) -> (Refill<'a, Step>, bool) {
        (Refill::new(tokens, policy.refill_per_second), false)
    }
}

/// The share layer around the one decision: the key's bucket (`K`) and its reservation as its
/// quota ([`ReservedQuota`], see [`reserved_quota`]). After the decision, the next reservation
/// is fetched in the background if this one runs low, and the next slice if the call was
/// covered and left it low.
impl<K: SharedBucket> Layers for Shared<K> {
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
        let (bucket, covered) =
            K::bucket(slices, index, policy, tokens, n, self.mode, *timeline_ms);
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
pub(super) fn reserved_quota<'a>(
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
    let reservation = &mut book.reservations[index as usize];
    if reservation.period_slot != period_slot {
        *reservation = Reservation {
            in_flight: reservation.in_flight,
            ..Reservation::fresh(period_slot, quota.limit, reading.monotonic_ms)
        };
    }
    reservation.last_used_ms = reading.monotonic_ms;
    Some(ReservedQuota {
        reservation,
        admitted,
        limit: quota.limit,
        mode,
        ends: &specs[quota.spec as usize].period,
        wall_ms: reading.wall_ms,
    })
}

impl KeyedLimiter {
    /// What a shared consume answers: its decision (the next reservation fetched in the
    /// background if this one runs low), or the step its layers took instead.
    #[inline(always)]
    pub(super) fn shared_answer(
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

#[cfg(test)]
pub(super) mod tests;
