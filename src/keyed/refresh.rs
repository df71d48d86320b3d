//! A held key's policy asked again: `refreshPolicy` marks keys, `policyTtlMs` makes a
//! key's policy due once that long has passed on the timeline since it was asked, and a due key's
//! next call puts the new policy in force with what the key used carried over
//! ([`KeyUse::carry_over`]).

use super::storage::{Named, Plain};
use super::table::{FLAG_PARKED, FLAG_POLICY_DUE};
use super::{slot_i32, Key, KeyPolicy, KeyedLimiter, NO_PERIOD};
use crate::anomaly::{Anomaly, CallDeltas};
use crate::clock::ClockSource;
use crate::error::Error;
use crate::kernel::{LimitsShape, Op};

/// When held keys' policies are asked again.
#[derive(Clone, Debug, Default)]
pub(super) struct Refresh {
    /// Some key may be due (one was marked, or `policyTtlMs` is set): unset, a held key's call
    /// looks no further.
    armed: bool,
    /// `policyTtlMs`, with the timeline (credited ms) at which each record's policy was last
    /// asked, in the records' order.
    ttl: Option<PolicyClock>,
}

#[derive(Clone, Debug)]
struct PolicyClock {
    ttl_ms: f64,
    asked_at_ms: Vec<f64>,
}

impl KeyedLimiter {
    /// `policyTtlMs`: every held key's policy counts as asked now.
    pub fn set_policy_ttl(&mut self, ttl_ms: u64) {
        self.refresh.armed = true;
        self.refresh.ttl = Some(PolicyClock {
            ttl_ms: ttl_ms as f64,
            asked_at_ms: vec![self.timeline_ms; self.table.len()],
        });
    }

    /// `refreshPolicy(key)`: marks a held key (a key not held: nothing); `None`, every key held.
    pub fn mark_policy_due(&mut self, key: Option<Key<'_>>) {
        match key {
            Some(key) => {
                if let Some(index) = self.find(key) {
                    self.table.records[index as usize].flags |= FLAG_POLICY_DUE;
                    self.refresh.armed = true;
                }
            }
            None => {
                for record in &mut self.table.records {
                    record.flags |= FLAG_POLICY_DUE;
                }
                self.refresh.armed = !self.table.records.is_empty() || self.refresh.ttl.is_some();
            }
        }
    }

    /// Whether the held key at `index` must ask its policy again before its call, the call's
    /// monotonic reading being `monotonic_ms` (NaN: not read yet; then only a mark makes it due).
    #[inline(always)]
    pub fn policy_due(&self, index: u32, monotonic_ms: f64) -> bool {
        self.refresh.armed && self.policy_due_armed(index, monotonic_ms)
    }

    #[cold]
    #[inline(never)]
    fn policy_due_armed(&self, index: u32, monotonic_ms: f64) -> bool {
        if self.table.records[index as usize].flags & FLAG_POLICY_DUE != 0 {
            return true;
        }
        let Some(clock) = &self.refresh.ttl else {
            return false;
        };
        // The timeline this call reaches when the clocks agree (a plain compare: NaN is never due).
        let elapsed_ms = (monotonic_ms - self.reconciler.last_monotonic_ms).max(0.0);
        let asked_at_ms = clock
            .asked_at_ms
            .get(index as usize)
            .copied()
            .unwrap_or(0.0);
        self.timeline_ms + elapsed_ms - asked_at_ms >= clock.ttl_ms
    }

    /// A record just held: its policy was asked now.
    pub(super) fn policy_asked_at_hold(&mut self, index: u32) {
        let now_ms = self.timeline_ms;
        if let Some(clock) = &mut self.refresh.ttl {
            debug_assert_eq!(clock.asked_at_ms.len(), index as usize);
            clock.asked_at_ms.push(now_ms);
        }
    }

    /// A record about to be removed (swapped with the last, as the table does).
    pub(super) fn policy_clock_dropped(&mut self, index: u32) {
        if let Some(clock) = &mut self.refresh.ttl {
            clock.asked_at_ms.swap_remove(index as usize);
        }
    }

