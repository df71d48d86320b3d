//! The shared result buffer of the JS↔native calls: a `Float64Array` (one per registry, and one
//! per keyed limiter) that the JS face and the native side read and write by position. Its
//! layout, statuses and codes are defined here once; `contract()` exports them and the JS face
//! reads them at load.
//!
//! In: `N_OR_STATUS` (tokens asked for), `LIMITER` (a QuotaClock's registry index, written as a
//! `u32` into the position's first half) or `OPERATION` (a keyed limiter's), and, when the JS
//! face supplies them, the readings `MONOTONIC_MS`..`HAS_ELAPSED_REALTIME`. Out: the status in
//! `N_OR_STATUS`, then the decision; or, for a call that stopped for something only the JS face
//! can bring ([`Needs`]), what it needs (and the readings it took, for the JS reader).
// Pure: `cargo test` compiles it (and its layout tests) without the binding around it.
#![cfg_attr(test, allow(dead_code))]

use crate::limiter::{Decision, RetryBasis};
use crate::stats::{Counters, ANOMALY_KIND_COUNT};

pub(crate) const N_OR_STATUS: usize = 0;
pub(crate) const ALLOWED: usize = 1;
pub(crate) const RETRY_AFTER_MS: usize = 2;
pub(crate) const BASIS: usize = 3;
pub(crate) const TOKENS: usize = 4;
/// NaN without a quota.
pub(crate) const QUOTA_REMAINING: usize = 5;
/// A QuotaClock's registry index (a `u32`).
pub(crate) const LIMITER: usize = 6;
/// A keyed limiter's operation: `OPERATION_CONSUME` or `OPERATION_REFUND`.
pub(crate) const OPERATION: usize = 6;
/// In: the readings taken in JS; out (status `NEEDS_READER`): those the stopped call took.
pub(crate) const MONOTONIC_MS: usize = 7;
pub(crate) const WALL_MS: usize = 8;
pub(crate) const ELAPSED_REALTIME_MS: usize = 9;
/// In: 1 when `ELAPSED_REALTIME_MS` holds a reading.
pub(crate) const HAS_ELAPSED_REALTIME: usize = 10;
/// Out, with a decision for a limiter (or key) with a quota: the slot of the period its
/// units count in, for giving them back to that period only.
pub(crate) const PERIOD_SLOT: usize = 11;
pub(crate) const LENGTH: usize = 12;

pub(crate) const STATUS_DECIDED: f64 = 0.0;
pub(crate) const STATUS_DECIDED_WITH_ANOMALIES: f64 = 1.0;
pub(crate) const STATUS_ERROR: f64 = 2.0;
/// [`Needs::Reader`].
pub(crate) const STATUS_NEEDS_READER: f64 = 3.0;
/// [`Needs::Readings`].
pub(crate) const STATUS_NEEDS_READINGS: f64 = 4.0;
/// [`Needs::Policy`].
pub(crate) const STATUS_NEEDS_POLICY: f64 = 5.0;
/// A shared consume its reservation does not cover: nothing was consumed, and
/// `RETRY_AFTER_MS` holds the units it lacks; the JS face makes (or joins) a store call.
pub(crate) const STATUS_NEEDS_STORE: f64 = 6.0;
/// A shared consume was decided and the share driver has work: a background refill of the
/// key's reservation, or give-backs of dropped keys.
pub(crate) const STATUS_DECIDED_WITH_WORK: f64 = 7.0;
/// A shared consume its key's cells do not cover (`share.bucket`): nothing was consumed; the
/// JS face makes (or joins) an acquire of the key's cells.
pub(crate) const STATUS_NEEDS_SLICE: f64 = 8.0;

pub(crate) const OPERATION_CONSUME: f64 = 0.0;
pub(crate) const OPERATION_REFUND: f64 = 1.0;
/// A shared limiter's consume (`crate::keyed::ShareMode`): from the reservation, right after
/// a store answer, or with the store unavailable and `failOpen` on.
pub(crate) const OPERATION_SHARED_CONSUME: f64 = 2.0;
pub(crate) const OPERATION_SHARED_AFTER_STORE: f64 = 3.0;
pub(crate) const OPERATION_SHARED_FAIL_OPEN: f64 = 4.0;

