//! Anomalies as JS objects, and their delivery to `onAnomaly`.

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use super::object::objects;
use super::raw::{function_owning, FunctionData};
use crate::anomaly::Anomaly;

objects! {
    #[doc = "An anomaly as callers see it (`decision.anomalies`, `onAnomaly`), passed on by the JS"]
    #[doc = "face as it is: a kind's own fields are set only on that kind (a `None` is left out)."]
    AnomalyOutput from &Anomaly as anomaly {
        kind: String = anomaly.kind.as_str().to_owned(),
        detail: String = anomaly.detail.clone(),
        monotonic_delta_ms: f64 = anomaly.monotonic_delta_ms,
        wall_delta_ms: f64 = anomaly.wall_delta_ms,
        credited_ms: f64 = anomaly.credited_ms,
        suspended_ms: Option<f64> = anomaly.suspended_ms,
        step_ms: Option<f64> = anomaly.step_ms,
        skipped: Option<f64> = anomaly.skipped.map(|count| count as f64),
        period_id: Option<String> = anomaly.period_id.clone(),
    }
}

/// One anomaly for one listener's `onAnomaly`; `dropped`: how many deliveries were dropped, set
/// once the backlog empties.
#[napi(object)]
pub struct AnomalyDelivery {
    pub listener: f64,
    pub anomaly: AnomalyOutput,
    pub dropped: Option<f64>,
}

/// at most this many deliveries wait per thread; past it they are dropped (and counted).
pub(crate) const MAX_WAITING_DELIVERIES: u32 = 10_000;

thread_local! {
    // clippy asks for `const` here on windows-gnu even where it is there: that target has no native
    // thread-locals, and std's fallback hides the initializer from the lint.
    /// Deliveries queued on this thread and not yet handed to JS (or discarded).
    #[cfg_attr(all(windows, target_env = "gnu"), allow(clippy::missing_const_for_thread_local))]
    static WAITING: Cell<u32> = const { Cell::new(0) };
    /// Deliveries dropped since the backlog last emptied.
    #[cfg_attr(all(windows, target_env = "gnu"), allow(clippy::missing_const_for_thread_local))]
    static DROPPED: Cell<u64> = const { Cell::new(0) };
}

/// One place in this thread's backlog, given back when the delivery is handed to JS or discarded.
pub(crate) struct Waiting(());

impl Waiting {
    fn take() -> Option<Waiting> {
        WAITING
            .try_with(|waiting| {
                if waiting.get() >= MAX_WAITING_DELIVERIES {
                    DROPPED.with(|dropped| dropped.set(dropped.get() + 1));
                    return None;
                }
                waiting.set(waiting.get() + 1);
                Some(Waiting(()))
            })
            .ok()
            .flatten()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // At thread teardown the counter may be gone already; nothing is left to count then.
        let _ = WAITING.try_with(|waiting| waiting.set(waiting.get().saturating_sub(1)));
    }
}

/// How many were dropped, once the backlog has emptied after some were.
fn dropped_if_drained() -> Option<f64> {
    let drained = WAITING.try_with(Cell::get).ok()? == 0;
    let dropped = DROPPED
        .try_with(|dropped| if drained { dropped.replace(0) } else { 0 })
        .ok()?;
    (dropped > 0).then_some(dropped as f64)
}

/// What the queue holds: a delivery and its place in the backlog.
pub(crate) struct Queued {
    listener: f64,
    anomaly: AnomalyOutput,
    _waiting: Waiting,
}

/// The registry's anomaly dispatcher, as a threadsafe function (one per registry, not one per
/// limiter: each costs an event-loop handle and ~2 KiB):
/// - `Queued`: what the core hands over;
/// - `Unknown`: the JS function's return value, ignored;
/// - `AnomalyDelivery`: the one argument JS receives (routed to that limiter's `onAnomaly`);
/// - `Status`: napi's own error status;
/// - `false`: not callee-handled, no error-first argument;
/// - `true`: weak, so a pending delivery never keeps the event loop alive.
///
/// Calls are `NonBlocking` (a handler never runs inside a call). It calls a native trampoline
/// holding the JS dispatcher weakly: held as a GC root, it would keep the whole JS face alive.
pub(crate) type AnomalyDispatcher =
    ThreadsafeFunction<Queued, Unknown<'static>, AnomalyDelivery, Status, false, true>;

