// The retry rule (protocol.md §4, §6): what a status means, and full-jitter backoff that honours Retry-After.
package headwater

import (
	"math/rand/v2"
	"time"
)

// retryAfterCapFactor: a Retry-After is honoured up to this many times RetryMax (protocol.md §6).
const retryAfterCapFactor = 10

// outcome is what an HTTP status means for a batch.
type outcome int

const (
	outcomeDone    outcome = iota // 200, 422: answered per event
	outcomeSplit                  // 413: split in halves (one event: dropped)
	outcomeRetry                  // 408, 429, 500, 502, 503, 504: retried
	outcomeRefused                // every other status: refused, not retried
)

func classify(status int) outcome {
	switch status {
	case 200, 422:
		return outcomeDone
	case 413:
		return outcomeSplit
	case 408, 429, 500, 502, 503, 504:
		return outcomeRetry
	}
	return outcomeRefused
}

// backoff is the wait before retry number attempt (1-based): uniform in [0, min(cap, base*2^(attempt-1))],
// and never shorter than retryAfter (seconds; negative when absent): the per-batch deadline bounds it.
func backoff(attempt int, base, cap time.Duration, retryAfter float64) time.Duration {
	ceiling := cap
	if attempt < 40 {
		if d := base << (attempt - 1); d > 0 && d < cap {
			ceiling = d
		}
	}
	wait := time.Duration(rand.Int64N(int64(ceiling) + 1))
	if retryAfter >= 0 {
		ra := time.Duration(min(retryAfter, 1e9) * float64(time.Second))
		wait = max(wait, ra)
	}
	return wait
}
