//! A `KeyedQuotaClock` whose keys, open periods and clock reconciliation live in a shared
//! memory-mapped file, so that every process of a host that opens it is one limiter
//! (docs/zone.md explains the protocol and its invariants).
//!
//! - The reconciler's state is published lock-free: each open limiter owns a cell of two
//!   slots, writes the one not published and swings the header's `recon_head` to it by CAS; a
//!   failed CAS re-reads the clocks and tries again.
//! - Keys are in groups of [`GROUP_SLOTS`] slots, each group behind its own lock; a key's state
//!   is double-buffered, so a process killed mid-write leaves the state before or after.
//! - Period specs hold their open period double-buffered too, read seqlock-style without a lock
//!   and changed under the spec's own lock.
//! - Every lock records its owner; a waiter that finds the owner dead takes the lock over.

mod layout;
mod lock;
mod map;
mod options;
mod periods;
mod recon;
#[cfg(test)]
mod tests;

use std::cell::{OnceCell, RefCell};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use layout::{
    groups_for, Cell, Group, Offsets, ReconSlot, Slot, SpecEntry, CELLS, INLINE_KEY_BYTES,
    INTENT_RESERVED, LONG_KEY_BYTES, META_CURRENT, META_WIDE, SPECS,
};
pub use layout::{Header, OptionsImage, GROUP_SLOTS, SPEC_IDENTITY_BYTES};
pub use lock::owner_id;
use lock::{lock, try_lock, unlock, Acquired};
pub use map::ZoneError;
use options::option_value;
pub use options::{first_difference, options_image};
use periods::{spec_from_identity, spec_identity_bytes, PeriodState};
use recon::{refused, Pending, ReconState};

use crate::anomaly::{Anomaly, CallDeltas};
use crate::bucket::{refill_wait_ms, refilled};
use crate::calendar::{Period, PeriodSpec, RawPeriodSpec, StartKind};
use crate::clock::{self, reconcile, ReaderBaseline, SuspendPolicy, WallDivergence};
use crate::error::Error;
use crate::keyed::{Key, KeyBuf, KeyPolicy, KeyStatus, Snapshot};
use crate::limiter::{longer_wait, Decision, RetryBasis};
use crate::quota::QuotaPolicy;
use crate::reconciler::check_wall_plausible;

/// A zone's options, as every process opening it must pass them.
#[derive(Clone, Debug)]
pub struct ZoneConfig {
    pub path: String,
    pub defaults: KeyPolicy,
    pub suspend_policy: SuspendPolicy,
    pub earliest_plausible_wall_ms: Option<f64>,
    pub max_keys: u64,
    /// The clock has CLOCK_BOOTTIME as its elapsed-realtime reader.
    pub reader: bool,
}

/// What a call does to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Consume,
    Refund,
    Status,
}

/// A call's outcome.
#[derive(Debug)]
pub enum Outcome {
    /// The key is not held and the zone must call `policy(key)` first (nothing was read).
    NeedsPolicy,
    /// The decision, and the slot of the period its quota units count in (for a give-back).
    Decided(Decision, i64),
    Refunded,
    Status(KeyStatus),
}

/// A held key as `snapshot()` saves it.
pub struct HeldKey {
    pub key: KeyBuf,
    /// As of the last reading.
    pub tokens: f64,
    /// In the open period of `period`'s spec.
    pub quota_used: u64,
    /// The key's spec and its open period's id, when it has use there.
    pub period: Option<(Arc<PeriodSpec>, String)>,
    /// The timeline when it was last used.
    pub used_at_ms: f64,
}

const NO_LIMIT: u64 = u64::MAX;
const NO_SLOT: i64 = i64::MIN;
/// Groups looked at for a key to drop before the least recently used one found is taken.
const VICTIM_SCAN_GROUPS: usize = 64;
/// Tries of making room before a new key is refused.
const MAKE_ROOM_TRIES: usize = 16;

/// A key's state as stored (the current buffer of its slot).
#[derive(Clone, Copy, Debug, PartialEq)]
struct KeyState {
    tokens: f64,
    /// The timeline when it was last used: its bucket is as of then.
    credited_at_ms: f64,
    quota_used: u64,
    period_slot: i64,
}

/// A held key's limits, as its slot stores them.
#[derive(Clone, Copy, Debug)]
struct Limits {
    capacity: f64,
    refill_per_second: f64,
    quota_limit: Option<u64>,
    spec: Option<usize>,
}

/// The key's hash: a folded multiply over its words, seeded per zone (stable across builds, as
/// the file outlives them).
fn hash_key(seed: u64, key: Key<'_>) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |x: u64| {
        let product = u128::from(x) * u128::from(K);
        (product >> 64) as u64 ^ product as u64
    };
    let mut hash = mix(seed ^ (u64::from(key.len) << 1 | u64::from(key.wide)));
    for &word in key.words {
        hash = mix(hash ^ word);
    }
    mix(hash ^ seed.rotate_left(17))
}

fn tag_of(hash: u64) -> u16 {
    (hash as u16) | 1
}

/// Releases a lock when dropped (a panic unwinding out of a call included).
struct Held<'a>(&'a AtomicU64);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        unlock(self.0);
    }
}

