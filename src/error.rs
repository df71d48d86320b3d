//! The core's one error type and the codes its refusals carry: every refusal has a code
//! ([`ErrorCode`]) and a message for its user (`Display`). A leaf: it imports nothing of the
//! crate but the message formatting of [`crate::text`]. Which class the JS face throws a code as
//! is the binding's business, as are the names a JS clock gives its readings.

use std::fmt;

use crate::text::{js_number, ms};

/// Every code an error of this package carries, the JS face's and the CLI's own included (a test
/// of the JS suite fails on an `ERR_…` written in `lib/` or `bin/` that is not one of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MonotonicRegression,
    AmbiguousWallJump,
    ImplausibleWallClock,
    ClockReading,
    UnsupportedPlatform,
    KeyLimit,
    /// A shared limiter's store did not answer in time, or failed (raised by the JS face).
    StoreUnavailable,
    /// A store answered something that makes no sense (raised by the JS face).
    StoreResponse,
    /// A zone's file was made with other options than this limiter's (raised by `zone::open`).
    ZoneMismatch,
    InvalidOption,
    SubDayPeriod,
    UnknownTimeZone,
    InvalidArg,
    Internal,
    /// A user's callback (a key, cost or skip function, `onLimited`, a store) threw or rejected
    /// with something that is not an `Error` (raised by the JS face, the value as `cause`).
    Callback,
    /// `tryConsume` on a shared limiter, whose calls may wait for the store (raised by the JS face).
    SharedAsync,
    /// An optional peer dependency the application did not install (`fastify-plugin`,
    /// `prom-client`, a store's client for the CLI; raised by the JS face and the CLI).
    MissingPeerDependency,
    /// No binary of this package for the platform (raised by the JS face before any contract can
    /// be read: listed here so that every code is in one place).
    NativeBindingNotFound,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::MonotonicRegression,
        ErrorCode::AmbiguousWallJump,
        ErrorCode::ImplausibleWallClock,
        ErrorCode::ClockReading,
        ErrorCode::UnsupportedPlatform,
        ErrorCode::KeyLimit,
        ErrorCode::StoreUnavailable,
        ErrorCode::StoreResponse,
        ErrorCode::ZoneMismatch,
        ErrorCode::InvalidOption,
        ErrorCode::SubDayPeriod,
        ErrorCode::UnknownTimeZone,
        ErrorCode::InvalidArg,
        ErrorCode::Internal,
        ErrorCode::Callback,
        ErrorCode::SharedAsync,
        ErrorCode::MissingPeerDependency,
        ErrorCode::NativeBindingNotFound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MonotonicRegression => "ERR_MONOTONIC_REGRESSION",
            ErrorCode::AmbiguousWallJump => "ERR_AMBIGUOUS_WALL_JUMP",
            ErrorCode::ImplausibleWallClock => "ERR_IMPLAUSIBLE_WALL_CLOCK",
            ErrorCode::ClockReading => "ERR_CLOCK_READING",
            ErrorCode::UnsupportedPlatform => "ERR_UNSUPPORTED_PLATFORM",
            ErrorCode::KeyLimit => "ERR_KEY_LIMIT",
            ErrorCode::StoreUnavailable => "ERR_STORE_UNAVAILABLE",
            ErrorCode::StoreResponse => "ERR_STORE_RESPONSE",
            ErrorCode::ZoneMismatch => "ERR_ZONE_MISMATCH",
            ErrorCode::InvalidOption => "ERR_INVALID_OPTION",
            ErrorCode::SubDayPeriod => "ERR_SUB_DAY_PERIOD",
            ErrorCode::UnknownTimeZone => "ERR_UNKNOWN_TIME_ZONE",
            ErrorCode::InvalidArg => "ERR_INVALID_ARG",
            ErrorCode::Internal => "ERR_INTERNAL",
            ErrorCode::Callback => "ERR_CALLBACK",
            ErrorCode::SharedAsync => "ERR_SHARED_ASYNC",
            ErrorCode::MissingPeerDependency => "ERR_MISSING_PEER_DEPENDENCY",
            ErrorCode::NativeBindingNotFound => "ERR_NATIVE_BINDING_NOT_FOUND",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which reading a clock error is about. [`Reading::source_method`] names it as
/// [`crate::clock::ClockSource`] does; the binding names it as a JS clock does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Monotonic,
    Wall,
    ElapsedRealtime,
}

impl Reading {
    /// The `ClockSource` method that takes this reading.
    pub fn source_method(self) -> &'static str {
        match self {
            Reading::Monotonic => "monotonic_ms()",
            Reading::Wall => "wall_ms()",
            Reading::ElapsedRealtime => "elapsed_realtime_ms()",
        }
    }
}

