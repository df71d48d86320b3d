//! `KeyedQuotaClock`'s native half: a thin layer over [`KeyedLimiter`].
//!
//! The hot path is shaped like `QuotaClock`'s: one raw N-API function per limiter, called with
//! the key as its only argument; the JS face writes `n` and the operation into the limiter's own
//! `Float64Array` and reads the decision back from it. The key is read as UTF-16 into a stack
//! buffer (one copy, exact for every string, lone surrogates included) and stored as Latin-1 when
//! it fits (see README "Performance" for the alternatives measured).

use std::cell::RefCell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;
use std::rc::Rc;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::anomaly::AnomalyOutput;
use super::buffer::{write_decision, ResultBuffer};
use super::calendar::{parse_spec, PeriodOutput, PeriodSpecInput};
use super::clock::{BoundClock, ClockHandle, Supplied};
use super::errors::{coded, from_limiter, guard, internal, invalid_arg, CodedError, CodedResult};
use super::limiter::ErrorOutput;
use super::options::{
    config_from, positive_safe_integer, ClockInput, LimiterOptions, MAX_SAFE_INTEGER,
};
use super::raw::function_with_data;
use super::registry::{notify_listener, BUSY, NO_STORED_ERROR};
use crate::anomaly::{js_number, Anomaly};
use crate::clock;
use crate::contract::buffer;
use crate::keyed::{
    words_for, Key, KeyBuf, KeyPolicy, KeyStatus, KeyedConfig, KeyedLimiter, PolicyId, Snapshot,
    SnapshotError, Target, DEFAULT_POLICY,
};

/// Keys are 1 to 256 UTF-16 code units; one more unit tells a longer string.
const MAX_KEY_UNITS: usize = 256;

/// A key's limits as the JS face normalized them (defaults filled in, types checked).
#[napi(object)]
pub struct PolicyInput {
    pub capacity: f64,
    pub refill_per_second: f64,
    pub initial_tokens: f64,
    pub quota_limit: Option<f64>,
    pub quota_period: Option<PeriodSpecInput>,
    /// How messages name it, e.g. `policy("tenant-1")`.
    pub path: String,
}

#[napi(object)]
pub struct KeyStatusOutput {
    /// Set when the JS face must bring something first (nothing was read or changed): 'policy'
    /// (call `policy(key)`), 'readings' (read the JS clock), 'reader' (read the JS elapsed-realtime
    /// reader; the call's readings are in `taken_*`).
    pub needs: Option<String>,
    pub taken_monotonic_ms: f64,
    pub taken_wall_ms: f64,
    pub tokens: f64,
    pub quota_used: Option<f64>,
    pub quota_remaining: Option<f64>,
    pub period: Option<PeriodOutput>,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub quota_limit: Option<f64>,
}

struct KeyedState {
    limiter: KeyedLimiter,
    clock: ClockHandle,
    /// Raised by the current call; reused so the hot path does not allocate.
    anomalies: Vec<Anomaly>,
    /// The last raw call's error, for `takeError`.
    error: Option<CodedError>,
    registry_id: u32,
    anomaly_listener: Option<f64>,
    has_policy: bool,
    result: ResultBuffer,
    /// Keeps the result buffer alive while `result` points into it.
    _result_buffer: Float64Array,
}

/// What the raw function's data points at: the state, and the result buffer's address outside
/// it (so a call that finds the state busy can still say so).
struct KeyedCell {
    result: ResultBuffer,
    state: RefCell<KeyedState>,
}

/// Room for one key read from JS: one unit more than a key may have, to tell a longer string.
const SCRATCH_UNITS: usize = MAX_KEY_UNITS + 2;

/// Stack buffers for one key, left uninitialized (zeroing them was measurably slower per call).
struct KeyScratch {
    units: MaybeUninit<[u16; SCRATCH_UNITS]>,
    words: MaybeUninit<[u64; SCRATCH_WORDS]>,
}

/// Words for the longest key read: 2 bytes per unit.
const SCRATCH_WORDS: usize = (2 * SCRATCH_UNITS).div_ceil(8);

