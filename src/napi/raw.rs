//! Raw N-API functions: what the hot path is made of (napi-derive's glue costs more per call).

use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;

pub(crate) type RawCallback =
    unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;
pub(crate) type RawFinalizer = unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void);

/// The `data` pointer a raw function was created with (null if N-API refuses).
///
/// # Safety
/// `env` and `info` must be the ones N-API passed to the callback.
pub(crate) unsafe fn callback_data(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> *mut c_void {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: per the caller; only `data` is asked for.
    let status = unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            &mut data,
        )
    };
    if status == sys::Status::napi_ok {
        data
    } else {
        ptr::null_mut()
    }
}

/// What a raw function taking one argument was called with.
pub(crate) struct OneArgumentCall {
    /// How many arguments the caller passed (N-API fills a missing first one with `undefined`).
    pub argc: usize,
    pub first: sys::napi_value,
    /// The `data` pointer the function was created with; never null.
    pub data: *mut c_void,
}

/// The first argument and the `data` pointer of a call to a raw function (`None` if N-API
/// refuses, or the function has no data).
///
/// # Safety
/// `env` and `info` must be the ones N-API passed to the callback.
#[inline(always)]
pub(crate) unsafe fn one_argument_call(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> Option<OneArgumentCall> {
    let mut argc = 1usize;
    let mut argv = [ptr::null_mut(); 1];
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: per the caller; room for one argument.
    let status = unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            &mut data,
        )
    };
    (status == sys::Status::napi_ok && !data.is_null()).then_some(OneArgumentCall {
        argc,
        first: argv[0],
        data,
    })
}

/// A JS function calling `callback` with `data`, which `finalize` releases once the function has
/// been collected. `None` if N-API refuses; the caller then still owns `data`.
///
/// # Safety
/// `data` must stay valid until `finalize` runs, and `finalize` must release it exactly once.
pub(crate) unsafe fn function_with_data<'env>(
    env: &'env Env,
    name: &str,
    callback: RawCallback,
    data: *mut c_void,
    finalize: RawFinalizer,
) -> Option<Unknown<'env>> {
    let mut function = ptr::null_mut();
    // SAFETY: a live env; `callback` and `finalize` have N-API's signatures; per the caller for `data`.
    let ok = unsafe {
        sys::napi_create_function(
            env.raw(),
            name.as_ptr().cast(),
            name.len() as isize,
            Some(callback),
            data,
            &mut function,
        ) == sys::Status::napi_ok
            && sys::napi_add_finalizer(
                env.raw(),
                function,
                data,
                Some(finalize),
                ptr::null_mut(),
                ptr::null_mut(),
            ) == sys::Status::napi_ok
    };
    // SAFETY: `function` is a live value in the current scope.
    ok.then(|| unsafe { Unknown::from_raw_unchecked(env.raw(), function) })
}
