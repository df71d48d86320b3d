//! Which keys are held: holding and dropping a record, the recency and parked lists, idle keys,
//! room for a new key.
//!
//! A key with a full bucket and no use in its open period is *idle* and may be
//! dropped at any time. Records are on a recency list (most recent first). When a new key must be
//! held at `max_keys`, an idle key is dropped if one is found near a sweep cursor (every key when
//! there are few), else the least recently used key without quota use. Keys met on the way that
//! do have use are *parked* on their spec's list, so no key is stepped over twice while its use
//! lasts: when the spec's period moves on, its parked keys are stale (their use is of an ended
//! period), and being older than every key on the main list, they go first. A blocked key
//! (`FLAG_BLOCKED`) is never idle and never dropped: the search for room steps over it.

use super::policies::{Policy, SpecState};
use super::table::{KeyTable, List, Lists, Record, FLAG_BLOCKED, FLAG_PARKED, NIL};
use super::{slot_i32, Key, KeyedLimiter, PolicyId};
use crate::quota::OpenPeriod;
use crate::reconciler::Reconciled;

/// Records looked at for an idle key when a new key needs room (all of them when there are
/// fewer), and for idle keys to drop after a new key was held (only in a limiter holding more
/// keys than that and at least half of `max_keys`: a small limiter shrinks only to make room).
pub(super) const IDLE_SCAN_FOR_ROOM: usize = 64;
pub(super) const IDLE_SWEEP_PER_NEW_KEY: usize = 2;

/// The lists a record can be on, for [`KeyTable::remove`].
struct RecordLists<'a> {
    main: &'a mut List,
    policies: &'a [Policy],
    specs: &'a mut [SpecState],
}

impl Lists for RecordLists<'_> {
    fn list(&mut self, record: &Record) -> &mut List {
        match self.policies[record.policy as usize].quota {
            Some(quota) if record.flags & FLAG_PARKED != 0 => {
                &mut self.specs[quota.spec as usize].parked
            }
            _ => self.main,
        }
    }
}

impl KeyedLimiter {
    /// Makes a record the most recently used (it leaves a parked list, if it was on one).
    #[inline(always)]
    pub(super) fn touch(&mut self, index: u32) {
        if self.main.head == index {
            return;
        }
        let record = self.table.records[index as usize];
        if record.flags & FLAG_PARKED != 0 {
            let spec = self.parked_spec(&record);
            self.table
                .unlink(index, &mut self.specs[spec as usize].parked);
            self.table.records[index as usize].flags &= !FLAG_PARKED;
        } else {
            self.table.unlink(index, &mut self.main);
        }
        self.table.push_front(index, &mut self.main);
    }

    pub(super) fn parked_spec(&self, record: &Record) -> u32 {
        // Only keys with a quota are ever parked.
        self.policies[record.policy as usize]
            .quota
            .map_or(0, |quota| quota.spec)
    }

    /// Holds a new key at the head of the recency list.
    pub(super) fn hold(&mut self, key: Key<'_>, policy: PolicyId, open_slot: i32) -> u32 {
        let entry = &mut self.policies[policy as usize];
        entry.keys += 1;
        let record = KeyTable::blank(policy, entry.initial_tokens, self.timeline_ms, open_slot);
        let index = self.table.insert(key, record);
        self.table.push_front(index, &mut self.main);
        self.reservation_held(index);
        self.slice_held(index);
        self.policy_asked_at_hold(index);
        index
    }

    /// Removes a record from its list and the table, and lets go of its policy.
    pub(super) fn drop_record(&mut self, index: u32) {
        self.reservation_dropped(index);
        self.slice_dropped(index);
        self.policy_clock_dropped(index);
        let record = self.table.records[index as usize];
        let mut lists = RecordLists {
            main: &mut self.main,
            policies: &self.policies,
            specs: &mut self.specs,
        };
        let list = lists.list(&record);
        self.table.unlink(index, list);
        self.table.remove(index, &mut lists);
        self.policies[record.policy as usize].keys -= 1;
        self.release_if_unused(record.policy);
    }