impl KeyScratch {
    #[inline(always)]
    fn new() -> KeyScratch {
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
    fn read(&mut self, env: sys::napi_env, value: sys::napi_value) -> CodedResult<Key<'_>> {
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
            return Err(coded("ERR_INVALID_ARG", "key must be a string"));
        }
        if !(1..=MAX_KEY_UNITS).contains(&len) {
            return Err(coded(
                "ERR_INVALID_ARG",
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

/// A key argument of a slow-path method, checked like the hot path checks it.
fn key_argument(env: &Env, value: &Unknown<'_>) -> CodedResult<KeyBuf> {
    let mut scratch = KeyScratch::new();
    let key = scratch.read(env.raw(), value.raw())?;
    Ok(KeyBuf {
        wide: key.wide,
        len: key.len,
        words: key.words.to_vec(),
    })
}

fn check(condition: bool, message: impl FnOnce() -> String) -> CodedResult<()> {
    if condition {
        Ok(())
    } else {
        Err(coded("ERR_INVALID_OPTION", message()))
    }
}

/// Validates a normalized policy's values (the JS face checked types and merged the defaults).
fn key_policy(input: &PolicyInput) -> CodedResult<KeyPolicy> {
    let PolicyInput {
        capacity,
        refill_per_second,
        initial_tokens,
        ref path,
        ..
    } = *input;
    check(capacity.is_finite() && capacity > 0.0, || {
        format!(
            "{path}.capacity must be a finite number > 0; received {}",
            js_number(capacity)
        )
    })?;
    check(
        refill_per_second.is_finite() && refill_per_second > 0.0,
        || {
            format!(
                "{path}.refillPerSecond must be a finite number > 0; received {}",
                js_number(refill_per_second)
            )
        },
    )?;
    check((0.0..=capacity).contains(&initial_tokens), || {
        format!(
            "{path}.initialTokens must be a number from 0 to capacity ({}); received {}",
            js_number(capacity),
            js_number(initial_tokens)
        )
    })?;
    let quota = match (&input.quota_period, input.quota_limit) {
        (Some(period), Some(limit)) => {
            check(
                limit >= 0.0 && limit.fract() == 0.0 && limit <= MAX_SAFE_INTEGER,
                || {
                    format!(
                        "{path}.quota.limit must be a non-negative safe integer; received {}",
                        js_number(limit)
                    )
                },
            )?;
            Some((
                limit as u64,
                parse_spec(period, &format!("{path}.quota.period"))?,
            ))
        }
        (None, None) => None,
        _ => {
            return Err(coded(
                "ERR_INVALID_OPTION",
                format!("{path}.quota needs both limit and period"),
            ))
        }
    };
    Ok(KeyPolicy {
        capacity,
        refill_per_second,
        initial_tokens,
        quota,
    })
}

fn count_for(n: f64, capacity: f64) -> CodedResult<u64> {
    if n >= 1.0 && n <= capacity && n <= MAX_SAFE_INTEGER && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(invalid_arg(format!(
            "n must be a positive safe integer no larger than the key's capacity ({}); received {}",
            js_number(capacity),
            js_number(n)
        )))
    }
}

impl KeyedState {
    fn report(&self) {
        if !self.anomalies.is_empty() {
            self.result
                .set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED_WITH_ANOMALIES);
            notify_listener(self.registry_id, self.anomaly_listener, &self.anomalies);
        }
    }

    /// The hot path's quiet case (see [`KeyedLimiter::try_consume_quiet`]): a held key, a
    /// native clock. `false`: nothing was changed or written.
    #[inline(always)]
    fn consume_quiet(&mut self, index: u32) -> bool {
        let n = self.result.get(buffer::N_OR_STATUS);
        if !(n >= 1.0
            && n <= self.limiter.capacity_of(Target::Held(index))
            && n <= MAX_SAFE_INTEGER)
        {
            return false;
        }
        let (monotonic_ms, wall_ms) = match &self.clock {
            ClockHandle::System(_) | ClockHandle::SystemWithReader => {
                (clock::monotonic_ms(), clock::wall_ms())
            }
            ClockHandle::Manual(manual) => match manual.try_borrow() {
                Ok(manual) => (manual.monotonic_ms, manual.wall_ms),
                Err(_) => return false,
            },
            ClockHandle::Js { .. } => return false,
        };
        // SAFETY: 1 ≤ n ≤ 2^53 - 1 (checked above), so it fits an i64.
        let count = unsafe { n.to_int_unchecked::<i64>() } as u64;
        match self
            .limiter
            .try_consume_quiet(index, count, monotonic_ms, wall_ms)
        {
            Some(decision) => {
                write_decision(&self.result, &decision);
                true
            }
            None => false,
        }
    }

    /// The raw call: the operation in the result buffer, for `key`, on a native clock's readings.
    #[inline(always)]
    fn call(&mut self, key: Key<'_>) -> CodedResult<()> {
        if self.result.get(buffer::OPERATION) == buffer::OPERATION_CONSUME {
            if let Some(index) = self.limiter.find(key) {
                if self.consume_quiet(index) {
                    return Ok(());
                }
            }
        }
        self.run(key, None, false)
    }

    /// Any call: the operation and `n` in the result buffer; `policy`, what the JS face's call of
    /// `policy(key)` returned (for a key not held); `supplied`, the readings are in the buffer
    /// (a JS clock's, or a call resumed after the JS reader). What it needs from the JS face
    /// first is a status (nothing read or changed): the policy, the readings, the reader.
    fn run(&mut self, key: Key<'_>, policy: Option<KeyPolicy>, supplied: bool) -> CodedResult<()> {
        let operation = self.result.get(buffer::OPERATION);
        let target = match (
            self.limiter.find(key),
            operation == buffer::OPERATION_REFUND,
        ) {
            (Some(index), _) => Some(Target::Held(index)),
            // A key not held is not held by a refund either, and no policy is asked.
            (None, true) => None,
            (None, false) => match policy {
                Some(policy) => Some(Target::New(self.limiter.intern(policy))),
                None if self.has_policy => {
                    self.result
                        .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_POLICY);
                    return Ok(());
                }
                None => Some(Target::New(DEFAULT_POLICY)),
            },
        };
        let outcome = self.run_on(key, target, supplied);
        if let Some(Target::New(id)) = target {
            self.limiter.release_if_unused(id);
        }
        outcome
    }

    fn run_on(&mut self, key: Key<'_>, target: Option<Target>, supplied: bool) -> CodedResult<()> {
        let n = self.result.get(buffer::N_OR_STATUS);
        let consume = self.result.get(buffer::OPERATION) == buffer::OPERATION_CONSUME;
        if !consume && self.result.get(buffer::OPERATION) != buffer::OPERATION_REFUND {
            return Err(invalid_arg(format!(
                "unknown operation {}",
                self.result.get(buffer::OPERATION)
            )));
        }
        // The order of checks: n against the key's capacity before any reading.
        let count = match target {
            Some(target) if consume => count_for(n, self.limiter.capacity_of(target))?,
            _ => positive_safe_integer(n)?,
        };
        if !supplied && matches!(self.clock, ClockHandle::Js { .. }) {
            self.result
                .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_READINGS);
            return Ok(());
        }
        let readings = if supplied {
            supplied_readings(&self.result)
        } else {
            Supplied::default()
        };
        self.anomalies.clear();
        let mut clock = BoundClock::new(&self.clock, readings);
        let outcome = match target {
            Some(target) if consume => self
                .limiter
                .try_consume(key, target, count, &mut clock, &mut self.anomalies)
                .map(Some),
            _ => self
                .limiter
                .refund(key, count, &mut clock, &mut self.anomalies)
                .map(|()| None),
        };
        match outcome {
            Ok(decision) => {
                match decision {
                    Some(decision) => write_decision(&self.result, &decision),
                    None => self.result.set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED),
                }
                self.report();
                Ok(())
            }
            Err(_) if clock.reader_wanted => {
                self.result.set(buffer::MONOTONIC_MS, clock.taken.0);
                self.result.set(buffer::WALL_MS, clock.taken.1);
                self.result
                    .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_READER);
                Ok(())
            }
            Err(error) => Err(from_limiter(&error)),
        }
    }

    fn status_output(status: KeyStatus) -> KeyStatusOutput {
        KeyStatusOutput {
            needs: None,
            taken_monotonic_ms: f64::NAN,
            taken_wall_ms: f64::NAN,
            tokens: status.tokens,
            quota_used: status.quota_used.map(|used| used as f64),
            quota_remaining: status.quota_remaining.map(|remaining| remaining as f64),
            period: match (&status.period, status.time_zone) {
                (Some(period), Some(time_zone)) => Some(PeriodOutput {
                    time_zone: time_zone.to_owned(),
                    ..period_output_without_zone(period)
                }),
                _ => None,
            },
            capacity: status.capacity,
            refill_per_second: status.refill_per_second,
            quota_limit: status.quota_limit.map(|limit| limit as f64),
        }
    }

    /// A status that says what the JS face must bring first (nothing was read or changed).
    fn status_needs(needs: &str, taken: (f64, f64)) -> KeyStatusOutput {
        KeyStatusOutput {
            needs: Some(needs.to_owned()),
            taken_monotonic_ms: taken.0,
            taken_wall_ms: taken.1,
            tokens: f64::NAN,
            quota_used: None,
            quota_remaining: None,
            period: None,
            capacity: f64::NAN,
            refill_per_second: f64::NAN,
            quota_limit: None,
        }
    }
}

