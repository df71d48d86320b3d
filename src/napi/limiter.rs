//! `QuotaClock`'s native half. Limiters live in a per-thread registry and are named by a slot
//! number. `tryConsume` is one raw N-API function per registry, called with no arguments: the JS
//! face writes `n` and the slot into a shared `Float64Array` and reads the decision back from it.
//!
//! Why this shape (measured, see README "Performance"): a `#[napi]` class method pays napi-derive
//! 3.7's per-call glue and borrow tracking (~300 ns more here); a free function pays for converting each
//! argument; a napi-built result object costs ~500 ns more than filling a typed array. A raw
//! function with zero arguments costs what the floor costs. Naming limiters by slot (instead of a
//! napi class instance or a function per limiter) also keeps an idle limiter under 1 KiB.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::anomaly::{build_dispatcher, deliver, AnomalyDelivery, AnomalyDispatcher, AnomalyOutput};
use super::calendar::{check_wall_ms, parse_spec, period_output, PeriodOutput, PeriodSpecInput};
use super::clock::{BoundClock, ClockHandle, NativeManualClock, Supplied};
use super::errors::{coded, from_limiter, guard, internal, invalid_arg, CodedError, CodedResult};
use super::raw::{callback_data, function_with_data};
use crate::anomaly::{js_number, Anomaly};
use crate::clock::{self, SuspendPolicy, SystemClock};
use crate::limiter::{Decision, Limiter, LimiterConfig, RetryBasis};
use crate::quota::Quota;

/// Slots of the shared result buffer. In: `N` (tokens asked for) and `LIMITER` (the slot number).
/// Out: the status in `N_OR_STATUS`, then the decision.
pub(crate) const SLOT_N_OR_STATUS: usize = 0;
const SLOT_ALLOWED: usize = 1;
const SLOT_RETRY_AFTER_MS: usize = 2;
const SLOT_BASIS: usize = 3;
const SLOT_TOKENS: usize = 4;
const SLOT_QUOTA_REMAINING: usize = 5;
const SLOT_LIMITER: usize = 6;
/// In (a JS clock, or a call resumed after the JS reader): the readings; out (status
/// `STATUS_NEEDS_READER`): the readings the stopped call took.
pub(crate) const SLOT_MONOTONIC_MS: usize = 7;
pub(crate) const SLOT_WALL_MS: usize = 8;
pub(crate) const SLOT_ELAPSED_REALTIME_MS: usize = 9;
/// In: 1 when `SLOT_ELAPSED_REALTIME_MS` holds a reading.
pub(crate) const SLOT_HAS_ELAPSED_REALTIME: usize = 10;
pub(crate) const RESULT_SLOTS: usize = 11;

const STATUS_DECIDED: f64 = 0.0;
pub(crate) const STATUS_DECIDED_WITH_ANOMALIES: f64 = 1.0;
pub(crate) const STATUS_ERROR: f64 = 2.0;
/// The call needs an elapsed-realtime reading from a JS reader; it changed nothing, and the JS
/// face calls `consumeSupplied` with the readings it took and the reader's.
pub(crate) const STATUS_NEEDS_READER: f64 = 3.0;
/// The limiter's clock is a JS clock: nothing changed, and the JS face reads it and calls
/// `consumeSupplied` (so the usual call on a native clock needs no check for it in JS).
pub(crate) const STATUS_NEEDS_READINGS: f64 = 4.0;

pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Options after the JS face has checked their types and applied defaults.
#[napi(object)]
pub struct LimiterOptions {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub suspend_policy: String,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
    /// Absent turns the plausibility check off.
    pub earliest_plausible_wall_ms: Option<f64>,
}

#[napi(object)]
pub struct StatusOutput {
    /// The call needs the JS reader's reading (nothing changed): call again with these readings.
    pub needs_reader: bool,
    pub taken_monotonic_ms: f64,
    pub taken_wall_ms: f64,
    pub tokens: f64,
    pub quota_used: Option<f64>,
    pub quota_remaining: Option<f64>,
    pub period: Option<PeriodOutput>,
}

#[napi(object)]
pub struct ErrorOutput {
    pub code: String,
    pub message: String,
}

