//! The zone's period specs: their identity bytes in the file, and each spec's open period,
//! double-buffered, read without a lock and changed under the spec's lock.

use std::borrow::Cow;

use super::*;
use crate::calendar::{inside_period, PeriodSlot};
use crate::quota::{OpenPeriod, PeriodView, Transition};

/// A spec's open period as stored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct PeriodState {
    pub(super) open: bool,
    pub(super) slot: PeriodSlot,
    pub(super) start_ms: f64,
    pub(super) end_ms: f64,
    pub(super) start_kind: u64,
    pub(super) regression_reported: bool,
    /// The reconciler generation of the call that last changed it.
    pub(super) observed_at: u64,
    /// The timeline when the period was entered: a backwards hold ends once the period's own
    /// length has been credited since.
    pub(super) entered_at_ms: f64,
}

impl PeriodState {
    pub(super) const CLOSED: PeriodState = PeriodState {
        open: false,
        slot: NO_SLOT,
        start_ms: 0.0,
        end_ms: 0.0,
        start_kind: 0,
        regression_reported: false,
        observed_at: 0,
        entered_at_ms: 0.0,
    };

    pub(super) fn of(period: &Period, observed_at: u64, entered_at_ms: f64) -> PeriodState {
        PeriodState {
            open: true,
            slot: period.slot,
            start_ms: period.start_ms,
            end_ms: period.end_ms,
            start_kind: match period.start_kind {
                StartKind::Exact => 0,
                StartKind::Gap => 1,
                StartKind::Repeat => 2,
            },
            regression_reported: false,
            observed_at,
            entered_at_ms,
        }
    }

    /// What the period rule reads of it (`None`: no period is open).
    pub(super) fn view(&self) -> Option<PeriodView> {
        self.open.then_some(PeriodView {
            slot: self.slot,
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            regression_reported: self.regression_reported,
            entered_at_ms: self.entered_at_ms,
        })
    }

    pub(super) fn contains(&self, wall_ms: f64) -> bool {
        self.open && inside_period(wall_ms, self.start_ms, self.end_ms)
    }

    pub(super) fn store(&self, words: &[AtomicU64; layout::PERIOD_WORDS]) {
        let values = [
            u64::from(self.open),
            self.slot.0 as u64,
            self.start_ms.to_bits(),
            self.end_ms.to_bits(),
            self.start_kind,
            u64::from(self.regression_reported),
            self.observed_at,
            self.entered_at_ms.to_bits(),
        ];
        for (word, value) in words.iter().zip(values) {
            word.store(value, Ordering::Relaxed);
        }
    }

    pub(super) fn load(words: &[AtomicU64; layout::PERIOD_WORDS]) -> PeriodState {
        let word = |i: usize| words[i].load(Ordering::Relaxed);
        PeriodState {
            open: word(0) != 0,
            slot: PeriodSlot(word(1) as i64),
            start_ms: f64::from_bits(word(2)),
            end_ms: f64::from_bits(word(3)),
            start_kind: word(4),
            regression_reported: word(5) != 0,
            observed_at: word(6),
            entered_at_ms: f64::from_bits(word(7)),
        }
    }
}

/// The identity bytes of a spec (unit, anchors, anchor time, zone name), as the zone stores it.
pub(super) fn spec_identity_bytes(spec: &PeriodSpec) -> [u8; SPEC_IDENTITY_BYTES] {
    let identity = spec.identity();
    let mut bytes = [0u8; SPEC_IDENTITY_BYTES];
    bytes[0] = 1 + identity.unit as u8;
    bytes[1] = identity.anchor_day as u8;
    bytes[2] = identity.anchor_month as u8;
    bytes[4..8].copy_from_slice(&(identity.anchor_time_secs as u32).to_le_bytes());
    let name = spec.time_zone_name().as_bytes();
    let len = name.len().min(SPEC_IDENTITY_BYTES - 9);
    bytes[8] = len as u8;
    bytes[9..9 + len].copy_from_slice(&name[..len]);
    bytes
}