/// The readings the JS face wrote into the result buffer.
fn supplied_readings(result: &ResultBuffer) -> Supplied {
    Supplied {
        monotonic_ms: Some(result.get(buffer::MONOTONIC_MS)),
        wall_ms: Some(result.get(buffer::WALL_MS)),
        elapsed_realtime_ms: (result.get(buffer::HAS_ELAPSED_REALTIME) == 1.0)
            .then(|| result.get(buffer::ELAPSED_REALTIME_MS)),
    }
}

impl KeyedState {
    fn status_of(&mut self, target: Target, supplied: Supplied) -> CodedResult<KeyStatusOutput> {
        if supplied.monotonic_ms.is_none() && matches!(self.clock, ClockHandle::Js { .. }) {
            return Ok(KeyedState::status_needs("readings", (f64::NAN, f64::NAN)));
        }
        let mut anomalies = Vec::new();
        let mut clock = BoundClock::new(&self.clock, supplied);
        let status = match self.limiter.status(target, &mut clock, &mut anomalies) {
            Ok(status) => status,
            Err(_) if clock.reader_wanted => {
                return Ok(KeyedState::status_needs("reader", clock.taken))
            }
            Err(error) => return Err(from_limiter(&error)),
        };
        notify_listener(self.registry_id, self.anomaly_listener, &anomalies);
        Ok(KeyedState::status_output(status))
    }
}