/// `BASIS` when a decision has no retry-after basis (`null`); the others are [`basis_code`]'s.
pub(crate) const BASIS_NONE: f64 = 0.0;

/// `'block'`'s code: a keyed limiter's block of a key (lib/keyed/blocks.js; a zone's, its
/// `Outcome::Blocked`), never the kernel's decision, so it is no [`RetryBasis`]; listed in the
/// contract with the others.
pub(crate) const BASIS_BLOCK: f64 = 3.0;

/// A retry-after basis as the result buffer codes it (`BASIS_NONE` for none).
#[inline]
pub(crate) fn basis_code(basis: Option<RetryBasis>) -> f64 {
    match basis {
        None => BASIS_NONE,
        Some(RetryBasis::MonotonicRefill) => 1.0,
        Some(RetryBasis::WallPeriod) => 2.0,
    }
}

/// What a call needs from the JS face before it can go on. The call read and changed nothing
/// (beyond the readings it took); the JS face brings it and makes the same call again, with the
/// readings in the buffer. Every limiter kind and every call (the raw `tryConsume`s and the
/// slow entry points alike) says it the one way, [`Needs::write`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Needs {
    /// The limiter's clock is a JS clock: read it.
    Readings,
    /// A JS elapsed-realtime reader must be read; resume on the monotonic and wall readings the
    /// call took (`taken`), so that one call is reconciled on one set of readings.
    Reader { taken: (f64, f64) },
    /// A keyed limiter has a `policy` to call for a key it does not hold.
    Policy,
}

impl Needs {
    /// The status that says it (and, for the reader, the readings to resume on).
    pub(crate) fn write(self, result: &ResultBuffer) {
        let status = match self {
            Needs::Readings => STATUS_NEEDS_READINGS,
            Needs::Policy => STATUS_NEEDS_POLICY,
            Needs::Reader {
                taken: (monotonic_ms, wall_ms),
            } => {
                result.set(MONOTONIC_MS, monotonic_ms);
                result.set(WALL_MS, wall_ms);
                STATUS_NEEDS_READER
            }
        };
        result.set(N_OR_STATUS, status);
    }
}

/// What a call ends with when it did not fail: its value, or what it needs first.
pub(crate) type Step<T> = Result<T, Needs>;

/// Ends a call made outside the raw functions: status `STATUS_DECIDED` and its value, or what it
/// needs first (and no value). The JS face reads the status either way.
pub(crate) fn settle<T>(result: &ResultBuffer, step: Step<T>) -> Option<T> {
    match step {
        Ok(value) => {
            result.set(N_OR_STATUS, STATUS_DECIDED);
            Some(value)
        }
        Err(needs) => {
            needs.write(result);
            None
        }
    }
}

/// Readings the JS face took for this call; `None` where the clock is read natively.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Supplied {
    pub monotonic_ms: Option<f64>,
    pub wall_ms: Option<f64>,
    pub elapsed_realtime_ms: Option<f64>,
}

/// The shared `Float64Array`, read and written one position at a time (never borrowed as a slice:
/// the JS face calls back in with the same buffer for each step of a call).
pub(crate) struct ResultBuffer(pub(crate) *mut f64);

impl ResultBuffer {
    pub(crate) fn get(&self, at: usize) -> f64 {
        assert!(at < LENGTH);
        // SAFETY: in bounds (the buffer has LENGTH f64s, checked where it is made), kept alive by
        // its owner, and only touched on the JS thread that owns it.
        unsafe { self.0.add(at).read() }
    }

    pub(crate) fn set(&self, at: usize, value: f64) {
        assert!(at < LENGTH);
        // SAFETY: as in `get`.
        unsafe { self.0.add(at).write(value) }
    }

    /// The limiter's registry index, which the JS face writes as a `u32` into the first half of
    /// `LIMITER` (through a `Uint32Array` on the same memory; same machine, same byte order).
    /// Read as an integer, it needs no float conversion, which would sit on the chain of loads
    /// each call waits for before its first clock reading.
    pub(crate) fn limiter_index(&self) -> usize {
        // SAFETY: as in `get`; any bit pattern is a valid u32, and a wrong one names an index the
        // bounds check refuses or another live limiter, never memory.
        unsafe { self.0.add(LIMITER).cast::<u32>().read() as usize }
    }

