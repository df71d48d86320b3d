//! Keys as the binding reads them from JS.

use std::mem::MaybeUninit;

use napi::sys;

use crate::error::ErrorCode;
use crate::keyed::{words_for, Key};
use crate::napi::errors::{coded, CodedResult};

/// Keys are 1 to 256 UTF-16 code units; one more unit tells a longer string.
pub(super) const MAX_KEY_UNITS: usize = 256;

/// Room for one key read from JS: one unit more than a key may have, to tell a longer string.
pub(super) const SCRATCH_UNITS: usize = MAX_KEY_UNITS + 2;

/// Stack buffers for one key, left uninitialized (zeroing them was measurably slower per call).
pub(super) struct KeyScratch {
    units: MaybeUninit<[u16; SCRATCH_UNITS]>,
    words: MaybeUninit<[u64; SCRATCH_WORDS]>,
}

/// Words for the longest key read: 2 bytes per unit.
pub(super) const SCRATCH_WORDS: usize = (2 * SCRATCH_UNITS).div_ceil(8);

impl KeyScratch {
    #[inline(always)]
    pub(super) fn new() -> KeyScratch {
        KeyScratch {
            units: MaybeUninit::uninit(),
            words: MaybeUninit::uninit(),
        }
    }

    /// Reads a JS string of 1 to 256 UTF-16 code units (one copy) and packs it as the table
    /// stores it (Latin-1 when every unit fits, else UTF-16LE) in whole words: the hash and the
    /// compare then load what was stored, word for word (byte stores read back as words would
    /// stall on store forwarding, measured).
    #[inline(always)]
    pub(super) fn read(
        &mut self,
        env: sys::napi_env,
        value: sys::napi_value,
    ) -> CodedResult<Key<'_>> {
        let mut len = 0usize;
        // SAFETY: a live env and value; the buffer's size is passed, N-API writes within it.
        let status = unsafe {
            sys::napi_get_value_string_utf16(
                env,
                value,
                self.units.as_mut_ptr().cast(),
                SCRATCH_UNITS,
                &mut len,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(coded(ErrorCode::InvalidArg, "key must be a string"));
        }
        if !(1..=MAX_KEY_UNITS).contains(&len) {
            return Err(coded(
                ErrorCode::InvalidArg,
                "key must be a string of 1 to 256 UTF-16 code units",
            ));
        }
        // SAFETY: N-API wrote the first `len` units.
        let units = unsafe { std::slice::from_raw_parts(self.units.as_ptr().cast::<u16>(), len) };
        let words = self.words.as_mut_ptr().cast::<u64>();
        let mut widest = 0u16;
        for (index, chunk) in units.chunks(8).enumerate() {
            let mut packed = 0u64;
            for (shift, unit) in chunk.iter().enumerate() {
                // One unit per load, as V8 stored them: a wider load of units just stored one by
                // one stalls on store forwarding (measured in the keyed benchmark).
                // SAFETY: `unit` is a valid, initialized u16.
                let unit = unsafe { std::ptr::read_volatile(unit) };
                widest |= unit;
                packed |= u64::from(unit as u8) << (8 * shift);
            }
            // SAFETY: index < words_for(len) ≤ 33 < SCRATCH_WORDS.
            unsafe { words.add(index).write(packed) };
        }
        if widest < 256 {
            // SAFETY: the first words_for(len) words were just written.
            return Ok(Key {
                wide: false,
                len: len as u16,
                words: unsafe { std::slice::from_raw_parts(words, words_for(len)) },
            });
        }
        for (index, chunk) in units.chunks(4).enumerate() {
            let mut packed = 0u64;
            for (shift, &unit) in chunk.iter().enumerate() {
                packed |= u64::from(unit) << (16 * shift);
            }
            // SAFETY: index < words_for(2 len) ≤ 64 < SCRATCH_WORDS.
            unsafe { words.add(index).write(packed) };
        }
        // SAFETY: the first words_for(2 len) words were just written.
        Ok(Key {
            wide: true,
            len: 2 * len as u16,
            words: unsafe { std::slice::from_raw_parts(words, words_for(2 * len)) },
        })
    }
}
