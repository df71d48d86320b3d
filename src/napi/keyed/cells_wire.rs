//! The shapes a cell book call passes to and from the JS face (`share.bucket`): what an acquire
//! sends, the store's answers to an acquire and a renewal, a renewal's key entry; and the checks
//! of the numbers those answers carry.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::keyed::CellsRenewal;
use crate::napi::errors::{coded, CodedResult};
use crate::text::js_number;

/// What an acquire of a key's cells sends (the store's `cellsAcquire`, less the name, key,
/// instance and leaseMs).
#[napi(object)]
pub struct CellsRequestOutput {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial: f64,
    pub held: f64,
    pub record_id: f64,
    /// The timeline as the call is sent: pass it back to `keyedCellsCredit`.
    pub sent_ms: f64,
}

/// The store's answer to an acquire.
#[napi(object, object_to_js = false)]
pub struct CellsAnswerInput {
    pub granted: f64,
    pub tokens: f64,
    pub held: f64,
    pub fair: f64,
    /// Whether others wait: 0 or 1 as the store answers (a boolean is taken too).
    pub waiting: Either<bool, f64>,
    pub record_id: f64,
    pub store_now_ms: f64,
}

/// The store's answer to a renewal, for one key.
#[napi(object, object_to_js = false)]
pub struct RenewAnswerInput {
    pub held: f64,
    /// Whether others wait: 0 or 1 as the store answers (a boolean is taken too).
    pub waiting: Either<bool, f64>,
    pub fair: f64,
}

/// One key of a renewal (`cellsRenew`'s key entry): `key` as UTF-16 code units.
#[napi(object)]
pub struct CellsRenewalOutput {
    pub key: Uint16Array,
    pub held: f64,
    pub tokens: f64,
    pub record_id: f64,
    /// Pass it back to `keyedCellsRenewed`.
    pub sent_ms: f64,
}

pub(super) fn renewal_outputs(renewals: Vec<CellsRenewal>) -> Vec<CellsRenewalOutput> {
    renewals
        .into_iter()
        .map(|renewal| CellsRenewalOutput {
            key: Uint16Array::new(renewal.key.key().to_utf16()),
            held: renewal.held as f64,
            tokens: renewal.tokens,
            record_id: renewal.record_id as f64,
            sent_ms: renewal.sent_ms,
        })
        .collect()
}

/// A finite number ≥ 0 (tokens, store time, a time this book gave).
pub(super) fn amount(value: f64, what: &str) -> CodedResult<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(coded(
            "ERR_INVALID_ARG",
            format!(
                "{what} must be a finite number no less than 0; received {}",
                js_number(value)
            ),
        ))
    }
}

/// `waiting` as the store answers it: 0 or 1 (or a boolean).
pub(super) fn waiting(value: Either<bool, f64>) -> CodedResult<bool> {
    match value {
        Either::A(waiting) => Ok(waiting),
        Either::B(number) if number == 0.0 || number == 1.0 => Ok(number == 1.0),
        Either::B(number) => Err(coded(
            "ERR_INVALID_ARG",
            format!("waiting must be 0 or 1; received {}", js_number(number)),
        )),
    }
}

/// A time this book gave (`sentMs`): a finite number.
pub(super) fn time(value: f64, what: &str) -> CodedResult<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(coded(
            "ERR_INVALID_ARG",
            format!(
                "{what} must be a finite number; received {}",
                js_number(value)
            ),
        ))
    }
}
