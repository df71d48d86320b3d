//! `QuotaClock`'s entry points other than `tryConsume` (`consume`).

use std::cell::RefCell;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::anomaly::AnomalyOutput;
use super::buffer::{settle, write_stats};
use super::calendar::{spec_period, PeriodOutput};
use super::clock::BoundClock;
use super::errors::{coded, guard, CodedError, CodedResult};
use super::object::objects;
use super::options::{
    config_from, new_limits, LimiterInput, LimiterOptions, NewLimits, MAX_SAFE_INTEGER,
};
use super::registry::{registry, LimiterState, NO_STORED_ERROR};
use crate::anomaly::Anomaly;
use crate::args::positive_count;
use crate::calendar::PeriodSlot;
use crate::error::{Error as CoreError, ErrorCode};
use crate::limiter::{Limiter, Status};

objects! {
    StatusOutput from (Status, Option<&str>) as (status, time_zone) {
        tokens: f64 = status.tokens,
        quota_used: Option<f64> = status.quota_used.map(|used| used as f64),
        quota_remaining: Option<f64> = status.quota_remaining.map(|left| left as f64),
        period: Option<PeriodOutput> = status.period.zip(time_zone).map(PeriodOutput::from),
    }

    ErrorOutput from CodedError as error {
        code: String = error.status,
        message: String = error.reason,
    }
}

/// Creates a limiter from `input` (see `LimiterInput`) and returns its registry index.
#[napi(js_name = "createLimiter")]
pub fn create_limiter(env: &Env, input: LimiterInput<'_>) -> napi::Result<u32> {
    guard(env, move || {
        let registry = registry(input.registry)?;
        let config = config_from(&input.options)?;
        let (clock, supplied) = input.clock.handle()?;
        let limiter = Limiter::new(config, &mut BoundClock::new(&clock, supplied))?;
        let quiet_max_n = limiter.capacity().min(MAX_SAFE_INTEGER);
        registry.insert(RefCell::new(LimiterState {
            limiter,
            clock,
            anomalies: Vec::new(),
            error: None,
            anomaly_listener: input.anomaly_listener,
            quiet_max_n,
        }))
    })
}

/// Checks a limiter's options as `createLimiter` does, making none (before a snapshot's policies).
#[napi(js_name = "checkLimiterOptions")]
pub fn check_limiter_options(env: &Env, options: LimiterOptions) -> napi::Result<()> {
    guard(env, || config_from(&options).map(drop))
}

/// Frees a collected limiter's index; returns its anomaly listener id, if any.
#[napi(js_name = "releaseLimiter")]
pub fn release_limiter(registry_id: u32, index: u32) -> Option<f64> {
    let registry = registry(registry_id).ok()?;
    let released = registry
        .cells
        .try_borrow_mut()
        .ok()?
        .get_mut(index as usize)
        .and_then(Option::take)?;
    registry.free.borrow_mut().push(index);
    released.into_inner().anomaly_listener
}

/// The anomalies of the limiter's last `tryConsume`, as objects (called only when there were some).
#[napi(js_name = "limiterTakeAnomalies")]
pub fn limiter_take_anomalies(
    env: &Env,
    registry_id: u32,
    index: u32,
) -> napi::Result<Vec<AnomalyOutput>> {
    guard(env, || {
        registry(registry_id)?.with_cell(index, |state| {
            Ok(state.anomalies.iter().map(AnomalyOutput::from).collect())
        })
    })
}

/// The error of the limiter's last `tryConsume`.
#[napi(js_name = "limiterTakeError")]
pub fn limiter_take_error(registry_id: u32, index: u32) -> ErrorOutput {
    match registry(registry_id)
        .and_then(|registry| registry.with_cell(index, |state| Ok(state.error.take())))
    {
        Ok(Some(error)) | Err(error) => error.into(),
        Ok(None) => coded(ErrorCode::Internal, NO_STORED_ERROR).into(),
    }
}

/// Runs `call` on the limiter at `index` on its clock (readings from the buffer if `supplied`),
/// delivers its anomalies and writes the status, as the raw `tryConsume` does (`None`: needs).
fn reconciled_call<T>(
    registry_id: u32,
    index: u32,
    supplied: bool,
    call: impl FnOnce(
        &mut Limiter,
        &mut BoundClock<'_>,
        &mut Vec<Anomaly>,
    ) -> std::result::Result<T, CoreError>,
) -> CodedResult<Option<T>> {
    let registry = registry(registry_id)?;
    let result = &registry.result;
    let step = registry.with_cell(index, |state| {
        let mut clock = match BoundClock::for_call(&state.clock, result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return Ok(Err(needs)),
        };
        let mut anomalies = Vec::new();
        let outcome = call(&mut state.limiter, &mut clock, &mut anomalies);
        let step = clock.outcome(outcome)?;
        if step.is_ok() {
            registry.notify(state.anomaly_listener, &anomalies);
        }
        Ok(step)
    })?;
    Ok(settle(result, step))
}