struct LimiterState {
    limiter: Limiter,
    clock: ClockHandle,
    /// Raised by the current call; reused so the hot path does not allocate.
    anomalies: Vec<Anomaly>,
    /// The last call's error, for `limiterTakeError`.
    error: Option<CodedError>,
    /// The JS face's id for this limiter's `onAnomaly`, if it has one.
    anomaly_listener: Option<f64>,
    /// The largest `n` the quiet path takes: capacity, and never past 2^53 - 1.
    quiet_max_n: f64,
}

type LimiterCell = RefCell<LimiterState>;

/// The shared `Float64Array`, read and written one slot at a time (never borrowed as a slice:
/// the JS face calls back in with the same buffer for each step of a call).
pub(crate) struct ResultSlots(pub(crate) *mut f64);

impl ResultSlots {
    pub(crate) fn get(&self, slot: usize) -> f64 {
        assert!(slot < RESULT_SLOTS);
        // SAFETY: in bounds (the buffer has RESULT_SLOTS f64s, checked in `create_registry`), kept
        // alive by the registry, and only touched on the JS thread that owns it.
        unsafe { self.0.add(slot).read() }
    }

    pub(crate) fn set(&self, slot: usize, value: f64) {
        assert!(slot < RESULT_SLOTS);
        // SAFETY: as in `get`.
        unsafe { self.0.add(slot).write(value) }
    }

    /// The limiter's slot number, which the JS face writes as a `u32` into the first half of
    /// `SLOT_LIMITER` (through a `Uint32Array` on the same memory; same machine, same byte
    /// order). Read as an integer, it needs no float conversion: that conversion sat on the
    /// chain of loads each call waits for before its first clock reading (measured: ~5 ns).
    fn limiter_slot(&self) -> usize {
        // SAFETY: as in `get`; any bit pattern is a valid u32, and a wrong one names a slot the
        // bounds check refuses or another live limiter, never memory.
        unsafe { self.0.add(SLOT_LIMITER).cast::<u32>().read() as usize }
    }
}

/// One module instance's limiters and its result buffer. It lives as long as the module
/// instance's `tryConsume` functions (their finalizers release it), and holds nothing that keeps
/// JS alive but the result buffer: a module loaded again and dropped is collected whole.
struct Registry {
    id: u32,
    /// Set once by the JS face; routes anomalies to the limiters' handlers.
    dispatcher: RefCell<Option<AnomalyDispatcher>>,
    /// States are held inline (no box to chase on the hot path); while any call holds the
    /// vector borrowed, creating a limiter is refused rather than moving them.
    cells: RefCell<Vec<Option<LimiterCell>>>,
    free: RefCell<Vec<u32>>,
    result: ResultSlots,
    /// Keeps the result buffer alive while `result` points into it.
    _result_buffer: Float64Array,
}

/// This thread's registries, by id: one per load of the JS face (a test runner that re-runs
/// the module, or several `vm` contexts, get their own, never mixed up). Held weakly: a
/// registry leaves the table when it is dropped.
#[derive(Default)]
struct Registries {
    live: HashMap<u32, Weak<Registry>>,
    next_id: u32,
}

