//! What the in-process table's and the zone's bindings share: the cell, the raw `call(key)`, the
//! state's borrow for every other entry point, `takeError` and `takeAnomalies`.

use std::cell::RefCell;
use std::ptr;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi::sys;

use super::key::KeyScratch;
use crate::anomaly::Anomaly;
use crate::error::ErrorCode;
use crate::keyed::Key;
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{self, ResultBuffer};
use crate::napi::errors::{coded, guard, internal, CodedError, CodedResult};
use crate::napi::limiter::ErrorOutput;
use crate::napi::raw::function_owning;
use crate::napi::registry::{BUSY, NO_STORED_ERROR};

/// The raw function's data: the state, and the result buffer outside it (to say it is busy).
pub(super) struct StateCell<S> {
    pub(super) result: ResultBuffer,
    pub(super) state: RefCell<S>,
}

/// A limiter's state as its raw function drives it.
pub(super) trait RawState {
    /// The raw call: the operation in the result buffer, for `key`.
    fn call(&mut self, key: Key<'_>) -> CodedResult<()>;
    /// The last raw call's error, for `takeError`.
    fn error(&mut self) -> &mut Option<CodedError>;
    /// The anomalies of the last call, for `takeAnomalies`.
    fn anomalies(&self) -> &[Anomaly];
}

/// The raw `call(key)`: `data` is the limiter's `StateCell<S>`.
pub(super) unsafe extern "C" fn raw_call<S: RawState>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let Some(call) = (unsafe { crate::napi::raw::one_argument_call(env, info) }) else {
        return ptr::null_mut();
    };
    let (argc, first, data) = (call.argc, call.first, call.data);
    // SAFETY: `data` is the `Rc<StateCell<S>>` of `call_function`, released only by the
    // function's finalizer, so it is alive while the function can be called.
    let cell = unsafe { &*(data as *const StateCell<S>) };
    let Ok(mut state) = cell.state.try_borrow_mut() else {
        // A JS clock called back into this limiter while it was reading it.
        cell.result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
        return ptr::null_mut();
    };
    let state = &mut *state;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if argc < 1 {
            return Err(coded(ErrorCode::InvalidArg, "key must be a string"));
        }
        let mut scratch = KeyScratch::new();
        let key = scratch.read(env, first)?;
        state.call(key)
    }));
    let error = match outcome {
        Ok(Ok(())) => return ptr::null_mut(),
        Ok(Err(error)) => error,
        Err(payload) => internal(payload.as_ref()),
    };
    *state.error() = Some(error);
    cell.result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
    ptr::null_mut()
}

/// The hot path's function `call(key)` on the limiter whose cell is `cell`.
pub(super) fn call_function<'env, S: RawState>(
    env: &'env Env,
    cell: &Rc<StateCell<S>>,
) -> CodedResult<Unknown<'env>> {
    let refused = "could not create the call function";
    function_owning(env, "call", raw_call::<S>, cell.clone(), refused)
}

impl<S> StateCell<S> {
    /// Runs `body` on the state (a re-entrant call refused), its error thrown.
    pub(super) fn with<T>(
        &self,
        env: &Env,
        body: impl FnOnce(&mut S) -> CodedResult<T>,
    ) -> napi::Result<T> {
        guard(env, || {
            let busy = |_| coded(ErrorCode::Internal, BUSY);
            body(&mut *self.state.try_borrow_mut().map_err(busy)?)
        })
    }

    /// [`StateCell::with`] for a call on the JS string `key`, read as the raw call reads it.
    pub(super) fn with_key<T>(
        &self,
        env: &Env,
        key: &Unknown<'_>,
        body: impl FnOnce(&mut S, Key<'_>) -> CodedResult<T>,
    ) -> napi::Result<T> {
        let mut scratch = KeyScratch::new();
        self.with(env, |state| {
            body(state, scratch.read(env.raw(), key.raw())?)
        })
    }
}

/// `takeError`: the error of the last raw call (taken, so it is reported once).
pub(super) fn take_error<S: RawState>(cell: &StateCell<S>) -> ErrorOutput {
    match cell.state.try_borrow_mut() {
        Ok(mut state) => state.error().take(),
        Err(_) => Some(coded(ErrorCode::Internal, BUSY)),
    }
    .unwrap_or_else(|| coded(ErrorCode::Internal, NO_STORED_ERROR))
    .into()
}

/// `takeAnomalies`: the anomalies of the last raw call (called only when there were some).
pub(super) fn take_anomalies<S: RawState>(
    env: &Env,
    cell: &StateCell<S>,
) -> napi::Result<Vec<AnomalyOutput>> {
    cell.with(env, |state| {
        Ok(state.anomalies().iter().map(AnomalyOutput::from).collect())
    })
}
