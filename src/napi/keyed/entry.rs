//! `KeyedQuotaClock`'s entry points other than the raw call.

use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::key::key_argument;
use super::policy::{key_policy, PolicyInput};
use super::snapshot::NativeSnapshot;
use super::status::KeyStatusOutput;
use super::{keyed_call, release_cell, KeyedCell, KeyedState};
use crate::anomaly::js_number;
use crate::contract::buffer;
use crate::keyed::{KeyPolicy, KeyedConfig, KeyedLimiter, PolicyId, Target, DEFAULT_POLICY};
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{write_stats, ResultBuffer};
use crate::napi::clock::{BoundClock, Supplied};
use crate::napi::errors::{coded, from_core, guard, invalid_arg, CodedResult};
use crate::napi::limiter::ErrorOutput;
use crate::napi::options::{config_from, ClockInput, LimiterOptions, MAX_SAFE_INTEGER};
use crate::napi::raw::function_with_data;
use crate::napi::registry::{BUSY, NO_STORED_ERROR};

/// A keyed limiter as the JS face holds it (an External, as [`NativeSnapshot`]).
pub struct NativeKeyed {
    pub(super) state: Rc<KeyedCell>,
}

/// Runs `body` on the state, refusing a re-entrant call.
pub(super) fn with_state<T>(
    cell: &KeyedCell,
    body: impl FnOnce(&mut KeyedState) -> CodedResult<T>,
) -> CodedResult<T> {
    let mut state = cell
        .state
        .try_borrow_mut()
        .map_err(|_| coded("ERR_INTERNAL", BUSY))?;
    body(&mut state)
}

/// `keyedCreate`'s input.
#[napi(object, object_to_js = false)]
pub struct KeyedInput<'_javascript_function_scope> {
    /// The registry (`createRegistry`'s `id`) whose anomaly dispatcher it shares.
    pub registry: u32,
    pub options: LimiterOptions,
    pub max_keys: f64,
    /// Whether the JS face has a `policy` to call for a key not held.
    pub has_policy: bool,
    /// The limiter's own result buffer (`contract().resultBuffer`'s layout).
    pub result: Float64Array,
    pub clock: ClockInput<'_javascript_function_scope>,
    pub anomaly_listener: Option<f64>,
    /// A validated snapshot (`snapshotParse`) whose keys it starts with.
    pub restore: Option<&'_javascript_function_scope External<NativeSnapshot>>,
}

/// Makes a keyed limiter from `input` (see `KeyedInput`).
#[napi(js_name = "keyedCreate")]
pub fn keyed_create(env: &Env, input: KeyedInput<'_>) -> napi::Result<External<NativeKeyed>> {
    let KeyedInput {
        registry: registry_id,
        options,
        max_keys,
        has_policy,
        result: mut result_buffer,
        clock,
        anomaly_listener,
        restore,
    } = input;
    guard(env, move || {
        if result_buffer.len() < buffer::LENGTH {
            return Err(invalid_arg(format!(
                "the result buffer needs {} numbers",
                buffer::LENGTH
            )));
        }
        if !((1.0..=MAX_SAFE_INTEGER).contains(&max_keys) && max_keys.fract() == 0.0) {
            return Err(coded(
                "ERR_INVALID_OPTION",
                format!(
                    "maxKeys must be a positive safe integer; received {}",
                    js_number(max_keys)
                ),
            ));
        }
        let limits = config_from(&options)?;
        let defaults = KeyPolicy {
            capacity: limits.capacity,
            refill_per_second: limits.refill_per_second,
            initial_tokens: limits.initial_tokens,
            quota: limits.quota,
        };
        let config = KeyedConfig {
            defaults,
            suspend_policy: limits.suspend_policy,
            earliest_plausible_wall_ms: limits.earliest_plausible_wall_ms,
            // More keys than memory could ever hold are as good as no bound.
            max_keys: max_keys.min(usize::MAX as f64) as usize,
        };
        let (clock, supplied) = clock.handle()?;
        let mut limiter = KeyedLimiter::new(config, &mut BoundClock::new(&clock, supplied))
            .map_err(|e| from_core(&e))?;
        if let Some(restore) = restore {
            let ids: Vec<PolicyId> = restore
                .policies
                .iter()
                .map(|policy| limiter.intern(policy.clone()))
                .collect();
            let per_key: Vec<PolicyId> = restore
                .choices
                .iter()
                .map(|&choice| ids.get(choice as usize).copied().unwrap_or(DEFAULT_POLICY))
                .collect();
            limiter.restore(&restore.snapshot, &per_key);
            for id in ids {
                limiter.release_if_unused(id);
            }
        }
        // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
        let address = unsafe { result_buffer.as_mut() }.as_mut_ptr();
        let result = ResultBuffer(address);
        let state = KeyedState {
            limiter,
            clock,
            anomalies: Vec::new(),
            error: None,
            registry_id,
            anomaly_listener,
            has_policy,
            result,
            _result_buffer: result_buffer,
        };
        Ok(External::new(NativeKeyed {
            state: Rc::new(KeyedCell {
                result: ResultBuffer(address),
                state: RefCell::new(state),
            }),
        }))
    })
}