thread_local! {
    static REGISTRIES: RefCell<Registries> = RefCell::new(Registries::default());
    static CLEANUP_HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn registry(id: u32) -> CodedResult<Rc<Registry>> {
    REGISTRIES
        .with(|registries| registries.borrow().live.get(&id).and_then(Weak::upgrade))
        .ok_or_else(|| invalid_arg(format!("no limiter registry {id} on this thread")))
}

impl Drop for Registry {
    fn drop(&mut self) {
        // At thread teardown the table may be gone already.
        let _ = REGISTRIES.try_with(|registries| {
            if let Ok(mut registries) = registries.try_borrow_mut() {
                registries.live.remove(&self.id);
            }
        });
    }
}

pub(crate) const BUSY: &str = "the limiter is busy with another call (please report it: no JS runs inside a native call)";

impl Registry {
    /// Runs `body` on the limiter in `slot` (for the slow paths).
    fn with_cell<T>(&self, slot: u32, body: impl FnOnce(&mut LimiterState) -> CodedResult<T>) -> CodedResult<T> {
        let cells = self.cells.try_borrow().map_err(|_| coded("ERR_INTERNAL", "the limiter registry is busy"))?;
        let Some(Some(cell)) = cells.get(slot as usize) else {
            return Err(invalid_arg(format!("no limiter in slot {slot}")));
        };
        let mut state = cell.try_borrow_mut().map_err(|_| coded("ERR_INTERNAL", BUSY))?;
        body(&mut state)
    }

    fn insert(&self, cell: LimiterCell) -> CodedResult<u32> {
        let mut cells = self.cells.try_borrow_mut().map_err(|_| coded("ERR_INTERNAL", "the limiter registry is busy (please report it: no JS runs inside a native call)"))?;
        let cell = Some(cell);
        match self.free.borrow_mut().pop() {
            Some(slot) => {
                cells[slot as usize] = cell;
                Ok(slot)
            }
            None => {
                cells.push(cell);
                Ok((cells.len() - 1) as u32)
            }
        }
    }

    /// Queues `anomalies` for the listener's `onAnomaly`, if the limiter has one.
    fn notify(&self, listener: Option<f64>, anomalies: &[Anomaly]) {
        if let (Some(listener), Ok(dispatcher)) = (listener, self.dispatcher.try_borrow()) {
            if let Some(dispatcher) = dispatcher.as_ref() {
                anomalies.iter().for_each(|anomaly| deliver(dispatcher, listener, anomaly));
            }
        }
    }

    /// The hot path: the usual call on a native clock (clocks agree, inside the open quota
    /// period, nothing to report), decided in a small frame with no error or anomaly plumbing
    /// (measured: ~50 fewer instructions per call than the general path). `false` means nothing
    /// was consumed or written and the general path must take the call; it reads the clocks
    /// again, which is harmless (nothing was changed by the readings taken here).
    #[inline(always)]
    fn consume_quiet(&self) -> bool {
        let result = &self.result;
        // SAFETY: nothing below calls into JS or creates a limiter, so the vector cannot be
        // borrowed mutably while this shared reference is in use.
        let Ok(cells) = (unsafe { self.cells.try_borrow_unguarded() }) else {
            return false;
        };
        let Some(Some(cell)) = cells.get(result.limiter_slot()) else {
            return false;
        };
        let Ok(mut state) = cell.try_borrow_mut() else {
            return false;
        };
        let state = &mut *state;
        let n = result.get(SLOT_N_OR_STATUS);
        // (What an earlier call left in `error` or `anomalies` was taken by the JS face right
        // after it; the general path clears both before it decides.)
        if !(n >= 1.0 && n <= state.quiet_max_n) {
            return false;
        }
        let (monotonic_ms, wall_ms) = match &state.clock {
            ClockHandle::System(_) | ClockHandle::SystemWithReader => (clock::monotonic_ms(), clock::wall_ms()),
            ClockHandle::Manual(manual) => match manual.try_borrow() {
                Ok(manual) => (manual.monotonic_ms, manual.wall_ms),
                Err(_) => return false,
            },
            ClockHandle::Js { .. } => return false,
        };
        // SAFETY: 1 ≤ n ≤ 2^53 - 1 (checked above), so it fits an i64.
        let count = unsafe { n.to_int_unchecked::<i64>() } as u64;
        match state.limiter.try_consume_quiet(count, monotonic_ms, wall_ms) {
            Some(decision) => {
                write_decision(result, &decision);
                true
            }
            None => false,
        }
    }

    /// The general path: reads `n` and the slot (and with `supplied`, the readings the JS face
    /// took), decides, writes the decision. No allocation unless an anomaly or an error has to be
    /// reported.
    #[inline(never)]
    #[cold]
    fn consume(&self, supplied: bool) {
        let result = &self.result;
        // No JS runs during a native call (JS clocks are read by the JS face), so the borrows
        // below always succeed; they stay checked all the same.
        let Ok(cells) = self.cells.try_borrow() else {
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        };
        // The slot is read as a u32; the bounds check is all the guard it needs.
        let Some(Some(cell)) = cells.get(result.limiter_slot()) else {
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        };
        let Ok(mut state) = cell.try_borrow_mut() else {
            // Its state is borrowed elsewhere (cannot happen: no JS runs here).
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        };
        if !supplied && matches!(state.clock, ClockHandle::Js { .. }) {
            result.set(SLOT_N_OR_STATUS, STATUS_NEEDS_READINGS);
            return;
        }
        let n = result.get(SLOT_N_OR_STATUS);
        let state = &mut *state;
        state.anomalies.clear();
        if state.error.is_some() {
            state.error = None;
        }
        // The JS face has checked that `n` is a safe integer; the range check keeps a direct
        // call from asking for more than the bucket can hold.
        if !(n >= 1.0 && n <= state.limiter.capacity()) {
            state.error = Some(invalid_arg(format!(
                "n must be a positive safe integer no larger than capacity ({}); received {}",
                js_number(state.limiter.capacity()),
                js_number(n)
            )));
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        }
        let readings = if supplied { self.supplied_readings() } else { Supplied::default() };
        let mut clock = BoundClock::new(&state.clock, readings);
        match state.limiter.try_consume(n as i64 as u64, &mut clock, &mut state.anomalies) {
            Ok(decision) => {
                write_decision(result, &decision);
                if !state.anomalies.is_empty() {
                    result.set(SLOT_N_OR_STATUS, STATUS_DECIDED_WITH_ANOMALIES);
                    self.notify(state.anomaly_listener, &state.anomalies);
                }
            }
            Err(_) if clock.reader_wanted => {
                result.set(SLOT_MONOTONIC_MS, clock.taken.0);
                result.set(SLOT_WALL_MS, clock.taken.1);
                result.set(SLOT_N_OR_STATUS, STATUS_NEEDS_READER);
            }
            Err(error) => {
                state.error = Some(from_limiter(&error));
                result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            }
        }
    }

    /// The readings the JS face wrote into the result buffer.
    fn supplied_readings(&self) -> Supplied {
        let result = &self.result;
        Supplied {
            monotonic_ms: Some(result.get(SLOT_MONOTONIC_MS)),
            wall_ms: Some(result.get(SLOT_WALL_MS)),
            elapsed_realtime_ms: (result.get(SLOT_HAS_ELAPSED_REALTIME) == 1.0).then(|| result.get(SLOT_ELAPSED_REALTIME_MS)),
        }
    }
}

fn check(condition: bool, message: impl FnOnce() -> String) -> CodedResult<()> {
    if condition {
        Ok(())
    } else {
        Err(coded("ERR_INVALID_OPTION", message()))
    }
}

pub(crate) fn config_from(options: &LimiterOptions) -> CodedResult<LimiterConfig> {
    let LimiterOptions { capacity, refill_per_second, initial_tokens, .. } = *options;
    check(capacity.is_finite() && capacity > 0.0, || format!("capacity must be a finite number > 0; received {}", js_number(capacity)))?;
    check(refill_per_second.is_finite() && refill_per_second > 0.0, || {
        format!("refillPerSecond must be a finite number > 0; received {}", js_number(refill_per_second))
    })?;
    check((0.0..=capacity).contains(&initial_tokens), || {
        format!("initialTokens must be a number from 0 to capacity ({}); received {}", js_number(capacity), js_number(initial_tokens))
    })?;
    let suspend_policy = SuspendPolicy::parse(&options.suspend_policy).ok_or_else(|| {
        coded("ERR_INVALID_OPTION", format!("suspendPolicy must be 'ignore', 'credit' or 'refuse'; received '{}'", options.suspend_policy))
    })?;
    let quota = match (&options.quota_period, options.quota_limit) {
        (Some(period), Some(limit)) => {
            check(limit >= 0.0 && limit.fract() == 0.0 && limit <= MAX_SAFE_INTEGER, || {
                format!("quota.limit must be a non-negative safe integer; received {}", js_number(limit))
            })?;
            Some(Quota::new(limit as u64, parse_spec(period, "quota.period")?))
        }
        (None, None) => None,
        _ => return Err(coded("ERR_INVALID_OPTION", "quota needs both limit and period")),
    };
    if let Some(earliest) = options.earliest_plausible_wall_ms {
        check(earliest.is_finite(), || format!("earliestPlausibleWallMs must be a finite number or null; received {}", js_number(earliest)))?;
    }
    Ok(LimiterConfig {
        capacity,
        refill_per_second,
        initial_tokens,
        suspend_policy,
        quota,
        earliest_plausible_wall_ms: options.earliest_plausible_wall_ms,
    })
}

pub(crate) fn write_decision(result: &ResultSlots, decision: &Decision) {
    result.set(SLOT_N_OR_STATUS, STATUS_DECIDED);
    result.set(SLOT_ALLOWED, if decision.allowed { 1.0 } else { 0.0 });
    result.set(SLOT_RETRY_AFTER_MS, decision.retry_after_ms);
    let basis = match decision.retry_after_basis {
        None => 0.0,
        Some(RetryBasis::MonotonicRefill) => 1.0,
        Some(RetryBasis::WallPeriod) => 2.0,
    };
    result.set(SLOT_BASIS, basis);
    result.set(SLOT_TOKENS, decision.tokens);
    result.set(SLOT_QUOTA_REMAINING, decision.quota_remaining.map_or(f64::NAN, |remaining| remaining as i64 as f64));
}

/// The raw `tryConsume` callback for native clocks: `data` is this thread's `Registry`.
unsafe extern "C" fn fast_consume(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `consume_with`.
    unsafe { consume_with::<false>(env, info) }
}

/// The raw callback for readings the JS face supplies (a JS clock, or a call resumed after the
/// JS elapsed-realtime reader).
unsafe extern "C" fn supplied_consume(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: as in `consume_with`.
    unsafe { consume_with::<true>(env, info) }
}

/// # Safety
/// `env` and `info` are N-API's own, for a function made by `consume_function`.
#[inline(always)]
unsafe fn consume_with<const SUPPLIED: bool>(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let data = unsafe { callback_data(env, info) };
    if data.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `data` is an `Rc<Registry>` leaked in `consume_function` and released only by the
    // function's finalizer, so it is alive while the function can be called.
    let registry = unsafe { &*(data as *const Registry) };
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // A const parameter, so that each raw function has a closure of its own, inlined into it
        // (one shared closure was called out of line: ~1 ns per call, measured).
        if SUPPLIED {
            registry.consume(true);
        } else if !registry.consume_quiet() {
            registry.consume(false);
        }
    }));
    if let Err(payload) = decided {
        let slot = registry.result.limiter_slot() as u32;
        let _ = registry.with_cell(slot, |state| {
            state.error = Some(internal(payload.as_ref()));
            Ok(())
        });
        registry.result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
    }
    ptr::null_mut()
}

