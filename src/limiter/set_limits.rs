//! `setLimits`: new limits for the one key, now, with what it used carried over.

use super::{Limiter, LimiterPolicy, Status};
use crate::anomaly::Anomaly;
use crate::bucket::BucketLimits;
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{KeyUse, LimitsShape};
use crate::limits::Limits;
use crate::quota::OpenPeriod;

impl Limiter {
    /// Reads and reconciles like [`Limiter::status`], bringing the key to this reading under its
    /// old limits, then puts `limits` in force with the carry-over rule
    /// ([`KeyUse::carry_over`]) and answers the status under them. A new period spec opens at
    /// this reading (when it is plausible); the use carries into it whole.
    pub fn set_limits<C: ClockSource + ?Sized>(
        &mut self,
        limits: Limits,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Status, Error> {
        self.status(clock, anomalies)?;
        let from = LimitsShape {
            capacity: self.policy.bucket.capacity,
            quota: self.policy.quota.is_some(),
        };
        let to = LimitsShape {
            capacity: limits.capacity,
            quota: limits.quota.is_some(),
        };
        let same_spec = match (&self.policy.quota, &limits.quota) {
            (Some(old), Some(new)) => old.spec.identity() == new.spec.identity(),
            _ => false,
        };
        if !same_spec {
            self.quota.period = OpenPeriod::default();
            let wall_ms = self.reconciler.last_wall_ms;
            if let Some(quota) = limits.quota.as_ref() {
                if self.reconciler.is_plausible(wall_ms) {
                    let period = quota.spec.period_for(wall_ms);
                    self.quota.period.enter(period, self.quota.credited_ms);
                }
            }
        }
        let mut state = KeyUse {
            tokens: self.tokens,
            credited_at_ms: 0.0,
            quota_used: self.quota.used,
            period_slot: (),
        };
        state.carry_over(from, to, ());
        self.tokens = state.tokens;
        self.quota.used = state.quota_used;
        self.policy = LimiterPolicy {
            bucket: BucketLimits {
                capacity: limits.capacity,
                refill_per_second: limits.refill_per_second,
            },
            quota: limits.quota,
        };
        Ok(self.current_status())
    }
}
