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

use super::book::{Dropped, Entry, SideBook, StoreHold};
use super::terms::{GiveBack, ReserveAnswer, ReserveRequest, QUOTA_SHORT_MS};
use super::SharedDecision;
use crate::keyed::table::{Record, NO_PERIOD};
use crate::keyed::{slot_i32, KeyedLimiter, Target};

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
    /// The key's last background fetch came after its reservation ran out (a call waited for
    /// it): the next one is asked for lower down, when an eighth of what it would bring is left,
    /// so that each store call brings more. (A process whose event loop does not turn between
    /// calls, an awaited loop of covered calls, reads a fetch's answer only once a call waits.)
    pub late: bool,
    /// The fields every side book's entry has: in flight (no background refill is asked for
    /// meanwhile), last used (the monotonic reading of the key's last consume or refund), the
    /// store record's identity (a store call that finds another record, the store having lost
    /// its data, charges it with `reserved` again), and whether the store counts units as this
    /// process's.
    pub hold: StoreHold,
}

/// A shared limiter's reservations: its side book, with `share.leaseUnits` (`None`: 1% of the
/// key's limit, at least 1) beside.
pub type ShareBook = SideBook<Reservation>;

impl Dropped for Vec<GiveBack> {
    type GiveBack = GiveBack;
    fn keep(&mut self, give_back: GiveBack) {
        self.push(give_back);
    }
    fn is_empty(&self) -> bool {
        <[GiveBack]>::is_empty(self)
    }
}

impl Entry for Reservation {
    type Dropped = Vec<GiveBack>;
    type Terms = Option<u64>;
    fn hold(&self) -> &StoreHold {
        &self.hold
    }
    fn hold_mut(&mut self) -> &mut StoreHold {
        &mut self.hold
    }
    fn owes_word(&self, record: &Record) -> bool {
        self.holds(record.quota_used)
    }
}

impl Reservation {
    fn fresh(period_slot: i32, limit: u64, now_ms: f64) -> Reservation {
        Reservation {
            period_slot,
            reserved: 0,
            store_unreserved: limit,
            uncharged: 0,
            late: false,
            hold: StoreHold::fresh(now_ms),
        }
    }

    /// A reservation of an ended period starts over in `period_slot` (a store call under way
    /// stays under way).
    #[inline(always)]
    pub(in crate::keyed) fn follow(&mut self, period_slot: i32, limit: u64) {
        if self.period_slot != period_slot {
            let in_flight = self.hold.in_flight;
            *self = Reservation::fresh(period_slot, limit, self.hold.last_used_ms);
            self.hold.in_flight = in_flight;
        }
    }

    /// What decisions report: the store's unreserved at its last answer, less what it is owed,
    /// plus the units left here.
    pub(super) fn remaining(&self, admitted: u64) -> u64 {
        self.store_unreserved
            .saturating_sub(self.uncharged)
            .saturating_add(self.left(admitted))
    }

    /// Units reserved and not admitted.
    pub(super) fn left(&self, admitted: u64) -> u64 {
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
        let refill = !self.hold.in_flight && low;
        if refill {
            self.hold.in_flight = true;
            self.late = false;
        }
        refill
    }

    /// Whether letting go would send anything to the store (units, a charge, or that it holds
    /// nothing now).
    fn holds(&self, admitted: u64) -> bool {
        self.left(admitted) > 0 || self.uncharged > 0 || self.hold.store_holds
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
        self.share = Some(ShareBook::new(reservations, lease_units));
    }

    pub fn is_shared(&self) -> bool {
        self.share.is_some()
    }

    /// A held key's reservation (`None`: not shared, or no such record).
    pub fn reservation(&self, index: u32) -> Option<&Reservation> {
        self.share.as_ref()?.get(index)
    }

    /// The most units one store call reserves for a key of this limit.
    fn lease_for(&self, limit: u64) -> u64 {
        lease_units_for(self.share.as_ref().and_then(|book| book.terms), limit)
    }

    fn limit_of(&self, index: u32) -> Option<u64> {
        self.policy_of(Target::Held(index))
            .quota
            .map(|quota| quota.limit)
    }

    /// A new record's reservation (called by `hold`).
    pub(in crate::keyed) fn reservation_held(&mut self, index: u32) {
        let record = self.table.records[index as usize];
        let limit = self.limit_of(index).unwrap_or(0);
        let now_ms = self.reconciler.last_monotonic_ms;
        if let Some(book) = &mut self.share {
            book.held(index, Reservation::fresh(record.period_slot, limit, now_ms));
        }
    }

    /// A record about to be removed (called by `drop_record`): its unused units of the open
    /// period go back; its reservation leaves the book as the record leaves the table.
    pub(in crate::keyed) fn reservation_dropped(&mut self, index: u32) {
        if self.share.is_none() {
            return;
        }
        let give_back = self.release_reservation(index);
        if let Some(book) = &mut self.share {
            book.dropped(index, give_back);
        }
    }

    /// A consume or refund of a shared key: its reservation follows the record's period, and the
    /// key was used now.
    pub(in crate::keyed) fn reservation_used(&mut self, index: u32, monotonic_ms: f64) {
        self.sync_reservation(index);
        if let Some(book) = &mut self.share {
            book.entries[index as usize].hold.last_used_ms = monotonic_ms;
        }
    }

    /// A reservation of an ended period starts over in the record's period.
    pub(in crate::keyed) fn sync_reservation(&mut self, index: u32) {
        let record = self.table.records[index as usize];
        let limit = self.limit_of(index).unwrap_or(0);
        if let Some(book) = &mut self.share {
            book.entries[index as usize].follow(record.period_slot, limit);
        }
    }