unsafe extern "C" fn release_registry(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: balances the `Rc::into_raw` in `consume_function`; runs once, when the function dies.
    drop(unsafe { Rc::from_raw(data as *const Registry) });
}

/// Makes a registry around `result_buffer`: `{ id, consume, consumeSupplied }`, the two
/// `tryConsume` functions (raw functions of no arguments; `consumeSupplied` takes the readings
/// from the result buffer).
#[napi(js_name = "createRegistry", ts_return_type = "{ id: number, consume: () => void, consumeSupplied: () => void }")]
pub fn create_registry<'env>(env: &'env Env, mut result_buffer: Float64Array) -> napi::Result<Object<'env>> {
    guard(env, move || {
        if result_buffer.len() < RESULT_SLOTS {
            return Err(invalid_arg(format!("the result buffer needs {RESULT_SLOTS} slots")));
        }
        if !CLEANUP_HOOKED.with(|hooked| hooked.replace(true)) {
            // Drop the limiters (their JS references and threadsafe functions) while the env lives.
            env.add_env_cleanup_hook((), |()| {
                let live: Vec<Rc<Registry>> = REGISTRIES.with(|registries| registries.borrow().live.values().filter_map(Weak::upgrade).collect());
                for registry in live {
                    if let Ok(mut cells) = registry.cells.try_borrow_mut() {
                        cells.clear();
                    }
                    if let Ok(mut dispatcher) = registry.dispatcher.try_borrow_mut() {
                        dispatcher.take();
                    }
                }
            })
            .map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        }
        // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
        let result = unsafe { result_buffer.as_mut() }.as_mut_ptr();
        let id = REGISTRIES.with(|registries| {
            let mut registries = registries.borrow_mut();
            registries.next_id += 1;
            registries.next_id
        });
        let registry = Rc::new(Registry {
            id,
            dispatcher: RefCell::new(None),
            cells: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            result: ResultSlots(result),
            _result_buffer: result_buffer,
        });
        REGISTRIES.with(|registries| registries.borrow_mut().live.insert(id, Rc::downgrade(&registry)));
        // The two functions hold the registry: it lives as long as they do.
        let mut made = Object::new(env).map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        let consume = consume_function(env, &registry, false)?;
        let consume_supplied = consume_function(env, &registry, true)?;
        let set = |made: &mut Object, name: &str, value: Unknown<'_>| made.set_named_property(name, value).map_err(|e| coded("ERR_INTERNAL", e.reason));
        made.set_named_property("id", id).map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        set(&mut made, "consume", consume)?;
        set(&mut made, "consumeSupplied", consume_supplied)?;
        Ok(made)
    })
}