    /// The slot of a record's spec's period as it would be after the reading
    /// `(wall_ms, timeline_ms)` (`None` for the reading: as it is now), in the table's form;
    /// `None` when the record's policy has no quota.
    pub(super) fn slot_after(&self, record: &Record, reading: Option<(f64, f64)>) -> Option<i32> {
        let quota = self.policies[record.policy as usize].quota?;
        let state = &self.specs[quota.spec as usize];
        let slot = match reading {
            Some((wall_ms, timeline_ms)) => Some(OpenPeriod::slot_after(
                state.period.view(),
                &state.spec,
                wall_ms,
                timeline_ms,
            )),
            None => state.period.slot(),
        };
        Some(slot_i32(slot))
    }

    /// Whether a record has use in its spec's period as it would be after the reading
    /// `(wall_ms, timeline_ms)` (`None`: as it is now).
    pub(super) fn has_current_use(&self, record: &Record, reading: Option<(f64, f64)>) -> bool {
        record.quota_used > 0 && self.slot_after(record, reading) == Some(record.period_slot)
    }

    /// Whether dropping the record changes no later decision (the idle rule, [`KeyUse::idleness`](crate::kernel::KeyUse::idleness)).
    /// A blocked key is never idle.
    pub(super) fn is_idle(&self, record: &Record, timeline_ms: f64, wall_ms: Option<f64>) -> bool {
        if record.flags & FLAG_BLOCKED != 0 {
            return false;
        }
        let reading = wall_ms.map(|wall_ms| (wall_ms, timeline_ms));
        let policy = &self.policies[record.policy as usize];
        record
            .key_use()
            .idleness(
                policy.capacity,
                policy.refill_per_second,
                timeline_ms,
                || self.slot_after(record, reading),
            )
            .idle
    }

    /// the key to drop so a new one fits (the limiter is full), judged on readings not
    /// yet applied: an idle key, else the least recently used key without quota use. `None`: every
    /// key is blocked or has use in its open period.
    pub(super) fn room_for_a_key(&mut self, reconciled: &Reconciled) -> Option<u32> {
        let timeline_ms = self.timeline_ms + reconciled.deltas.credited_ms;
        let wall_ms = Some(reconciled.wall_ms);
        let reading = Some((reconciled.wall_ms, timeline_ms));
        let len = self.table.len();
        for _ in 0..len.min(IDLE_SCAN_FOR_ROOM) {
            self.sweep_cursor %= len;
            let index = self.sweep_cursor;
            self.sweep_cursor += 1;
            if self.is_idle(&self.table.records[index], timeline_ms, wall_ms) {
                return Some(index as u32);
            }
        }
        // Parked keys whose period has ended are older than every key on the main list.
        for state in &self.specs {
            let tail = state.parked.tail;
            if tail != NIL && !self.has_current_use(&self.table.records[tail as usize], reading) {
                return Some(tail);
            }
        }
        let mut blocked_passed = 0;
        loop {
            let tail = self.main.tail;
            if tail == NIL {
                return None;
            }
            let record = self.table.records[tail as usize];
            if record.flags & FLAG_BLOCKED != 0 {
                // Blocked keys go to the head, each at most once: past them all, only they are left.
                if blocked_passed == len {
                    return None;
                }
                blocked_passed += 1;
                self.touch(tail);
                continue;
            }
            if !self.has_current_use(&record, reading) {
                return Some(tail);
            }
            let spec = self.parked_spec(&record);
            self.table.unlink(tail, &mut self.main);
            self.table
                .push_front(tail, &mut self.specs[spec as usize].parked);
            self.table.records[tail as usize].flags |= FLAG_PARKED;
        }
    }

    /// Marks a held key blocked (its block started) or not (its block ended); `false`: not held.
    /// A blocked key is on the main list, where the search for room steps over it.
    pub fn set_blocked(&mut self, key: Key<'_>, blocked: bool) -> bool {
        let Some(index) = self.find(key) else {
            return false;
        };
        if blocked {
            if self.table.records[index as usize].flags & FLAG_PARKED != 0 {
                self.touch(index);
            }
            self.table.records[index as usize].flags |= FLAG_BLOCKED;
        } else {
            self.table.records[index as usize].flags &= !FLAG_BLOCKED;
        }
        true
    }

