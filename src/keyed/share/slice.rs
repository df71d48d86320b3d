//! The slice book of a limiter whose buckets are one bucket for the whole fleet (`share.bucket`):
//! a key's bucket (capacity `C`, refill `R`) lives in the store, refilled there by the
//! fleet clock, and this process decides from a *slice* of its tokens that it took by one store
//! call (docs: "one rate for the fleet").
//!
//! A slice is a reservation, as a shared quota's units are: the record's `tokens` are the slice's
//! tokens left, refreshed with the policy's capacity and no refill (the store refills, never this
//! process), and they are spendable only while the slice's lease holds (`leaseMs` on the
//! limiter's timeline from the send of the store call that took or last renewed it). The one
//! decision ([`kernel::decide`](crate::kernel::decide)) decides on them like on any bucket; this
//! book only says, before it, whether a call the slice does not cover asks the store
//! ([`SharedDecision::NeedsSlice`]) or is denied here with the fleet's wait (the store said the
//! bucket was short, at most a second ago), and sizes what a store call takes.
//!
//! Per key, beside its record (a parallel vector, like the share book's reservations): the lease,
//! a store call under way, when the key stops being denied locally, what the store's bucket held
//! at its last answer (`fleetTokens`), the fleet clock's reading and the send time of the last
//! answered call (the next call's fleet-clock proposal), the record's identity, the failOpen
//! outage bucket and the units it admitted, owed to the store.
//!
//! Store calls are the JS face's: this book says what to send ([`SliceRequest`]) and takes the
//! answers ([`KeyedLimiter::credit_slice`]). Times the JS face passes back (`sent_ms`) are the
//! timeline estimates this book gave it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::book::{Dropped, Entry, SideBook, StoreHold};
use super::terms::{
    bucket_kept_ms, denial_floor_ms, More, SliceRequest, CLOCK_RATE_SLACK, SPENT_MS_MAX,
};
use crate::anomaly::Anomaly;
use crate::bucket::refilled;
use crate::kernel::{BucketOf, KeyUse};
use crate::keyed::policies::Policy;
use crate::keyed::table::Record;
use crate::keyed::{refresh_record, KeyBuf, KeyedLimiter};

/// [`Slice::all_most`] of a call that does not take all there is.
pub const NOT_ALL: u32 = u32::MAX;

/// One key's slice; its tokens left are the record's `tokens`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// The timeline when the lease ends: the last answered call's send time plus `leaseMs`.
    pub lease_end_ms: f64,
    /// The store's tokens at its last answer (may be below zero after a failOpen charge), and
    /// the timeline when that answer came (-inf: none yet).
    pub fleet_tokens: f64,
    pub fleet_at_ms: f64,
    /// The fleet clock at the last answered call, and that call's send time on the timeline
    /// (`fleet_ms` < 0: no answered call yet).
    pub fleet_ms: f64,
    pub fleet_sent_ms: f64,
    /// The timeline of the last consume the slice covered: the slice held unspent tokens until
    /// then, so the store's refill counts it as out until then (the request's `spent_ms`).
    pub spent_at_ms: f64,
    /// The size of the last slice taken (a background fetch is due below half of it).
    pub last_granted: u32,
    /// The fields every side book's entry has: in flight, last used (the timeline of the key's
    /// last consume), the store record's identity, and whether the store may count tokens out
    /// to this process for the key.
    pub hold: StoreHold,
    /// Unspent tokens still to give back: of a slice whose lease lapsed, or of one let go while
    /// the key was dropped, or carried by a store call that failed.
    pub give: f64,
    /// Units admitted with failOpen, to take from the store's bucket at the next answer.
    pub owed: u64,
    /// Whether the store needs this process to take all it can (after a short answer).
    pub waited: bool,
    /// The key was used shortly before its last consume (within `leaseMs / 2`): a busy key,
    /// whose store calls take a fair share beyond what they lack. A key used now and then takes
    /// only what its call lacks, spends it, and so has nothing to give back: one store call a
    /// request, not two.
    pub busy: bool,
    /// The key is in the give-back queue ([`SliceTerms::due`]).
    pub queued: bool,
    /// The last store answer was a take the asking call spends at once, which the store does
    /// not record: the next decision drops what it does not spend.
    pub spend_pending: bool,
    /// The store's bucket was short at the last answer and this process took at least three
    /// quarters of its capacity: once the slice is spent, the store hears of it at once, in the
    /// background (a large slice counted as out would cap the store's refill, and an operator's
    /// `fill` would count it as still out).
    pub report_spent: bool,
    /// Units this key's consumes asked for since `demand_since_ms` (its demand rate, which sizes
    /// what it takes after waiting out a saturated bucket).
    pub demand: f64,
    pub demand_since_ms: f64,
    /// The call under way asks for tokens (not a report or a give-back): its answer may find the
    /// bucket short.
    pub asking: bool,
    /// The call under way is this process's first for the key ([`More::Nothing`]): what it
    /// brings is spent by the call that asked, and no background fetch follows (a key first
    /// seen costs one store call).
    pub first: bool,
    /// The call under way takes all there is up to this `most` (0: no limit, saturating at
    /// `u32::MAX - 1`; [`NOT_ALL`]: it does not take all): an answer that leaves tokens short of
    /// that left them to the processes that found the bucket short lately, and this one is short
    /// too.
    pub all_most: u32,
    /// The failOpen outage bucket (capacity `C`, refill `R`): its tokens as last decided on, and
    /// the timeline then (-inf: none). Two numbers rather than an `Option`, which would cost the
    /// slice 8 bytes more ([`Slice::outage`]).
    pub outage_tokens: f64,
    pub outage_at_ms: f64,
}