/// Sets the registry's anomaly dispatcher: `handler({ listener, anomaly })`, called asynchronously.
#[napi(js_name = "registryOnAnomaly")]
pub fn registry_on_anomaly(env: &Env, registry_id: u32, handler: Function<'_, AnomalyDelivery, Unknown<'static>>) -> napi::Result<()> {
    guard(env, move || {
        let dispatcher = build_dispatcher(env, &handler).map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        let registry = registry(registry_id)?;
        let mut slot = registry.dispatcher.try_borrow_mut().map_err(|_| coded("ERR_INTERNAL", "the registry is busy"))?;
        *slot = Some(dispatcher);
        Ok(())
    })
}

/// A `tryConsume` function of the registry (`supplied`: the one that takes the readings from the
/// result buffer), holding it.
fn consume_function<'env>(env: &'env Env, registry: &Rc<Registry>, supplied: bool) -> CodedResult<Unknown<'env>> {
    let data = Rc::into_raw(registry.clone()) as *mut c_void;
    let callback = if supplied { supplied_consume } else { fast_consume };
    // SAFETY: `data` lives until `release_registry`, which releases it once.
    unsafe { function_with_data(env, "tryConsume", callback, data, release_registry) }.ok_or_else(|| {
        // SAFETY: N-API refused, so nothing else owns `data`.
        drop(unsafe { Rc::from_raw(data as *const Registry) });
        coded("ERR_INTERNAL", "could not create the tryConsume function")
    })
}

