//! `KeyedQuotaClock`'s entry points other than the raw call.

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::{call_function, take_anomalies, take_error, with_state};
use super::key::key_argument;
use super::policy::{default_policy, key_policy, PolicyInput};
use super::snapshot::NativeSnapshot;
use super::status::KeyStatusOutput;
use super::{KeyedCell, KeyedState};
use crate::calendar::PeriodSlot;
use crate::error::ErrorCode;
use crate::keyed::{
    is_cell_capacity, KeyPolicy, KeyedConfig, KeyedLimiter, PolicyId, Target, DEFAULT_POLICY,
};
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{self, settle, write_stats, Needs, ResultBuffer};
use crate::napi::clock::BoundClock;
use crate::napi::errors::{coded, from_core, guard, invalid_arg, CodedResult};
use crate::napi::limiter::ErrorOutput;
use crate::napi::options::{config_from, positive_safe_integer, ClockInput, LimiterOptions};
use crate::text::js_number;

/// The largest `maxKeys`: 2**32.
const MAX_KEYS: f64 = 4_294_967_296.0;

/// A keyed limiter as the JS face holds it (an External, as [`NativeSnapshot`]).
pub struct NativeKeyed {
    pub(super) state: Rc<KeyedCell>,
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
    /// Set for a shared limiter (`share`): its quota units come from reservations.
    pub share: Option<ShareInput>,
}

/// The part of `share` the native side keeps (the store calls are the JS face's).
#[napi(object, object_to_js = false)]
pub struct ShareInput {
    /// `share.leaseUnits`; absent: 1% of each key's limit, at least 1.
    pub lease_units: Option<f64>,
    /// Set when every key's bucket is the fleet's (`share.bucket`).
    pub bucket: Option<BucketInput>,
}

/// The part of `share.bucket` the native side keeps.
#[napi(object, object_to_js = false)]
pub struct BucketInput {
    /// `share.leaseMs`: an integer from 1000 to 600000.
    pub lease_ms: f64,
}

/// `share.leaseMs`'s range.
const LEASE_MS: std::ops::RangeInclusive<f64> = 1_000.0..=600_000.0;

/// A shared bucket's capacity (`share.bucket`): an integer from 1 to 2**31; `path` names the
/// policy it belongs to (empty for the options').
pub(super) fn check_cell_capacity(path: &str, capacity: f64) -> CodedResult<()> {
    if is_cell_capacity(capacity) {
        return Ok(());
    }
    Err(coded(
        ErrorCode::InvalidOption,
        format!(
            "{path}capacity must be an integer from 1 to 2**31 (2147483648) for a shared bucket (share.bucket); received {}",
            js_number(capacity)
        ),
    ))
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
        share,
    } = input;
    guard(env, move || {
        if result_buffer.len() < buffer::LENGTH {
            return Err(invalid_arg(format!(
                "the result buffer needs {} numbers",
                buffer::LENGTH
            )));
        }
        if !((1.0..=MAX_KEYS).contains(&max_keys) && max_keys.fract() == 0.0) {
            return Err(coded(
                ErrorCode::InvalidOption,
                format!(
                    "maxKeys must be a positive integer no larger than 2**32 (4294967296); received {}",
                    js_number(max_keys)
                ),
            ));
        }
        let limits = config_from(&options)?;
        let defaults = default_policy(&limits);
        let defaults_capacity = defaults.capacity;
        let restore_policies: Option<Vec<f64>> = restore.map(|restore| {
            restore
                .policies
                .iter()
                .map(|policy| policy.capacity)
                .collect()
        });
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
        if let Some(share) = share {
            let lease_units = match share.lease_units {
                None => None,
                Some(units) => Some(positive_safe_integer(units).map_err(|_| {
                    coded(
                        ErrorCode::InvalidOption,
                        format!(
                            "share.leaseUnits must be a positive safe integer; received {}",
                            js_number(units)
                        ),
                    )
                })?),
            };
            limiter.enable_share(lease_units);
            if let Some(bucket) = share.bucket {
                let lease_ms = bucket.lease_ms;
                if !(LEASE_MS.contains(&lease_ms) && lease_ms.fract() == 0.0) {
                    return Err(coded(
                        ErrorCode::InvalidOption,
                        format!(
                            "share.leaseMs must be an integer from 1000 to 600000; received {}",
                            js_number(lease_ms)
                        ),
                    ));
                }
                check_cell_capacity("", defaults_capacity)?;
                if let Some(restore) = restore_policies {
                    for policy in restore {
                        check_cell_capacity("", policy)?;
                    }
                }
                limiter.enable_cells(lease_ms);
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
            refill_wanted: false,
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
        if self.limiter.has_cells() {
            check_cell_capacity(&format!("{}.", input.path), policy.capacity)?;
        }
        Ok(Some(policy))
    }
}
