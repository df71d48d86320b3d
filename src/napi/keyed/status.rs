//! `status(key)`.

use super::KeyedState;
use crate::keyed::{Key, KeyStatus, Target};
use crate::napi::buffer::Step;
use crate::napi::calendar::PeriodOutput;
use crate::napi::clock::BoundClock;
use crate::napi::errors::CodedResult;
use crate::napi::object::objects;
use crate::napi::registry::notify_listener;

objects! {
    KeyStatusOutput from KeyStatus as status {
        tokens: f64 = status.tokens,
        quota_used: Option<f64> = status.quota_used.map(|used| used as f64),
        quota_remaining: Option<f64> = status.quota_remaining.map(|left| left as f64),
        period: Option<PeriodOutput> = status.period.zip(status.time_zone).map(PeriodOutput::from),
        capacity: f64 = status.capacity,
        refill_per_second: f64 = status.refill_per_second,
        quota_limit: Option<f64> = status.quota_limit.map(|limit| limit as f64),
        #[doc = "A shared bucket's key (`share.bucket`): the store's tokens as last heard of,"]
        #[doc = "refilled since."]
        fleet_tokens: Option<f64> = status.fleet_tokens,
    }
}

impl KeyedState {
    /// The key's status on the limiter's clock (`holding`: the key, held from now on if it is not) (with the readings in the result buffer, when
    /// `supplied`), or what the call needs from the JS face first.
    pub(super) fn status_of(
        &mut self,
        target: Target,
        supplied: bool,
        holding: Option<Key<'_>>,
    ) -> CodedResult<Step<KeyStatusOutput>> {
        let mut clock = match BoundClock::for_call(&self.clock, &self.result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return Ok(Err(needs)),
        };
        let mut anomalies = Vec::new();
        let status = match holding {
            Some(key) => self
                .limiter
                .status_holding(key, target, &mut clock, &mut anomalies),
            None => self.limiter.status(target, &mut clock, &mut anomalies),
        };
        let status = clock.outcome(status)?;
        if status.is_ok() {
            notify_listener(self.registry_id, self.anomaly_listener, &anomalies);
        }
        Ok(status.map(KeyStatusOutput::from))
    }
}
