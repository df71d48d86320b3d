//! What a limiter has done since it was made, for `stats()`: plain counters the core bumps as it
//! decides, read without a clock.

use crate::anomaly::{Anomaly, AnomalyKind};

/// How many anomaly kinds there are (`AnomalyKind`'s variants, in declaration order).
pub const ANOMALY_KIND_COUNT: usize = AnomalyKind::ALL.len();

/// Counters since construction (a restored limiter starts from zero too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Decisions that allowed (`tryConsume`); a later `refund` does not take one back.
    pub allowed: u64,
    /// Decisions that denied. A call that throws is neither.
    pub denied: u64,
    /// Anomalies raised (on any call that reads the clocks: `status` and `refund` too), by
    /// [`Counters::anomaly_index`].
    pub anomalies: [u64; ANOMALY_KIND_COUNT],
    /// Keys the limiter dropped by itself: to make room for a new key at `max_keys`, or idle
    /// keys swept. `delete(key)` is not an eviction.
    pub evicted: u64,
    /// New keys refused with `ERR_KEY_LIMIT`.
    pub key_limit_refusals: u64,
}

impl Counters {
    /// A kind's position in [`Counters::anomalies`] (its declaration order).
    #[inline(always)]
    pub const fn anomaly_index(kind: AnomalyKind) -> usize {
        kind as usize
    }

    /// Counts the anomalies a call raised (the caller passes only this call's).
    #[inline]
    pub fn count_anomalies(&mut self, anomalies: &[Anomaly]) {
        for anomaly in anomalies {
            self.anomalies[Counters::anomaly_index(anomaly.kind)] += 1;
        }
    }

    /// The count of one kind.
    pub fn anomalies_of(&self, kind: AnomalyKind) -> u64 {
        self.anomalies[Counters::anomaly_index(kind)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anomaly::CallDeltas;

    #[test]
    fn every_anomaly_kind_has_its_own_counter() {
        for (position, kind) in AnomalyKind::ALL.iter().enumerate() {
            assert_eq!(
                Counters::anomaly_index(*kind),
                position,
                "{}",
                kind.as_str()
            );
        }
    }

    #[test]
    fn anomalies_are_counted_by_kind() {
        let deltas = CallDeltas {
            monotonic_delta_ms: 0.0,
            wall_delta_ms: -5_000.0,
            credited_ms: 0.0,
        };
        let mut counters = Counters::default();
        counters.count_anomalies(&[
            Anomaly::wall_step(deltas, -5_000.0),
            Anomaly::wall_step(deltas, -6_000.0),
            Anomaly::suspend(deltas, 1_000.0),
        ]);
        assert_eq!(counters.anomalies_of(AnomalyKind::WallStepBack), 2);
        assert_eq!(counters.anomalies_of(AnomalyKind::Suspend), 1);
        assert_eq!(counters.anomalies_of(AnomalyKind::PeriodSkip), 0);
    }
}
