//! `QuotaClock`'s one key as a kernel [`Storage`]: its state is the limiter's own fields.

use super::Limiter;
use crate::anomaly::{Anomaly, CallDeltas};
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{
    BucketOf, CallReading, Decision, KeyUse, Op, Parts, PeriodQuota, Refill, Storage,
};
use crate::quota::OpenPeriod;
use crate::stats::Counters;
use std::convert::Infallible;

/// One call on the limiter, with the clock it reads.
pub(super) struct OneKey<'a, C: ?Sized> {
    pub(super) limiter: &'a mut Limiter,
    pub(super) clock: &'a mut C,
}

/// The one key's use is always of its open period: the period rule zeroes it on a move
/// ([`QuotaState::observe`](crate::quota::QuotaState::observe)), so its slot is `()`.
impl<C: ClockSource + ?Sized> Storage for OneKey<'_, C> {
    type Key = ();
    type Held = ();
    type Slot = ();
    type Pending = Infallible;
    type Decided = Decision;
    type Bucket<'a>
        = Refill<'a>
    where
        Self: 'a;
    type Quota<'a>
        = PeriodQuota<'a, &'a OpenPeriod>
    where
        Self: 'a;
    type Tally<'a>
        = &'a mut Counters
    where
        Self: 'a;

    #[inline(always)]
    fn reconcile(&mut self, _: (), anomalies: &mut Vec<Anomaly>) -> Result<CallReading, Error> {
        let limiter = &mut *self.limiter;
        let has_quota = limiter.policy.quota.is_some();
        let reconciled = limiter.reconciler.read(self.clock, has_quota, anomalies)?;
        let credited_ms = reconciled.deltas.credited_ms;
        if has_quota {
            limiter.quota.credited_ms += credited_ms;
        }
        if let Err(refused) = limiter.reconciler.commit(&reconciled) {
            // A refused call still credits the time it saw, as the keyed table's timeline does.
            limiter.tokens = limiter.policy.bucket.credit(limiter.tokens, credited_ms);
            return Err(refused);
        }
        // The one key is credited call by call: its timeline starts at each call.
        Ok(reconciled.reading(credited_ms))
    }

    #[inline(always)]
    fn move_period(&mut self, _: (), reading: &CallReading, anomalies: &mut Vec<Anomaly>) {
        let limiter = &mut *self.limiter;
        if let Some(quota) = limiter.policy.quota.as_ref() {
            limiter
                .quota
                .observe(quota, reading.wall_ms, reading.deltas, anomalies);
        }
    }

    #[inline(always)]
    fn quiet(&mut self, _: (), monotonic_ms: f64, wall_ms: f64) -> Option<(CallReading, ())> {
        let limiter = &mut *self.limiter;
        let reconciler = &mut limiter.reconciler;
        let dm = reconciler.quiet_delta(monotonic_ms, wall_ms)?;
        if limiter.policy.quota.is_some() {
            if !(reconciler.is_plausible(wall_ms) && limiter.quota.period.hold_if_inside(wall_ms)) {
                return None;
            }
            limiter.quota.credited_ms += dm;
        }
        let deltas = CallDeltas {
            monotonic_delta_ms: dm,
            wall_delta_ms: wall_ms - reconciler.last_wall_ms,
            credited_ms: dm,
        };
        reconciler.anchor(monotonic_ms, wall_ms);
        let reading = CallReading {
            monotonic_ms,
            wall_ms,
            timeline_ms: dm,
            deltas,
        };
        Some((reading, ()))
    }

    /// The key as of the start of this call's credit (`credited_at_ms` 0 on the call's own
    /// timeline).
    #[inline(always)]
    fn load(&mut self, _: (), _: Op, _: &CallReading, _: ()) -> ((), KeyUse<()>, BucketOf) {
        let limiter = &*self.limiter;
        let state = KeyUse {
            tokens: limiter.tokens,
            credited_at_ms: 0.0,
            quota_used: limiter.quota.used,
            period_slot: (),
        };
        let bucket = BucketOf {
            capacity: limiter.policy.bucket.capacity,
            refill_per_second: limiter.policy.bucket.refill_per_second,
        };
        ((), state, bucket)
    }

    /// The decision works on the limiter's own fields, the refreshed state written there first
    /// (so `save` has nothing left to write after a consume).
    #[inline(always)]
    fn parts<'a>(
        &'a mut self,
        _: (),
        state: &'a mut KeyUse<()>,
        _: u64,
        reading: &CallReading,
    ) -> Parts<Refill<'a>, PeriodQuota<'a, &'a OpenPeriod>, &'a mut Counters> {
        let limiter = &mut *self.limiter;
        limiter.tokens = state.tokens;
        limiter.quota.used = state.quota_used;
        let period = &limiter.quota.period;
        Parts {
            bucket: Refill::new(&mut limiter.tokens, limiter.policy.bucket.refill_per_second),
            quota: limiter.policy.quota.as_ref().map(|quota| {
                PeriodQuota::new(
                    &mut limiter.quota.used,
                    quota.limit,
                    period,
                    reading.wall_ms,
                )
            }),
            tally: &mut limiter.counters,
        }
    }

    #[inline(always)]
    fn answer(&mut self, _: (), _: u64, outcome: Result<Decision, Infallible>) -> Decision {
        let Ok(decision) = outcome;
        decision
    }

    #[inline(always)]
    fn save(&mut self, _: (), state: &KeyUse<()>, op: Op, _: &CallReading) {
        if let Op::Consume(_) = op {
            return;
        }
        self.limiter.tokens = state.tokens;
        self.limiter.quota.used = state.quota_used;
    }
}
