//! `KeyedQuotaClock`'s entry points other than the raw call and `keyedCreate` (`create.rs`).

use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::{call_function, take_anomalies, take_error};
use super::policy::{key_policy, PolicyInput};
use super::status::KeyStatusOutput;
use super::{KeyedCell, KeyedState};
use crate::args::positive_count;
use crate::calendar::PeriodSlot;
use crate::keyed::{Key, KeyPolicy, Target, DEFAULT_POLICY};
use crate::limits::check_shared_capacity;
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{settle, write_stats, Needs, Step};
use crate::napi::errors::{guard, CodedResult};
use crate::napi::limiter::ErrorOutput;

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

/// A `tryConsume` or `refund` the raw call could not finish, with what the JS face brought.
#[napi(js_name = "keyedCallSlow")]
pub fn keyed_call_slow(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    supplied: bool,
) -> napi::Result<()> {
    limiter.state.with_key(env, &key, |state, key| {
        let policy = state.policy_of(policy.as_ref())?;
        state.run(key, policy, supplied)
    })
}

/// `status(key)` (a key not held: a fresh key's, not held; with `hold`, held from now on, as
/// `block(key, forMs)` holds it); `None`: see the buffer's status.
#[napi(js_name = "keyedStatus")]
pub fn keyed_status(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    supplied: bool,
    hold: Option<bool>,
) -> napi::Result<Option<KeyStatusOutput>> {
    limiter.state.with_key(env, &key, |state, key| {
        let policy = state.policy_of(policy.as_ref())?;
        let holding = hold.unwrap_or(false).then_some(key);
        let step = state.on_target(key, policy, supplied, |state, target| {
            state.status_of(target, supplied, holding)
        })?;
        Ok(settle(&state.result, step))
    })
}

/// The middleware's rollback of a decision for `key` (no clock read): see `limiterGiveBack`.
#[napi(js_name = "keyedGiveBack")]
pub fn keyed_give_back(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    n: f64,
    slot: f64,
) -> napi::Result<()> {
    limiter.state.with_key(env, &key, |state, key| {
        let count = positive_count(n)?;
        let slot = PeriodSlot::from_number(slot).and_then(PeriodSlot::exact_compact);
        state.limiter.give_back(key, count, slot);
        Ok(())
    })
}

/// `delete(key)`.
#[napi(js_name = "keyedDelete")]
pub fn keyed_delete(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<bool> {
    limiter
        .state
        .with_key(env, &key, |state, key| Ok(state.limiter.delete(key)))
}

/// A held key's block started (`blocked`) or ended: a blocked key is never dropped. `false`: not
/// held.
#[napi(js_name = "keyedSetBlocked")]
pub fn keyed_set_blocked(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    blocked: bool,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        Ok(state.limiter.set_blocked(key, blocked))
    })
}

#[napi(js_name = "keyedSize")]
pub fn keyed_size(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<f64> {
    limiter
        .state
        .with(env, |state| Ok(state.limiter.len() as f64))
}

/// The limiter's timeline (ms of real elapsed time) estimated now, which blocks are timed on
/// (lib/keyed/blocks.js): the last call's plus the monotonic advance since. `monotonicMs`: a JS
/// clock's reading (a native clock is read here).
#[napi(js_name = "keyedTimelineMs")]
pub fn keyed_timeline_ms(
    env: &Env,
    limiter: &External<NativeKeyed>,
    monotonic_ms: Option<f64>,
) -> napi::Result<f64> {
    limiter.state.with(env, |state| {
        let now_ms = state.monotonic_now(monotonic_ms);
        Ok(state.limiter.timeline_at(now_ms))
    })
}

/// `stats()`, written into the limiter's result buffer (no clock read).
#[napi(js_name = "keyedStats")]
pub fn keyed_stats(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<()> {
    limiter.state.with(env, |state| {
        write_stats(&state.result, state.limiter.counters(), state.limiter.len());
        Ok(())
    })
}

/// `snapshot()`: reads no clock.
#[napi(js_name = "keyedSnapshot")]
pub fn keyed_snapshot(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<Uint8Array> {
    limiter
        .state
        .with(env, |state| Ok(Uint8Array::new(state.limiter.snapshot())))
}

/// The anomalies of the last raw call (called only when there were some).
#[napi(js_name = "keyedTakeAnomalies")]
pub fn keyed_take_anomalies(
    env: &Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Vec<AnomalyOutput>> {
    take_anomalies(env, &limiter.state)
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
            check_shared_capacity(&format!("{}.", input.path), policy.capacity)?;
        }
        Ok(Some(policy))
    }

    /// Runs `body` on the key held, or to hold with the policy brought (released if unused after),
    /// or asks for `policy(key)` first.
    pub(super) fn on_target<T>(
        &mut self,
        key: Key<'_>,
        policy: Option<KeyPolicy>,
        supplied: bool,
        body: impl FnOnce(&mut Self, Target) -> CodedResult<Step<T>>,
    ) -> CodedResult<Step<T>> {
        let target = match (self.limiter.find(key), policy) {
            (Some(index), policy) => match self.renew_if_due(index, policy, supplied)? {
                Ok(()) => Target::Held(index),
                Err(needs) => return Ok(Err(needs)),
            },
            (None, Some(policy)) => Target::New(self.limiter.intern(policy)),
            (None, None) if self.has_policy => return Ok(Err(Needs::Policy)),
            (None, None) => Target::New(DEFAULT_POLICY),
        };
        let step = body(self, target);
        if let Target::New(id) = target {
            self.limiter.release_if_unused(id);
        }
        step
    }
}