/// A spec back from its identity bytes (`None`: not a spec this build can read).
pub(super) fn spec_from_identity(bytes: &[u8; SPEC_IDENTITY_BYTES]) -> Option<PeriodSpec> {
    let unit = match bytes[0] {
        1 => "day",
        2 => "week",
        3 => "month",
        4 => "year",
        _ => return None,
    };
    let secs = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let len = usize::from(bytes[8]).min(SPEC_IDENTITY_BYTES - 9);
    let zone = std::str::from_utf8(&bytes[9..9 + len]).ok()?;
    let anchor_time = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    let raw = RawPeriodSpec {
        unit,
        time_zone: zone,
        anchor_day: (unit != "day").then_some(f64::from(bytes[1])),
        anchor_month: (unit == "year").then_some(f64::from(bytes[2])),
        anchor_time: Some(&anchor_time),
    };
    PeriodSpec::parse(&raw, "zone").ok()
}

impl Zone {
    /// The zone's index of `spec`, added if new.
    pub(super) fn spec_index(&self, spec: &Arc<PeriodSpec>) -> Result<usize, Error> {
        let identity = spec_identity_bytes(spec);
        let known = |index: usize| {
            let _ = self.specs[index].set(spec.clone());
            Ok(index)
        };
        if let Some(index) = self.find_spec(&identity) {
            return known(index);
        }
        let _init = self.lock_init();
        if let Some(index) = self.find_spec(&identity) {
            return known(index);
        }
        for index in 0..SPECS {
            let entry = self.spec_entry(index);
            if entry.used.load(Ordering::Acquire) != 0 {
                continue;
            }
            for (word, chunk) in entry.identity.iter().zip(identity.chunks(8)) {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(chunk);
                word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            }
            entry.seq.store(0, Ordering::Relaxed);
            PeriodState::CLOSED.store(&entry.periods[0]);
            PeriodState::CLOSED.store(&entry.periods[1]);
            entry.used.store(1, Ordering::Release);
            let _ = self.specs[index].set(spec.clone());
            return Ok(index);
        }
        Err(Error::invalid_option(format!(
            "a zone holds at most {SPECS} distinct quota period specs (the limiter's and its policies')"
        )))
    }

    /// Whether every entry of the period spec table is free (0) or in use (1), as a zone writes
    /// them: anything else is a body that is not a zone's (random bytes after a valid header).
    pub(super) fn spec_table_is_whole(&self) -> bool {
        (0..SPECS).all(|index| self.spec_entry(index).used.load(Ordering::Acquire) <= 1)
    }

    pub(super) fn find_spec(&self, identity: &[u8; SPEC_IDENTITY_BYTES]) -> Option<usize> {
        (0..SPECS).find(|&index| {
            let entry = self.spec_entry(index);
            entry.used.load(Ordering::Acquire) == 1 && self.identity_of(index) == *identity
        })
    }

