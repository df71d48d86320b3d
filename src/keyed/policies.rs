//! Policies: a key's limits ([`KeyPolicy`]) interned once for every key of equal limits (a
//! [`PolicyId`]), and the period specs they name interned once for every policy of an equal spec
//! (a [`SpecState`], which holds the spec's open period for all its keys).

use std::sync::Arc;

use super::table::List;
use super::{KeyedLimiter, Target};
use crate::calendar::PeriodSpec;
use crate::quota::OpenPeriod;

/// A key's limits, checked ([`Limits::checked`](crate::limits::Limits::checked)), the defaults
/// filled in.
pub type KeyPolicy = crate::limits::Limits;

/// An interned policy; [`DEFAULT_POLICY`] is the limiter's own options.
pub type PolicyId = u32;
pub const DEFAULT_POLICY: PolicyId = 0;

/// A policy's quota: its limit and its interned spec.
#[derive(Clone, Copy, Debug)]
pub(super) struct PolicyQuota {
    pub(super) limit: u64,
    pub(super) spec: u32,
}

/// An interned policy.
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    pub(super) capacity: f64,
    pub(super) refill_per_second: f64,
    pub(super) initial_tokens: f64,
    pub(super) quota: Option<PolicyQuota>,
    /// Records holding this policy.
    pub(super) keys: u32,
}

/// What makes two policies equal (the bits of their numbers, their spec's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PolicyIdentity {
    capacity: u64,
    refill_per_second: u64,
    initial_tokens: u64,
    quota: Option<(u64, u32)>,
}

impl Policy {
    pub(super) fn identity(&self) -> PolicyIdentity {
        PolicyIdentity {
            capacity: self.capacity.to_bits(),
            refill_per_second: self.refill_per_second.to_bits(),
            initial_tokens: self.initial_tokens.to_bits(),
            quota: self.quota.map(|quota| (quota.limit, quota.spec)),
        }
    }
}

/// An interned period spec and its open period.
#[derive(Debug)]
pub(super) struct SpecState {
    /// The spec the first policy naming it brought (the limiter's defaults hand theirs over, uncopied).
    pub(super) spec: Arc<PeriodSpec>,
    pub(super) period: OpenPeriod,
    /// Keys stepped over by an eviction because they had use in this spec's open period.
    pub(super) parked: List,
    /// Live policies naming this spec.
    pub(super) policies: u32,
}

impl KeyedLimiter {
    /// The policy a call's key has (or gets).
    pub(super) fn policy_of(&self, target: Target) -> &Policy {
        match target {
            Target::Held(index) => {
                &self.policies[self.table.records[index as usize].policy as usize]
            }
            Target::New(policy) => &self.policies[policy as usize],
        }
    }

    /// The capacity `n` is checked against.
    #[inline(always)]
    pub fn capacity_of(&self, target: Target) -> f64 {
        self.policy_of(target).capacity
    }

    /// A policy's id, shared with every key of equal limits.
    pub fn intern(&mut self, policy: KeyPolicy) -> PolicyId {
        let quota = policy.quota.map(|quota| PolicyQuota {
            limit: quota.limit,
            spec: self.intern_spec(quota.spec),
        });
        let entry = Policy {
            capacity: policy.capacity,
            refill_per_second: policy.refill_per_second,
            initial_tokens: policy.initial_tokens,
            quota,
            keys: 0,
        };
        if let Some(&id) = self.policy_ids.get(&entry.identity()) {
            if let Some(quota) = quota {
                self.release_spec(quota.spec);
            }
            return id;
        }
        let id = match self.free_policies.pop() {
            Some(id) => {
                self.policies[id as usize] = entry;
                id
            }
            None => {
                self.policies.push(entry);
                (self.policies.len() - 1) as PolicyId
            }
        };
        self.policy_ids.insert(entry.identity(), id);
        id
    }

    /// Takes a reference on the spec's state (made if new).
    pub(super) fn intern_spec(&mut self, spec: Arc<PeriodSpec>) -> u32 {
        let identity = spec.identity();
        if let Some(&id) = self.spec_ids.get(&identity) {
            self.specs[id as usize].policies += 1;
            return id;
        }
        let state = SpecState {
            spec,
            period: OpenPeriod::default(),
            parked: List::default(),
            policies: 1,
        };
        let id = match self.free_specs.pop() {
            Some(id) => {
                self.specs[id as usize] = state;
                id
            }
            None => {
                self.specs.push(state);
                (self.specs.len() - 1) as u32
            }
        };
        self.spec_ids.insert(identity, id);
        id
    }

    pub(super) fn release_spec(&mut self, spec: u32) {
        let state = &mut self.specs[spec as usize];
        state.policies -= 1;
        if state.policies == 0 {
            self.spec_ids.remove(&state.spec.identity());
            self.free_specs.push(spec);
        }
    }

    /// Frees a policy no key holds (the defaults stay).
    pub fn release_if_unused(&mut self, policy: PolicyId) {
        let entry = self.policies[policy as usize];
        if policy == DEFAULT_POLICY
            || entry.keys > 0
            || self.policy_ids.get(&entry.identity()) != Some(&policy)
        {
            return;
        }
        self.policy_ids.remove(&entry.identity());
        self.free_policies.push(policy);
        if let Some(quota) = entry.quota {
            self.release_spec(quota.spec);
        }
    }
}

/// The policy a call on a key that is not held gets.
#[derive(Clone, Copy, Debug)]
pub enum PolicyChoice<'a> {
    /// The limiter has no `policy` function: its defaults.
    Defaults,
    /// `policy(key)` has not been asked yet: the limiter asks for it if the key is not held.
    Ask,
    /// What `policy(key)` returned.
    Given(&'a KeyPolicy),
}

impl<'a> PolicyChoice<'a> {
    /// `returned`: what `policy(key)` returned, if it was asked; `has_policy`: the limiter has a
    /// `policy` function.
    pub fn of(returned: Option<&'a KeyPolicy>, has_policy: bool) -> PolicyChoice<'a> {
        match returned {
            Some(policy) => PolicyChoice::Given(policy),
            None if has_policy => PolicyChoice::Ask,
            None => PolicyChoice::Defaults,
        }
    }
}
