// Delivery counters: queued, sent, acknowledged, rejected, dropped by reason, retried; they also drive Flush.
package headwater

import (
	"context"
	"maps"
	"sync"
)

// Metrics is a snapshot of a client's counters (events unless the name says batches or bytes).
//
// Enqueued: events accepted by Track. Queued: events in memory not yet sealed in a batch. Sent: events in
// batches handed to a sender (a batch sent again after its retry deadline counts again). Acknowledged: events
// the gateway accepted. Rejected: events the gateway rejected (listed in a 200/422). Dropped: events dropped,
// by reason (refused batches count as refused_http_<status>). Retries: retried requests. PendingBatches /
// PendingEvents: sealed, not yet answered. SpoolBytes: bytes held by pending batches. InFlightLimit: the adaptive
// in-flight window now (protocol.md §6.2), between 1 and MaxInFlight. Endpoint: the endpoint sent to now;
// Failovers / Failbacks: moves to the next endpoint / back to an earlier one (protocol.md §9).
type Metrics struct {
	Queued         int
	Enqueued       int64
	Sent           int64
	Acknowledged   int64
	Rejected       int64
	Dropped        map[string]int64
	Retries        int64
	BatchesSent    int64
	PendingBatches int
	PendingEvents  int
	SpoolBytes     int64
	InFlightLimit  int
	Endpoint       string
	Failovers      int64
	Failbacks      int64
}

// DroppedTotal is the events dropped for any reason.
func (m Metrics) DroppedTotal() int64 {
	var n int64
	for _, v := range m.Dropped {
		n += v
	}
	return n
}

// counters are the live counters; settled (events in a final state after acceptance) drives Flush.
type counters struct {
	mu           sync.Mutex
	sent         int64
	acknowledged int64
	rejected     int64
	retries      int64
	batchesSent  int64
	settled      int64
	lostMark     int64 // accepted events lost (rejected or dropped) at the previous lossSinceLastCheck
	lost         int64 // accepted events rejected or dropped so far
	dropped      map[string]int64
	changed      broadcast
}

func newCounters() *counters { return &counters{dropped: map[string]int64{}} }

func (c *counters) addSent(events int) {
	c.mu.Lock()
	c.sent += int64(events)
	c.batchesSent++
	c.mu.Unlock()
}

func (c *counters) addRetry() {
	c.mu.Lock()
	c.retries++
	c.mu.Unlock()
}

// settle counts events that reached a final state; accepted says whether they had been accepted by Track
// (only those count towards Flush).
func (c *counters) settle(acknowledged, rejected int, reason string, dropped int, accepted bool) {
	c.mu.Lock()
	c.acknowledged += int64(acknowledged)
	c.rejected += int64(rejected)
	if dropped > 0 {
		c.dropped[reason] += int64(dropped)
	}
	if accepted {
		c.settled += int64(acknowledged + rejected + dropped)
		c.lost += int64(rejected + dropped)
		c.changed.notify()
	}
	c.mu.Unlock()
}

// waitSettled blocks until target events are settled; false when ctx ends first.
func (c *counters) waitSettled(ctx context.Context, target int64) bool {
	for {
		c.mu.Lock()
		if c.settled >= target {
			c.mu.Unlock()
			return true
		}
		ch := c.changed.wait()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// lossSinceLastCheck is the accepted events rejected or dropped since the previous call (or the start).
func (c *counters) lossSinceLastCheck() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.lost - c.lostMark
	c.lostMark = c.lost
	return n
}

func (c *counters) snapshot() Metrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Metrics{Sent: c.sent, Acknowledged: c.acknowledged, Rejected: c.rejected, Dropped: maps.Clone(c.dropped),
		Retries: c.retries, BatchesSent: c.batchesSent}
}
