//! The store protocol's terms as the core holds them (lib/share/protocol.js): what a store call
//! for a key sends, a fleet bucket's answer checked, and the constants the binding's contract
//! exports.

use crate::args::{finite_from, units};
use crate::bucket::refill_wait_ms;
use crate::error::{Error, ErrorCode};
use crate::keyed::KeyBuf;
use crate::text::js_number;

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

/// The store's answer to a `reserve`, as the JS face hands it over (checked by the store's
/// adapter, lib/share/protocol.js).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReserveAnswer {
    /// The units the call asked for at least (the request's `lacking`).
    pub lacking: u64,
    pub granted: u64,
    /// What the store has unreserved after the answer.
    pub unreserved: u64,
    /// The identity of the record the units were reserved in (0: the store named none).
    pub record_id: u64,
}

impl ReserveAnswer {
    /// Whether the answer leaves the key nothing: none unreserved, or none granted to a call
    /// that lacked units. The key is then short for [`QUOTA_SHORT_MS`].
    pub fn leaves_short(&self) -> bool {
        self.unreserved == 0 || (self.granted == 0 && self.lacking > 0)
    }
}

/// How long a key whose reservation's store answer left it nothing is denied here (its calls
/// not covered decided on that answer, with no store call): a flood on it costs about one store
/// call a second, and an operator's grant is seen within a second.
pub const QUOTA_SHORT_MS: f64 = 1_000.0;

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
    /// What the take grants is spent by the asking call at once (a take of only what it lacks,
    /// `More::Nothing`): the store records none of it as out to this process.
    pub spend: bool,
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

/// The store writes a slice off as spent `WRITE_OFF_FACTOR * leaseMs + WRITE_OFF_MARGIN_MS` of
/// fleet time after the call that took it reached the store (bucketTake step 4); the binding's
/// contract exports these, and a JS test holds lib/share/protocol.js's copies to them.
pub const WRITE_OFF_FACTOR: f64 = 1.1;
pub const WRITE_OFF_MARGIN_MS: f64 = 1_000.0;
/// How long a bucket record outlives its refill and write-off margins (bucketTake step 9).
pub const RECORD_KEPT_AFTER_MS: f64 = 60_000.0;
/// A busy key's share (bucketTake step 7) is a quarter of a fair share, so that a burst spread
/// over the processes strands little in their slices, but not less than the refill of this many
/// ms (a fast bucket's slices are spent within it anyway).
pub const SHARE_REFILL_MS: f64 = 250.0;

/// How long a saturated key is denied here at least (SPEC §15):
/// `min(leaseMs / 8, 1 s, C / (2R))`. The last term keeps a bucket that refills in less than a
/// second from being capped at `C` while its processes wait, so it still admits its rate.
pub fn denial_floor_ms(lease_ms: f64, capacity: f64, refill_per_second: f64) -> f64 {
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
    let wait_ms = refill_wait_ms(tokens, 1.0, refill_per_second);
    let least_ms = (denial_floor_ms(lease_ms, capacity, refill_per_second) * 1.3).min(1000.0);
    wait_ms.clamp(least_ms, 1000.0)
}

/// How long (fleet ms) the store counts an instance that found the bucket short among those
/// that share its refill (bucketTake step 7): the instance's local denial, with room for its
/// next call to reach the store (a quarter more, and 50 ms).
pub fn hunger_ms(lease_ms: f64, capacity: f64, refill_per_second: f64, tokens: f64) -> f64 {
    local_denial_ms(lease_ms, capacity, refill_per_second, tokens) * 1.25 + 50.0
}

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
pub(super) const CLOCK_RATE_SLACK: f64 = 1.001;
