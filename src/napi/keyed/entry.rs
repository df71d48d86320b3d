//! `KeyedQuotaClock`'s entry points other than the raw call and `keyedCreate` (`create.rs`).

use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::{call_function, take_anomalies, take_error, with_state};
use super::key::key_argument;
use super::policy::{key_policy, PolicyInput};
use super::status::KeyStatusOutput;
use super::{KeyedCell, KeyedState};
use crate::calendar::PeriodSlot;
use crate::keyed::{KeyPolicy, Target, DEFAULT_POLICY};
use crate::limits::check_shared_capacity;
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{settle, write_stats, Needs};
use crate::napi::errors::{from_core, guard, CodedResult};
use crate::napi::limiter::ErrorOutput;
use crate::napi::options::positive_safe_integer;

/// A keyed limiter as the JS face holds it (an External, as [`NativeSnapshot`](super::snapshot::NativeSnapshot)).
pub struct NativeKeyed {
    pub(super) state: Rc<KeyedCell>,
}

/// The hot path: a raw function `call(key)` on this limiter (see the module comment).
#[napi(js_name = "keyedCallFunction")]
pub fn keyed_call_function<'env>(
    env: &'env Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Unknown<'env>> {
    guard(env, || call_function(env, &limiter.state))
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
        with_state(&limiter.state, |state| {
            let policy = state.policy_of(policy.as_ref())?;
            state.run(key.key(), policy, supplied)
        })
    })
}

/// `status(key)` (for a key not held, what a fresh key of its policy would have, without holding
/// it), with the readings in the limiter's result buffer when `supplied`; `None` when the call
/// needs something first (the result buffer's status says what, as after a raw call).
#[napi(js_name = "keyedStatus")]
pub fn keyed_status(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    supplied: bool,
) -> napi::Result<Option<KeyStatusOutput>> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        with_state(&limiter.state, |state| {
            let policy = state.policy_of(policy.as_ref())?;
            let target = match (state.limiter.find(key.key()), policy) {
                (Some(index), _) => Target::Held(index),
                (None, Some(policy)) => Target::New(state.limiter.intern(policy)),
                (None, None) if state.has_policy => {
                    return Ok(settle(&state.result, Err(Needs::Policy)))
                }
                (None, None) => Target::New(DEFAULT_POLICY),
            };
            let step = state.status_of(target, supplied);
            if let Target::New(id) = target {
                state.limiter.release_if_unused(id);
            }
            Ok(settle(&state.result, step?))
        })
    })
}

/// Gives back what a decision for `key` took, reading no clock (the HTTP middleware's
/// all-or-nothing rollback): `n` tokens, and `n` quota units if the period of `slot` (the result
/// buffer's `PERIOD_SLOT` after the decision) is still the key's open period.
#[napi(js_name = "keyedGiveBack")]
pub fn keyed_give_back(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    n: f64,
    slot: f64,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let count = positive_safe_integer(n)?;
        let slot = PeriodSlot::from_number(slot).and_then(PeriodSlot::exact_compact);
        with_state(&limiter.state, |state| {
            state.limiter.give_back(key.key(), count, slot);
            Ok(())
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
    guard(env, || take_anomalies(&limiter.state))
}

/// The error of the last raw call.
#[napi(js_name = "keyedTakeError")]
pub fn keyed_take_error(limiter: &External<NativeKeyed>) -> ErrorOutput {
    take_error(&limiter.state)
}

impl KeyedState {
    /// A policy the JS face brought, validated (a shared bucket's capacity included).
    fn policy_of(&self, input: Option<&PolicyInput>) -> CodedResult<Option<KeyPolicy>> {
        let Some(input) = input else {
            return Ok(None);
        };
        let policy = key_policy(input)?;
        if self.limiter.has_slices() {
            check_shared_capacity(&format!("{}.", input.path), policy.capacity)
                .map_err(|error| from_core(&error))?;
        }
        Ok(Some(policy))
    }
}
