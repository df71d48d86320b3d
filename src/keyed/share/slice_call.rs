//! The store calls of a key's slice of the fleet's bucket: what a call takes
//! ([`KeyedLimiter::slice_request`]), what its answer leaves the slice
//! ([`KeyedLimiter::credit_slice`]), and when a covered consume asks for the next slice in the
//! background.

use super::book::Entry;
use super::slice::NOT_ALL;
use super::slice::{forget_if_expired, proposal, spent_ms, Slice};
use super::terms::{denial_floor_ms, local_denial_ms, More, SliceAnswer, SliceRequest};
use crate::anomaly::Anomaly;
use crate::keyed::KeyedLimiter;

impl KeyedLimiter {
    /// After a covered consume: marks a background fetch due when the slice is down to half of
    /// what the last one brought (or its lease is in its last quarter), the key not short.
    pub(in crate::keyed) fn fetch_if_low(&mut self, index: u32, timeline_ms: f64) {
        let tokens = self.table.records[index as usize].tokens;
        let Some(book) = &self.slices else {
            return;
        };
        let lease_ms = book.terms.lease_ms;
        let slice = &book.entries[index as usize];
        // (The cheap test first: a covered consume comes here every time.)
        if !fetch_wanted(slice, tokens, timeline_ms, lease_ms) {
            return;
        }
        let capacity = self.bucket_capacity(index);
        let fleet = self.fleet_tokens(index, timeline_ms).unwrap_or(0.0);
        let Some(book) = &mut self.slices else {
            return;
        };
        let slice = &book.entries[index as usize];
        // (A background fetch is worth its store call only while the store, as last heard of,
        // holds half the bucket and half a slice: when it runs low, a process fetching
        // ahead would end a burst holding what the others lack; the slice is spent and the next
        // call asks for what it lacks.)
        let worth =
            slice.report_spent || fleet >= (capacity / 2.0).max(slice.last_granted as f64 / 2.0);
        if worth {
            book.terms.fetch_due = true;
        }
    }

    /// Whether a covered consume marked a background fetch due (cleared by the asking).
    pub fn slice_fetch_due(&self) -> bool {
        self.slices
            .as_ref()
            .is_some_and(|book| book.terms.fetch_due)
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
        book.terms.fetch_due = false;
        let lease_ms = book.terms.lease_ms;
        let slice = &mut book.entries[index as usize];
        let held = record.tokens.max(0.0).floor();
        if lacking == 0 && !fetch_wanted(slice, held, timeline_ms, lease_ms) {
            return None;
        }
        forget_if_expired(slice, &policy, lease_ms, timeline_ms);
        slice.hold.in_flight = true;
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
        let floor_ms = denial_floor_ms(lease_ms, policy.capacity, policy.refill_per_second);
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
        } else if want > 0 && (!slice.busy || (slice.fleet_ms < 0.0 && slice.hold.record_id == 0)) {
            (More::Nothing, 0)
        } else {
            (More::Share, 0)
        };
        slice.hold.store_holds = true;
        slice.first = more == More::Nothing && want > 0;
        slice.asking = want > 0 || more != More::Nothing;
        slice.all_most = if more == More::All {
            u32::try_from(most).unwrap_or(NOT_ALL - 1)
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
            record_id: slice.hold.record_id,
            most,
            sent_ms: timeline_ms,
            spent_ms: spent_ms(slice, timeline_ms),
            spend: slice.first,
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
        let lease_ms = book.terms.lease_ms;
        let slice = &mut book.entries[index as usize];
        slice.hold.in_flight = false;
        let kept = (answer.held - answer.granted) as f64;
        record.tokens = record.tokens.min(kept).max(0.0) + answer.granted as f64;
        slice.lease_end_ms = sent_ms + lease_ms;
        // A take of only what the asking call lacks (`More::Nothing`) is spent by that call, at
        // once: the store records none of it (bucketTake step 8), so what that call does not
        // spend (its quota denied it) is dropped as it is decided ([`Slice::spend_pending`]).
        let spend = slice.first && answer.granted > 0;
        slice.spend_pending = spend;
        // The store's tokens were as the answer says at some time between the send and now: the
        // estimate refills from the send, so that an answer read late (the process busy) never
        // keeps the key denied here once the bucket may hold its tokens again.
        let answered_ms = sent_ms.min(timeline_ms);
        slice.fleet_tokens = answer.tokens;
        slice.fleet_at_ms = answered_ms;
        slice.fleet_ms = answer.fleet_ms;
        let floor_ms = denial_floor_ms(lease_ms, policy.capacity, policy.refill_per_second);
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
        slice.hold.record_id = answer.record_id;
        slice.hold.store_holds = answer.held > if spend { answer.granted } else { 0 };
        slice.set_outage(None);
        if answer.granted > 0 {
            let first = std::mem::take(&mut slice.first);
            // (A grant is at most the capacity, at most 2**31.)
            slice.last_granted = if first {
                0
            } else {
                u32::try_from(answer.granted).unwrap_or(u32::MAX)
            };
            slice.hold.clear_short();
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
            // rest is the other hungry processes' share): the key is saturated. Once the slice
            // is spent, it is denied here (`local_denial_ms`); then this process takes all there
            // is (its share of it), so that the refill of the wait is not lost to the bucket's cap.
            slice.hold.mark_short(
                answered_ms
                    + local_denial_ms(
                        lease_ms,
                        policy.capacity,
                        policy.refill_per_second,
                        answer.tokens,
                    ),
            );
            slice.waited = true;
            slice.report_spent = answer.granted as f64 >= 0.75 * policy.capacity;
        }
        // Something to give back or report later: the key is looked at when it may be due.
        if slice.owes_word(record) {
            book.terms.queue(slice, index, timeline_ms);
        }
        let anomaly = self.check_store_clock(sent_ms, timeline_ms, answer.store_now_ms);
        (true, anomaly)
    }

    /// After a store answer that brought too little for a waiting call of `n` (others waiting
    /// took it): the call is denied here with the fleet's wait if the store is short of `n` at
    /// the monotonic reading `monotonic_ms` (the timeline now, not at the limiter's last call).
    pub fn slice_short_for(&self, index: u32, n: u64, monotonic_ms: f64) -> bool {
        let timeline_ms = self.timeline_at(monotonic_ms);
        self.fleet_tokens(index, timeline_ms)
            .is_some_and(|tokens| tokens < n as f64)
    }
}

/// Whether a key with `tokens` left in its slice asks the store in the background, no store call
/// being under way: to report a large slice spent (see [`Slice::report_spent`]), or, not short,
/// to fetch the next slice when this one is down to half of what it brought (or its lease is in
/// its last quarter).
fn fetch_wanted(slice: &Slice, tokens: f64, timeline_ms: f64, lease_ms: f64) -> bool {
    if slice.hold.in_flight {
        return false;
    }
    if slice.report_spent && tokens < 1.0 {
        return true;
    }
    if slice.hold.is_short(timeline_ms) || slice.last_granted == 0 {
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
