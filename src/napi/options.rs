//! The inputs of the create entry points: a limiter's options, whose types the JS face checked
//! (napi-rs would refuse a wrong type with an error of its own) and whose numeric values are
//! checked here, once, for the JS face and a direct call alike; and the clock it reads. (The JS
//! face checks the suspend policy's name against the contract, since a JS string does not always
//! arrive intact; here it is parsed, and a direct call's bad name refused.)

use napi_derive::napi;

use super::buffer::Supplied;
use super::calendar::{parse_spec, PeriodSpecInput};
use super::clock::ClockHandle;
use super::errors::{coded, invalid_arg, CodedResult};
use super::manual_clock::NativeManualClock;
use crate::clock::{SuspendPolicy, SystemClock};
use crate::error::ErrorCode;
use crate::keyed::KeyPolicy;
use crate::limiter::LimiterConfig;
use crate::quota::QuotaPolicy;
use crate::text::{js_number, js_quoted};

pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Options after the JS face has checked their types and applied defaults; their values are
/// checked by [`config_from`].
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

/// The clock a limiter reads, and the starting readings the JS face took of a clock it reads.
/// (The lifetime is the call's; napi-derive's generated conversions name it so.)
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

impl ClockInput<'_> {
    /// The clock to hold, and the starting readings to take with it.
    pub(crate) fn handle(&self) -> CodedResult<(ClockHandle, Supplied)> {
        let clock = clock_handle(&self.kind, self.manual)?;
        let supplied = Supplied {
            monotonic_ms: self.monotonic_ms,
            wall_ms: self.wall_ms,
            elapsed_realtime_ms: self.elapsed_realtime_ms,
        };
        Ok((clock, supplied))
    }
}

/// `createLimiter`'s input.
#[napi(object, object_to_js = false)]
pub struct LimiterInput<'_javascript_function_scope> {
    /// The registry (`createRegistry`'s `id`) to hold the limiter.
    pub registry: u32,
    pub options: LimiterOptions,
    pub clock: ClockInput<'_javascript_function_scope>,
    /// The JS face's id for the limiter's `onAnomaly`, if it has one.
    pub anomaly_listener: Option<f64>,
}

/// The clock a limiter reads.
fn clock_handle(clock_kind: &str, manual: Option<&NativeManualClock>) -> CodedResult<ClockHandle> {
    Ok(match clock_kind {
        "system" => ClockHandle::System(SystemClock {
            with_elapsed_realtime: false,
        }),
        "system-native-reader" => ClockHandle::System(SystemClock {
            with_elapsed_realtime: true,
        }),
        "system-reader" => ClockHandle::SystemWithReader,
        "manual" => ClockHandle::Manual(
            manual
                .ok_or_else(|| invalid_arg("a manual clock is missing"))?
                .state
                .clone(),
        ),
        "js" => ClockHandle::Js { has_reader: false },
        "js-reader" => ClockHandle::Js { has_reader: true },
        other => return Err(invalid_arg(format!("unknown clock kind '{other}'"))),
    })
}

fn check(condition: bool, message: impl FnOnce() -> String) -> CodedResult<()> {
    if condition {
        Ok(())
    } else {
        Err(coded(ErrorCode::InvalidOption, message()))
    }
}

/// The bucket's settings: checked values, or with `bucket` false (a quota alone) a bucket that
/// is never short: capacity, refill rate and tokens all Infinity. The same four values as a key's
/// policy, so a key's policy is checked into one directly.
pub(crate) type Limits = KeyPolicy;