/// One process's handle on a zone.
pub struct Zone {
    mapping: map::Mapping,
    offsets: Offsets,
    groups: usize,
    seed: u64,
    me: u64,
    cell: usize,
    suspend_policy: SuspendPolicy,
    earliest_plausible_wall_ms: Option<f64>,
    max_keys: u64,
    defaults: KeyPolicy,
    /// This process's copies of the zone's specs, by index.
    specs: Vec<OnceCell<Arc<PeriodSpec>>>,
    /// Whether this open made the file (a restore applies only then).
    pub created: bool,
    /// What this limiter (in this process) has done, for `stats()`.
    counters: RefCell<crate::stats::Counters>,
}

// SAFETY: every access to the mapping goes through atomics.
unsafe impl Send for Zone {}

impl Zone {
    /// Opens the zone at `config.path`, making it (from `restore`, with each key's policy) if
    /// there is none. A zone made before this boot is taken over like a restore.
    pub fn open(
        config: &ZoneConfig,
        restore: Option<(&Snapshot, &[KeyPolicy])>,
    ) -> Result<Zone, ZoneError> {
        let mine = options_image(config);
        for _ in 0..8 {
            if let Some(mapping) = map::open_existing(&config.path)? {
                return Zone::attach(config, &mine, mapping, false);
            }
            let groups = groups_for(config.max_keys);
            let offsets = usize::try_from(groups)
                .ok()
                .and_then(Offsets::new)
                .filter(|offsets| offsets.file_size as u64 <= 1 << 46)
                .ok_or_else(|| {
                    ZoneError::invalid(format!(
                        "maxKeys {} makes a zone file too large to map",
                        config.max_keys
                    ))
                })?;
            let (mapping, temporary) =
                map::create_temporary(&config.path, offsets.file_size, offsets.long_keys)?;
            map::write_header(
                &mapping,
                Header {
                    magic: 0,
                    version: 0,
                    layout: 0,
                    file_size: offsets.file_size as u64,
                    groups,
                    seed: seed(),
                    options: mine,
                    checksum: 0,
                    boot_id: Default::default(),
                    init_lock: AtomicU64::new(0),
                    held: AtomicU64::new(0),
                    cursor: AtomicU64::new(0),
                    recon_head: AtomicU64::new(0),
                    takeovers: AtomicU64::new(0),
                },
            );
            let mut zone = Zone::handle(config, mapping, offsets)?;
            zone.initialize(restore);
            if map::publish(&temporary, &config.path)? {
                zone.created = true;
                return Ok(zone);
            }
            // Another process made it first: open theirs.
        }
        Err(ZoneError::invalid(format!(
            "zone.path {:?} kept changing while it was opened",
            config.path
        )))
    }

    fn handle(
        config: &ZoneConfig,
        mapping: map::Mapping,
        offsets: Offsets,
    ) -> Result<Zone, ZoneError> {
        // SAFETY: the mapping holds a checked header at its start.
        let header = unsafe { &*mapping.base.as_ptr().cast::<Header>() };
        let mut zone = Zone {
            groups: header.groups as usize,
            seed: header.seed,
            mapping,
            offsets,
            me: owner_id(),
            cell: usize::MAX,
            suspend_policy: config.suspend_policy,
            earliest_plausible_wall_ms: config.earliest_plausible_wall_ms,
            max_keys: config.max_keys,
            defaults: config.defaults.clone(),
            specs: (0..SPECS).map(|_| OnceCell::new()).collect(),
            created: false,
            counters: RefCell::default(),
        };
        zone.cell = zone.claim_cell().ok_or_else(|| {
            ZoneError::invalid(format!(
                "zone.path {:?}: {CELLS} limiters already have it open",
                config.path
            ))
        })?;
        Ok(zone)
    }

    fn attach(
        config: &ZoneConfig,
        mine: &OptionsImage,
        mapping: map::Mapping,
        created: bool,
    ) -> Result<Zone, ZoneError> {
        // SAFETY: `open_existing` checked the header.
        let header = unsafe { &*mapping.base.as_ptr().cast::<Header>() };
        if let Some(option) = first_difference(&header.options, mine) {
            return Err(ZoneError {
                code: "ERR_ZONE_MISMATCH",
                message: format!(
                    "zone.path {:?} was made with {option} {}; this limiter has {option} {} (every process opening a zone must pass the options it was made with)",
                    config.path,
                    option_value(option, &header.options),
                    option_value(option, mine),
                ),
            });
        }
        let offsets = Offsets::new(header.groups as usize)
            .ok_or_else(|| ZoneError::invalid("zone header".into()))?;
        let mut zone = Zone::handle(config, mapping, offsets)?;
        zone.created = created;
        if !zone.spec_table_is_whole() {
            return Err(ZoneError::invalid(format!(
                "zone.path {:?} is not a zone file: its header is a zone's, but its body is not (its quota period table is corrupt)",
                config.path
            )));
        }
        {
            let _init = zone.lock_init();
            if zone.header_boot_id() != map::boot_id() {
                zone.take_over_after_reboot();
            }
        }
        Ok(zone)
    }

