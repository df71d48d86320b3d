//! Keys in their groups: finding a key, adding one (room in its group and in `held`), the idle
//! rule's judgement, eviction, and a key's double-buffered state in its slot.

use super::*;

impl Zone {
    // ---- keys ------------------------------------------------------------------------------

    /// A key's two groups (two choices: the less loaded takes a new key, so a group is
    /// practically never full before the zone is).
    pub(super) fn groups_of(&self, hash: u64) -> (usize, usize) {
        let pick = |bits: u64| ((u128::from(bits) * self.groups as u128) >> 64) as usize;
        let first = pick(hash);
        let mut second = pick(hash.rotate_left(32).wrapping_mul(0x2545_f491_4f6c_dd1d));
        if second == first && self.groups > 1 {
            second = (first + 1) % self.groups;
        }
        (first, second)
    }

    pub(super) fn has_tag(&self, group: usize, hash: u64) -> bool {
        let tag = tag_of(hash);
        self.group(group)
            .tags
            .iter()
            .any(|stored| stored.load(Ordering::Relaxed) == tag)
    }

    pub(super) fn free_slots(&self, group: usize) -> usize {
        self.group(group)
            .tags
            .iter()
            .filter(|stored| stored.load(Ordering::Relaxed) == 0)
            .count()
    }