/// The clock a limiter reads: `clock_kind` as for `createLimiter`.
pub(crate) fn clock_handle(clock_kind: &str, manual: Option<&NativeManualClock>) -> CodedResult<ClockHandle> {
    Ok(match clock_kind {
        "system" => ClockHandle::System(SystemClock { with_boottime: false }),
        "system-boottime" => ClockHandle::System(SystemClock { with_boottime: true }),
        "system-reader" => ClockHandle::SystemWithReader,
        "manual" => ClockHandle::Manual(manual.ok_or_else(|| invalid_arg("a manual clock is missing"))?.state.clone()),
        "js" => ClockHandle::Js { has_reader: false },
        "js-reader" => ClockHandle::Js { has_reader: true },
        other => return Err(invalid_arg(format!("unknown clock kind '{other}'"))),
    })
}

/// Queues anomalies for a listener's `onAnomaly` through the registry's dispatcher (a keyed
/// limiter shares its module's dispatcher, so its handler is held weakly too).
pub(crate) fn notify_listener(registry_id: u32, listener: Option<f64>, anomalies: &[Anomaly]) {
    if listener.is_some() && !anomalies.is_empty() {
        if let Ok(registry) = registry(registry_id) {
            registry.notify(listener, anomalies);
        }
    }
}

/// Creates a limiter and returns its slot. `clock_kind`: 'system' | 'system-boottime' |
/// 'system-reader' | 'manual' | 'js' | 'js-reader'. The JS face reads the clocks that are JS
/// ('system-reader': all three readings) and passes the starting readings.
#[napi(js_name = "createLimiter")]
#[allow(clippy::too_many_arguments)]
pub fn create_limiter(
    env: &Env,
    registry_id: u32,
    options: LimiterOptions,
    clock_kind: String,
    manual: Option<&NativeManualClock>,
    monotonic_ms: Option<f64>,
    wall_ms: Option<f64>,
    elapsed_realtime_ms: Option<f64>,
    anomaly_listener: Option<f64>,
) -> napi::Result<u32> {
    guard(env, move || {
        let registry = registry(registry_id)?;
        let config = config_from(&options)?;
        let clock = clock_handle(&clock_kind, manual)?;
        let supplied = Supplied { monotonic_ms, wall_ms, elapsed_realtime_ms };
        let limiter = Limiter::new(config, &mut BoundClock::new(&clock, supplied)).map_err(|e| from_limiter(&e))?;
        let quiet_max_n = limiter.capacity().min(MAX_SAFE_INTEGER);
        registry.insert(RefCell::new(LimiterState { limiter, clock, anomalies: Vec::new(), error: None, anomaly_listener, quiet_max_n }))
    })
}