    pub(super) fn identity_of(&self, index: usize) -> [u8; SPEC_IDENTITY_BYTES] {
        let mut identity = [0u8; SPEC_IDENTITY_BYTES];
        for (chunk, word) in identity.chunks_mut(8).zip(&self.spec_entry(index).identity) {
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        identity
    }

    /// This process's copy of spec `index` (made from its identity the first time).
    pub(super) fn load_spec(&self, index: usize) -> Option<&Arc<PeriodSpec>> {
        if let Some(spec) = self.specs[index].get() {
            return Some(spec);
        }
        let spec = spec_from_identity(&self.identity_of(index))?;
        Some(self.specs[index].get_or_init(|| Arc::new(spec)))
    }

    pub(super) fn local_spec(&self, index: usize) -> &PeriodSpec {
        // Loaded by `limits_of`/`spec_index` before any use.
        self.specs[index]
            .get()
            .expect("a spec is loaded before it is used")
    }

    pub(super) fn read_period(&self, spec: usize) -> PeriodState {
        let entry = self.spec_entry(spec);
        loop {
            let seq = entry.seq.load(Ordering::Acquire);
            let state = PeriodState::load(&entry.periods[(seq & 1) as usize]);
            fence(Ordering::Acquire);
            if entry.seq.load(Ordering::Relaxed) == seq {
                return state;
            }
        }
    }

    /// Writes the buffer not current and makes it current (the spec's lock held).
    pub(super) fn write_period(&self, spec: usize, state: PeriodState) {
        let entry = self.spec_entry(spec);
        let seq = entry.seq.load(Ordering::Relaxed);
        fence(Ordering::Release);
        state.store(&entry.periods[((seq + 1) & 1) as usize]);
        entry.seq.store(seq + 1, Ordering::Release);
    }

    /// The period that holds `wall_ms` by the spec (without observing it).
    pub(super) fn period_now(&self, spec: usize, wall_ms: f64) -> PeriodState {
        let open = self.read_period(spec);
        if open.contains(wall_ms) {
            return open;
        }
        PeriodState::of(&self.local_spec(spec).period_for(wall_ms), 0, 0.0)
    }

    pub(super) fn period_id(&self, spec: usize, start_ms: f64) -> Option<String> {
        Some(self.local_spec(spec).period_for(start_ms).id)
    }

    /// The slot that would be open after a call reading `wall_ms` (for judging eviction).
    pub(super) fn slot_after(&self, spec: usize, wall_ms: f64, timeline_ms: f64) -> PeriodSlot {
        let open = self.read_period(spec);
        OpenPeriod::slot_after(open.view(), self.local_spec(spec), wall_ms, timeline_ms)
    }

    /// Makes the spec's open period the right one for `wall_ms` (or holds it) by the period rule
    /// (`OpenPeriod::next`), raising the period anomalies once for the zone. A call older than
    /// the last change (`generation`) does not move it. Returns the open period.
    pub(super) fn observe(
        &self,
        spec: usize,
        wall_ms: f64,
        timeline_ms: f64,
        deltas: CallDeltas,
        generation: u64,
        anomalies: &mut Vec<Anomaly>,
    ) -> PeriodState {
        let seen = self.read_period(spec);
        if (seen.contains(wall_ms) && !seen.regression_reported)
            || (seen.open && generation <= seen.observed_at)
        {
            return seen;
        }
        let entry = self.spec_entry(spec);
        let _held = self.lock_spec(entry);
        let current = self.read_period(spec);
        if current.open && generation <= current.observed_at {
            return current;
        }
        let local = self.local_spec(spec);
        let view = current.view();
        let transition = OpenPeriod::next(view, local, wall_ms, timeline_ms);
        if let Some(view) = view {
            let open = || Cow::Owned(local.period_for(current.start_ms));
            if let Some(anomaly) = transition.anomaly(local, &view, open, wall_ms, deltas) {
                anomalies.push(anomaly);
            }
        }
        let changed = match transition {
            Transition::Held { report: false } | Transition::Stay => return current,
            Transition::Inside => PeriodState {
                regression_reported: false,
                observed_at: generation,
                ..current
            },
            Transition::Held { report: true } => PeriodState {
                regression_reported: true,
                observed_at: generation,
                ..current
            },
            Transition::Open(next)
            | Transition::HoldEnded { next, .. }
            | Transition::Advance(next) => PeriodState::of(&next, generation, timeline_ms),
        };
        self.write_period(spec, changed);
        changed
    }

    pub(super) fn lock_spec<'a>(&self, entry: &'a SpecEntry) -> LockGuard<'a> {
        if lock(&entry.lock, self.me) == Acquired::TakenOver {
            self.header().takeovers.fetch_add(1, Ordering::Relaxed);
        }
        LockGuard(&entry.lock)
    }
}
