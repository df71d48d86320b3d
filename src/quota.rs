//! the open calendar period of a limiter, held on a backwards step, advanced (and the
//! periods jumped over counted) on a forward one.

use std::borrow::Cow;
use std::sync::Arc;

use crate::anomaly::{Anomaly, CallDeltas};
use crate::calendar::{inside_period, Period, PeriodSlot, PeriodSpec};

/// The units a quota of `limit` has left after `used` (never below 0): the one rule for every
/// holder of a quota's count.
#[inline(always)]
pub fn remaining(limit: u64, used: u64) -> u64 {
    limit.saturating_sub(used)
}

/// What the period rule reads of an open period, however its holder stores it.
#[derive(Clone, Copy, Debug)]
pub struct PeriodView {
    pub slot: PeriodSlot,
    pub start_ms: f64,
    pub end_ms: f64,
    /// A `period-regression` was raised and the wall clock has not come back into the period.
    pub regression_reported: bool,
    /// Where on the holder's timeline of credited real time the period was entered.
    pub entered_at_ms: f64,
}

impl PeriodView {
    #[inline(always)]
    pub fn contains(&self, wall_ms: f64) -> bool {
        inside_period(wall_ms, self.start_ms, self.end_ms)
    }
}

/// What a reading does to the open period ([`OpenPeriod::next`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// No period was open: this one opens (no anomaly).
    Open(Period),
    /// The reading is inside the open period: it holds, and a later regression is news again.
    Inside,
    /// A reading before the open period: the period is held; `report` on the first such reading
    /// (a `period-regression`).
    Held { report: bool },
    /// A backwards hold lasted the period's own length: `next` opens (a `period-hold-ended`).
    HoldEnded { next: Period, held_ms: f64 },
    /// A reading past the open period: this one opens (a `period-skip` if periods were jumped).
    Advance(Period),
    /// Past the end of the calendar's range: the last period stays open with its use.
    Stay,
}

impl Transition {
    /// The anomaly this transition raises, if any. `open` gives the open period `view` describes
    /// (called only when an anomaly names it).
    pub fn anomaly<'a>(
        &self,
        spec: &PeriodSpec,
        view: &PeriodView,
        open: impl FnOnce() -> Cow<'a, Period>,
        wall_ms: f64,
        deltas: CallDeltas,
    ) -> Option<Anomaly> {
        match self {
            Transition::Held { report: true } => Some(Anomaly::period_regression(
                deltas,
                &open().id,
                view.start_ms,
                wall_ms,
            )),
            Transition::HoldEnded { next, held_ms } => Some(Anomaly::period_hold_ended(
                deltas,
                &open().id,
                *held_ms,
                &next.id,
            )),
            Transition::Advance(next) => {
                let open = open();
                let skipped = spec.periods_between(&open, next);
                (skipped > 0).then(|| Anomaly::period_skip(deltas, skipped, &open.id, &next.id))
            }
            Transition::Open(_)
            | Transition::Inside
            | Transition::Held { report: false }
            | Transition::Stay => None,
        }
    }
}

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

    /// What the period rule reads of the open period (`None`: no period is open).
    #[inline(always)]
    pub fn view(&self) -> Option<PeriodView> {
        self.open.as_ref().map(|open| PeriodView {
            slot: open.slot,
            start_ms: open.start_ms,
            end_ms: open.end_ms,
            regression_reported: self.regression_reported,
            entered_at_ms: self.entered_at_ms,
        })
    }

    /// The period rule, written once for every holder of an open period (this one, and the
    /// zone's, which keeps it in shared memory): what a reading of `wall_ms` at `timeline_ms`
    /// (the holder's credited real time, this call's credit included) does to the open period
    /// `view`. Pure: the holder applies the transition and raises its anomaly.
    pub fn next(
        view: Option<PeriodView>,
        spec: &PeriodSpec,
        wall_ms: f64,
        timeline_ms: f64,
    ) -> Transition {
        let Some(open) = view else {
            return Transition::Open(spec.period_for(wall_ms));
        };
        // Inside the open period: no time-zone arithmetic.
        if open.contains(wall_ms) {
            return Transition::Inside;
        }
        if wall_ms < open.start_ms {
            // One far-future reading must not freeze a quota for decades: a backwards hold ends
            // once the period's own length of real elapsed time has been credited since.
            if timeline_ms - open.entered_at_ms >= open.end_ms - open.start_ms {
                return Transition::HoldEnded {
                    next: spec.period_for(wall_ms),
                    held_ms: timeline_ms - open.entered_at_ms,
                };
            }
            return Transition::Held {
                report: !open.regression_reported,
            };
        }
        let next = spec.period_for(wall_ms);
        if next.slot == open.slot {
            // Only past the end of the calendar's range (JS Date's, year 275760): the last period
            // stays open with its consumption.
            return Transition::Stay;
        }
        Transition::Advance(next)
    }

    /// The slot that would be open after a reading of `wall_ms` at `timeline_ms`, without
    /// observing it.
    pub fn slot_after(
        view: Option<PeriodView>,
        spec: &PeriodSpec,
        wall_ms: f64,
        timeline_ms: f64,
    ) -> PeriodSlot {
        match Self::next(view, spec, wall_ms, timeline_ms) {
            Transition::Open(next)
            | Transition::HoldEnded { next, .. }
            | Transition::Advance(next) => next.slot,
            Transition::Inside | Transition::Held { .. } | Transition::Stay => {
                view.map_or(PeriodSlot(0), |open| open.slot)
            }
        }
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
        let view = self.view();
        let transition = Self::next(view, spec, wall_ms, timeline_ms);
        if let (Some(view), Some(open)) = (view, self.open.as_ref()) {
            if let Some(anomaly) =
                transition.anomaly(spec, &view, || Cow::Borrowed(open), wall_ms, deltas)
            {
                anomalies.push(anomaly);
            }
        }
        match transition {
            Transition::Inside => {
                self.hold();
                false
            }
            Transition::Held { report } => {
                self.regression_reported |= report;
                false
            }
            Transition::Stay => false,
            Transition::Open(next)
            | Transition::HoldEnded { next, .. }
            | Transition::Advance(next) => {
                self.enter(next, timeline_ms);
                true
            }
        }
    }

    /// The period rule's first branch, as the quiet paths apply it: a reading inside the open
    /// period holds it ([`Transition::Inside`]: no anomaly, no time-zone arithmetic). `false`,
    /// nothing changed: the reading is not inside, and the general path applies
    /// [`OpenPeriod::next`].
    #[inline(always)]
    pub fn hold_if_inside(&mut self, wall_ms: f64) -> bool {
        if !self.contains(wall_ms) {
            return false;
        }
        self.hold();
        true
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
    pub fn slot(&self) -> Option<PeriodSlot> {
        self.open.as_ref().map(|open| open.slot)
    }

    /// A reading inside the open period: the period holds, and a later regression is news again.
    #[inline]
    pub fn hold(&mut self) {
        self.regression_reported = false;
    }
}

/// `ceil(periodEnd - wallNow)`, never negative (even for a wall reading past the calendar's
/// range): how long a quota that is used up waits for its period to end.
#[inline]
pub fn wait_until_ms(end_ms: f64, wall_ms: f64) -> f64 {
    (end_ms - wall_ms).ceil().max(0.0)
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
        remaining(policy.limit, self.used)
    }
}
