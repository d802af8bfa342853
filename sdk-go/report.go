// Reporting delivery problems when the application set no OnError: a log line per kind (error type and code) at
// once, then at most one every 10 s with the count of events of that kind since the previous line, so a second
// and a third rejection code are seen too and the counts stay right; Close logs what is still uncounted.
package headwater

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// reportInterval is the least time between two log lines of one kind.
const reportInterval = 10 * time.Second

type reportKind struct {
	last       time.Time
	suppressed int
}

// reporter is the default OnError.
type reporter struct {
	mu    sync.Mutex
	kinds map[string]*reportKind
	now   func() time.Time
	log   func(msg string, args ...any)
}

func newReporter() *reporter {
	return &reporter{kinds: map[string]*reportKind{}, now: time.Now, log: slog.Warn}
}

// kindOf names an error's kind and how many events it is about.
func kindOf(err error) (string, int) {
	var dropped *EventsDroppedError
	var refused *BatchRejectedError
	var rejected *EventRejectedError
	var transport *TransportError
	switch {
	case errors.As(err, &dropped):
		return "dropped " + dropped.Reason, dropped.Count
	case errors.As(err, &refused):
		return "refused " + refused.Code, refused.Count
	case errors.As(err, &rejected):
		return "rejected " + rejected.Code, 1
	case errors.As(err, &transport):
		return "transport " + strconv.Itoa(transport.Status), 1
	}
	return "other", 1
}

// report logs err now, or counts it for the next line of its kind.
func (r *reporter) report(err error) {
	kind, count := kindOf(err)
	now := r.now()
	r.mu.Lock()
	k := r.kinds[kind]
	if k != nil && now.Sub(k.last) < reportInterval {
		k.suppressed += count
		r.mu.Unlock()
		return
	}
	suppressed := 0
	if k != nil {
		suppressed = k.suppressed
	}
	r.kinds[kind] = &reportKind{last: now}
	r.mu.Unlock()
	r.log("headwater: delivery problem (set OnError to handle each one)", "error", err,
		"kind", kind, "more_events_like_it_since_last_line", suppressed)
}

// close logs the counts not logged yet.
func (r *reporter) close() {
	r.mu.Lock()
	kinds := r.kinds
	r.kinds = map[string]*reportKind{}
	r.mu.Unlock()
	for kind, k := range kinds {
		if k.suppressed > 0 {
			r.log("headwater: events not logged individually", "kind", kind, "events", k.suppressed)
		}
	}
}
