//! `refreshPolicy` and `policyTtlMs`: marking held keys, and a due key's new policy
//! put in force before its call.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use super::KeyedState;
use crate::keyed::KeyPolicy;
use crate::limits::check_policy_ttl_ms;
use crate::napi::buffer::{self, Needs, Step};
use crate::napi::clock::BoundClock;
use crate::napi::errors::{guard, CodedResult};
use crate::napi::registry::notify_listener;

/// Checks `policyTtlMs` as `keyedSetPolicyTtl` does (the JS face: at its place in the order of
/// checks).
#[napi(js_name = "keyedCheckPolicyTtl")]
pub fn keyed_check_policy_ttl(env: &Env, ttl_ms: f64) -> napi::Result<()> {
    guard(env, || Ok(check_policy_ttl_ms(ttl_ms).map(drop)?))
}

/// `policyTtlMs`: a held key's policy is asked again once that long has passed on the timeline.
#[napi(js_name = "keyedSetPolicyTtl")]
pub fn keyed_set_policy_ttl(
    env: &Env,
    limiter: &External<NativeKeyed>,
    ttl_ms: f64,
) -> napi::Result<()> {
    limiter.state.with(env, |state| {
        state.limiter.set_policy_ttl(check_policy_ttl_ms(ttl_ms)?);
        Ok(())
    })
}

/// `refreshPolicy(key)`: marks a held key (a key not held: nothing happens).
#[napi(js_name = "keyedRefreshPolicy")]
pub fn keyed_refresh_policy(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<()> {
    limiter.state.with_key(env, &key, |state, key| {
        state.limiter.mark_policy_due(Some(key));
        Ok(())
    })
}

/// `refreshPolicy()`: marks every key held now.
#[napi(js_name = "keyedRefreshEveryPolicy")]
pub fn keyed_refresh_every_policy(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<()> {
    limiter.state.with(env, |state| {
        state.limiter.mark_policy_due(None);
        Ok(())
    })
}

impl KeyedState {
    /// Before a call on the held key at `index`: when its policy is due, asks for it (`policy`
    /// not brought yet) or puts the one brought in force; else nothing.
    pub(super) fn renew_if_due(
        &mut self,
        index: u32,
        policy: Option<KeyPolicy>,
        supplied: bool,
    ) -> CodedResult<Step<()>> {
        let monotonic_ms = if supplied {
            self.result.get(buffer::MONOTONIC_MS)
        } else {
            self.clock
                .native_readings()
                .map_or(f64::NAN, |(monotonic_ms, _)| monotonic_ms)
        };
        if !self.limiter.policy_due(index, monotonic_ms) {
            return Ok(Ok(()));
        }
        let Some(policy) = policy else {
            return Ok(Err(Needs::Policy));
        };
        let mut clock = match BoundClock::for_call(&self.clock, &self.result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return Ok(Err(needs)),
        };
        let mut anomalies = Vec::new();
        let renewed = self
            .limiter
            .renew_policy(index, policy, &mut clock, &mut anomalies);
        let step = clock.outcome(renewed)?;
        if step.is_ok() {
            notify_listener(self.registry_id, self.anomaly_listener, &anomalies);
        }
        Ok(step)
    }
}