/// Frees a slot (the JS face calls it when the limiter's object has been collected) and returns
/// the limiter's anomaly listener id, if it had one.
#[napi(js_name = "releaseLimiter")]
pub fn release_limiter(registry_id: u32, slot: u32) -> Option<f64> {
    let registry = registry(registry_id).ok()?;
    let released = registry.cells.try_borrow_mut().ok()?.get_mut(slot as usize).and_then(Option::take)?;
    registry.free.borrow_mut().push(slot);
    released.into_inner().anomaly_listener
}

/// The anomalies of the slot's last `tryConsume`, as objects (called only when there were some).
#[napi(js_name = "limiterTakeAnomalies")]
pub fn limiter_take_anomalies(env: &Env, registry_id: u32, slot: u32) -> napi::Result<Vec<AnomalyOutput>> {
    guard(env, || registry(registry_id)?.with_cell(slot, |state| Ok(state.anomalies.iter().map(AnomalyOutput::from).collect())))
}

/// The error of the slot's last `tryConsume`.
#[napi(js_name = "limiterTakeError")]
pub fn limiter_take_error(registry_id: u32, slot: u32) -> ErrorOutput {
    let error = match registry(registry_id).and_then(|registry| registry.with_cell(slot, |state| Ok(state.error.take()))) {
        Ok(Some(error)) | Err(error) => error,
        Ok(None) => coded("ERR_INTERNAL", BUSY),
    };
    ErrorOutput { code: error.status, message: error.reason }
}

/// `status()`: with the readings the JS face took for a JS clock (or for a call resumed after the
/// JS reader); `needs_reader` when the JS reader must be called first (nothing changed).
#[napi(js_name = "limiterStatus")]
pub fn limiter_status(
    env: &Env,
    registry_id: u32,
    slot: u32,
    monotonic_ms: Option<f64>,
    wall_ms: Option<f64>,
    elapsed_realtime_ms: Option<f64>,
) -> napi::Result<StatusOutput> {
    guard(env, || {
        let registry = registry(registry_id)?;
        registry.with_cell(slot, |state| {
            let mut anomalies = Vec::new();
            let mut clock = BoundClock::new(&state.clock, Supplied { monotonic_ms, wall_ms, elapsed_realtime_ms });
            let status = match state.limiter.status(&mut clock, &mut anomalies) {
                Ok(status) => status,
                Err(_) if clock.reader_wanted => {
                    let (taken_monotonic_ms, taken_wall_ms) = clock.taken;
                    let status = StatusOutput { needs_reader: true, taken_monotonic_ms, taken_wall_ms, tokens: f64::NAN, quota_used: None, quota_remaining: None, period: None };
                    return Ok(status);
                }
                Err(error) => return Err(from_limiter(&error)),
            };
            registry.notify(state.anomaly_listener, &anomalies);
            Ok(StatusOutput {
                needs_reader: false,
                taken_monotonic_ms: f64::NAN,
                taken_wall_ms: f64::NAN,
                tokens: status.tokens,
                quota_used: status.quota_used.map(|used| used as f64),
                quota_remaining: status.quota_remaining.map(|remaining| remaining as f64),
                period: match (state.limiter.quota(), &status.period) {
                    (Some(quota), Some(period)) => Some(period_output(&quota.spec, period)),
                    _ => None,
                },
            })
        })
    })
}

