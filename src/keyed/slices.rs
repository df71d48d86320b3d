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

use std::collections::HashMap;

use super::share::{SharedBucket, Step};
use super::{refresh_record, KeyBuf, KeyedLimiter, Policy, ShareMode};
use crate::anomaly::Anomaly;
use crate::args::{finite_from, units};
use crate::bucket::{refill_wait_ms, refilled};
use crate::error::{Error, ErrorCode};
use crate::kernel::{Bucket, BucketOf, Decision, KeyUse};
use crate::text::js_number;

/// How much a store call takes beyond what it must (the protocol's `more`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum More {
    /// Only what the call lacks: a process's first call for a key (so that `n` processes' first
    /// calls are all admitted when the bucket holds `n`).
    Nothing = 0,
    /// A fair share: `C / (others + 2)`, at most `(tokens - want) / (others + 1)` of what the
    /// bucket has left.
    Share = 1,
    /// Everything the bucket has, up to the request's `most`: a process that waited out a
    /// saturated bucket (so the refill that came meanwhile is not lost to the bucket's cap), or
    /// calls waiting together for what they lack together.
    All = 2,
}

/// [`Slice::all_most`] of a call that does not take all there is.
const NOT_ALL: u32 = u32::MAX;

/// One key's slice; its tokens left are the record's `tokens`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// The timeline when the lease ends: the last answered call's send time plus `leaseMs`.
    pub lease_end_ms: f64,
    /// A store call for the key is under way.
    pub in_flight: bool,
    /// The key is denied here, with no store call, until this timeline (the store said the
    /// bucket was short); then the next call takes all there is ([`More::All`]).
    pub short_until_ms: f64,
    /// The store's tokens at its last answer (may be below zero after a failOpen charge), and
    /// the timeline when that answer came (-inf: none yet).
    pub fleet_tokens: f64,
    pub fleet_at_ms: f64,
    /// The fleet clock at the last answered call, and that call's send time on the timeline
    /// (`fleet_ms` < 0: no answered call yet).
    pub fleet_ms: f64,
    pub fleet_sent_ms: f64,
    /// The timeline of the key's last consume (idle give-back).
    pub last_used_ms: f64,
    /// The timeline of the last consume the slice covered: the slice held unspent tokens until
    /// then, so the store's refill counts it as out until then (the request's `spent_ms`).
    pub spent_at_ms: f64,
    /// The size of the last slice taken (a background fetch is due below half of it).
    pub last_granted: u32,
    /// The identity of the store record (0: none yet).
    pub record_id: u64,
    /// The store may count tokens out to this process for the key.
    pub store_holds: bool,
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
    /// The store's bucket was short at the last answer and this process took at least three
    /// quarters of its capacity: once the slice is spent, the store hears of it at once, in the
    /// background (a large slice counted as out would cap the store's refill, and an operator's
    /// `fill` would count it as still out).
    pub report_spent: bool,
    /// The last take was a first call's (what it lacked, [`More::Nothing`]) of more than one
    /// token: its spent slice is reported when the key goes quiet, as a busy key's is (counted as
    /// out until the store writes it off, it would cap the refill of an idle key by as much).
    pub report_first: bool,
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
    /// `u32::MAX`; `NOT_ALL`: it does not take all): an answer that leaves tokens short of that
    /// left them to the processes that found the bucket short lately, and this one is short too.
    pub all_most: u32,
    /// The failOpen outage bucket `(tokens, credited_at_ms)` (capacity `C`, refill `R`).
    pub open: Option<(f64, f64)>,
}

impl Slice {
    fn fresh(now_ms: f64) -> Slice {
        Slice {
            lease_end_ms: f64::NEG_INFINITY,
            in_flight: false,
            short_until_ms: f64::NEG_INFINITY,
            fleet_tokens: 0.0,
            fleet_at_ms: f64::NEG_INFINITY,
            fleet_ms: -1.0,
            fleet_sent_ms: f64::NEG_INFINITY,
            last_used_ms: now_ms,
            spent_at_ms: f64::NEG_INFINITY,
            last_granted: 0,
            record_id: 0,
            store_holds: false,
            give: 0.0,
            owed: 0,
            waited: false,
            busy: false,
            report_spent: false,
            report_first: false,
            demand: 0.0,
            demand_since_ms: now_ms,
            asking: false,
            first: false,
            all_most: NOT_ALL,
            open: None,
        }
    }