/// `status()`; `None` when the call needs something first (the buffer's status says what).
#[napi(js_name = "limiterStatus")]
pub fn limiter_status(
    env: &Env,
    registry_id: u32,
    index: u32,
    supplied: bool,
) -> napi::Result<Option<StatusOutput>> {
    guard(env, || {
        reconciled_call(registry_id, index, supplied, |limiter, clock, anomalies| {
            let status = limiter.status(clock, anomalies)?;
            let time_zone = limiter
                .quota()
                .map(|(quota, _)| quota.spec.time_zone_name());
            Ok(StatusOutput::from((status, time_zone)))
        })
    })
}

/// `setLimits(limits)`: the limits checked (nothing changes if they are refused), then the
/// clocks reconciled and the limits put in force with what was used carried over; answers the
/// status under them (`None`: see the buffer's status).
#[napi(js_name = "limiterSetLimits")]
pub fn limiter_set_limits(
    env: &Env,
    registry_id: u32,
    index: u32,
    limits: NewLimits,
    supplied: bool,
) -> napi::Result<Option<StatusOutput>> {
    guard(env, || {
        let limits = new_limits(&limits)?;
        let status = reconciled_call(registry_id, index, supplied, |limiter, clock, anomalies| {
            let status = limiter.set_limits(limits, clock, anomalies)?;
            let time_zone = limiter
                .quota()
                .map(|(quota, _)| quota.spec.time_zone_name());
            Ok(StatusOutput::from((status, time_zone)))
        })?;
        // The quiet path's bound on `n` follows the capacity in force.
        registry(registry_id)?.with_cell(index, |state| {
            state.quiet_max_n = state.limiter.capacity().min(MAX_SAFE_INTEGER);
            Ok(())
        })?;
        Ok(status)
    })
}

/// `refund(n)`: reconciles, then gives back `n` tokens and quota units (status in the buffer).
#[napi(js_name = "limiterRefund")]
pub fn limiter_refund(
    env: &Env,
    registry_id: u32,
    index: u32,
    n: f64,
    supplied: bool,
) -> napi::Result<()> {
    guard(env, || {
        let count = positive_count(n)?;
        reconciled_call(registry_id, index, supplied, |limiter, clock, anomalies| {
            limiter.refund(count, clock, anomalies)
        })
        .map(drop)
    })
}

/// The HTTP middleware's rollback, reading no clock: `n` tokens, and `n` quota units if the period
/// of `slot` (`PERIOD_SLOT` after the decision; NaN: none) is still open.
#[napi(js_name = "limiterGiveBack")]
pub fn limiter_give_back(
    env: &Env,
    registry_id: u32,
    index: u32,
    n: f64,
    slot: f64,
) -> napi::Result<()> {
    guard(env, || {
        let count = positive_count(n)?;
        let slot = PeriodSlot::from_number(slot);
        registry(registry_id)?.with_cell(index, |state| {
            state.limiter.give_back(count, slot);
            Ok(())
        })
    })
}

/// The limiter's own period spec applied to `wall_ms`; `None` without a quota.
#[napi(js_name = "limiterPeriodFor")]
pub fn limiter_period_for(
    env: &Env,
    registry_id: u32,
    index: u32,
    wall_ms: f64,
) -> napi::Result<Option<PeriodOutput>> {
    guard(env, || {
        registry(registry_id)?.with_cell(index, |state| {
            let quota = state.limiter.quota();
            quota
                .map(|(quota, _)| spec_period(&quota.spec, wall_ms))
                .transpose()
        })
    })
}

/// `stats()`, written into the registry's result buffer (no clock read).
#[napi(js_name = "limiterStats")]
pub fn limiter_stats(env: &Env, registry_id: u32, index: u32) -> napi::Result<()> {
    guard(env, || {
        let registry = registry(registry_id)?;
        registry.with_cell(index, |state| {
            write_stats(&registry.result, state.limiter.counters(), 1);
            Ok(())
        })
    })
}
