//! `QuotaClock`'s core: a token bucket on real elapsed time plus an optional calendar quota,
//! reconciled from fresh clock readings on every call.

use crate::anomaly::{Anomaly, CallDeltas};
use crate::bucket::BucketLimits;
use crate::calendar::{Period, PeriodSlot};
use crate::clock::{ClockSource, SuspendPolicy, Unread};
use crate::error::Error;
use crate::kernel::{self, Answer, KeyUse, Op};
pub use crate::kernel::{Decision, RetryBasis};
use crate::limits::{checked_earliest_plausible, checked_suspend_policy, Limits, LimitsInput};
use crate::quota::{QuotaPolicy, QuotaState};
use crate::reconciler::Reconciler;
use crate::stats::Counters;
use storage::OneKey;

mod storage;

/// A limiter's options, checked: made by [`LimiterConfig::checked`] (tests build them directly).
#[derive(Clone, Debug)]
pub struct LimiterConfig {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub suspend_policy: SuspendPolicy,
    pub quota: Option<QuotaPolicy>,
    /// `None` turns the plausibility check off.
    pub earliest_plausible_wall_ms: Option<f64>,
}

impl LimiterConfig {
    /// The limits alone: a keyed limiter's policy for a key without its own.
    pub fn limits(&self) -> Limits {
        Limits {
            capacity: self.capacity,
            refill_per_second: self.refill_per_second,
            initial_tokens: self.initial_tokens,
            quota: self.quota.clone(),
        }
    }

