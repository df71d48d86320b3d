//! The JS names' lists and classes (`cargo test`, without the binding around them).

use super::*;
use crate::anomaly::AnomalyKind;
use crate::calendar::{PeriodUnit, StartKind};
use crate::clock::SuspendPolicy;
use crate::error::Error;
use crate::limiter::RetryBasis;
use std::collections::HashSet;

/// Each list names every variant once: a variant added to an enum without its entry in the
/// list fails to compile in the exhaustive matches below, and a duplicate fails the count.
fn distinct<T: Copy>(items: &[T], name: impl Fn(T) -> &'static str) -> HashSet<&'static str> {
    let names: HashSet<_> = items.iter().map(|&item| name(item)).collect();
    assert_eq!(names.len(), items.len(), "a duplicate in {:?}", names);
    names
}

#[test]
fn every_variant_of_the_exported_unions_is_listed_once() {
    // `ErrorCode`'s exhaustive match is `class_of`'s: a code added without a class fails to
    // compile there.
    assert_eq!(distinct(&ErrorCode::ALL, ErrorCode::as_str).len(), 18);
    assert_eq!(distinct(&RetryBasis::ALL, RetryBasis::as_str).len(), 2);
    assert_eq!(distinct(&AnomalyKind::ALL, AnomalyKind::as_str).len(), 7);
    assert_eq!(
        distinct(&SuspendPolicy::ALL, SuspendPolicy::as_str).len(),
        3
    );
    assert_eq!(distinct(&PeriodUnit::ALL, PeriodUnit::as_str).len(), 4);
    assert_eq!(distinct(&StartKind::ALL, StartKind::as_str).len(), 3);
    for kind in AnomalyKind::ALL {
        match kind {
            AnomalyKind::WallStepBack
            | AnomalyKind::WallStepForward
            | AnomalyKind::Suspend
            | AnomalyKind::AmbiguousWallJump
            | AnomalyKind::PeriodRegression
            | AnomalyKind::PeriodSkip
            | AnomalyKind::StoreClockStep => {}
        }
    }
}

#[test]
fn suspend_policies_parse_back() {
    for policy in SuspendPolicy::ALL {
        assert_eq!(SuspendPolicy::parse(policy.as_str()), Some(policy));
    }
    assert_eq!(SuspendPolicy::parse("Ignore"), None);
}

#[test]
fn error_codes_are_classed() {
    // The codes thrown as `QuotaClockError`.
    let clock: Vec<_> = ErrorCode::ALL
        .iter()
        .filter(|&&code| class_of(code) == "QuotaClockError")
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
            "ERR_KEY_LIMIT",
            "ERR_STORE_UNAVAILABLE",
            "ERR_STORE_RESPONSE",
            "ERR_CALLBACK"
        ]
    );
    assert_eq!(class_of(ErrorCode::Internal), "Error");
    assert_eq!(class_of(ErrorCode::SharedAsync), "TypeError");
    assert_eq!(
        class_of(Error::KeyLimit { max_keys: 1 }.code()),
        "QuotaClockError"
    );
    assert_eq!(
        class_of(Error::invalid_option(String::new()).code()),
        "RangeError"
    );
}

#[test]
fn clock_errors_name_the_js_clock_method() {
    let error = Error::clock_failed(Reading::ElapsedRealtime, "it threw");
    assert_eq!(
        error.message_naming(js_method).to_string(),
        "clock.elapsedRealtimeMs() failed: it threw"
    );
    assert_eq!(
        Error::clock_outside_calendar(9e15)
            .message_naming(js_method)
            .to_string(),
        "clock.wallMs() read 9000000000000000 ms, outside the calendar's range (±8.64e+15 ms, the range of a JS Date); the calendar quota cannot place it, so nothing was consumed"
    );
}
