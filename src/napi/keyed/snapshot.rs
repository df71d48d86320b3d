//! Restoring from a snapshot: the parsed image and the policies of its keys.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::policy::{key_policy, PolicyInput};
use crate::error::Error;
use crate::keyed::{KeyPolicy, Snapshot};
use crate::napi::errors::{guard, invalid_arg, CodedResult};

/// A snapshot validated, with its keys' policies once given (an External: a class costs more).
pub struct NativeSnapshot {
    pub(super) snapshot: Snapshot,
    /// Distinct policies, and for each key the index of its own (`u32::MAX`: the defaults).
    pub(super) policies: Vec<KeyPolicy>,
    pub(super) choices: Vec<u32>,
}

/// Validates every byte of `bytes` (and that it holds at most `max_keys` keys).
#[napi(js_name = "snapshotParse")]
pub fn snapshot_parse(
    env: &Env,
    bytes: Uint8Array,
    max_keys: f64,
) -> napi::Result<External<NativeSnapshot>> {
    guard(env, || {
        let snapshot = Snapshot::parse(&bytes, max_keys as u64).map_err(Error::from)?;
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
pub fn snapshot_key_at(
    env: &Env,
    plan: &External<NativeSnapshot>,
    position: u32,
) -> napi::Result<Utf16String> {
    guard(env, || {
        if position as usize >= plan.snapshot.len() {
            return Err(invalid_arg(format!("no key {position} in this snapshot")));
        }
        Ok(plan.snapshot.key(position as usize).to_utf16().into())
    })
}

/// The keys' policies (`choices[i]` indexes `policies`; `u32::MAX`: the defaults), all checked.
#[napi(js_name = "snapshotSetPolicies")]
pub fn snapshot_set_policies(
    env: &Env,
    plan: &mut External<NativeSnapshot>,
    policies: Vec<PolicyInput>,
    choices: Uint32Array,
) -> napi::Result<()> {
    guard(env, || {
        let policies = policies.iter().map(key_policy);
        let policies = policies.collect::<CodedResult<Vec<_>>>()?;
        let names_one = |&choice: &u32| choice == u32::MAX || (choice as usize) < policies.len();
        if choices.len() != plan.snapshot.len() || !choices.iter().all(names_one) {
            return Err(invalid_arg(
                "one policy choice per key, each naming a policy",
            ));
        }
        plan.policies = policies;
        plan.choices = choices.to_vec();
        Ok(())
    })
}
