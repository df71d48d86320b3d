//! A keyed call the raw function could not finish (a key not held, a JS clock, a refund, a
//! consume with anomalies): the decision, or what it needs first, into the result buffer.

use super::policy::KEY_CAPACITY;
use super::{share_mode, KeyedState};
use crate::args;
use crate::error::ErrorCode;
use crate::keyed::{Key, KeyPolicy, SharedDecision, Target};
use crate::limiter::Decision;
use crate::napi::buffer::{self, write_decision, Step};
use crate::napi::clock::BoundClock;
use crate::napi::errors::{coded, invalid_arg, CodedResult};
use crate::napi::registry::notify_listener;

impl KeyedState {
    /// Sends the call's anomalies to the listener and marks the status.
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

    /// Any call (its operation and `n` in the buffer), with what `policy(key)` returned and the
    /// readings if `supplied`: writes the decision, or what it needs first (nothing changed).
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
        let refund = self.result.get(buffer::OPERATION) == buffer::OPERATION_REFUND;
        // The order of checks: `n` ≥ 1 before the policy of a new key is asked.
        args::positive_count(self.result.get(buffer::N_OR_STATUS))?;
        // A refund of a key not held holds no key, and asks no policy.
        if refund && self.limiter.find(key).is_none() {
            return self.step_on(key, None, supplied);
        }
        self.on_target(key, policy, |state, target| {
            state.step_on(key, Some(target), supplied)
        })
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
            let message = format!("operation {operation} does not apply to this limiter");
            return Err(coded(ErrorCode::Internal, message));
        }
        // The order of checks: n against the key's capacity before any reading.
        let count = match target {
            Some(target) if consume => {
                args::count(n, self.limiter.capacity_of(target), KEY_CAPACITY)?
            }
            _ => args::positive_count(n)?,
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

enum Outcome {
    Decided(Decision),
    Shared(SharedDecision),
    Refunded,
}
