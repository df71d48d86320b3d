//! The zone file's layout: a header, the reconciler's writer seats, the period specs' table,
//! then the key table (groups of slots, and an out-of-line area for keys longer than a slot
//! holds). Every shared word is an atomic: other processes read and write the same memory.

use std::sync::atomic::{AtomicU16, AtomicU64};

pub const MAGIC: u64 = u64::from_le_bytes(*b"QCSZONE\0");
pub const VERSION: u32 = 3;

/// Slots per group: a key lives in the group its hash picks; the group's lock guards its slots.
pub const GROUP_SLOTS: usize = 32;
/// Key bytes a slot holds inline; longer keys are in the slot's out-of-line area.
pub const INLINE_KEY_BYTES: usize = 24;
/// Bytes of a slot's out-of-line key area: the longest key (256 UTF-16 code units).
pub const LONG_KEY_BYTES: usize = 512;
/// Reconciler writer seats: one per open limiter (seats of dead processes are reused).
pub const SEATS: usize = 256;
/// Words per slot of the blocks region: the block's end (timeline ms, f64 bits; 0: none), the
/// run's first denial (timeline ms, f64 bits) and the run's denials.
pub const BLOCK_WORDS: usize = 3;
/// Distinct period specs a zone holds (the limiter's own and the policies').
pub const SPECS: usize = 16;
/// Bytes of a spec's stored identity.
pub const SPEC_IDENTITY_BYTES: usize = 64;

/// A type that may live in the zone's mapping, the bound of `Zone::at`.
///
/// # Safety
/// An implementor is `#[repr(C)]`, valid for any bit pattern (a file can hold anything), has no
/// drop glue, and is shared between processes soundly: every field is an atomic, or a plain
/// field written once before the file is published by link(2) and never written after (the
/// header's identity part).
pub unsafe trait InMapping {}

// SAFETY: the plain fields before `boot_id` are written once, in the temporary file, before
// link(2) publishes it (`map::write_header`, then `map::publish`); the rest are atomics.
unsafe impl InMapping for Header {}
// SAFETY: atomics only.
unsafe impl InMapping for Seat {}
// SAFETY: atomics only.
unsafe impl InMapping for SpecEntry {}
// SAFETY: atomics, and padding no one reads.
unsafe impl InMapping for Group {}
// SAFETY: atomics only.
unsafe impl InMapping for Slot {}
// SAFETY: atomics only.
unsafe impl<const N: usize> InMapping for [AtomicU64; N] {}

/// The options every process of a zone must agree on, in the order a mismatch is reported.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionsImage {
    pub capacity: u64,
    pub refill_per_second: u64,
    pub initial_tokens: u64,
    /// `u64::MAX`: no quota.
    pub quota_limit: u64,
    pub quota_spec: [u8; SPEC_IDENTITY_BYTES],
    pub suspend_policy: u64,
    /// `u64::MAX`: the check is off; else the f64's bits.
    pub earliest_plausible_wall_ms: u64,
    pub max_keys: u64,
    /// 0: no elapsed-realtime reader; 1: CLOCK_BOOTTIME.
    pub reader: u64,
}

/// The file's first bytes. The part before `boot_id` is written once, at creation, and checked
/// by its checksum at every open.
#[repr(C)]
pub struct Header {
    pub magic: u64,
    pub version: u32,
    /// [`layout_id`] of the build that made it.
    pub layout: u32,
    pub file_size: u64,
    pub groups: u64,
    pub seed: u64,
    pub options: OptionsImage,
    /// CRC-32 of everything above.
    pub checksum: u64,
    /// /proc/sys/kernel/random/boot_id of the boot that last took the zone over (written under
    /// `init_lock`).
    pub boot_id: [AtomicU64; 6],
    /// Held while a process opens the zone (and takes it over after a reboot) or adds a spec.
    pub init_lock: AtomicU64,
    /// Keys held.
    pub held: AtomicU64,
    /// Where the search for a key to drop goes on.
    pub cursor: AtomicU64,
    /// The published reconciler state: generation (high 48 bits) and slot index (low 16 bits).
    pub recon_head: AtomicU64,
    /// Locks taken over from dead processes (for tests and operators).
    pub takeovers: AtomicU64,
}

/// The reconciler's shared state, as one published snapshot.
#[repr(C)]
pub struct ReconSlot {
    pub words: [AtomicU64; RECON_WORDS],
}
pub const RECON_WORDS: usize = 10;

/// One open limiter's two reconciler slots: it writes the one not published, then publishes it.
#[repr(C)]
pub struct Seat {
    /// The owner (see `lock::owner_id`), 0 when free.
    pub owner: AtomicU64,
    pub slots: [ReconSlot; 2],
}

