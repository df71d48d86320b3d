//! Clock sources, and reconciling their readings.

mod manual;
mod reconcile;
mod system;

use crate::error::{Error, Reading};
pub use manual::ManualClock;
pub use reconcile::{
    clocks_agree, reconcile, tolerance_ms, ReaderBaseline, Reconciliation, SuspendPolicy,
    WallDivergence,
};

pub use system::{
    elapsed_realtime_ms, monotonic_ms, wall_ms, SystemClock, BOOTTIME_SUPPORTED,
    ELAPSED_REALTIME_SUPPORTED,
};

/// Anything that can be read for the three times a clock source gives, in milliseconds.
pub trait ClockSource {
    fn monotonic_ms(&mut self) -> Result<f64, Error>;
    fn wall_ms(&mut self) -> Result<f64, Error>;
    /// Whether [`ClockSource::elapsed_realtime_ms`] is available (suspend-inclusive elapsed time).
    fn has_elapsed_realtime(&self) -> bool;
    fn elapsed_realtime_ms(&mut self) -> Result<f64, Error>;
}

/// The clock of a quiet call, whose readings were taken before it
/// ([`kernel::call_quiet`](crate::kernel::call_quiet) reconciles none): never read.
pub struct Unread;

impl ClockSource for Unread {
    fn monotonic_ms(&mut self) -> Result<f64, Error> {
        Ok(f64::NAN)
    }
    fn wall_ms(&mut self) -> Result<f64, Error> {
        Ok(f64::NAN)
    }
    fn has_elapsed_realtime(&self) -> bool {
        false
    }
    fn elapsed_realtime_ms(&mut self) -> Result<f64, Error> {
        Ok(f64::NAN)
    }
}

/// Refuses a reading that is not a finite number.
#[inline(always)]
pub(crate) fn finite(reading: Reading, value: Result<f64, Error>) -> Result<f64, Error> {
    let value = value?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Error::clock_not_finite(reading, &crate::text::ms(value)))
    }
}
