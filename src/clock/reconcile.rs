//! how much real time passed, from a monotonic and a wall delta taken together.

use crate::anomaly::{Anomaly, CallDeltas};
use crate::error::Error;

/// What to credit when the wall clock runs ahead and nothing can tell a suspend from a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuspendPolicy {
    /// Credit only the monotonic delta (a suspend earns nothing).
    Ignore,
    /// Credit the wall delta (a forward step earns refill too).
    Credit,
    /// Credit the monotonic delta, then refuse the call with `ERR_AMBIGUOUS_WALL_JUMP`.
    Refuse,
}

impl SuspendPolicy {
    /// Every policy, once (the JS face's `suspendPolicy` union).
    pub const ALL: [SuspendPolicy; 3] = [
        SuspendPolicy::Ignore,
        SuspendPolicy::Credit,
        SuspendPolicy::Refuse,
    ];

    pub fn parse(text: &str) -> Option<SuspendPolicy> {
        match text {
            "ignore" => Some(SuspendPolicy::Ignore),
            "credit" => Some(SuspendPolicy::Credit),
            "refuse" => Some(SuspendPolicy::Refuse),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SuspendPolicy::Ignore => "ignore",
            SuspendPolicy::Credit => "credit",
            SuspendPolicy::Refuse => "refuse",
        }
    }
}

/// The elapsed-realtime reader's baseline `(er₀, m₀)`, retaken at every reader call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReaderBaseline {
    pub elapsed_realtime_ms: f64,
    pub monotonic_ms: f64,
}

/// Which row of the reconcile table the readings fell in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WallDivergence {
    Agree,
    WallBehind,
    /// Settled by the elapsed-realtime reader.
    WallAheadSettled,
    WallAheadAmbiguous,
    /// Policy `refuse`: the caller credits `credited_ms`, re-anchors and throws.
    WallAheadRefused,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reconciliation {
    /// Real elapsed time to credit to the bucket.
    pub credited_ms: f64,
    pub divergence: WallDivergence,
}

/// `tol = 250 ms + 500 ppm × dm`: what two honest clocks may drift apart by.
pub fn tolerance_ms(monotonic_delta_ms: f64) -> f64 {
    250.0 + 0.0005 * monotonic_delta_ms
}

/// The rule's first test, and the usual answer: the wall delta is within `tol` of the monotonic
/// delta, so both clocks moved together. Written so that a NaN anywhere fails it. The quiet path
/// of each limiter asks this too, before it takes the monotonic delta as what to credit.
#[inline(always)]
pub fn clocks_agree(monotonic_delta_ms: f64, wall_delta_ms: f64) -> bool {
    let tol = tolerance_ms(monotonic_delta_ms);
    wall_delta_ms >= monotonic_delta_ms - tol && wall_delta_ms <= monotonic_delta_ms + tol
}

