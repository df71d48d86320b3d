//! the open calendar period of a limiter, held on a backwards step, advanced (and the
//! periods jumped over counted) on a forward one.

use crate::anomaly::{Anomaly, CallDeltas};
use std::sync::Arc;

use crate::calendar::{Period, PeriodSpec};

/// The open period of one period spec: held on a backwards step, advanced on a forward one.
/// `QuotaClock`'s quota has one; a keyed limiter has one per distinct spec, shared by its keys.
#[derive(Clone, Debug, Default)]
pub struct OpenPeriod {
    /// `None` until the first plausible wall reading.
    pub open: Option<Period>,
    /// A `period-regression` was raised and the wall clock has not come back into the period.
    regression_reported: bool,
    /// Where on the holder's timeline of credited real time the open period was entered: a
    /// backwards hold ends once the period's own length has been credited since.
    entered_at_ms: f64,
}

impl OpenPeriod {
    /// Opens `period`, entered at `timeline_ms` (the holder's credited real time).
    pub fn enter(&mut self, period: Period, timeline_ms: f64) {
        self.open = Some(period);
        self.regression_reported = false;
        self.entered_at_ms = timeline_ms;
    }

    /// Whether a hold of the open period is over at `timeline_ms`: the period's own length of
    /// real elapsed time has been credited since it was entered (one far-future reading must not
    /// freeze a quota for decades).
    fn hold_is_over(&self, open: &Period, timeline_ms: f64) -> bool {
        timeline_ms - self.entered_at_ms >= open.end_ms - open.start_ms
    }

    /// Makes the open period the right one for `wall_ms` (or holds it), raising period anomalies;
    /// `timeline_ms` is the holder's credited real time, this call's credit included.
    /// Returns whether another period is now open (its use starts at zero).
    pub fn observe(
        &mut self,
        spec: &PeriodSpec,
        wall_ms: f64,
        timeline_ms: f64,
        deltas: CallDeltas,
        anomalies: &mut Vec<Anomaly>,
    ) -> bool {
        let Some(open) = self.open.as_ref() else {
            self.enter(spec.period_for(wall_ms), timeline_ms);
            return true;
        };
        // The hot path: inside the cached period, no time-zone arithmetic.
        if open.contains(wall_ms) {
            self.hold();
            return false;
        }
        if wall_ms < open.start_ms && self.hold_is_over(open, timeline_ms) {
            let next = spec.period_for(wall_ms);
            anomalies.push(Anomaly::period_hold_ended(
                deltas,
                &open.id,
                timeline_ms - self.entered_at_ms,
                &next.id,
            ));
            self.enter(next, timeline_ms);
            return true;
        }
        if wall_ms < open.start_ms {
            if !self.regression_reported {
                self.regression_reported = true;
                anomalies.push(Anomaly::period_regression(
                    deltas,
                    &open.id,
                    open.start_ms,
                    wall_ms,
                ));
            }
            return false;
        }
        let next = spec.period_for(wall_ms);
        if next.slot == open.slot {
            // Only past the end of the calendar's range (JS Date's, year 275760): the last period
            // stays open with its consumption.
            return false;
        }
        let skipped = spec.periods_between(open, &next);
        if skipped > 0 {
            anomalies.push(Anomaly::period_skip(deltas, skipped, &open.id, &next.id));
        }
        self.enter(next, timeline_ms);
        true
    }

    /// The slot that would be open after observing `wall_ms` at `timeline_ms`, without observing
    /// it (`None`: no period would be open).
    pub fn slot_after(&self, spec: &PeriodSpec, wall_ms: f64, timeline_ms: f64) -> Option<i64> {
        match &self.open {
            Some(open)
                if wall_ms < open.end_ms
                    && !(wall_ms < open.start_ms && self.hold_is_over(open, timeline_ms)) =>
            {
                Some(open.slot)
            }
            _ => Some(spec.period_for(wall_ms).slot),
        }
    }

    /// Whether `wall_ms` is inside the open period.
    #[inline(always)]
    pub fn contains(&self, wall_ms: f64) -> bool {
        self.open
            .as_ref()
            .is_some_and(|open| open.contains(wall_ms))
    }

    /// The open period's slot, if one is open.
    #[inline(always)]
    pub fn slot(&self) -> Option<i64> {
        self.open.as_ref().map(|open| open.slot)
    }

    /// A reading inside the open period: the period holds, and a later regression is news again.
    #[inline]
    pub fn hold(&mut self) {
        self.regression_reported = false;
    }

    /// `ceil(periodEnd - wallNow)`: when the open period ends (never negative, even for a wall
    /// reading past the calendar's range).
    pub fn wait_ms(&self, wall_ms: f64) -> f64 {
        self.open
            .as_ref()
            .map_or(0.0, |open| (open.end_ms - wall_ms).ceil().max(0.0))
    }
}

/// A calendar quota's settings, shared by whatever holds its state: the limit, and the period
/// spec behind `Arc` (its cache of date-line jumps is kept once, however many hold it).
#[derive(Clone, Debug)]
pub struct QuotaPolicy {
    pub limit: u64,
    pub spec: Arc<PeriodSpec>,
}

impl QuotaPolicy {
    pub fn new(limit: u64, spec: PeriodSpec) -> QuotaPolicy {
        QuotaPolicy {
            limit,
            spec: Arc::new(spec),
        }
    }
}

/// A calendar quota's state: its spec's open period and the use in it.
#[derive(Clone, Debug, Default)]
pub struct QuotaState {
    pub period: OpenPeriod,
    /// Consumed in the open period.
    pub used: u64,
    /// Real elapsed time credited so far (the holder adds every call's credit), in ms: the
    /// timeline a hold is measured on.
    pub credited_ms: f64,
}

impl QuotaState {
    /// Makes the open period the right one for `wall_ms` (or holds it), raising period anomalies;
    /// a new period starts at zero use. The caller has added this call's credit to `credited_ms`.
    pub fn observe(
        &mut self,
        policy: &QuotaPolicy,
        wall_ms: f64,
        deltas: CallDeltas,
        anomalies: &mut Vec<Anomaly>,
    ) {
        if self
            .period
            .observe(&policy.spec, wall_ms, self.credited_ms, deltas, anomalies)
        {
            self.used = 0;
        }
    }

    pub fn remaining(&self, policy: &QuotaPolicy) -> u64 {
        policy.limit.saturating_sub(self.used)
    }

    /// Whether `n` more fit in the open period.
    #[inline(always)]
    pub fn admits(&self, policy: &QuotaPolicy, n: u64) -> bool {
        n <= self.remaining(policy)
    }

    /// `ceil(periodEnd - wallNow)`: when the open period ends.
    pub fn wait_ms(&self, wall_ms: f64) -> f64 {
        self.period.wait_ms(wall_ms)
    }
}
