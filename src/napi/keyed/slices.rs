//! A shared bucket's slice book calls (`share.bucket`; the store calls are the JS face's). `sentMs`
//! is on the limiter's timeline; `monotonicMs`, a JS clock's reading (a native clock is read here).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use super::KeyedState;
use crate::anomaly::Anomaly;
use crate::args::{finite_from, not_negative, units};
use crate::keyed::{SliceAnswer, SliceRequest};
use crate::napi::anomaly::AnomalyOutput;
use crate::napi::object::objects;
use crate::napi::registry::notify_listener;

objects! {
    #[doc = "What a store call for a key's slice sends (the store's `bucketTake`, less the name,"]
    #[doc = "instance and leaseMs); `key` as UTF-16 code units."]
    SliceRequestOutput from SliceRequest as request {
        key: Uint16Array = Uint16Array::new(request.key.key().to_utf16()),
        capacity: f64 = request.capacity as f64,
        refill_per_second: f64 = request.refill_per_second,
        want: f64 = request.want as f64,
        more: f64 = request.more as u8 as f64,
        held: f64 = request.held as f64,
        give: f64 = request.give,
        charge: f64 = request.charge as f64,
        fleet_ms: f64 = request.fleet_ms,
        record_id: f64 = request.record_id as f64,
        most: f64 = request.most as f64,
        #[doc = "The timeline as the call is sent: pass it back to `keyedSliceCredit`."]
        sent_ms: f64 = request.sent_ms,
        #[doc = "How long before the send the slice was last spent from."]
        spent_ms: f64 = request.spent_ms,
        #[doc = "The asking call spends what the take grants at once: the store records none of it."]
        spend: bool = request.spend,
    }
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

/// The store call for `key`'s slice (`lacking`: at least; 0, a background fetch; `demand`: what
/// waiting calls need), the key then in flight; `null` if none is due or the key is not held.
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
        Ok(request.map(SliceRequestOutput::from))
    })
}

/// A `bucketTake` answer for `key`: false if no slice took it (the JS face gives `held` back).
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
        let a = &answer;
        let numbers = [
            a.granted,
            a.held,
            a.tokens,
            a.fleet_ms,
            a.store_now_ms,
            a.record_id,
        ];
        let answer = SliceAnswer::checked(numbers)?;
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let Some(index) = state.limiter.find(key) else {
            return Ok(false);
        };
        let limiter = &mut state.limiter;
        let (credited, anomaly) = limiter.credit_slice(index, sent_ms, answer, monotonic_ms);
        state.slice_anomaly.clone_from(&anomaly);
        state.deliver(anomaly);
        Ok(credited)
    })
}

/// The anomaly the last `keyedSliceCredit` raised (a `store-clock-step`), taken: `null` if none.
#[napi(js_name = "keyedSliceAnomaly")]
pub fn keyed_slice_anomaly(
    env: &Env,
    limiter: &External<NativeKeyed>,
) -> napi::Result<Option<AnomalyOutput>> {
    limiter.state.with(env, |state| {
        Ok(state.slice_anomaly.take().as_ref().map(AnomalyOutput::from))
    })
}

/// `key`'s store call failed: its `give` and `charge` go with the next one.
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

/// Whether the store's bucket, as last heard of and refilled since, holds fewer than `n` at the
/// monotonic reading `monotonicMs`.
#[napi(js_name = "keyedSliceShort")]
pub fn keyed_slice_short(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    n: f64,
    monotonic_ms: Option<f64>,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        let n = units(n, "n")?;
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let index = state.limiter.find(key);
        Ok(index.is_some_and(|index| state.limiter.slice_short_for(index, n, monotonic_ms)))
    })
}

/// At most `limit` give-backs due: keys dropped, and keys idle for `idleMs` (0: every key).
#[napi(js_name = "keyedSliceGiveBacks")]
pub fn keyed_slice_give_backs(
    env: &Env,
    limiter: &External<NativeKeyed>,
    idle_ms: f64,
    limit: u32,
    monotonic_ms: Option<f64>,
) -> napi::Result<Vec<SliceRequestOutput>> {
    limiter.state.with(env, |state| {
        let idle_ms = not_negative(idle_ms, "idleMs")?;
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        let give_backs = state
            .limiter
            .slice_give_backs(idle_ms, limit as usize, monotonic_ms);
        Ok(give_backs
            .into_iter()
            .map(SliceRequestOutput::from)
            .collect())
    })
}

/// Whether a key holds a slice (or give-backs wait): the idle timer is needed.
#[napi(js_name = "keyedSliceHolds")]
pub fn keyed_slice_holds(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<bool> {
    limiter
        .state
        .with(env, |state| Ok(state.limiter.holds_slices()))
}