/// The limits a limiter's options and a key's policy share, checked: capacity, refill rate,
/// initial tokens and the quota. `prefix` is how messages name their owner: `""` for a limiter's
/// options, `policy("tenant-1").` for a key's.
pub(crate) fn check_limits(
    prefix: &str,
    bucket: bool,
    capacity: f64,
    refill_per_second: f64,
    initial_tokens: f64,
    quota_limit: Option<f64>,
    quota_period: Option<&PeriodSpecInput>,
) -> CodedResult<Limits> {
    if !bucket {
        let quota = check_quota(prefix, quota_limit, quota_period)?;
        if quota.is_none() {
            return Err(coded(
                ErrorCode::InvalidOption,
                format!(
                    "{prefix}quota is required without a bucket (capacity and refillPerSecond)"
                ),
            ));
        }
        return Ok(Limits {
            capacity: f64::INFINITY,
            refill_per_second: f64::INFINITY,
            initial_tokens: f64::INFINITY,
            quota,
        });
    }
    check(capacity.is_finite() && capacity > 0.0, || {
        format!(
            "{prefix}capacity must be a finite number > 0; received {}",
            js_number(capacity)
        )
    })?;
    check(
        refill_per_second.is_finite() && refill_per_second > 0.0,
        || {
            format!(
                "{prefix}refillPerSecond must be a finite number > 0; received {}",
                js_number(refill_per_second)
            )
        },
    )?;
    check((0.0..=capacity).contains(&initial_tokens), || {
        format!(
            "{prefix}initialTokens must be a number from 0 to capacity ({}); received {}",
            js_number(capacity),
            js_number(initial_tokens)
        )
    })?;
    Ok(Limits {
        capacity,
        refill_per_second,
        initial_tokens,
        quota: check_quota(prefix, quota_limit, quota_period)?,
    })
}

/// The quota's limit and period, checked (both or neither).
fn check_quota(
    prefix: &str,
    quota_limit: Option<f64>,
    quota_period: Option<&PeriodSpecInput>,
) -> CodedResult<Option<QuotaPolicy>> {
    match (quota_period, quota_limit) {
        (Some(period), Some(limit)) => {
            check(
                limit >= 0.0 && limit.fract() == 0.0 && limit <= MAX_SAFE_INTEGER,
                || {
                    format!(
                        "{prefix}quota.limit must be a non-negative safe integer (0 blocks \
                         every request); received {}",
                        js_number(limit)
                    )
                },
            )?;
            Ok(Some(QuotaPolicy::new(
                limit as u64,
                parse_spec(period, &format!("{prefix}quota.period"))?,
            )))
        }
        (None, None) => Ok(None),
        _ => Err(coded(
            ErrorCode::InvalidOption,
            format!("{prefix}quota needs both limit and period"),
        )),
    }
}

pub(crate) fn config_from(options: &LimiterOptions) -> CodedResult<LimiterConfig> {
    let LimiterOptions {
        capacity,
        refill_per_second,
        initial_tokens,
        ..
    } = *options;
    let Limits {
        capacity,
        refill_per_second,
        initial_tokens,
        quota,
    } = check_limits(
        "",
        options.bucket != Some(false),
        capacity,
        refill_per_second,
        initial_tokens,
        options.quota_limit,
        options.quota_period.as_ref(),
    )?;
    let suspend_policy = SuspendPolicy::parse(&options.suspend_policy).ok_or_else(|| {
        let choices: Vec<String> = SuspendPolicy::ALL
            .iter()
            .map(|policy| format!("'{}'", policy.as_str()))
            .collect();
        coded(
            ErrorCode::InvalidOption,
            format!(
                "suspendPolicy must be one of {}; received {}",
                choices.join(", "),
                js_quoted(&options.suspend_policy)
            ),
        )
    })?;
    if let Some(earliest) = options.earliest_plausible_wall_ms {
        check(earliest.is_finite(), || {
            format!(
                "earliestPlausibleWallMs must be a finite number or null; received {}",
                js_number(earliest)
            )
        })?;
    }
    Ok(LimiterConfig {
        capacity,
        refill_per_second,
        initial_tokens,
        suspend_policy,
        quota,
        earliest_plausible_wall_ms: options.earliest_plausible_wall_ms,
    })
}

/// `n` of `refund`: a positive safe integer (the JS face checks it first; this guards direct calls).
pub(crate) fn positive_safe_integer(n: f64) -> CodedResult<u64> {
    if (1.0..=MAX_SAFE_INTEGER).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid_arg(format!(
            "n must be a positive safe integer; received {}",
            js_number(n)
        )))
    }
}
