//! `snapshot()` and `restore`, a versioned, checksummed little-endian image
//! of every held key (see README "Snapshot format"). Reading one validates all of it before
//! anything is built.
//!
//! ```text
//! header   "QCKS" | version u16 = 1 | flags u16 = 0 | spec count u32 | key count u32
//! spec     unit u8 | anchorDay u8 | anchorMonth u8 | zone name length u8 | anchorTime s u32 |
//!          zone name | open period id length u8 | open period id
//! key      encoding u8 (0 Latin-1, 1 UTF-16LE) | key length u16 (bytes) | key bytes |
//!          tokens f64 | quota use u64 | spec index u32 (0xFFFFFFFF: no quota use)
//! trailer  CRC-32 (IEEE) of every byte before it, u32
//! ```

use std::collections::HashSet;

use super::table::{pack, words_for, Key, KeyTable};
use super::{slot_i32, KeyPolicy, KeyedLimiter, PolicyId, DEFAULT_POLICY, NO_PERIOD};
use crate::calendar::{PeriodSpec, PeriodUnit, RawPeriodSpec};
use crate::error::Error;

const MAGIC: &[u8; 4] = b"QCKS";
pub const FORMAT_VERSION: u16 = 1;
const HEADER_BYTES: usize = 16;
const TRAILER_BYTES: usize = 4;
const NO_SPEC: u32 = u32::MAX;
/// Keys are at most 256 UTF-16 code units.
const MAX_KEY_UNITS: usize = 256;
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
/// The fewest bytes a period spec takes (its fixed fields, a zone name of 1 byte, the id's
/// length) and a key (its fixed fields and a key of 1 byte).
const MIN_SPEC_BYTES: u64 = 4 + 4 + 1 + 1;
const MIN_KEY_BYTES: u64 = 1 + 2 + 1 + 8 + 8 + 4;

/// Why a snapshot was refused (the detail of an `ERR_INVALID_OPTION` [`Error`]): `TooManyKeys`
/// names maxKeys, the rest say the bytes are not a snapshot this version can read.
#[derive(Clone, Debug, PartialEq)]
pub enum SnapshotError {
    NotASnapshot(String),
    OtherVersion(u16),
    TooManyKeys { keys: u64, max_keys: u64 },
}

impl SnapshotError {
    pub fn message(&self) -> String {
        match self {
            SnapshotError::NotASnapshot(why) => format!("restore must be a snapshot() of a KeyedQuotaClock; {why}"),
            SnapshotError::OtherVersion(version) => format!(
                "restore is a snapshot in format version {version}, and this version of quota-clock-source reads format version {FORMAT_VERSION} only"
            ),
            SnapshotError::TooManyKeys { keys, max_keys } => {
                format!("restore holds {keys} keys, more than maxKeys ({max_keys}); raise maxKeys to restore it")
            }
        }
    }
}

impl From<SnapshotError> for Error {
    fn from(error: SnapshotError) -> Error {
        Error::invalid_option(error.message())
    }
}

#[derive(Clone, Debug)]
pub struct SavedSpec {
    pub spec: PeriodSpec,
    /// The spec's open period when the snapshot was taken.
    pub period_id: String,
}

#[derive(Clone, Copy, Debug)]
pub struct SavedKey {
    wide: bool,
    key_len: u16,
    /// Where the key's words start in [`Snapshot::words`].
    word_start: u32,
    pub tokens: f64,
    pub quota_used: u64,
    /// Index into [`Snapshot::specs`] of the spec the use was saved under.
    pub spec: Option<u32>,
}

/// A snapshot read and validated, ready to restore.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Every key's words, one after the other.
    words: Vec<u64>,
    pub specs: Vec<SavedSpec>,
    /// Least recently used first.
    pub keys: Vec<SavedKey>,
}

fn unit_code(unit: PeriodUnit) -> u8 {
    match unit {
        PeriodUnit::Day => 0,
        PeriodUnit::Week => 1,
        PeriodUnit::Month => 2,
        PeriodUnit::Year => 3,
    }
}

