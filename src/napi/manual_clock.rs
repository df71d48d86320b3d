//! `manualClock()`'s native half: a clock that moves only when told, read in Rust.

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::guard;
use crate::args::{finite_ms, forward_ms};
use crate::clock::ManualClock;
use crate::error::Error as CoreError;

/// The native half of `manualClock()`; limiters given one share its state and read it in Rust.
#[napi]
pub struct NativeManualClock {
    pub(crate) state: Rc<RefCell<ManualClock>>,
}

impl NativeManualClock {
    /// Runs `body` on the clock, its error thrown.
    fn moved(
        &self,
        env: &Env,
        body: impl FnOnce(&mut ManualClock) -> std::result::Result<(), CoreError>,
    ) -> Result<()> {
        guard(env, || Ok(body(&mut self.state.borrow_mut())?))
    }
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
            let clock = ManualClock::new(
                finite_ms(monotonic_ms, "monotonicMs")?,
                finite_ms(wall_ms, "wallMs")?,
                elapsed_realtime_ms
                    .map(|value| finite_ms(value, "elapsedRealtimeMs"))
                    .transpose()?,
            );
            Ok(NativeManualClock {
                state: Rc::new(RefCell::new(clock)),
            })
        })
    }

    #[napi]
    pub fn advance(&self, env: &Env, ms: f64) -> napi::Result<()> {
        let ms = forward_ms(ms, "advance(ms)");
        self.moved(env, |clock| ms.map(|ms| clock.advance(ms)))
    }

    #[napi]
    pub fn suspend(&self, env: &Env, ms: f64) -> napi::Result<()> {
        let ms = forward_ms(ms, "suspend(ms)");
        self.moved(env, |clock| ms.map(|ms| clock.suspend(ms)))
    }

    #[napi]
    pub fn step_wall(&self, env: &Env, delta_ms: f64) -> napi::Result<()> {
        let delta_ms = finite_ms(delta_ms, "stepWall(deltaMs)");
        self.moved(env, |clock| delta_ms.map(|ms| clock.step_wall(ms)))
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
        let finite =
            |value: Option<f64>, name: &str| value.map(|ms| finite_ms(ms, name)).transpose();
        self.moved(env, |clock| {
            let monotonic_ms = finite(monotonic_ms, "set({ monotonicMs })")?;
            let wall_ms = finite(wall_ms, "set({ wallMs })")?;
            let elapsed_realtime_ms = finite(elapsed_realtime_ms, "set({ elapsedRealtimeMs })")?;
            clock.set(monotonic_ms, wall_ms, elapsed_realtime_ms)
        })
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
