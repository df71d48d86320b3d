//! The keyed call the raw function could not finish on its own: a key not held (its policy
//! asked of the JS face first), a JS clock's readings, a refund, a consume that raised
//! anomalies. Writes the decision or what the call needs first into the result buffer.

use super::policy::count_for;
use super::{share_mode, KeyedState};
use crate::keyed::{Key, KeyPolicy, SharedDecision, Target, DEFAULT_POLICY};
use crate::limiter::Decision;
use crate::napi::buffer::{self, write_decision, Needs, Step};
use crate::napi::clock::BoundClock;
use crate::napi::errors::{coded, invalid_arg, CodedResult};
use crate::napi::options::positive_safe_integer;
use crate::napi::registry::notify_listener;

impl KeyedState {
    /// Sends the call's anomalies to the listener and marks the status (unless the call waits
    /// on the store).
    fn report(&self) {
        if !self.anomalies.is_empty() {
            // A shared consume that needs the store keeps its status (the anomalies still go to
            // the listener).
            let status = self.result.get(buffer::N_OR_STATUS);
            if status != buffer::STATUS_NEEDS_STORE && status != buffer::STATUS_NEEDS_SLICE {
                self.result
                    .set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED_WITH_ANOMALIES);
            }
            notify_listener(self.registry_id, self.anomaly_listener, &self.anomalies);
        }
    }

    /// After a decision: the slot of the period its quota units were taken in (for a give-back).
    fn write_period_slot(&self, key: Key<'_>) {
        if let Some(index) = self.limiter.find(key) {
            self.write_slot_of(index);
        }
    }

    /// Any call: the operation and `n` in the result buffer; `policy`, what the JS face's call of
    /// `policy(key)` returned (for a key not held); `supplied`, the readings are in the buffer
    /// (a JS clock's, or a call resumed after the JS reader). Writes the decision, or what the
    /// call needs from the JS face first (nothing read or changed): the policy, the readings, the
    /// reader.
    pub(super) fn run(
        &mut self,
        key: Key<'_>,
        policy: Option<KeyPolicy>,
        supplied: bool,
    ) -> CodedResult<()> {
        match self.step(key, policy, supplied)? {
            Ok(outcome) => {
                match outcome {
                    Outcome::Decided(decision) => {
                        write_decision(&self.result, &decision);
                        self.write_period_slot(key);
                    }
                    Outcome::Shared(outcome) => {
                        self.write_shared(&outcome);
                        self.write_period_slot(key);
                    }
                    Outcome::Refunded => {
                        self.result.set(buffer::N_OR_STATUS, buffer::STATUS_DECIDED)
                    }
                }
                // (Anomalies take the status: the JS face then asks for the share work too.)
                self.report();
            }
            Err(needs) => needs.write(&self.result),
        }
        Ok(())
    }

    /// What a call did (a decision, a shared consume's outcome, a refund), or what it needs first.
    fn step(
        &mut self,
        key: Key<'_>,
        policy: Option<KeyPolicy>,
        supplied: bool,
    ) -> CodedResult<Step<Outcome>> {
        let operation = self.result.get(buffer::OPERATION);
        let target = match (
            self.limiter.find(key),
            operation == buffer::OPERATION_REFUND,
        ) {
            (Some(index), _) => Some(Target::Held(index)),
            // A key not held is not held by a refund either, and no policy is asked.
            (None, true) => None,
            (None, false) => match policy {
                Some(policy) => Some(Target::New(self.limiter.intern(policy))),
                None if self.has_policy => return Ok(Err(Needs::Policy)),
                None => Some(Target::New(DEFAULT_POLICY)),
            },
        };
        let outcome = self.step_on(key, target, supplied);
        if let Some(Target::New(id)) = target {
            self.limiter.release_if_unused(id);
        }
        outcome
    }

    fn step_on(
        &mut self,
        key: Key<'_>,
        target: Option<Target>,
        supplied: bool,
    ) -> CodedResult<Step<Outcome>> {
        let n = self.result.get(buffer::N_OR_STATUS);
        let operation = self.result.get(buffer::OPERATION);
        let mode = share_mode(operation);
        let consume = operation == buffer::OPERATION_CONSUME || mode.is_some();
        if !consume && operation != buffer::OPERATION_REFUND {
            return Err(invalid_arg(format!("unknown operation {operation}")));
        }
        // A shared limiter admits quota units only from its reservation (shared consumes).
        if (operation == buffer::OPERATION_CONSUME && self.limiter.is_shared())
            || (mode.is_some() && !self.limiter.is_shared())
        {
            return Err(coded(
                "ERR_INTERNAL",
                format!("operation {operation} does not apply to this limiter"),
            ));
        }
        // The order of checks: n against the key's capacity before any reading.
        let count = match target {
            Some(target) if consume => count_for(n, self.limiter.capacity_of(target))?,
            _ => positive_safe_integer(n)?,
        };
        let mut clock = match BoundClock::for_call(&self.clock, &self.result, supplied) {
            Ok(clock) => clock,
            Err(needs) => return Ok(Err(needs)),
        };
        self.anomalies.clear();
        let outcome = match (target, mode) {
            (Some(target), Some(mode)) => self
                .limiter
                .consume_shared(key, target, count, mode, &mut clock, &mut self.anomalies)
                .map(Outcome::Shared),
            (Some(target), None) if consume => self
                .limiter
                .try_consume(key, target, count, &mut clock, &mut self.anomalies)
                .map(Outcome::Decided),
            _ => self
                .limiter
                .refund(key, count, &mut clock, &mut self.anomalies)
                .map(|()| Outcome::Refunded),
        };
        clock.outcome(outcome)
    }
}

/// What a call did.
enum Outcome {
    Decided(Decision),
    Shared(SharedDecision),
    Refunded,
}
