//! Clock sources as the binding holds them: system and manual clocks read in Rust, a JS clock's
//! readings passed in by the JS face.

use std::cell::RefCell;
use std::rc::Rc;

use napi_derive::napi;

use super::buffer::{Needs, ResultBuffer, Step, Supplied};
use super::errors::{from_core, CodedResult};
use crate::clock::{self, ClockSource, ManualClock, SystemClock};
use crate::error::{Error as CoreError, Reading};

#[napi(js_name = "systemMonotonicMs")]
pub fn system_monotonic_ms() -> f64 {
    clock::monotonic_ms()
}

#[napi(js_name = "systemWallMs")]
pub fn system_wall_ms() -> f64 {
    clock::wall_ms()
}

/// The host's suspend-inclusive clock in ms (read only where `elapsedRealtimeSupported()`).
#[napi(js_name = "elapsedRealtimeMs")]
pub fn elapsed_realtime_ms() -> f64 {
    clock::elapsed_realtime_ms()
}

/// Whether `procUptimeElapsedRealtime()` has Linux `CLOCK_BOOTTIME` to read.
#[napi(js_name = "boottimeSupported")]
pub fn boottime_supported() -> bool {
    clock::BOOTTIME_SUPPORTED
}

/// Whether `hostElapsedRealtime()` has a native suspend-inclusive clock to read.
#[napi(js_name = "elapsedRealtimeSupported")]
pub fn elapsed_realtime_supported() -> bool {
    clock::ELAPSED_REALTIME_SUPPORTED
}

/// A clock source as a limiter holds it: never a JS function (a JS clock's readings come in).
pub(crate) enum ClockHandle {
    System(SystemClock),
    /// System clocks, with a suspend-inclusive reader written in JS.
    SystemWithReader,
    Manual(Rc<RefCell<ManualClock>>),
    /// A plain JS object: `monotonicMs`, `wallMs` and, when `has_reader`, `elapsedRealtimeMs`.
    Js {
        has_reader: bool,
    },
}

impl ClockHandle {
    /// The monotonic and wall readings of a natively read clock, for a hot path's quiet case;
    /// `None` for a JS clock (the JS face reads it) or a manual clock borrowed elsewhere.
    #[inline(always)]
    pub(crate) fn native_readings(&self) -> Option<(f64, f64)> {
        match self {
            ClockHandle::System(_) | ClockHandle::SystemWithReader => {
                Some((clock::monotonic_ms(), clock::wall_ms()))
            }
            ClockHandle::Manual(manual) => manual
                .try_borrow()
                .ok()
                .map(|manual| (manual.monotonic_ms, manual.wall_ms)),
            ClockHandle::Js { .. } => None,
        }
    }
}

/// A [`ClockHandle`] for one call, with the readings supplied.
pub(crate) struct BoundClock<'a> {
    handle: &'a ClockHandle,
    supplied: Supplied,
    /// The readings this call took, so a call that stops for a JS reader can be resumed on them.
    taken: (f64, f64),
    /// Set when the core asked for an elapsed-realtime reading that only the JS face can take:
    /// the call changed nothing, and the JS face calls again with it.
    reader_wanted: bool,
}

impl<'a> BoundClock<'a> {
    pub fn new(handle: &'a ClockHandle, supplied: Supplied) -> BoundClock<'a> {
        BoundClock {
            handle,
            supplied,
            taken: (f64::NAN, f64::NAN),
            reader_wanted: false,
        }
    }

    /// The clock of one call: the readings in `result` if `supplied`, else read natively.
    pub fn for_call(
        handle: &'a ClockHandle,
        result: &ResultBuffer,
        supplied: bool,
    ) -> Step<BoundClock<'a>> {
        if !supplied && matches!(handle, ClockHandle::Js { .. }) {
            return Err(Needs::Readings);
        }
        Ok(BoundClock::new(handle, result.readings(supplied)))
    }

    /// A core call's outcome: its value, the JS reader it stopped for (resume on the readings
    /// taken), or its error, coded.
    pub fn outcome<T>(&self, outcome: std::result::Result<T, CoreError>) -> CodedResult<Step<T>> {
        match outcome {
            Ok(value) => Ok(Ok(value)),
            Err(_) if self.reader_wanted => Ok(Err(Needs::Reader { taken: self.taken })),
            Err(error) => Err(from_core(&error)),
        }
    }
}

fn not_supplied(reading: Reading) -> CoreError {
    CoreError::clock_failed(
        reading,
        "the reading was not supplied (an internal error; please report it)",
    )
}

impl ClockSource for BoundClock<'_> {
    #[inline(always)]
    fn monotonic_ms(&mut self) -> std::result::Result<f64, CoreError> {
        let value = match (self.supplied.monotonic_ms, self.handle) {
            (Some(value), _) => value,
            (None, ClockHandle::System(_) | ClockHandle::SystemWithReader) => clock::monotonic_ms(),
            (None, ClockHandle::Manual(state)) => state.borrow().monotonic_ms,
            (None, ClockHandle::Js { .. }) => return Err(not_supplied(Reading::Monotonic)),
        };
        self.taken.0 = value;
        Ok(value)
    }

    #[inline(always)]
    fn wall_ms(&mut self) -> std::result::Result<f64, CoreError> {
        let value = match (self.supplied.wall_ms, self.handle) {
            (Some(value), _) => value,
            (None, ClockHandle::System(_) | ClockHandle::SystemWithReader) => clock::wall_ms(),
            (None, ClockHandle::Manual(state)) => state.borrow().wall_ms,
            (None, ClockHandle::Js { .. }) => return Err(not_supplied(Reading::Wall)),
        };
        self.taken.1 = value;
        Ok(value)
    }

    fn has_elapsed_realtime(&self) -> bool {
        match self.handle {
            ClockHandle::System(system) => system.has_elapsed_realtime(),
            ClockHandle::SystemWithReader => true,
            ClockHandle::Manual(state) => state.borrow().has_elapsed_realtime(),
            ClockHandle::Js { has_reader } => *has_reader,
        }
    }

    fn elapsed_realtime_ms(&mut self) -> std::result::Result<f64, CoreError> {
        match self.handle {
            ClockHandle::System(system) => {
                let mut system = *system;
                system.elapsed_realtime_ms()
            }
            ClockHandle::Manual(state) => state.borrow_mut().elapsed_realtime_ms(),
            ClockHandle::SystemWithReader | ClockHandle::Js { has_reader: true } => {
                match self.supplied.elapsed_realtime_ms {
                    Some(value) => Ok(value),
                    None => {
                        self.reader_wanted = true;
                        Err(CoreError::clock_failed(
                            Reading::ElapsedRealtime,
                            "the reading is taken in JavaScript",
                        ))
                    }
                }
            }
            ClockHandle::Js { has_reader: false } => Err(CoreError::clock_failed(
                Reading::ElapsedRealtime,
                "this clock has no elapsedRealtimeMs method",
            )),
        }
    }
}
