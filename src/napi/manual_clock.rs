//! `manualClock()`'s native half: a clock that moves only when told, read in Rust by the
//! limiters given it (they share its state).

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{guard, invalid_arg, CodedResult};
use crate::clock::ManualClock;
use crate::text::js_number;

fn finite(name: &str, value: f64) -> CodedResult<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(invalid_arg(format!(
            "{name} must be a finite number of milliseconds; received {}",
            js_number(value)
        )))
    }
}

fn finite_non_negative(name: &str, value: f64) -> CodedResult<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(invalid_arg(format!(
            "{name} must be a finite, non-negative number of milliseconds (use set() to move a component backwards); received {}",
            js_number(value)
        )))
    }
}

/// The native half of `manualClock()`; limiters given one share its state and read it in Rust.
#[napi]
pub struct NativeManualClock {
    pub(crate) state: Rc<RefCell<ManualClock>>,
}

#[napi]
impl NativeManualClock {
    #[napi(constructor)]
    pub fn new(
        env: &Env,
        monotonic_ms: f64,
        wall_ms: f64,
        elapsed_realtime_ms: Option<f64>,
    ) -> napi::Result<Self> {
        guard(env, || {
            Self::checked(monotonic_ms, wall_ms, elapsed_realtime_ms)
        })
    }

    fn checked(
        monotonic_ms: f64,
        wall_ms: f64,
        elapsed_realtime_ms: Option<f64>,
    ) -> CodedResult<Self> {
        let clock = ManualClock::new(
            finite("monotonicMs", monotonic_ms)?,
            finite("wallMs", wall_ms)?,
            elapsed_realtime_ms
                .map(|value| finite("elapsedRealtimeMs", value))
                .transpose()?,
        );
        Ok(NativeManualClock {
            state: Rc::new(RefCell::new(clock)),
        })
    }

    #[napi]
    pub fn advance(&self, env: &Env, ms: f64) -> napi::Result<()> {
        guard(env, || {
            let ms = finite_non_negative("advance(ms)", ms)?;
            self.state.borrow_mut().advance(ms);
            Ok(())
        })
    }

    #[napi]
    pub fn suspend(&self, env: &Env, ms: f64) -> napi::Result<()> {
        guard(env, || {
            let ms = finite_non_negative("suspend(ms)", ms)?;
            self.state.borrow_mut().suspend(ms);
            Ok(())
        })
    }

    #[napi]
    pub fn step_wall(&self, env: &Env, delta_ms: f64) -> napi::Result<()> {
        guard(env, || {
            let delta_ms = finite("stepWall(deltaMs)", delta_ms)?;
            self.state.borrow_mut().step_wall(delta_ms);
            Ok(())
        })
    }

    /// Moves any component to an absolute value; all are checked before any moves.
    #[napi]
    pub fn set(
        &self,
        env: &Env,
        monotonic_ms: Option<f64>,
        wall_ms: Option<f64>,
        elapsed_realtime_ms: Option<f64>,
    ) -> napi::Result<()> {
        guard(env, || {
            self.set_checked(monotonic_ms, wall_ms, elapsed_realtime_ms)
        })
    }

    fn set_checked(
        &self,
        monotonic_ms: Option<f64>,
        wall_ms: Option<f64>,
        elapsed_realtime_ms: Option<f64>,
    ) -> CodedResult<()> {
        let monotonic_ms = monotonic_ms
            .map(|v| finite("set({ monotonicMs })", v))
            .transpose()?;
        let wall_ms = wall_ms.map(|v| finite("set({ wallMs })", v)).transpose()?;
        let elapsed_realtime_ms = elapsed_realtime_ms
            .map(|v| finite("set({ elapsedRealtimeMs })", v))
            .transpose()?;
        let mut state = self.state.borrow_mut();
        if elapsed_realtime_ms.is_some() && state.elapsed_realtime_ms.is_none() {
            return Err(invalid_arg(
                "set({ elapsedRealtimeMs }) needs a clock with an elapsed-realtime reader: create it with manualClock({ elapsedRealtimeMs: 0 })",
            ));
        }
        if let Some(value) = monotonic_ms {
            state.monotonic_ms = value;
        }
        if let Some(value) = wall_ms {
            state.wall_ms = value;
        }
        if let Some(value) = elapsed_realtime_ms {
            state.elapsed_realtime_ms = Some(value);
        }
        Ok(())
    }

    #[napi]
    pub fn monotonic_ms(&self) -> f64 {
        self.state.borrow().monotonic_ms
    }

    #[napi]
    pub fn wall_ms(&self) -> f64 {
        self.state.borrow().wall_ms
    }

    #[napi]
    pub fn elapsed_realtime_ms(&self) -> Option<f64> {
        self.state.borrow_mut().read_elapsed_realtime()
    }

    #[napi(getter)]
    pub fn elapsed_realtime_reads(&self) -> f64 {
        self.state.borrow().elapsed_realtime_reads as f64
    }
}
