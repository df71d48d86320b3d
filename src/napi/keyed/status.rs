//! `status(key)`.

use napi_derive::napi;

use super::KeyedState;
use crate::keyed::{KeyStatus, Target};
use crate::napi::calendar::PeriodOutput;
use crate::napi::clock::{BoundClock, ClockHandle, Supplied};
use crate::napi::errors::{from_core, CodedResult};
use crate::napi::registry::notify_listener;

#[napi(object)]
pub struct KeyStatusOutput {
    /// Set when the JS face must bring something first (nothing was read or changed): 'policy'
    /// (call `policy(key)`), 'readings' (read the JS clock), 'reader' (read the JS elapsed-realtime
    /// reader; the call's readings are in `taken_*`).
    pub needs: Option<String>,
    pub taken_monotonic_ms: f64,
    pub taken_wall_ms: f64,
    pub tokens: f64,
    pub quota_used: Option<f64>,
    pub quota_remaining: Option<f64>,
    pub period: Option<PeriodOutput>,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub quota_limit: Option<f64>,
}

impl KeyedState {
    pub(super) fn status_output(status: KeyStatus) -> KeyStatusOutput {
        KeyStatusOutput {
            needs: None,
            taken_monotonic_ms: f64::NAN,
            taken_wall_ms: f64::NAN,
            tokens: status.tokens,
            quota_used: status.quota_used.map(|used| used as f64),
            quota_remaining: status.quota_remaining.map(|remaining| remaining as f64),
            period: match (&status.period, status.time_zone) {
                (Some(period), Some(time_zone)) => Some(PeriodOutput {
                    time_zone: time_zone.to_owned(),
                    ..period_output_without_zone(period)
                }),
                _ => None,
            },
            capacity: status.capacity,
            refill_per_second: status.refill_per_second,
            quota_limit: status.quota_limit.map(|limit| limit as f64),
        }
    }

    /// A status that says what the JS face must bring first (nothing was read or changed).
    pub(super) fn status_needs(needs: &str, taken: (f64, f64)) -> KeyStatusOutput {
        KeyStatusOutput {
            needs: Some(needs.to_owned()),
            taken_monotonic_ms: taken.0,
            taken_wall_ms: taken.1,
            tokens: f64::NAN,
            quota_used: None,
            quota_remaining: None,
            period: None,
            capacity: f64::NAN,
            refill_per_second: f64::NAN,
            quota_limit: None,
        }
    }
}

impl KeyedState {
    pub(super) fn status_of(
        &mut self,
        target: Target,
        supplied: Supplied,
    ) -> CodedResult<KeyStatusOutput> {
        if supplied.monotonic_ms.is_none() && matches!(self.clock, ClockHandle::Js { .. }) {
            return Ok(KeyedState::status_needs("readings", (f64::NAN, f64::NAN)));
        }
        let mut anomalies = Vec::new();
        let mut clock = BoundClock::new(&self.clock, supplied);
        let status = match self.limiter.status(target, &mut clock, &mut anomalies) {
            Ok(status) => status,
            Err(_) if clock.reader_wanted => {
                return Ok(KeyedState::status_needs("reader", clock.taken))
            }
            Err(error) => return Err(from_core(&error)),
        };
        notify_listener(self.registry_id, self.anomaly_listener, &anomalies);
        Ok(KeyedState::status_output(status))
    }
}

pub(super) fn period_output_without_zone(period: &crate::calendar::Period) -> PeriodOutput {
    PeriodOutput {
        id: period.id.clone(),
        start_ms: period.start_ms,
        end_ms: period.end_ms,
        start_kind: period.start_kind.as_str().to_owned(),
        time_zone: String::new(),
    }
}
