// Several endpoints (protocol.md §9): which one the client sends to, when it fails over, and when it fails back.
package headwater

import (
	"strings"
	"sync"
	"time"
)

// readyPath is the gateway's readiness endpoint, probed before failing back; a probe waits at most probeTimeout.
const (
	readyPath    = "/readyz"
	probeTimeout = 2 * time.Second
)

// healthFailure says whether a status means "this endpoint cannot take the batch now" (502, 503, 504); a
// connection error or a timeout counts too. Any other answer (200, 4xx, 429, 500) means the gateway is up.
func healthFailure(status int) bool { return status == 502 || status == 503 || status == 504 }

// endpointSwitch is a move of the client to another endpoint; failback when it returned to an earlier one.
type endpointSwitch struct {
	old, new string
	failback bool
	failures int
	spent    time.Duration
}

// endpoints is the ordered endpoints of one client and the failover state: a pure core with a clock, no I/O.
// A failure streak of the active endpoint that holds afterFailures attempts AND spans afterTime moves the client
// to the next endpoint (after the last: the first). While not on the first, the endpoints before the active one
// are probed at most every probeEvery, by one sender at a time.
type endpoints struct {
	mu            sync.Mutex
	urls          []string
	afterFailures int
	afterTime     time.Duration
	probeEvery    time.Duration
	now           func() time.Time
	active        int
	since         time.Time // start of the active endpoint's failure streak; zero when none
	failures      int
	nextProbe     time.Time
	probing       bool
	failovers     int64
	failbacks     int64
}

func newEndpoints(urls []string, afterFailures int, afterTime, probeEvery time.Duration, now func() time.Time) *endpoints {
	trimmed := make([]string, len(urls))
	for i, u := range urls {
		trimmed[i] = strings.TrimRight(u, "/")
	}
	return &endpoints{urls: trimmed, afterFailures: afterFailures, afterTime: afterTime, probeEvery: probeEvery, now: now}
}

// current is the active endpoint's index and base URL.
func (e *endpoints) current() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active, e.urls[e.active]
}

// failed records a failed attempt (connection error, timeout, 502/503/504) sent to endpoint index; a switch when
// the streak reached the bound. Failures of an endpoint no longer active do not count.
func (e *endpoints) failed(index int) *endpointSwitch {
	e.mu.Lock()
	defer e.mu.Unlock()
	if index != e.active || len(e.urls) == 1 {
		return nil
	}
	now := e.now()
	if e.since.IsZero() {
		e.since = now
	}
	e.failures++
	spent := now.Sub(e.since)
	if e.failures < e.afterFailures || spent < e.afterTime {
		return nil
	}
	old, failures := e.active, e.failures
	e.move((e.active+1)%len(e.urls), now)
	e.failovers++
	return &endpointSwitch{old: e.urls[old], new: e.urls[e.active], failures: failures, spent: spent}
}

// answered: endpoint index answered (anything but 502/503/504); its failure streak ends.
func (e *endpoints) answered(index int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if index == e.active {
		e.since, e.failures = time.Time{}, 0
	}
}

// probeTargets is the endpoints to probe now, in order; empty when on the first endpoint, when no probe is due or
// when another sender probes. A non-empty answer must be followed by probed.
func (e *endpoints) probeTargets() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == 0 || e.probing || e.now().Before(e.nextProbe) {
		return nil
	}
	e.probing = true
	targets := make([]int, e.active)
	for i := range targets {
		targets[i] = i
	}
	return targets
}

// probed: the probe found endpoint ready ready (-1: none); a switch back to it.
func (e *endpoints) probed(ready int) *endpointSwitch {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.probing = false
	now := e.now()
	e.nextProbe = now.Add(e.probeEvery)
	if ready < 0 || ready >= e.active {
		return nil
	}
	old := e.active
	e.move(ready, now)
	e.failbacks++
	return &endpointSwitch{old: e.urls[old], new: e.urls[ready], failback: true}
}

// stats is the active endpoint and the moves so far.
func (e *endpoints) stats() (active string, failovers, failbacks int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.urls[e.active], e.failovers, e.failbacks
}

func (e *endpoints) move(index int, now time.Time) {
	e.active = index
	e.since, e.failures = time.Time{}, 0
	e.nextProbe = now.Add(e.probeEvery)
}