    /// The options' limits, suspend policy and plausibility floor, checked in that order
    /// ([`crate::limits`]), with the contract's messages.
    pub fn checked(
        limits: LimitsInput<'_>,
        suspend_policy: &str,
        earliest_plausible_wall_ms: Option<f64>,
    ) -> Result<LimiterConfig, Error> {
        let Limits {
            capacity,
            refill_per_second,
            initial_tokens,
            quota,
        } = Limits::checked("", limits)?;
        Ok(LimiterConfig {
            capacity,
            refill_per_second,
            initial_tokens,
            suspend_policy: checked_suspend_policy(suspend_policy)?,
            quota,
            earliest_plausible_wall_ms: checked_earliest_plausible(earliest_plausible_wall_ms)?,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub tokens: f64,
    pub quota_used: Option<u64>,
    pub quota_remaining: Option<u64>,
    pub period: Option<Period>,
}

/// A limiter's settings, apart from its state. Held inline (one allocation more per limiter
/// measurably grew an idle limiter and slowed the hot path); the period spec inside is shared
/// behind `Arc`.
#[derive(Clone, Debug)]
pub struct LimiterPolicy {
    pub bucket: BucketLimits,
    pub quota: Option<QuotaPolicy>,
}

/// `QuotaClock`'s core: its settings ([`LimiterPolicy`]) and its state: the tokens, the quota's
/// use in its open period, and the clocks' bookkeeping.
// `repr(C)`: what every call reads (the tokens, the settings, the clocks' bookkeeping) comes
// first, at small fixed offsets, and the quota's state, read only with a quota, last (measured
// faster than the compiler's own order; see the benchmark log).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Limiter {
    /// Tokens held now; fractional between refills.
    tokens: f64,
    policy: LimiterPolicy,
    reconciler: Reconciler,
    /// Unused without a quota.
    quota: QuotaState,
    /// What it has done since construction (`stats()`); last, off the hot fields' lines.
    counters: Counters,
}

impl Limiter {
    /// Takes the starting readings, and the reader's baseline when there is a reader.
    pub fn new(config: LimiterConfig, clock: &mut dyn ClockSource) -> Result<Limiter, Error> {
        let (reconciler, wall_ms) = Reconciler::new(
            config.suspend_policy,
            config.earliest_plausible_wall_ms,
            clock,
        )?;
        let policy = LimiterPolicy {
            bucket: BucketLimits {
                capacity: config.capacity,
                refill_per_second: config.refill_per_second,
            },
            quota: config.quota,
        };
        let mut limiter = Limiter {
            policy,
            tokens: config.initial_tokens,
            quota: QuotaState::default(),
            reconciler,
            counters: Counters::default(),
        };
        if limiter.reconciler.is_plausible(wall_ms) {
            let deltas = CallDeltas {
                monotonic_delta_ms: 0.0,
                wall_delta_ms: 0.0,
                credited_ms: 0.0,
            };
            if let Some(quota) = limiter.policy.quota.as_ref() {
                limiter
                    .quota
                    .observe(quota, wall_ms, deltas, &mut Vec::new());
            }
        }
        Ok(limiter)
    }

    pub fn capacity(&self) -> f64 {
        self.policy.bucket.capacity
    }

    /// Decisions and anomalies since construction; reads no clock.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The same limiter with other counters (tests compare states apart from what was counted).
    #[cfg(test)]
    pub(crate) fn with_counters(self, counters: Counters) -> Limiter {
        Limiter { counters, ..self }
    }

    pub fn has_quota(&self) -> bool {
        self.policy.quota.is_some()
    }

    /// The quota's settings and state, with a quota.
    pub fn quota(&self) -> Option<(&QuotaPolicy, &QuotaState)> {
        self.policy
            .quota
            .as_ref()
            .map(|policy| (policy, &self.quota))
    }

    /// One call through the kernel ([`kernel::call`]), its anomalies counted.
    #[inline(always)]
    fn call<C: ClockSource + ?Sized>(
        &mut self,
        op: Op,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Answer<Decision, ()>, Error> {
        let first_anomaly = anomalies.len();
        let answer = kernel::call(
            &mut OneKey {
                limiter: self,
                clock,
            },
            (),
            op,
            anomalies,
        )?;
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        Ok(answer)
    }

    /// `n` is a positive integer no larger than capacity (checked by the caller).
    #[inline(always)]
    pub fn try_consume<C: ClockSource + ?Sized>(
        &mut self,
        n: u64,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Decision, Error> {
        match self.call(Op::Consume(n), clock, anomalies)? {
            Answer::Decided(decision) => Ok(decision),
            _ => unreachable!("a consume is decided"),
        }
    }

    /// The usual call, on readings already taken: both clocks moved forward together (the
    /// reconcile table's first row), nothing is latched, and the wall reading is inside the open
    /// quota period. Then it decides exactly as [`Limiter::try_consume`] would, through the
    /// kernel's fast arm ([`kernel::call_quiet`]). Any other reading returns `None` and changes
    /// nothing: the caller then takes the general path, [`Limiter::try_consume`].
    #[inline(always)]
    pub fn try_consume_quiet(
        &mut self,
        n: u64,
        monotonic_ms: f64,
        wall_ms: f64,
    ) -> Option<Decision> {
        let mut storage = OneKey {
            limiter: self,
            clock: &mut Unread,
        };
        kernel::call_quiet(&mut storage, (), n, monotonic_ms, wall_ms)
    }

    /// `refund(n)`: reads and reconciles like `try_consume`, then gives back `n` tokens
    /// (capped at capacity) and `n` quota units of the open period (never below zero). `n` is a
    /// positive integer (checked by the caller); it may exceed capacity.
    pub fn refund<C: ClockSource + ?Sized>(
        &mut self,
        n: u64,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<(), Error> {
        self.call(Op::Refund(n), clock, anomalies)?;
        Ok(())
    }

    /// The slot of the open quota period (`None` without a quota or before the first plausible
    /// reading): what a decision's quota units count in.
    #[inline(always)]
    pub fn period_slot(&self) -> Option<PeriodSlot> {
        self.policy.quota.as_ref().and(self.quota.period.slot())
    }

    /// Gives back what a decision took, reading no clock: `n` tokens (capped at capacity) and,
    /// when the period they were taken in (`slot`, [`Limiter::period_slot`] after the decision)
    /// is still open, `n` quota units (never below zero). For an all-or-nothing rollback, which
    /// must not fail on a clock that cannot be read or would be refused.
    pub fn give_back(&mut self, n: u64, slot: Option<PeriodSlot>) {
        kernel::give_back_unread(self, n, slot.map(Some));
    }

    /// `status()`: reads and reconciles like `try_consume`, consumes nothing.
    pub fn status<C: ClockSource + ?Sized>(
        &mut self,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Status, Error> {
        self.call(Op::Status, clock, anomalies)?;
        let quota = self.quota();
        Ok(Status {
            tokens: self.tokens,
            quota_used: quota.map(|(_, state)| state.used),
            quota_remaining: quota.map(|(policy, state)| state.remaining(policy)),
            period: quota.and_then(|(_, state)| state.period.open.clone()),
        })
    }
}

/// The one key as a give-back that reads no clock sees it: its use is always of the open period.
impl kernel::HeldUse for Limiter {
    type Period = Option<PeriodSlot>;
    fn stored(&self) -> (KeyUse<Option<PeriodSlot>>, f64, Option<Option<PeriodSlot>>) {
        let open = self.period_slot();
        let state = KeyUse {
            tokens: self.tokens,
            credited_at_ms: 0.0,
            quota_used: self.quota.used,
            period_slot: open,
        };
        (state, self.policy.bucket.capacity, Some(open))
    }
    fn store(&mut self, state: &KeyUse<Option<PeriodSlot>>) {
        self.tokens = state.tokens;
        self.quota.used = state.quota_used;
    }
}

#[cfg(test)]
mod tests;
