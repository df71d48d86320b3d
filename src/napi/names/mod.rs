//! The JS names of the core's values (the core knows none): each error code's class, a JS clock's
//! method per reading. Pure: `cargo test` compiles it (and its tests) without the binding.
#![cfg_attr(test, allow(dead_code))]

use crate::error::{ErrorCode, Reading};

/// The JS class an error code is thrown as: `QuotaClockError` (the call failed), `RangeError` (a
/// value out of range), `TypeError` (a call this limiter does not take) or `Error` (a bug).
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