/// A period spec and its open period, double-buffered: `seq`'s low bit says which buffer is
/// current; a writer (holding `lock`) fills the other and bumps `seq`.
#[repr(C)]
pub struct SpecEntry {
    /// 0 free, 1 in use (written under the header's `init_lock`).
    pub used: AtomicU64,
    pub identity: [AtomicU64; SPEC_IDENTITY_BYTES / 8],
    pub lock: AtomicU64,
    pub seq: AtomicU64,
    pub periods: [[AtomicU64; PERIOD_WORDS]; 2],
}
/// open (0/1), slot, start_ms, end_ms, start kind, regression reported, observed at generation,
/// entered at (timeline ms).
pub const PERIOD_WORDS: usize = 8;

/// A group: its lock, a write-ahead note of a key being added, and one tag per slot (0: empty).
#[repr(C)]
pub struct Group {
    pub lock: AtomicU64,
    /// 0, or the slot being added + 1 with [`INTENT_RESERVED`] once the key is counted.
    pub intent: AtomicU64,
    pub tags: [AtomicU16; GROUP_SLOTS],
    _pad: [u64; 6],
}
pub const INTENT_RESERVED: u64 = 1 << 32;

/// A group's `intent` word: 0, or the slot being added + 1 (low 32 bits), with
/// [`INTENT_RESERVED`] once the key is counted in the header's `held`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intent(pub u64);

impl Intent {
    pub const NONE: Intent = Intent(0);

    /// Adding a key in `slot`, not counted yet.
    pub fn adding(slot: usize) -> Intent {
        Intent(slot as u64 + 1)
    }

    /// The same, counted in `held`.
    pub fn counted(self) -> Intent {
        Intent(self.0 | INTENT_RESERVED)
    }

    pub fn is_counted(self) -> bool {
        self.0 & INTENT_RESERVED != 0
    }

    /// The slot being added (`None`: none, or a word no process writes).
    pub fn slot(self) -> Option<usize> {
        (self.0 & 0xffff_ffff)
            .checked_sub(1)
            .map(|slot| slot as usize)
    }
}

/// One key. Identity and limits are written before the slot's tag is published and stay while
/// it is; the state is double-buffered (`meta`'s bit [`META_CURRENT`] names the current one).
#[repr(C)]
pub struct Slot {
    /// Key length in bytes (low 16 bits), [`META_WIDE`], [`META_CURRENT`], spec index + 1 in bits
    /// 24..32 (0: no quota).
    pub meta: AtomicU64,
    pub hash: AtomicU64,
    pub key: [AtomicU64; INLINE_KEY_BYTES / 8],
    pub capacity: AtomicU64,
    pub refill_per_second: AtomicU64,
    pub quota_limit: AtomicU64,
    /// tokens, credited_at_ms (the timeline when last used), quota used, period slot.
    pub state: [[AtomicU64; 4]; 2],
}
pub const META_WIDE: u64 = 1 << 16;
pub const META_CURRENT: u64 = 1 << 17;
/// The key's `policy` is asked again at its next call, in whichever process.
pub const META_POLICY_DUE: u64 = 1 << 18;
/// The key may be blocked: set before its block word, cleared after it (a process killed between
/// the two leaves it set, and a call reads the word), so a call of a key without it reads no
/// block word (`blocks.rs`).
pub const META_BLOCKED: u64 = 1 << 19;

/// A slot's `meta` word: the key's length in bytes (bits 0..16), [`META_WIDE`] (UTF-16 key),
/// [`META_CURRENT`] (which state buffer is current), the spec index + 1 (bits 24..32; 0: no
/// quota).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMeta(pub u64);

impl SlotMeta {
    /// A new key's word (state buffer 0 current).
    pub fn new(key_len: u16, wide: bool, spec: Option<usize>) -> SlotMeta {
        let spec_bits = spec.map_or(0, |spec| spec as u64 + 1) << 24;
        SlotMeta(u64::from(key_len) | if wide { META_WIDE } else { 0 } | spec_bits)
    }

    pub fn key_len(self) -> u16 {
        (self.0 & 0xffff) as u16
    }

    pub fn wide(self) -> bool {
        self.0 & META_WIDE != 0
    }

    /// The index of the current state buffer.
    pub fn current(self) -> usize {
        usize::from(self.0 & META_CURRENT != 0)
    }

    /// The same word with the other state buffer current.
    pub fn flipped(self) -> SlotMeta {
        SlotMeta(self.0 ^ META_CURRENT)
    }

    /// The spec index + 1 as stored (0: no quota; anything above `SPECS` names no spec).
    pub fn spec_bits(self) -> usize {
        ((self.0 >> 24) & 0xff) as usize
    }
}

/// The header's `recon_head`: the generation of the published reconciler state (high 48 bits)
/// and the index of the slot holding it (low 16 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconHead(pub u64);