    /// Whether the store must hear from this process about the key: unspent tokens, tokens to
    /// give back, failOpen units owed. (A slice spent to the last token needs no word: the
    /// store writes it off as spent once its lease has lapsed, and a key first seen costs one
    /// store call, not two.)
    fn holds(&self, tokens: f64) -> bool {
        tokens > 0.0 || self.give > 0.0 || self.owed > 0
    }
}

/// What a store call for a key sends (the store's `bucketTake`, with the name, key, instance and
/// leaseMs added by the JS face).
#[derive(Clone, Debug, PartialEq)]
pub struct SliceRequest {
    pub key: KeyBuf,
    pub capacity: u64,
    pub refill_per_second: f64,
    pub want: u64,
    pub more: More,
    pub held: u64,
    pub give: f64,
    pub charge: u64,
    pub fleet_ms: f64,
    pub record_id: u64,
    /// The most the take brings (0: no limit): what a process that waited out a saturated
    /// bucket can spend before it asks again.
    pub most: u64,
    /// The timeline as the call is sent: the lease runs from it.
    pub sent_ms: f64,
    /// How long before the send the slice was last spent from (at most [`SPENT_MS_MAX`]): the
    /// store's refill counts what the slice spent as out until then.
    pub spent_ms: f64,
}

/// The largest `spent_ms` a request carries (about 31 years: "never spent").
pub const SPENT_MS_MAX: f64 = 1e12;

/// The store's answer to a `bucketTake`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SliceAnswer {
    pub granted: u64,
    pub held: u64,
    pub tokens: f64,
    pub fleet_ms: f64,
    pub store_now_ms: f64,
    pub record_id: u64,
}

impl SliceAnswer {
    /// The answer's numbers checked, in this order (`ERR_INVALID_ARG`); `held` covers `granted`.
    pub fn checked(
        [granted, held, tokens, fleet_ms, store_now_ms, record_id]: [f64; 6],
    ) -> Result<SliceAnswer, Error> {
        let answer = SliceAnswer {
            granted: units(granted, "granted")?,
            held: units(held, "held")?,
            tokens: finite_from(tokens, f64::MIN, "tokens")?,
            fleet_ms: finite_from(fleet_ms, 0.0, "fleetMs")?,
            store_now_ms: finite_from(store_now_ms, 0.0, "storeNowMs")?,
            record_id: units(record_id, "recordId")?,
        };
        if answer.granted > answer.held {
            return Err(Error::Invalid {
                code: ErrorCode::InvalidArg,
                message: format!(
                    "held must be at least granted; received granted {} and held {}",
                    js_number(granted),
                    js_number(held)
                ),
            });
        }
        Ok(answer)
    }
}

/// The last store answer's times, on the timeline (the store-clock check).
#[derive(Clone, Copy, Debug, PartialEq)]
struct StoreAnchor {
    sent_ms: f64,
    received_ms: f64,
    store_now_ms: f64,
}

