//! The create entry points' inputs: a limiter's options (types checked by the JS face, values by
//! the core's `LimiterConfig::checked`) and the clock it reads.

use napi_derive::napi;

use super::buffer::Supplied;
use super::calendar::{raw_spec, PeriodSpecInput};
use super::clock::ClockHandle;
use super::errors::{from_core, invalid_arg, CodedResult};
use super::manual_clock::NativeManualClock;
use crate::clock::SystemClock;
use crate::limiter::LimiterConfig;
use crate::limits::LimitsInput;

pub(crate) use crate::limits::MAX_SAFE_INTEGER;

/// Options as the JS face typed and defaulted them (values checked by [`config_from`]).
#[napi(object)]
pub struct LimiterOptions {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    /// `false`: no bucket (a quota alone; capacity, refill rate and tokens are Infinity).
    /// Absent: a bucket.
    pub bucket: Option<bool>,
    pub suspend_policy: String,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
    /// Absent turns the plausibility check off.
    pub earliest_plausible_wall_ms: Option<f64>,
}

/// The clock a limiter reads, and the starting readings the JS face took of a JS clock.
#[napi(object, object_to_js = false)]
pub struct ClockInput<'_javascript_function_scope> {
    /// 'system' | 'system-native-reader' | 'system-reader' | 'manual' | 'js' | 'js-reader'. The JS
    /// face reads the clocks that are JS ('system-reader': the JS elapsed-realtime reader).
    pub kind: String,
    /// With kind 'manual': the clock.
    pub manual: Option<&'_javascript_function_scope NativeManualClock>,
    pub monotonic_ms: Option<f64>,
    pub wall_ms: Option<f64>,
    pub elapsed_realtime_ms: Option<f64>,
}

#[napi(object, object_to_js = false)]
pub struct LimiterInput<'_javascript_function_scope> {
    /// The registry (`createRegistry`'s `id`) to hold the limiter.
    pub registry: u32,
    pub options: LimiterOptions,
    pub clock: ClockInput<'_javascript_function_scope>,
    /// The JS face's id for the limiter's `onAnomaly`, if it has one.
    pub anomaly_listener: Option<f64>,
}

impl ClockInput<'_> {
    /// The clock to hold, and the starting readings to take with it.
    pub(crate) fn handle(&self) -> CodedResult<(ClockHandle, Supplied)> {
        let clock = match self.kind.as_str() {
            "system" => ClockHandle::System(SystemClock {
                with_elapsed_realtime: false,
            }),
            "system-native-reader" => ClockHandle::System(SystemClock {
                with_elapsed_realtime: true,
            }),
            "system-reader" => ClockHandle::SystemWithReader,
            "manual" => match self.manual {
                Some(manual) => ClockHandle::Manual(manual.state.clone()),
                None => return Err(invalid_arg("a manual clock is missing")),
            },
            "js" => ClockHandle::Js { has_reader: false },
            "js-reader" => ClockHandle::Js { has_reader: true },
            other => return Err(invalid_arg(format!("unknown clock kind '{other}'"))),
        };
        let supplied = Supplied {
            monotonic_ms: self.monotonic_ms,
            wall_ms: self.wall_ms,
            elapsed_realtime_ms: self.elapsed_realtime_ms,
        };
        Ok((clock, supplied))
    }
}

/// Limits as the binding receives them, for [`Limits::checked`](crate::limits::Limits::checked).
pub(crate) fn limits_input<'a>(
    bucket: Option<bool>,
    capacity: f64,
    refill_per_second: f64,
    initial_tokens: f64,
    quota_limit: Option<f64>,
    quota_period: Option<&'a PeriodSpecInput>,
) -> LimitsInput<'a> {
    LimitsInput {
        bucket: bucket != Some(false),
        capacity,
        refill_per_second,
        initial_tokens,
        quota_limit,
        quota_period: quota_period.map(raw_spec),
    }
}

pub(crate) fn config_from(options: &LimiterOptions) -> CodedResult<LimiterConfig> {
    let limits = limits_input(
        options.bucket,
        options.capacity,
        options.refill_per_second,
        options.initial_tokens,
        options.quota_limit,
        options.quota_period.as_ref(),
    );
    LimiterConfig::checked(
        limits,
        &options.suspend_policy,
        options.earliest_plausible_wall_ms,
    )
    .map_err(|error| from_core(&error))
}

/// `setLimits`'s limits as the JS face merged them with the ones in force (types checked).
#[napi(object)]
pub struct NewLimits {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    /// `false`: no bucket (a quota alone).
    pub bucket: Option<bool>,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
}

/// [`NewLimits`]' values, checked like the constructor's options.
pub(crate) fn new_limits(input: &NewLimits) -> CodedResult<crate::limits::Limits> {
    let limits = limits_input(
        input.bucket,
        input.capacity,
        input.refill_per_second,
        input.initial_tokens,
        input.quota_limit,
        input.quota_period.as_ref(),
    );
    crate::limits::Limits::checked("limits.", limits).map_err(|error| from_core(&error))
}