impl KeyedLimiter {
    /// `snapshot()`: every held key's tokens (as of the last reading), quota use (when it
    /// is in its spec's open period; never for a shared limiter, whose use is the store's) and
    /// period id. Reads no clock.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut saved_specs: Vec<Option<u32>> = vec![None; self.specs.len()];
        let mut spec_bytes = Vec::new();
        let mut spec_count = 0u32;
        let mut key_bytes = Vec::with_capacity(self.table.len() * 32);
        for index in self.keys_oldest_first() {
            let record = &self.table.records[index as usize];
            let policy = &self.policies[record.policy as usize];
            // The key as of the last reading (its quota use left as it is).
            let mut state = record.key_use();
            let slot = state.period_slot;
            state.refresh(
                policy.capacity,
                policy.refill_per_second,
                self.timeline_ms,
                slot,
            );
            let tokens = state.tokens;
            let mut saved_spec = NO_SPEC;
            let mut quota_used = 0;
            if let Some(quota) = policy.quota {
                let state = &self.specs[quota.spec as usize];
                if let (Some(open), true) = (
                    &state.period.open,
                    record.quota_used > 0 && self.share.is_none(),
                ) {
                    if record.period_slot == slot_i32(Some(open.slot)) {
                        quota_used = record.quota_used;
                        saved_spec = *saved_specs[quota.spec as usize].get_or_insert_with(|| {
                            let identity = state.spec.identity();
                            let zone = state.spec.time_zone_name().as_bytes();
                            spec_bytes.extend_from_slice(&[
                                unit_code(identity.unit),
                                identity.anchor_day as u8,
                                identity.anchor_month as u8,
                                zone.len() as u8,
                            ]);
                            spec_bytes.extend_from_slice(
                                &(identity.anchor_time_secs as u32).to_le_bytes(),
                            );
                            spec_bytes.extend_from_slice(zone);
                            spec_bytes.push(open.id.len() as u8);
                            spec_bytes.extend_from_slice(open.id.as_bytes());
                            spec_count += 1;
                            spec_count - 1
                        });
                    }
                }
            }
            let key = self.table.key_of(index);
            key_bytes.push(u8::from(key.wide));
            key_bytes.extend_from_slice(&key.len.to_le_bytes());
            key_bytes.extend(key.bytes());
            key_bytes.extend_from_slice(&tokens.to_le_bytes());
            key_bytes.extend_from_slice(&quota_used.to_le_bytes());
            key_bytes.extend_from_slice(&saved_spec.to_le_bytes());
        }
        let mut out =
            Vec::with_capacity(HEADER_BYTES + spec_bytes.len() + key_bytes.len() + TRAILER_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&spec_count.to_le_bytes());
        out.extend_from_slice(&(self.table.len() as u32).to_le_bytes());
        out.extend_from_slice(&spec_bytes);
        out.extend_from_slice(&key_bytes);
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// [`restore`](Self::restore) with the policies saved beside the snapshot: key `i`'s is
    /// `policies[choices[i]]` (any other choice: the defaults); those no key holds are released.
    pub fn restore_with(&mut self, snapshot: &Snapshot, policies: &[KeyPolicy], choices: &[u32]) {
        let ids: Vec<PolicyId> = policies.iter().map(|p| self.intern(p.clone())).collect();
        let choice = |&choice: &u32| ids.get(choice as usize).copied().unwrap_or(DEFAULT_POLICY);
        self.restore(snapshot, &choices.iter().map(choice).collect::<Vec<_>>());
        for id in ids {
            self.release_if_unused(id);
        }
    }

