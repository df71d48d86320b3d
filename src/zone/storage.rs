//! The zone as a kernel [`Storage`]: a key's state is loaded from its slot's atomics and stored
//! back there; the reading is published lock-free (`recon.rs`), the period moved under its
//! spec's lock (`periods.rs`). The call runs under the key's group lock (taken by `mod.rs`).

use super::groups::{read_state, write_state};
use super::layout::Intent;
use super::periods::PeriodState;
use super::{tag_of, Limits, Zone, NO_SLOT};
use crate::anomaly::Anomaly;
use crate::calendar::PeriodSlot;
use crate::error::Error;
use crate::kernel::{
    BucketOf, CallReading, Decision, KeyUse, Op, Parts, PeriodQuota, Refill, Storage,
};
use crate::keyed::{Key, KeyPolicy};
use std::convert::Infallible;
use std::sync::atomic::Ordering;

/// A key as a call on the zone names it.
#[derive(Clone, Copy)]
pub(super) enum Named<'a> {
    /// A held key: its group and slot.
    Held { group: usize, slot: usize },
    /// A key not held that a consume adds to `group` (both of its groups locked).
    Add {
        group: usize,
        key: Key<'a>,
        hash: u64,
        policy: &'a KeyPolicy,
    },
    /// A key not held that a status looks at: what a fresh key would have.
    Look { initial_tokens: f64 },
    /// A key not held that a refund names: the clocks are reconciled, nothing else happens.
    Absent,
}

/// Where a call's state goes back.
#[derive(Clone, Copy)]
pub(super) enum Held<'a> {
    Slot {
        group: usize,
        slot: usize,
    },
    /// The slot made for a key the call adds: its identity, state and tag are written there.
    New {
        group: usize,
        slot: usize,
        key: Key<'a>,
        hash: u64,
        policy: &'a KeyPolicy,
    },
    Nowhere,
}

/// One call on the zone: the key's limits (its slot's, or the policy's of a key not held), and
/// what the steps learn for the later ones.
pub(super) struct ZoneCall<'a> {
    pub(super) zone: &'a Zone,
    pub(super) limits: Limits,
    /// The generation this call published (the period rule's order among processes).
    generation: u64,
    /// The slot room was made in, for a key the call adds.
    room: Option<usize>,
    /// The key's spec's period after the reading.
    pub(super) period: Option<PeriodState>,
}

impl<'a> ZoneCall<'a> {
    pub(super) fn new(zone: &'a Zone, limits: Limits) -> ZoneCall<'a> {
        ZoneCall {
            zone,
            limits,
            generation: 0,
            room: None,
            period: None,
        }
    }

    /// The slot of the key's spec's open period after the reading (`NO_SLOT`: none open).
    pub(super) fn open_slot(&self) -> PeriodSlot {
        self.period
            .filter(|period| period.open)
            .map_or(NO_SLOT, |period| period.slot)
    }
}

impl<'a> Storage for ZoneCall<'a> {
    type Key = Named<'a>;
    type Held = Held<'a>;
    type Slot = PeriodSlot;
    type Pending = Infallible;
    type Decided = Decision;
    type Bucket<'b>
        = Refill<'b>
    where
        Self: 'b;
    type Quota<'b>
        = PeriodQuota<'b, Option<f64>>
    where
        Self: 'b;
    type Tally<'b>
        = ()
    where
        Self: 'b;

    fn reconcile(
        &mut self,
        named: Named<'a>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<CallReading, Error> {
        let room_in = match named {
            Named::Add { group, .. } => Some(group),
            _ => None,
        };
        let (pending, generation, room) =
            self.zone
                .reconcile_with(self.limits.spec.is_some(), room_in, anomalies)?;
        self.generation = generation;
        self.room = room;
        Ok(pending.reading)
    }

    fn move_period(
        &mut self,
        _: Named<'a>,
        reading: &CallReading,
        anomalies: &mut Vec<Anomaly>,
    ) -> PeriodSlot {
        self.period = self.limits.spec.map(|spec| {
            self.zone.observe(
                spec,
                reading.wall_ms,
                reading.timeline_ms,
                reading.deltas,
                self.generation,
                anomalies,
            )
        });
        self.open_slot()
    }

    fn load(
        &mut self,
        named: Named<'a>,
        _: Op,
        reading: &CallReading,
        open_slot: PeriodSlot,
    ) -> (Held<'a>, KeyUse<PeriodSlot>, BucketOf) {
        let bucket = BucketOf {
            capacity: self.limits.capacity,
            refill_per_second: self.limits.refill_per_second,
        };
        let fresh = |tokens| KeyUse {
            tokens,
            credited_at_ms: reading.timeline_ms,
            quota_used: 0,
            period_slot: open_slot,
        };
        match named {
            Named::Held { group, slot } => {
                let state = read_state(self.zone.slot(group, slot));
                (Held::Slot { group, slot }, state, bucket)
            }
            Named::Add {
                group,
                key,
                hash,
                policy,
            } => {
                let Some(slot) = self.room else {
                    unreachable!("a key is added once room is made for it")
                };
                let held = Held::New {
                    group,
                    slot,
                    key,
                    hash,
                    policy,
                };
                (held, fresh(policy.initial_tokens), bucket)
            }
            Named::Look { initial_tokens } => (Held::Nowhere, fresh(initial_tokens), bucket),
            Named::Absent => (Held::Nowhere, fresh(0.0), bucket),
        }
    }

    fn parts<'b>(
        &'b mut self,
        _: Held<'a>,
        state: &'b mut KeyUse<PeriodSlot>,
        _: u64,
        reading: &CallReading,
    ) -> Parts<Refill<'b>, PeriodQuota<'b, Option<f64>>, ()> {
        let KeyUse {
            tokens, quota_used, ..
        } = state;
        let ends = self
            .period
            .filter(|period| period.open)
            .map(|period| period.end_ms);
        Parts {
            bucket: Refill::new(tokens, self.limits.refill_per_second),
            quota: self
                .limits
                .quota_limit
                .map(|limit| PeriodQuota::new(quota_used, limit, ends, reading.wall_ms)),
            tally: (),
        }
    }

    fn answer(&mut self, _: Held<'a>, _: u64, outcome: Result<Decision, Infallible>) -> Decision {
        let Ok(decision) = outcome;
        decision
    }

    fn save(&mut self, held: Held<'a>, state: &KeyUse<PeriodSlot>, op: Op, _: &CallReading) {
        let zone = self.zone;
        match held {
            // (A status does not count as use: the key's state is left as it was.)
            Held::Slot { .. } if op == Op::Status => {}
            Held::Slot { group, slot } => write_state(zone.slot(group, slot), *state),
            Held::New {
                group,
                slot,
                key,
                hash,
                policy,
            } => {
                zone.write_identity(group, slot, key, hash, policy, self.limits.spec);
                write_state(zone.slot(group, slot), *state);
                zone.policy_asked(group, slot, state.credited_at_ms);
                #[cfg(test)]
                if super::PANIC_BEFORE_TAG.with(|armed| armed.replace(false)) {
                    panic!("a panic between the key count and the tag (a test's)");
                }
                let header = zone.group(group);
                header.tags[slot].store(tag_of(hash), Ordering::Release);
                header.intent.store(Intent::NONE.0, Ordering::Release);
            }
            Held::Nowhere => {}
        }
    }
}
