//! Anomalies as JS objects, and their delivery to `onAnomaly`.

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::anomaly::Anomaly;

#[napi(object)]
#[derive(Clone)]
pub struct AnomalyOutput {
    pub kind: String,
    pub detail: String,
    pub monotonic_delta_ms: f64,
    pub wall_delta_ms: f64,
    pub credited_ms: f64,
    pub suspended_ms: Option<f64>,
    pub step_ms: Option<f64>,
    pub skipped: Option<f64>,
    pub period_id: Option<String>,
}

impl From<&Anomaly> for AnomalyOutput {
    fn from(anomaly: &Anomaly) -> AnomalyOutput {
        AnomalyOutput {
            kind: anomaly.kind.as_str().to_owned(),
            detail: anomaly.detail.clone(),
            monotonic_delta_ms: anomaly.monotonic_delta_ms,
            wall_delta_ms: anomaly.wall_delta_ms,
            credited_ms: anomaly.credited_ms,
            suspended_ms: anomaly.suspended_ms,
            step_ms: anomaly.step_ms,
            skipped: anomaly.skipped.map(|count| count as f64),
            period_id: anomaly.period_id.clone(),
        }
    }
}

/// One anomaly for one limiter's `onAnomaly`, named by the listener id the JS face gave it.
#[napi(object)]
pub struct AnomalyDelivery {
    pub listener: f64,
    pub anomaly: AnomalyOutput,
}

/// The registry's anomaly dispatcher, as a threadsafe function (one per registry, not one per
/// limiter: each costs an event-loop handle and ~2 KiB):
/// - `AnomalyDelivery`: what the core hands over, and (same type) the one argument JS receives;
///   the JS face routes it to that limiter's `onAnomaly`;
/// - `Unknown`: the dispatcher's return value, ignored;
/// - `AnomalyDelivery` again: the argument, passed through as it came;
/// - `Status`: napi's own error status;
/// - `false`: not callee-handled, no error-first argument;
/// - `true`: weak, so a pending delivery never keeps the event loop alive.
///
/// Calls are `NonBlocking` and queue to the next turn of the creating thread's event loop, so a
/// handler never runs inside `tryConsume`. The JS face wraps each handler so that a throw becomes
/// `process.emitWarning`.
pub(crate) type AnomalyDispatcher = ThreadsafeFunction<AnomalyDelivery, Unknown<'static>, AnomalyDelivery, Status, false, true>;

pub(crate) fn build_dispatcher(handler: &Function<'_, AnomalyDelivery, Unknown<'static>>) -> Result<AnomalyDispatcher> {
    handler
        .build_threadsafe_function::<AnomalyDelivery>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(|context| Ok(context.value))
}

pub(crate) fn deliver(dispatcher: &AnomalyDispatcher, listener: f64, anomaly: &Anomaly) {
    // A full or closing queue only drops a log line; nothing to do about it here.
    let delivery = AnomalyDelivery { listener, anomaly: AnomalyOutput::from(anomaly) };
    let _ = dispatcher.call(delivery, ThreadsafeFunctionCallMode::NonBlocking);
}