/// What went wrong with a reading.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadingProblem {
    /// The source answered, but not with a finite number (`received`, as a message shows it).
    NotFinite { received: String },
    /// The source failed to answer (a reader is missing, or could not be read).
    Failed { why: String },
    /// A wall reading the calendar quota cannot place (outside a JS `Date`'s range).
    OutsideCalendar { wall_ms: f64 },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// The monotonic clock went backwards (`latched`: on a call after the one that saw it).
    MonotonicRegression {
        previous_ms: f64,
        now_ms: f64,
        latched: bool,
    },
    /// suspendPolicy 'refuse' and nothing tells a suspend from a wall-clock step.
    AmbiguousWallJump {
        monotonic_delta_ms: f64,
        wall_delta_ms: f64,
    },
    /// The wall clock reads before earliestPlausibleWallMs.
    ImplausibleWallClock { wall_ms: f64, earliest_ms: f64 },
    /// A reading could not be taken or is not a finite number.
    ClockReading {
        reading: Reading,
        problem: ReadingProblem,
    },
    /// A keyed limiter cannot hold a new key: every held key has quota use.
    KeyLimit { max_keys: u64 },
    /// A refused value (a period spec, a snapshot): `code` is a RangeError's
    /// (`ERR_INVALID_OPTION`, `ERR_SUB_DAY_PERIOD`, `ERR_UNKNOWN_TIME_ZONE`).
    Invalid { code: ErrorCode, message: String },
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::MonotonicRegression { .. } => ErrorCode::MonotonicRegression,
            Error::AmbiguousWallJump { .. } => ErrorCode::AmbiguousWallJump,
            Error::ImplausibleWallClock { .. } => ErrorCode::ImplausibleWallClock,
            Error::ClockReading { .. } => ErrorCode::ClockReading,
            Error::KeyLimit { .. } => ErrorCode::KeyLimit,
            Error::Invalid { code, .. } => *code,
        }
    }

    /// A refused option value (`ERR_INVALID_OPTION`).
    pub fn invalid_option(message: String) -> Error {
        Error::Invalid {
            code: ErrorCode::InvalidOption,
            message,
        }
    }

    /// The source answered, but not with a finite number.
    pub fn clock_not_finite(reading: Reading, received: &str) -> Error {
        Error::ClockReading {
            reading,
            problem: ReadingProblem::NotFinite {
                received: received.to_owned(),
            },
        }
    }

    /// A wall reading the calendar quota cannot place (outside a JS `Date`'s range).
    pub fn clock_outside_calendar(wall_ms: f64) -> Error {
        Error::ClockReading {
            reading: Reading::Wall,
            problem: ReadingProblem::OutsideCalendar { wall_ms },
        }
    }

    /// The source failed to answer (a reader is missing, or could not be read).
    pub fn clock_failed(reading: Reading, why: &str) -> Error {
        Error::ClockReading {
            reading,
            problem: ReadingProblem::Failed {
                why: why.to_owned(),
            },
        }
    }

    /// The message, with `name` naming the clock method a reading comes from (`Display` uses
    /// [`Reading::source_method`]; the binding, a JS clock's method names).
    pub fn message_naming(&self, name: fn(Reading) -> &'static str) -> Message<'_> {
        Message { error: self, name }
    }
}

/// An error's message with the clock's methods named by `name` (see [`Error::message_naming`]).
pub struct Message<'a> {
    error: &'a Error,
    name: fn(Reading) -> &'static str,
}

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error {
            Error::ClockReading { reading, problem } => {
                let method = (self.name)(*reading);
                match problem {
                    ReadingProblem::NotFinite { received } => write!(
                        f,
                        "clock.{method} must return a finite number of milliseconds; received {received}"
                    ),
                    ReadingProblem::Failed { why } => write!(f, "clock.{method} failed: {why}"),
                    ReadingProblem::OutsideCalendar { wall_ms } => write!(
                        f,
                        "clock.{method} read {} ms, outside the calendar's range (±8.64e+15 ms, the range of a JS Date); the calendar quota cannot place it, so nothing was consumed",
                        js_number(*wall_ms)
                    ),
                }
            }
            error => error.fmt_without_readings(f),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message_naming(Reading::source_method).fmt(f)
    }
}