/// The one place the reconciliation rule lives. `read_elapsed_realtime` is called only when the
/// wall clock runs ahead and a reader exists (`baseline` is `Some`), so the usual call reads two
/// clocks. On a reader error nothing has changed. Clock anomalies are pushed onto `anomalies`.
#[inline(always)]
pub fn reconcile(
    monotonic_ms: f64,
    monotonic_delta_ms: f64,
    wall_delta_ms: f64,
    policy: SuspendPolicy,
    baseline: &mut Option<ReaderBaseline>,
    read_elapsed_realtime: impl FnOnce() -> Result<f64, Error>,
    anomalies: &mut Vec<Anomaly>,
) -> Result<Reconciliation, Error> {
    let dm = monotonic_delta_ms;
    let dw = wall_delta_ms;
    let tol = tolerance_ms(dm);
    let deltas = |credited_ms| CallDeltas {
        monotonic_delta_ms: dm,
        wall_delta_ms: dw,
        credited_ms,
    };

    if clocks_agree(dm, dw) {
        return Ok(Reconciliation {
            credited_ms: dm,
            divergence: WallDivergence::Agree,
        });
    }
    if dw < dm - tol {
        // The wall was set back: the monotonic delta is the whole truth.
        anomalies.push(Anomaly::wall_step(deltas(dm), dw - dm));
        return Ok(Reconciliation {
            credited_ms: dm,
            divergence: WallDivergence::WallBehind,
        });
    }
    let wall_ahead = dw > dm + tol;
    if !wall_ahead {
        // Neither behind nor ahead, yet not agreeing: a delta too large to compare (an infinite
        // one). It is credited as the clocks agreeing, as it always was.
        return Ok(Reconciliation {
            credited_ms: dm,
            divergence: WallDivergence::Agree,
        });
    }

    if let Some(previous) = baseline.as_mut() {
        let elapsed_realtime_ms = super::finite(
            crate::error::Reading::ElapsedRealtime,
            read_elapsed_realtime(),
        )?;
        // Measured from the reader's own baseline, so a suspend hidden earlier by an opposite
        // wall step is claimed now.
        let suspended_ms = ((elapsed_realtime_ms - previous.elapsed_realtime_ms)
            - (monotonic_ms - previous.monotonic_ms))
            .max(0.0);
        *previous = ReaderBaseline {
            elapsed_realtime_ms,
            monotonic_ms,
        };
        let credited_ms = dm + suspended_ms;
        let step_ms = dw - dm - suspended_ms;
        if suspended_ms > 0.0 {
            anomalies.push(Anomaly::suspend(deltas(credited_ms), suspended_ms));
        }
        if step_ms > tol || step_ms < -tol {
            anomalies.push(Anomaly::wall_step(deltas(credited_ms), step_ms));
        }
        return Ok(Reconciliation {
            credited_ms,
            divergence: WallDivergence::WallAheadSettled,
        });
    }

    let (credited_ms, divergence) = match policy {
        SuspendPolicy::Ignore => (dm, WallDivergence::WallAheadAmbiguous),
        SuspendPolicy::Credit => (dw, WallDivergence::WallAheadAmbiguous),
        SuspendPolicy::Refuse => {
            return Ok(Reconciliation {
                credited_ms: dm,
                divergence: WallDivergence::WallAheadRefused,
            })
        }
    };
    anomalies.push(Anomaly::ambiguous_wall_jump(
        deltas(credited_ms),
        policy.as_str(),
    ));
    Ok(Reconciliation {
        credited_ms,
        divergence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anomaly::AnomalyKind;

    fn no_reader() -> Result<f64, Error> {
        panic!("the reader must not be called")
    }

    fn run(dm: f64, dw: f64, policy: SuspendPolicy) -> (Reconciliation, Vec<Anomaly>) {
        let mut anomalies = Vec::new();
        let result = reconcile(
            1_000_000.0 + dm,
            dm,
            dw,
            policy,
            &mut None,
            no_reader,
            &mut anomalies,
        )
        .unwrap();
        (result, anomalies)
    }

    #[test]
    fn readings_within_tolerance_agree_and_credit_the_monotonic_delta() {
        // tol at dm = 1000 s is 250 + 500 = 750 ms.
        let (result, anomalies) = run(1_000_000.0, 1_000_750.0, SuspendPolicy::Credit);
        assert_eq!(
            result,
            Reconciliation {
                credited_ms: 1_000_000.0,
                divergence: WallDivergence::Agree
            }
        );
        assert!(anomalies.is_empty());
        let (result, _) = run(1_000_000.0, 999_250.0, SuspendPolicy::Credit);
        assert_eq!(result.divergence, WallDivergence::Agree);
    }

    #[test]
    fn a_wall_set_back_credits_the_full_monotonic_delta() {
        let (result, anomalies) = run(60_000.0, -3_540_000.0, SuspendPolicy::Ignore);
        assert_eq!(result.credited_ms, 60_000.0);
        assert_eq!(anomalies.len(), 1);
        assert_eq!(anomalies[0].kind, AnomalyKind::WallStepBack);
        assert_eq!(anomalies[0].step_ms, Some(-3_600_000.0));
    }

    #[test]
    fn an_ambiguous_jump_credits_by_policy() {
        let (ignore, a) = run(1_000.0, 3_601_000.0, SuspendPolicy::Ignore);
        assert_eq!(ignore.credited_ms, 1_000.0);
        assert_eq!(a[0].kind, AnomalyKind::AmbiguousWallJump);
        let (credit, a) = run(1_000.0, 3_601_000.0, SuspendPolicy::Credit);
        assert_eq!(credit.credited_ms, 3_601_000.0);
        assert_eq!(a[0].credited_ms, 3_601_000.0);
        let (refuse, a) = run(1_000.0, 3_601_000.0, SuspendPolicy::Refuse);
        assert_eq!(
            refuse,
            Reconciliation {
                credited_ms: 1_000.0,
                divergence: WallDivergence::WallAheadRefused
            }
        );
        assert!(a.is_empty());
    }

    #[test]
    fn the_reader_settles_a_suspend_and_credits_it_whatever_the_policy() {
        let mut baseline = Some(ReaderBaseline {
            elapsed_realtime_ms: 0.0,
            monotonic_ms: 0.0,
        });
        let mut anomalies = Vec::new();
        let result = reconcile(
            1_000.0,
            1_000.0,
            3_601_000.0,
            SuspendPolicy::Ignore,
            &mut baseline,
            || Ok(3_601_000.0),
            &mut anomalies,
        )
        .unwrap();
        assert_eq!(result.credited_ms, 3_601_000.0);
        assert_eq!(anomalies.len(), 1);
        assert_eq!(anomalies[0].kind, AnomalyKind::Suspend);
        assert_eq!(anomalies[0].suspended_ms, Some(3_600_000.0));
        assert_eq!(
            baseline,
            Some(ReaderBaseline {
                elapsed_realtime_ms: 3_601_000.0,
                monotonic_ms: 1_000.0
            })
        );
    }

    #[test]
    fn the_unexplained_rest_is_a_step_and_is_never_credited() {
        let mut baseline = Some(ReaderBaseline {
            elapsed_realtime_ms: 0.0,
            monotonic_ms: 0.0,
        });
        let mut anomalies = Vec::new();
        // 10 min suspended, then the wall also stepped 50 min forward.
        let result = reconcile(
            1_000.0,
            1_000.0,
            3_601_000.0,
            SuspendPolicy::Credit,
            &mut baseline,
            || Ok(601_000.0),
            &mut anomalies,
        )
        .unwrap();
        assert_eq!(result.credited_ms, 601_000.0);
        let kinds: Vec<_> = anomalies.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [AnomalyKind::Suspend, AnomalyKind::WallStepForward]);
        assert_eq!(anomalies[1].step_ms, Some(3_000_000.0));
    }

    #[test]
    fn a_reader_error_changes_nothing() {
        let before = Some(ReaderBaseline {
            elapsed_realtime_ms: 5.0,
            monotonic_ms: 5.0,
        });
        let mut baseline = before;
        let mut anomalies = Vec::new();
        let error = reconcile(
            10.0,
            5.0,
            10_000.0,
            SuspendPolicy::Ignore,
            &mut baseline,
            || Ok(f64::NAN),
            &mut anomalies,
        );
        assert!(error.is_err());
        assert_eq!(baseline, before);
        assert!(anomalies.is_empty());
    }

    /// The quiet paths' test and the rule's first row are one: for every pair of deltas,
    /// `clocks_agree` holds exactly when `reconcile` answers `Agree` with nothing to report.
    #[test]
    fn clocks_agree_is_the_rules_first_row() {
        let deltas = [
            0.0, 0.5, 1.0, 100.0, 249.0, 250.0, 250.5, 251.0, 1_000.0, 10_000.0, 1e6, 1e9,
        ];
        for &dm in &deltas {
            for &offset in &[
                -1e7, -1_000.0, -300.0, -250.0, -1.0, 0.0, 1.0, 250.0, 300.0, 1e7,
            ] {
                let dw = dm + offset;
                for policy in [
                    SuspendPolicy::Ignore,
                    SuspendPolicy::Credit,
                    SuspendPolicy::Refuse,
                ] {
                    let (reconciliation, anomalies) = run(dm, dw, policy);
                    let agreed = reconciliation.divergence == WallDivergence::Agree;
                    assert_eq!(clocks_agree(dm, dw), agreed, "dm {dm}, dw {dw}");
                    if agreed {
                        assert!(anomalies.is_empty());
                        assert_eq!(reconciliation.credited_ms, dm);
                    }
                }
            }
        }
        assert!(!clocks_agree(f64::NAN, 0.0));
        assert!(!clocks_agree(0.0, f64::NAN));
    }
}