impl Slice {
    fn fresh(now_ms: f64) -> Slice {
        Slice {
            lease_end_ms: f64::NEG_INFINITY,
            fleet_tokens: 0.0,
            fleet_at_ms: f64::NEG_INFINITY,
            fleet_ms: -1.0,
            fleet_sent_ms: f64::NEG_INFINITY,
            spent_at_ms: f64::NEG_INFINITY,
            last_granted: 0,
            hold: StoreHold::fresh(now_ms),
            give: 0.0,
            owed: 0,
            waited: false,
            busy: false,
            queued: false,
            spend_pending: false,
            report_spent: false,
            demand: 0.0,
            demand_since_ms: now_ms,
            asking: false,
            first: false,
            all_most: NOT_ALL,
            outage_tokens: 0.0,
            outage_at_ms: f64::NEG_INFINITY,
        }
    }

    /// Whether the store must hear from this process about the key: unspent tokens, tokens to
    /// give back, failOpen units owed. (A slice spent to the last token needs no word: the
    /// store writes it off as spent once its lease has lapsed, and a key first seen costs one
    /// store call, not two.)
    /// The failOpen outage bucket `(tokens, at_ms)`, if there is one.
    pub fn outage(&self) -> Option<(f64, f64)> {
        (self.outage_at_ms != f64::NEG_INFINITY).then_some((self.outage_tokens, self.outage_at_ms))
    }

    pub(super) fn set_outage(&mut self, outage: Option<(f64, f64)>) {
        (self.outage_tokens, self.outage_at_ms) = outage.unwrap_or((0.0, f64::NEG_INFINITY));
    }

    fn holds(&self, tokens: f64) -> bool {
        tokens > 0.0 || self.give > 0.0 || self.owed > 0
    }
}

/// The last store answer's times, on the timeline (the store-clock check).
#[derive(Clone, Copy, Debug, PartialEq)]
struct StoreAnchor {
    sent_ms: f64,
    received_ms: f64,
    store_now_ms: f64,
}

/// A limiter's slices of the fleet's buckets: its side book, with `share.leaseMs`, the last
/// store answer's times and whether a background fetch is due beside.
pub type SliceBook = SideBook<Slice>;

#[derive(Debug)]
pub struct SliceTerms {
    /// `share.leaseMs`.
    pub(super) lease_ms: f64,
    anchor: Option<StoreAnchor>,
    /// A covered consume left its key's slice low: the JS face asks for the background fetch.
    pub(super) fetch_due: bool,
    /// The keys that may have a give-back or a report due, by the timeline (whole ms) from when
    /// to look at them: the idle give-backs take time in proportion to what is due, not to the
    /// keys held. A key is queued when a store answer or a failed call leaves it something to give
    /// back or report, and queued again for later while it is not yet idle.
    pub(super) due: BinaryHeap<Reverse<(i64, u32)>>,
}