fn period_output_without_zone(period: &crate::calendar::Period) -> PeriodOutput {
    PeriodOutput {
        id: period.id.clone(),
        start_ms: period.start_ms,
        end_ms: period.end_ms,
        start_kind: period.start_kind.as_str().to_owned(),
        time_zone: String::new(),
    }
}

/// The raw `call(key)`: `data` is the limiter's `KeyedCell`.
unsafe extern "C" fn keyed_call(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let mut argc = 1usize;
    let mut argv = [ptr::null_mut(); 1];
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: N-API's own env and info; room for one argument.
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
    if status != sys::Status::napi_ok || data.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `data` is an `Rc<KeyedCell>` leaked in `call_function` and released only by the
    // function's finalizer, so it is alive while the function can be called.
    let cell = unsafe { &*(data as *const KeyedCell) };
    let Ok(mut state) = cell.state.try_borrow_mut() else {
        // A JS clock called back into this limiter while it was reading it.
        cell.result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
        return ptr::null_mut();
    };
    let state = &mut *state;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if argc < 1 {
            return Err(coded("ERR_INVALID_ARG", "key must be a string"));
        }
        let mut scratch = KeyScratch::new();
        let key = scratch.read(env, argv[0])?;
        state.call(key)
    }));
    let error = match outcome {
        Ok(Ok(())) => return ptr::null_mut(),
        Ok(Err(error)) => error,
        Err(payload) => internal(payload.as_ref()),
    };
    state.error = Some(error);
    state.result.set(buffer::N_OR_STATUS, buffer::STATUS_ERROR);
    ptr::null_mut()
}

