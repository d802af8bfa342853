// The adaptive in-flight limit (protocol.md §6.2): how many requests one client keeps outstanding.
package headwater

import (
	"context"
	"math"
	"sync"
	"time"
)

const (
	initialLimit = 4                // the window a client starts with (or MaxInFlight if smaller)
	queueGrow    = 2.0              // below this many estimated queued requests a limited answer grows the window
	queueShrink  = 4.0              // above this many the window shrinks by 1/limit per answer
	rttBucket    = 10 * time.Second // the minimum round-trip time is kept over the last 10 to 20 s
)

// signal is what one request's answer means for the window.
type signal int

const (
	signalNeutral signal = iota // 413, a refusal, or no request made: no change
	signalSuccess               // 200 / 422: a round-trip sample
	signalFailure               // a retryable status, a connection error or a timeout: halve
)

// adaptiveLimit is the pure core (no clock, no lock): a window that grows while answers come back without
// queueing (slow start, then additive increase, as TCP's congestion window), shrinks when the round-trip time
// says requests queue at the gateway (Vegas, as Netflix's concurrency-limits), and halves at once on a retryable
// failure.
type adaptiveLimit struct {
	ceiling     int
	limit       float64
	ssthresh    float64
	generation  int64
	bucketMin   time.Duration
	olderMin    time.Duration
	bucketStart time.Time
	answered    bool // an answer came since the last decrease
}

func newAdaptiveLimit(ceiling int) *adaptiveLimit {
	return &adaptiveLimit{ceiling: ceiling, limit: float64(min(initialLimit, ceiling)), ssthresh: float64(ceiling),
		bucketMin: math.MaxInt64, olderMin: math.MaxInt64, answered: true}
}

// window is the number of requests that may be outstanding now.
func (l *adaptiveLimit) window() int { return max(1, int(l.limit)) }

// minRTT is the smallest round-trip time of the last 10 to 20 s (MaxInt64 before the first).
func (l *adaptiveLimit) minRTT() time.Duration { return min(l.bucketMin, l.olderMin) }

func (l *adaptiveLimit) sample(rtt time.Duration, now time.Time) {
	if l.bucketStart.IsZero() || now.Sub(l.bucketStart) >= rttBucket {
		l.olderMin, l.bucketMin, l.bucketStart = l.bucketMin, math.MaxInt64, now
	}
	l.bucketMin = min(l.bucketMin, rtt)
}

// succeeded records a 200/422 after rtt, answered at now; limited: the request filled the window when sent.
func (l *adaptiveLimit) succeeded(rtt time.Duration, limited bool, now time.Time) {
	l.answered = true
	rtt = max(rtt, time.Microsecond)
	l.sample(rtt, now)
	queue := l.limit * (1 - float64(l.minRTT())/float64(rtt))
	switch {
	case queue > queueShrink:
		l.limit = max(1, l.limit-1/l.limit)
		l.ssthresh = min(l.ssthresh, l.limit)
	case !limited:
	case queue >= queueGrow:
		l.ssthresh = min(l.ssthresh, l.limit)
	case l.limit < l.ssthresh:
		l.limit = min(float64(l.ceiling), l.limit+1)
	default:
		l.limit = min(float64(l.ceiling), l.limit+1/l.limit)
	}
}

// failed records a retryable failure of a request sent in generation: the window halves once per generation.
func (l *adaptiveLimit) failed(generation int64) {
	if generation != l.generation {
		return
	}
	l.generation++
	l.limit = max(1, l.limit/2)
	if l.answered {
		l.ssthresh = l.limit
	}
	l.answered = false
}

// slot is a place in the window held by one request.
type slot struct {
	generation int64
	limited    bool
	started    time.Time
}

// window is the adaptiveLimit shared by the sender goroutines of one client.
type window struct {
	mu          sync.Mutex
	lim         *adaptiveLimit
	outstanding int
	peak        int // the most requests ever outstanding at once (connections the transport needed)
	changed     broadcast
}

func newWindow(ceiling int) *window { return &window{lim: newAdaptiveLimit(ceiling)} }

// acquire waits for a place in the window; false when ctx ends first.
func (w *window) acquire(ctx context.Context) (slot, bool) {
	w.mu.Lock()
	for w.outstanding >= w.lim.window() {
		ch := w.changed.wait()
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return slot{}, false
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	w.outstanding++
	w.peak = max(w.peak, w.outstanding)
	return slot{generation: w.lim.generation, limited: w.outstanding >= w.lim.window(), started: time.Now()}, true
}

// release gives the place back with what the request's answer says about the gateway.
func (w *window) release(s slot, sig signal) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outstanding--
	switch sig {
	case signalSuccess:
		w.lim.succeeded(now.Sub(s.started), s.limited, now)
	case signalFailure:
		w.lim.failed(s.generation)
	}
	w.changed.notify()
}

// newPath: the client moved to another endpoint (protocol.md §9); the window stays, minRTT starts again.
func (w *window) newPath() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lim.bucketMin, w.lim.olderMin, w.lim.bucketStart = math.MaxInt64, math.MaxInt64, time.Time{}
}

// size is the current window, and peak the most requests outstanding at once so far.
func (w *window) size() (size, peak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lim.window(), w.peak
}
