//! The keys of a keyed limiter: fixed-size, pointer-free records in one vector, found through a
//! SwissTable of record indices, and linked (by index) into recency lists.

use std::hash::{BuildHasher, Hasher};
use std::mem::MaybeUninit;

use hashbrown::HashTable;

use crate::kernel::KeyUse;

/// "No record" in a link or a list end.
pub const NIL: u32 = u32::MAX;

/// Key words held in the record itself (24 bytes); longer keys live in [`KeyTable::long_keys`].
pub const INLINE_KEY_WORDS: usize = 3;

/// The record's key is UTF-16 (little-endian code units), not Latin-1.
const FLAG_WIDE: u8 = 1;
/// The key's words are out of line; the first inline word holds their index in `long_keys`.
const FLAG_LONG: u8 = 2;
/// The record is on its period spec's parked list, not on the main recency list.
pub const FLAG_PARKED: u8 = 4;
/// The key's `policy` is asked again at its next call (`refreshPolicy`).
pub const FLAG_POLICY_DUE: u8 = 8;
/// The key is blocked (`block`): never idle, never dropped to make room.
pub const FLAG_BLOCKED: u8 = 16;

/// Words holding `len` bytes.
#[inline(always)]
pub const fn words_for(len: usize) -> usize {
    len.div_ceil(8)
}

/// A key as it is stored and compared: the string's Latin-1 bytes when every UTF-16 code unit is
/// below 256, else its UTF-16 code units as little-endian bytes, packed little-endian into whole
/// u64 words, zero-padded. Each string has exactly one encoding, so equal strings have equal keys
/// and different strings (lone surrogates included) differ. Words, not bytes, so that the hot
/// path builds, hashes and compares a key in whole-word loads and stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key<'a> {
    pub wide: bool,
    /// Length in bytes.
    pub len: u16,
    /// `words_for(len)` words.
    pub words: &'a [u64],
}

/// An owned [`Key`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyBuf {
    pub wide: bool,
    pub len: u16,
    pub words: Vec<u64>,
}

/// Packs bytes into zero-padded little-endian words.
pub fn pack(bytes: &[u8], words: &mut Vec<u64>) {
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        words.push(u64::from_le_bytes(word));
    }
}

impl KeyBuf {
    /// `bytes` must be a canonical encoding (see [`Key::is_canonical`]).
    pub fn from_bytes(wide: bool, bytes: &[u8]) -> KeyBuf {
        let mut words = Vec::with_capacity(words_for(bytes.len()));
        pack(bytes, &mut words);
        KeyBuf {
            wide,
            len: bytes.len() as u16,
            words,
        }
    }

    pub fn from_utf16(units: &[u16]) -> KeyBuf {
        let mut words = vec![MaybeUninit::uninit(); words_for(2 * units.len())];
        Key::pack_utf16(units, &mut words).to_buf()
    }

    #[cfg(test)]
    pub fn from_text(text: &str) -> KeyBuf {
        KeyBuf::from_utf16(&text.encode_utf16().collect::<Vec<_>>())
    }

    pub fn key(&self) -> Key<'_> {
        Key {
            wide: self.wide,
            len: self.len,
            words: &self.words,
        }
    }
}

