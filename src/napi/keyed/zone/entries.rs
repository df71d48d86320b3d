//! A zone's entry points besides its raw call.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::positive_count;
use crate::calendar::PeriodSlot;
use crate::error::ErrorCode;
use crate::keyed::PolicyChoice;
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{settle, write_stats, Needs};
use crate::napi::errors::coded;
use crate::napi::keyed::cell::{take_anomalies, take_error};
use crate::napi::keyed::policy::{key_policy, PolicyInput};
use crate::napi::keyed::status::KeyStatusOutput;
use crate::napi::limiter::ErrorOutput;
use crate::napi::registry::notify_listener;
use crate::zone::{Operation, Outcome};

use super::*;

/// `status(key)`; `None` when the JS face must call `policy(key)` first.
#[napi(js_name = "zoneStatus")]
pub fn zone_status(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
) -> napi::Result<Option<KeyStatusOutput>> {
    zone.cell.with_key(env, &key, |state, key| {
        let policy = policy.as_ref().map(key_policy).transpose()?;
        let choice = PolicyChoice::of(policy.as_ref(), state.has_policy);
        let mut anomalies = Vec::new();
        let outcome =
            (state.zone()?).call(key, Operation::Status, 1, choice, |_| Ok(1), &mut anomalies)?;
        notify_listener(state.registry_id, state.anomaly_listener, &anomalies);
        let step = match outcome {
            Outcome::NeedsPolicy => Err(Needs::Policy),
            Outcome::Status(status) => Ok(status.into()),
            _ => return Err(coded(ErrorCode::Internal, "status decided")),
        };
        Ok(settle(&state.result, step))
    })
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
    zone.cell.with_key(env, &key, |state, key| {
        let count = positive_count(n)?;
        state
            .zone()?
            .give_back(key, count, PeriodSlot::from_number(slot));
        Ok(())
    })
}

#[napi(js_name = "zoneDelete")]
pub fn zone_delete(env: &Env, zone: &External<NativeZone>, key: Unknown<'_>) -> napi::Result<bool> {
    zone.cell
        .with_key(env, &key, |state, key| Ok(state.zone()?.delete(key)))
}

#[napi(js_name = "zoneSize")]
pub fn zone_size(env: &Env, zone: &External<NativeZone>) -> napi::Result<f64> {
    zone.cell.with(env, |state| Ok(state.zone()?.len() as f64))
}

#[napi(js_name = "zoneSnapshot")]
pub fn zone_snapshot(env: &Env, zone: &External<NativeZone>) -> napi::Result<Uint8Array> {
    zone.cell
        .with(env, |state| Ok(Uint8Array::new(state.zone()?.snapshot())))
}

/// Unmaps the zone (the file stays); later calls are refused.
#[napi(js_name = "zoneClose")]
pub fn zone_close(env: &Env, zone: &External<NativeZone>) -> napi::Result<()> {
    zone.cell.with(env, |state| {
        state.zone = None;
        Ok(())
    })
}

/// `stats()`: this process's counters and the zone's key count, as `keyedStats` writes them.
#[napi(js_name = "zoneStats")]
pub fn zone_stats(env: &Env, zone: &External<NativeZone>) -> napi::Result<()> {
    zone.cell.with(env, |state| {
        let zone = state.zone()?;
        write_stats(&state.result, &zone.counters(), zone.len());
        Ok(())
    })
}

#[napi(js_name = "zoneTakeAnomalies")]
pub fn zone_take_anomalies(
    env: &Env,
    zone: &External<NativeZone>,
) -> napi::Result<Vec<AnomalyOutput>> {
    take_anomalies(env, &zone.cell)
}

#[napi(js_name = "zoneTakeError")]
pub fn zone_take_error(zone: &External<NativeZone>) -> ErrorOutput {
    take_error(&zone.cell)
}
