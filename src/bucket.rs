//! A token bucket refilled from real elapsed time (never from a wall delta directly).

/// A token bucket's settings; the tokens held are the holder's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketLimits {
    /// Bucket size: the largest burst.
    pub capacity: f64,
    pub refill_per_second: f64,
}

impl BucketLimits {
    /// `tokens` plus the refill owed for `elapsed_ms` of real time, up to capacity.
    #[inline(always)]
    pub fn credit(&self, tokens: f64, elapsed_ms: f64) -> f64 {
        refilled(tokens, elapsed_ms, self.refill_per_second, self.capacity)
    }
}

/// The smaller of `value` and `limit`, neither of them NaN: `f64::min` without its NaN handling,
/// one instruction on the hot path instead of five. (A refill is positive, tokens are finite and
/// a wait is a positive number or infinity, so no NaN reaches it.)
#[inline(always)]
fn at_most(value: f64, limit: f64) -> f64 {
    debug_assert!(!value.is_nan() && !limit.is_nan());
    if value < limit {
        value
    } else {
        limit
    }
}

/// `tokens` with `n` taken earlier given back, up to `capacity` (the arithmetic of
/// [`BucketLimits::give_back`]).
#[inline]
pub fn given_back(tokens: f64, n: f64, capacity: f64) -> f64 {
    at_most(tokens + n, capacity)
}

/// `ceil((n - tokens) / refillPerSecond * 1000)`, or 0 when `n` tokens are there; a wait
/// too long for a finite number is the largest finite one.
#[inline(always)]
pub fn refill_wait_ms(tokens: f64, n: f64, refill_per_second: f64) -> f64 {
    if tokens >= n {
        0.0
    } else {
        at_most(((n - tokens) / refill_per_second * 1000.0).ceil(), f64::MAX)
    }
}

/// Tokens after `elapsed_ms` of real time refilled at `refill_per_second`, up to capacity (the
/// arithmetic of [`BucketLimits::credit`]).
#[inline(always)]
pub fn refilled(tokens: f64, elapsed_ms: f64, refill_per_second: f64, capacity: f64) -> f64 {
    let refill = elapsed_ms * refill_per_second / 1000.0;
    if refill > 0.0 {
        at_most(tokens + refill, capacity)
    } else {
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(capacity: f64, refill_per_second: f64) -> BucketLimits {
        BucketLimits {
            capacity,
            refill_per_second,
        }
    }

    #[test]
    fn refill_is_proportional_to_elapsed_time_and_capped_at_capacity() {
        let bucket = limits(10.0, 2.0);
        let tokens = bucket.credit(0.0, 1_500.0);
        assert_eq!(tokens, 3.0);
        assert_eq!(bucket.credit(tokens, 1e12), 10.0);
        assert_eq!(
            bucket.credit(tokens, -5.0),
            tokens,
            "no refill for a negative time"
        );
        assert_eq!(given_back(9.5, 3.0, bucket.capacity), 10.0);
    }

    #[test]
    fn the_wait_is_the_missing_tokens_over_the_rate_rounded_up() {
        assert_eq!(refill_wait_ms(0.5, 1.0, 3.0), 167.0);
        assert_eq!(refill_wait_ms(0.5, 0.5, 3.0), 0.0);
    }

    #[test]
    fn a_wait_too_long_for_a_finite_number_is_the_largest_finite_one() {
        assert_eq!(refill_wait_ms(0.0, 1.0, 5e-324), f64::MAX);
        assert_eq!(refill_wait_ms(0.0, 1e300, 1e-10), f64::MAX);
    }

    #[test]
    fn at_most_is_f64_min_for_every_value_that_is_not_nan() {
        let values = [
            f64::NEG_INFINITY,
            -f64::MAX,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            5e-324,
            1.0,
            1e300,
            f64::MAX,
            f64::INFINITY,
        ];
        for a in values {
            for b in values {
                assert_eq!(at_most(a, b), a.min(b), "at_most({a}, {b})");
            }
        }
    }

    #[test]
    fn a_refill_too_large_for_a_number_fills_the_bucket() {
        let bucket = limits(10.0, f64::MAX);
        assert_eq!(bucket.credit(2.0, f64::MAX), 10.0);
        assert_eq!(refilled(2.0, 1e300, 1e300, 10.0), 10.0);
    }
}
