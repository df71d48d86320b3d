//! A zone's blocks (`crate::zone`'s `blocks.rs`): kept in the zone file, so a block made in one
//! process denies in every process from its next call.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::keyed::PolicyChoice;
use crate::napi::errors::{invalid_arg, CodedResult};
use crate::napi::keyed::policy::{key_policy, PolicyInput};
use crate::napi::registry::notify_listener;
use crate::zone::BlockAnswer;

use super::NativeZone;

/// A block call's answer.
#[napi(object)]
pub struct ZoneBlockOutput {
    /// What is left of the key's block, in ms (0: not blocked).
    pub left_ms: f64,
    /// Whether the call started a block (the key was not blocked before).
    pub started: bool,
}

impl From<BlockAnswer> for ZoneBlockOutput {
    fn from(answer: BlockAnswer) -> Self {
        ZoneBlockOutput {
            left_ms: answer.left_ms,
            started: answer.started,
        }
    }
}

/// Milliseconds the JS face checked already, checked again here (nothing odd reaches the zone).
fn positive_ms(ms: f64, name: &str) -> CodedResult<f64> {
    if ms.is_finite() && ms > 0.0 {
        Ok(ms)
    } else {
        Err(invalid_arg(format!(
            "{name} must be a positive number of milliseconds; received {ms}"
        )))
    }
}

/// `block(key, forMs)`: the key held and blocked in every process; `None` when the JS face
/// must call `policy(key)` first.
#[napi(js_name = "zoneBlock")]
pub fn zone_block(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    for_ms: f64,
    policy: Option<PolicyInput>,
) -> napi::Result<Option<ZoneBlockOutput>> {
    zone.cell.with_key(env, &key, |state, key| {
        let for_ms = positive_ms(for_ms, "forMs")?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        let choice = PolicyChoice::of(policy.as_ref(), state.has_policy);
        let mut anomalies = Vec::new();
        let answer = state.zone()?.block(key, for_ms, choice, &mut anomalies)?;
        notify_listener(state.registry_id, state.anomaly_listener, &anomalies);
        Ok(answer.map(ZoneBlockOutput::from))
    })
}

/// `unblock(key)`: `true` if the key was blocked (a key not held: `false`, no policy asked).
#[napi(js_name = "zoneUnblock")]
pub fn zone_unblock(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
) -> napi::Result<bool> {
    zone.cell.with_key(env, &key, |state, key| {
        let mut anomalies = Vec::new();
        let was = state.zone()?.unblock(key, &mut anomalies)?;
        notify_listener(state.registry_id, state.anomaly_listener, &anomalies);
        Ok(was)
    })
}

/// What is left of the key's block as of the latest reading (`status(key).blockedForMs`).
#[napi(js_name = "zoneBlockedMs")]
pub fn zone_blocked_ms(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
) -> napi::Result<f64> {
    zone.cell
        .with_key(env, &key, |state, key| Ok(state.zone()?.blocked_ms(key)))
}

/// A denial of the key counted in its run, in every process's count; the key blocked for
/// `forMs` once the run has `after` denials within `withinMs` (`null`: the key is not held).
#[napi(js_name = "zoneDenied")]
pub fn zone_denied(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    within_ms: f64,
    after: f64,
    for_ms: f64,
) -> napi::Result<Option<ZoneBlockOutput>> {
    zone.cell.with_key(env, &key, |state, key| {
        let within_ms = positive_ms(within_ms, "withinMs")?;
        let for_ms = positive_ms(for_ms, "forMs")?;
        let after = positive_ms(after, "after")?;
        let answer = state.zone()?.denied(key, within_ms, after as u64, for_ms);
        Ok(answer.map(ZoneBlockOutput::from))
    })
}

/// Every blocked key and its block's time left, flat: per key its length in UTF-16 code units,
/// the units, then the ms left (a key may hold any code unit, lone surrogates too).
#[napi(js_name = "zoneBlocks")]
pub fn zone_blocks(env: &Env, zone: &External<NativeZone>) -> napi::Result<Vec<f64>> {
    zone.cell.with(env, |state| {
        let mut flat = Vec::new();
        for (key, left_ms) in state.zone()?.blocks() {
            let units = key.key().to_utf16();
            flat.push(units.len() as f64);
            flat.extend(units.into_iter().map(f64::from));
            flat.push(left_ms);
        }
        Ok(flat)
    })
}

/// Whether this open made the zone file (a snapshot's blocks are restored only then).
#[napi(js_name = "zoneCreated")]
pub fn zone_created(env: &Env, zone: &External<NativeZone>) -> napi::Result<bool> {
    zone.cell.with(env, |state| Ok(state.zone()?.created))
}
