//! bookkeeping around the one reconciliation rule ([`reconcile`]): the previous readings,
//! the elapsed-realtime reader's baseline and the regression latch. `QuotaClock`'s [`Limiter`] and
//! the [`KeyedLimiter`] each own one: one reconciliation per call, whatever the key.
//!
//! [`Limiter`]: crate::limiter::Limiter
//! [`KeyedLimiter`]: crate::keyed::KeyedLimiter

use crate::anomaly::{Anomaly, CallDeltas};
use crate::calendar::MAX_WALL_MS;
use crate::clock::{
    clocks_agree, finite, reconcile, ClockSource, ReaderBaseline, SuspendPolicy, WallDivergence,
};
use crate::error::{Error, Reading};
use crate::kernel::CallReading;

#[derive(Clone, Debug)]
pub struct Reconciler {
    /// The suspend policy and the earliest plausible wall reading (`check_plausible` is set
    /// per call).
    rule: ReadingRule,
    pub(crate) last_monotonic_ms: f64,
    pub(crate) last_wall_ms: f64,
    reader_baseline: Option<ReaderBaseline>,
    /// Set by the first monotonic regression; every later call fails with it.
    regression: Option<(f64, f64)>,
}

/// Readings taken and reconciled but not applied yet: [`Reconciler::commit`] applies them.
#[derive(Clone, Copy, Debug)]
pub struct Reconciled {
    pub monotonic_ms: f64,
    pub wall_ms: f64,
    /// The call's deltas and what it credits (every anomaly of the call carries them).
    pub deltas: CallDeltas,
    /// Policy `refuse` met a wall jump it cannot tell apart: the call fails once re-anchored.
    pub refused: bool,
    pub reader_baseline: Option<ReaderBaseline>,
}

impl Reconciled {
    /// The readings as a kernel call uses them, its store's timeline at `timeline_ms`.
    #[inline(always)]
    pub fn reading(&self, timeline_ms: f64) -> CallReading {
        CallReading {
            monotonic_ms: self.monotonic_ms,
            wall_ms: self.wall_ms,
            timeline_ms,
            deltas: self.deltas,
        }
    }

    /// `ERR_AMBIGUOUS_WALL_JUMP` for a refused call (the readings re-anchor all the same).
    pub fn refusal(&self) -> Result<(), Error> {
        if !self.refused {
            return Ok(());
        }
        let CallDeltas {
            monotonic_delta_ms,
            wall_delta_ms,
            ..
        } = self.deltas;
        Err(Error::AmbiguousWallJump {
            monotonic_delta_ms,
            wall_delta_ms,
        })
    }
}

/// What a reconciler keeps between calls, as the reading rule reads it: the previous readings,
/// the elapsed-realtime reader's baseline and the regression latch. The in-process
/// [`Reconciler`] keeps them in its fields, the zone in its published state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anchors {
    pub last_monotonic_ms: f64,
    pub last_wall_ms: f64,
    pub reader_baseline: Option<ReaderBaseline>,
    /// The first monotonic regression `(previous, now)`: every later call fails with it.
    pub regression: Option<(f64, f64)>,
}

/// How a reconciler judges a call's readings: its suspend policy, and whether the call concerns
/// a quota (then a wall reading outside the calendar's range or before
/// `earliestPlausibleWallMs`, `earliest_plausible_wall_ms`, is an error).
#[derive(Clone, Copy, Debug)]
pub struct ReadingRule {
    pub suspend_policy: SuspendPolicy,
    pub check_plausible: bool,
    pub earliest_plausible_wall_ms: Option<f64>,
}

impl ReadingRule {
    /// The same rule, for a call that does (or does not) concern a quota.
    #[inline(always)]
    pub fn checking(self, check_plausible: bool) -> ReadingRule {
        ReadingRule {
            check_plausible,
            ..self
        }
    }

    /// The reading rule, written once for both reconcilers: takes one monotonic and one wall
    /// reading (none if a regression is latched) and reconciles them against `anchors`. Pure:
    /// a new monotonic regression is `ERR_MONOTONIC_REGRESSION` with `latched: false`, which the
    /// caller latches; on any error the anomalies pushed by this call are taken back.
    #[inline(always)]
    pub fn read<C: ClockSource + ?Sized>(
        &self,
        anchors: &Anchors,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Reconciled, Error> {
        if let Some((previous_ms, now_ms)) = anchors.regression {
            return Err(Error::MonotonicRegression {
                previous_ms,
                now_ms,
                latched: true,
            });
        }
        let monotonic_ms = finite(Reading::Monotonic, clock.monotonic_ms())?;
        let wall_ms = finite(Reading::Wall, clock.wall_ms())?;
        let monotonic_delta_ms = monotonic_ms - anchors.last_monotonic_ms;
        if monotonic_delta_ms < 0.0 {
            return Err(Error::MonotonicRegression {
                previous_ms: anchors.last_monotonic_ms,
                now_ms: monotonic_ms,
                latched: false,
            });
        }
        if self.check_plausible {
            check_wall_plausible(wall_ms, self.earliest_plausible_wall_ms)?;
        }
        let wall_delta_ms = wall_ms - anchors.last_wall_ms;
        let first_anomaly = anomalies.len();
        let mut reader_baseline = anchors.reader_baseline;
        let reconciled = reconcile(
            monotonic_ms,
            monotonic_delta_ms,
            wall_delta_ms,
            self.suspend_policy,
            &mut reader_baseline,
            || clock.elapsed_realtime_ms(),
            anomalies,
        );
        let reconciled = match reconciled {
            Ok(reconciled) => reconciled,
            Err(error) => {
                anomalies.truncate(first_anomaly);
                return Err(error);
            }
        };
        Ok(Reconciled {
            monotonic_ms,
            wall_ms,
            deltas: CallDeltas {
                monotonic_delta_ms,
                wall_delta_ms,
                credited_ms: reconciled.credited_ms,
            },
            refused: reconciled.divergence == WallDivergence::WallAheadRefused,
            reader_baseline,
        })
    }
}

impl Reconciler {
    /// Takes the starting readings (and the reader's baseline when there is a reader); returns the
    /// wall reading too, for the first quota period.
    pub fn new(
        suspend_policy: SuspendPolicy,
        earliest_plausible_wall_ms: Option<f64>,
        clock: &mut dyn ClockSource,
    ) -> Result<(Reconciler, f64), Error> {
        let monotonic_ms = finite(Reading::Monotonic, clock.monotonic_ms())?;
        let wall_ms = finite(Reading::Wall, clock.wall_ms())?;
        let reader_baseline = if clock.has_elapsed_realtime() {
            let elapsed_realtime_ms =
                finite(Reading::ElapsedRealtime, clock.elapsed_realtime_ms())?;
            Some(ReaderBaseline {
                elapsed_realtime_ms,
                monotonic_ms,
            })
        } else {
            None
        };
        let reconciler = Reconciler {
            rule: ReadingRule {
                suspend_policy,
                check_plausible: false,
                earliest_plausible_wall_ms,
            },
            last_monotonic_ms: monotonic_ms,
            last_wall_ms: wall_ms,
            reader_baseline,
            regression: None,
        };
        Ok((reconciler, wall_ms))
    }