    /// The held key at `index` under `policy`, now: the clocks read and reconciled and the key
    /// brought to this reading under its old limits (as a status), then the new limits put in
    /// force with the carry-over rule: the bucket keeps what it lacked, the quota's use carries
    /// whole into the new spec's open period, the new `initialTokens` is not applied. The mark
    /// is cleared only then: a call that fails before leaves the key as it was, still due.
    pub fn renew_policy<C: ClockSource + ?Sized>(
        &mut self,
        index: u32,
        policy: KeyPolicy,
        clock: &mut C,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<(), Error> {
        let first_anomaly = anomalies.len();
        self.call(Named::Held(index), Op::Status, clock, Plain, anomalies)?;
        let new_id = self.intern(policy);
        let old_id = self.table.records[index as usize].policy;
        let (old, new) = (
            self.policies[old_id as usize],
            self.policies[new_id as usize],
        );
        let open_slot = match new.quota {
            None => NO_PERIOD,
            Some(quota) => {
                let wall_ms = self.reconciler.last_wall_ms;
                let plausible = self.reconciler.is_plausible(wall_ms);
                let state = &mut self.specs[quota.spec as usize];
                if plausible {
                    // The new spec's period at this call's reading (its own keys may not have
                    // moved it lately); the reading's deltas were reported by the call above.
                    let still = CallDeltas {
                        monotonic_delta_ms: 0.0,
                        wall_delta_ms: 0.0,
                        credited_ms: 0.0,
                    };
                    state
                        .period
                        .observe(&state.spec, wall_ms, self.timeline_ms, still, anomalies);
                }
                slot_i32(state.period.slot())
            }
        };
        self.counters.count_anomalies(&anomalies[first_anomaly..]);
        // Parked lists are per spec: a parked key goes back to the main list first.
        if self.table.records[index as usize].flags & FLAG_PARKED != 0 {
            self.touch(index);
        }
        let shape = |capacity: f64, quota: bool| LimitsShape { capacity, quota };
        let record = &mut self.table.records[index as usize];
        let mut state = record.key_use();
        state.carry_over(
            shape(old.capacity, old.quota.is_some()),
            shape(new.capacity, new.quota.is_some()),
            open_slot,
        );
        if self.slices.is_some() {
            // A shared bucket's tokens here are this process's slice: the store carries the
            // bucket over at the key's next store call, which sends the new capacity and refill.
            state.tokens = record.tokens;
        }
        let record = &mut self.table.records[index as usize];
        record.set_use(&state);
        record.policy = new_id;
        record.flags &= !FLAG_POLICY_DUE;
        self.policies[new_id as usize].keys += 1;
        self.policies[old_id as usize].keys -= 1;
        self.release_if_unused(old_id);
        if let Some(clock) = &mut self.refresh.ttl {
            clock.asked_at_ms[index as usize] = self.timeline_ms;
        }
        let limit =
            |quota: Option<super::policies::PolicyQuota>| quota.map_or(0, |quota| quota.limit);
        self.reservation_limit_changed(index, limit(old.quota), limit(new.quota));
        if old.capacity != new.capacity || old.refill_per_second != new.refill_per_second {
            self.slice_limits_changed(index);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::{key, policy, spec, DAY_MS, JAN_15_2024};
    use super::super::{KeyedConfig, Target, DEFAULT_POLICY};
    use super::*;
    use crate::clock::{ManualClock, SuspendPolicy};
    use crate::quota::QuotaPolicy;

    #[derive(Clone, Debug)]
    enum Step {
        Consume(u64),
        Advance(f64),
        /// A new plan (capacity, quota limit), put in force at a random moment.
        Refresh(f64, u64),
        /// A plan with another period spec (a week), the use carried into it.
        Weekly(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (1u64..4).prop_map(Step::Consume),
            3 => (0.0..(8.0 * 3_600_000.0)).prop_map(Step::Advance),
            2 => (1.0..20.0f64, 0u64..30).prop_map(|(capacity, limit)| Step::Refresh(capacity.floor(), limit)),
            1 => (0u64..60).prop_map(Step::Weekly),
        ]
    }

    fn limiter(clock: &mut ManualClock) -> KeyedLimiter {
        let config = KeyedConfig {
            defaults: policy(10.0, Some(10)),
            suspend_policy: SuspendPolicy::Ignore,
            earliest_plausible_wall_ms: None,
            max_keys: 4,
        };
        KeyedLimiter::new(config, clock).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A policy refreshed at random moments never lets a key's use in a period
        /// exceed the largest limit in force during that period (nothing is reserved here).
        #[test]
        fn a_policy_refreshed_at_random_moments_never_admits_past_the_largest_limit_in_force(
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            let mut clock = ManualClock::new(0.0, JAN_15_2024 + 12.0 * 3_600_000.0, None);
            let mut keyed = limiter(&mut clock);
            let tenant = key("tenant");
            // The key's use since it last started at zero, the period it counts in, and the
            // largest limit in force since then.
            let (mut used, mut counted_in, mut largest) = (0u64, None::<(bool, String)>, 10u64);
            let (mut weekly, mut limit) = (false, 10u64);
            let period_of = |keyed: &mut KeyedLimiter, clock: &mut ManualClock, weekly: bool| {
                let target = keyed.find(tenant.key()).map_or(Target::New(DEFAULT_POLICY), Target::Held);
                let status = keyed.status(target, clock, &mut Vec::new()).unwrap();
                (weekly, status.period.unwrap().id)
            };
            for step in steps {
                match step {
                    Step::Consume(n) => {
                        let target = keyed.find(tenant.key()).map_or(Target::New(DEFAULT_POLICY), Target::Held);
                        if n as f64 > keyed.capacity_of(target) {
                            continue;
                        }
                        let decision = keyed
                            .try_consume(tenant.key(), target, n, &mut clock, &mut Vec::new())
                            .unwrap();
                        let period = period_of(&mut keyed, &mut clock, weekly);
                        if counted_in.as_ref() != Some(&period) {
                            // A new period of the same spec: its use starts at zero.
                            (used, counted_in, largest) = (0, Some(period), limit);
                        }
                        if decision.allowed {
                            used += n;
                        }
                        prop_assert!(used <= largest, "{used} admitted in {counted_in:?}, largest limit {largest}");
                    }
                    Step::Advance(ms) => clock.advance(ms),
                    Step::Refresh(..) | Step::Weekly(..) => {
                        let Some(index) = keyed.find(tenant.key()) else {
                            continue;
                        };
                        // Brought to this reading under the old limits first: a period that
                        // ended took its use with it.
                        let before = period_of(&mut keyed, &mut clock, weekly);
                        if counted_in.as_ref() != Some(&before) {
                            (used, largest) = (0, limit);
                        }
                        let (new, new_limit) = match step {
                            Step::Refresh(capacity, new_limit) => {
                                weekly = false;
                                (policy(capacity, Some(new_limit)), new_limit)
                            }
                            Step::Weekly(new_limit) => {
                                weekly = true;
                                let mut new = policy(10.0, None);
                                new.quota = Some(QuotaPolicy::new(new_limit, spec("week", "UTC")));
                                (new, new_limit)
                            }
                            Step::Consume(_) | Step::Advance(_) => unreachable!("matched above"),
                        };
                        keyed.renew_policy(index, new, &mut clock, &mut Vec::new()).unwrap();
                        limit = new_limit;
                        // The use carries whole into the new spec's open period.
                        counted_in = Some(period_of(&mut keyed, &mut clock, weekly));
                        largest = largest.max(limit);
                    }
                }
            }
        }
    }

    #[test]
    fn a_refresh_keeps_what_the_key_used_of_its_bucket_and_its_quota() {
        let mut clock = ManualClock::new(0.0, JAN_15_2024 + DAY_MS / 2.0, None);
        let mut keyed = limiter(&mut clock);
        let tenant = key("tenant");
        let decision = keyed
            .try_consume(
                tenant.key(),
                Target::New(DEFAULT_POLICY),
                6,
                &mut clock,
                &mut Vec::new(),
            )
            .unwrap();
        assert!(decision.allowed);
        let index = keyed.find(tenant.key()).unwrap();
        keyed.mark_policy_due(Some(tenant.key()));
        assert!(keyed.policy_due(index, f64::NAN));
        keyed
            .renew_policy(index, policy(30.0, Some(8)), &mut clock, &mut Vec::new())
            .unwrap();
        assert!(!keyed.policy_due(index, f64::NAN));
        let status = keyed
            .status(Target::Held(index), &mut clock, &mut Vec::new())
            .unwrap();
        assert_eq!(
            (status.tokens, status.quota_used, status.quota_remaining),
            (24.0, Some(6), Some(2))
        );
    }
}
