//! A limiter's numbers, checked once, here: a bucket's capacity, refill and initial tokens, a
//! quota's limit and period (the options of `QuotaClock`, `KeyedQuotaClock` and a zone, and each
//! key policy), what a [`LimiterConfig`](crate::limiter::LimiterConfig) adds, and a shared
//! bucket's `share.leaseMs`. The binding converts and calls; the JS face checks only types. The
//! messages are the contract's.

use crate::calendar::{PeriodSpec, RawPeriodSpec};
use crate::clock::SuspendPolicy;
use crate::error::Error;
use crate::quota::QuotaPolicy;
use crate::text::{js_number, js_quoted};

/// `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Limits, checked (a key's, with the defaults filled in): a bucket, a quota, or both. Without a
/// bucket, the bucket's numbers are infinite.
#[derive(Clone, Debug)]
pub struct Limits {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub quota: Option<QuotaPolicy>,
}

/// Limits as given: `bucket` false for a quota alone; the quota's period as its raw fields.
#[derive(Clone, Copy, Debug)]
pub struct LimitsInput<'a> {
    pub bucket: bool,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<RawPeriodSpec<'a>>,
}

fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), Error> {
    if condition {
        Ok(())
    } else {
        Err(Error::invalid_option(message()))
    }
}

impl Limits {
    /// Checks `input`; `prefix` names its owner in messages (`""` for the options,
    /// `policy("tenant-1").` for a key policy). The checks run in the contract's order: capacity,
    /// refillPerSecond, initialTokens, then the quota (its limit before its period).
    pub fn checked(prefix: &str, input: LimitsInput<'_>) -> Result<Limits, Error> {
        let LimitsInput {
            bucket,
            capacity,
            refill_per_second,
            initial_tokens,
            quota_limit,
            quota_period,
        } = input;
        if !bucket {
            let Some(quota) = checked_quota(prefix, quota_limit, quota_period)? else {
                return Err(Error::invalid_option(format!(
                    "{prefix}quota is required without a bucket (capacity and refillPerSecond)"
                )));
            };
            return Ok(Limits {
                capacity: f64::INFINITY,
                refill_per_second: f64::INFINITY,
                initial_tokens: f64::INFINITY,
                quota: Some(quota),
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
            quota: checked_quota(prefix, quota_limit, quota_period)?,
        })
    }
}

fn checked_quota(
    prefix: &str,
    quota_limit: Option<f64>,
    quota_period: Option<RawPeriodSpec<'_>>,
) -> Result<Option<QuotaPolicy>, Error> {
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
            let spec = PeriodSpec::parse(&period, &format!("{prefix}quota.period"))?;
            Ok(Some(QuotaPolicy::new(limit as u64, spec)))
        }
        (None, None) => Ok(None),
        _ => Err(Error::invalid_option(format!(
            "{prefix}quota needs both limit and period"
        ))),
    }
}

/// `value` when it is an integer in `range`; else `InvalidOption`: "`name` must be `what`;
/// received `value`" (the form of every option's message).
pub fn integer_in(
    value: f64,
    range: std::ops::RangeInclusive<f64>,
    name: impl std::fmt::Display,
    what: &str,
) -> Result<u64, Error> {
    if range.contains(&value) && value.fract() == 0.0 {
        return Ok(value as u64);
    }
    Err(Error::invalid_option(format!(
        "{name} must be {what}; received {}",
        js_number(value)
    )))
}

/// `share.leaseMs`, how long a process may spend a slice of a shared bucket: an integer number
/// of milliseconds from 1000 to 600000.
pub fn checked_lease_ms(lease_ms: f64) -> Result<u64, Error> {
    integer_in(
        lease_ms,
        1_000.0..=600_000.0,
        "share.leaseMs",
        "an integer number of milliseconds from 1000 to 600000",
    )
}

/// `suspendPolicy`: one of [`SuspendPolicy::ALL`]'s names.
pub fn checked_suspend_policy(name: &str) -> Result<SuspendPolicy, Error> {
    SuspendPolicy::parse(name).ok_or_else(|| {
        let choices: Vec<String> = SuspendPolicy::ALL
            .iter()
            .map(|policy| format!("'{}'", policy.as_str()))
            .collect();
        Error::invalid_option(format!(
            "suspendPolicy must be one of {}; received {}",
            choices.join(", "),
            js_quoted(name)
        ))
    })
}

