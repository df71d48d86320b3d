//! `QuotaClock`'s one key as a kernel [`Storage`]: its state is the limiter's own fields.

use super::Limiter;
use crate::anomaly::Anomaly;
use crate::calendar::PeriodSlot;
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{BucketOf, CallReading, Decision, KeyUse, Op, Storage};

/// One call on the limiter, with the clock it reads.
pub(super) struct OneKey<'a, C: ?Sized> {
    pub(super) limiter: &'a mut Limiter,
    pub(super) clock: &'a mut C,
}

impl<C: ClockSource + ?Sized> Storage for OneKey<'_, C> {
    type Key = ();
    type Held = ();
    type Slot = Option<PeriodSlot>;
    type Decided = Decision;

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
    fn move_period(
        &mut self,
        _: (),
        reading: &CallReading,
        anomalies: &mut Vec<Anomaly>,
    ) -> Option<PeriodSlot> {
        let limiter = &mut *self.limiter;
        if let Some(quota) = limiter.policy.quota.as_ref() {
            limiter
                .quota
                .observe(quota, reading.wall_ms, reading.deltas, anomalies);
        }
        limiter.period_slot()
    }

    /// The key as of the start of this call's credit (`credited_at_ms` 0 on the call's own
    /// timeline), its use already in the open period (the period rule zeroes it on a move).
    #[inline(always)]
    fn load(
        &mut self,
        _: (),
        _: Op,
        _: &CallReading,
        open_slot: Option<PeriodSlot>,
    ) -> ((), KeyUse<Option<PeriodSlot>>, BucketOf) {
        let limiter = &*self.limiter;
        let state = KeyUse {
            tokens: limiter.tokens,
            credited_at_ms: 0.0,
            quota_used: limiter.quota.used,
            period_slot: open_slot,
        };
        let bucket = BucketOf {
            capacity: limiter.policy.bucket.capacity,
            refill_per_second: limiter.policy.bucket.refill_per_second,
        };
        ((), state, bucket)
    }

    #[inline(always)]
    fn decide(
        &mut self,
        _: (),
        state: &mut KeyUse<Option<PeriodSlot>>,
        n: u64,
        reading: &CallReading,
    ) -> Decision {
        self.save((), state, Op::Status, reading);
        let decision = self.limiter.decide(n, reading.wall_ms);
        state.tokens = self.limiter.tokens;
        state.quota_used = self.limiter.quota.used;
        decision
    }

    #[inline(always)]
    fn save(&mut self, _: (), state: &KeyUse<Option<PeriodSlot>>, _: Op, _: &CallReading) {
        self.limiter.tokens = state.tokens;
        self.limiter.quota.used = state.quota_used;
    }
}
