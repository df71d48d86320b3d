//! `keyedCreate` (options checked, snapshot restored, sharing enabled) and `keyedCheckOptions`
//! (its checks of `maxKeys` and `share`'s numbers, for the JS face's order of checks).

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use super::snapshot::NativeSnapshot;
use super::{KeyedCell, KeyedState};
use crate::keyed::{KeyedConfig, KeyedLimiter};
use crate::limits::{check_shared_capacity, CheckedKeyedValues, KeyedValues};
use crate::napi::buffer::{self, ResultBuffer};
use crate::napi::clock::BoundClock;
use crate::napi::errors::{guard, invalid_arg, CodedResult};
use crate::napi::options::{config_from, ClockInput, LimiterOptions};

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

/// `keyedCheckOptions`'s input: the keyed options' values the core checks, each absent or given.
#[napi(object, object_to_js = false)]
pub struct KeyedOptionValues {
    pub max_keys: Option<f64>,
    pub lease_units: Option<f64>,
    pub lease_ms: Option<f64>,
}

fn checked_values(values: &KeyedOptionValues) -> CodedResult<CheckedKeyedValues> {
    let values = KeyedValues {
        max_keys: values.max_keys,
        lease_units: values.lease_units,
        lease_ms: values.lease_ms,
    };
    Ok(values.checked()?)
}

/// Checks the values given as `keyedCreate` does (the JS face: one at a time, in its order).
#[napi(js_name = "keyedCheckOptions")]
pub fn keyed_check_options(env: &Env, values: KeyedOptionValues) -> napi::Result<()> {
    guard(env, move || checked_values(&values).map(drop))
}

/// Makes a keyed limiter from `input` (see `KeyedInput`).
#[napi(js_name = "keyedCreate")]
pub fn keyed_create(env: &Env, mut input: KeyedInput<'_>) -> napi::Result<External<NativeKeyed>> {
    guard(env, move || {
        if input.result.len() < buffer::LENGTH {
            return Err(invalid_arg(format!(
                "the result buffer needs {} numbers",
                buffer::LENGTH
            )));
        }
        // The options' order of checks (the JS face's): share's values, maxKeys, the limits.
        let share = input.share.as_ref();
        let checked = checked_values(&KeyedOptionValues {
            max_keys: Some(input.max_keys),
            lease_units: share.and_then(|share| share.lease_units),
            lease_ms: share.and_then(|share| Some(share.bucket.as_ref()?.lease_ms)),
        })?;
        let config = KeyedConfig::of(&config_from(&input.options)?, input.max_keys);
        let defaults_capacity = config.defaults.capacity;
        let (clock, supplied) = input.clock.handle()?;
        let mut limiter = KeyedLimiter::new(config, &mut BoundClock::new(&clock, supplied))?;
        if let Some(plan) = input.restore {
            limiter.restore_with(&plan.snapshot, &plan.policies, &plan.choices);
        }
        if share.is_some() {
            limiter.enable_share(checked.lease_units);
            if let Some(lease_ms) = checked.lease_ms {
                let restored = input.restore.iter().flat_map(|plan| plan.policies.iter());
                let capacities = restored.map(|policy| policy.capacity);
                for capacity in std::iter::once(defaults_capacity).chain(capacities) {
                    check_shared_capacity("", capacity)?;
                }
                limiter.enable_slices(lease_ms as f64);
            }
        }
        // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
        let address = unsafe { input.result.as_mut() }.as_mut_ptr();
        let state = KeyedState {
            limiter,
            clock,
            anomalies: Vec::new(),
            error: None,
            registry_id: input.registry,
            anomaly_listener: input.anomaly_listener,
            has_policy: input.has_policy,
            refill_wanted: false,
            slice_anomaly: None,
            result: ResultBuffer(address),
            _result_buffer: input.result,
        };
        Ok(External::new(NativeKeyed {
            state: Rc::new(KeyedCell {
                result: ResultBuffer(address),
                state: RefCell::new(state),
            }),
        }))
    })
}
