//! The core's one error type: every refusal carries a code (`crate::contract::ErrorCode`, which
//! also says the JavaScript class it is thrown as) and a message for its user (`Display`).

use std::fmt;

use crate::anomaly::{js_number, ms};
use crate::clock::Reading;
use crate::contract::ErrorCode;

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// The monotonic clock went backwards (`latched`: on a call after the one that saw it).
    MonotonicRegression {
        previous_ms: f64,
        now_ms: f64,
        latched: bool,
    },
    /// suspendPolicy 'refuse' and nothing tells a suspend from a wall-clock step.
    AmbiguousWallJump {
        monotonic_delta_ms: f64,
        wall_delta_ms: f64,
    },
    /// The wall clock reads before earliestPlausibleWallMs.
    ImplausibleWallClock { wall_ms: f64, earliest_ms: f64 },
    /// A reading could not be taken or is not a finite number.
    ClockReading { message: String },
    /// A keyed limiter cannot hold a new key: every held key has quota use.
    KeyLimit { max_keys: u64 },
    /// A refused value (a period spec, a snapshot): `code` is a RangeError's
    /// (`ERR_INVALID_OPTION`, `ERR_SUB_DAY_PERIOD`, `ERR_UNKNOWN_TIME_ZONE`).
    Invalid { code: ErrorCode, message: String },
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::MonotonicRegression { .. } => ErrorCode::MonotonicRegression,
            Error::AmbiguousWallJump { .. } => ErrorCode::AmbiguousWallJump,
            Error::ImplausibleWallClock { .. } => ErrorCode::ImplausibleWallClock,
            Error::ClockReading { .. } => ErrorCode::ClockReading,
            Error::KeyLimit { .. } => ErrorCode::KeyLimit,
            Error::Invalid { code, .. } => *code,
        }
    }

    /// A refused option value (`ERR_INVALID_OPTION`).
    pub fn invalid_option(message: String) -> Error {
        Error::Invalid {
            code: ErrorCode::InvalidOption,
            message,
        }
    }

    /// The source answered, but not with a finite number.
    pub fn clock_not_finite(reading: Reading, received: &str) -> Error {
        Error::ClockReading {
            message: format!(
                "clock.{} must return a finite number of milliseconds; received {received}",
                reading.method_name()
            ),
        }
    }

    /// A wall reading the calendar quota cannot place (outside a JS `Date`'s range).
    pub fn clock_outside_calendar(wall_ms: f64) -> Error {
        Error::ClockReading {
            message: format!(
                "clock.wallMs() read {} ms, outside the calendar's range (±8.64e+15 ms, the range of a JS Date); the calendar quota cannot place it, so nothing was consumed",
                js_number(wall_ms)
            ),
        }
    }

    /// The source failed to answer (a reader is missing, or could not be read).
    pub fn clock_failed(reading: Reading, why: &str) -> Error {
        Error::ClockReading {
            message: format!("clock.{} failed: {why}", reading.method_name()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::MonotonicRegression { previous_ms, now_ms, latched: false } => write!(
                f,
                "the monotonic clock went backwards by {} ms (from {} to {}); a monotonic source must never regress, so this limiter refuses every further call",
                ms(previous_ms - now_ms), ms(*previous_ms), ms(*now_ms)
            ),
            Error::MonotonicRegression { previous_ms, now_ms, latched: true } => write!(
                f,
                "this limiter saw its monotonic clock go backwards (from {} to {}) and refuses every further call; create a new limiter on a sound clock",
                ms(*previous_ms), ms(*now_ms)
            ),
            Error::AmbiguousWallJump { monotonic_delta_ms, wall_delta_ms } => write!(
                f,
                "the wall clock advanced {} ms while the monotonic clock advanced {} ms and no elapsed-realtime reader can tell a suspend from a clock step; suspendPolicy 'refuse' credited the monotonic {} ms and refuses this call (the next call proceeds)",
                ms(*wall_delta_ms), ms(*monotonic_delta_ms), ms(*monotonic_delta_ms)
            ),
            Error::ImplausibleWallClock { wall_ms, earliest_ms } => write!(
                f,
                "the wall clock reads {} ms ({}), before earliestPlausibleWallMs {} ({}); the calendar quota cannot trust it (set earliestPlausibleWallMs to null to turn this check off)",
                ms(*wall_ms), iso(*wall_ms), ms(*earliest_ms), iso(*earliest_ms)
            ),
            Error::ClockReading { message } | Error::Invalid { message, .. } => f.write_str(message),
            Error::KeyLimit { max_keys } => write!(
                f,
                "cannot hold a new key: all {max_keys} keys (maxKeys) have quota use in their open period, and quota use is never dropped to make room; raise maxKeys, or delete keys you no longer need"
            ),
        }
    }
}

impl std::error::Error for Error {}

fn iso(wall_ms: f64) -> String {
    chrono::DateTime::from_timestamp_millis(wall_ms as i64).map_or_else(
        || "out of range".to_owned(),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ErrorClass;

    #[test]
    fn each_error_has_its_code_class_and_message() {
        let cases = [
            (
                Error::MonotonicRegression {
                    previous_ms: 10.0,
                    now_ms: 4.0,
                    latched: false,
                },
                "ERR_MONOTONIC_REGRESSION",
                "went backwards by 6 ms",
            ),
            (
                Error::AmbiguousWallJump {
                    monotonic_delta_ms: 1.0,
                    wall_delta_ms: 5000.0,
                },
                "ERR_AMBIGUOUS_WALL_JUMP",
                "advanced 5000 ms",
            ),
            (
                Error::clock_failed(Reading::ElapsedRealtime, "it threw"),
                "ERR_CLOCK_READING",
                "clock.elapsedRealtimeMs() failed: it threw",
            ),
            (
                Error::KeyLimit { max_keys: 3 },
                "ERR_KEY_LIMIT",
                "all 3 keys",
            ),
            (
                Error::invalid_option("unit must be 'day'".to_owned()),
                "ERR_INVALID_OPTION",
                "unit must be 'day'",
            ),
        ];
        for (error, code, text) in cases {
            assert_eq!(error.code().as_str(), code);
            assert!(error.to_string().contains(text), "{error}");
        }
        assert_eq!(
            Error::KeyLimit { max_keys: 1 }.code().class(),
            ErrorClass::QuotaClockError
        );
        assert_eq!(
            Error::invalid_option(String::new()).code().class(),
            ErrorClass::RangeError
        );
    }
}
