//! A key's policy as the JS face normalized it, validated here.

use napi_derive::napi;

use crate::keyed::KeyPolicy;
use crate::napi::calendar::PeriodSpecInput;
use crate::napi::errors::CodedResult;
use crate::napi::options::limits_input;

/// A key's limits as the JS face normalized them (defaults filled in, types checked).
#[napi(object)]
pub struct PolicyInput {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    /// `false`: no bucket (a quota alone).
    pub bucket: Option<bool>,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
    /// How messages name it, e.g. `policy("tenant-1")`.
    pub path: String,
}

/// Validates a normalized policy's values (the JS face checked types and merged the defaults).
pub(super) fn key_policy(input: &PolicyInput) -> CodedResult<KeyPolicy> {
    let limits = limits_input(
        input.bucket,
        input.capacity,
        input.refill_per_second,
        input.initial_tokens,
        input.quota_limit,
        input.quota_period.as_ref(),
    );
    Ok(KeyPolicy::checked(&format!("{}.", input.path), limits)?)
}

/// How a key's `n` check names the capacity it is held to.
pub(super) const KEY_CAPACITY: &str = "the key's capacity";