#[derive(Debug)]
pub struct SliceBook {
    /// One per record, in the records' order.
    slices: Vec<Slice>,
    /// `share.leaseMs`.
    lease_ms: f64,
    /// Give-backs of keys dropped or deleted, by key (a key held again before they are sent
    /// takes its own back into its next call).
    dropped: HashMap<KeyBuf, SliceRequest>,
    anchor: Option<StoreAnchor>,
    /// A covered consume left its key's slice low: the JS face asks for the background fetch.
    fetch_due: bool,
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
        self.slices = Some(SliceBook {
            slices,
            lease_ms,
            dropped: HashMap::new(),
            anchor: None,
            fetch_due: false,
        });
    }

    pub fn has_slices(&self) -> bool {
        self.slices.is_some()
    }

    /// A held key's slice (`None`: no shared bucket, or no such record).
    pub fn slice(&self, index: u32) -> Option<&Slice> {
        self.slices.as_ref()?.slices.get(index as usize)
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
    pub(super) fn slice_held(&mut self, index: u32) {
        let now_ms = self.timeline_ms;
        let key = self.table.key_of(index).to_buf();
        if let Some(book) = &mut self.slices {
            debug_assert_eq!(book.slices.len(), index as usize);
            let mut slice = Slice::fresh(now_ms);
            if let Some(left) = book.dropped.remove(&key) {
                slice.give = left.give;
                slice.owed = left.charge;
                slice.record_id = left.record_id;
                slice.store_holds = true;
            }
            book.slices.push(slice);
            self.table.records[index as usize].tokens = 0.0;
        }
    }

    /// A record about to be removed (called by `drop_record`): its unspent tokens go back at the
    /// next give-back.
    pub(super) fn slice_dropped(&mut self, index: u32) {
        if self.slices.is_none() {
            return;
        }
        let timeline_ms = self.timeline_ms;
        let release = self.release_slice(index, timeline_ms, false);
        if let Some(book) = &mut self.slices {
            book.slices.swap_remove(index as usize);
            if let Some(release) = release {
                book.dropped.insert(release.key.clone(), release);
            }
        }
    }

    /// The bucket capacity of a key.
    pub(super) fn bucket_capacity(&self, index: u32) -> f64 {
        self.policies[self.table.records[index as usize].policy as usize].capacity
    }

    /// [`KeyedLimiter::refresh`] for a key of a shared bucket, at `timeline_ms`.
    #[inline(never)]
    pub(super) fn refresh_slice(&mut self, index: u32, open_slot: i32, timeline_ms: f64) {
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
    pub(super) fn slice_use(&mut self, index: u32, timeline_ms: f64) -> (KeyUse<i32>, BucketOf) {
        let Some(bucket) = self.slice_bucket(index, timeline_ms) else {
            unreachable!("asked of a limiter with a slice book")
        };
        (self.table.records[index as usize].key_use(), bucket)
    }

    /// A key's bucket as its slice makes it, readied for the refresh rule at `timeline_ms`:
    /// capacity `C` and no refill (the store refills); the tokens of a slice whose lease has
    /// lapsed are kept aside to give back. `None`: no shared bucket.
    pub(super) fn slice_bucket(&mut self, index: u32, timeline_ms: f64) -> Option<BucketOf> {
        let book = self.slices.as_mut()?;
        let slice = &mut book.slices[index as usize];
        let record = &mut self.table.records[index as usize];
        if record.tokens != 0.0 && timeline_ms >= slice.lease_end_ms {
            // Not spendable any more; the unspent tokens go back with the key's next store call
            // (the store writes the slice off as spent, and takes them back all the same).
            slice.give += std::mem::take(&mut record.tokens).max(0.0);
        }
        Some(BucketOf {
            capacity: self.policies[record.policy as usize].capacity,
            refill_per_second: 0.0,
        })
    }

    /// Brings a held key's slice up to `timeline_ms` (its quota use left as it is).
    fn look_at_slice(&mut self, index: u32, timeline_ms: f64) {
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
        let lease_ms = book.lease_ms;
        let slice = &mut book.slices[index as usize];
        if !(slice.holds(record.tokens) || report) {
            return None;
        }
        slice.waited = false;
        forget_if_expired(slice, policy, lease_ms, timeline_ms);
        let give = std::mem::take(&mut record.tokens) + std::mem::take(&mut slice.give);
        slice.store_holds = false;
        slice.asking = false;
        slice.open = None;
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
            record_id: slice.record_id,
            most: 0,
            sent_ms: timeline_ms,
            spent_ms: spent_ms(slice, timeline_ms),
        })
    }

    /// After a covered consume: marks a background fetch due when the slice is down to half of
    /// what the last one brought (or its lease is in its last quarter), the key not short.
    pub(super) fn fetch_if_low(&mut self, index: u32, timeline_ms: f64) {
        let tokens = self.table.records[index as usize].tokens;
        let Some(book) = &self.slices else {
            return;
        };
        let lease_ms = book.lease_ms;
        let slice = &book.slices[index as usize];
        // (The cheap test first: a covered consume comes here every time.)
        if !fetch_wanted(slice, tokens, timeline_ms, lease_ms) {
            return;
        }
        let capacity = self.bucket_capacity(index);
        let fleet = self.fleet_tokens(index, timeline_ms).unwrap_or(0.0);
        let Some(book) = &mut self.slices else {
            return;
        };
        let slice = &book.slices[index as usize];
        // (A background fetch is worth its store call only while the store, as last heard of,
        // holds half the bucket and half a slice: when it runs low, a process fetching
        // ahead would end a burst holding what the others lack; the slice is spent and the next
        // call asks for what it lacks.)
        let worth =
            slice.report_spent || fleet >= (capacity / 2.0).max(slice.last_granted as f64 / 2.0);
        if worth {
            book.fetch_due = true;
        }
    }

    /// Whether a covered consume marked a background fetch due (cleared by the asking).
    pub fn slice_fetch_due(&self) -> bool {
        self.slices.as_ref().is_some_and(|book| book.fetch_due)
    }

    /// What a store call for a held key sends; marks it in flight. `lacking`: what the call that
    /// asks needs (0: a background fetch, which renews and takes a fair share); `demand`: what
    /// every call waiting for the key needs together (at least `lacking`). `None`: no shared bucket, or (a background fetch) nothing is due or a call is
    /// under way.
    pub fn slice_request(
        &mut self,
        index: u32,
        lacking: u64,
        demand: u64,
        monotonic_ms: f64,
    ) -> Option<SliceRequest> {
        let timeline_ms = self.timeline_at(monotonic_ms);
        self.look_at_slice(index, timeline_ms);
        let key = self.table.key_of(index).to_buf();
        let record = self.table.records[index as usize];
        let policy = self.policies[record.policy as usize];
        let book = self.slices.as_mut()?;
        book.fetch_due = false;
        let lease_ms = book.lease_ms;
        let slice = &mut book.slices[index as usize];
        let held = record.tokens.max(0.0).floor();
        if lacking == 0 && !fetch_wanted(slice, held, timeline_ms, lease_ms) {
            return None;
        }
        forget_if_expired(slice, &policy, lease_ms, timeline_ms);
        slice.in_flight = true;
        // What the waiting calls lack beyond what the slice keeps (at least 1 when they lack).
        let want = if lacking == 0 {
            0
        } else {
            lacking.saturating_sub(held as u64).max(1)
        };
        // A spent slice's report takes nothing (the key is short: its wait is not over).
        let report = lacking == 0 && std::mem::take(&mut slice.report_spent) && held < 1.0;
        // After waiting out a saturated bucket, all there is, but (a key still busy) no more than
        // its demand over the wait before its next call could spend: a slice larger than that would sit
        // unspent, counted as out, while the other processes' calls are denied and the bucket's
        // refill stops at its cap.
        let demand_ms = timeline_ms - slice.demand_since_ms;
        let floor_ms = denial_floor_ms(lease_ms, &policy);
        let spendable = if slice.waited && slice.busy && demand_ms > 0.0 {
            (slice.demand / demand_ms * floor_ms * 1.5).ceil() as u64
        } else {
            0
        };
        slice.demand = 0.0;
        slice.demand_since_ms = timeline_ms;
        // What the calls waiting for the key lack together: beyond `want` (the call that asks),
        // they take what the bucket has, up to that (each is decided on what comes).
        let together = demand.saturating_sub(held as u64);
        let (more, most) = if report {
            (More::Nothing, 0)
        } else if together > want && want > 0 {
            (More::All, together.max(spendable))
        } else if slice.waited {
            // (0: no limit; else at least what the call lacks.) What the slice still holds counts
            // toward what the key can spend: a background fetch that took the whole spendable
            // amount each time would pile up tokens the store counts as out.
            let room = spendable.saturating_sub(held as u64);
            if spendable == 0 {
                (More::All, 0)
            } else if room == 0 && want == 0 {
                (More::Nothing, 0)
            } else {
                (More::All, room.max(want))
            }
        } else if want > 0 && (!slice.busy || (slice.fleet_ms < 0.0 && slice.record_id == 0)) {
            (More::Nothing, 0)
        } else {
            (More::Share, 0)
        };
        slice.store_holds = true;
        slice.first = more == More::Nothing && want > 0;
        slice.asking = want > 0 || more != More::Nothing;
        slice.all_most = if more == More::All {
            u32::try_from(most).unwrap_or(u32::MAX - 1)
        } else {
            NOT_ALL
        };
        Some(SliceRequest {
            key,
            capacity: policy.capacity as u64,
            refill_per_second: policy.refill_per_second,
            want,
            more,
            held: held as u64,
            give: std::mem::take(&mut slice.give),
            charge: std::mem::take(&mut slice.owed),
            fleet_ms: proposal(slice, timeline_ms),
            record_id: slice.record_id,
            most,
            sent_ms: timeline_ms,
            spent_ms: spent_ms(slice, timeline_ms),
        })
    }

    /// A store answer for a held key's call sent at `sent_ms`: the key's slice is what it kept
    /// (at most the answer's `held - granted`) plus `granted`, on a lease from `sent_ms`.
    /// `false`: the key has no shared bucket (the caller gives the tokens back). A
    /// `store-clock-step` anomaly, if the store's clock disagrees, is counted and returned.
    pub fn credit_slice(
        &mut self,
        index: u32,
        sent_ms: f64,
        answer: SliceAnswer,
        monotonic_ms: f64,
    ) -> (bool, Option<Anomaly>) {
        if self.slices.is_none() {
            return (false, None);
        }
        let timeline_ms = self.timeline_at(monotonic_ms);
        self.look_at_slice(index, timeline_ms);
        let record = &mut self.table.records[index as usize];
        let policy = &self.policies[record.policy as usize];
        let Some(book) = &mut self.slices else {
            return (false, None);
        };
        let lease_ms = book.lease_ms;
        let slice = &mut book.slices[index as usize];
        slice.in_flight = false;
        let kept = (answer.held - answer.granted) as f64;
        record.tokens = record.tokens.min(kept).max(0.0) + answer.granted as f64;
        slice.lease_end_ms = sent_ms + lease_ms;
        slice.fleet_tokens = answer.tokens;
        slice.fleet_at_ms = timeline_ms;
        slice.fleet_ms = answer.fleet_ms;
        let floor_ms = denial_floor_ms(lease_ms, policy);
        // Draining: a slice that is small (under a quarter of the bucket), came within
        // the denial floor of the call before and is no more than twice what the bucket
        // refilled in between: this key lives off the refill, its calls spending it as it comes.
        // Treated as short, so the key costs a bounded number of store calls a second instead of
        // one for every few tokens. (A burst sharing out the last tokens of a full bucket takes
        // small slices too, but more than the refill: a process that stopped asking then would
        // strand what is left. Not judged: a key's first take, of what its call lacks, and the first
        // take after a wait, which brings the wait's refill.)
        let between_ms = sent_ms - slice.fleet_sent_ms;
        let refilled_between = between_ms.max(0.0) * policy.refill_per_second / 1000.0;
        let granted = answer.granted as f64;
        let draining = answer.granted > 0
            && granted * 4.0 < policy.capacity
            && granted <= 2.0 * refilled_between
            && between_ms < floor_ms
            && !slice.waited
            && !slice.first;
        slice.fleet_sent_ms = sent_ms;
        slice.record_id = answer.record_id;
        slice.store_holds = answer.held > 0;
        slice.open = None;
        if answer.granted > 0 {
            let first = std::mem::take(&mut slice.first);
            slice.report_first = first && answer.granted > 1;
            // (A grant is at most the capacity, at most 2**31.)
            slice.last_granted = if first {
                0
            } else {
                u32::try_from(answer.granted).unwrap_or(u32::MAX)
            };
            slice.short_until_ms = f64::NEG_INFINITY;
            slice.waited = false;
        }
        let asking = std::mem::take(&mut slice.asking);
        // All there is, less than asked for and tokens left: the rest is the other hungry
        // processes' share of the refill (the store's step 7).
        let most = std::mem::replace(&mut slice.all_most, NOT_ALL);
        let left_to_others = most != NOT_ALL
            && answer.granted > 0
            && answer.tokens >= 1.0
            && (most == 0 || answer.granted < u64::from(most));
        if (answer.tokens < 1.0 || draining || left_to_others) && asking {
            // The bucket is empty (this call took its last tokens, or it had too few, or the
            // rest is the other hungry processes' share): the key is saturated. Once the slice is
            // spent, it is denied here (`local_denial_ms`); then this process takes all there is
            // (its share of it), so that the refill of the wait is not lost to the bucket's cap.
            slice.short_until_ms = timeline_ms
                + local_denial_ms(
                    lease_ms,
                    policy.capacity,
                    policy.refill_per_second,
                    answer.tokens,
                );
            slice.waited = true;
            slice.report_spent = answer.granted as f64 >= 0.75 * policy.capacity;
        }
        let anomaly = self.check_store_clock(sent_ms, timeline_ms, answer.store_now_ms);
        (true, anomaly)
    }

    /// After a store answer that brought too little for a waiting call of `n` (others waiting
    /// took it): the call is denied here with the fleet's wait if the store is short of `n` now.
    pub fn slice_short_for(&self, index: u32, n: u64) -> bool {
        let timeline_ms = self.timeline_ms;
        self.fleet_tokens(index, timeline_ms)
            .is_some_and(|tokens| tokens < n as f64)
    }

    /// A held key's store call failed: it is no longer in flight; what it carried (a give-back,
    /// failOpen units) is carried by the next one.
    pub fn slice_failed(&mut self, index: u32, give: f64, charge: u64) {
        if let Some(slice) = self
            .slices
            .as_mut()
            .and_then(|book| book.slices.get_mut(index as usize))
        {
            slice.in_flight = false;
            slice.store_holds = true;
            slice.give += give;
            slice.owed = slice.owed.saturating_add(charge);
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
        let lease_ms = self.slices.as_ref().map_or(0.0, |book| book.lease_ms);
        let mut sent = Vec::new();
        if let Some(book) = &mut self.slices {
            let keys: Vec<KeyBuf> = book.dropped.keys().take(limit).cloned().collect();
            for key in keys {
                sent.extend(book.dropped.remove(&key));
            }
        }
        for index in 0..self.table.len() as u32 {
            if sent.len() >= limit {
                break;
            }
            let tokens = self.table.records[index as usize].tokens;
            let Some(&slice) = self.slice(index) else {
                break;
            };
            if slice.in_flight {
                continue;
            }
            // A busy or saturated key gone quiet (not used for its denial floor) tells the
            // store its spent slice is spent: counted as out, it would cap the refill for the
            // processes the traffic moved to. (A key used now and then, whose slices are the one
            // token its calls lacked, needs no word.)
            let policy = &self.policies[self.table.records[index as usize].policy as usize];
            let quiet_ms = denial_floor_ms(lease_ms, policy);
            let quiet = reports_when_quiet(&slice)
                && tokens < 1.0
                && timeline_ms - slice.last_used_ms >= quiet_ms;
            if !(slice.holds(tokens) || quiet) {
                continue;
            }
            if !quiet && idle_ms > 0.0 && timeline_ms - slice.last_used_ms < idle_ms {
                continue;
            }
            if let Some(release) = self.release_slice(index, timeline_ms, quiet) {
                sent.push(release);
                if let Some(book) = &mut self.slices {
                    book.slices[index as usize].in_flight = true;
                }
            }
        }
        sent
    }

    /// Whether a key holds a slice (or the store counts one, or give-backs wait): the idle timer
    /// is needed.
    pub fn holds_slices(&self) -> bool {
        self.slices.as_ref().is_some_and(|book| {
            !book.dropped.is_empty()
                || book
                    .slices
                    .iter()
                    .zip(&self.table.records)
                    .any(|(slice, record)| slice.holds(record.tokens) || reports_when_quiet(slice))
        })
    }

    /// Whether give-backs of dropped keys wait.
    pub fn has_dropped_slices(&self) -> bool {
        self.slices
            .as_ref()
            .is_some_and(|book| !book.dropped.is_empty())
    }

    /// The store-clock check: the store's clock advanced `T2 - T1` between two answers;
    /// this process's timeline says between `s2 - r1` and `r2 - s1`, give or take
    /// `250 + 0.0005·(r2 - s1)` ms. Outside that, a `store-clock-step` anomaly (counted); then the
    /// answer is the new anchor. The store's clock never refills anything alone (the fleet
    /// clock takes the lesser of it and this process's elapsed time).
    fn check_store_clock(
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
        let last = book.anchor.replace(now)?;
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

/// How long a saturated key is denied here at least (SPEC §15):
/// `min(leaseMs / 8, 1 s, C / (2R))`. The last term keeps a bucket that refills in less than a
/// second from being capped at `C` while its processes wait, so it still admits its rate.
fn denial_floor_ms(lease_ms: f64, policy: &Policy) -> f64 {
    floor_ms(lease_ms, policy.capacity, policy.refill_per_second)
}

fn floor_ms(lease_ms: f64, capacity: f64, refill_per_second: f64) -> f64 {
    (lease_ms / 8.0)
        .min(1000.0)
        .min(capacity / refill_per_second * 500.0)
}

/// How long a key the store found short (`tokens` left after the answer) is denied here: until
/// the bucket holds a token again, for at least 1.3 times the floor and at most 1 s.
///
/// Every process waits alike: the processes a saturated key's traffic reaches then each ask once
/// a period, and the tokens out (slices spent and not yet reported, which the store counts as
/// out) plus those in the store are at most what the bucket refills in one period, so its cap
/// does not stop the refill. (Waits drawn at random each time made the periods uneven: a process
/// asking after a long one found the others' spent slices capping the refill, and the fleet
/// admitted 80-90% of R.)
pub fn local_denial_ms(lease_ms: f64, capacity: f64, refill_per_second: f64, tokens: f64) -> f64 {
    let wait_ms = (1.0 - tokens).max(0.0) * 1000.0 / refill_per_second;
    let least_ms = (floor_ms(lease_ms, capacity, refill_per_second) * 1.3).min(1000.0);
    wait_ms.clamp(least_ms, 1000.0)
}

/// How long (fleet ms) the store counts an instance that found the bucket short among those
/// that share its refill (bucketTake step 7): the instance's local denial, with room for its
/// next call to reach the store (a quarter more, and 50 ms).
pub fn hunger_ms(lease_ms: f64, capacity: f64, refill_per_second: f64, tokens: f64) -> f64 {
    local_denial_ms(lease_ms, capacity, refill_per_second, tokens) * 1.25 + 50.0
}

/// Whether a key with `tokens` left in its slice asks the store in the background, no store call
/// being under way: to report a large slice spent (see [`Slice::report_spent`]), or, not short,
/// to fetch the next slice when this one is down to half of what it brought (or its lease is in
/// its last quarter).
fn fetch_wanted(slice: &Slice, tokens: f64, timeline_ms: f64, lease_ms: f64) -> bool {
    if slice.in_flight {
        return false;
    }
    if slice.report_spent && tokens < 1.0 {
        return true;
    }
    if timeline_ms < slice.short_until_ms || slice.last_granted == 0 {
        return false;
    }
    // At most one background fetch a key every leaseMs / 16 (a bucket being shared out among
    // busy processes would otherwise cost a fetch for every few tokens).
    if timeline_ms - slice.fleet_sent_ms < lease_ms / 16.0 {
        return false;
    }
    let low = tokens * 2.0 < slice.last_granted as f64;
    let lapsing = tokens > 0.0 && slice.lease_end_ms - timeline_ms < lease_ms / 4.0;
    low || lapsing
}

/// Whether the store counts a slice of this key as out that may be spent, and the key took more
/// than what one call lacked (or waited out a saturated bucket), or a first call took more than
/// one token: it reports when it goes quiet.
fn reports_when_quiet(slice: &Slice) -> bool {
    slice.store_holds && (slice.waited || slice.last_granted > 1 || slice.report_first)
}

/// A key idle here for longer than the store keeps its record untouched (lib/share/protocol.js,
/// bucketTake step 9: `max(C / R, 1.1 * leaseMs + 1 s) + 60 s`, from the last call at the latest)
/// may find it expired: the next call names no record and no fleet clock, as a first call does,
/// so a record gone by expiry comes back full (as an unshared bucket idle that long would be),
/// not empty as a lost one does (the contract: "lost before it could have expired").
fn forget_if_expired(slice: &mut Slice, policy: &Policy, lease_ms: f64, timeline_ms: f64) {
    let kept_ms = bucket_kept_ms(policy.capacity, policy.refill_per_second, lease_ms);
    if slice.record_id != 0 && timeline_ms - slice.fleet_at_ms > kept_ms * CLOCK_RATE_SLACK {
        slice.record_id = 0;
        slice.fleet_ms = -1.0;
    }
}

/// The store writes a slice off as spent `WRITE_OFF_FACTOR * leaseMs + WRITE_OFF_MARGIN_MS` of
/// fleet time after the call that took it reached the store (bucketTake step 4); the binding's
/// contract exports these, and a JS test holds lib/share/protocol.js's copies to them.
pub const WRITE_OFF_FACTOR: f64 = 1.1;
pub const WRITE_OFF_MARGIN_MS: f64 = 1_000.0;
/// How long a bucket record outlives its refill and write-off margins (bucketTake step 9).
pub const RECORD_KEPT_AFTER_MS: f64 = 60_000.0;
/// A busy key's share (step 7) is a quarter of a fair share, so that a burst spread over the
/// processes strands little in their slices, but not less than the refill of this many ms (a
/// fast bucket's slices are spent within it anyway).
pub const SHARE_REFILL_MS: f64 = 250.0;

/// Fleet ms after a slice's call reached the store when the store writes it off.
pub fn write_off_after_ms(lease_ms: f64) -> f64 {
    WRITE_OFF_FACTOR * lease_ms + WRITE_OFF_MARGIN_MS
}

/// How long the store keeps a bucket record after a take (bucketTake step 9):
/// `max(C / R, the longest lease's write-off) + RECORD_KEPT_AFTER_MS`.
pub fn bucket_kept_ms(capacity: f64, refill_per_second: f64, longest_lease_ms: f64) -> f64 {
    (capacity / refill_per_second * 1000.0).max(write_off_after_ms(longest_lease_ms))
        + RECORD_KEPT_AFTER_MS
}
/// Hosts' clocks may run at slightly different rates (the bound's 0.1%).
const CLOCK_RATE_SLACK: f64 = 1.001;

/// How long before `sent_ms` the slice was last spent from (what it spent was spent by then).
fn spent_ms(slice: &Slice, sent_ms: f64) -> f64 {
    (sent_ms - slice.spent_at_ms).clamp(0.0, SPENT_MS_MAX)
}

/// The fleet-clock proposal of a call sent at `sent_ms`: the last answer's fleet clock plus this
/// process's timeline advance between the two sends (-1: no answered call yet).
fn proposal(slice: &Slice, sent_ms: f64) -> f64 {
    if slice.fleet_ms < 0.0 {
        -1.0
    } else {
        slice.fleet_ms + (sent_ms - slice.fleet_sent_ms).max(0.0)
    }
}

/// The store's tokens for a key at `timeline_ms` as this process estimates them: those of the
/// slice's last answer refilled since at `R`, at most `C` (`C` before any answer).
fn fleet_tokens_of(slice: &Slice, policy: &Policy, timeline_ms: f64) -> f64 {
    if slice.fleet_at_ms == f64::NEG_INFINITY {
        return policy.capacity;
    }
    // (The store's answer is at most C: the answer's check.)
    refilled(
        slice.fleet_tokens,
        timeline_ms - slice.fleet_at_ms,
        policy.refill_per_second,
        policy.capacity,
    )
}

/// A key's slice of the fleet's bucket (`share.bucket`), as the share layer's bucket
/// ([`SliceBucket`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct FleetSlice;

impl SharedBucket for FleetSlice {
    type Bucket<'a> = SliceBucket<'a>;

    #[inline(always)]
    fn bucket<'a>(
        slices: &'a mut Option<SliceBook>,
        index: u32,
        policy: &Policy,
        tokens: &'a mut f64,
        n: u64,
        mode: ShareMode,
        timeline_ms: f64,
    ) -> (SliceBucket<'a>, bool) {
        let Some(book) = slices else {
            unreachable!("a shared bucket's limiter has a slice book")
        };
        // The slice's books: used now, busy or not, its demand; a covered call's spend.
        let lease_ms = book.lease_ms;
        let slice = &mut book.slices[index as usize];
        slice.busy = timeline_ms - slice.last_used_ms < lease_ms / 2.0;
        slice.last_used_ms = timeline_ms;
        slice.demand += n as f64;
        let covered = *tokens >= n as i64 as f64 && timeline_ms < slice.lease_end_ms;
        let (mut outage, mut denied_here, mut fleet_wait_ms) = (None, false, 0.0);
        if covered {
            slice.spent_at_ms = timeline_ms;
        } else if mode == ShareMode::FailOpen {
            let (open, at) = slice.open.unwrap_or((policy.capacity, timeline_ms));
            outage = Some(refilled(
                open,
                timeline_ms - at,
                policy.refill_per_second,
                policy.capacity,
            ));
        } else {
            denied_here = timeline_ms < slice.short_until_ms || mode == ShareMode::AfterStore;
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
pub(super) struct SliceBucket<'a> {
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
        if let Some(tokens) = self.outage {
            self.slice.open = Some((tokens, self.timeline_ms));
            if decision.allowed {
                self.slice.owed = self.slice.owed.saturating_add(n);
            }
        }
    }
}

#[cfg(test)]
#[path = "slices_tests.rs"]
mod tests;