/// The hot path: a raw function `call(key)` on this limiter (see the module comment).
#[napi(js_name = "keyedCallFunction")]
pub fn keyed_call_function<'env>(
    env: &'env Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Unknown<'env>> {
    guard(env, || {
        let data = Rc::into_raw(limiter.state.clone()) as *mut c_void;
        // SAFETY: `data` lives until `release_cell`, which releases it once.
        unsafe { function_with_data(env, "call", keyed_call, data, release_cell) }.ok_or_else(
            || {
                // SAFETY: N-API refused, so nothing else owns `data`.
                drop(unsafe { Rc::from_raw(data as *const KeyedCell) });
                coded("ERR_INTERNAL", "could not create the call function")
            },
        )
    })
}

/// A `tryConsume` or `refund` the raw call could not finish: with what the JS face brought
/// (the key's policy, readings in the result buffer). Writes a status or the decision into
/// the buffer; throws what no decision can be made for.
#[napi(js_name = "keyedCallSlow")]
pub fn keyed_call_slow(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    supplied: bool,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_state(&limiter.state, |state| {
            state.run(key.key(), policy, supplied)
        })
    })
}

/// `status(key)`, or what the JS face must bring first (`needs`): for a key not held,
/// what a fresh key of its policy would have, without holding it. `monotonic_ms`/`wall_ms`
/// (and `elapsed_realtime_ms`): readings the JS face took.
#[napi(js_name = "keyedStatus")]
#[allow(clippy::too_many_arguments)]
pub fn keyed_status(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    monotonic_ms: Option<f64>,
    wall_ms: Option<f64>,
    elapsed_realtime_ms: Option<f64>,
) -> napi::Result<KeyStatusOutput> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_state(&limiter.state, |state| {
            let target = match (state.limiter.find(key.key()), policy) {
                (Some(index), _) => Target::Held(index),
                (None, Some(policy)) => Target::New(state.limiter.intern(policy)),
                (None, None) if state.has_policy => {
                    return Ok(KeyedState::status_needs("policy", (f64::NAN, f64::NAN)))
                }
                (None, None) => Target::New(DEFAULT_POLICY),
            };
            let outcome = state.status_of(
                target,
                Supplied {
                    monotonic_ms,
                    wall_ms,
                    elapsed_realtime_ms,
                },
            );
            if let Target::New(id) = target {
                state.limiter.release_if_unused(id);
            }
            outcome
        })
    })
}

/// `delete(key)`.
#[napi(js_name = "keyedDelete")]
pub fn keyed_delete(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<bool> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        with_state(&limiter.state, |state| Ok(state.limiter.delete(key.key())))
    })
}

#[napi(js_name = "keyedSize")]
pub fn keyed_size(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<f64> {
    guard(env, || {
        with_state(&limiter.state, |state| Ok(state.limiter.len() as f64))
    })
}

/// `stats()`: the counters and the keys held, written into the limiter's result buffer. Reads
/// no clock.
#[napi(js_name = "keyedStats")]
pub fn keyed_stats(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<()> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            write_stats(&state.result, state.limiter.counters(), state.limiter.len());
            Ok(())
        })
    })
}

/// `snapshot()`: reads no clock.
#[napi(js_name = "keyedSnapshot")]
pub fn keyed_snapshot(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<Uint8Array> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            Ok(Uint8Array::new(state.limiter.snapshot()))
        })
    })
}

/// The anomalies of the last raw call (called only when there were some).
#[napi(js_name = "keyedTakeAnomalies")]
pub fn keyed_take_anomalies(
    env: &Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Vec<AnomalyOutput>> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            Ok(state.anomalies.iter().map(AnomalyOutput::from).collect())
        })
    })
}

/// The error of the last raw call.
#[napi(js_name = "keyedTakeError")]
pub fn keyed_take_error(limiter: &External<NativeKeyed>) -> ErrorOutput {
    let error = match limiter.state.state.try_borrow_mut() {
        Ok(mut state) => state
            .error
            .take()
            .unwrap_or_else(|| coded("ERR_INTERNAL", NO_STORED_ERROR)),
        Err(_) => coded("ERR_INTERNAL", BUSY),
    };
    ErrorOutput {
        code: error.status,
        message: error.reason,
    }
}