impl SliceTerms {
    /// Queues the key of `index` (its `slice`) to be looked at from `at_ms`, unless it is queued.
    pub(super) fn queue(&mut self, slice: &mut Slice, index: u32, at_ms: f64) {
        if !slice.queued {
            slice.queued = true;
            self.due.push(Reverse((at_ms.ceil() as i64, index)));
        }
    }
}

/// Give-backs of keys dropped or deleted, by key (a key held again before they are sent takes its
/// own back into its next call).
impl Dropped for HashMap<KeyBuf, SliceRequest> {
    type GiveBack = SliceRequest;
    fn keep(&mut self, give_back: SliceRequest) {
        self.insert(give_back.key.clone(), give_back);
    }
    fn is_empty(&self) -> bool {
        HashMap::is_empty(self)
    }
}

impl Entry for Slice {
    type Dropped = HashMap<KeyBuf, SliceRequest>;
    type Terms = SliceTerms;
    fn hold(&self) -> &StoreHold {
        &self.hold
    }
    fn hold_mut(&mut self) -> &mut StoreHold {
        &mut self.hold
    }
    fn owes_word(&self, record: &Record) -> bool {
        self.holds(record.tokens) || reports_when_quiet(self)
    }
}

impl KeyedLimiter {
    /// Shares every key's bucket through the store with slices on leases of `lease_ms` (before
    /// any call; a restored key's tokens are dropped, as its bucket is the store's).
    pub fn enable_slices(&mut self, lease_ms: f64) {
        let now_ms = self.timeline_ms;
        let mut slices = Vec::with_capacity(self.table.len());
        for record in &mut self.table.records {
            record.tokens = 0.0;
            slices.push(Slice::fresh(now_ms));
        }
        self.slices = Some(SliceBook::new(
            slices,
            SliceTerms {
                lease_ms,
                anchor: None,
                fetch_due: false,
                due: BinaryHeap::new(),
            },
        ));
    }

    pub fn has_slices(&self) -> bool {
        self.slices.is_some()
    }

