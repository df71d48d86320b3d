//! A limiter's cell book calls (`share.bucket`): what an acquire sends, its answer, the ticks'
//! renewals and give-backs, the releases. The store calls themselves are the JS face's; none of
//! these is on the hot path. Times (`sentMs`) are the limiter's timeline as these calls gave
//! them; `monotonicMs` is a JS clock's reading (a native clock is read here).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::cell::with_state;
use super::cells_wire::{
    amount, renewal_outputs, time, waiting, CellsAnswerInput, CellsRenewalOutput,
    CellsRequestOutput, RenewAnswerInput,
};
use super::entry::NativeKeyed;
use super::key::key_argument;
use super::share::units;
use super::KeyedState;
use crate::anomaly::Anomaly;
use crate::keyed::{CellsAnswer, Key, KeyedLimiter, RenewAnswer};
use crate::napi::clock::ClockHandle;
use crate::napi::errors::{coded, guard, CodedResult};
use crate::napi::registry::notify_listener;
use crate::text::js_number;

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

    /// A store-clock anomaly goes to `onAnomaly` (it is counted already).
    fn deliver(&self, anomaly: Option<Anomaly>) {
        if let Some(anomaly) = anomaly {
            notify_listener(
                self.registry_id,
                self.anomaly_listener,
                std::slice::from_ref(&anomaly),
            );
        }
    }
}

/// A store answer for a held `key`: `take(limiter, index, monotonic now)`, its store-clock
/// anomaly delivered; false for a key not held.
fn answer_for(
    limiter: &External<NativeKeyed>,
    key: Key<'_>,
    monotonic_ms: Option<f64>,
    take: impl FnOnce(&mut KeyedLimiter, u32, f64) -> (bool, Option<Anomaly>),
) -> CodedResult<bool> {
    with_state(&limiter.state, |state| {
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let Some(index) = state.limiter.find(key) else {
            return Ok(false);
        };
        let (outcome, anomaly) = take(&mut state.limiter, index, monotonic_ms);
        state.deliver(anomaly);
        Ok(outcome)
    })
}

/// What an acquire of `key`'s cells sends; marks the key in flight. `null`: the key is not held
/// or the limiter has no shared bucket.
#[napi(js_name = "keyedCellsRequest")]
pub fn keyed_cells_request(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    monotonic_ms: Option<f64>,
) -> napi::Result<Option<CellsRequestOutput>> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        with_state(&limiter.state, |state| {
            let monotonic_ms = state.monotonic_now(monotonic_ms);
            let Some(index) = state.limiter.find(key.key()) else {
                return Ok(None);
            };
            Ok(state
                .limiter
                .cells_request(index, monotonic_ms)
                .map(|request| CellsRequestOutput {
                    capacity: request.capacity as f64,
                    refill_per_second: request.refill_per_second,
                    initial: request.initial,
                    held: request.held as f64,
                    record_id: request.record_id as f64,
                    sent_ms: request.sent_ms,
                }))
        })
    })
}

/// An acquire's answer for `key` (sent at `sentMs`): true if the key now holds the answer's
/// cells; false if it is not held any more (or has no shared bucket): the JS face releases the
/// answer's `held` cells and `tokens`.
#[napi(js_name = "keyedCellsCredit")]
pub fn keyed_cells_credit(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    sent_ms: f64,
    answer: CellsAnswerInput,
    monotonic_ms: Option<f64>,
) -> napi::Result<bool> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let sent_ms = time(sent_ms, "sentMs")?;
        let answer = CellsAnswer {
            granted: units(answer.granted, "granted")?,
            tokens: amount(answer.tokens, "tokens")?,
            held: units(answer.held, "held")?,
            fair: units(answer.fair, "fair")?,
            waiting: waiting(answer.waiting)?,
            record_id: units(answer.record_id, "recordId")?,
            store_now_ms: amount(answer.store_now_ms, "storeNowMs")?,
        };
        answer_for(limiter, key.key(), monotonic_ms, |keyed, index, now_ms| {
            keyed.credit_cells(index, sent_ms, answer, now_ms)
        })
    })
}

