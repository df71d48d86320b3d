//! A zone's `refreshPolicy` and `policyTtlMs`: the marks live in the zone file.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::NativeZone;
use crate::limits::check_policy_ttl_ms;

/// `refreshPolicy(key)` (`None`: every key held now), in every process of the zone.
#[napi(js_name = "zoneRefreshPolicy")]
pub fn zone_refresh_policy(
    env: &Env,
    zone: &External<NativeZone>,
    key: Option<Unknown<'_>>,
) -> napi::Result<()> {
    match key {
        Some(key) => zone.cell.with_key(env, &key, |state, key| {
            state.zone()?.mark_policy_due(Some(key));
            Ok(())
        }),
        None => zone.cell.with(env, |state| {
            state.zone()?.mark_policy_due(None);
            Ok(())
        }),
    }
}

/// `policyTtlMs` in this process.
#[napi(js_name = "zoneSetPolicyTtl")]
pub fn zone_set_policy_ttl(
    env: &Env,
    zone: &External<NativeZone>,
    ttl_ms: f64,
) -> napi::Result<()> {
    zone.cell.with(env, |state| {
        state.zone()?.set_policy_ttl(check_policy_ttl_ms(ttl_ms)?);
        Ok(())
    })
}
