//! A zone's entry points besides its raw call: `status(key)`, the give-back, `delete`, `size`,
//! `snapshot`, `close`, `stats`, takeovers, and taking anomalies and errors.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::calendar::PeriodSlot;
use crate::error::ErrorCode;
use crate::keyed::{Key, KeyPolicy, PolicyChoice};
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{settle, Needs};
use crate::napi::errors::{coded, from_core, guard, CodedResult};
use crate::napi::keyed::cell::{take_anomalies, take_error};
use crate::napi::keyed::key::key_argument;
use crate::napi::keyed::policy::{key_policy, PolicyInput};
use crate::napi::keyed::status::KeyStatusOutput;
use crate::napi::keyed::KeyedState;
use crate::napi::limiter::ErrorOutput;
use crate::napi::options::positive_safe_integer;
use crate::napi::registry::notify_listener;
use crate::zone::{Operation, Outcome};

use super::*;

/// `status(key)`; `None` when the JS face must call `policy(key)` first (the result buffer's
/// status says so, as after a raw call).
#[napi(js_name = "zoneStatus")]
pub fn zone_status(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
) -> napi::Result<Option<KeyStatusOutput>> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_zone(zone, |state| status(state, key.key(), policy))
    })
}

fn status(
    state: &mut ZoneState,
    key: Key<'_>,
    policy: Option<KeyPolicy>,
) -> CodedResult<Option<KeyStatusOutput>> {
    let mut anomalies = Vec::new();
    let outcome = state
        .zone()?
        .call(
            key,
            Operation::Status,
            1,
            PolicyChoice::of(policy.as_ref(), state.has_policy),
            |_| Ok(1),
            &mut anomalies,
        )
        .map_err(|error| from_core(&error))?;
    notify_listener(state.registry_id, state.anomaly_listener, &anomalies);
    let step = match outcome {
        Outcome::NeedsPolicy => Err(Needs::Policy),
        Outcome::Status(status) => Ok(KeyedState::status_output(status)),
        _ => return Err(coded(ErrorCode::Internal, "status decided")),
    };
    Ok(settle(&state.result, step))
}

/// Gives back what a decision for `key` took, reading no clock (see `keyedGiveBack`).
#[napi(js_name = "zoneGiveBack")]
pub fn zone_give_back(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    n: f64,
    slot: f64,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let count = positive_safe_integer(n)?;
        let slot = PeriodSlot::from_number(slot);
        with_zone(zone, |state| {
            state.zone()?.give_back(key.key(), count, slot);
            Ok(())
        })
    })
}

#[napi(js_name = "zoneDelete")]
pub fn zone_delete(env: &Env, zone: &External<NativeZone>, key: Unknown<'_>) -> napi::Result<bool> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        with_zone(zone, |state| Ok(state.zone()?.delete(key.key())))
    })
}

#[napi(js_name = "zoneSize")]
pub fn zone_size(env: &Env, zone: &External<NativeZone>) -> napi::Result<f64> {
    guard(env, || {
        with_zone(zone, |state| Ok(state.zone()?.len() as f64))
    })
}

#[napi(js_name = "zoneSnapshot")]
pub fn zone_snapshot(env: &Env, zone: &External<NativeZone>) -> napi::Result<Uint8Array> {
    guard(env, || {
        with_zone(zone, |state| Ok(Uint8Array::new(state.zone()?.snapshot())))
    })
}

/// Unmaps the zone (the file stays); later calls are refused.
#[napi(js_name = "zoneClose")]
pub fn zone_close(env: &Env, zone: &External<NativeZone>) -> napi::Result<()> {
    guard(env, || {
        with_zone(zone, |state| {
            state.zone = None;
            Ok(())
        })
    })
}

/// `stats()`: this limiter's counters (its own calls, in this process) and the zone's key count,
/// written into the result buffer as `keyedStats` writes them.
#[napi(js_name = "zoneStats")]
pub fn zone_stats(env: &Env, zone: &External<NativeZone>) -> napi::Result<()> {
    guard(env, || {
        with_zone(zone, |state| {
            let zone = state.zone()?;
            crate::napi::buffer::write_stats(&state.result, &zone.counters(), zone.len());
            Ok(())
        })
    })
}

/// Locks taken over from dead processes since the zone was made.
#[napi(js_name = "zoneTakeovers")]
pub fn zone_takeovers(env: &Env, zone: &External<NativeZone>) -> napi::Result<f64> {
    guard(env, || {
        with_zone(zone, |state| Ok(state.zone()?.takeovers() as f64))
    })
}

/// Whether this open made the zone file.
#[napi(js_name = "zoneCreated")]
pub fn zone_created(env: &Env, zone: &External<NativeZone>) -> napi::Result<bool> {
    guard(env, || with_zone(zone, |state| Ok(state.zone()?.created)))
}

#[napi(js_name = "zoneTakeAnomalies")]
pub fn zone_take_anomalies(
    env: &Env,
    zone: &External<NativeZone>,
) -> napi::Result<Vec<AnomalyOutput>> {
    guard(env, || take_anomalies(&zone.cell))
}

#[napi(js_name = "zoneTakeError")]
pub fn zone_take_error(zone: &External<NativeZone>) -> ErrorOutput {
    take_error(&zone.cell)
}