/// The trampoline's data: a weak reference to the JS dispatcher.
struct WeakDispatcher(sys::napi_ref);

unsafe extern "C" fn trampoline(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let Some(call) = (unsafe { super::raw::one_argument_call(env, info) }) else {
        return ptr::null_mut();
    };
    let (arguments, data) = ([call.first], call.data);
    // SAFETY: `data` is the `WeakDispatcher` of `build_dispatcher`, released only by the finalizer.
    let dispatcher = unsafe { &*(data as *const WeakDispatcher) };
    let mut target = ptr::null_mut();
    let mut receiver = ptr::null_mut();
    let mut result = ptr::null_mut();
    // SAFETY: a live env and reference; `target` stays null once the dispatcher is collected.
    unsafe {
        if sys::napi_get_reference_value(env, dispatcher.0, &mut target) != sys::Status::napi_ok
            || target.is_null()
        {
            return ptr::null_mut();
        }
        sys::napi_get_undefined(env, &mut receiver);
        if sys::napi_call_function(env, receiver, target, 1, arguments.as_ptr(), &mut result)
            == sys::Status::napi_pending_exception
        {
            // The JS face catches what handlers throw; whatever still gets here is dropped rather
            // than made fatal.
            let mut exception = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut exception);
        }
    }
    ptr::null_mut()
}

impl FunctionData for WeakDispatcher {
    fn into_data(self) -> *mut c_void {
        Box::into_raw(Box::new(self)) as *mut c_void
    }

    unsafe fn release(env: sys::napi_env, data: *mut c_void) {
        // SAFETY: per the caller, this balances `into_data`; the reference was made on `env`.
        unsafe { sys::napi_delete_reference(env, Box::from_raw(data as *mut WeakDispatcher).0) };
    }
}

pub(crate) fn build_dispatcher(
    env: &Env,
    handler: &Function<'_, AnomalyDelivery, Unknown<'static>>,
) -> Result<AnomalyDispatcher> {
    let mut weak = ptr::null_mut();
    // SAFETY: a live env and value; refcount 0 makes the reference weak.
    check_status!(unsafe { sys::napi_create_reference(env.raw(), handler.raw(), 0, &mut weak) })?;
    let refused = "could not create the anomaly trampoline";
    let function = function_owning(
        env,
        "deliverAnomaly",
        trampoline,
        WeakDispatcher(weak),
        refused,
    )
    .map_err(|error| Error::from_reason(error.reason))?;
    // SAFETY: a function value just created on this env.
    let function = unsafe {
        Function::<AnomalyDelivery, Unknown<'static>>::from_napi_value(env.raw(), function.raw())
    }?;
    function
        .build_threadsafe_function::<Queued>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(|context| {
            let Queued {
                listener,
                anomaly,
                _waiting,
            } = context.value;
            drop(_waiting);
            Ok(AnomalyDelivery {
                listener,
                anomaly,
                dropped: dropped_if_drained(),
            })
        })
}

/// Queues one delivery, or drops it (counted) when this thread's backlog is full.
pub(crate) fn deliver(dispatcher: &AnomalyDispatcher, listener: f64, anomaly: &Anomaly) {
    let Some(waiting) = Waiting::take() else {
        return;
    };
    // A closing queue only drops a log line (its place in the backlog is given back with it).
    let _ = dispatcher.call(
        Queued {
            listener,
            anomaly: AnomalyOutput::from(anomaly),
            _waiting: waiting,
        },
        ThreadsafeFunctionCallMode::NonBlocking,
    );
}