    pub(super) fn lock_group(&self, group: usize) -> GroupGuard<'_> {
        let header = self.group(group);
        if lock(&header.lock, self.me) == Acquired::TakenOver {
            self.header().takeovers.fetch_add(1, Ordering::Relaxed);
            self.repair_group(group);
        }
        GroupGuard { zone: self, group }
    }

    /// After a takeover: a key being added when its process died is either in (its tag
    /// published) or not; its room in `held` is given back if it is not.
    pub(super) fn repair_group(&self, group: usize) {
        let header = self.group(group);
        let intent = Intent(header.intent.load(Ordering::Relaxed));
        if intent == Intent::NONE {
            return;
        }
        let published = intent.slot().is_some_and(|slot| {
            slot < GROUP_SLOTS && header.tags[slot].load(Ordering::Relaxed) != 0
        });
        if !published && intent.is_counted() {
            self.header().held.fetch_sub(1, Ordering::Relaxed);
        }
        header.intent.store(Intent::NONE.0, Ordering::Relaxed);
    }

    /// The slot of `key` in `group` (its lock held).
    pub(super) fn find_in(&self, group: usize, key: Key<'_>, hash: u64) -> Option<usize> {
        let header = self.group(group);
        let tag = tag_of(hash);
        (0..GROUP_SLOTS).find(|&slot| {
            header.tags[slot].load(Ordering::Relaxed) == tag && self.holds(group, slot, key, hash)
        })
    }

    /// `f` on the held `key`'s slot, under its group's lock (its two groups looked in, in turn);
    /// `None`: the key is not held.
    pub(super) fn with_held<T>(
        &self,
        key: Key<'_>,
        f: impl FnOnce(usize, usize) -> T,
    ) -> Option<T> {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        for group in [first, second] {
            let _guard = self.lock_group(group);
            if let Some(slot) = self.find_in(group, key, hash) {
                return Some(f(group, slot));
            }
            if first == second {
                break;
            }
        }
        None
    }

    /// `f` on every held slot, each group under its lock in turn.
    pub(super) fn each_held(&self, mut f: impl FnMut(usize, usize)) {
        for group in 0..self.groups {
            let _guard = self.lock_group(group);
            for slot in 0..GROUP_SLOTS {
                if self.group(group).tags[slot].load(Ordering::Relaxed) != 0 {
                    f(group, slot);
                }
            }
        }
    }

    pub(super) fn holds(&self, group: usize, slot: usize, key: Key<'_>, hash: u64) -> bool {
        let record = self.slot(group, slot);
        let meta = SlotMeta(record.meta.load(Ordering::Relaxed));
        if record.hash.load(Ordering::Relaxed) != hash
            || meta.key_len() != key.len
            || meta.wide() != key.wide
        {
            return false;
        }
        if usize::from(key.len) <= INLINE_KEY_BYTES {
            key.words
                .iter()
                .zip(&record.key)
                .all(|(word, stored)| stored.load(Ordering::Relaxed) == *word)
        } else {
            key.words
                .iter()
                .zip(self.long_key(group, slot))
                .all(|(word, stored)| stored.load(Ordering::Relaxed) == *word)
        }
    }

    pub(super) fn key_at(&self, group: usize, slot: usize) -> KeyBuf {
        let record = self.slot(group, slot);
        let meta = SlotMeta(record.meta.load(Ordering::Relaxed));
        let len = meta.key_len();
        let words: Vec<u64> = if usize::from(len) <= INLINE_KEY_BYTES {
            record
                .key
                .iter()
                .take(crate::keyed::words_for(usize::from(len)))
                .map(|word| word.load(Ordering::Relaxed))
                .collect()
        } else {
            self.long_key(group, slot)
                .iter()
                .take(crate::keyed::words_for(usize::from(len)))
                .map(|word| word.load(Ordering::Relaxed))
                .collect()
        };
        KeyBuf {
            wide: meta.wide(),
            len,
            words,
        }
    }

    pub(super) fn limits_of(&self, record: &Slot) -> Limits {
        let spec = SlotMeta(record.meta.load(Ordering::Relaxed)).spec_bits();
        let spec = (spec > 0 && spec <= SPECS).then(|| spec - 1);
        let spec = spec.filter(|&index| self.load_spec(index).is_some());
        let limit = record.quota_limit.load(Ordering::Relaxed);
        Limits {
            capacity: f64::from_bits(record.capacity.load(Ordering::Relaxed)),
            refill_per_second: f64::from_bits(record.refill_per_second.load(Ordering::Relaxed)),
            quota_limit: (limit != NO_LIMIT && spec.is_some()).then_some(limit),
            spec,
        }
    }

    /// The idle rule ([`KeyUse::idleness`]) for the key in (`group`, `slot`), its period as it
    /// would be after `wall_ms`.
    pub(super) fn judge(
        &self,
        group: usize,
        slot: usize,
        timeline_ms: f64,
        wall_ms: f64,
    ) -> Idleness {
        let record = self.slot(group, slot);
        let limits = self.limits_of(record);
        read_state(record).idleness(
            limits.capacity,
            limits.refill_per_second,
            timeline_ms,
            || {
                limits
                    .spec
                    .map(|spec| self.slot_after(spec, wall_ms, timeline_ms))
            },
        )
    }

    /// Drops the key in (`group`, `slot`) to make room, the group's lock held (an eviction).
    pub(super) fn evict(&self, group: usize, slot: usize) {
        self.remove(group, slot);
        self.counters.borrow_mut().evicted += 1;
    }

    /// Drops the key in (`group`, `slot`), the group's lock held.
    pub(super) fn remove(&self, group: usize, slot: usize) {
        // Its block first: a slot never holds a block without its key (a new key finds none).
        self.clear_block(group, slot);
        self.group(group).tags[slot].store(0, Ordering::Release);
        self.header().held.fetch_sub(1, Ordering::Relaxed);
    }

    /// The key to drop in `group` (locked) so a new key fits: an idle key, else the least
    /// recently used one without quota use.
    pub(super) fn victim_in(
        &self,
        group: usize,
        timeline_ms: f64,
        wall_ms: f64,
    ) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        for slot in 0..GROUP_SLOTS {
            if self.group(group).tags[slot].load(Ordering::Relaxed) == 0 {
                continue;
            }
            if self.blocked_at(group, slot, timeline_ms) {
                continue;
            }
            let Idleness { idle, has_use } = self.judge(group, slot, timeline_ms, wall_ms);
            if idle {
                return Some((slot, f64::NEG_INFINITY));
            }
            let used_at = read_state(self.slot(group, slot)).credited_at_ms;
            if !has_use && best.is_none_or(|(_, at)| used_at < at) {
                best = Some((slot, used_at));
            }
        }
        best
    }

    /// Drops a key anywhere in the zone to make room (`own` is locked by the caller): an idle
    /// key, else the least recently used key without quota use among the groups looked at
    /// (every group of a zone of up to 64 groups). `false`: every key has quota use.
    pub(super) fn make_room(&self, own: usize, timeline_ms: f64, wall_ms: f64) -> bool {
        // A group found busy or changed is looked at again, a few times (never waited for: the
        // caller holds its own groups' locks).
        for _ in 0..MAKE_ROOM_TRIES {
            match self.try_make_room(own, timeline_ms, wall_ms) {
                Some(made) => return made,
                None => std::thread::yield_now(),
            }
        }
        false
    }

    /// One try of [`Zone::make_room`]; `None`: the key chosen could not be dropped (its group was
    /// busy, or it changed).
    pub(super) fn try_make_room(&self, own: usize, timeline_ms: f64, wall_ms: f64) -> Option<bool> {
        let start = self.header().cursor.fetch_add(1, Ordering::Relaxed) as usize % self.groups;
        let mut best: Option<(usize, usize, f64, u64)> = None;
        for step in 0..self.groups {
            if step >= VICTIM_SCAN_GROUPS && best.is_some() {
                break;
            }
            let group = (start + step) % self.groups;
            let guard = if group == own {
                None
            } else {
                match try_lock(&self.group(group).lock, self.me) {
                    Some(_) => Some(GroupGuard { zone: self, group }),
                    None => continue,
                }
            };
            if let Some((slot, used_at)) = self.victim_in(group, timeline_ms, wall_ms) {
                if used_at == f64::NEG_INFINITY {
                    self.evict(group, slot);
                    return Some(true);
                }
                if best.is_none_or(|(_, _, at, _)| used_at < at) {
                    let hash = self.slot(group, slot).hash.load(Ordering::Relaxed);
                    best = Some((group, slot, used_at, hash));
                }
            }
            drop(guard);
        }
        let Some((group, slot, _, hash)) = best else {
            return Some(false);
        };
        let _guard = if group == own {
            None
        } else {
            try_lock(&self.group(group).lock, self.me)?;
            Some(GroupGuard { zone: self, group })
        };
        // Still the same key, still without use?
        let tags = &self.group(group).tags[slot];
        if tags.load(Ordering::Relaxed) != tag_of(hash)
            || self.slot(group, slot).hash.load(Ordering::Relaxed) != hash
            || self.judge(group, slot, timeline_ms, wall_ms).has_use
            || self.blocked_at(group, slot, timeline_ms)
        {
            return None;
        }
        self.evict(group, slot);
        Some(true)
    }

    pub(super) fn write_identity(
        &self,
        group: usize,
        slot: usize,
        key: Key<'_>,
        hash: u64,
        policy: &KeyPolicy,
        spec: Option<usize>,
    ) {
        let record = self.slot(group, slot);
        record.hash.store(hash, Ordering::Relaxed);
        if usize::from(key.len) <= INLINE_KEY_BYTES {
            for (index, stored) in record.key.iter().enumerate() {
                stored.store(
                    key.words.get(index).copied().unwrap_or(0),
                    Ordering::Relaxed,
                );
            }
        } else {
            for (stored, &word) in self.long_key(group, slot).iter().zip(key.words) {
                stored.store(word, Ordering::Relaxed);
            }
        }
        write_limits(
            record,
            policy.capacity,
            policy.refill_per_second,
            policy.quota.as_ref().map(|quota| quota.limit),
        );
        record
            .meta
            .store(SlotMeta::new(key.len, key.wide, spec).0, Ordering::Relaxed);
    }

    /// Adds a restored key (at creation, before any other process sees the file).
    pub(super) fn restore_key(
        &self,
        key: Key<'_>,
        policy: &KeyPolicy,
        spec: Option<usize>,
        state: KeyState,
    ) {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        if self.find_in(first, key, hash).is_some() || self.find_in(second, key, hash).is_some() {
            return;
        }
        let group = if self.free_slots(second) > self.free_slots(first) {
            second
        } else {
            first
        };
        let header = self.group(group);
        let Some(slot) =
            (0..GROUP_SLOTS).find(|&slot| header.tags[slot].load(Ordering::Relaxed) == 0)
        else {
            return;
        };
        self.write_identity(group, slot, key, hash, policy, spec);
        write_state(self.slot(group, slot), state);
        header.tags[slot].store(tag_of(hash), Ordering::Release);
        self.header().held.fetch_add(1, Ordering::Relaxed);
    }

    /// Reserves room for a new key in `group` (locked) on `pending`'s readings: a free slot
    /// (or one made in a full group) and a count in `held` (or a key dropped elsewhere).
    pub(super) fn room_for(&self, group: usize, pending: &Pending) -> Result<usize, Error> {
        let max_keys = self.max_keys;
        let timeline_ms = pending.next.timeline_ms;
        let wall_ms = pending.reading.wall_ms;
        let free = (0..GROUP_SLOTS)
            .find(|&slot| self.group(group).tags[slot].load(Ordering::Relaxed) == 0);
        let slot = match free {
            Some(slot) => slot,
            None => {
                // The key's own group is full: room is made in it.
                let (slot, _) = self
                    .victim_in(group, timeline_ms, wall_ms)
                    .ok_or(Error::KeyLimit { max_keys })?;
                self.evict(group, slot);
                slot
            }
        };
        loop {
            let header = self.group(group);
            let counted = &self.header().held;
            let intent = Intent::adding(slot);
            header.intent.store(intent.0, Ordering::Relaxed);
            if counted.fetch_add(1, Ordering::Relaxed) < max_keys {
                header.intent.store(intent.counted().0, Ordering::Release);
                return Ok(slot);
            }
            counted.fetch_sub(1, Ordering::Relaxed);
            header.intent.store(Intent::NONE.0, Ordering::Relaxed);
            if !self.make_room(group, timeline_ms, wall_ms) {
                return Err(Error::KeyLimit { max_keys });
            }
        }
    }

    /// Gives back the room a key being added took in `held` (its addition did not happen).
    pub(super) fn give_up_key_room(&self, group: usize) {
        self.header().held.fetch_sub(1, Ordering::Relaxed);
        self.group(group)
            .intent
            .store(Intent::NONE.0, Ordering::Release);
    }
}