    // ---- the mapping's regions -------------------------------------------------------------

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a header (checked or written at open).
        unsafe { &*self.mapping.base.as_ptr().cast::<Header>() }
    }

    fn at<T>(&self, offset: usize) -> &T {
        debug_assert!(offset + std::mem::size_of::<T>() <= self.mapping.len);
        // SAFETY: offsets come from `Offsets` for this file's size; every T here is atomics.
        unsafe { &*self.mapping.base.as_ptr().add(offset).cast::<T>() }
    }

    fn cell_at(&self, index: usize) -> &Cell {
        self.at(self.offsets.cells + index * std::mem::size_of::<Cell>())
    }

    fn spec_entry(&self, index: usize) -> &SpecEntry {
        self.at(self.offsets.specs + index * std::mem::size_of::<SpecEntry>())
    }

    fn group(&self, index: usize) -> &Group {
        self.at(self.offsets.groups + index * std::mem::size_of::<Group>())
    }

    fn slot(&self, group: usize, slot: usize) -> &Slot {
        self.at(self.offsets.slots + (group * GROUP_SLOTS + slot) * std::mem::size_of::<Slot>())
    }

    fn long_key(&self, group: usize, slot: usize) -> &[AtomicU64; LONG_KEY_BYTES / 8] {
        self.at(self.offsets.long_keys + (group * GROUP_SLOTS + slot) * LONG_KEY_BYTES)
    }

    fn recon_slot(&self, index: u64) -> &ReconSlot {
        let index = index as usize;
        &self.cell_at((index / 2) % CELLS).slots[index % 2]
    }

    fn header_boot_id(&self) -> [u8; 48] {
        let mut id = [0u8; 48];
        for (chunk, word) in id.chunks_mut(8).zip(&self.header().boot_id) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        id
    }

    fn lock_init(&self) -> Held<'_> {
        lock(&self.header().init_lock, self.me);
        Held(&self.header().init_lock)
    }

    // ---- opening ---------------------------------------------------------------------------

    fn claim_cell(&self) -> Option<usize> {
        for index in 0..CELLS {
            let owner = &self.cell_at(index).owner;
            let current = owner.load(Ordering::Relaxed);
            let free = current == 0 || !lock::owner_alive(current);
            if free
                && owner
                    .compare_exchange(current, self.me, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(index);
            }
        }
        None
    }

    /// A new file's first state: readings, the default spec, the restored keys.
    fn initialize(&self, restore: Option<(&Snapshot, &[KeyPolicy])>) {
        self.store_boot_id();
        let state = ReconState::fresh(
            clock::monotonic_ms(),
            clock::wall_ms(),
            self.header().options.reader != 0,
        );
        self.publish_fresh(state);
        let defaults = self.defaults.clone();
        if let Some(quota) = &defaults.quota {
            let _ = self.spec_index(&quota.spec);
        }
        if let Some((snapshot, policies)) = restore {
            for (position, saved) in snapshot.keys.iter().enumerate() {
                let policy = policies.get(position).unwrap_or(&defaults).clone();
                let saved_period = saved
                    .spec
                    .and_then(|spec| snapshot.specs.get(spec as usize));
                let key = snapshot.key(position);
                let Ok(spec) = policy
                    .quota
                    .as_ref()
                    .map(|quota| self.spec_index(&quota.spec))
                    .transpose()
                else {
                    continue;
                };
                let (quota_used, period_slot) = match spec {
                    None => (0, NO_SLOT),
                    Some(spec) => {
                        let period = self.period_now(spec, state.last_wall_ms);
                        let kept = saved_period.is_some_and(|saved_spec| {
                            let open_id = self.period_id(spec, period.start_ms);
                            saved_spec.spec.identity() == self.local_spec(spec).identity()
                                && Some(saved_spec.period_id.as_str()) == open_id.as_deref()
                        });
                        (if kept { saved.quota_used } else { 0 }, period.slot)
                    }
                };
                let state = KeyState {
                    tokens: saved.tokens.min(policy.capacity),
                    credited_at_ms: 0.0,
                    quota_used,
                    period_slot,
                };
                self.restore_key(key, &policy, spec, state);
            }
        }
    }

    fn store_boot_id(&self) {
        let id = map::boot_id();
        for (chunk, word) in id.chunks(8).zip(&self.header().boot_id) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
    }

    fn publish_fresh(&self, state: ReconState) {
        let index = (self.cell * 2) as u64;
        state.store(self.recon_slot(index));
        let generation = (self.header().recon_head.load(Ordering::Relaxed) >> 16) + 1;
        self.header()
            .recon_head
            .store(generation << 16 | index, Ordering::Release);
    }

    /// A zone written before this boot: its locks' owners and its readings belong to a boot
    /// that is gone. Taken over like a restore: tokens kept (no refill for the time down),
    /// quota use kept only in a period still open now. Runs under the init lock; redone whole
    /// if its process dies (the boot id is written last).
    fn take_over_after_reboot(&self) {
        let state = ReconState::fresh(
            clock::monotonic_ms(),
            clock::wall_ms(),
            self.header().options.reader != 0,
        );
        for index in 0..CELLS {
            if index != self.cell {
                self.cell_at(index).owner.store(0, Ordering::Relaxed);
            }
        }
        self.publish_fresh(state);
        let mut periods = vec![None; SPECS];
        for (spec, period) in periods.iter_mut().enumerate() {
            let entry = self.spec_entry(spec);
            entry.lock.store(0, Ordering::Relaxed);
            if entry.used.load(Ordering::Acquire) == 1 && self.load_spec(spec).is_some() {
                let open = PeriodState::of(
                    &self.local_spec(spec).period_for(state.last_wall_ms),
                    0,
                    0.0,
                );
                self.write_period(spec, open);
                *period = Some(open.slot);
            }
        }
        let mut held = 0;
        for group in 0..self.groups {
            let header = self.group(group);
            header.lock.store(0, Ordering::Relaxed);
            header.intent.store(0, Ordering::Relaxed);
            for slot in 0..GROUP_SLOTS {
                if header.tags[slot].load(Ordering::Relaxed) == 0 {
                    continue;
                }
                held += 1;
                let record = self.slot(group, slot);
                let limits = self.limits_of(record);
                let mut state = read_state(record);
                state.credited_at_ms = 0.0;
                let open = limits.spec.and_then(|spec| periods[spec]);
                if open != Some(state.period_slot) {
                    state.quota_used = 0;
                    state.period_slot = open.unwrap_or(NO_SLOT);
                }
                write_state(record, state);
            }
        }
        self.header().held.store(held, Ordering::Relaxed);
        self.store_boot_id();
    }

    // ---- keys ------------------------------------------------------------------------------

    /// A key's two groups (two choices: the less loaded takes a new key, so a group is
    /// practically never full before the zone is).
    fn groups_of(&self, hash: u64) -> (usize, usize) {
        let pick = |bits: u64| ((u128::from(bits) * self.groups as u128) >> 64) as usize;
        let first = pick(hash);
        let mut second = pick(hash.rotate_left(32).wrapping_mul(0x2545_f491_4f6c_dd1d));
        if second == first && self.groups > 1 {
            second = (first + 1) % self.groups;
        }
        (first, second)
    }

    fn has_tag(&self, group: usize, hash: u64) -> bool {
        let tag = tag_of(hash);
        self.group(group)
            .tags
            .iter()
            .any(|stored| stored.load(Ordering::Relaxed) == tag)
    }

    fn free_slots(&self, group: usize) -> usize {
        self.group(group)
            .tags
            .iter()
            .filter(|stored| stored.load(Ordering::Relaxed) == 0)
            .count()
    }

    fn lock_group(&self, group: usize) -> Held<'_> {
        let header = self.group(group);
        if lock(&header.lock, self.me) == Acquired::TakenOver {
            self.header().takeovers.fetch_add(1, Ordering::Relaxed);
            self.repair_group(group);
        }
        Held(&header.lock)
    }

    /// After a takeover: a key being added when its process died is either in (its tag
    /// published) or not; its reservation in `held` is given back if it is not.
    fn repair_group(&self, group: usize) {
        let header = self.group(group);
        let intent = header.intent.load(Ordering::Relaxed);
        if intent == 0 {
            return;
        }
        let slot = ((intent & 0xffff_ffff) - 1) as usize;
        let published = slot < GROUP_SLOTS && header.tags[slot].load(Ordering::Relaxed) != 0;
        if !published && intent & INTENT_RESERVED != 0 {
            self.header().held.fetch_sub(1, Ordering::Relaxed);
        }
        header.intent.store(0, Ordering::Relaxed);
    }

    /// The slot of `key` in `group` (its lock held).
    fn find_in(&self, group: usize, key: Key<'_>, hash: u64) -> Option<usize> {
        let header = self.group(group);
        let tag = tag_of(hash);
        (0..GROUP_SLOTS).find(|&slot| {
            header.tags[slot].load(Ordering::Relaxed) == tag && self.holds(group, slot, key, hash)
        })
    }

    fn holds(&self, group: usize, slot: usize, key: Key<'_>, hash: u64) -> bool {
        let record = self.slot(group, slot);
        let meta = record.meta.load(Ordering::Relaxed);
        if record.hash.load(Ordering::Relaxed) != hash
            || meta & 0xffff != u64::from(key.len)
            || (meta & META_WIDE != 0) != key.wide
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

    fn key_at(&self, group: usize, slot: usize) -> KeyBuf {
        let record = self.slot(group, slot);
        let meta = record.meta.load(Ordering::Relaxed);
        let len = (meta & 0xffff) as u16;
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
            wide: meta & META_WIDE != 0,
            len,
            words,
        }
    }

    fn limits_of(&self, record: &Slot) -> Limits {
        let meta = record.meta.load(Ordering::Relaxed);
        let spec = ((meta >> 24) & 0xff) as usize;
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

    /// Whether dropping the key changes no later decision (full bucket, no use in its period
    /// as it would be after `wall_ms`), and whether it has quota use.
    fn judge(&self, group: usize, slot: usize, timeline_ms: f64, wall_ms: f64) -> (bool, bool) {
        let record = self.slot(group, slot);
        let limits = self.limits_of(record);
        let state = read_state(record);
        let tokens = refilled(
            state.tokens,
            timeline_ms - state.credited_at_ms,
            limits.refill_per_second,
            limits.capacity,
        );
        let has_use = state.quota_used > 0
            && limits.spec.is_some_and(|spec| {
                state.period_slot == self.slot_after(spec, wall_ms, timeline_ms)
            });
        (tokens >= limits.capacity && !has_use, has_use)
    }

    /// Drops the key in (`group`, `slot`) to make room, the group's lock held (an eviction).
    fn evict(&self, group: usize, slot: usize) {
        self.remove(group, slot);
        self.counters.borrow_mut().evicted += 1;
    }

    /// Drops the key in (`group`, `slot`), the group's lock held.
    fn remove(&self, group: usize, slot: usize) {
        self.group(group).tags[slot].store(0, Ordering::Release);
        self.header().held.fetch_sub(1, Ordering::Relaxed);
    }

    /// The key to drop in `group` (locked) so a new key fits: an idle key, else the least
    /// recently used one without quota use.
    fn victim_in(&self, group: usize, timeline_ms: f64, wall_ms: f64) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        for slot in 0..GROUP_SLOTS {
            if self.group(group).tags[slot].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let (idle, has_use) = self.judge(group, slot, timeline_ms, wall_ms);
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
    fn make_room(&self, own: usize, timeline_ms: f64, wall_ms: f64) -> bool {
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
    fn try_make_room(&self, own: usize, timeline_ms: f64, wall_ms: f64) -> Option<bool> {
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
                    Some(_) => Some(Held(&self.group(group).lock)),
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
            Some(Held(&self.group(group).lock))
        };
        // Still the same key, still without use?
        let tags = &self.group(group).tags[slot];
        if tags.load(Ordering::Relaxed) != tag_of(hash)
            || self.slot(group, slot).hash.load(Ordering::Relaxed) != hash
            || self.judge(group, slot, timeline_ms, wall_ms).1
        {
            return None;
        }
        self.evict(group, slot);
        Some(true)
    }

    fn write_identity(
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
        record
            .capacity
            .store(policy.capacity.to_bits(), Ordering::Relaxed);
        record
            .refill_per_second
            .store(policy.refill_per_second.to_bits(), Ordering::Relaxed);
        record.quota_limit.store(
            policy.quota.as_ref().map_or(NO_LIMIT, |quota| quota.limit),
            Ordering::Relaxed,
        );
        let spec_bits = spec.map_or(0, |spec| spec as u64 + 1) << 24;
        record.meta.store(
            u64::from(key.len) | if key.wide { META_WIDE } else { 0 } | spec_bits,
            Ordering::Relaxed,
        );
    }

    /// Adds a restored key (at creation, before any other process sees the file).
    fn restore_key(&self, key: Key<'_>, policy: &KeyPolicy, spec: Option<usize>, state: KeyState) {
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

    /// `tryConsume`, `refund` or `status` of `key`. `policy`: what `policy(key)` returned
    /// (`None` with `has_policy`: the zone asks for it when the key is not held); `count`
    /// checks `n` against the key's capacity (before any reading).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn call(
        &self,
        key: Key<'_>,
        operation: Operation,
        n: u64,
        policy: Option<&KeyPolicy>,
        has_policy: bool,
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let first = anomalies.len();
        let outcome = self.call_inner(key, operation, n, policy, has_policy, count, anomalies);
        let mut counters = self.counters.borrow_mut();
        counters.count_anomalies(&anomalies[first.min(anomalies.len())..]);
        match &outcome {
            Ok(Outcome::Decided(decision, _)) if decision.allowed => counters.allowed += 1,
            Ok(Outcome::Decided(..)) => counters.denied += 1,
            Err(Error::KeyLimit { .. }) => counters.key_limit_refusals += 1,
            _ => {}
        }
        outcome
    }

    /// What this limiter has done since it was opened (in this process).
    pub fn counters(&self) -> crate::stats::Counters {
        *self.counters.borrow()
    }

    #[allow(clippy::too_many_arguments)]
    fn call_inner(
        &self,
        key: Key<'_>,
        operation: Operation,
        n: u64,
        policy: Option<&KeyPolicy>,
        has_policy: bool,
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        // The usual call: the key is in one of its two groups (found by its tag, then checked
        // under that group's lock).
        for group in [first, second] {
            if !self.has_tag(group, hash) {
                continue;
            }
            let guard = self.lock_group(group);
            if let Some(slot) = self.find_in(group, key, hash) {
                let outcome = self.call_held(group, slot, operation, n, count, anomalies);
                drop(guard);
                return outcome;
            }
            drop(guard);
            if first == second {
                break;
            }
        }
        // Not found without the locks: under both (in group order), the key's membership is
        // settled, as only a holder of both adds it.
        let (low, high) = (first.min(second), first.max(second));
        let low_guard = self.lock_group(low);
        let high_guard = (high != low).then(|| self.lock_group(high));
        for group in [low, high] {
            if let Some(slot) = self.find_in(group, key, hash) {
                let outcome = self.call_held(group, slot, operation, n, count, anomalies);
                drop(high_guard);
                drop(low_guard);
                return outcome;
            }
        }
        let group = if self.free_slots(second) > self.free_slots(first) {
            second
        } else {
            first
        };
        let guard = (low_guard, high_guard);
        if operation == Operation::Refund {
            drop(guard);
            self.reconcile_with(false, anomalies)?;
            return Ok(Outcome::Refunded);
        }
        let policy = match policy {
            Some(policy) => policy.clone(),
            None if has_policy => return Ok(Outcome::NeedsPolicy),
            None => self.defaults.clone(),
        };
        let spec = policy
            .quota
            .as_ref()
            .map(|quota| self.spec_index(&quota.spec))
            .transpose()?;
        if operation == Operation::Status {
            drop(guard);
            let (pending, generation) = self.reconcile_with(spec.is_some(), anomalies)?;
            let period = spec.map(|spec| {
                self.observe(
                    spec,
                    pending.wall_ms,
                    pending.next.timeline_ms,
                    pending.deltas,
                    generation,
                    anomalies,
                )
            });
            return Ok(Outcome::Status(self.status_of(
                &policy_limits(&policy, spec),
                policy.initial_tokens,
                0,
                spec,
                period,
            )));
        }
        let n = count(policy.capacity)?;
        let outcome = self.hold_new(group, key, hash, &policy, spec, n, anomalies);
        drop(guard);
        outcome
    }

    /// Reserves room for a new key in `group` (locked) on `pending`'s readings: a free slot
    /// (or one made in a full group) and a count in `held` (or a key dropped elsewhere).
    fn room_for(&self, group: usize, pending: &Pending) -> Result<usize, Error> {
        let max_keys = self.max_keys;
        let timeline_ms = pending.next.timeline_ms;
        let wall_ms = pending.wall_ms;
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
            header.intent.store(slot as u64 + 1, Ordering::Relaxed);
            if counted.fetch_add(1, Ordering::Relaxed) < max_keys {
                header
                    .intent
                    .store((slot as u64 + 1) | INTENT_RESERVED, Ordering::Release);
                return Ok(slot);
            }
            counted.fetch_sub(1, Ordering::Relaxed);
            header.intent.store(0, Ordering::Relaxed);
            if !self.make_room(group, timeline_ms, wall_ms) {
                return Err(Error::KeyLimit { max_keys });
            }
        }
    }

    fn release_reservation(&self, group: usize) {
        self.header().held.fetch_sub(1, Ordering::Relaxed);
        self.group(group).intent.store(0, Ordering::Release);
    }

    #[allow(clippy::too_many_arguments)]
    fn hold_new(
        &self,
        group: usize,
        key: Key<'_>,
        hash: u64,
        policy: &KeyPolicy,
        spec: Option<usize>,
        n: u64,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let first = anomalies.len();
        loop {
            anomalies.truncate(first);
            let prepared = self
                .prepare(spec.is_some(), anomalies)
                .and_then(|pending| Ok((pending, self.room_for(group, &pending)?)));
            let (pending, slot) = match prepared {
                Ok(prepared) => prepared,
                Err(error) => {
                    // Nothing changes: the readings are not even taken in.
                    anomalies.truncate(first);
                    return Err(error);
                }
            };
            if !self.publish(pending.head, &pending.next) {
                self.release_reservation(group);
                continue;
            }
            if pending.refused {
                self.release_reservation(group);
                return Err(refused(&pending));
            }
            let generation = (pending.head >> 16) + 1;
            let period = spec.map(|spec| {
                self.observe(
                    spec,
                    pending.wall_ms,
                    pending.next.timeline_ms,
                    pending.deltas,
                    generation,
                    anomalies,
                )
            });
            let limits = policy_limits(policy, spec);
            let mut state = KeyState {
                tokens: policy.initial_tokens,
                credited_at_ms: pending.next.timeline_ms,
                quota_used: 0,
                period_slot: period.map_or(NO_SLOT, |period| period.slot),
            };
            let decision = decide(&limits, &mut state, n, pending.wall_ms, period);
            let period_slot = state.period_slot;
            self.write_identity(group, slot, key, hash, policy, spec);
            write_state(self.slot(group, slot), state);
            let header = self.group(group);
            header.tags[slot].store(tag_of(hash), Ordering::Release);
            header.intent.store(0, Ordering::Release);
            return Ok(Outcome::Decided(decision, period_slot));
        }
    }

    /// A call on a held key (its group locked).
    fn call_held(
        &self,
        group: usize,
        slot: usize,
        operation: Operation,
        n: u64,
        count: impl FnOnce(f64) -> Result<u64, Error>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Outcome, Error> {
        let limits = self.limits_of(self.slot(group, slot));
        let n = match operation {
            Operation::Consume => count(limits.capacity)?,
            _ => n,
        };
        let (pending, generation) = self.reconcile_with(limits.spec.is_some(), anomalies)?;
        let period = limits.spec.map(|spec| {
            self.observe(
                spec,
                pending.wall_ms,
                pending.next.timeline_ms,
                pending.deltas,
                generation,
                anomalies,
            )
        });
        let record = self.slot(group, slot);
        let mut state = read_state(record);
        refresh(&limits, &mut state, pending.next.timeline_ms, period);
        match operation {
            Operation::Consume => {
                let decision = decide(&limits, &mut state, n, pending.wall_ms, period);
                write_state(record, state);
                Ok(Outcome::Decided(decision, state.period_slot))
            }
            Operation::Refund => {
                state.tokens = (state.tokens + n as f64).min(limits.capacity);
                state.quota_used = state.quota_used.saturating_sub(n);
                write_state(record, state);
                Ok(Outcome::Refunded)
            }
            Operation::Status => Ok(Outcome::Status(self.status_of(
                &limits,
                state.tokens,
                state.quota_used,
                limits.spec,
                period,
            ))),
        }
    }

    fn status_of(
        &self,
        limits: &Limits,
        tokens: f64,
        quota_used: u64,
        spec: Option<usize>,
        period: Option<PeriodState>,
    ) -> KeyStatus {
        let quota = limits.quota_limit;
        let period = spec
            .zip(period)
            .filter(|(_, period)| period.open)
            .map(|(spec, period)| {
                let mut full = self.local_spec(spec).period_for(period.start_ms);
                full.end_ms = period.end_ms;
                full
            });
        KeyStatus {
            tokens,
            quota_used: quota.map(|_| quota_used),
            quota_remaining: quota.map(|limit| limit.saturating_sub(quota_used)),
            period,
            time_zone: spec.map(|spec| self.local_spec(spec).time_zone_name()),
            capacity: limits.capacity,
            refill_per_second: limits.refill_per_second,
            quota_limit: quota,
        }
    }

    /// `delete(key)`: drops the key and all its state. Reads no clock.
    pub fn delete(&self, key: Key<'_>) -> bool {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        for group in [first, second] {
            let _guard = self.lock_group(group);
            if let Some(slot) = self.find_in(group, key, hash) {
                self.remove(group, slot);
                return true;
            }
        }
        false
    }

    /// Gives back what a decision for `key` took, reading no clock (the HTTP middleware's
    /// all-or-nothing rollback): `n` tokens, and `n` quota units if `slot` (the decision's
    /// period) is still the key's and its spec's open period.
    pub fn give_back(&self, key: Key<'_>, n: u64, slot: Option<i64>) {
        let hash = hash_key(self.seed, key);
        let (first, second) = self.groups_of(hash);
        for group in [first, second] {
            let _guard = self.lock_group(group);
            let Some(index) = self.find_in(group, key, hash) else {
                continue;
            };
            let record = self.slot(group, index);
            let limits = self.limits_of(record);
            let mut state = read_state(record);
            state.tokens = (state.tokens + n as f64).min(limits.capacity);
            let open = limits.spec.map(|spec| self.read_period(spec));
            let still_open = open.is_some_and(|open| open.open && Some(open.slot) == slot);
            if still_open && slot == Some(state.period_slot) {
                state.quota_used = state.quota_used.saturating_sub(n);
            }
            write_state(record, state);
            return;
        }
    }

    /// Locks taken over from processes that died holding them, since the zone was made.
    pub fn takeovers(&self) -> u64 {
        self.header().takeovers.load(Ordering::Relaxed)
    }

    /// Keys held now, by every process.
    pub fn len(&self) -> usize {
        self.header().held.load(Ordering::Relaxed) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every held key, least recently used first (each read under its group's lock): the key,
    /// its tokens as of the last reading, its quota use in its spec's open period, and that spec.
    pub fn keys(&self) -> Vec<HeldKey> {
        let (_, recon) = self.read_recon();
        let mut keys = Vec::new();
        for group in 0..self.groups {
            let _guard = self.lock_group(group);
            for slot in 0..GROUP_SLOTS {
                if self.group(group).tags[slot].load(Ordering::Relaxed) == 0 {
                    continue;
                }
                let record = self.slot(group, slot);
                let limits = self.limits_of(record);
                let mut state = read_state(record);
                let period = limits.spec.map(|spec| self.read_period(spec));
                let timeline_ms = recon.timeline_ms.max(state.credited_at_ms);
                refresh(&limits, &mut state, timeline_ms, period);
                let saved = match (limits.spec, period) {
                    (Some(spec), Some(period)) if period.open && state.quota_used > 0 => {
                        let local = self.specs[spec].get().cloned();
                        local.map(|local| {
                            let id = local.period_for(period.start_ms).id;
                            (local, id)
                        })
                    }
                    _ => None,
                };
                let used = if saved.is_some() { state.quota_used } else { 0 };
                keys.push(HeldKey {
                    key: self.key_at(group, slot),
                    tokens: state.tokens,
                    quota_used: used,
                    period: saved,
                    used_at_ms: read_state(record).credited_at_ms,
                });
            }
        }
        keys.sort_by(|a, b| a.used_at_ms.total_cmp(&b.used_at_ms));
        keys
    }

    /// Gives this limiter's reconciler cell back (the file and its keys stay).
    pub fn close(&self) {
        // Free at once, even when one of its slots is the published one: a next owner writes only
        // its slot that is not published, and readers check the head again after reading.
        let owner = &self.cell_at(self.cell).owner;
        let _ = owner.compare_exchange(self.me, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

impl Drop for Zone {
    fn drop(&mut self) {
        self.close();
    }
}

fn policy_limits(policy: &KeyPolicy, spec: Option<usize>) -> Limits {
    Limits {
        capacity: policy.capacity,
        refill_per_second: policy.refill_per_second,
        quota_limit: policy
            .quota
            .as_ref()
            .filter(|_| spec.is_some())
            .map(|quota: &QuotaPolicy| quota.limit),
        spec,
    }
}

/// Brings a key's state up to the timeline: refill since it was last used, and zero use if
/// its use belongs to a period that has ended.
fn refresh(limits: &Limits, state: &mut KeyState, timeline_ms: f64, period: Option<PeriodState>) {
    state.tokens = refilled(
        state.tokens,
        timeline_ms - state.credited_at_ms,
        limits.refill_per_second,
        limits.capacity,
    );
    // Calls on one key are in timeline order (its group's lock is held across the
    // reconciliation), so this only moves forward.
    state.credited_at_ms = state.credited_at_ms.max(timeline_ms);
    let open_slot = period
        .filter(|period| period.open)
        .map_or(NO_SLOT, |period| period.slot);
    if state.period_slot != open_slot {
        state.period_slot = open_slot;
        state.quota_used = 0;
    }
}

/// Takes `n` if the key's bucket and quota both have it, else says how long to wait.
fn decide(
    limits: &Limits,
    state: &mut KeyState,
    n: u64,
    wall_ms: f64,
    period: Option<PeriodState>,
) -> Decision {
    let wanted = n as f64;
    let bucket_admits = state.tokens >= wanted;
    let Some(limit) = limits.quota_limit else {
        if bucket_admits {
            state.tokens -= wanted;
            return Decision::allowed(state.tokens, None);
        }
        let wait_ms = refill_wait_ms(state.tokens, wanted, limits.refill_per_second);
        return Decision::denied(wait_ms, RetryBasis::MonotonicRefill, state.tokens, None);
    };
    let quota_admits = n <= limit.saturating_sub(state.quota_used);
    if bucket_admits && quota_admits {
        state.tokens -= wanted;
        state.quota_used += n;
        return Decision::allowed(state.tokens, Some(limit.saturating_sub(state.quota_used)));
    }
    let bucket_wait_ms = if bucket_admits {
        0.0
    } else {
        refill_wait_ms(state.tokens, wanted, limits.refill_per_second)
    };
    let quota_wait_ms = (!quota_admits).then(|| {
        period
            .filter(|period| period.open)
            .map_or(0.0, |period| (period.end_ms - wall_ms).ceil().max(0.0))
    });
    let (retry_after_ms, basis) = longer_wait(bucket_wait_ms, quota_wait_ms);
    Decision::denied(
        retry_after_ms,
        basis,
        state.tokens,
        Some(limit.saturating_sub(state.quota_used)),
    )
}

fn read_state(record: &Slot) -> KeyState {
    let current = usize::from(record.meta.load(Ordering::Acquire) & META_CURRENT != 0);
    let words = &record.state[current];
    KeyState {
        tokens: f64::from_bits(words[0].load(Ordering::Relaxed)),
        credited_at_ms: f64::from_bits(words[1].load(Ordering::Relaxed)),
        quota_used: words[2].load(Ordering::Relaxed),
        period_slot: words[3].load(Ordering::Relaxed) as i64,
    }
}

/// Writes the buffer not current, then makes it current with one store: a process killed
/// between the two leaves the state before the call, after the store the state after it.
#[inline(always)]
fn write_state(record: &Slot, state: KeyState) {
    write_state_cut(record, state, WRITE_STEPS);
}

/// The stores of a key's write: four words, then the flip.
const WRITE_STEPS: usize = 5;

/// [`write_state`], making only its first `steps` stores (as a process killed after them would;
/// the model test cuts it short).
#[inline(always)]
fn write_state_cut(record: &Slot, state: KeyState, steps: usize) {
    let meta = record.meta.load(Ordering::Relaxed);
    let other = usize::from(meta & META_CURRENT == 0);
    let values = [
        state.tokens.to_bits(),
        state.credited_at_ms.to_bits(),
        state.quota_used,
        state.period_slot as u64,
    ];
    for (step, (word, value)) in record.state[other].iter().zip(values).enumerate() {
        if step == steps {
            return;
        }
        word.store(value, Ordering::Relaxed);
    }
    if steps == WRITE_STEPS {
        record.meta.store(meta ^ META_CURRENT, Ordering::Release);
    }
}

/// A zone's hash seed: random per file.
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    if let Ok(mut file) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = file.read_exact(&mut bytes);
    }
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    u64::from_le_bytes(bytes) ^ time ^ u64::from(std::process::id()).rotate_left(40)
}

impl Zone {
    /// `snapshot()` of the zone: every held key (reads no clock).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut writer = crate::keyed::SnapshotWriter::default();
        for held in self.keys() {
            let use_in = held
                .period
                .as_ref()
                .map(|(spec, id)| (spec.as_ref(), id.as_str(), held.quota_used));
            writer.key(held.key.key(), held.tokens, use_in);
        }
        writer.finish()
    }
}