impl Error {
    /// The message of every error but a clock reading's.
    fn fmt_without_readings(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::MonotonicRegression { previous_ms, now_ms, latched: false } => write!(
                f,
                "the monotonic clock went backwards by {} ms (from {} to {}); a monotonic source must never regress, so this limiter refuses every further call",
                ms(previous_ms - now_ms), ms(*previous_ms), ms(*now_ms)
            ),
            Error::MonotonicRegression { previous_ms, now_ms, latched: true } => write!(
                f,
                "this limiter saw its monotonic clock go backwards (from {} to {}) and refuses every further call; create a new limiter on a sound clock",
                ms(*previous_ms), ms(*now_ms)
            ),
            Error::AmbiguousWallJump { monotonic_delta_ms, wall_delta_ms } => write!(
                f,
                "the wall clock advanced {} ms while the monotonic clock advanced {} ms and no elapsed-realtime reader can tell a suspend from a clock step; suspendPolicy 'refuse' credited the monotonic {} ms and refuses this call (the next call proceeds)",
                ms(*wall_delta_ms), ms(*monotonic_delta_ms), ms(*monotonic_delta_ms)
            ),
            Error::ImplausibleWallClock { wall_ms, earliest_ms } => write!(
                f,
                "the wall clock reads {} ms ({}), before earliestPlausibleWallMs {} ({}); the calendar quota cannot trust it (set earliestPlausibleWallMs to null to turn this check off)",
                ms(*wall_ms), iso(*wall_ms), ms(*earliest_ms), iso(*earliest_ms)
            ),
            Error::Invalid { message, .. } => f.write_str(message),
            Error::ClockReading { .. } => {
                fmt::Display::fmt(&self.message_naming(Reading::source_method), f)
            }
            Error::KeyLimit { max_keys } => write!(
                f,
                "cannot hold a new key: all {max_keys} keys (maxKeys) have quota use in their open period, and quota use is never dropped to make room; raise maxKeys, or delete keys you no longer need"
            ),
        }
    }
}

impl std::error::Error for Error {}

fn iso(wall_ms: f64) -> String {
    chrono::DateTime::from_timestamp_millis(wall_ms as i64).map_or_else(
        || "out of range".to_owned(),
        |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `"ERR_…"` string written in the crate's sources names a variant of the one enum
    /// (a code added as a bare string fails here). `lib/` and `bin/` are checked against the same
    /// list by `__test__/native-contract.test.js`.
    #[test]
    fn every_error_code_written_in_the_sources_is_an_error_code() {
        fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    rust_files(&path, out);
                } else if path.extension().is_some_and(|ext| ext == "rs") {
                    out.push(path);
                }
            }
        }
        let known: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
        let mut files = Vec::new();
        rust_files(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut unknown = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (at, _) in text.match_indices("\"ERR_") {
                let name: String = text[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                // (`"ERR_` alone is this test's own pattern.)
                if name != "ERR_" && !known.contains(&name.as_str()) {
                    unknown.push(format!("{} {name}", file.display()));
                }
            }
        }
        assert!(files.len() > 20, "read the sources");
        assert_eq!(unknown, Vec::<String>::new());
    }

    #[test]
    fn each_error_has_its_code_class_and_message() {
        let cases = [
            (
                Error::MonotonicRegression {
                    previous_ms: 10.0,
                    now_ms: 4.0,
                    latched: false,
                },
                "ERR_MONOTONIC_REGRESSION",
                "went backwards by 6 ms",
            ),
            (
                Error::AmbiguousWallJump {
                    monotonic_delta_ms: 1.0,
                    wall_delta_ms: 5000.0,
                },
                "ERR_AMBIGUOUS_WALL_JUMP",
                "advanced 5000 ms",
            ),
            (
                Error::clock_failed(Reading::ElapsedRealtime, "it threw"),
                "ERR_CLOCK_READING",
                "clock.elapsed_realtime_ms() failed: it threw",
            ),
            (
                Error::KeyLimit { max_keys: 3 },
                "ERR_KEY_LIMIT",
                "all 3 keys",
            ),
            (
                Error::invalid_option("unit must be 'day'".to_owned()),
                "ERR_INVALID_OPTION",
                "unit must be 'day'",
            ),
        ];
        for (error, code, text) in cases {
            assert_eq!(error.code().as_str(), code);
            assert!(error.to_string().contains(text), "{error}");
        }
    }

    #[test]
    fn a_clock_error_names_the_reading_as_it_is_asked() {
        let error = Error::clock_not_finite(Reading::Monotonic, "NaN");
        assert_eq!(
            error.to_string(),
            "clock.monotonic_ms() must return a finite number of milliseconds; received NaN"
        );
        let js = |reading| match reading {
            Reading::Monotonic => "monotonicMs()",
            _ => "other()",
        };
        assert_eq!(
            error.message_naming(js).to_string(),
            "clock.monotonicMs() must return a finite number of milliseconds; received NaN"
        );
        assert!(Error::clock_outside_calendar(9e15)
            .message_naming(js)
            .to_string()
            .starts_with("clock.other() read 9000000000000000 ms, outside the calendar's range"));
        // The others are named the same either way.
        let limit = Error::KeyLimit { max_keys: 2 };
        assert_eq!(limit.message_naming(js).to_string(), limit.to_string());
    }

    #[test]
    fn every_code_is_listed_once_and_spelled_err() {
        let names: std::collections::HashSet<_> =
            ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert!(code.as_str().starts_with("ERR_"), "{code}");
            assert_eq!(code.to_string(), code.as_str());
        }
    }
}
