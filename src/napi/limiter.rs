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
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::anomaly::{build_dispatcher, deliver, AnomalyDelivery, AnomalyDispatcher, AnomalyOutput};
use super::calendar::{check_wall_ms, parse_spec, period_output, PeriodOutput, PeriodSpecInput};
use super::clock::{BoundClock, ClockHandle, NativeManualClock};
use super::errors::{coded, from_limiter, guard, internal, invalid_arg, CodedError, CodedResult};
use super::raw::{callback_data, function_with_data};
use crate::anomaly::Anomaly;
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
pub(crate) const RESULT_SLOTS: usize = 7;

const STATUS_DECIDED: f64 = 0.0;
pub(crate) const STATUS_DECIDED_WITH_ANOMALIES: f64 = 1.0;
pub(crate) const STATUS_ERROR: f64 = 2.0;

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
/// a JS clock may re-enter another limiter's `tryConsume` in the middle of a call).
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

/// This thread's limiters and its result buffer.
struct Registry {
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

thread_local! {
    /// This thread's registries, by id: one per load of the JS face (a test runner that re-runs
    /// the module, or several `vm` contexts, get their own, never mixed up).
    static REGISTRIES: RefCell<Vec<Rc<Registry>>> = const { RefCell::new(Vec::new()) };
    static CLEANUP_HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn registry(id: u32) -> CodedResult<Rc<Registry>> {
    REGISTRIES
        .with(|registries| registries.borrow().get(id as usize).cloned())
        .ok_or_else(|| invalid_arg(format!("no limiter registry {id} on this thread")))
}

pub(crate) const BUSY: &str = "the clock called back into this limiter while it was reading it";

impl Registry {
    /// Runs `body` on the limiter in `slot` (for the slow paths).
    fn with_cell<T>(&self, slot: u32, body: impl FnOnce(&mut LimiterState) -> CodedResult<T>) -> CodedResult<T> {
        let cells = self.cells.try_borrow().map_err(|_| coded("ERR_INTERNAL", "the limiter registry is busy"))?;
        let Some(Some(cell)) = cells.get(slot as usize) else {
            return Err(invalid_arg(format!("no limiter in slot {slot}")));
        };
        let mut state = cell.try_borrow_mut().map_err(|_| coded("ERR_CLOCK_READING", BUSY))?;
        body(&mut state)
    }

    fn insert(&self, cell: LimiterCell) -> CodedResult<u32> {
        let mut cells = self.cells.try_borrow_mut().map_err(|_| coded("ERR_INTERNAL", "cannot create a limiter while a clock is being read"))?;
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
        if !(n >= 1.0 && n <= state.quiet_max_n) || state.error.is_some() || !state.anomalies.is_empty() {
            return false;
        }
        let (monotonic_ms, wall_ms) = match &state.clock {
            ClockHandle::System(_) | ClockHandle::SystemWithReader(_) => (clock::monotonic_ms(), clock::wall_ms()),
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

    /// The general path: reads `n` and the slot, decides, writes the decision. No allocation
    /// unless an anomaly or an error has to be reported.
    #[inline(never)]
    #[cold]
    fn consume(&self, env: sys::napi_env) {
        let result = &self.result;
        // The registry stays borrowed (shared) for the call, so a re-entrant `tryConsume` works
        // and creating a limiter from inside a clock reading is refused.
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
            // A JS clock called back into the same limiter; its state is busy.
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        };
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
                "n must be a positive safe integer no larger than capacity ({}); received {n}",
                state.limiter.capacity()
            )));
            result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            return;
        }
        let env = Env::from_raw(env);
        let mut clock = BoundClock { env: &env, handle: &state.clock };
        match state.limiter.try_consume(n as i64 as u64, &mut clock, &mut state.anomalies) {
            Ok(decision) => {
                write_decision(result, &decision);
                if !state.anomalies.is_empty() {
                    result.set(SLOT_N_OR_STATUS, STATUS_DECIDED_WITH_ANOMALIES);
                    self.notify(state.anomaly_listener, &state.anomalies);
                }
            }
            Err(error) => {
                state.error = Some(from_limiter(&error));
                result.set(SLOT_N_OR_STATUS, STATUS_ERROR);
            }
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
    check(capacity.is_finite() && capacity > 0.0, || format!("capacity must be a finite number > 0; received {capacity}"))?;
    check(refill_per_second.is_finite() && refill_per_second > 0.0, || {
        format!("refillPerSecond must be a finite number > 0; received {refill_per_second}")
    })?;
    check((0.0..=capacity).contains(&initial_tokens), || {
        format!("initialTokens must be a number from 0 to capacity ({capacity}); received {initial_tokens}")
    })?;
    let suspend_policy = SuspendPolicy::parse(&options.suspend_policy).ok_or_else(|| {
        coded("ERR_INVALID_OPTION", format!("suspendPolicy must be 'ignore', 'credit' or 'refuse'; received '{}'", options.suspend_policy))
    })?;
    let quota = match (&options.quota_period, options.quota_limit) {
        (Some(period), Some(limit)) => {
            check(limit >= 0.0 && limit.fract() == 0.0 && limit <= MAX_SAFE_INTEGER, || {
                format!("quota.limit must be a non-negative safe integer; received {limit}")
            })?;
            Some(Quota::new(limit as u64, parse_spec(period, "quota.period")?))
        }
        (None, None) => None,
        _ => return Err(coded("ERR_INVALID_OPTION", "quota needs both limit and period")),
    };
    if let Some(earliest) = options.earliest_plausible_wall_ms {
        check(earliest.is_finite(), || format!("earliestPlausibleWallMs must be a finite number or null; received {earliest}"))?;
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

pub(crate) fn make_reader(function: Option<Function<'_, (), Unknown<'_>>>, name: &str) -> CodedResult<super::clock::Reader> {
    let function = function.ok_or_else(|| invalid_arg(format!("clock.{name} is missing")))?;
    // The reference outlives this call; it is only ever borrowed back on this thread.
    let reference: FunctionRef<(), Unknown<'_>> = function.create_ref().map_err(|e| coded("ERR_INTERNAL", e.reason))?;
    // SAFETY: `FunctionRef` only stores a napi_ref; the `'static` names no borrowed data.
    Ok(unsafe { std::mem::transmute::<FunctionRef<(), Unknown<'_>>, super::clock::Reader>(reference) })
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

/// The raw `tryConsume` callback: `data` is this thread's `Registry`.
unsafe extern "C" fn fast_consume(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    // SAFETY: N-API's own env and info.
    let data = unsafe { callback_data(env, info) };
    if data.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `data` is an `Rc<Registry>` leaked in `registry_consume` and released only by the
    // function's finalizer, so it is alive while the function can be called.
    let registry = unsafe { &*(data as *const Registry) };
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if !registry.consume_quiet() {
            registry.consume(env);
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
    // SAFETY: balances the `Rc::into_raw` in `registry_consume`; runs once, when the function dies.
    drop(unsafe { Rc::from_raw(data as *const Registry) });
}

/// Makes a registry around `result_buffer` and returns its id.
#[napi(js_name = "createRegistry")]
pub fn create_registry(env: &Env, mut result_buffer: Float64Array) -> napi::Result<u32> {
    guard(env, move || {
        if result_buffer.len() < RESULT_SLOTS {
            return Err(invalid_arg(format!("the result buffer needs {RESULT_SLOTS} slots")));
        }
        if !CLEANUP_HOOKED.with(|hooked| hooked.replace(true)) {
            // Drop the limiters (their JS references and threadsafe functions) while the env lives.
            env.add_env_cleanup_hook((), |()| {
                let registries = REGISTRIES.with(|registries| std::mem::take(&mut *registries.borrow_mut()));
                for registry in registries {
                    if let Ok(mut cells) = registry.cells.try_borrow_mut() {
                        cells.clear();
                    }
                }
            })
            .map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        }
        // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
        let result = unsafe { result_buffer.as_mut() }.as_mut_ptr();
        let registry = Rc::new(Registry {
            dispatcher: RefCell::new(None),
            cells: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            result: ResultSlots(result),
            _result_buffer: result_buffer,
        });
        Ok(REGISTRIES.with(|registries| {
            let mut registries = registries.borrow_mut();
            registries.push(registry);
            (registries.len() - 1) as u32
        }))
    })
}

/// Sets the registry's anomaly dispatcher: `handler({ listener, anomaly })`, called asynchronously.
#[napi(js_name = "registryOnAnomaly")]
pub fn registry_on_anomaly(env: &Env, registry_id: u32, handler: Function<'_, AnomalyDelivery, Unknown<'static>>) -> napi::Result<()> {
    guard(env, move || {
        let dispatcher = build_dispatcher(&handler).map_err(|e| coded("ERR_INTERNAL", e.reason))?;
        let registry = registry(registry_id)?;
        let mut slot = registry.dispatcher.try_borrow_mut().map_err(|_| coded("ERR_INTERNAL", "the registry is busy"))?;
        *slot = Some(dispatcher);
        Ok(())
    })
}

/// The registry's `tryConsume`: a raw function of no arguments whose data is the registry.
#[napi(js_name = "registryConsume")]
pub fn registry_consume<'env>(env: &'env Env, registry_id: u32) -> napi::Result<Unknown<'env>> {
    guard(env, move || {
        let data = Rc::into_raw(registry(registry_id)?) as *mut c_void;
        // SAFETY: `data` lives until `release_registry`, which releases it once.
        unsafe { function_with_data(env, "tryConsume", fast_consume, data, release_registry) }.ok_or_else(|| {
            // SAFETY: N-API refused, so nothing else owns `data`.
            drop(unsafe { Rc::from_raw(data as *const Registry) });
            coded("ERR_INTERNAL", "could not create the tryConsume function")
        })
    })
}

/// The clock a limiter reads. `clock_kind`: 'system' | 'system-boottime' | 'system-reader' |
/// 'manual' | 'js'.
pub(crate) fn clock_handle(
    clock_kind: &str,
    manual: Option<&NativeManualClock>,
    monotonic: Option<Function<'_, (), Unknown<'_>>>,
    wall: Option<Function<'_, (), Unknown<'_>>>,
    elapsed_realtime: Option<Function<'_, (), Unknown<'_>>>,
) -> CodedResult<ClockHandle> {
    Ok(match clock_kind {
        "system" => ClockHandle::System(SystemClock { with_boottime: false }),
        "system-boottime" => ClockHandle::System(SystemClock { with_boottime: true }),
        "system-reader" => ClockHandle::SystemWithReader(make_reader(elapsed_realtime, "elapsedRealtimeMs")?),
        "manual" => ClockHandle::Manual(manual.ok_or_else(|| invalid_arg("a manual clock is missing"))?.state.clone()),
        "js" => ClockHandle::Js {
            monotonic: make_reader(monotonic, "monotonicMs")?,
            wall: make_reader(wall, "wallMs")?,
            elapsed_realtime: match elapsed_realtime {
                Some(reader) => Some(make_reader(Some(reader), "elapsedRealtimeMs")?),
                None => None,
            },
        },
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
/// 'system-reader' | 'manual' | 'js'.
#[napi(js_name = "createLimiter")]
#[allow(clippy::too_many_arguments)]
pub fn create_limiter(
    env: &Env,
    registry_id: u32,
    options: LimiterOptions,
    clock_kind: String,
    manual: Option<&NativeManualClock>,
    monotonic: Option<Function<'_, (), Unknown<'_>>>,
    wall: Option<Function<'_, (), Unknown<'_>>>,
    elapsed_realtime: Option<Function<'_, (), Unknown<'_>>>,
    anomaly_listener: Option<f64>,
) -> napi::Result<u32> {
    guard(env, move || {
        let registry = registry(registry_id)?;
        let config = config_from(&options)?;
        let clock = clock_handle(&clock_kind, manual, monotonic, wall, elapsed_realtime)?;
        let limiter = Limiter::new(config, &mut BoundClock { env, handle: &clock }).map_err(|e| from_limiter(&e))?;
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
        Ok(None) => coded("ERR_CLOCK_READING", BUSY),
    };
    ErrorOutput { code: error.status, message: error.reason }
}

#[napi(js_name = "limiterStatus")]
pub fn limiter_status(env: &Env, registry_id: u32, slot: u32) -> napi::Result<StatusOutput> {
    guard(env, || {
        let registry = registry(registry_id)?;
        registry.with_cell(slot, |state| {
            let mut anomalies = Vec::new();
            let mut clock = BoundClock { env, handle: &state.clock };
            let status = state.limiter.status(&mut clock, &mut anomalies).map_err(|e| from_limiter(&e))?;
            registry.notify(state.anomaly_listener, &anomalies);
            Ok(StatusOutput {
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

/// SPEC §5 `refund(n)`: reconciles, then gives back `n` tokens and quota units.
#[napi(js_name = "limiterRefund")]
pub fn limiter_refund(env: &Env, registry_id: u32, slot: u32, n: f64) -> napi::Result<()> {
    guard(env, || {
        let count = positive_safe_integer(n)?;
        let registry = registry(registry_id)?;
        registry.with_cell(slot, |state| {
            let mut anomalies = Vec::new();
            let mut clock = BoundClock { env, handle: &state.clock };
            state.limiter.refund(count, &mut clock, &mut anomalies).map_err(|e| from_limiter(&e))?;
            registry.notify(state.anomaly_listener, &anomalies);
            Ok(())
        })
    })
}

/// `n` of `refund`: a positive safe integer (the JS face checks it first; this guards direct calls).
pub(crate) fn positive_safe_integer(n: f64) -> CodedResult<u64> {
    if (1.0..=MAX_SAFE_INTEGER).contains(&n) && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid_arg(format!("n must be a positive safe integer; received {n}")))
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
        let live = registries.iter().map(|registry| registry.cells.try_borrow().map_or(0, |cells| cells.iter().flatten().count()));
        live.sum::<usize>() as u32
    })
}
