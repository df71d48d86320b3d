//! Restoring from a snapshot: the parsed image and the policies of its keys.

use std::ptr;

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use super::policy::{key_policy, PolicyInput};
use crate::error::ErrorCode;
use crate::keyed::{KeyPolicy, Snapshot, SnapshotError};
use crate::napi::errors::{coded, from_core, guard, invalid_arg, CodedError, CodedResult};

/// A snapshot read and validated, with the policies of its keys once the JS face has them. The JS
/// face holds it as an External (free functions on handles, not `#[napi]` classes: a class costs
/// every load of the addon a few KB that Node-API keeps with the load's environment, measured).
pub struct NativeSnapshot {
    pub(super) snapshot: Snapshot,
    /// Distinct policies, and for each key the index of its own (`u32::MAX`: the defaults).
    pub(super) policies: Vec<KeyPolicy>,
    pub(super) choices: Vec<u32>,
}

pub(super) fn snapshot_error(error: &SnapshotError) -> CodedError {
    from_core(&error.clone().into())
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
    pub(super) fn key_at<'env>(
        &self,
        env: &'env Env,
        position: u32,
    ) -> napi::Result<Unknown<'env>> {
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
                return Err(coded(ErrorCode::Internal, "could not create a key string"));
            }
            // SAFETY: `value` was just created in the current scope.
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
        })
    }

    pub(super) fn set_policies(
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