    /// Holds the snapshot's keys (on a limiter no call has been made on yet), each with its policy
    /// (`policies[i]` for key `i`; the defaults where the slice ends). Use is kept only when the
    /// key's spec now is the one it was saved under and that spec's open period has the saved id;
    /// tokens come back as saved, capped at capacity, with no refill for the time in between.
    pub fn restore(&mut self, snapshot: &Snapshot, policies: &[PolicyId]) {
        let wall_ms = self.reconciler.last_wall_ms;
        for (position, saved) in snapshot.keys.iter().enumerate() {
            let policy_id = policies.get(position).copied().unwrap_or(DEFAULT_POLICY);
            self.open_first_period(policy_id, wall_ms);
            let policy = self.policies[policy_id as usize];
            let (quota_used, period_slot) = match policy.quota {
                None => (0, NO_PERIOD),
                Some(quota) => {
                    let state = &self.specs[quota.spec as usize];
                    let kept = saved.spec.is_some_and(|spec| {
                        let saved_spec = &snapshot.specs[spec as usize];
                        saved_spec.spec.identity() == state.spec.identity()
                            && state
                                .period
                                .open
                                .as_ref()
                                .is_some_and(|open| open.id == saved_spec.period_id)
                    });
                    (
                        if kept { saved.quota_used } else { 0 },
                        slot_i32(state.period.slot()),
                    )
                }
            };
            self.policies[policy_id as usize].keys += 1;
            // A key with no bucket (a quota alone) is never short of tokens, whatever was saved.
            let tokens = if policy.capacity == f64::INFINITY {
                f64::INFINITY
            } else {
                saved.tokens.min(policy.capacity)
            };
            let mut record = KeyTable::blank(policy_id, tokens, self.timeline_ms, period_slot);
            record.quota_used = quota_used;
            let index = self.table.insert(snapshot.key(position), record);
            self.table.push_front(index, &mut self.main);
        }
    }
}

/// Reads fields off a byte slice, failing with what was being read.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], SnapshotError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| {
            SnapshotError::NotASnapshot(format!(
                "it is truncated (it ends inside {what} at byte {})",
                self.at
            ))
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self, what: &str) -> Result<u8, SnapshotError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, SnapshotError> {
        let bytes = self.take(2, what)?;
        Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, SnapshotError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, SnapshotError> {
        let mut word = [0; 8];
        word.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(word))
    }

    fn text(&mut self, len: usize, what: &str) -> Result<&'a str, SnapshotError> {
        std::str::from_utf8(self.take(len, what)?)
            .map_err(|_| corrupt(format!("{what} is not text")))
    }
}

fn corrupt(why: String) -> SnapshotError {
    SnapshotError::NotASnapshot(format!("it is corrupt ({why})"))
}