    /// What the store had unreserved at the last answer plus the local reservation left (less
    /// the failOpen units it is owed).
    pub(in crate::keyed) fn shared_remaining(&self, index: u32) -> u64 {
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
        let reservation = &mut book.entries[index as usize];
        let told = std::mem::take(&mut reservation.hold.store_holds);
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
            record_id: reservation.hold.record_id,
        })
    }

    /// Right after the store answered, a call the reservation and the store together cannot
    /// cover, with units left here: they go back to the store first (another process may complete
    /// its call with them, as this one may with theirs), then the call asks the store for all of
    /// `n`. Without this, units split between processes (1 left in each, 2 wanted) would never be
    /// admitted by anyone.
    #[cold]
    pub(super) fn release_then_store(&mut self, index: u32, n: u64) -> SharedDecision {
        let give_back = self.release_reservation(index);
        if let Some(book) = &mut self.share {
            book.dropped.extend(give_back);
            book.in_flight(index);
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
    pub(super) fn next_reservation_due(&mut self, index: u32) -> bool {
        let record = &self.table.records[index as usize];
        let Some(quota) = self.policies[record.policy as usize].quota else {
            return false;
        };
        let Some(book) = self.share.as_mut() else {
            return false;
        };
        let lease = lease_units_for(book.terms, quota.limit);
        book.entries[index as usize].next_slice_due(record.quota_used, lease)
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
        let reservation = &mut book.entries[index as usize];
        if reservation.period_slot != open_slot {
            return None;
        }
        reservation.hold.in_flight = true;
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
        reservation.hold.store_holds |= held > 0;
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
            record_id: reservation.hold.record_id,
        })
    }

    /// A store answer for a held key's call made for `period_slot`: `answer.granted` units are
    /// now the key's, reserved in the record of identity `answer.record_id` (0: the store named
    /// none); an answer that leaves the key nothing marks it short ([`ReserveAnswer::leaves_short`])
    /// for [`QUOTA_SHORT_MS`] from `monotonic_ms` (on the limiter's timeline), one that leaves
    /// it units clears the mark. `false`: the key's reservation is of another period now, so the
    /// caller gives the units back.
    pub fn credit_reservation(
        &mut self,
        index: u32,
        period_slot: i32,
        answer: ReserveAnswer,
        monotonic_ms: f64,
    ) -> bool {
        self.sync_reservation(index);
        let timeline_ms = self.timeline_at(monotonic_ms);
        let Some(book) = self.share.as_mut() else {
            return false;
        };
        let Some(reservation) = book.call_ended(index) else {
            return false;
        };
        if reservation.period_slot != period_slot || period_slot == NO_PERIOD {
            return false;
        }
        reservation.reserved = reservation.reserved.saturating_add(answer.granted);
        reservation.store_unreserved = answer.unreserved;
        reservation.hold.store_holds |= answer.granted > 0;
        if answer.record_id != 0 {
            reservation.hold.record_id = answer.record_id;
        }
        if answer.leaves_short() {
            reservation.hold.mark_short(timeline_ms + QUOTA_SHORT_MS);
        } else {
            reservation.hold.clear_short();
        }
        true
    }

    /// A held key's store call failed: the key is no longer in flight, and the failOpen units
    /// it was to charge are owed again (if its period is still the reservation's).
    pub fn reservation_failed(&mut self, index: u32, period_slot: i32, charge: u64) {
        self.sync_reservation(index);
        if let Some(reservation) = self.share.as_mut().and_then(|book| book.call_ended(index)) {
            if reservation.period_slot == period_slot {
                reservation.uncharged = reservation.uncharged.saturating_add(charge);
            }
        }
    }

    /// Lets go of the unused units of every key not used since `now_ms - idle_ms` (every key
    /// with `idle_ms` 0, in flight or not, its short mark cleared too: the next call asks the
    /// store) and of the keys dropped since the last call; returns what goes back to the store.
    pub fn give_back_idle(&mut self, now_ms: f64, idle_ms: f64) -> Vec<GiveBack> {
        let mut give_backs = match &mut self.share {
            Some(book) => {
                if idle_ms <= 0.0 {
                    book.clear_short();
                }
                book.take_dropped()
            }
            None => return Vec::new(),
        };
        for index in 0..self.table.len() as u32 {
            let Some(reservation) = self.reservation(index) else {
                break;
            };
            let idle = idle_ms <= 0.0
                || (!reservation.hold.in_flight
                    && now_ms - reservation.hold.last_used_ms >= idle_ms);
            let admitted = self.table.records[index as usize].quota_used;
            if idle && reservation.holds(admitted) {
                give_backs.extend(self.release_reservation(index));
            }
        }
        give_backs
    }

    pub fn has_dropped_give_backs(&self) -> bool {
        self.share.as_ref().is_some_and(|book| book.has_dropped())
    }

    /// The give-backs of keys dropped or deleted since the last call.
    pub fn take_dropped_give_backs(&mut self) -> Vec<GiveBack> {
        self.share
            .as_mut()
            .map(|book| book.take_dropped())
            .unwrap_or_default()
    }

    /// Whether a key holds units it has not admitted (or give-backs wait): the idle timer is
    /// needed.
    pub fn holds_reservations(&self) -> bool {
        self.share
            .as_ref()
            .is_some_and(|book| book.owes_word(&self.table.records))
    }
}
