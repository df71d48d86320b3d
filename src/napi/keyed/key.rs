//! Keys as the binding reads them from JS.

use std::mem::MaybeUninit;

use napi::sys;

use crate::keyed::{words_for, Key};
use crate::napi::errors::{invalid_arg, CodedResult};

/// Keys are 1 to 256 UTF-16 code units; one more unit tells a longer string.
pub(super) const MAX_KEY_UNITS: usize = 256;

/// Room for one key read from JS: one unit more than a key may have, to tell a longer string.
pub(super) const SCRATCH_UNITS: usize = MAX_KEY_UNITS + 2;

/// Words for the longest key read: 2 bytes per unit.
pub(super) const SCRATCH_WORDS: usize = words_for(2 * SCRATCH_UNITS);

/// Stack buffers for one key, left uninitialized (zeroing them was measurably slower per call).
pub(super) struct KeyScratch {
    units: MaybeUninit<[u16; SCRATCH_UNITS]>,
    words: [MaybeUninit<u64>; SCRATCH_WORDS],
}

impl KeyScratch {
    #[inline(always)]
    pub(super) fn new() -> KeyScratch {
        KeyScratch {
            units: MaybeUninit::uninit(),
            words: [MaybeUninit::uninit(); SCRATCH_WORDS],
        }
    }

    /// Reads a JS string of 1 to 256 UTF-16 code units (one copy) and packs it as the table
    /// stores it ([`Key::pack_utf16`]).
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
            return Err(invalid_arg("key must be a string"));
        }
        if !(1..=MAX_KEY_UNITS).contains(&len) {
            return Err(invalid_arg(
                "key must be a string of 1 to 256 UTF-16 code units",
            ));
        }
        // SAFETY: N-API wrote the first `len` units.
        let units = unsafe { std::slice::from_raw_parts(self.units.as_ptr().cast::<u16>(), len) };
        Ok(Key::pack_utf16(units, &mut self.words))
    }
}
