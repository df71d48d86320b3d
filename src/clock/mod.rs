//! clock sources, and §6: reconciling their readings.

mod manual;
mod reconcile;
mod system;

pub use manual::ManualClock;
pub use reconcile::{
    reconcile, tolerance_ms, ReaderBaseline, Reconciliation, SuspendPolicy, WallDivergence,
};
pub use system::{boottime_ms, monotonic_ms, wall_ms, SystemClock, BOOTTIME_SUPPORTED};

/// Which reading a [`ClockError`] is about; its name is the method a JS clock has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Monotonic,
    Wall,
    ElapsedRealtime,
}

impl Reading {
    pub fn method_name(self) -> &'static str {
        match self {
            Reading::Monotonic => "monotonicMs()",
            Reading::Wall => "wallMs()",
            Reading::ElapsedRealtime => "elapsedRealtimeMs()",
        }
    }
}

/// A reading that could not be taken or is not a finite number (`ERR_CLOCK_READING`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClockError {
    pub message: String,
}

impl ClockError {
    /// The source answered, but not with a finite number.
    pub fn not_finite(reading: Reading, received: &str) -> ClockError {
        ClockError {
            message: format!(
                "clock.{} must return a finite number of milliseconds; received {received}",
                reading.method_name()
            ),
        }
    }

    /// a wall reading the calendar quota cannot place (outside a JS `Date`'s range).
    pub fn outside_calendar(wall_ms: f64) -> ClockError {
        ClockError {
            message: format!(
                "clock.wallMs() read {} ms, outside the calendar's range (±8.64e+15 ms, the range of a JS Date); the calendar quota cannot place it, so nothing was consumed",
                crate::anomaly::js_number(wall_ms)
            ),
        }
    }

    /// The source failed to answer (a JS method threw, or is missing).
    pub fn failed(reading: Reading, why: &str) -> ClockError {
        ClockError {
            message: format!("clock.{} failed: {why}", reading.method_name()),
        }
    }
}

/// Anything that can be read for the three times a clock source gives, in milliseconds.
pub trait ClockSource {
    fn monotonic_ms(&mut self) -> Result<f64, ClockError>;
    fn wall_ms(&mut self) -> Result<f64, ClockError>;
    /// Whether [`ClockSource::elapsed_realtime_ms`] is available (suspend-inclusive elapsed time).
    fn has_elapsed_realtime(&self) -> bool;
    fn elapsed_realtime_ms(&mut self) -> Result<f64, ClockError>;
}

/// Refuses a reading that is not a finite number.
#[inline(always)]
pub(crate) fn finite(reading: Reading, value: Result<f64, ClockError>) -> Result<f64, ClockError> {
    let value = value?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ClockError::not_finite(reading, &crate::anomaly::ms(value)))
    }
}
