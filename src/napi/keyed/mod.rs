//! `KeyedQuotaClock`'s native half, a thin layer over [`KeyedLimiter`]. Here: the raw call and its
//! quiet cases, shaped like `QuotaClock`'s (one raw function per limiter, called with the key,
//! read as UTF-16 by `key.rs`; `n`, the operation and the decision in the limiter's own result
//! buffer). The rest of a call (a key not held, a JS clock, a refund) is `slow.rs`'s.

mod cell;
mod create;
mod entry;
mod key;
mod policy;
mod refresh;
mod share;
mod slices;
mod slow;
mod snapshot;
mod status;
#[cfg(target_os = "linux")]
mod zone;

use napi::bindgen_prelude::*;

use self::cell::{RawState, StateCell};
use crate::anomaly::Anomaly;
use crate::keyed::{Key, KeyedLimiter, ShareMode, SharedDecision, Target};
use crate::napi::buffer::{self, write_decision, ResultBuffer};
use crate::napi::clock::ClockHandle;
use crate::napi::errors::{CodedError, CodedResult};
use crate::napi::options::MAX_SAFE_INTEGER;

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
    /// The last shared consume asked for a background refill of its key (taken by `shareWork`).
    refill_wanted: bool,
    /// The anomaly the last `keyedSliceCredit` raised (taken by `keyedSliceAnomaly`: the calls
    /// waiting for that take carry it on their decisions).
    slice_anomaly: Option<Anomaly>,
    result: ResultBuffer,
    /// Keeps the result buffer alive while `result` points into it.
    _result_buffer: Float64Array,
}

/// What the in-process limiter's raw function points at.
type KeyedCell = StateCell<KeyedState>;

impl RawState for KeyedState {
    #[inline(always)]
    fn call(&mut self, key: Key<'_>) -> CodedResult<()> {
        KeyedState::call(self, key)
    }

    fn error(&mut self) -> &mut Option<CodedError> {
        &mut self.error
    }

    fn anomalies(&self) -> &[Anomaly] {
        &self.anomalies
    }
}

impl KeyedState {
    /// The monotonic reading now: a native clock's, or the JS clock's the JS face passed (NaN
    /// when it passed none: the timeline estimate is then the last call's).
    fn monotonic_now(&self, monotonic_ms: Option<f64>) -> f64 {
        match (&self.clock, self.clock.native_readings()) {
            (_, Some((monotonic_ms, _))) => monotonic_ms,
            (ClockHandle::Js { .. }, None) => monotonic_ms.unwrap_or(f64::NAN),
            _ => f64::NAN,
        }
    }

    /// The hot path's quiet case (see [`KeyedLimiter::try_consume_quiet`]): a held key, a
    /// native clock. `false`: nothing was changed or written.
    #[inline(always)]
    fn consume_quiet(&mut self, index: u32) -> bool {
        let Some((count, monotonic_ms, wall_ms)) = self.quiet_inputs(true, index) else {
            return false;
        };
        match self
            .limiter
            .try_consume_quiet(index, count, monotonic_ms, wall_ms)
        {
            Some(decision) => {
                write_decision(&self.result, &decision);
                self.write_slot_of(index);
                true
            }
            None => false,
        }
    }

    /// What a quiet call of a held key needs: the call's own precondition (`applies`), `n` (the
    /// result buffer's) a whole number from 1 to the key's capacity, and a native clock's readings, as
    /// `(n, monotonic_ms, wall_ms)`. `None`: the call is not a quiet one (nothing was read but
    /// the buffer).
    #[inline(always)]
    fn quiet_inputs(&self, applies: bool, index: u32) -> Option<(u64, f64, f64)> {
        let n = self.result.get(buffer::N_OR_STATUS);
        if !(applies
            && n >= 1.0
            && n <= self.limiter.capacity_of(Target::Held(index))
            && n <= MAX_SAFE_INTEGER)
        {
            return None;
        }
        let (monotonic_ms, wall_ms) = self.clock.native_readings()?;
        if self.limiter.policy_due(index, monotonic_ms) {
            return None;
        }
        // SAFETY: 1 ≤ n ≤ 2^53 - 1 (checked above), so it fits an i64.
        let count = unsafe { n.to_int_unchecked::<i64>() };
        // A fraction (its whole part below it) is the general path's to refuse (`args::count`,
        // the contract's error).
        if (count as f64) < n {
            return None;
        }
        Some((count as u64, monotonic_ms, wall_ms))
    }

    /// The raw call: the operation in the result buffer, for `key`, on a native clock's readings.
    #[inline(always)]
    fn call(&mut self, key: Key<'_>) -> CodedResult<()> {
        let operation = self.result.get(buffer::OPERATION);
        if operation == buffer::OPERATION_CONSUME {
            if let Some(index) = self.limiter.find(key) {
                if self.consume_quiet(index) {
                    return Ok(());
                }
            }
        } else if let Some(mode) = share_mode(operation) {
            if let Some(index) = self.limiter.find(key) {
                if self.consume_shared_quiet(index, mode) {
                    return Ok(());
                }
            }
        }
        self.run(key, None, false)
    }

    /// [`KeyedState::consume_quiet`] for a shared limiter: one native call decides a consume its
    /// reservation covers. `false`: nothing was changed or written.
    #[inline(always)]
    fn consume_shared_quiet(&mut self, index: u32, mode: ShareMode) -> bool {
        let shared = self.limiter.is_shared();
        let Some((count, monotonic_ms, wall_ms)) = self.quiet_inputs(shared, index) else {
            return false;
        };
        match self
            .limiter
            .consume_shared_quiet(index, count, mode, monotonic_ms, wall_ms)
        {
            Some(outcome) => {
                self.write_shared(&outcome);
                self.write_slot_of(index);
                true
            }
            None => false,
        }
    }

    /// [`KeyedState::write_period_slot`] for the held key at `index`.
    #[inline(always)]
    fn write_slot_of(&self, index: u32) {
        let slot = self.limiter.period_slot_of(index);
        self.result.set(buffer::PERIOD_SLOT, f64::from(slot));
    }

    /// Writes a shared consume's outcome (status `DECIDED`, `DECIDED_WITH_WORK` or `NEEDS_STORE`).
    #[inline(always)]
    fn write_shared(&mut self, outcome: &SharedDecision) {
        match outcome {
            SharedDecision::Decided { decision, refill } => {
                write_decision(&self.result, decision);
                self.refill_wanted = *refill;
                if *refill
                    || self.limiter.has_dropped_give_backs()
                    || self.limiter.slice_fetch_due()
                    || self.limiter.has_dropped_slices()
                {
                    self.result
                        .set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED_WITH_WORK);
                }
            }
            SharedDecision::NeedsStore { lacking } => {
                self.refill_wanted = false;
                self.result
                    .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_STORE);
                self.result.set(buffer::RETRY_AFTER_MS, *lacking as f64);
            }
            SharedDecision::NeedsSlice => {
                self.refill_wanted = false;
                self.result
                    .set(buffer::N_OR_STATUS, buffer::STATUS_NEEDS_SLICE);
            }
        }
    }
}

/// The shared consume an operation asks for (`None`: not one).
#[inline(always)]
fn share_mode(operation: f64) -> Option<ShareMode> {
    if operation == buffer::OPERATION_SHARED_CONSUME {
        Some(ShareMode::Reserved)
    } else if operation == buffer::OPERATION_SHARED_AFTER_STORE {
        Some(ShareMode::AfterStore)
    } else if operation == buffer::OPERATION_SHARED_FAIL_OPEN {
        Some(ShareMode::FailOpen)
    } else {
        None
    }
}
