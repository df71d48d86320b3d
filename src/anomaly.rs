//! the clock disagreements worth knowing about, each with a one-line `detail`.

use crate::text::ms;

/// What kind of clock disagreement an [`Anomaly`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnomalyKind {
    WallStepBack,
    WallStepForward,
    Suspend,
    AmbiguousWallJump,
    PeriodRegression,
    PeriodSkip,
    /// The store's clock disagreed with this process's elapsed time (a shared bucket, `share.bucket`).
    StoreClockStep,
}

impl AnomalyKind {
    /// Every kind, once (the JS face's `AnomalyKind` union).
    pub const ALL: [AnomalyKind; 7] = [
        AnomalyKind::WallStepBack,
        AnomalyKind::WallStepForward,
        AnomalyKind::Suspend,
        AnomalyKind::AmbiguousWallJump,
        AnomalyKind::PeriodRegression,
        AnomalyKind::PeriodSkip,
        AnomalyKind::StoreClockStep,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::WallStepBack => "wall-step-back",
            AnomalyKind::WallStepForward => "wall-step-forward",
            AnomalyKind::Suspend => "suspend",
            AnomalyKind::AmbiguousWallJump => "ambiguous-wall-jump",
            AnomalyKind::PeriodRegression => "period-regression",
            AnomalyKind::PeriodSkip => "period-skip",
            AnomalyKind::StoreClockStep => "store-clock-step",
        }
    }
}

/// The deltas of the call that raised an anomaly; every anomaly carries them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallDeltas {
    pub monotonic_delta_ms: f64,
    pub wall_delta_ms: f64,
    pub credited_ms: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// One readable sentence with the numbers, for a log line.
    pub detail: String,
    pub monotonic_delta_ms: f64,
    pub wall_delta_ms: f64,
    pub credited_ms: f64,
    pub suspended_ms: Option<f64>,
    /// wall-step-*: the unexplained part of the wall delta, signed.
    pub step_ms: Option<f64>,
    pub skipped: Option<u64>,
    /// period-*: the period now open.
    pub period_id: Option<String>,
}

impl Anomaly {
    fn new(kind: AnomalyKind, deltas: CallDeltas, detail: String) -> Anomaly {
        Anomaly {
            kind,
            detail,
            monotonic_delta_ms: deltas.monotonic_delta_ms,
            wall_delta_ms: deltas.wall_delta_ms,
            credited_ms: deltas.credited_ms,
            suspended_ms: None,
            step_ms: None,
            skipped: None,
            period_id: None,
        }
    }

    fn deltas_sentence(deltas: CallDeltas) -> String {
        format!(
            "monotonic clock advanced {} ms, wall clock {} ms; credited {} ms to the bucket",
            ms(deltas.monotonic_delta_ms),
            ms(deltas.wall_delta_ms),
            ms(deltas.credited_ms)
        )
    }

    /// A wall step the monotonic clock and the suspend reader do not explain.
    pub fn wall_step(deltas: CallDeltas, step_ms: f64) -> Anomaly {
        let (kind, direction) = if step_ms < 0.0 {
            (AnomalyKind::WallStepBack, "back")
        } else {
            (AnomalyKind::WallStepForward, "forward")
        };
        let detail = format!(
            "wall clock stepped {direction} by {} ms: {}",
            ms(step_ms.abs()),
            Self::deltas_sentence(deltas)
        );
        Anomaly {
            step_ms: Some(step_ms),
            ..Anomaly::new(kind, deltas, detail)
        }
    }

    pub fn suspend(deltas: CallDeltas, suspended_ms: f64) -> Anomaly {
        let detail = format!(
            "host was suspended for {} ms (elapsed-realtime reader): {}",
            ms(suspended_ms),
            Self::deltas_sentence(deltas)
        );
        Anomaly {
            suspended_ms: Some(suspended_ms),
            ..Anomaly::new(AnomalyKind::Suspend, deltas, detail)
        }
    }

    pub fn ambiguous_wall_jump(deltas: CallDeltas, policy: &str) -> Anomaly {
        let detail = format!(
            "wall clock ran {} ms ahead of the monotonic clock and no elapsed-realtime reader can tell a suspend from a step (suspendPolicy '{policy}'): {}",
            ms(deltas.wall_delta_ms - deltas.monotonic_delta_ms),
            Self::deltas_sentence(deltas)
        );
        Anomaly::new(AnomalyKind::AmbiguousWallJump, deltas, detail)
    }

    pub fn period_regression(
        deltas: CallDeltas,
        period_id: &str,
        period_start_ms: f64,
        wall_ms: f64,
    ) -> Anomaly {
        let detail = format!(
            "wall clock is {} ms before the start of the open period {period_id}; the period is held with its consumption",
            ms(period_start_ms - wall_ms)
        );
        Anomaly {
            period_id: Some(period_id.to_owned()),
            ..Anomaly::new(AnomalyKind::PeriodRegression, deltas, detail)
        }
    }

    /// A backwards hold that lasted the held period's own length of real elapsed time: the
    /// period follows the wall clock again.
    pub fn period_hold_ended(
        deltas: CallDeltas,
        held_id: &str,
        held_ms: f64,
        period_id: &str,
    ) -> Anomaly {
        let detail = format!(
            "the hold of period {held_id} ended: the wall clock stayed before its start while {} ms of real time passed, the period's own length; the period follows the wall clock again and {period_id} is open",
            ms(held_ms)
        );
        Anomaly {
            period_id: Some(period_id.to_owned()),
            ..Anomaly::new(AnomalyKind::PeriodRegression, deltas, detail)
        }
    }

    pub fn period_skip(
        deltas: CallDeltas,
        skipped: u64,
        from_id: &str,
        period_id: &str,
    ) -> Anomaly {
        let noun = if skipped == 1 { "period" } else { "periods" };
        let detail = format!(
            "wall clock jumped from period {from_id} to {period_id}, skipping {skipped} whole {noun}; wall clock advanced {} ms",
            ms(deltas.wall_delta_ms)
        );
        Anomaly {
            skipped: Some(skipped),
            period_id: Some(period_id.to_owned()),
            ..Anomaly::new(AnomalyKind::PeriodSkip, deltas, detail)
        }
    }

    /// The store's clock advanced `store_delta_ms` between two answers while this process's
    /// elapsed time allowed only `expected_ms` (shortest, longest); `received_delta_ms`: this
    /// process's time between receiving the two. `step_ms`: the unexplained part, signed.
    pub fn store_clock_step(
        received_delta_ms: f64,
        store_delta_ms: f64,
        step_ms: f64,
        expected_ms: (f64, f64),
    ) -> Anomaly {
        let detail = format!(
            "the store's clock advanced {} ms between two answers while this process's clock allowed {} to {} ms: a step of {} ms (the store's clock decides only when leases end)",
            ms(store_delta_ms),
            ms(expected_ms.0),
            ms(expected_ms.1),
            ms(step_ms)
        );
        let deltas = CallDeltas {
            monotonic_delta_ms: received_delta_ms,
            wall_delta_ms: store_delta_ms,
            credited_ms: 0.0,
        };
        Anomaly {
            step_ms: Some(step_ms),
            ..Anomaly::new(AnomalyKind::StoreClockStep, deltas, detail)
        }
    }
}