impl<'a> Key<'a> {
    /// The key of the string of UTF-16 code `units`, packed into `words` (room for
    /// `words_for(2 * units.len())` of them; no more are written) in whole-word stores: the hash
    /// and the compare then load what was stored, word for word (byte stores read back as words
    /// would stall on store forwarding, measured).
    #[inline(always)]
    pub fn pack_utf16(units: &[u16], words: &'a mut [MaybeUninit<u64>]) -> Key<'a> {
        assert!(
            words_for(2 * units.len()) <= words.len(),
            "room for the key"
        );
        let words = words.as_mut_ptr().cast::<u64>();
        let mut widest = 0u16;
        for (index, chunk) in units.chunks(8).enumerate() {
            let mut packed = 0u64;
            for (shift, unit) in chunk.iter().enumerate() {
                // One unit per load: a caller that has just stored the units one by one would
                // stall a wider load on store forwarding (measured in the keyed benchmark).
                // SAFETY: `unit` is a valid, initialized u16.
                let unit = unsafe { std::ptr::read_volatile(unit) };
                widest |= unit;
                packed |= u64::from(unit as u8) << (8 * shift);
            }
            // SAFETY: index < words_for(len), within the room checked above.
            unsafe { words.add(index).write(packed) };
        }
        let wide = widest >= 256;
        if wide {
            for (index, chunk) in units.chunks(4).enumerate() {
                let mut packed = 0u64;
                for (shift, &unit) in chunk.iter().enumerate() {
                    packed |= u64::from(unit) << (16 * shift);
                }
                // SAFETY: index < words_for(2 len), within the room checked above.
                unsafe { words.add(index).write(packed) };
            }
        }
        let len = if wide { 2 * units.len() } else { units.len() };
        // SAFETY: the first `words_for(len)` words were just written (room checked above).
        let words = unsafe { std::slice::from_raw_parts(words, words_for(len)) };
        Key {
            wide,
            len: len as u16,
            words,
        }
    }

    /// The key, owned.
    pub fn to_buf(&self) -> KeyBuf {
        KeyBuf {
            wide: self.wide,
            len: self.len,
            words: self.words.to_vec(),
        }
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.words
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .take(usize::from(self.len))
    }

    /// The UTF-16 code units.
    pub fn to_utf16(&self) -> Vec<u16> {
        let bytes: Vec<u8> = self.bytes().collect();
        if self.wide {
            bytes
                .chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
                .collect()
        } else {
            bytes.into_iter().map(u16::from).collect()
        }
    }

    /// Whether `bytes` are the one encoding of some string (what a snapshot must hold).
    pub fn is_canonical(wide: bool, bytes: &[u8]) -> bool {
        !wide || (bytes.len().is_multiple_of(2) && bytes.chunks_exact(2).any(|pair| pair[1] != 0))
    }
}

/// One key's state: 72 bytes, no pointers (only indices), so the table could live in shared
/// memory. The bucket is stored as of `credited_at_ms`, a position on the limiter's timeline of
/// credited real time, and refilled when the key is next looked at.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Record {
    pub tokens: f64,
    /// The limiter's timeline (credited ms) when `tokens` was last brought up to date.
    pub credited_at_ms: f64,
    /// Quota use in the period `period_slot` of the key's spec.
    pub quota_used: u64,
    key: [u64; INLINE_KEY_WORDS],
    /// The period the use belongs to ([`NO_PERIOD`] for none).
    pub period_slot: i32,
    /// Recency links (towards the most recent, towards the least recent).
    pub prev: u32,
    pub next: u32,
    /// Index of the key's policy.
    pub policy: u32,
    /// Key length in bytes.
    key_len: u16,
    pub flags: u8,
}

impl Record {
    /// The key's bucket and quota use, as the kernel's rules read them.
    #[inline(always)]
    pub fn key_use(&self) -> KeyUse<i32> {
        KeyUse {
            tokens: self.tokens,
            credited_at_ms: self.credited_at_ms,
            quota_used: self.quota_used,
            period_slot: self.period_slot,
        }
    }

    /// Stores the key's bucket and quota use back.
    #[inline(always)]
    pub fn set_use(&mut self, state: &KeyUse<i32>) {
        self.tokens = state.tokens;
        self.credited_at_ms = state.credited_at_ms;
        self.quota_used = state.quota_used;
        self.period_slot = state.period_slot;
    }
}

/// `period_slot` of a record whose use belongs to no period.
pub const NO_PERIOD: i32 = i32::MIN;

const _: () = assert!(std::mem::size_of::<Record>() == 72);

impl Record {
    fn key<'a>(&'a self, long_keys: &'a [Box<[u64]>]) -> Key<'a> {
        let words = if self.flags & FLAG_LONG != 0 {
            &long_keys[self.key[0] as usize][..]
        } else {
            &self.key[..words_for(usize::from(self.key_len))]
        };
        Key {
            wide: self.flags & FLAG_WIDE != 0,
            len: self.key_len,
            words,
        }
    }

    /// Whether this is the record of `key`, in whole-word compares.
    #[inline(always)]
    fn holds(&self, key: Key<'_>, long_keys: &[Box<[u64]>]) -> bool {
        if self.key_len != key.len || (self.flags & FLAG_WIDE != 0) != key.wide {
            return false;
        }
        if self.flags & FLAG_LONG != 0 {
            return long_keys[self.key[0] as usize][..] == *key.words;
        }
        let mut same = true;
        for (stored, probe) in self.key.iter().zip(key.words) {
            same &= stored == probe;
        }
        same
    }
}

