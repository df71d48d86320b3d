//! Coded errors across the boundary (the JS face turns `code` into the right class).

use super::names::js_method;
use crate::error::{Error, ErrorCode};

pub(crate) type CodedError = napi::Error<String>;
pub(crate) type CodedResult<T> = std::result::Result<T, CodedError>;

/// An error coded `code` (its class is `names::class_of`'s).
pub(crate) fn coded(code: ErrorCode, message: impl Into<String>) -> CodedError {
    napi::Error::new(code.as_str().to_owned(), message.into())
}

/// A core error, with its code and its message (a clock error naming the JS clock's method).
pub(crate) fn from_core(error: &Error) -> CodedError {
    coded(error.code(), error.message_naming(js_method).to_string())
}

impl From<Error> for CodedError {
    fn from(error: Error) -> CodedError {
        from_core(&error)
    }
}

pub(crate) fn invalid_arg(message: impl Into<String>) -> CodedError {
    coded(ErrorCode::InvalidArg, message)
}

/// A panic that would otherwise cross the boundary, reported as an error instead.
pub(crate) fn internal(payload: &(dyn std::any::Any + Send)) -> CodedError {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    coded(
        ErrorCode::Internal,
        format!("quota-clock-source internal error (please report it): {what}"),
    )
}

/// Runs `body` with panics caught and throws its error with its `code` (napi-rs would not).
pub(crate) fn guard<T>(env: &napi::Env, body: impl FnOnce() -> CodedResult<T>) -> napi::Result<T> {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .unwrap_or_else(|payload| Err(internal(payload.as_ref())));
    outcome.map_err(|error| {
        // SAFETY: `env` is the live env of the current call.
        unsafe { napi::JsError::from(error).throw_into(env.raw()) };
        napi::Error::from_status(napi::Status::PendingException)
    })
}