impl ReconHead {
    pub fn generation(self) -> u64 {
        self.0 >> 16
    }

    pub fn index(self) -> u64 {
        self.0 & 0xffff
    }

    /// The head that publishes slot `index` after this one.
    pub fn next(self, index: u64) -> ReconHead {
        ReconHead((self.generation() + 1) << 16 | index)
    }
}

pub const _SIZES: () = {
    assert!(std::mem::size_of::<Slot>() == 128);
    assert!(std::mem::size_of::<Group>() == 128);
};

/// An id of this layout: a file made by a build with another layout is refused.
pub fn layout_id() -> u32 {
    let sizes = [
        std::mem::size_of::<Header>(),
        std::mem::size_of::<Seat>(),
        std::mem::size_of::<SpecEntry>(),
        std::mem::size_of::<Group>(),
        std::mem::size_of::<Slot>(),
        GROUP_SLOTS,
        LONG_KEY_BYTES,
        SEATS,
        SPECS,
    ];
    let mut hasher = crc32fast::Hasher::new();
    for size in sizes {
        hasher.update(&(size as u64).to_le_bytes());
    }
    hasher.finalize()
}

/// Where each region starts, for a zone of `groups` groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub seats: usize,
    pub specs: usize,
    pub groups: usize,
    pub slots: usize,
    /// One word per slot: the timeline (f64 bits) at which its key's policy was last asked
    /// (`policyTtlMs`).
    pub policy_asked: usize,
    /// [`BLOCK_WORDS`] words per slot: its key's block and run of denials (`blocks.rs`).
    pub blocks: usize,
    pub long_keys: usize,
    pub file_size: usize,
}

const fn round_up(value: usize, to: usize) -> usize {
    value.div_ceil(to) * to
}

impl Offsets {
    pub fn new(groups: usize) -> Option<Offsets> {
        let seats = round_up(std::mem::size_of::<Header>(), 64);
        let specs = seats + SEATS * std::mem::size_of::<Seat>();
        let groups_at = round_up(specs + SPECS * std::mem::size_of::<SpecEntry>(), 4096);
        let slots = groups_at.checked_add(groups.checked_mul(std::mem::size_of::<Group>())?)?;
        let slot_count = groups.checked_mul(GROUP_SLOTS)?;
        let policy_asked = round_up(
            slots.checked_add(slot_count.checked_mul(std::mem::size_of::<Slot>())?)?,
            64,
        );
        let blocks = policy_asked.checked_add(slot_count.checked_mul(8)?)?;
        let long_keys = round_up(
            blocks.checked_add(slot_count.checked_mul(BLOCK_WORDS * 8)?)?,
            4096,
        );
        let file_size = round_up(
            long_keys.checked_add(slot_count.checked_mul(LONG_KEY_BYTES)?)?,
            4096,
        );
        Some(Offsets {
            seats,
            specs,
            groups: groups_at,
            slots,
            policy_asked,
            blocks,
            long_keys,
            file_size,
        })
    }
}

/// Groups for `max_keys` keys: twice as many slots as keys, so that a group is rarely full.
pub fn groups_for(max_keys: u64) -> u64 {
    (max_keys.saturating_mul(2))
        .div_ceil(GROUP_SLOTS as u64)
        .max(1)
}

/// The header's checked part as bytes.
pub fn checked_bytes(header: &Header) -> &[u8] {
    let length = std::mem::offset_of!(Header, checksum);
    // SAFETY: the fields before `checksum` are plain integers and arrays of bytes, fully
    // initialized (`repr(C)` with no padding before `checksum`: every field is 8-byte sized or
    // a pair of u32s).
    unsafe { std::slice::from_raw_parts(header as *const Header as *const u8, length) }
}

pub fn checksum_of(header: &Header) -> u64 {
    u64::from(crc32fast::hash(checked_bytes(header)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets docs/zone.md gives (and the JS tests use to fake a reboot).
    #[test]
    fn the_header_fields_are_where_the_docs_say() {
        assert_eq!(std::mem::offset_of!(Header, options), 40);
        assert_eq!(std::mem::offset_of!(Header, checksum), 168);
        assert_eq!(std::mem::offset_of!(Header, boot_id), 176);
        assert_eq!(std::mem::offset_of!(Header, init_lock), 224);
        assert_eq!(std::mem::offset_of!(Header, held), 232);
        assert_eq!(std::mem::offset_of!(Header, recon_head), 248);
        assert_eq!(std::mem::offset_of!(Header, takeovers), 256);
        assert_eq!(std::mem::size_of::<Header>(), 264);
        assert_eq!(std::mem::size_of::<Seat>(), 168);
        assert_eq!(std::mem::size_of::<SpecEntry>(), 216);
    }
}