impl Snapshot {
    /// Validates every byte: magic, version, checksum, each spec and key, no key twice, nothing
    /// left over, and no more keys than `max_keys`.
    pub fn parse(bytes: &[u8], max_keys: u64) -> Result<Snapshot, SnapshotError> {
        if bytes.len() < HEADER_BYTES + TRAILER_BYTES || &bytes[..4] != MAGIC {
            if bytes.len() >= 4 && &bytes[..4] == MAGIC {
                return Err(SnapshotError::NotASnapshot(format!(
                    "it is truncated ({} bytes, less than a header)",
                    bytes.len()
                )));
            }
            return Err(SnapshotError::NotASnapshot(format!(
                "these {} bytes do not start like one",
                bytes.len()
            )));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != FORMAT_VERSION {
            return Err(SnapshotError::OtherVersion(version));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - TRAILER_BYTES);
        let saved_checksum = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        if crc32fast::hash(body) != saved_checksum {
            return Err(SnapshotError::NotASnapshot(
                "its checksum does not match (it is truncated or corrupt)".to_owned(),
            ));
        }
        let mut reader = Reader { bytes: body, at: 6 };
        if reader.u16("the header")? != 0 {
            return Err(corrupt("unknown header flags".to_owned()));
        }
        let spec_count = reader.u32("the header")?;
        let key_count = reader.u32("the header")?;
        if u64::from(key_count) > max_keys {
            return Err(SnapshotError::TooManyKeys {
                keys: u64::from(key_count),
                max_keys,
            });
        }
        // Every allocation below is bounded by the bytes present: counts that cannot fit in them
        // are refused before anything is reserved (a 20-byte image may claim four billion keys).
        let room = (body.len() - reader.at) as u64;
        let least = u64::from(spec_count) * MIN_SPEC_BYTES + u64::from(key_count) * MIN_KEY_BYTES;
        if least > room {
            return Err(SnapshotError::NotASnapshot(format!(
                "it is truncated (its header claims {spec_count} period specs and {key_count} keys, which need at least {least} bytes; {room} follow the header)"
            )));
        }
        // A spec is written only for the keys that use it, so there are never more specs than keys.
        if spec_count > key_count {
            return Err(corrupt(format!(
                "{spec_count} period specs for {key_count} keys: a spec no key uses"
            )));
        }
        let mut specs = Vec::with_capacity(spec_count as usize);
        let mut identities = HashSet::with_capacity_and_hasher(
            spec_count as usize,
            foldhash::fast::RandomState::default(),
        );
        for position in 0..spec_count {
            let saved = read_spec(&mut reader, position)?;
            if !identities.insert(saved.spec.identity()) {
                return Err(corrupt(format!("period spec {position} is written twice")));
            }
            specs.push(saved);
        }
        drop(identities);
        let mut keys = Vec::with_capacity(key_count as usize);
        let mut words = Vec::with_capacity(key_count as usize * 2);
        let mut used_specs = vec![false; spec_count as usize];
        for position in 0..key_count {
            let key = read_key(&mut reader, position, spec_count, &mut words)?;
            if let Some(spec) = key.spec {
                used_specs[spec as usize] = true;
            }
            keys.push(key);
        }
        if reader.at != body.len() {
            return Err(corrupt(format!(
                "{} bytes after the last key",
                body.len() - reader.at
            )));
        }
        if let Some(unused) = used_specs.iter().position(|&used| !used) {
            return Err(corrupt(format!("period spec {unused} is used by no key")));
        }
        let snapshot = Snapshot { words, specs, keys };
        let mut seen = HashSet::with_capacity_and_hasher(
            snapshot.keys.len(),
            foldhash::fast::RandomState::default(),
        );
        for position in 0..snapshot.keys.len() {
            if !seen.insert(snapshot.key(position)) {
                return Err(corrupt(format!("key {position} is held twice")));
            }
        }
        drop(seen);
        Ok(snapshot)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Key `position`, least recently used first.
    pub fn key(&self, position: usize) -> Key<'_> {
        let saved = &self.keys[position];
        let start = saved.word_start as usize;
        Key {
            wide: saved.wide,
            len: saved.key_len,
            words: &self.words[start..start + words_for(usize::from(saved.key_len))],
        }
    }
}

fn read_spec(reader: &mut Reader<'_>, position: u32) -> Result<SavedSpec, SnapshotError> {
    let what = format!("period spec {position}");
    let unit = match reader.u8(&what)? {
        0 => "day",
        1 => "week",
        2 => "month",
        3 => "year",
        other => return Err(corrupt(format!("{what} has unit code {other}"))),
    };
    let anchor_day = reader.u8(&what)?;
    let anchor_month = reader.u8(&what)?;
    let zone_len = reader.u8(&what)?;
    let anchor_time_secs = reader.u32(&what)?;
    let zone = reader.text(usize::from(zone_len), &what)?;
    let id_len = reader.u8(&what)?;
    let period_id = reader.text(usize::from(id_len), &what)?.to_owned();
    if anchor_time_secs >= 86_400 {
        return Err(corrupt(format!(
            "{what} has anchor time {anchor_time_secs} s"
        )));
    }
    let anchor_time = format!(
        "{:02}:{:02}:{:02}",
        anchor_time_secs / 3600,
        anchor_time_secs / 60 % 60,
        anchor_time_secs % 60
    );
    let raw = RawPeriodSpec {
        unit,
        time_zone: zone,
        anchor_day: (anchor_day > 0).then_some(f64::from(anchor_day)),
        anchor_month: (anchor_month > 0).then_some(f64::from(anchor_month)),
        anchor_time: Some(&anchor_time),
    };
    let spec = PeriodSpec::parse(&raw, "restore")
        .map_err(|error| corrupt(format!("{what}: {}", error)))?;
    Ok(SavedSpec { spec, period_id })
}

fn read_key(
    reader: &mut Reader<'_>,
    position: u32,
    spec_count: u32,
    words: &mut Vec<u64>,
) -> Result<SavedKey, SnapshotError> {
    let what = format!("key {position}");
    let wide = match reader.u8(&what)? {
        0 => false,
        1 => true,
        other => return Err(corrupt(format!("{what} has encoding {other}"))),
    };
    let key_len = reader.u16(&what)?;
    let bytes = reader.take(usize::from(key_len), &what)?;
    let units = if wide { bytes.len() / 2 } else { bytes.len() };
    if bytes.is_empty() || !Key::is_canonical(wide, bytes) || units > MAX_KEY_UNITS {
        return Err(corrupt(format!(
            "{what} is not a key of 1 to 256 UTF-16 code units"
        )));
    }
    let word_start = words.len() as u32;
    pack(bytes, words);
    let tokens = f64::from_bits(reader.u64(&what)?);
    let quota_used = reader.u64(&what)?;
    let spec = reader.u32(&what)?;
    // +Infinity is the tokens of a key with no bucket (a quota alone).
    if tokens.is_nan() || tokens < 0.0 {
        return Err(corrupt(format!(
            "{what} has {} tokens",
            crate::text::js_number(tokens)
        )));
    }
    if quota_used > MAX_SAFE_INTEGER
        || (spec == NO_SPEC) != (quota_used == 0)
        || (spec != NO_SPEC && spec >= spec_count)
    {
        return Err(corrupt(format!(
            "{what} has quota use {quota_used} under spec {spec}"
        )));
    }
    Ok(SavedKey {
        wide,
        key_len,
        word_start,
        tokens,
        quota_used,
        spec: (spec != NO_SPEC).then_some(spec),
    })
}

/// A snapshot built from entries rather than from a [`KeyedLimiter`] (the zone's `snapshot()`):
/// the same format, keys in the order given.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Default)]
pub struct SnapshotWriter {
    spec_bytes: Vec<u8>,
    specs: Vec<(crate::calendar::SpecIdentity, String)>,
    key_bytes: Vec<u8>,
    keys: u32,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl SnapshotWriter {
    /// Adds a key: its tokens, and its quota use in `period` (the spec and its open period's id).
    pub fn key(&mut self, key: Key<'_>, tokens: f64, use_in: Option<(&PeriodSpec, &str, u64)>) {
        let mut saved_spec = NO_SPEC;
        let mut quota_used = 0;
        if let Some((spec, period_id, used)) = use_in.filter(|(_, _, used)| *used > 0) {
            let identity = spec.identity();
            let known = self
                .specs
                .iter()
                .position(|(other, id)| *other == identity && id == period_id);
            saved_spec = match known {
                Some(index) => index as u32,
                None => {
                    let zone = spec.time_zone_name().as_bytes();
                    self.spec_bytes.extend_from_slice(&[
                        unit_code(identity.unit),
                        identity.anchor_day as u8,
                        identity.anchor_month as u8,
                        zone.len() as u8,
                    ]);
                    self.spec_bytes
                        .extend_from_slice(&(identity.anchor_time_secs as u32).to_le_bytes());
                    self.spec_bytes.extend_from_slice(zone);
                    self.spec_bytes.push(period_id.len() as u8);
                    self.spec_bytes.extend_from_slice(period_id.as_bytes());
                    self.specs.push((identity, period_id.to_owned()));
                    (self.specs.len() - 1) as u32
                }
            };
            quota_used = used;
        }
        self.key_bytes.push(u8::from(key.wide));
        self.key_bytes.extend_from_slice(&key.len.to_le_bytes());
        self.key_bytes.extend(key.bytes());
        self.key_bytes.extend_from_slice(&tokens.to_le_bytes());
        self.key_bytes.extend_from_slice(&quota_used.to_le_bytes());
        self.key_bytes.extend_from_slice(&saved_spec.to_le_bytes());
        self.keys += 1;
    }

    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            HEADER_BYTES + self.spec_bytes.len() + self.key_bytes.len() + TRAILER_BYTES,
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&(self.specs.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.keys.to_le_bytes());
        out.extend_from_slice(&self.spec_bytes);
        out.extend_from_slice(&self.key_bytes);
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }
}