/// `key`'s acquire failed: it may be asked again.
#[napi(js_name = "keyedCellsFailed")]
pub fn keyed_cells_failed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<()> {
    store_call_failed(env, limiter, &key)
}

/// A tick: the renewals, give-backs and releases to send in one `cellsRenew` (see
/// `KeyedLimiter::cells_tick`); the keys sent are in flight.
#[napi(js_name = "keyedCellsTick")]
pub fn keyed_cells_tick(
    env: &Env,
    limiter: &External<NativeKeyed>,
    idle_ms: f64,
    urgent_only: bool,
    monotonic_ms: Option<f64>,
) -> napi::Result<Vec<CellsRenewalOutput>> {
    guard(env, || {
        if idle_ms.is_nan() || idle_ms < 0.0 {
            return Err(coded(
                "ERR_INVALID_ARG",
                format!(
                    "idleMs must be a number no less than 0; received {}",
                    js_number(idle_ms)
                ),
            ));
        }
        with_state(&limiter.state, |state| {
            let monotonic_ms = state.monotonic_now(monotonic_ms);
            Ok(renewal_outputs(state.limiter.cells_tick(
                idle_ms,
                urgent_only,
                monotonic_ms,
            )))
        })
    })
}

/// A renewal's answer for `key` (sent at `sentMs`), with the store's time: true when a
/// give-back to waiters is due now (an urgent tick).
#[napi(js_name = "keyedCellsRenewed")]
pub fn keyed_cells_renewed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    sent_ms: f64,
    answer: RenewAnswerInput,
    store_now_ms: f64,
    monotonic_ms: Option<f64>,
) -> napi::Result<bool> {
    guard(env, || {
        let key = key_argument(env, &key)?;
        let sent_ms = time(sent_ms, "sentMs")?;
        let answer = RenewAnswer {
            held: units(answer.held, "held")?,
            waiting: waiting(answer.waiting)?,
            fair: units(answer.fair, "fair")?,
        };
        let store_now_ms = amount(store_now_ms, "storeNowMs")?;
        answer_for(limiter, key.key(), monotonic_ms, |keyed, index, now_ms| {
            keyed.cells_renewed(index, sent_ms, answer, store_now_ms, now_ms)
        })
    })
}

/// `key`'s renewal failed: the next tick renews (or releases) it again.
#[napi(js_name = "keyedCellsRenewFailed")]
pub fn keyed_cells_renew_failed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
) -> napi::Result<()> {
    store_call_failed(env, limiter, &key)
}

/// A store call for `key` failed (an acquire or a renewal): no longer in flight; the store may
/// hold what it held.
fn store_call_failed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: &Unknown<'_>,
) -> napi::Result<()> {
    guard(env, || {
        let key = key_argument(env, key)?;
        with_state(&limiter.state, |state| {
            if let Some(index) = state.limiter.find(key.key()) {
                state.limiter.cells_failed(index);
            }
            Ok(())
        })
    })
}

/// Every key's release (close()), in the tick's shape.
#[napi(js_name = "keyedCellsReleaseAll")]
pub fn keyed_cells_release_all(
    env: &Env,
    limiter: &External<NativeKeyed>,
    monotonic_ms: Option<f64>,
) -> napi::Result<Vec<CellsRenewalOutput>> {
    guard(env, || {
        with_state(&limiter.state, |state| {
            let monotonic_ms = state.monotonic_now(monotonic_ms);
            Ok(renewal_outputs(
                state.limiter.cells_release_all(monotonic_ms),
            ))
        })
    })
}

/// Whether a key holds cells (or releases wait): the tick timer is needed.
#[napi(js_name = "keyedCellsHolds")]
pub fn keyed_cells_holds(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<bool> {
    guard(env, || {
        with_state(&limiter.state, |state| Ok(state.limiter.holds_cells()))
    })
}
