//! `KeyedQuotaClock` with `zone`: the keyed table in a shared memory-mapped file
//! (`crate::zone`, Linux only: elsewhere this module is not built and the JS face refuses a zone
//! with `ERR_UNSUPPORTED_PLATFORM` before calling in; docs/zone.md says what a port needs). Shaped like the in-process limiter's binding: one raw function per limiter,
//! called with the key; the JS face writes `n` and the operation into the limiter's own
//! `Float64Array` and reads the decision back from it.

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::{call_function, take_anomalies, take_error, with_state, RawState, StateCell};
use super::key::key_argument;
use super::policy::{count_for, default_policy, key_policy, PolicyInput};
use super::snapshot::NativeSnapshot;
use super::status::KeyStatusOutput;
use super::KeyedState;
use crate::anomaly::Anomaly;
use crate::error::Error as CoreError;
use crate::keyed::{Key, KeyPolicy};
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::buffer::{self, settle, Needs};
use crate::napi::buffer::{write_decision, ResultBuffer};
use crate::napi::errors::{coded, from_core, guard, CodedError, CodedResult};
use crate::napi::limiter::ErrorOutput;
use crate::napi::options::{config_from, positive_safe_integer, LimiterOptions};
use crate::napi::registry::notify_listener;
use crate::zone::{Operation, Outcome, Zone, ZoneConfig};

struct ZoneState {
    /// `None` once closed.
    zone: Option<Zone>,
    anomalies: Vec<Anomaly>,
    error: Option<CodedError>,
    registry_id: u32,
    anomaly_listener: Option<f64>,
    has_policy: bool,
    result: ResultBuffer,
    _result_buffer: Float64Array,
}

/// What the zone limiter's raw function points at.
type ZoneCell = StateCell<ZoneState>;

impl RawState for ZoneState {
    #[inline(always)]
    fn call(&mut self, key: Key<'_>) -> CodedResult<()> {
        self.run(key, None)
    }

    fn error(&mut self) -> &mut Option<CodedError> {
        &mut self.error
    }

    fn anomalies(&self) -> &[Anomaly] {
        &self.anomalies
    }
}

/// A zone limiter as the JS face holds it.
pub struct NativeZone {
    cell: Rc<ZoneCell>,
}

/// `zoneOpen`'s input.
#[napi(object, object_to_js = false)]
pub struct ZoneInput<'_javascript_function_scope> {
    pub registry: u32,
    pub path: String,
    pub options: LimiterOptions,
    pub max_keys: f64,
    pub has_policy: bool,
    /// The clock is systemClock() with procUptimeElapsedRealtime() as its reader.
    pub reader: bool,
    pub result: Float64Array,
    pub anomaly_listener: Option<f64>,
    pub restore: Option<&'_javascript_function_scope External<NativeSnapshot>>,
}

fn zone_error(error: crate::zone::ZoneError) -> CodedError {
    coded(error.code, error.message)
}

fn closed() -> CodedError {
    coded("ERR_INVALID_ARG", "this limiter's zone was closed")
}

/// Opens (or makes) the zone file named by `input.path`.
#[napi(js_name = "zoneOpen")]
pub fn zone_open(env: &Env, input: ZoneInput<'_>) -> napi::Result<External<NativeZone>> {
    guard(env, move || open(input))
}

fn open(input: ZoneInput<'_>) -> CodedResult<External<NativeZone>> {
    let ZoneInput {
        registry: registry_id,
        path,
        options,
        max_keys,
        has_policy,
        reader,
        result: mut result_buffer,
        anomaly_listener,
        restore,
    } = input;
    if result_buffer.len() < buffer::LENGTH {
        return Err(coded("ERR_INTERNAL", "the result buffer is too short"));
    }
    let limits = config_from(&options)?;
    let defaults = default_policy(&limits);
    let config = ZoneConfig {
        path,
        defaults: defaults.clone(),
        suspend_policy: limits.suspend_policy,
        earliest_plausible_wall_ms: limits.earliest_plausible_wall_ms,
        max_keys: max_keys as u64,
        reader,
    };
    let policies: Option<Vec<KeyPolicy>> = restore.map(|plan| {
        plan.choices
            .iter()
            .map(|&choice| {
                plan.policies
                    .get(choice as usize)
                    .cloned()
                    .unwrap_or_else(|| defaults.clone())
            })
            .collect()
    });
    let restore = restore.map(|plan| (&plan.snapshot, policies.as_deref().unwrap_or(&[])));
    let zone = Zone::open(&config, restore).map_err(zone_error)?;
    // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
    let address = unsafe { result_buffer.as_mut() }.as_mut_ptr();
    let state = ZoneState {
        zone: Some(zone),
        anomalies: Vec::new(),
        error: None,
        registry_id,
        anomaly_listener,
        has_policy,
        result: ResultBuffer(address),
        _result_buffer: result_buffer,
    };
    Ok(External::new(NativeZone {
        cell: Rc::new(ZoneCell {
            result: ResultBuffer(address),
            state: RefCell::new(state),
        }),
    }))
}

