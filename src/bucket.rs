//! A token bucket refilled from real elapsed time (never from a wall delta directly).

#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    /// Bucket size: the largest burst.
    pub capacity: f64,
    pub refill_per_second: f64,
    /// Tokens held now; fractional between refills.
    pub tokens: f64,
}

impl TokenBucket {
    pub fn new(capacity: f64, refill_per_second: f64, initial_tokens: f64) -> TokenBucket {
        TokenBucket {
            capacity,
            refill_per_second,
            tokens: initial_tokens,
        }
    }

    /// Adds the refill owed for `elapsed_ms` of real time, up to capacity.
    #[inline]
    pub fn credit(&mut self, elapsed_ms: f64) {
        let refill = elapsed_ms * self.refill_per_second / 1000.0;
        if refill > 0.0 {
            self.tokens = (self.tokens + refill).min(self.capacity);
        }
    }

    /// Returns `n` tokens taken earlier, up to capacity.
    #[inline]
    pub fn give_back(&mut self, n: f64) {
        self.tokens = (self.tokens + n).min(self.capacity);
    }

    /// `ceil((n - tokens) / refillPerSecond * 1000)`, or 0 when `n` tokens are there.
    /// A wait too long for a finite number (a rate such as 5e-324) is the largest finite one: a
    /// wait is always a number a caller can add to a time.
    pub fn wait_ms(&self, n: f64) -> f64 {
        refill_wait_ms(self.tokens, n, self.refill_per_second)
    }
}

/// `ceil((n - tokens) / refillPerSecond * 1000)`, or 0 when `n` tokens are there; a wait
/// too long for a finite number is the largest finite one.
#[inline(always)]
pub fn refill_wait_ms(tokens: f64, n: f64, refill_per_second: f64) -> f64 {
    if tokens >= n {
        0.0
    } else {
        ((n - tokens) / refill_per_second * 1000.0)
            .ceil()
            .min(f64::MAX)
    }
}

/// Tokens after `elapsed_ms` of real time refilled at `refill_per_second`, up to capacity (the
/// arithmetic of [`TokenBucket::credit`], for buckets stored elsewhere).
#[inline(always)]
pub fn refilled(tokens: f64, elapsed_ms: f64, refill_per_second: f64, capacity: f64) -> f64 {
    let refill = elapsed_ms * refill_per_second / 1000.0;
    if refill > 0.0 {
        (tokens + refill).min(capacity)
    } else {
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_is_proportional_to_elapsed_time_and_capped_at_capacity() {
        let mut bucket = TokenBucket::new(10.0, 2.0, 0.0);
        bucket.credit(1_500.0);
        assert_eq!(bucket.tokens, 3.0);
        bucket.credit(1e12);
        assert_eq!(bucket.tokens, 10.0);
    }

    #[test]
    fn the_wait_is_the_missing_tokens_over_the_rate_rounded_up() {
        let bucket = TokenBucket::new(10.0, 3.0, 0.5);
        assert_eq!(bucket.wait_ms(1.0), 167.0);
        assert_eq!(bucket.wait_ms(0.5), 0.0);
    }

    #[test]
    fn a_wait_too_long_for_a_finite_number_is_the_largest_finite_one() {
        let bucket = TokenBucket::new(5.0, 5e-324, 0.0);
        assert_eq!(bucket.wait_ms(1.0), f64::MAX);
        assert_eq!(TokenBucket::new(1e300, 1e-10, 0.0).wait_ms(1e300), f64::MAX);
    }
}