    /// Whether a calendar quota can use `wall_ms`: inside the calendar's range and not
    /// before `earliestPlausibleWallMs`.
    #[inline(always)]
    pub fn is_plausible(&self, wall_ms: f64) -> bool {
        wall_ms.abs() <= MAX_WALL_MS
            && self
                .rule
                .earliest_plausible_wall_ms
                .is_none_or(|earliest| wall_ms >= earliest)
    }

    /// Takes one monotonic and one wall reading and reconciles them against the previous ones.
    /// Changes nothing but the regression latch: the caller applies the result with
    /// [`Reconciler::commit`], or drops it (then nothing happened). `check_plausible`: the call
    /// concerns a quota, so a wall reading outside the calendar's range or before
    /// `earliestPlausibleWallMs` is an error. On an error, the
    /// anomalies pushed by this call are taken back.
    #[inline(always)]
    pub fn read<C: ClockSource + ?Sized>(
        &mut self,
        clock: &mut C,
        check_plausible: bool,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Reconciled, Error> {
        let rule = self.rule.checking(check_plausible);
        let anchors = Anchors {
            last_monotonic_ms: self.last_monotonic_ms,
            last_wall_ms: self.last_wall_ms,
            reader_baseline: self.reader_baseline,
            regression: self.regression,
        };
        let reconciled = rule.read(&anchors, clock, anomalies);
        if let Err(Error::MonotonicRegression {
            previous_ms,
            now_ms,
            latched: false,
        }) = reconciled
        {
            self.regression = Some((previous_ms, now_ms));
        }
        reconciled
    }

    /// Re-anchors on the readings (the caller has credited `deltas.credited_ms`). Policy `refuse`
    /// then fails the call with `ERR_AMBIGUOUS_WALL_JUMP`: the next call proceeds.
    #[inline(always)]
    pub fn commit(&mut self, reconciled: &Reconciled) -> Result<(), Error> {
        self.last_monotonic_ms = reconciled.monotonic_ms;
        self.last_wall_ms = reconciled.wall_ms;
        self.reader_baseline = reconciled.reader_baseline;
        reconciled.refusal()
    }

    /// The usual call, on readings already taken: both clocks moved forward together (the reconcile table's
    /// first row) and nothing is latched. Then the monotonic delta is what to credit, and the
    /// caller re-anchors with [`Reconciler::anchor`]; `None` means the general path must decide.
    #[inline(always)]
    pub fn quiet_delta(&self, monotonic_ms: f64, wall_ms: f64) -> Option<f64> {
        let dm = monotonic_ms - self.last_monotonic_ms;
        let dw = wall_ms - self.last_wall_ms;
        // (A regression, dm < 0, is the general path's to report.)
        let agree = dm >= 0.0 && clocks_agree(dm, dw);
        (agree && self.regression.is_none()).then_some(dm)
    }

    #[inline(always)]
    pub fn anchor(&mut self, monotonic_ms: f64, wall_ms: f64) {
        self.last_monotonic_ms = monotonic_ms;
        self.last_wall_ms = wall_ms;
    }
}

/// The plausibility rule of a call that concerns a quota (both reconcilers, the in-process one
/// and the zone's, apply it to the wall reading of such a call): a reading outside the
/// calendar's range, or before `earliestPlausibleWallMs`, is an error.
/// [`Reconciler::is_plausible`] is the same rule as a yes or no, for the quiet calls.
pub fn check_wall_plausible(
    wall_ms: f64,
    earliest_plausible_wall_ms: Option<f64>,
) -> Result<(), Error> {
    if wall_ms.abs() > MAX_WALL_MS {
        return Err(Error::clock_outside_calendar(wall_ms));
    }
    if let Some(earliest_ms) = earliest_plausible_wall_ms {
        if wall_ms < earliest_ms {
            return Err(Error::ImplausibleWallClock {
                wall_ms,
                earliest_ms,
            });
        }
    }
    Ok(())
}
