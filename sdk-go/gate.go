// The client's gate (protocol.md §6.1): a Retry-After holds every sender, one sender probes a failing gateway,
// and any answer (or Close) wakes every wait, backoffs included.
package headwater

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// gate is shared by every delivery of one client. Deliveries are told apart by an id from newID.
type gate struct {
	mu         sync.Mutex
	changed    broadcast
	ids        uint64
	prober     uint64    // the delivery probing a failing gateway; 0 when none
	since      time.Time // start of the failure streak; zero when none
	failures   int
	notBefore  time.Time // nobody sends before this (the server's Retry-After)
	wakes      uint64    // bumped by every wake-up: a backoff that sees it change ends
	closing    bool
	closingMax time.Duration // RetryRefusedMax: the cap of a backoff while Close waits
	report     func(error)   // hears of the first failure of each streak
}

func newGate(closingMax time.Duration, report func(error)) *gate {
	return &gate{closingMax: closingMax, report: report}
}

// newID names one delivery (its retries share the id).
func (g *gate) newID() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids++
	return g.ids
}

// enter waits while a Retry-After holds or another delivery probes a failing gateway; ctx.Err() on stop.
func (g *gate) enter(ctx context.Context, me uint64) error {
	g.mu.Lock()
	for {
		if err := ctx.Err(); err != nil {
			g.mu.Unlock()
			return err
		}
		hold := time.Until(g.notBefore)
		if hold <= 0 {
			if g.since.IsZero() || g.prober == me {
				g.mu.Unlock()
				return nil
			}
			if g.prober == 0 { // a streak whose prober gave up: this delivery probes now
				g.prober = me
				g.mu.Unlock()
				return nil
			}
		}
		ch := g.changed.wait()
		g.mu.Unlock()
		var timer *time.Timer
		var expired <-chan time.Time
		if hold > 0 {
			timer = time.NewTimer(hold)
			expired = timer.C
		}
		select {
		case <-ch:
		case <-expired:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		g.mu.Lock()
	}
}

// hold stops every sender of the client for d (a Retry-After), also after a deadline.
func (g *gate) hold(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := time.Now().Add(d); t.After(g.notBefore) {
		g.notBefore = t
	}
}

// capped is a backoff as it will be waited: at most RetryRefusedMax while Close waits.
func (g *gate) capped(d time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return min(d, g.closingMax)
	}
	return d
}

// backoff waits d (see capped); it ends early at a wake-up after since (from failed); ctx.Err() on stop.
func (g *gate) backoff(ctx context.Context, d time.Duration, since uint64) error {
	timer := time.NewTimer(g.capped(d))
	defer timer.Stop()
	for {
		g.mu.Lock()
		if g.wakes != since {
			g.mu.Unlock()
			return nil
		}
		ch := g.changed.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// failed records a retryable failure of delivery me: a streak starts (me probes) unless one runs. It returns the
// wake-up count to pass to backoff, so an answer that comes before the backoff starts still ends it.
func (g *gate) failed(me uint64, err error) uint64 {
	g.mu.Lock()
	first := g.since.IsZero()
	if first {
		g.since, g.prober = time.Now(), me
	}
	g.failures++
	wakes := g.wakes
	g.mu.Unlock()
	if first {
		g.report(err)
	}
	return wakes
}

// answered: a request got an answer; the streak ends and every wait ends.
func (g *gate) answered() {
	g.mu.Lock()
	since, failures := g.since, g.failures
	g.since, g.failures, g.prober = time.Time{}, 0, 0
	g.wakes++
	g.changed.notify()
	g.mu.Unlock()
	if !since.IsZero() {
		slog.Info("headwater: delivery recovered", "after", time.Since(since).Round(time.Millisecond),
			"failed_attempts", failures)
	}
}

// switched: the client moved to another endpoint (protocol.md §9); the streak and any Retry-After hold (the old
// endpoint's) end, and every wait ends, so pending batches go to the new endpoint at once.
func (g *gate) switched() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.since, g.failures, g.prober = time.Time{}, 0, 0
	g.notBefore = time.Time{}
	g.wakes++
	g.changed.notify()
}

// gaveUp: delivery me stops probing (deadline or stop); the next delivery at the gate probes.
func (g *gate) gaveUp(me uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.prober == me {
		g.prober = 0
		g.changed.notify()
	}
}

// wake ends every wait now; closing: Close started, so later backoffs are capped as well.
func (g *gate) wake(closing bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closing = g.closing || closing
	g.wakes++
	g.changed.notify()
}