/// What a call that reads the clocks outside the hot path reports: done, or the JS reader must be
/// read first (nothing changed: call again with the readings taken and the reader's).
#[napi(object)]
pub struct CallOutput {
    pub needs_reader: bool,
    pub taken_monotonic_ms: f64,
    pub taken_wall_ms: f64,
}

/// SPEC §5 `refund(n)`: reconciles, then gives back `n` tokens and quota units. With the readings
/// the JS face took for a JS clock (or for a call resumed after the JS reader).
#[napi(js_name = "limiterRefund")]
#[allow(clippy::too_many_arguments)]
pub fn limiter_refund(
    env: &Env,
    registry_id: u32,
    slot: u32,
    n: f64,
    monotonic_ms: Option<f64>,
    wall_ms: Option<f64>,
    elapsed_realtime_ms: Option<f64>,
) -> napi::Result<CallOutput> {
    guard(env, || {
        let count = positive_safe_integer(n)?;
        let registry = registry(registry_id)?;
        registry.with_cell(slot, |state| {
            let mut anomalies = Vec::new();
            let mut clock = BoundClock::new(&state.clock, Supplied { monotonic_ms, wall_ms, elapsed_realtime_ms });
            match state.limiter.refund(count, &mut clock, &mut anomalies) {
                Ok(()) => {}
                Err(_) if clock.reader_wanted => {
                    let (taken_monotonic_ms, taken_wall_ms) = clock.taken;
                    return Ok(CallOutput { needs_reader: true, taken_monotonic_ms, taken_wall_ms });
                }
                Err(error) => return Err(from_limiter(&error)),
            }
            registry.notify(state.anomaly_listener, &anomalies);
            Ok(CallOutput { needs_reader: false, taken_monotonic_ms: f64::NAN, taken_wall_ms: f64::NAN })
        })
    })
}

/// `n` of `refund`: a positive safe integer (the JS face checks it first; this guards direct calls).
pub(crate) fn positive_safe_integer(n: f64) -> CodedResult<u64> {
    if (1.0..=MAX_SAFE_INTEGER).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid_arg(format!("n must be a positive safe integer; received {}", js_number(n))))
    }
}

/// The limiter's own period spec applied to `wall_ms`; `None` without a quota.
#[napi(js_name = "limiterPeriodFor")]
pub fn limiter_period_for(env: &Env, registry_id: u32, slot: u32, wall_ms: f64) -> napi::Result<Option<PeriodOutput>> {
    guard(env, || {
        registry(registry_id)?.with_cell(slot, |state| {
            let Some(quota) = state.limiter.quota() else {
                return Ok(None);
            };
            check_wall_ms(wall_ms)?;
            Ok(Some(period_output(&quota.spec, &quota.spec.period_for(wall_ms))))
        })
    })
}

/// How many limiters this thread's registries hold (for the lifecycle tests).
#[napi(js_name = "liveLimiters")]
pub fn live_limiters() -> u32 {
    REGISTRIES.with(|registries| {
        let registries = registries.borrow();
        let live = registries.live.values().filter_map(Weak::upgrade);
        live.map(|registry| registry.cells.try_borrow().map_or(0, |cells| cells.iter().flatten().count())).sum::<usize>() as u32
    })
}

/// How many registries (module instances) are alive on this thread (for the lifecycle tests).
#[napi(js_name = "liveRegistries")]
pub fn live_registries() -> u32 {
    REGISTRIES.with(|registries| registries.borrow().live.values().filter(|registry| registry.strong_count() > 0).count() as u32)
}
