//! `status(key)`.

use napi_derive::napi;

use super::KeyedState;
use crate::keyed::{KeyStatus, Target};
use crate::napi::buffer::Step;
use crate::napi::calendar::{period_output, PeriodOutput};
use crate::napi::clock::BoundClock;
use crate::napi::errors::CodedResult;
use crate::napi::registry::notify_listener;

#[napi(object)]
pub struct KeyStatusOutput {
    pub tokens: f64,
    pub quota_used: Option<f64>,
    pub quota_remaining: Option<f64>,
    pub period: Option<PeriodOutput>,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub quota_limit: Option<f64>,
    /// A shared bucket's key (`share.bucket`): the store's tokens as last heard of, refilled since.
    pub fleet_tokens: Option<f64>,
}

impl From<KeyStatus> for KeyStatusOutput {
    fn from(status: KeyStatus) -> KeyStatusOutput {
        KeyStatusOutput {
            tokens: status.tokens,
            quota_used: status.quota_used.map(|used| used as f64),
            quota_remaining: status.quota_remaining.map(|remaining| remaining as f64),
            period: status
                .period
                .zip(status.time_zone)
                .map(|(period, time_zone)| period_output(&period, time_zone)),
            capacity: status.capacity,
            refill_per_second: status.refill_per_second,
            quota_limit: status.quota_limit.map(|limit| limit as f64),
            fleet_tokens: status.fleet_tokens,
        }
    }
}

impl KeyedState {
    /// The key's status on the limiter's clock (with the readings in the result buffer, when
    /// `supplied`), or what the call needs from the JS face first.
    pub(super) fn status_of(
        &mut self,
        target: Target,
        supplied: bool,
    ) -> CodedResult<Step<KeyStatusOutput>> {
        let mut clock = match BoundClock::for_call(&self.clock, &self.result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return Ok(Err(needs)),
        };
        let mut anomalies = Vec::new();
        let status = self.limiter.status(target, &mut clock, &mut anomalies);
        let status = clock.outcome(status)?;
        if status.is_ok() {
            notify_listener(self.registry_id, self.anomaly_listener, &anomalies);
        }
        Ok(status.map(KeyStatusOutput::from))
    }
}
