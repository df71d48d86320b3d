//! Opening a zone: a new file made whole, an existing one checked and attached to, a seat
//! claimed for this process's reconciler, the takeover after a reboot.

use super::*;
use crate::error::ErrorCode;

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

    pub(super) fn handle(
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
            seat: usize::MAX,
            rule: ReadingRule {
                suspend_policy: config.suspend_policy,
                check_plausible: false,
                earliest_plausible_wall_ms: config.earliest_plausible_wall_ms,
            },
            max_keys: config.max_keys,
            defaults: config.defaults.clone(),
            specs: (0..SPECS).map(|_| OnceCell::new()).collect(),
            created: false,
            counters: RefCell::default(),
            policy_ttl_ms: std::cell::Cell::new(None),
        };
        zone.seat = zone.claim_seat().ok_or_else(|| {
            ZoneError::invalid(format!(
                "zone.path {:?}: {SEATS} limiters already have it open",
                config.path
            ))
        })?;
        Ok(zone)
    }

    pub(super) fn attach(
        config: &ZoneConfig,
        mine: &OptionsImage,
        mapping: map::Mapping,
        created: bool,
    ) -> Result<Zone, ZoneError> {
        // SAFETY: `open_existing` checked the header.
        let header = unsafe { &*mapping.base.as_ptr().cast::<Header>() };
        if let Some(option) = first_difference(&header.options, mine) {
            return Err(ZoneError {
                code: ErrorCode::ZoneMismatch,
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

    pub(super) fn header_boot_id(&self) -> [u8; 48] {
        let mut id = [0u8; 48];
        for (chunk, word) in id.chunks_mut(8).zip(&self.header().boot_id) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        id
    }

    pub(super) fn lock_init(&self) -> LockGuard<'_> {
        lock(&self.header().init_lock, self.me);
        LockGuard(&self.header().init_lock)
    }

    // ---- opening ---------------------------------------------------------------------------

    pub(super) fn claim_seat(&self) -> Option<usize> {
        for index in 0..SEATS {
            let owner = &self.seat_at(index).owner;
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
    pub(super) fn initialize(&self, restore: Option<(&Snapshot, &[KeyPolicy])>) {
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
                        let period = self.period_now(spec, state.anchors.last_wall_ms);
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

    pub(super) fn store_boot_id(&self) {
        let id = map::boot_id();
        for (chunk, word) in id.chunks(8).zip(&self.header().boot_id) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
    }

    pub(super) fn publish_fresh(&self, state: ReconState) {
        let index = (self.seat * 2) as u64;
        state.store(self.recon_slot(index));
        let head = ReconHead(self.header().recon_head.load(Ordering::Relaxed));
        self.header()
            .recon_head
            .store(head.next(index).0, Ordering::Release);
    }

    /// A zone written before this boot: its locks' owners and its readings belong to a boot
    /// that is gone. Taken over like a restore: tokens kept (no refill for the time down),
    /// quota use kept only in a period still open now, blocks' time left kept. Runs under the init lock; redone whole
    /// if its process dies (the boot id is written last).
    pub(super) fn take_over_after_reboot(&self) {
        let old_timeline_ms = self.read_recon().1.timeline_ms;
        let state = ReconState::fresh(
            clock::monotonic_ms(),
            clock::wall_ms(),
            self.header().options.reader != 0,
        );
        for index in 0..SEATS {
            if index != self.seat {
                self.seat_at(index).owner.store(0, Ordering::Relaxed);
            }
        }
        self.publish_fresh(state);
        let mut periods = vec![None; SPECS];
        for (spec, period) in periods.iter_mut().enumerate() {
            let entry = self.spec_entry(spec);
            entry.lock.store(0, Ordering::Relaxed);
            if entry.used.load(Ordering::Acquire) == 1 && self.load_spec(spec).is_some() {
                let open = PeriodState::of(
                    &self.local_spec(spec).period_for(state.anchors.last_wall_ms),
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
            header.intent.store(Intent::NONE.0, Ordering::Relaxed);
            self.rebase_blocks(group, old_timeline_ms);
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
}

/// A zone's hash seed: random per file.
pub(super) fn seed() -> u64 {
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