    /// A held key's slice (`None`: no shared bucket, or no such record).
    pub fn slice(&self, index: u32) -> Option<&Slice> {
        self.slices.as_ref()?.get(index)
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

    /// A new record's slice (called by `hold`): none, and so no tokens; a give-back of the key
    /// still waiting (it was dropped) goes with its next call.
    pub(in crate::keyed) fn slice_held(&mut self, index: u32) {
        let now_ms = self.timeline_ms;
        let key = self.table.key_of(index).to_buf();
        if let Some(book) = &mut self.slices {
            let mut slice = Slice::fresh(now_ms);
            if let Some(left) = book.dropped.remove(&key) {
                slice.give = left.give;
                slice.owed = left.charge;
                slice.hold.record_id = left.record_id;
                slice.hold.store_holds = true;
                book.terms.queue(&mut slice, index, now_ms);
            }
            book.held(index, slice);
            self.table.records[index as usize].tokens = 0.0;
        }
    }

    /// A record about to be removed (called by `drop_record`): its unspent tokens go back at the
    /// next give-back.
    pub(in crate::keyed) fn slice_dropped(&mut self, index: u32) {
        if self.slices.is_none() {
            return;
        }
        let timeline_ms = self.timeline_ms;
        let release = self.release_slice(index, timeline_ms, false);
        if let Some(book) = &mut self.slices {
            book.dropped(index, release);
        }
    }

    /// A held key's bucket limits changed: a key the store left short asks it again at its next
    /// call, which sends the new capacity and refill (as a reservation's under a changed limit).
    pub(in crate::keyed) fn slice_limits_changed(&mut self, index: u32) {
        if let Some(slice) = self
            .slices
            .as_mut()
            .and_then(|book| book.entries.get_mut(index as usize))
        {
            slice.hold.clear_short();
        }
    }

    /// The bucket capacity of a key.
    pub(in crate::keyed) fn bucket_capacity(&self, index: u32) -> f64 {
        self.policies[self.table.records[index as usize].policy as usize].capacity
    }

    /// [`KeyedLimiter::refresh`] for a key of a shared bucket, at `timeline_ms`.
    #[inline(never)]
    pub(in crate::keyed) fn refresh_slice(&mut self, index: u32, open_slot: i32, timeline_ms: f64) {
        let Some(bucket) = self.slice_bucket(index, timeline_ms) else {
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

    /// A held key's state and its bucket as its slice makes it ([`KeyedLimiter::slice_bucket`]),
    /// at `timeline_ms`.
    #[inline(never)]
    pub(in crate::keyed) fn slice_use(
        &mut self,
        index: u32,
        timeline_ms: f64,
    ) -> (KeyUse<i32>, BucketOf) {
        let Some(bucket) = self.slice_bucket(index, timeline_ms) else {
            unreachable!("asked of a limiter with a slice book")
        };
        (self.table.records[index as usize].key_use(), bucket)
    }

    /// A key's bucket as its slice makes it, readied for the refresh rule at `timeline_ms`:
    /// capacity `C` and no refill (the store refills); the tokens of a slice whose lease has
    /// lapsed are kept aside to give back. `None`: no shared bucket.
    pub(in crate::keyed) fn slice_bucket(
        &mut self,
        index: u32,
        timeline_ms: f64,
    ) -> Option<BucketOf> {
        let book = self.slices.as_mut()?;
        let slice = &mut book.entries[index as usize];
        let record = &mut self.table.records[index as usize];
        if record.tokens != 0.0 && timeline_ms >= slice.lease_end_ms {
            // Not spendable any more; the unspent tokens go back with the key's next store call
            // (the store takes back what it still counts as out to this process; a slice it
            // wrote off is spent for good).
            slice.give += std::mem::take(&mut record.tokens).max(0.0);
        }
        Some(BucketOf {
            capacity: self.policies[record.policy as usize].capacity,
            refill_per_second: 0.0,
        })
    }

    /// Brings a held key's slice up to `timeline_ms` (its quota use left as it is).
    pub(super) fn look_at_slice(&mut self, index: u32, timeline_ms: f64) {
        let slot = self.table.records[index as usize].period_slot;
        self.refresh_slice(index, slot, timeline_ms);
    }

    /// The store's tokens for a key at `timeline_ms` as this process estimates them: those of the
    /// last answer refilled since at `R`, at most `C` (`C` before any answer).
    pub fn fleet_tokens(&self, index: u32, timeline_ms: f64) -> Option<f64> {
        let slice = self.slice(index)?;
        let policy = &self.policies[self.table.records[index as usize].policy as usize];
        Some(fleet_tokens_of(slice, policy, timeline_ms))
    }

    /// Lets go of a key's slice (refreshed): the give-back to send, if the store may hold anything
    /// of this process for it (`report`: even a spent slice's, to say it is spent).
    fn release_slice(
        &mut self,
        index: u32,
        timeline_ms: f64,
        report: bool,
    ) -> Option<SliceRequest> {
        self.look_at_slice(index, timeline_ms);
        let key = self.table.key_of(index).to_buf();
        let record = &mut self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        let book = self.slices.as_mut()?;
        let lease_ms = book.terms.lease_ms;
        let slice = &mut book.entries[index as usize];
        if !(slice.holds(record.tokens) || report) {
            return None;
        }
        slice.waited = false;
        forget_if_expired(slice, policy, lease_ms, timeline_ms);
        let give = std::mem::take(&mut record.tokens) + std::mem::take(&mut slice.give);
        slice.hold.store_holds = false;
        slice.asking = false;
        slice.set_outage(None);
        Some(SliceRequest {
            key,
            capacity: policy.capacity as u64,
            refill_per_second: policy.refill_per_second,
            want: 0,
            more: More::Nothing,
            held: 0,
            give,
            charge: std::mem::take(&mut slice.owed),
            fleet_ms: proposal(slice, timeline_ms),
            record_id: slice.hold.record_id,
            most: 0,
            sent_ms: timeline_ms,
            spent_ms: spent_ms(slice, timeline_ms),
            spend: false,
        })
    }

    /// A held key's store call failed: it is no longer in flight; what it carried (a give-back,
    /// failOpen units) is carried by the next one.
    pub fn slice_failed(&mut self, index: u32, give: f64, charge: u64) {
        let now_ms = self.timeline_ms;
        if let Some(book) = self.slices.as_mut() {
            if let Some(slice) = book.call_ended(index) {
                slice.hold.store_holds = true;
                slice.give += give;
                slice.owed = slice.owed.saturating_add(charge);
            }
            if let Some(slice) = book.entries.get_mut(index as usize) {
                book.terms.queue(slice, index, now_ms);
            }
        }
    }

    /// The give-backs due at the monotonic reading `monotonic_ms`, at most `limit`: those of keys
    /// dropped since the last time, then every key not in flight idle for `idle_ms` whose slice
    /// has tokens to give back (`idle_ms` 0: every key). The keys sent are in flight.
    pub fn slice_give_backs(
        &mut self,
        idle_ms: f64,
        limit: usize,
        monotonic_ms: f64,
    ) -> Vec<SliceRequest> {
        if self.slices.is_none() {
            return Vec::new();
        }
        let timeline_ms = self.timeline_at(monotonic_ms);
        let lease_ms = self.slices.as_ref().map_or(0.0, |book| book.terms.lease_ms);
        let mut sent = Vec::new();
        if let Some(book) = &mut self.slices {
            let keys: Vec<KeyBuf> = book.dropped.keys().take(limit).cloned().collect();
            for key in keys {
                sent.extend(book.dropped.remove(&key));
            }
        }
        // close() (`idle_ms` 0) looks at every key; the timer at the keys due.
        let mut every = (idle_ms == 0.0).then_some(0..self.table.len() as u32);
        while sent.len() < limit {
            let index = if let Some(indices) = &mut every {
                let Some(index) = indices.next() else { break };
                index
            } else {
                let Some(book) = &mut self.slices else { break };
                match book.terms.due.peek() {
                    Some(&Reverse((at_ms, _))) if at_ms as f64 <= timeline_ms => {}
                    _ => break,
                }
                let Some(Reverse((_, index))) = book.terms.due.pop() else {
                    break;
                };
                match book.entries.get_mut(index as usize) {
                    Some(slice) => slice.queued = false,
                    None => continue,
                }
                index
            };
            let tokens = self.table.records[index as usize].tokens;
            let Some(&slice) = self.slice(index) else {
                break;
            };
            if slice.hold.in_flight {
                // (Its answer, or its failure, queues it again.)
                continue;
            }
            // A busy or saturated key gone quiet (not used for its denial floor) tells the
            // store its spent slice is spent: counted as out, it would cap the refill for the
            // processes the traffic moved to. (A key used now and then, whose slices are the one
            // token its calls lacked, needs no word.)
            let policy = &self.policies[self.table.records[index as usize].policy as usize];
            let quiet_ms = denial_floor_ms(lease_ms, policy.capacity, policy.refill_per_second);
            // (`idle_ms` 0, every key, is close(): every spent slice the store counts is
            // reported at once, so that nothing is out once close() resolves.)
            let reports = reports_when_quiet(&slice) && tokens < 1.0;
            let unused_ms = timeline_ms - slice.hold.last_used_ms;
            let quiet = reports && (idle_ms == 0.0 || unused_ms >= quiet_ms);
            let holds = slice.holds(tokens);
            if !(holds || reports) {
                continue;
            }
            if !quiet && idle_ms > 0.0 && unused_ms < idle_ms {
                // Not yet: looked at again when it may be quiet or idle, if unused till then.
                let wait_ms = if reports { quiet_ms } else { idle_ms };
                if let Some(book) = &mut self.slices {
                    let slice = &mut book.entries[index as usize];
                    book.terms
                        .queue(slice, index, slice.hold.last_used_ms + wait_ms);
                }
                continue;
            }
            if let Some(release) = self.release_slice(index, timeline_ms, quiet) {
                sent.push(release);
                if let Some(book) = &mut self.slices {
                    book.in_flight(index);
                }
            }
        }
        sent
    }

    /// Whether a key holds a slice (or the store counts one, or give-backs wait): the idle timer
    /// is needed.
    pub fn holds_slices(&self) -> bool {
        self.slices
            .as_ref()
            .is_some_and(|book| book.owes_word(&self.table.records))
    }

    /// Whether give-backs of dropped keys wait.
    pub fn has_dropped_slices(&self) -> bool {
        self.slices.as_ref().is_some_and(|book| book.has_dropped())
    }

    /// The store-clock check: the store's clock advanced `T2 - T1` between two answers;
    /// this process's timeline says between `s2 - r1` and `r2 - s1`, give or take
    /// `250 + 0.0005·(r2 - s1)` ms. Outside that, a `store-clock-step` anomaly (counted); then the
    /// answer is the new anchor. The store's clock never refills anything alone (the fleet
    /// clock takes the lesser of it and this process's elapsed time).
    pub(super) fn check_store_clock(
        &mut self,
        sent_ms: f64,
        received_ms: f64,
        store_now_ms: f64,
    ) -> Option<Anomaly> {
        let book = self.slices.as_mut()?;
        if !(sent_ms.is_finite() && store_now_ms.is_finite()) {
            return None;
        }
        let now = StoreAnchor {
            sent_ms,
            received_ms,
            store_now_ms,
        };
        let last = book.terms.anchor.replace(now)?;
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

/// Whether the store counts a slice of this key as out that may be spent, and the key took more
/// than what one call lacked (or waited out a saturated bucket), or a first call took more than
/// one token: it reports when it goes quiet.
fn reports_when_quiet(slice: &Slice) -> bool {
    slice.hold.store_holds && (slice.waited || slice.last_granted > 1)
}

/// A key idle here for longer than the store keeps its record untouched (lib/share/protocol.js,
/// bucketTake step 9: `max(C / R, 1.1 * leaseMs + 1 s) + 60 s`, from the last call at the latest)
/// may find it expired: the next call names no record and no fleet clock, as a first call does,
/// so a record gone by expiry comes back full (as an unshared bucket idle that long would be),
/// not empty as a lost one does (the contract: "lost before it could have expired").
pub(super) fn forget_if_expired(
    slice: &mut Slice,
    policy: &Policy,
    lease_ms: f64,
    timeline_ms: f64,
) {
    let kept_ms = bucket_kept_ms(policy.capacity, policy.refill_per_second, lease_ms);
    if slice.hold.record_id != 0 && timeline_ms - slice.fleet_at_ms > kept_ms * CLOCK_RATE_SLACK {
        slice.hold.record_id = 0;
        slice.fleet_ms = -1.0;
    }
}

/// How long before `sent_ms` the slice was last spent from (what it spent was spent by then).
pub(super) fn spent_ms(slice: &Slice, sent_ms: f64) -> f64 {
    (sent_ms - slice.spent_at_ms).clamp(0.0, SPENT_MS_MAX)
}

/// The fleet-clock proposal of a call sent at `sent_ms`: the last answer's fleet clock plus this
/// process's timeline advance between the two sends (-1: no answered call yet).
pub(super) fn proposal(slice: &Slice, sent_ms: f64) -> f64 {
    if slice.fleet_ms < 0.0 {
        -1.0
    } else {
        slice.fleet_ms + (sent_ms - slice.fleet_sent_ms).max(0.0)
    }
}

/// The store's tokens for a key at `timeline_ms` as this process estimates them: those of the
/// slice's last answer refilled since at `R`, at most `C` (`C` before any answer).
pub(super) fn fleet_tokens_of(slice: &Slice, policy: &Policy, timeline_ms: f64) -> f64 {
    if slice.fleet_at_ms == f64::NEG_INFINITY {
        return policy.capacity;
    }
    // (The store's answer is at most the C it was asked with; a capacity cut since is applied
    // at the key's next store call: until then the estimate is at most the new C.)
    refilled(
        slice.fleet_tokens,
        timeline_ms - slice.fleet_at_ms,
        policy.refill_per_second,
        policy.capacity,
    )
    .min(policy.capacity)
}

#[cfg(test)]
#[path = "slice_tests.rs"]
mod tests;