/// `earliestPlausibleWallMs`: a finite number, or none (the check off).
pub fn checked_earliest_plausible(earliest: Option<f64>) -> Result<Option<f64>, Error> {
    if let Some(earliest) = earliest {
        check(earliest.is_finite(), || {
            format!(
                "earliestPlausibleWallMs must be a finite number or null; received {}",
                js_number(earliest)
            )
        })?;
    }
    Ok(earliest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(capacity: f64, refill_per_second: f64, initial_tokens: f64) -> LimitsInput<'static> {
        LimitsInput {
            bucket: true,
            capacity,
            refill_per_second,
            initial_tokens,
            quota_limit: None,
            quota_period: None,
        }
    }

    fn message(result: Result<Limits, Error>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn each_number_is_checked_in_the_contracts_order_with_its_message() {
        assert!(Limits::checked("", bucket(10.0, 1.0, 10.0)).is_ok());
        assert_eq!(
            message(Limits::checked("", bucket(0.0, f64::NAN, 5.0))),
            "capacity must be a finite number > 0; received 0"
        );
        assert_eq!(
            message(Limits::checked(
                "policy(\"a\").",
                bucket(1.0, f64::INFINITY, 5.0)
            )),
            "policy(\"a\").refillPerSecond must be a finite number > 0; received Infinity"
        );
        assert_eq!(
            message(Limits::checked("", bucket(2.0, 1.0, 3.0))),
            "initialTokens must be a number from 0 to capacity (2); received 3"
        );
        let half = LimitsInput {
            quota_limit: Some(5.0),
            ..bucket(1.0, 1.0, 1.0)
        };
        assert_eq!(
            message(Limits::checked("", half)),
            "quota needs both limit and period"
        );
        let none = LimitsInput {
            bucket: false,
            ..bucket(1.0, 1.0, 1.0)
        };
        assert_eq!(
            message(Limits::checked("", none)),
            "quota is required without a bucket (capacity and refillPerSecond)"
        );
        let period = RawPeriodSpec {
            unit: "day",
            time_zone: "UTC",
            anchor_day: None,
            anchor_month: None,
            anchor_time: None,
        };
        let negative = LimitsInput {
            quota_limit: Some(-1.0),
            quota_period: Some(period),
            ..bucket(1.0, 1.0, 1.0)
        };
        assert!(message(Limits::checked("", negative)).starts_with(
            "quota.limit must be a non-negative safe integer (0 blocks every request)"
        ));
        let quota_only = LimitsInput {
            bucket: false,
            quota_limit: Some(0.0),
            quota_period: Some(period),
            ..bucket(f64::NAN, f64::NAN, f64::NAN)
        };
        let limits = Limits::checked("", quota_only).unwrap();
        assert!(limits.capacity.is_infinite() && limits.quota.is_some());
    }

    #[test]
    fn a_lease_is_a_whole_number_of_milliseconds_from_one_second_to_ten_minutes() {
        assert_eq!(checked_lease_ms(1_000.0).unwrap(), 1_000);
        assert_eq!(checked_lease_ms(600_000.0).unwrap(), 600_000);
        for (bad, received) in [
            (999.0, "999"),
            (600_001.0, "600001"),
            (1_500.5, "1500.5"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(
                checked_lease_ms(bad).unwrap_err().to_string(),
                format!("share.leaseMs must be an integer number of milliseconds from 1000 to 600000; received {received}")
            );
        }
    }

    #[test]
    fn the_suspend_policy_and_the_earliest_plausible_wall_reading() {
        assert!(checked_suspend_policy("ignore").is_ok());
        assert!(checked_suspend_policy("nap")
            .unwrap_err()
            .to_string()
            .starts_with("suspendPolicy must be one of 'ignore', "));
        assert_eq!(checked_earliest_plausible(None).unwrap(), None);
        assert_eq!(
            checked_earliest_plausible(Some(f64::NAN))
                .unwrap_err()
                .to_string(),
            "earliestPlausibleWallMs must be a finite number or null; received NaN"
        );
    }
}