unsafe extern "C" fn release_cell(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: balances the `Rc::into_raw` in `call_function`; runs once, when the function dies.
    drop(unsafe { Rc::from_raw(data as *const KeyedCell) });
}

/// A snapshot read and validated, with the policies of its keys once the JS face has them. The JS
/// face holds it as an External (free functions on handles, not `#[napi]` classes: a class costs
/// every load of the addon a few KB that Node-API keeps with the load's environment, measured).
pub struct NativeSnapshot {
    snapshot: Snapshot,
    /// Distinct policies, and for each key the index of its own (`u32::MAX`: the defaults).
    policies: Vec<KeyPolicy>,
    choices: Vec<u32>,
}

fn snapshot_error(error: &SnapshotError) -> CodedError {
    coded("ERR_INVALID_OPTION", error.message())
}

/// Validates every byte of `bytes` (and that it holds at most `max_keys` keys).
#[napi(js_name = "snapshotParse")]
pub fn snapshot_parse(
    env: &Env,
    bytes: Uint8Array,
    max_keys: f64,
) -> napi::Result<External<NativeSnapshot>> {
    guard(env, || {
        let snapshot = Snapshot::parse(&bytes, max_keys as u64).map_err(|e| snapshot_error(&e))?;
        Ok(External::new(NativeSnapshot {
            snapshot,
            policies: Vec::new(),
            choices: Vec::new(),
        }))
    })
}

#[napi(js_name = "snapshotLength")]
pub fn snapshot_length(plan: &External<NativeSnapshot>) -> u32 {
    plan.snapshot.len() as u32
}

/// Key `position` as a JS string (built from its UTF-16 code units: exact for any key).
#[napi(js_name = "snapshotKeyAt")]
pub fn snapshot_key_at<'env>(
    env: &'env Env,
    plan: &External<NativeSnapshot>,
    position: u32,
) -> napi::Result<Unknown<'env>> {
    plan.key_at(env, position)
}

/// The keys' policies: `choices[i]` indexes `policies` (`u32::MAX`: the defaults). All are
/// validated before any is kept.
#[napi(js_name = "snapshotSetPolicies")]
pub fn snapshot_set_policies(
    env: &Env,
    plan: &mut External<NativeSnapshot>,
    policies: Vec<PolicyInput>,
    choices: Uint32Array,
) -> napi::Result<()> {
    plan.set_policies(env, policies, choices)
}

impl NativeSnapshot {
    fn key_at<'env>(&self, env: &'env Env, position: u32) -> napi::Result<Unknown<'env>> {
        guard(env, || {
            if position as usize >= self.snapshot.len() {
                return Err(invalid_arg(format!("no key {position} in this snapshot")));
            }
            let units = self.snapshot.key(position as usize).to_utf16();
            let mut value = ptr::null_mut();
            // SAFETY: a live env; `units` outlives the call, which copies them.
            let status = unsafe {
                sys::napi_create_string_utf16(
                    env.raw(),
                    units.as_ptr(),
                    units.len() as isize,
                    &mut value,
                )
            };
            if status != sys::Status::napi_ok {
                return Err(coded("ERR_INTERNAL", "could not create a key string"));
            }
            // SAFETY: `value` was just created in the current scope.
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
        })
    }

    fn set_policies(
        &mut self,
        env: &Env,
        policies: Vec<PolicyInput>,
        choices: Uint32Array,
    ) -> napi::Result<()> {
        guard(env, || {
            let parsed = policies
                .iter()
                .map(key_policy)
                .collect::<CodedResult<Vec<_>>>()?;
            if choices.len() != self.snapshot.len()
                || choices
                    .iter()
                    .any(|&choice| choice != u32::MAX && choice as usize >= parsed.len())
            {
                return Err(invalid_arg(
                    "one policy choice per key, each naming a policy",
                ));
            }
            self.policies = parsed;
            self.choices = choices.to_vec();
            Ok(())
        })
    }
}

