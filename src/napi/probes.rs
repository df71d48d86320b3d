//! Probes (the `probes` feature, never published): the benchmark's floor, call patterns, keys.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::errors::{guard, invalid_arg};
use super::raw::{callback_data, function_owning};
use crate::clock;

unsafe extern "C" fn read_two_clocks(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let data = unsafe { callback_data(env, info) };
    if !data.is_null() {
        // SAFETY: `data` is the boxed `Float64Array` of `clock_floor`, alive until the finalizer.
        let buffer = unsafe { &mut *(data as *mut Float64Array) };
        // SAFETY: only this thread touches the buffer; it has at least two numbers (checked).
        let readings = unsafe { buffer.as_mut() };
        readings[0] = clock::monotonic_ms();
        readings[1] = clock::wall_ms();
    }
    ptr::null_mut()
}

/// Returns a zero-argument function writing CLOCK_MONOTONIC and CLOCK_REALTIME into `buffer`.
#[napi(js_name = "clockFloor")]
pub fn clock_floor<'env>(env: &'env Env, buffer: Float64Array) -> napi::Result<Unknown<'env>> {
    guard(env, move || {
        if buffer.len() < 2 {
            return Err(invalid_arg("the floor needs a buffer of 2 numbers"));
        }
        let refused = "could not create the floor function";
        function_owning(
            env,
            "clockFloor",
            read_two_clocks,
            Box::new(buffer),
            refused,
        )
    })
}

/// The same two clock reads as a `#[napi]` class method (napi-derive's glue, for comparison).
#[napi]
pub struct ClockProbe {
    reads: u64,
}

#[napi]
impl ClockProbe {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        ClockProbe { reads: 0 }
    }

    #[napi]
    pub fn read(&mut self) -> f64 {
        self.reads += 1;
        clock::monotonic_ms() + clock::wall_ms()
    }
}

/// The same as a free function taking a handle argument.
#[napi(js_name = "readClocksWithHandle")]
pub fn read_clocks_with_handle(handle: u32) -> f64 {
    clock::monotonic_ms() + clock::wall_ms() + f64::from(handle)
}

/// How a key string may cross the boundary (for the benchmark's choice of the keyed hot path).
#[derive(Clone, Copy)]
enum KeyRead {
    Utf8,
    Latin1,
    Utf16,
}

unsafe extern "C" fn read_key(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let Some(call) = (unsafe { super::raw::one_argument_call(env, info) }) else {
        return ptr::null_mut();
    };
    if call.argc < 1 {
        return ptr::null_mut();
    }
    let (first, data) = (call.first, call.data);
    // SAFETY: `data` is the boxed `KeyRead` of `key_probe`, alive until the finalizer.
    let mode = unsafe { *(data as *const KeyRead) };
    let mut len = 0usize;
    // Each branch reads into its own stack buffer, as a key read would.
    macro_rules! read {
        ($read:ident, $buffer:expr) => {{
            let mut buffer = $buffer;
            let (at, size) = (buffer.as_mut_ptr().cast(), buffer.len());
            // SAFETY: a live env and value, and the buffer's own size.
            unsafe { sys::$read(env, first, at, size, &mut len) }
        }};
    }
    let read = match mode {
        KeyRead::Utf8 => read!(napi_get_value_string_utf8, [0u8; 772]),
        KeyRead::Latin1 => read!(napi_get_value_string_latin1, [0u8; 258]),
        KeyRead::Utf16 => read!(napi_get_value_string_utf16, [0u16; 258]),
    };
    std::hint::black_box((read, len));
    ptr::null_mut()
}

/// A raw function that only reads its string argument (`'utf8'`, `'latin1'` or `'utf16'`).
#[napi(js_name = "keyProbe")]
pub fn key_probe<'env>(env: &'env Env, mode: String) -> napi::Result<Unknown<'env>> {
    guard(env, move || {
        let mode = match mode.as_str() {
            "utf8" => KeyRead::Utf8,
            "latin1" => KeyRead::Latin1,
            "utf16" => KeyRead::Utf16,
            other => return Err(invalid_arg(format!("unknown key read '{other}'"))),
        };
        let refused = "could not create the key probe";
        function_owning(env, "keyProbe", read_key, Box::new(mode), refused)
    })
}

/// The same as a `#[napi]` function taking the key as a `String` (napi-rs's UTF-8 conversion).
#[napi(js_name = "keyProbeString")]
pub fn key_probe_string(key: String) -> u32 {
    key.len() as u32
}

/// How many limiters this thread's registries hold (for the lifecycle tests).
#[napi(js_name = "liveLimiters")]
pub fn live_limiters() -> u32 {
    super::registry::live_counts().0
}

/// How many registries (module instances) are alive on this thread (for the lifecycle tests).
#[napi(js_name = "liveRegistries")]
pub fn live_registries() -> u32 {
    super::registry::live_counts().1
}
