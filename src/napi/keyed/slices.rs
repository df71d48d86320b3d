//! A limiter's slice book calls (`share.bucket`): what a store call for a key's slice sends, its
//! answer, a failed call, the give-backs of idle and dropped keys. The store calls themselves are
//! the JS face's; none of these is on the hot path. Times (`sentMs`) are the limiter's timeline
//! as these calls gave them; `monotonicMs` is a JS clock's reading (a native clock is read here).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use super::KeyedState;
use crate::anomaly::Anomaly;
use crate::args::{finite_from, invalid, units};
use crate::keyed::{SliceAnswer, SliceRequest};
use crate::napi::errors::invalid_arg;
use crate::napi::registry::notify_listener;
use crate::text::js_number;

/// What a store call for a key's slice sends (the store's `bucketTake`, less the name, instance
/// and leaseMs); `key` as UTF-16 code units.
#[napi(object)]
pub struct SliceRequestOutput {
    pub key: Uint16Array,
    pub capacity: f64,
    pub refill_per_second: f64,
    pub want: f64,
    pub more: f64,
    pub held: f64,
    pub give: f64,
    pub charge: f64,
    pub fleet_ms: f64,
    pub record_id: f64,
    pub most: f64,
    /// The timeline as the call is sent: pass it back to `keyedSliceCredit`.
    pub sent_ms: f64,
    /// How long before the send the slice was last spent from.
    pub spent_ms: f64,
}

/// The store's answer to a `bucketTake`.
#[napi(object, object_to_js = false)]
pub struct SliceAnswerInput {
    pub granted: f64,
    pub held: f64,
    pub tokens: f64,
    pub fleet_ms: f64,
    pub store_now_ms: f64,
    pub record_id: f64,
}

fn output(request: SliceRequest) -> SliceRequestOutput {
    SliceRequestOutput {
        key: Uint16Array::new(request.key.key().to_utf16()),
        capacity: request.capacity as f64,
        refill_per_second: request.refill_per_second,
        want: request.want as f64,
        more: request.more as u8 as f64,
        held: request.held as f64,
        give: request.give,
        charge: request.charge as f64,
        fleet_ms: request.fleet_ms,
        record_id: request.record_id as f64,
        most: request.most as f64,
        sent_ms: request.sent_ms,
        spent_ms: request.spent_ms,
    }
}

impl KeyedState {
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

/// What a store call for `key`'s slice sends, taking at least `lacking` tokens (0: a background
/// fetch) and, beyond, what the calls waiting for it need together (`demand`) if the bucket has
/// it; marks the key in flight. `null`: the key is not held, the limiter has no shared
/// bucket, or (a background fetch) none is due.
#[napi(js_name = "keyedSliceRequest")]
pub fn keyed_slice_request(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    lacking: f64,
    demand: f64,
    monotonic_ms: Option<f64>,
) -> napi::Result<Option<SliceRequestOutput>> {
    limiter.state.with_key(env, &key, |state, key| {
        let lacking = units(lacking, "lacking")?;
        let demand = units(demand, "demand")?.max(lacking);
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let Some(index) = state.limiter.find(key) else {
            return Ok(None);
        };
        let request = state
            .limiter
            .slice_request(index, lacking, demand, monotonic_ms);
        Ok(request.map(output))
    })
}

/// A `bucketTake` answer for `key` (sent at `sentMs`): true if the key's slice took it; false
/// if the key is not held any more (or has no shared bucket): the JS face gives the answer's
/// `held` tokens back.
#[napi(js_name = "keyedSliceCredit")]
pub fn keyed_slice_credit(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    sent_ms: f64,
    answer: SliceAnswerInput,
    monotonic_ms: Option<f64>,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        let sent_ms = finite_from(sent_ms, f64::MIN, "sentMs")?;
        let answer = SliceAnswer {
            granted: units(answer.granted, "granted")?,
            held: units(answer.held, "held")?,
            tokens: finite_from(answer.tokens, f64::MIN, "tokens")?,
            fleet_ms: finite_from(answer.fleet_ms, 0.0, "fleetMs")?,
            store_now_ms: finite_from(answer.store_now_ms, 0.0, "storeNowMs")?,
            record_id: units(answer.record_id, "recordId")?,
        };
        if answer.granted > answer.held {
            let (granted, held) = (answer.granted as f64, answer.held as f64);
            return Err(invalid_arg(format!(
                "held must be at least granted; received granted {} and held {}",
                js_number(granted),
                js_number(held)
            )));
        }
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let Some(index) = state.limiter.find(key) else {
            return Ok(false);
        };
        let limiter = &mut state.limiter;
        let (credited, anomaly) = limiter.credit_slice(index, sent_ms, answer, monotonic_ms);
        state.deliver(anomaly);
        Ok(credited)
    })
}

/// `key`'s store call failed: it may be asked again; the give-back (`give` tokens) and the
/// failOpen units (`charge`) it carried go with the next one.
#[napi(js_name = "keyedSliceFailed")]
pub fn keyed_slice_failed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    give: f64,
    charge: f64,
) -> napi::Result<()> {
    limiter.state.with_key(env, &key, |state, key| {
        let (give, charge) = (finite_from(give, 0.0, "give")?, units(charge, "charge")?);
        if let Some(index) = state.limiter.find(key) {
            state.limiter.slice_failed(index, give, charge);
        }
        Ok(())
    })
}

/// Whether the store's bucket, as last heard of and refilled since, holds fewer than `n` for
/// `key` (a waiting call that the last answer did not cover is then denied, not sent again).
#[napi(js_name = "keyedSliceShort")]
pub fn keyed_slice_short(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    n: f64,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        let n = units(n, "n")?;
        let index = state.limiter.find(key);
        Ok(index.is_some_and(|index| state.limiter.slice_short_for(index, n)))
    })
}

/// The give-backs due, at most `limit`: keys dropped since the last time, and keys idle for
/// `idleMs` (0: every key, for close()); the keys sent are in flight.
#[napi(js_name = "keyedSliceGiveBacks")]
pub fn keyed_slice_give_backs(
    env: &Env,
    limiter: &External<NativeKeyed>,
    idle_ms: f64,
    limit: u32,
    monotonic_ms: Option<f64>,
) -> napi::Result<Vec<SliceRequestOutput>> {
    limiter.state.with(env, |state| {
        if idle_ms.is_nan() || idle_ms < 0.0 {
            return Err(invalid("idleMs", "a number no less than 0", idle_ms).into());
        }
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let give_backs = state
            .limiter
            .slice_give_backs(idle_ms, limit as usize, monotonic_ms);
        Ok(give_backs.into_iter().map(output).collect())
    })
}

/// Whether a key holds a slice (or give-backs wait): the idle timer is needed.
#[napi(js_name = "keyedSliceHolds")]
pub fn keyed_slice_holds(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<bool> {
    limiter
        .state
        .with(env, |state| Ok(state.limiter.holds_slices()))
}
