//! `manualClock()`: three components that tests move independently.

use super::ClockSource;
use crate::error::Error;

#[derive(Clone, Debug, PartialEq)]
pub struct ManualClock {
    pub monotonic_ms: f64,
    pub wall_ms: f64,
    /// `None` when the clock has no elapsed-realtime reader.
    pub elapsed_realtime_ms: Option<f64>,
    /// How many times the elapsed-realtime reader was called.
    pub elapsed_realtime_reads: u64,
}

impl ManualClock {
    pub fn new(monotonic_ms: f64, wall_ms: f64, elapsed_realtime_ms: Option<f64>) -> ManualClock {
        ManualClock {
            monotonic_ms,
            wall_ms,
            elapsed_realtime_ms,
            elapsed_realtime_reads: 0,
        }
    }

    /// Time passes while awake: every component moves.
    pub fn advance(&mut self, ms: f64) {
        self.monotonic_ms += ms;
        self.wall_ms += ms;
        if let Some(elapsed) = self.elapsed_realtime_ms.as_mut() {
            *elapsed += ms;
        }
    }

    /// The host sleeps: wall and elapsed-realtime move, monotonic does not.
    pub fn suspend(&mut self, ms: f64) {
        self.wall_ms += ms;
        if let Some(elapsed) = self.elapsed_realtime_ms.as_mut() {
            *elapsed += ms;
        }
    }

    /// The wall clock is set (an NTP step); negative is backwards.
    pub fn step_wall(&mut self, delta_ms: f64) {
        self.wall_ms += delta_ms;
    }

    pub fn read_elapsed_realtime(&mut self) -> Option<f64> {
        let value = self.elapsed_realtime_ms?;
        self.elapsed_realtime_reads += 1;
        Some(value)
    }
}

impl ClockSource for ManualClock {
    fn monotonic_ms(&mut self) -> Result<f64, Error> {
        Ok(self.monotonic_ms)
    }
    fn wall_ms(&mut self) -> Result<f64, Error> {
        Ok(self.wall_ms)
    }
    fn has_elapsed_realtime(&self) -> bool {
        self.elapsed_realtime_ms.is_some()
    }
    fn elapsed_realtime_ms(&mut self) -> Result<f64, Error> {
        self.read_elapsed_realtime().ok_or_else(|| {
            Error::clock_failed(
                crate::error::Reading::ElapsedRealtime,
                "this manual clock has no elapsed-realtime reader",
            )
        })
    }
}
