//! `KeyedQuotaClock` with `zone` (the table in a shared file, `crate::zone`): a raw `call(key)`
//! per limiter, shaped like the in-process table's, on the limiter's own result buffer.

mod blocks;
mod entries;
mod refresh;

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::{call_function, RawState, StateCell};
use super::policy::{key_policy, PolicyInput, KEY_CAPACITY};
use super::snapshot::NativeSnapshot;
use crate::anomaly::Anomaly;
use crate::args;
use crate::error::ErrorCode;
use crate::keyed::{Key, KeyPolicy, PolicyChoice};
use crate::limits::check_max_keys;
use crate::napi::buffer;
use crate::napi::buffer::{write_block, write_decision, ResultBuffer};
use crate::napi::errors::{coded, guard, invalid_arg, CodedError, CodedResult};
use crate::napi::options::{config_from, LimiterOptions};
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

/// Opens (or makes) the zone file named by `input.path`.
#[napi(js_name = "zoneOpen")]
pub fn zone_open(env: &Env, input: ZoneInput<'_>) -> napi::Result<External<NativeZone>> {
    guard(env, move || open(input))
}

fn open(mut input: ZoneInput<'_>) -> CodedResult<External<NativeZone>> {
    if input.result.len() < buffer::LENGTH {
        return Err(coded(ErrorCode::Internal, "the result buffer is too short"));
    }
    let max_keys = check_max_keys(input.max_keys)?;
    let limits = config_from(&input.options)?;
    let config = ZoneConfig::of(input.path, &limits, max_keys, input.reader);
    let defaults = &config.defaults;
    // Each key's policy: its own, or (`u32::MAX`) the defaults.
    let policies: Option<Vec<KeyPolicy>> = input.restore.map(|plan| {
        let policy = |&choice: &u32| plan.policies.get(choice as usize).unwrap_or(defaults);
        plan.choices.iter().map(policy).cloned().collect()
    });
    let restore = input
        .restore
        .map(|plan| (&plan.snapshot, policies.as_deref().unwrap_or(&[])));
    let zone = Zone::open(&config, restore).map_err(|error| coded(error.code, error.message))?;
    // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
    let address = unsafe { input.result.as_mut() }.as_mut_ptr();
    let state = ZoneState {
        zone: Some(zone),
        anomalies: Vec::new(),
        error: None,
        registry_id: input.registry,
        anomaly_listener: input.anomaly_listener,
        has_policy: input.has_policy,
        result: ResultBuffer(address),
        _result_buffer: input.result,
    };
    Ok(External::new(NativeZone {
        cell: Rc::new(ZoneCell {
            result: ResultBuffer(address),
            state: RefCell::new(state),
        }),
    }))
}

fn closed() -> CodedError {
    invalid_arg("this limiter's zone was closed")
}

impl ZoneState {
    /// The zone, unless it was closed.
    fn zone(&self) -> CodedResult<&Zone> {
        self.zone.as_ref().ok_or_else(closed)
    }

    /// The operation and `n` in the result buffer, for `key`; `policy`: what `policy(key)` returned.
    fn run(&mut self, key: Key<'_>, policy: Option<KeyPolicy>) -> CodedResult<()> {
        let operation = self.result.get(buffer::OPERATION);
        let n = self.result.get(buffer::N_OR_STATUS);
        // The order of checks: `n` ≥ 1 before the policy of a new key is asked (a consume's `n`
        // against the key's capacity after it).
        let (operation, count) = if operation == buffer::OPERATION_CONSUME {
            args::positive_count(n)?;
            (Operation::Consume, 0)
        } else if operation == buffer::OPERATION_REFUND {
            (Operation::Refund, args::positive_count(n)?)
        } else {
            return Err(invalid_arg(format!("unknown operation {operation}")));
        };
        self.anomalies.clear();
        let zone = self.zone.as_ref().ok_or_else(closed)?;
        let outcome = zone.call(
            key,
            operation,
            count,
            PolicyChoice::of(policy.as_ref(), self.has_policy),
            |capacity| args::count(n, capacity, KEY_CAPACITY),
            &mut self.anomalies,
        )?;
        match outcome {
            Outcome::NeedsPolicy => self
                .result
                .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_POLICY),
            Outcome::Decided(decision, period_slot) => {
                write_decision(&self.result, &decision);
                self.result
                    .set(buffer::PERIOD_SLOT, period_slot.to_number_or_none());
            }
            Outcome::Blocked {
                left_ms,
                tokens,
                quota_remaining,
            } => {
                write_block(&self.result, left_ms, tokens, quota_remaining);
                self.result.set(
                    buffer::PERIOD_SLOT,
                    crate::calendar::PeriodSlot::NONE.to_number_or_none(),
                );
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

/// The hot path: a raw function `call(key)` on this zone limiter.
#[napi(js_name = "zoneCallFunction")]
pub fn zone_call_function<'env>(
    env: &'env Env,
    zone: &External<NativeZone>,
) -> napi::Result<Unknown<'env>> {
    guard(env, || call_function(env, &zone.cell))
}

/// A call the raw call left for the JS face to finish: with the key's policy.
#[napi(js_name = "zoneCallSlow")]
pub fn zone_call_slow(
    env: &Env,
    zone: &External<NativeZone>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
) -> napi::Result<()> {
    zone.cell.with_key(env, &key, |state, key| {
        state.run(key, policy.as_ref().map(key_policy).transpose()?)
    })
}