    /// Drops a few idle keys at the sweep cursor (never `keep`, the key just held).
    pub(super) fn sweep_idle(&mut self, keep: Key<'_>) {
        for _ in 0..IDLE_SWEEP_PER_NEW_KEY {
            let len = self.table.len();
            if len == 0 {
                return;
            }
            self.sweep_cursor %= len;
            let index = self.sweep_cursor;
            let record = self.table.records[index];
            if self.is_idle(&record, self.timeline_ms, None)
                && self.table.key_of(index as u32) != keep
            {
                // The last record moves into `index`: look at it next.
                self.drop_record(index as u32);
                self.counters.evicted += 1;
            } else {
                self.sweep_cursor += 1;
            }
        }
    }

    /// Every held key from the least to the most recently used: the parked ones, then the main list.
    pub(super) fn keys_oldest_first(&self) -> impl Iterator<Item = u32> + '_ {
        let lists = self
            .specs
            .iter()
            .map(|state| state.parked.tail)
            .chain(std::iter::once(self.main.tail));
        lists.flat_map(move |tail| {
            std::iter::successors((tail != NIL).then_some(tail), move |&index| {
                let prev = self.table.records[index as usize].prev;
                (prev != NIL).then_some(prev)
            })
        })
    }
}

#[cfg(test)]
mod blocked_tests {
    use super::super::tests::{check_invariants, consume, key, keyed, policy, JAN_15_2024};
    use crate::clock::ManualClock;

    #[test]
    fn a_blocked_key_is_never_idle_nor_dropped_to_make_room_and_goes_again_once_unblocked() {
        let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
        let mut limiter = keyed(policy(10.0, None), 2, &mut clock);
        consume(&mut limiter, &mut clock, "a", 0).unwrap();
        assert!(limiter.set_blocked(key("a").key(), true));
        assert!(!limiter.set_blocked(key("x").key(), true), "x is not held");
        consume(&mut limiter, &mut clock, "b", 1).unwrap();
        consume(&mut limiter, &mut clock, "c", 1).unwrap();
        assert!(
            limiter.find(key("a").key()).is_some(),
            "a, blocked, is held"
        );
        assert!(limiter.find(key("b").key()).is_none(), "b made room");
        check_invariants(&limiter);
        assert!(limiter.set_blocked(key("c").key(), true));
        let error = consume(&mut limiter, &mut clock, "d", 1).unwrap_err();
        assert_eq!(error.code().as_str(), "ERR_KEY_LIMIT", "every key blocked");
        assert_eq!(limiter.len(), 2);
        check_invariants(&limiter);
        clock.advance(2_000.0); // c is full again: idle once unblocked.
        assert!(limiter.set_blocked(key("c").key(), false));
        consume(&mut limiter, &mut clock, "d", 1).unwrap();
        assert!(
            limiter.find(key("c").key()).is_none(),
            "unblocked, c made room"
        );
        assert!(limiter.find(key("a").key()).is_some());
        check_invariants(&limiter);
    }

    #[test]
    fn a_parked_key_blocked_goes_back_to_the_main_list_and_blocked_keys_beside_quota_use_refuse_a_new_key(
    ) {
        let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
        let mut limiter = keyed(policy(10.0, Some(5)), 2, &mut clock);
        consume(&mut limiter, &mut clock, "a", 1).unwrap();
        consume(&mut limiter, &mut clock, "b", 1).unwrap();
        // Both have quota use: the search for room parks them and refuses.
        assert!(consume(&mut limiter, &mut clock, "c", 1).is_err());
        assert!(limiter.set_blocked(key("a").key(), true));
        check_invariants(&limiter);
        assert!(consume(&mut limiter, &mut clock, "c", 1).is_err());
        // A day on, b's use is of an ended period and b makes room; a, blocked, stays.
        clock.advance(86_400_000.0);
        consume(&mut limiter, &mut clock, "c", 1).unwrap();
        assert!(limiter.find(key("a").key()).is_some());
        assert!(limiter.find(key("b").key()).is_none());
        check_invariants(&limiter);
    }
}
