//! What the JS face calls the core's values: the class each error code is thrown as, the method a
//! JS clock has for each reading, and the lists of the public string unions that `contract()`
//! exports. The core knows none of these names.
// Pure: `cargo test` compiles it (and its tests) without the binding around it.
#![cfg_attr(test, allow(dead_code))]

use crate::error::{ErrorCode, Reading};

/// The JavaScript class an error code is thrown as: `QuotaClockError` (the clocks, the key
/// table, a store or a user's callback failed the call), `RangeError` (a value out of range; the
/// JS face throws `TypeError` for a wrong type), `TypeError` (a call this limiter does not take)
/// or `Error` (a bug of this package, or something missing from the installation).
pub(crate) fn class_of(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::MonotonicRegression
        | ErrorCode::AmbiguousWallJump
        | ErrorCode::ImplausibleWallClock
        | ErrorCode::ClockReading
        | ErrorCode::UnsupportedPlatform
        | ErrorCode::KeyLimit
        | ErrorCode::StoreUnavailable
        | ErrorCode::StoreResponse
        | ErrorCode::Callback => "QuotaClockError",
        ErrorCode::InvalidOption
        | ErrorCode::ZoneMismatch
        | ErrorCode::SubDayPeriod
        | ErrorCode::UnknownTimeZone
        | ErrorCode::InvalidArg => "RangeError",
        ErrorCode::SharedAsync => "TypeError",
        ErrorCode::Internal
        | ErrorCode::MissingPeerDependency
        | ErrorCode::NativeBindingNotFound => "Error",
    }
}

/// The method of a JS clock (`clock.monotonicMs()`, ...) that takes `reading`, as messages name it.
pub(crate) fn js_method(reading: Reading) -> &'static str {
    match reading {
        Reading::Monotonic => "monotonicMs()",
        Reading::Wall => "wallMs()",
        Reading::ElapsedRealtime => "elapsedRealtimeMs()",
    }
}

#[cfg(test)]
mod tests;
