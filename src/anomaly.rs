//! the clock disagreements worth knowing about, each with a one-line `detail`.

/// What kind of clock disagreement an [`Anomaly`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnomalyKind {
    WallStepBack,
    WallStepForward,
    Suspend,
    AmbiguousWallJump,
    PeriodRegression,
    PeriodSkip,
}

impl AnomalyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::WallStepBack => "wall-step-back",
            AnomalyKind::WallStepForward => "wall-step-forward",
            AnomalyKind::Suspend => "suspend",
            AnomalyKind::AmbiguousWallJump => "ambiguous-wall-jump",
            AnomalyKind::PeriodRegression => "period-regression",
            AnomalyKind::PeriodSkip => "period-skip",
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
}

/// Milliseconds for a log line: whole numbers without a fraction, others to the microsecond;
/// beyond 1e21 (and for NaN and the infinities) as JavaScript prints them.
pub(crate) fn ms(value: f64) -> String {
    if !value.is_finite() || value.abs() >= 1e21 {
        return js_number(value);
    }
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A received string for a message: quoted, escaped, and cut after 200 characters (with its
/// length in UTF-16 code units, as JavaScript counts it), so that a huge value makes a short message.
pub fn js_quoted(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        None => format!("'{}'", text.escape_debug()),
        Some((cut, _)) => format!(
            "'{}'... ({} characters)",
            text[..cut].escape_debug(),
            text.encode_utf16().count()
        ),
    }
}

/// A number as JavaScript's `String(number)` spells it: the shortest digits that read back to
/// the same number, with an exponent from 1e21 up and below 1e-6 (`1e+308`, `1.5e-7`).
pub fn js_number(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let magnitude = value.abs();
    if (1e-6..1e21).contains(&magnitude) {
        // Rust's Display is the shortest round-trip form, positional.
        return value.to_string();
    }
    // Rust's LowerExp is the shortest round-trip form too: `1e308`, `-1.5e-7`.
    let text = format!("{value:e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
            format!("{mantissa}e+{exponent}")
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_strings_are_quoted_escaped_and_cut_after_200_characters() {
        assert_eq!(js_quoted("bogus"), "'bogus'");
        assert_eq!(js_quoted("it's\n"), "'it\\'s\\n'");
        let long = "é".repeat(5_000);
        let quoted = js_quoted(&long);
        assert!(
            quoted.starts_with(&format!("'{}'...", "é".repeat(200))),
            "{quoted}"
        );
        assert!(quoted.ends_with("(5000 characters)"), "{quoted}");
    }

    #[test]
    fn numbers_are_spelled_as_javascript_spells_them() {
        for (value, text) in [
            (1e308, "1e+308"),
            (-1e308, "-1e+308"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (8.64e15, "8640000000000000"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(js_number(value), text);
        }
    }

    #[test]
    fn milliseconds_in_a_detail_stay_short() {
        assert_eq!(ms(1e308), "1e+308");
        assert_eq!(ms(1_500.25), "1500.25");
        assert_eq!(ms(3_600_000.0), "3600000");
    }
}
