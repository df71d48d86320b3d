//! A key's policy as the JS face normalized it, validated here.

use napi_derive::napi;

use crate::anomaly::js_number;
use crate::keyed::KeyPolicy;
use crate::napi::calendar::{parse_spec, PeriodSpecInput};
use crate::napi::errors::{coded, invalid_arg, CodedResult};
use crate::napi::options::MAX_SAFE_INTEGER;

/// A key's limits as the JS face normalized them (defaults filled in, types checked).
#[napi(object)]
pub struct PolicyInput {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
    /// How messages name it, e.g. `policy("tenant-1")`.
    pub path: String,
}

pub(super) fn check(condition: bool, message: impl FnOnce() -> String) -> CodedResult<()> {
    if condition {
        Ok(())
    } else {
        Err(coded("ERR_INVALID_OPTION", message()))
    }
}

/// Validates a normalized policy's values (the JS face checked types and merged the defaults).
pub(super) fn key_policy(input: &PolicyInput) -> CodedResult<KeyPolicy> {
    let PolicyInput {
        capacity,
        refill_per_second,
        initial_tokens,
        ref path,
        ..
    } = *input;
    check(capacity.is_finite() && capacity > 0.0, || {
        format!(
            "{path}.capacity must be a finite number > 0; received {}",
            js_number(capacity)
        )
    })?;
    check(
        refill_per_second.is_finite() && refill_per_second > 0.0,
        || {
            format!(
                "{path}.refillPerSecond must be a finite number > 0; received {}",
                js_number(refill_per_second)
            )
        },
    )?;
    check((0.0..=capacity).contains(&initial_tokens), || {
        format!(
            "{path}.initialTokens must be a number from 0 to capacity ({}); received {}",
            js_number(capacity),
            js_number(initial_tokens)
        )
    })?;
    let quota = match (&input.quota_period, input.quota_limit) {
        (Some(period), Some(limit)) => {
            check(
                limit >= 0.0 && limit.fract() == 0.0 && limit <= MAX_SAFE_INTEGER,
                || {
                    format!(
                        "{path}.quota.limit must be a non-negative safe integer; received {}",
                        js_number(limit)
                    )
                },
            )?;
            Some((
                limit as u64,
                parse_spec(period, &format!("{path}.quota.period"))?,
            ))
        }
        (None, None) => None,
        _ => {
            return Err(coded(
                "ERR_INVALID_OPTION",
                format!("{path}.quota needs both limit and period"),
            ))
        }
    };
    Ok(KeyPolicy {
        capacity,
        refill_per_second,
        initial_tokens,
        quota,
    })
}

pub(super) fn count_for(n: f64, capacity: f64) -> CodedResult<u64> {
    if n >= 1.0 && n <= capacity && n <= MAX_SAFE_INTEGER && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid_arg(format!(
            "n must be a positive safe integer no larger than the key's capacity ({}); received {}",
            js_number(capacity),
            js_number(n)
        )))
    }
}
