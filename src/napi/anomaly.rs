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

/// `onAnomaly`, as a threadsafe function:
/// - `AnomalyOutput`: what the core hands over, and (same type) the one argument JS receives;
/// - `Unknown`: the handler's return value, ignored;
/// - `Status`: napi's own error status;
/// - `false`: not callee-handled, the handler gets the anomaly alone (no error-first argument);
/// - `true`: weak, so a pending delivery never keeps the event loop alive.
///
/// Calls are `NonBlocking` and queue to the next turn of the creating thread's event loop, so the
/// handler never runs inside `tryConsume`. The JS face wraps the user's handler so that a throw
/// becomes `process.emitWarning`.
pub(crate) type AnomalyCallback = ThreadsafeFunction<AnomalyOutput, Unknown<'static>, AnomalyOutput, Status, false, true>;

pub(crate) fn build_callback(handler: &Function<'_, AnomalyOutput, Unknown<'static>>) -> Result<AnomalyCallback> {
    handler
        .build_threadsafe_function::<AnomalyOutput>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(|context| Ok(context.value))
}

pub(crate) fn deliver(callback: &AnomalyCallback, anomaly: &Anomaly) {
    // A full or closing queue only drops a log line; nothing to do about it here.
    let _ = callback.call(AnomalyOutput::from(anomaly), ThreadsafeFunctionCallMode::NonBlocking);
}
