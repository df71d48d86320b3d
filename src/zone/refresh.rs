//! A held key's policy asked again in a zone. The mark ([`META_POLICY_DUE`]) and when
//! each key's policy was last asked live in the file, so a refresh made in one process applies in
//! every process of the host; the process whose call meets a due key asks its own `policy` (every
//! process passes the same one) and writes the new limits, under the key's group lock.

use std::sync::atomic::{AtomicU64, Ordering};

use super::groups::{read_state, write_limits, write_state};
use super::layout::{SlotMeta, GROUP_SLOTS, META_POLICY_DUE};
use super::storage::Named;
use super::{refresh, Limits, Outcome, Zone, NO_SLOT};
use crate::anomaly::Anomaly;
use crate::clock;
use crate::error::Error;
use crate::kernel::{LimitsShape, Op};
use crate::keyed::{Key, PolicyChoice};

impl Zone {
    /// `policyTtlMs` in this process: a held key's policy is due once that long has passed on the
    /// zone's timeline since it was last asked.
    pub fn set_policy_ttl(&self, ttl_ms: u64) {
        self.policy_ttl_ms.set(Some(ttl_ms as f64));
    }

    /// `refreshPolicy(key)`: marks a held key (a key not held: nothing); `None`, every key held.
    pub fn mark_policy_due(&self, key: Option<Key<'_>>) {
        let mark = |group, slot| self.mark_slot(group, slot);
        match key {
            Some(key) => {
                self.with_held(key, mark);
            }
            None => self.each_held(mark),
        }
    }

    /// (Its group locked.)
    fn mark_slot(&self, group: usize, slot: usize) {
        self.slot(group, slot)
            .meta
            .fetch_or(META_POLICY_DUE, Ordering::AcqRel);
    }

    /// When the key in `slot` of `group` last had its policy asked.
    fn asked_word(&self, group: usize, slot: usize) -> &AtomicU64 {
        let index = group * GROUP_SLOTS + slot;
        &self.at::<[AtomicU64; 1]>(self.offsets.policy_asked + index * 8)[0]
    }

    /// A key added (its group locked): its policy was asked at `timeline_ms`.
    pub(super) fn policy_asked(&self, group: usize, slot: usize, timeline_ms: f64) {
        self.asked_word(group, slot)
            .store(timeline_ms.to_bits(), Ordering::Relaxed);
    }

    /// Whether the held key's policy is due: marked, or asked `policyTtlMs` ago on the timeline
    /// this call reaches when the clocks agree.
    fn policy_due(&self, group: usize, slot: usize) -> bool {
        let meta = self.slot(group, slot).meta.load(Ordering::Acquire);
        if meta & META_POLICY_DUE != 0 {
            return true;
        }
        let Some(ttl_ms) = self.policy_ttl_ms.get() else {
            return false;
        };
        let asked_at_ms = f64::from_bits(self.asked_word(group, slot).load(Ordering::Relaxed));
        let (_, recon) = self.read_recon();
        let elapsed_ms = (clock::monotonic_ms() - recon.anchors.last_monotonic_ms).max(0.0);
        recon.timeline_ms + elapsed_ms - asked_at_ms >= ttl_ms
    }

    /// Before a call on a held key (its group locked): when its policy is due, asks for it
    /// (`Some(NeedsPolicy)`) or puts the one brought in force with the carry-over rule, the key
    /// first brought to this reading under its old limits; `None`: go on with the call.
    pub(super) fn renew_if_due(
        &self,
        group: usize,
        slot: usize,
        policy: PolicyChoice<'_>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Option<Outcome>, Error> {
        if !self.policy_due(group, slot) {
            return Ok(None);
        }
        let Some((policy, new)) = self.chosen_policy(policy)? else {
            return Ok(Some(Outcome::NeedsPolicy));
        };
        let record = self.slot(group, slot);
        let old = self.limits_of(record);
        // The reading, the old spec's period moved (a status writes nothing of the key).
        self.call_kernel(old, Named::Held { group, slot }, Op::Status, anomalies)?;
        if new.spec.is_some() && new.spec != old.spec {
            // The new spec's period at a reading of its own (its keys may not have moved it).
            let look = Named::Look {
                initial_tokens: policy.initial_tokens,
            };
            self.call_kernel(new, look, Op::Status, anomalies)?;
        }
        let (_, recon) = self.read_recon();
        let mut state = read_state(record);
        let timeline_ms = recon.timeline_ms.max(state.credited_at_ms);
        refresh(
            &old,
            &mut state,
            timeline_ms,
            old.spec.map(|spec| self.read_period(spec)),
        );
        let open_slot = new
            .spec
            .map(|spec| self.read_period(spec))
            .filter(|period| period.open)
            .map_or(NO_SLOT, |period| period.slot);
        state.carry_over(shape(&old), shape(&new), open_slot);
        write_state(record, state);
        write_limits(record, new.capacity, new.refill_per_second, new.quota_limit);
        let meta = SlotMeta(record.meta.load(Ordering::Relaxed));
        let spec_bits = new.spec.map_or(0, |spec| spec as u64 + 1) << 24;
        let renewed = (meta.0 & !(0xff << 24) & !META_POLICY_DUE) | spec_bits;
        self.policy_asked(group, slot, timeline_ms);
        // Last: a process killed before this leaves the key due, asked again at its next call.
        record.meta.store(renewed, Ordering::Release);
        Ok(None)
    }
}

fn shape(limits: &Limits) -> LimitsShape {
    LimitsShape {
        capacity: limits.capacity,
        quota: limits.quota_limit.is_some(),
    }
}
