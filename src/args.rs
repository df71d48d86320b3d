//! A call's numbers checked once, here, with the contract's messages (`ERR_INVALID_ARG`): a
//! consume's or a refund's `n`, the units a store answered, milliseconds. The options' checks are
//! `limits`'s; the JS face checks only types, and the binding converts and calls.

use crate::calendar::MAX_WALL_MS;
use crate::error::{Error, ErrorCode};
use crate::limits::{is_integer_in, MAX_SAFE_INTEGER};
use crate::text::js_number;

/// "`name` must be `what`; received `value`" (the form of every argument's message).
pub fn invalid(name: &str, what: &str, value: f64) -> Error {
    Error::Invalid {
        code: ErrorCode::InvalidArg,
        message: format!("{name} must be {what}; received {}", js_number(value)),
    }
}

/// `value` when `ok`, else [`invalid`]; `what` is written only for the message.
fn checked(ok: bool, name: &str, what: impl FnOnce() -> String, value: f64) -> Result<f64, Error> {
    if ok {
        Ok(value)
    } else {
        Err(invalid(name, &what(), value))
    }
}

/// A consume's `n`: a positive safe integer no larger than `capacity` (`of`: how the message
/// names it, `capacity` or `the key's capacity`).
pub fn count(n: f64, capacity: f64, of: &str) -> Result<u64, Error> {
    let ok = n <= capacity && is_integer_in(n, 1.0..=MAX_SAFE_INTEGER);
    let what = || {
        let capacity = js_number(capacity);
        format!("a positive safe integer no larger than {of} ({capacity})")
    };
    checked(ok, "n", what, n).map(|n| n as u64)
}

/// A refund's or a give-back's `n`: a positive safe integer (the JS face checks it first).
pub fn positive_count(n: f64) -> Result<u64, Error> {
    let ok = is_integer_in(n, 1.0..=MAX_SAFE_INTEGER);
    checked(ok, "n", || "a positive safe integer".to_owned(), n).map(|n| n as u64)
}

/// A count passed back (units a store answered, a charge): a safe integer ≥ 0.
pub fn units(value: f64, name: &str) -> Result<u64, Error> {
    let ok = is_integer_in(value, 0.0..=MAX_SAFE_INTEGER);
    checked(ok, name, || "a non-negative safe integer".to_owned(), value).map(|v| v as u64)
}

/// A number (Infinity too) no less than 0.
pub fn not_negative(value: f64, name: &str) -> Result<f64, Error> {
    checked(
        value >= 0.0,
        name,
        || "a number no less than 0".to_owned(),
        value,
    )
}

/// A finite number no less than `min`.
pub fn finite_from(value: f64, min: f64, name: &str) -> Result<f64, Error> {
    let what = || format!("a finite number no less than {}", js_number(min));
    checked(value.is_finite() && value >= min, name, what, value)
}

/// A wall reading to place in the calendar: within the range of a JS `Date`.
pub fn wall_ms(wall_ms: f64) -> Result<f64, Error> {
    let what =
        || "a finite number of milliseconds within the range of a JS Date (±8.64e+15)".to_owned();
    checked(wall_ms.abs() <= MAX_WALL_MS, "wallMs", what, wall_ms)
}

/// Milliseconds to set a manual clock's component to, or to step its wall clock by.
pub fn finite_ms(value: f64, name: &str) -> Result<f64, Error> {
    let what = || "a finite number of milliseconds".to_owned();
    checked(value.is_finite(), name, what, value)
}

/// Milliseconds a manual clock moves forward by.
pub fn forward_ms(value: f64, name: &str) -> Result<f64, Error> {
    let what = || {
        "a finite, non-negative number of milliseconds (use set() to move a component backwards)"
            .to_owned()
    };
    checked(value.is_finite() && value >= 0.0, name, what, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<impl std::fmt::Debug, Error>) -> String {
        let error = result.unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArg);
        error.to_string()
    }

    #[test]
    fn each_argument_is_refused_with_the_value_it_received() {
        assert_eq!(count(3.0, 3.0, "capacity").unwrap(), 3);
        assert_eq!(
            message(count(4.0, 3.0, "the key's capacity")),
            "n must be a positive safe integer no larger than the key's capacity (3); received 4"
        );
        assert_eq!(
            message(count(1.5, f64::INFINITY, "capacity")),
            "n must be a positive safe integer no larger than capacity (Infinity); received 1.5"
        );
        assert_eq!(positive_count(2.0).unwrap(), 2);
        assert_eq!(
            message(positive_count(0.0)),
            "n must be a positive safe integer; received 0"
        );
        assert_eq!(
            not_negative(f64::INFINITY, "idleMs").unwrap(),
            f64::INFINITY
        );
        assert_eq!(
            message(not_negative(f64::NAN, "idleMs")),
            "idleMs must be a number no less than 0; received NaN"
        );
        assert_eq!(units(0.0, "held").unwrap(), 0);
        assert_eq!(
            message(units(-1.0, "granted")),
            "granted must be a non-negative safe integer; received -1"
        );
        assert_eq!(
            message(finite_from(f64::NAN, f64::MIN, "sentMs")),
            "sentMs must be a finite number no less than -1.7976931348623157e+308; received NaN"
        );
        assert_eq!(
            message(wall_ms(9e15)),
            "wallMs must be a finite number of milliseconds within the range of a JS Date (±8.64e+15); received 9000000000000000"
        );
        assert_eq!(wall_ms(-8.64e15).unwrap(), -8.64e15);
        assert_eq!(
            message(finite_ms(f64::INFINITY, "set({ wallMs })")),
            "set({ wallMs }) must be a finite number of milliseconds; received Infinity"
        );
        assert_eq!(
            message(forward_ms(-1.0, "advance(ms)")),
            "advance(ms) must be a finite, non-negative number of milliseconds (use set() to move a component backwards); received -1"
        );
    }
}
