//! SPEC §7: the open calendar period of a limiter, held on a backwards step, advanced (and the
//! periods jumped over counted) on a forward one.

use crate::anomaly::{Anomaly, CallDeltas};
use crate::calendar::{Period, PeriodSpec};

#[derive(Clone, Debug)]
pub struct Quota {
    pub limit: u64,
    pub spec: PeriodSpec,
    /// `None` until the first plausible wall reading.
    pub open: Option<Period>,
    /// Consumed in the open period.
    pub used: u64,
    /// A `period-regression` was raised and the wall clock has not come back into the period.
    regression_reported: bool,
}

impl Quota {
    pub fn new(limit: u64, spec: PeriodSpec) -> Quota {
        Quota { limit, spec, open: None, used: 0, regression_reported: false }
    }

    /// Makes the open period the right one for `wall_ms` (or holds it), raising period anomalies.
    pub fn observe(&mut self, wall_ms: f64, deltas: CallDeltas, anomalies: &mut Vec<Anomaly>) {
        let Some(open) = self.open.as_ref() else {
            self.open = Some(self.spec.period_for(wall_ms));
            return;
        };
        // The hot path: inside the cached period, no time-zone arithmetic.
        if open.contains(wall_ms) {
            self.hold();
            return;
        }
        if wall_ms < open.start_ms {
            if !self.regression_reported {
                self.regression_reported = true;
                anomalies.push(Anomaly::period_regression(deltas, &open.id, open.start_ms, wall_ms));
            }
            return;
        }
        let next = self.spec.period_for(wall_ms);
        if next.slot == open.slot {
            // Only past the end of the calendar's range (JS Date's, year 275760): the last period
            // stays open with its consumption.
            return;
        }
        let skipped = self.spec.periods_between(open, &next);
        if skipped > 0 {
            anomalies.push(Anomaly::period_skip(deltas, skipped, &open.id, &next.id));
        }
        self.open = Some(next);
        self.used = 0;
        self.regression_reported = false;
    }

    /// A reading inside the open period: the period holds, and a later regression is news again.
    #[inline]
    pub fn hold(&mut self) {
        self.regression_reported = false;
    }

    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// Whether `n` more fit in the open period.
    pub fn admits(&self, n: u64) -> bool {
        n <= self.remaining()
    }

    /// `ceil(periodEnd - wallNow)`: when the open period ends (never negative, even for a wall
    /// reading past the calendar's range).
    pub fn wait_ms(&self, wall_ms: f64) -> f64 {
        self.open.as_ref().map_or(0.0, |open| (open.end_ms - wall_ms).ceil().max(0.0))
    }
}
