//! Raw N-API functions: what the hot path is made of (napi-derive's glue costs more per call).

use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi::sys;

use super::errors::{coded, CodedResult};
use crate::error::ErrorCode;

pub(crate) type RawCallback =
    unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

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

/// What a raw function's `data` owns: released once, by the function's finalizer (or at once, if
/// N-API refuses to make the function).
pub(crate) trait FunctionData {
    fn into_data(self) -> *mut c_void;
    /// # Safety
    /// `data` is what `into_data` made, released once, on the env the function was made on.
    unsafe fn release(env: sys::napi_env, data: *mut c_void);
}

impl<T> FunctionData for Rc<T> {
    fn into_data(self) -> *mut c_void {
        Rc::into_raw(self) as *mut c_void
    }

    unsafe fn release(_env: sys::napi_env, data: *mut c_void) {
        // SAFETY: per the caller, this balances `into_data`'s `Rc::into_raw`.
        drop(unsafe { Rc::from_raw(data as *const T) });
    }
}

impl<T> FunctionData for Box<T> {
    fn into_data(self) -> *mut c_void {
        Box::into_raw(self) as *mut c_void
    }

    unsafe fn release(_env: sys::napi_env, data: *mut c_void) {
        // SAFETY: per the caller, this balances `into_data`'s `Box::into_raw`.
        drop(unsafe { Box::from_raw(data as *mut T) });
    }
}

unsafe extern "C" fn finalize<D: FunctionData>(
    env: sys::napi_env,
    data: *mut c_void,
    _hint: *mut c_void,
) {
    // SAFETY: N-API runs a function's finalizer once, on its env, with the function's data.
    unsafe { D::release(env, data) }
}

/// A JS function `name` calling `callback` with `data`, which it owns until it is collected
/// ([`FunctionData`]); if N-API refuses, `data` is released and the error says `refused`.
pub(crate) fn function_owning<'env, D: FunctionData>(
    env: &'env Env,
    name: &str,
    callback: RawCallback,
    data: D,
    refused: &str,
) -> CodedResult<Unknown<'env>> {
    let data = data.into_data();
    let mut function = ptr::null_mut();
    // SAFETY: a live env; `callback` and `finalize` have N-API's signatures, and `data` lives
    // until `finalize` releases it.
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
                Some(finalize::<D>),
                ptr::null_mut(),
                ptr::null_mut(),
            ) == sys::Status::napi_ok
    };
    if ok {
        // SAFETY: `function` is a live value in the current scope.
        return Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), function) });
    }
    // SAFETY: N-API refused, so nothing else owns `data`.
    unsafe { D::release(env.raw(), data) };
    Err(coded(ErrorCode::Internal, refused))
}