impl ZoneState {
    fn zone(&self) -> CodedResult<&Zone> {
        self.zone.as_ref().ok_or_else(closed)
    }

    /// The operation and `n` in the result buffer, for `key`; `policy`: what `policy(key)` returned.
    fn run(&mut self, key: Key<'_>, policy: Option<KeyPolicy>) -> CodedResult<()> {
        let operation = self.result.get(buffer::OPERATION);
        let n = self.result.get(buffer::N_OR_STATUS);
        let operation = if operation == buffer::OPERATION_CONSUME {
            Operation::Consume
        } else if operation == buffer::OPERATION_REFUND {
            Operation::Refund
        } else {
            return Err(coded(
                "ERR_INVALID_ARG",
                format!("unknown operation {operation}"),
            ));
        };
        let count = if operation == Operation::Refund {
            positive_safe_integer(n)?
        } else {
            0
        };
        self.anomalies.clear();
        let zone = self.zone.as_ref().ok_or_else(closed)?;
        let outcome = zone.call(
            key,
            operation,
            count,
            policy.as_ref(),
            self.has_policy,
            |capacity| count_for(n, capacity).map_err(invalid_count),
            &mut self.anomalies,
        );
        match outcome.map_err(|error| from_core(&error))? {
            Outcome::NeedsPolicy => self
                .result
                .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_POLICY),
            Outcome::Decided(decision, period_slot) => {
                write_decision(&self.result, &decision);
                self.result
                    .set(buffer::PERIOD_SLOT, slot_number(period_slot));
            }
            Outcome::Refunded | Outcome::Status(_) => {
                self.result.set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED)
            }
        }
        if !self.anomalies.is_empty() {
            self.result
                .set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED_WITH_ANOMALIES);
            notify_listener(self.registry_id, self.anomaly_listener, &self.anomalies);
        }
        Ok(())
    }
}

/// A count refused as the in-process limiter refuses it (its coded error, carried through the core).
fn invalid_count(error: CodedError) -> CoreError {
    CoreError::Invalid {
        code: crate::error::ErrorCode::InvalidArg,
        message: error.reason,
    }
}

/// A period slot as the result buffer carries it (the in-process limiter's "no period" for none).
fn slot_number(slot: i64) -> f64 {
    if slot == i64::MIN {
        f64::from(i32::MIN)
    } else {
        slot as f64
    }
}

/// The hot path: a raw function `call(key)` on this zone limiter.
#[napi(js_name = "zoneCallFunction")]
pub fn zone_call_function<'env>(
    env: &'env Env,
    zone: &External<NativeZone>,
) -> napi::Result<Unknown<'env>> {
    guard(env, || call_function(env, &zone.cell))
}

fn with_zone<T>(
    zone: &External<NativeZone>,
    body: impl FnOnce(&mut ZoneState) -> CodedResult<T>,
) -> CodedResult<T> {
    with_state(&zone.cell, body)
}

/// A call the raw call left for the JS face to finish: with the key's policy.
#[napi(js_name = "zoneCallSlow")]
pub fn zone_call_slow(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_zone(zone, |state| state.run(key.key(), policy))
    })
}

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
            policy.as_ref(),
            state.has_policy,
            |_| Ok(1),
            &mut anomalies,
        )
        .map_err(|error| from_core(&error))?;
    notify_listener(state.registry_id, state.anomaly_listener, &anomalies);
    let step = match outcome {
        Outcome::NeedsPolicy => Err(Needs::Policy),
        Outcome::Status(status) => Ok(KeyedState::status_output(status)),
        _ => return Err(coded("ERR_INTERNAL", "status decided")),
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
        let slot = (slot.fract() == 0.0 && slot.abs() <= 9e15 && slot != f64::from(i32::MIN))
            .then_some(slot as i64);
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