/// A keyed limiter as the JS face holds it (an External, as [`NativeSnapshot`]).
pub struct NativeKeyed {
    state: Rc<KeyedCell>,
}

/// Runs `body` on the state, refusing a re-entrant call.
fn with_state<T>(
    cell: &KeyedCell,
    body: impl FnOnce(&mut KeyedState) -> CodedResult<T>,
) -> CodedResult<T> {
    let mut state = cell
        .state
        .try_borrow_mut()
        .map_err(|_| coded("ERR_INTERNAL", BUSY))?;
    body(&mut state)
}

/// `keyedCreate`'s input.
#[napi(object, object_to_js = false)]
pub struct KeyedInput<'_javascript_function_scope> {
    /// The registry (`createRegistry`'s `id`) whose anomaly dispatcher it shares.
    pub registry: u32,
    pub options: LimiterOptions,
    pub max_keys: f64,
    /// Whether the JS face has a `policy` to call for a key not held.
    pub has_policy: bool,
    /// The limiter's own result buffer (`contract().resultBuffer`'s layout).
    pub result: Float64Array,
    pub clock: ClockInput<'_javascript_function_scope>,
    pub anomaly_listener: Option<f64>,
    /// A validated snapshot (`snapshotParse`) whose keys it starts with.
    pub restore: Option<&'_javascript_function_scope External<NativeSnapshot>>,
}

/// Makes a keyed limiter from `input` (see `KeyedInput`).
#[napi(js_name = "keyedCreate")]
pub fn keyed_create(env: &Env, input: KeyedInput<'_>) -> napi::Result<External<NativeKeyed>> {
    let KeyedInput {
        registry: registry_id,
        options,
        max_keys,
        has_policy,
        result: mut result_buffer,
        clock,
        anomaly_listener,
        restore,
    } = input;
    guard(env, move || {
        if result_buffer.len() < buffer::LENGTH {
            return Err(invalid_arg(format!(
                "the result buffer needs {} numbers",
                buffer::LENGTH
            )));
        }
        if !((1.0..=MAX_SAFE_INTEGER).contains(&max_keys) && max_keys.fract() == 0.0) {
            return Err(coded(
                "ERR_INVALID_OPTION",
                format!(
                    "maxKeys must be a positive safe integer; received {}",
                    js_number(max_keys)
                ),
            ));
        }
        let limits = config_from(&options)?;
        let defaults = KeyPolicy {
            capacity: limits.capacity,
            refill_per_second: limits.refill_per_second,
            initial_tokens: limits.initial_tokens,
            quota: limits.quota.map(|quota| (quota.limit, quota.spec)),
        };
        let config = KeyedConfig {
            defaults,
            suspend_policy: limits.suspend_policy,
            earliest_plausible_wall_ms: limits.earliest_plausible_wall_ms,
            // More keys than memory could ever hold are as good as no bound.
            max_keys: max_keys.min(usize::MAX as f64) as usize,
        };
        let (clock, supplied) = clock.handle()?;
        let mut limiter = KeyedLimiter::new(config, &mut BoundClock::new(&clock, supplied))
            .map_err(|e| from_limiter(&e))?;
        if let Some(restore) = restore {
            let ids: Vec<PolicyId> = restore
                .policies
                .iter()
                .map(|policy| limiter.intern(policy.clone()))
                .collect();
            let per_key: Vec<PolicyId> = restore
                .choices
                .iter()
                .map(|&choice| ids.get(choice as usize).copied().unwrap_or(DEFAULT_POLICY))
                .collect();
            limiter.restore(&restore.snapshot, &per_key);
            for id in ids {
                limiter.release_if_unused(id);
            }
        }
        // SAFETY: the JS thread owns the buffer; `_result_buffer` keeps it alive.
        let address = unsafe { result_buffer.as_mut() }.as_mut_ptr();
        let result = ResultBuffer(address);
        let state = KeyedState {
            limiter,
            clock,
            anomalies: Vec::new(),
            error: None,
            registry_id,
            anomaly_listener,
            has_policy,
            result,
            _result_buffer: result_buffer,
        };
        Ok(External::new(NativeKeyed {
            state: Rc::new(KeyedCell {
                result: ResultBuffer(address),
                state: RefCell::new(state),
            }),
        }))
    })
}