pub(super) fn read_state(record: &Slot) -> KeyState {
    let current = SlotMeta(record.meta.load(Ordering::Acquire)).current();
    let words = &record.state[current];
    KeyState {
        tokens: f64::from_bits(words[0].load(Ordering::Relaxed)),
        credited_at_ms: f64::from_bits(words[1].load(Ordering::Relaxed)),
        quota_used: words[2].load(Ordering::Relaxed),
        period_slot: PeriodSlot(words[3].load(Ordering::Relaxed) as i64),
    }
}

/// Writes the buffer not current, then makes it current with one store: a process killed
/// between the two leaves the state before the call, after the store the state after it.
#[inline(always)]
pub(super) fn write_state(record: &Slot, state: KeyState) {
    write_state_cut(record, state, WRITE_STEPS);
}

/// A slot's limits (capacity, refill per second, quota limit: `None` for none), written in place.
pub(super) fn write_limits(
    record: &Slot,
    capacity: f64,
    refill_per_second: f64,
    quota_limit: Option<u64>,
) {
    record.capacity.store(capacity.to_bits(), Ordering::Relaxed);
    record
        .refill_per_second
        .store(refill_per_second.to_bits(), Ordering::Relaxed);
    record
        .quota_limit
        .store(quota_limit.unwrap_or(NO_LIMIT), Ordering::Relaxed);
}

/// The stores of a key's write: four words, then the flip.
pub(super) const WRITE_STEPS: usize = 5;

/// [`write_state`], making only its first `steps` stores (as a process killed after them would;
/// the model test cuts it short).
#[inline(always)]
pub(super) fn write_state_cut(record: &Slot, state: KeyState, steps: usize) {
    let meta = SlotMeta(record.meta.load(Ordering::Relaxed));
    let other = 1 - meta.current();
    let values = [
        state.tokens.to_bits(),
        state.credited_at_ms.to_bits(),
        state.quota_used,
        state.period_slot.0 as u64,
    ];
    for (step, (word, value)) in record.state[other].iter().zip(values).enumerate() {
        if step == steps {
            return;
        }
        word.store(value, Ordering::Relaxed);
    }
    if steps == WRITE_STEPS {
        record.meta.store(meta.flipped().0, Ordering::Release);
    }
}
