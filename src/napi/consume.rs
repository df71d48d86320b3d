//! `tryConsume`'s native half: `createRegistry`'s registry and its two raw functions of no
//! arguments, on the registry's result buffer (`n` and the limiter in, the decision out).

use std::cell::RefCell;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::buffer::{self, write_decision};
use super::clock::BoundClock;
use super::errors::{guard, internal};
use super::raw::{callback_data, function_owning, RawCallback};
use super::registry::{new_registry, Registry};
use crate::args;

impl Registry {
    /// The hot path: the usual call on a native clock (clocks agree, inside the open quota
    /// period, nothing to report), decided with no error or anomaly plumbing. `false`: nothing
    /// was consumed or written, and the general path takes the call (reading the clocks again).
    #[inline(always)]
    fn consume_quiet(&self) -> bool {
        let result = &self.result;
        // SAFETY: nothing below calls into JS or creates a limiter, so the vector cannot be
        // borrowed mutably while this shared reference is in use.
        let Ok(cells) = (unsafe { self.cells.try_borrow_unguarded() }) else {
            return false;
        };
        let Some(Some(cell)) = cells.get(result.limiter_index()) else {
            return false;
        };
        let Ok(mut state) = cell.try_borrow_mut() else {
            return false;
        };
        let state = &mut *state;
        let n = result.get(buffer::N_OR_STATUS);
        // (What an earlier call left in `error` or `anomalies` was taken by the JS face right
        // after it; the general path clears both before it decides.)
        if !(n >= 1.0 && n <= state.quiet_max_n) {
            return false;
        }
        let Some((monotonic_ms, wall_ms)) = state.clock.native_readings() else {
            return false;
        };
        // SAFETY: 1 ≤ n ≤ 2^53 - 1 (checked above), so it fits an i64.
        let count = unsafe { n.to_int_unchecked::<i64>() };
        // A fraction (its whole part below it) is the general path's to refuse (`args::count`,
        // the contract's error).
        if (count as f64) < n {
            return false;
        }
        let count = count as u64;
        match state
            .limiter
            .try_consume_quiet(count, monotonic_ms, wall_ms)
        {
            Some(decision) => {
                write_decision(result, &decision);
                if let Some(slot) = state.limiter.period_slot() {
                    result.set(buffer::PERIOD_SLOT, slot.to_number());
                }
                true
            }
            None => false,
        }
    }

    /// The general path (with `supplied`, on the readings the JS face took). No allocation unless
    /// an anomaly or an error has to be reported.
    #[inline(never)]
    #[cold]
    fn consume(&self, supplied: bool) {
        let result = &self.result;
        // No JS runs during a native call (JS clocks are read by the JS face), so the borrows
        // always succeed; they stay checked all the same (the index, read as a u32, by bounds).
        let cells = self.cells.try_borrow();
        let cell =
            (cells.as_ref().ok()).and_then(|cells| cells.get(result.limiter_index())?.as_ref());
        let Some(Ok(mut state)) = cell.map(RefCell::try_borrow_mut) else {
            return result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
        };
        let state = &mut *state;
        let n = result.get(buffer::N_OR_STATUS);
        state.anomalies.clear();
        if state.error.is_some() {
            state.error = None;
        }
        // `n` as the contract has it, before any clock is read (the JS face checked only that it
        // is a number).
        let count = match args::count(n, state.limiter.capacity(), "capacity") {
            Ok(count) => count,
            Err(error) => {
                state.error = Some(error.into());
                return result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
            }
        };
        let mut clock = match BoundClock::for_call(&state.clock, result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return needs.write(result),
        };
        let decided = state
            .limiter
            .try_consume(count, &mut clock, &mut state.anomalies);
        match clock.outcome(decided) {
            Ok(Ok(decision)) => {
                write_decision(result, &decision);
                if let Some(slot) = state.limiter.period_slot() {
                    result.set(buffer::PERIOD_SLOT, slot.to_number());
                }
                if !state.anomalies.is_empty() {
                    result.set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED_WITH_ANOMALIES);
                    self.notify(state.anomaly_listener, &state.anomalies);
                }
            }
            Ok(Err(needs)) => needs.write(result),
            Err(error) => {
                state.error = Some(error);
                result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
            }
        }
    }
}

/// The raw `tryConsume` callback for native clocks: `data` is this thread's `Registry`.
unsafe extern "C" fn fast_consume(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: as in `consume_with`.
    unsafe { consume_with::<false>(env, info) }
}

/// The raw callback for readings the JS face supplies (a JS clock, or a call resumed after the
/// JS elapsed-realtime reader).
unsafe extern "C" fn supplied_consume(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: as in `consume_with`.
    unsafe { consume_with::<true>(env, info) }
}

/// # Safety
/// `env` and `info` are N-API's own, for a function made by `create_registry`.
#[inline(always)]
unsafe fn consume_with<const SUPPLIED: bool>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let data = unsafe { callback_data(env, info) };
    if data.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `data` is the `Rc<Registry>` of `create_registry`, released only by the function's
    // finalizer, so it is alive while the function can be called.
    let registry = unsafe { &*(data as *const Registry) };
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A const parameter, so that each raw function has a closure of its own, inlined into it
        // (one shared closure was called out of line, measurably slower).
        if SUPPLIED {
            registry.consume(true);
        } else if !registry.consume_quiet() {
            registry.consume(false);
        }
    }));
    if let Err(payload) = decided {
        let index = registry.result.limiter_index() as u32;
        let _ = registry.with_cell(index, |state| {
            state.error = Some(internal(payload.as_ref()));
            Ok(())
        });
        registry
            .result
            .set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
    }
    ptr::null_mut()
}

/// A registry's id and its two `tryConsume` functions, which hold it: it lives as long as they do.
#[napi(object, object_from_js = false)]
pub struct RegistryFunctions<'env> {
    pub id: u32,
    #[napi(ts_type = "() => void")]
    pub consume: Unknown<'env>,
    /// The one that takes the readings from the result buffer.
    #[napi(ts_type = "() => void")]
    pub consume_supplied: Unknown<'env>,
}

/// Makes a registry around `result_buffer`, and its `tryConsume` functions (raw functions of no
/// arguments).
#[napi(js_name = "createRegistry")]
pub fn create_registry<'env>(
    env: &'env Env,
    result_buffer: Float64Array,
) -> napi::Result<RegistryFunctions<'env>> {
    guard(env, move || {
        let registry = new_registry(env, result_buffer)?;
        let function = |callback: RawCallback| {
            let refused = "could not create the tryConsume function";
            function_owning(env, "tryConsume", callback, registry.clone(), refused)
        };
        Ok(RegistryFunctions {
            id: registry.id,
            consume: function(fast_consume)?,
            consume_supplied: function(supplied_consume)?,
        })
    })
}
