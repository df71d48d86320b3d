//! The contract between the core and the JavaScript face, defined once: error codes and the
//! class each is thrown as, the string values of the public unions, the calendar's range, and the
//! layout of the shared result buffer. The binding exports it as `contract()`; the JS face reads
//! it at load instead of copying it.

use crate::anomaly::AnomalyKind;
use crate::calendar::{PeriodUnit, StartKind};
use crate::clock::SuspendPolicy;
use crate::limiter::RetryBasis;

/// Every code an error of this package carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MonotonicRegression,
    AmbiguousWallJump,
    ImplausibleWallClock,
    ClockReading,
    UnsupportedPlatform,
    KeyLimit,
    InvalidOption,
    SubDayPeriod,
    UnknownTimeZone,
    InvalidArg,
    Internal,
}

/// The JavaScript class an error code is thrown as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// `QuotaClockError`: the clocks (or the key table) refused the call.
    QuotaClockError,
    /// `RangeError`: a value out of range (the JS face throws `TypeError` for a wrong type).
    RangeError,
    /// `Error`: a bug of this package.
    Error,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::QuotaClockError => "QuotaClockError",
            ErrorClass::RangeError => "RangeError",
            ErrorClass::Error => "Error",
        }
    }
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::MonotonicRegression,
        ErrorCode::AmbiguousWallJump,
        ErrorCode::ImplausibleWallClock,
        ErrorCode::ClockReading,
        ErrorCode::UnsupportedPlatform,
        ErrorCode::KeyLimit,
        ErrorCode::InvalidOption,
        ErrorCode::SubDayPeriod,
        ErrorCode::UnknownTimeZone,
        ErrorCode::InvalidArg,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MonotonicRegression => "ERR_MONOTONIC_REGRESSION",
            ErrorCode::AmbiguousWallJump => "ERR_AMBIGUOUS_WALL_JUMP",
            ErrorCode::ImplausibleWallClock => "ERR_IMPLAUSIBLE_WALL_CLOCK",
            ErrorCode::ClockReading => "ERR_CLOCK_READING",
            ErrorCode::UnsupportedPlatform => "ERR_UNSUPPORTED_PLATFORM",
            ErrorCode::KeyLimit => "ERR_KEY_LIMIT",
            ErrorCode::InvalidOption => "ERR_INVALID_OPTION",
            ErrorCode::SubDayPeriod => "ERR_SUB_DAY_PERIOD",
            ErrorCode::UnknownTimeZone => "ERR_UNKNOWN_TIME_ZONE",
            ErrorCode::InvalidArg => "ERR_INVALID_ARG",
            ErrorCode::Internal => "ERR_INTERNAL",
        }
    }

    pub fn class(self) -> ErrorClass {
        match self {
            ErrorCode::MonotonicRegression
            | ErrorCode::AmbiguousWallJump
            | ErrorCode::ImplausibleWallClock
            | ErrorCode::ClockReading
            | ErrorCode::UnsupportedPlatform
            | ErrorCode::KeyLimit => ErrorClass::QuotaClockError,
            ErrorCode::InvalidOption
            | ErrorCode::SubDayPeriod
            | ErrorCode::UnknownTimeZone
            | ErrorCode::InvalidArg => ErrorClass::RangeError,
            ErrorCode::Internal => ErrorClass::Error,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The largest |wall time| the calendar (and the plausibility check) accepts, in Unix ms:
/// JavaScript's Date range.
pub const MAX_WALL_MS: f64 = 8.64e15;

/// The shared result buffer (one `Float64Array` per registry, and one per keyed limiter):
/// positions, statuses and codes. In: `N_OR_STATUS` (tokens asked for), `LIMITER` (a
/// QuotaClock's registry index, written as a `u32` into the position's first half) or
/// `OPERATION` (a keyed limiter's), and with readings taken in JS, `MONOTONIC_MS`..
/// `HAS_ELAPSED_REALTIME`. Out: the status in `N_OR_STATUS`, then the decision.
pub mod buffer {
    pub const N_OR_STATUS: usize = 0;
    pub const ALLOWED: usize = 1;
    pub const RETRY_AFTER_MS: usize = 2;
    pub const BASIS: usize = 3;
    pub const TOKENS: usize = 4;
    /// NaN without a quota.
    pub const QUOTA_REMAINING: usize = 5;
    /// A QuotaClock's registry index (a `u32`).
    pub const LIMITER: usize = 6;
    /// A keyed limiter's operation: `OPERATION_CONSUME` or `OPERATION_REFUND`.
    pub const OPERATION: usize = 6;
    /// In: the readings taken in JS; out (status `NEEDS_READER`): those the stopped call took.
    pub const MONOTONIC_MS: usize = 7;
    pub const WALL_MS: usize = 8;
    pub const ELAPSED_REALTIME_MS: usize = 9;
    /// In: 1 when `ELAPSED_REALTIME_MS` holds a reading.
    pub const HAS_ELAPSED_REALTIME: usize = 10;
    pub const LENGTH: usize = 11;

    pub const STATUS_DECIDED: f64 = 0.0;
    pub const STATUS_DECIDED_WITH_ANOMALIES: f64 = 1.0;
    pub const STATUS_ERROR: f64 = 2.0;
    /// The call needs an elapsed-realtime reading from a JS reader; it changed nothing, and the
    /// JS face calls again with the readings it took and the reader's.
    pub const STATUS_NEEDS_READER: f64 = 3.0;
    /// The limiter's clock is a JS clock: nothing changed; the JS face reads it and calls again.
    pub const STATUS_NEEDS_READINGS: f64 = 4.0;
    /// A keyed limiter needs the key's policy first: nothing changed.
    pub const STATUS_NEEDS_POLICY: f64 = 5.0;

    pub const OPERATION_CONSUME: f64 = 0.0;
    pub const OPERATION_REFUND: f64 = 1.0;

    /// `BASIS` when a decision has no retry-after basis (`null`); the others are
    /// [`basis_code`](super::basis_code)'s.
    pub const BASIS_NONE: f64 = 0.0;
}

/// Where `stats()` writes a limiter's counters (`crate::stats::Counters`) in its result buffer:
/// the decisions, the keys held, the evictions, the key-limit refusals, then one position per
/// anomaly kind in [`ANOMALY_KINDS`] order. It fits the result buffer (checked at compile time).
pub mod stats {
    use crate::stats::ANOMALY_KIND_COUNT;

    pub const ALLOWED: usize = 0;
    pub const DENIED: usize = 1;
    pub const KEYS: usize = 2;
    pub const EVICTED: usize = 3;
    pub const KEY_LIMIT_REFUSALS: usize = 4;
    /// The first anomaly kind's count; the others follow.
    pub const ANOMALIES: usize = 5;
    pub const LENGTH: usize = ANOMALIES + ANOMALY_KIND_COUNT;
    // The counters are written into the result buffer: they must fit it.
    const _: () = assert!(LENGTH <= super::buffer::LENGTH);
}

/// A retry-after basis as the result buffer codes it (`buffer::BASIS_NONE` for none).
#[inline]
pub fn basis_code(basis: Option<RetryBasis>) -> f64 {
    match basis {
        None => buffer::BASIS_NONE,
        Some(RetryBasis::MonotonicRefill) => 1.0,
        Some(RetryBasis::WallPeriod) => 2.0,
    }
}

pub const RETRY_BASES: [RetryBasis; 2] = [RetryBasis::MonotonicRefill, RetryBasis::WallPeriod];
pub const ANOMALY_KINDS: [AnomalyKind; 6] = [
    AnomalyKind::WallStepBack,
    AnomalyKind::WallStepForward,
    AnomalyKind::Suspend,
    AnomalyKind::AmbiguousWallJump,
    AnomalyKind::PeriodRegression,
    AnomalyKind::PeriodSkip,
];
pub const SUSPEND_POLICIES: [SuspendPolicy; 3] = [
    SuspendPolicy::Ignore,
    SuspendPolicy::Credit,
    SuspendPolicy::Refuse,
];
pub const PERIOD_UNITS: [PeriodUnit; 4] = [
    PeriodUnit::Day,
    PeriodUnit::Week,
    PeriodUnit::Month,
    PeriodUnit::Year,
];
pub const START_KINDS: [StartKind; 3] = [StartKind::Exact, StartKind::Gap, StartKind::Repeat];

#[cfg(test)]
mod tests {
    use super::buffer::*;
    use super::*;
    use std::collections::HashSet;

    /// Each list names every variant once: a variant added to an enum without its entry here
    /// fails to compile in the exhaustive matches below, and a duplicate fails the count.
    fn distinct<T: Copy>(items: &[T], name: impl Fn(T) -> &'static str) -> HashSet<&'static str> {
        let names: HashSet<_> = items.iter().map(|&item| name(item)).collect();
        assert_eq!(names.len(), items.len(), "a duplicate in {:?}", names);
        names
    }

    #[test]
    fn every_variant_is_listed_once() {
        for code in ErrorCode::ALL {
            match code {
                ErrorCode::MonotonicRegression
                | ErrorCode::AmbiguousWallJump
                | ErrorCode::ImplausibleWallClock
                | ErrorCode::ClockReading
                | ErrorCode::UnsupportedPlatform
                | ErrorCode::KeyLimit
                | ErrorCode::InvalidOption
                | ErrorCode::SubDayPeriod
                | ErrorCode::UnknownTimeZone
                | ErrorCode::InvalidArg
                | ErrorCode::Internal => {}
            }
        }
        assert_eq!(distinct(&ErrorCode::ALL, ErrorCode::as_str).len(), 11);
        assert_eq!(distinct(&RETRY_BASES, RetryBasis::as_str).len(), 2);
        assert_eq!(distinct(&ANOMALY_KINDS, AnomalyKind::as_str).len(), 6);
        assert_eq!(distinct(&SUSPEND_POLICIES, SuspendPolicy::as_str).len(), 3);
        assert_eq!(distinct(&PERIOD_UNITS, PeriodUnit::as_str).len(), 4);
        assert_eq!(distinct(&START_KINDS, StartKind::as_str).len(), 3);
        // Exhaustiveness: each enum's variants all appear (a new one breaks these matches).
        for kind in ANOMALY_KINDS {
            match kind {
                AnomalyKind::WallStepBack
                | AnomalyKind::WallStepForward
                | AnomalyKind::Suspend
                | AnomalyKind::AmbiguousWallJump
                | AnomalyKind::PeriodRegression
                | AnomalyKind::PeriodSkip => {}
            }
        }
    }

    #[test]
    fn suspend_policies_parse_back() {
        for policy in SUSPEND_POLICIES {
            assert_eq!(SuspendPolicy::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(SuspendPolicy::parse("Ignore"), None);
    }

    #[test]
    fn error_codes_are_coded_and_classed() {
        for code in ErrorCode::ALL {
            assert!(code.as_str().starts_with("ERR_"), "{code}");
            assert_eq!(code.to_string(), code.as_str());
        }
        let clock: Vec<_> = ErrorCode::ALL
            .iter()
            .filter(|code| code.class() == ErrorClass::QuotaClockError)
            .map(|code| code.as_str())
            .collect();
        assert_eq!(
            clock,
            [
                "ERR_MONOTONIC_REGRESSION",
                "ERR_AMBIGUOUS_WALL_JUMP",
                "ERR_IMPLAUSIBLE_WALL_CLOCK",
                "ERR_CLOCK_READING",
                "ERR_UNSUPPORTED_PLATFORM",
                "ERR_KEY_LIMIT"
            ]
        );
        assert_eq!(ErrorCode::Internal.class(), ErrorClass::Error);
    }

    #[test]
    fn basis_codes_are_distinct_and_not_none() {
        let codes: Vec<f64> = RETRY_BASES.iter().map(|&b| basis_code(Some(b))).collect();
        assert_eq!(basis_code(None), BASIS_NONE);
        assert!(codes.iter().all(|&code| code != BASIS_NONE));
        assert_ne!(codes[0], codes[1]);
    }

    #[test]
    fn buffer_positions_fit_and_do_not_collide() {
        let inputs_outputs = [
            N_OR_STATUS,
            ALLOWED,
            RETRY_AFTER_MS,
            BASIS,
            TOKENS,
            QUOTA_REMAINING,
            LIMITER,
            MONOTONIC_MS,
            WALL_MS,
            ELAPSED_REALTIME_MS,
            HAS_ELAPSED_REALTIME,
        ];
        let distinct: HashSet<_> = inputs_outputs.iter().collect();
        assert_eq!(distinct.len(), inputs_outputs.len());
        assert!(inputs_outputs.iter().all(|&at| at < LENGTH));
        assert_eq!(
            OPERATION, LIMITER,
            "the keyed buffer reuses the limiter position"
        );
        let statuses = [
            STATUS_DECIDED,
            STATUS_DECIDED_WITH_ANOMALIES,
            STATUS_ERROR,
            STATUS_NEEDS_READER,
            STATUS_NEEDS_READINGS,
            STATUS_NEEDS_POLICY,
        ];
        for (i, a) in statuses.iter().enumerate() {
            assert!(statuses[i + 1..].iter().all(|b| b != a));
        }
    }

    #[test]
    fn the_stats_positions_fit_the_result_buffer_and_do_not_collide() {
        use super::stats;
        let singles = [
            stats::ALLOWED,
            stats::DENIED,
            stats::KEYS,
            stats::EVICTED,
            stats::KEY_LIMIT_REFUSALS,
        ];
        assert!(singles.iter().all(|&at| at < stats::ANOMALIES));
        assert_eq!(singles.iter().collect::<HashSet<_>>().len(), singles.len());
        assert_eq!(stats::LENGTH, stats::ANOMALIES + ANOMALY_KINDS.len());
    }

    #[test]
    fn the_calendar_range_is_javascripts() {
        assert_eq!(MAX_WALL_MS, 8.64e15);
    }
}
