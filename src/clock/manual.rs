//! `manualClock()`: three components that tests move independently.

use super::ClockSource;
use crate::error::{Error, ErrorCode};

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

    /// `set()`: moves any component to an absolute value. Only a clock made with an
    /// elapsed-realtime reader has one to set; nothing moves if it has none.
    pub fn set(
        &mut self,
        monotonic_ms: Option<f64>,
        wall_ms: Option<f64>,
        elapsed_realtime_ms: Option<f64>,
    ) -> Result<(), Error> {
        if elapsed_realtime_ms.is_some() && self.elapsed_realtime_ms.is_none() {
            return Err(Error::Invalid {
                code: ErrorCode::InvalidArg,
                message: "set({ elapsedRealtimeMs }) needs a clock with an elapsed-realtime reader: create it with manualClock({ elapsedRealtimeMs: 0 })".to_owned(),
            });
        }
        self.monotonic_ms = monotonic_ms.unwrap_or(self.monotonic_ms);
        self.wall_ms = wall_ms.unwrap_or(self.wall_ms);
        self.elapsed_realtime_ms = elapsed_realtime_ms.or(self.elapsed_realtime_ms);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_moves_only_what_it_is_given_and_needs_a_reader_to_set_one() {
        let mut clock = ManualClock::new(10.0, 20.0, None);
        clock.set(None, Some(25.0), None).unwrap();
        assert_eq!((clock.monotonic_ms, clock.wall_ms), (10.0, 25.0));
        let refused = clock.set(Some(1.0), None, Some(5.0)).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::InvalidArg);
        assert!(refused
            .to_string()
            .starts_with("set({ elapsedRealtimeMs }) needs a clock"));
        assert_eq!(
            (clock.monotonic_ms, clock.elapsed_realtime_ms),
            (10.0, None)
        );
    }
}
