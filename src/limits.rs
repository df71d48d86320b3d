//! A limiter's numbers, checked once, here: a bucket's capacity, refill and initial tokens, a
//! quota's limit and period (the options of `QuotaClock`, `KeyedQuotaClock` and a zone, and each
//! key policy), what a [`LimiterConfig`](crate::limiter::LimiterConfig) adds, a keyed
//! limiter's and a zone's `maxKeys`, and `share`'s numbers (`leaseUnits`, a shared bucket's
//! `leaseMs` and capacity; [`KeyedValues::checked`] in the options' order). The binding converts
//! and calls; the JS face checks only types. The messages are the contract's.

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

/// Whether `value` is an integer in `range`: the one test of every integer option and argument.
#[inline(always)]
pub fn is_integer_in(value: f64, range: std::ops::RangeInclusive<f64>) -> bool {
    range.contains(&value) && value.fract() == 0.0
}

/// `value` when it is an integer in `range`; else `InvalidOption`: "`name` must be `what`;
/// received `value`" (the form of every option's message).
pub fn integer_in(
    value: f64,
    range: std::ops::RangeInclusive<f64>,
    name: impl std::fmt::Display,
    what: &str,
) -> Result<u64, Error> {
    if is_integer_in(value, range) {
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

/// The largest `maxKeys`: 2**32.
pub const MAX_KEYS: f64 = 4_294_967_296.0;

/// `maxKeys` (a keyed limiter's, or a zone's): a positive integer no larger than 2**32.
pub fn check_max_keys(max_keys: f64) -> Result<u64, Error> {
    integer_in(
        max_keys,
        1.0..=MAX_KEYS,
        "maxKeys",
        "a positive integer no larger than 2**32 (4294967296)",
    )
}

/// `share.leaseUnits`: a positive safe integer.
pub fn check_lease_units(units: f64) -> Result<u64, Error> {
    integer_in(
        units,
        1.0..=MAX_SAFE_INTEGER,
        "share.leaseUnits",
        "a positive safe integer",
    )
}

/// The most a shared bucket's capacity may be (2**31).
pub const MAX_SHARED_CAPACITY: f64 = 2_147_483_648.0;

/// A shared bucket's capacity (`share.bucket`): an integer from 1 to 2**31; `path` names the
/// policy it belongs to (empty for the options').
pub fn check_shared_capacity(path: &str, capacity: f64) -> Result<(), Error> {
    integer_in(
        capacity,
        1.0..=MAX_SHARED_CAPACITY,
        format_args!("{path}capacity"),
        "an integer from 1 to 2**31 (2147483648) for a shared bucket (share.bucket)",
    )
    .map(drop)
}

/// A keyed limiter's own numbers, as given (each absent or given): `maxKeys`, and with `share`,
/// `share.leaseUnits` and, for a shared bucket, `share.leaseMs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyedValues {
    pub max_keys: Option<f64>,
    pub lease_units: Option<f64>,
    pub lease_ms: Option<f64>,
}

/// [`KeyedValues`], checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedKeyedValues {
    pub max_keys: Option<u64>,
    pub lease_units: Option<u64>,
    pub lease_ms: Option<u64>,
}

impl KeyedValues {
    /// Checks the values given in the options' order of checks (the JS face's, which reads
    /// `share` before `maxKeys`): `share.leaseUnits`, `share.leaseMs`, then `maxKeys`. The first
    /// refused is the error.
    pub fn checked(&self) -> Result<CheckedKeyedValues, Error> {
        let lease_units = self.lease_units.map(check_lease_units).transpose()?;
        let lease_ms = self.lease_ms.map(checked_lease_ms).transpose()?;
        let max_keys = self.max_keys.map(check_max_keys).transpose()?;
        Ok(CheckedKeyedValues {
            max_keys,
            lease_units,
            lease_ms,
        })
    }
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

    #[test]
    fn the_share_numbers_are_checked_in_the_core_with_the_contracts_messages() {
        use crate::error::ErrorCode;
        assert!(
            check_shared_capacity("", 1.0).is_ok()
                && check_shared_capacity("", MAX_SHARED_CAPACITY).is_ok()
        );
        let error = check_shared_capacity("policy.", 0.5).unwrap_err();
        assert_eq!(
            error.to_string(),
            "policy.capacity must be an integer from 1 to 2**31 (2147483648) for a shared bucket (share.bucket); received 0.5"
        );
        assert_eq!(
            check_lease_units(9_007_199_254_740_991.0).unwrap(),
            (1 << 53) - 1
        );
        assert_eq!(
            check_lease_units(0.0).unwrap_err().to_string(),
            "share.leaseUnits must be a positive safe integer; received 0"
        );
        assert_eq!(check_max_keys(4_294_967_296.0).unwrap(), 1 << 32);
        for bad in [0.0, 4_294_967_297.0, 2.5, f64::INFINITY] {
            let error = check_max_keys(bad).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidOption);
            assert!(error.to_string().starts_with(
                "maxKeys must be a positive integer no larger than 2**32 (4294967296); received "
            ));
        }
    }

    #[test]
    fn a_keyed_limiters_numbers_are_checked_share_first_then_max_keys() {
        let all_wrong = KeyedValues {
            max_keys: Some(0.0),
            lease_units: Some(0.5),
            lease_ms: Some(10.0),
        };
        let first = |values: KeyedValues| values.checked().unwrap_err().to_string();
        assert!(first(all_wrong).starts_with("share.leaseUnits must be"));
        let lease_ms_and_max_keys = KeyedValues {
            lease_units: Some(5.0),
            ..all_wrong
        };
        assert!(first(lease_ms_and_max_keys).starts_with("share.leaseMs must be"));
        let max_keys = KeyedValues {
            lease_ms: Some(4_000.0),
            ..lease_ms_and_max_keys
        };
        assert!(first(max_keys).starts_with("maxKeys must be"));
        let checked = KeyedValues {
            max_keys: Some(10.0),
            ..max_keys
        }
        .checked()
        .unwrap();
        assert_eq!(
            checked,
            CheckedKeyedValues {
                max_keys: Some(10),
                lease_units: Some(5),
                lease_ms: Some(4_000),
            }
        );
        assert_eq!(
            KeyedValues::default().checked().unwrap(),
            CheckedKeyedValues {
                max_keys: None,
                lease_units: None,
                lease_ms: None,
            }
        );
    }
}