    /// The readings the JS face wrote (`supplied`), or none (the clock is read natively).
    pub(crate) fn readings(&self, supplied: bool) -> Supplied {
        if !supplied {
            return Supplied::default();
        }
        Supplied {
            monotonic_ms: Some(self.get(MONOTONIC_MS)),
            wall_ms: Some(self.get(WALL_MS)),
            elapsed_realtime_ms: (self.get(HAS_ELAPSED_REALTIME) == 1.0)
                .then(|| self.get(ELAPSED_REALTIME_MS)),
        }
    }
}

/// Writes `decision` (status `STATUS_DECIDED`).
pub(crate) fn write_decision(result: &ResultBuffer, decision: &Decision) {
    result.set(N_OR_STATUS, STATUS_DECIDED);
    result.set(ALLOWED, if decision.allowed { 1.0 } else { 0.0 });
    result.set(RETRY_AFTER_MS, decision.retry_after_ms);
    result.set(BASIS, basis_code(decision.retry_after_basis));
    result.set(TOKENS, decision.tokens);
    result.set(
        QUOTA_REMAINING,
        decision
            .quota_remaining
            .map_or(f64::NAN, |remaining| remaining as i64 as f64),
    );
}

/// A call a block denied: `left_ms` of the block left (rounded up), the key's tokens and quota
/// remaining as its status has them. (A zone's: zones are Linux's.)
#[cfg(target_os = "linux")]
#[cold]
#[inline(never)]
pub(crate) fn write_block(
    result: &ResultBuffer,
    left_ms: f64,
    tokens: f64,
    remaining: Option<u64>,
) {
    result.set(N_OR_STATUS, STATUS_DECIDED);
    result.set(ALLOWED, 0.0);
    result.set(RETRY_AFTER_MS, left_ms.ceil());
    result.set(BASIS, BASIS_BLOCK);
    result.set(TOKENS, tokens);
    result.set(
        QUOTA_REMAINING,
        remaining.map_or(f64::NAN, |remaining| remaining as i64 as f64),
    );
}

/// Where `stats()` writes a limiter's counters (`crate::stats::Counters`) in its result buffer:
/// the decisions, the keys held, the evictions, the key-limit refusals, then one position per
/// anomaly kind in `AnomalyKind::ALL` order (the order `contract()`'s `anomalyKinds` lists).
pub(crate) mod stats {
    use super::ANOMALY_KIND_COUNT;

    pub(crate) const ALLOWED: usize = 0;
    pub(crate) const DENIED: usize = 1;
    pub(crate) const KEYS: usize = 2;
    pub(crate) const EVICTED: usize = 3;
    pub(crate) const KEY_LIMIT_REFUSALS: usize = 4;
    /// The first anomaly kind's count; the others follow.
    pub(crate) const ANOMALIES: usize = 5;
    pub(crate) const LENGTH: usize = ANOMALIES + ANOMALY_KIND_COUNT;
    // The counters are written into the result buffer: they must fit it.
    const _: () = assert!(LENGTH <= super::LENGTH);
}

/// Writes a limiter's counters and the keys it holds (`stats()`), as [`stats`] lays them out.
/// Counts stay exact as numbers up to 2^53.
pub(crate) fn write_stats(result: &ResultBuffer, counters: &Counters, keys: usize) {
    result.set(stats::ALLOWED, counters.allowed as f64);
    result.set(stats::DENIED, counters.denied as f64);
    result.set(stats::KEYS, keys as f64);
    result.set(stats::EVICTED, counters.evicted as f64);
    result.set(
        stats::KEY_LIMIT_REFUSALS,
        counters.key_limit_refusals as f64,
    );
    for (offset, &count) in counters.anomalies.iter().enumerate() {
        result.set(stats::ANOMALIES + offset, count as f64);
    }
}

#[cfg(test)]
mod tests;
