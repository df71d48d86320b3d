//! The shared result buffer of the hot paths: a `Float64Array` the JS face and the native side
//! read and write by position (`crate::contract::buffer`).

use crate::contract::{basis_code, buffer, stats};
use crate::limiter::Decision;
use crate::stats::Counters;

/// The shared `Float64Array`, read and written one position at a time (never borrowed as a slice:
/// the JS face calls back in with the same buffer for each step of a call).
pub(crate) struct ResultBuffer(pub(crate) *mut f64);

impl ResultBuffer {
    pub(crate) fn get(&self, at: usize) -> f64 {
        assert!(at < buffer::LENGTH);
        // SAFETY: in bounds (the buffer has buffer::LENGTH f64s, checked in `create_registry`), kept
        // alive by the registry, and only touched on the JS thread that owns it.
        unsafe { self.0.add(at).read() }
    }

    pub(crate) fn set(&self, at: usize, value: f64) {
        assert!(at < buffer::LENGTH);
        // SAFETY: as in `get`.
        unsafe { self.0.add(at).write(value) }
    }

    /// The limiter's registry index, which the JS face writes as a `u32` into the first half of
    /// `buffer::LIMITER` (through a `Uint32Array` on the same memory; same machine, same byte
    /// order). Read as an integer, it needs no float conversion, which would sit on the chain of
    /// loads each call waits for before its first clock reading.
    pub(crate) fn limiter_index(&self) -> usize {
        // SAFETY: as in `get`; any bit pattern is a valid u32, and a wrong one names an index the
        // bounds check refuses or another live limiter, never memory.
        unsafe { self.0.add(buffer::LIMITER).cast::<u32>().read() as usize }
    }
}

/// Writes `decision` (status `STATUS_DECIDED`).
pub(crate) fn write_decision(result: &ResultBuffer, decision: &Decision) {
    result.set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED);
    result.set(buffer::ALLOWED, if decision.allowed { 1.0 } else { 0.0 });
    result.set(buffer::RETRY_AFTER_MS, decision.retry_after_ms);
    result.set(buffer::BASIS, basis_code(decision.retry_after_basis));
    result.set(buffer::TOKENS, decision.tokens);
    result.set(
        buffer::QUOTA_REMAINING,
        decision
            .quota_remaining
            .map_or(f64::NAN, |remaining| remaining as i64 as f64),
    );
}

/// Writes a limiter's counters and the keys it holds (`stats()`), as `crate::contract::stats`
/// lays them out. Counts stay exact as numbers up to 2^53.
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