/// After the table grew: a large old allocation that glibc kept in its heap is handed back to the
/// system, so the process's RSS is the table's size (without it, measured at 1M keys: ~120 bytes
/// per key instead of ~80, the old copies of the growing vector and index still resident).
fn return_freed_memory(freed_bytes: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if freed_bytes >= 1 << 20 {
        // SAFETY: malloc_trim only releases free memory; any argument is valid.
        unsafe { libc::malloc_trim(0) };
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = freed_bytes;
}

/// Ends of a doubly linked list of records: `head` is the most recent.
#[derive(Clone, Copy, Debug)]
pub struct List {
    pub head: u32,
    pub tail: u32,
}

impl Default for List {
    fn default() -> List {
        List {
            head: NIL,
            tail: NIL,
        }
    }
}

/// A list a record is on: the main recency list or a spec's parked list.
pub trait Lists {
    fn list(&mut self, record: &Record) -> &mut List;
}

pub struct KeyTable {
    pub records: Vec<Record>,
    index: HashTable<u32>,
    long_keys: Vec<Box<[u64]>>,
    free_long_keys: Vec<u32>,
    hasher: foldhash::fast::RandomState,
}

impl KeyTable {
    pub fn new() -> KeyTable {
        KeyTable {
            records: Vec::new(),
            index: HashTable::new(),
            long_keys: Vec::new(),
            free_long_keys: Vec::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// The length and the words, each one fold of the hasher (no byte-wise reads).
    #[inline(always)]
    fn hash(hasher: &foldhash::fast::RandomState, key: Key<'_>) -> u64 {
        let mut state = hasher.build_hasher();
        state.write_u64(u64::from(key.len) << 1 | u64::from(key.wide));
        for &word in key.words {
            state.write_u64(word);
        }
        state.finish()
    }

    #[inline(always)]
    pub fn find(&self, key: Key<'_>) -> Option<u32> {
        let hash = Self::hash(&self.hasher, key);
        let (records, long_keys) = (&self.records, &self.long_keys);
        self.index
            .find(hash, |&index| records[index as usize].holds(key, long_keys))
            .copied()
    }

    pub fn key_of(&self, index: u32) -> Key<'_> {
        self.records[index as usize].key(&self.long_keys)
    }

    /// Adds a record for `key` (not held) with `record`'s state; returns its index. The record is
    /// on no list yet.
    pub fn insert(&mut self, key: Key<'_>, mut record: Record) -> u32 {
        let index = self.records.len() as u32;
        record.flags = if key.wide { FLAG_WIDE } else { 0 };
        record.key = [0; INLINE_KEY_WORDS];
        if key.words.len() <= INLINE_KEY_WORDS {
            record.key[..key.words.len()].copy_from_slice(key.words);
        } else {
            let long = match self.free_long_keys.pop() {
                Some(slot) => {
                    self.long_keys[slot as usize] = key.words.into();
                    slot
                }
                None => {
                    self.long_keys.push(key.words.into());
                    (self.long_keys.len() - 1) as u32
                }
            };
            record.flags |= FLAG_LONG;
            record.key[0] = u64::from(long);
        }
        record.key_len = key.len;
        let capacities = (self.records.capacity(), self.index.capacity());
        self.records.push(record);
        let hash = Self::hash(&self.hasher, key);
        let (records, long_keys, hasher) = (&self.records, &self.long_keys, &self.hasher);
        self.index.insert_unique(hash, index, |&other| {
            Self::hash(hasher, records[other as usize].key(long_keys))
        });
        if capacities != (self.records.capacity(), self.index.capacity()) {
            return_freed_memory(capacities.0 * std::mem::size_of::<Record>());
        }
        index
    }

    /// Removes record `index` (already off its list) and moves the last record into its place,
    /// re-linking it; returns the removed record.
    pub fn remove(&mut self, index: u32, lists: &mut impl Lists) -> Record {
        let removed = self.records[index as usize];
        let hash = Self::hash(&self.hasher, removed.key(&self.long_keys));
        if let Ok(entry) = self.index.find_entry(hash, |&other| other == index) {
            entry.remove();
        }
        if removed.flags & FLAG_LONG != 0 {
            let slot = removed.key[0] as u32;
            self.long_keys[slot as usize] = Box::new([]);
            self.free_long_keys.push(slot);
        }
        let last = (self.records.len() - 1) as u32;
        self.records.swap_remove(index as usize);
        if index != last {
            let moved = self.records[index as usize];
            let hash = Self::hash(&self.hasher, moved.key(&self.long_keys));
            if let Some(slot) = self.index.find_mut(hash, |&other| other == last) {
                *slot = index;
            }
            // Re-point the neighbours (or the list's ends) at the record's new place.
            if moved.prev == NIL {
                lists.list(&moved).head = index;
            } else {
                self.records[moved.prev as usize].next = index;
            }
            if moved.next == NIL {
                lists.list(&moved).tail = index;
            } else {
                self.records[moved.next as usize].prev = index;
            }
        }
        removed
    }

    /// Takes record `index` off `list`.
    pub fn unlink(&mut self, index: u32, list: &mut List) {
        let Record { prev, next, .. } = self.records[index as usize];
        if prev == NIL {
            list.head = next;
        } else {
            self.records[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.records[next as usize].prev = prev;
        }
        let record = &mut self.records[index as usize];
        record.prev = NIL;
        record.next = NIL;
    }

    /// Puts record `index` (on no list) at the head of `list`.
    pub fn push_front(&mut self, index: u32, list: &mut List) {
        let old_head = list.head;
        {
            let record = &mut self.records[index as usize];
            record.prev = NIL;
            record.next = old_head;
        }
        if old_head == NIL {
            list.tail = index;
        } else {
            self.records[old_head as usize].prev = index;
        }
        list.head = index;
    }

    /// An empty record with `policy`, for [`KeyTable::insert`].
    pub fn blank(policy: u32, tokens: f64, credited_at_ms: f64, period_slot: i32) -> Record {
        Record {
            tokens,
            credited_at_ms,
            quota_used: 0,
            period_slot,
            prev: NIL,
            next: NIL,
            policy,
            key_len: 0,
            flags: 0,
            key: [0; INLINE_KEY_WORDS],
        }
    }
}