/// The hot path: a raw function `call(key)` on this limiter (see the module comment).
#[napi(js_name = "keyedCallFunction")]
pub fn keyed_call_function<'env>(
    env: &'env Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Unknown<'env>> {
    guard(env, || {
        let data = Rc::into_raw(limiter.state.clone()) as *mut c_void;
        // SAFETY: `data` lives until `release_cell`, which releases it once.
        unsafe { function_with_data(env, "call", keyed_call, data, release_cell) }.ok_or_else(
            || {
                // SAFETY: N-API refused, so nothing else owns `data`.
                drop(unsafe { Rc::from_raw(data as *const KeyedCell) });
                coded("ERR_INTERNAL", "could not create the call function")
            },
        )
    })
}

/// A `tryConsume` or `refund` the raw call could not finish: with what the JS face brought
/// (the key's policy, readings in the result buffer). Writes a status or the decision into
/// the buffer; throws what no decision can be made for.
#[napi(js_name = "keyedCallSlow")]
pub fn keyed_call_slow(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    supplied: bool,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_state(&limiter.state, |state| {
            state.run(key.key(), policy, supplied)
        })
    })
}

/// `status(key)`, or what the JS face must bring first (`needs`): for a key not held,
/// what a fresh key of its policy would have, without holding it. `monotonic_ms`/`wall_ms`
/// (and `elapsed_realtime_ms`): readings the JS face took.
#[napi(js_name = "keyedStatus")]
#[allow(clippy::too_many_arguments)]
pub fn keyed_status(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    policy: Option<PolicyInput>,
    monotonic_ms: Option<f64>,
    wall_ms: Option<f64>,
    elapsed_realtime_ms: Option<f64>,
) -> napi::Result<KeyStatusOutput> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let policy = policy.as_ref().map(key_policy).transpose()?;
        with_state(&limiter.state, |state| {
            let target = match (state.limiter.find(key.key()), policy) {
                (Some(index), _) => Target::Held(index),
                (None, Some(policy)) => Target::New(state.limiter.intern(policy)),
                (None, None) if state.has_policy => {
                    return Ok(KeyedState::status_needs("policy", (f64::NAN, f64::NAN)))
                }
                (None, None) => Target::New(DEFAULT_POLICY),
            };
            let outcome = state.status_of(
                target,
                Supplied {
                    monotonic_ms,
                    wall_ms,
                    elapsed_realtime_ms,
                },
            );
            if let Target::New(id) = target {
                state.limiter.release_if_unused(id);
            }
            outcome
        })
    })
}

/// `delete(key)`.
#[napi(js_name = "keyedDelete")]
pub fn keyed_delete(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<bool> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        with_state(&limiter.state, |state| Ok(state.limiter.delete(key.key())))
    })
}

#[napi(js_name = "keyedSize")]
pub fn keyed_size(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<f64> {
    guard(env, || {
        with_state(&limiter.state, |state| Ok(state.limiter.len() as f64))
    })
}

/// `snapshot()`: reads no clock.
#[napi(js_name = "keyedSnapshot")]
pub fn keyed_snapshot(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<Uint8Array> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            Ok(Uint8Array::new(state.limiter.snapshot()))
        })
    })
}

/// The anomalies of the last raw call (called only when there were some).
#[napi(js_name = "keyedTakeAnomalies")]
pub fn keyed_take_anomalies(
    env: &Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Vec<AnomalyOutput>> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            Ok(state.anomalies.iter().map(AnomalyOutput::from).collect())
        })
    })
}

/// The error of the last raw call.
#[napi(js_name = "keyedTakeError")]
pub fn keyed_take_error(limiter: &External<NativeKeyed>) -> ErrorOutput {
    let error = match limiter.state.state.try_borrow_mut() {
        Ok(mut state) => state
            .error
            .take()
            .unwrap_or_else(|| coded("ERR_INTERNAL", NO_STORED_ERROR)),
        Err(_) => coded("ERR_INTERNAL", BUSY),
    };
    ErrorOutput {
        code: error.status,
        message: error.reason,
    }
}
