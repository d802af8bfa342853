// Tests of failover between several endpoints: the core's rules on a fake clock, and a client failing over and
// back between two real loopback HTTP servers (protocol.md §9).
package headwater

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestFailoverNeedsBothTheCountAndTheTime(t *testing.T) {
	clock := &fakeClock{time.Unix(100, 0)}
	e := newEndpoints([]string{"http://a", "http://b/", "http://c"}, 3, 10*time.Second, 5*time.Second, clock.now)
	for i := 0; i < 3; i++ {
		if e.failed(0) != nil {
			t.Fatal("3 failures in 0 s moved the client")
		}
	}
	clock.t = clock.t.Add(9900 * time.Millisecond)
	if e.failed(0) != nil {
		t.Fatal("4 failures in 9.9 s moved the client")
	}
	clock.t = clock.t.Add(100 * time.Millisecond)
	sw := e.failed(0)
	if sw == nil || sw.old != "http://a" || sw.new != "http://b" || sw.failback || sw.failures != 5 {
		t.Fatalf("switch %+v", sw)
	}
	if i, u := e.current(); i != 1 || u != "http://b" {
		t.Fatalf("current %d %s", i, u)
	}
	for i := 0; i < 5; i++ { // late failures of requests sent to the old endpoint do not count
		if e.failed(0) != nil {
			t.Fatal("a stale failure moved the client")
		}
	}
	e.answered(1)
	clock.t = clock.t.Add(time.Minute)
	for i := 0; i < 2; i++ {
		if e.failed(1) != nil {
			t.Fatal("moved before 3 failures")
		}
	}
	clock.t = clock.t.Add(10 * time.Second)
	if sw := e.failed(1); sw == nil || sw.new != "http://c" {
		t.Fatalf("switch %+v", sw)
	}
	e.failed(2)
	e.failed(2)
	clock.t = clock.t.Add(time.Minute)
	if sw := e.failed(2); sw == nil || sw.new != "http://a" { // after the last: the first again
		t.Fatalf("switch %+v", sw)
	}
	if _, fo, fb := e.stats(); fo != 3 || fb != 0 {
		t.Fatalf("failovers %d failbacks %d", fo, fb)
	}
}

func TestProbesAreDueOneAtATimeAndFailBackToTheFirstReady(t *testing.T) {
	clock := &fakeClock{time.Unix(100, 0)}
	e := newEndpoints([]string{"http://a", "http://b", "http://c"}, 1, 0, 5*time.Second, clock.now)
	if len(e.probeTargets()) != 0 {
		t.Fatal("probes on the primary")
	}
	e.failed(0)
	e.failed(1)
	if len(e.probeTargets()) != 0 {
		t.Fatal("a probe right after the move")
	}
	clock.t = clock.t.Add(5 * time.Second)
	if got := e.probeTargets(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("targets %v", got)
	}
	if len(e.probeTargets()) != 0 {
		t.Fatal("two probes at once")
	}
	if e.probed(-1) != nil {
		t.Fatal("moved without a ready endpoint")
	}
	clock.t = clock.t.Add(5 * time.Second)
	e.probeTargets()
	if sw := e.probed(1); sw == nil || !sw.failback || sw.new != "http://b" {
		t.Fatalf("switch %+v", sw)
	}
	clock.t = clock.t.Add(5 * time.Second)
	e.probeTargets()
	if sw := e.probed(0); sw == nil || sw.new != "http://a" {
		t.Fatalf("switch %+v", sw)
	}
	if _, _, fb := e.stats(); fb != 2 {
		t.Fatalf("failbacks %d", fb)
	}
}

func TestEndpointsConfig(t *testing.T) {
	env := map[string]string{"HEADWATER_ENDPOINTS": "http://a, http://b", "HEADWATER_WRITE_KEY": "k",
		"HEADWATER_FAILOVER_AFTER_S": "2.5", "HEADWATER_FAILOVER_AFTER_FAILURES": "5", "HEADWATER_FAILBACK_PROBE_S": "30"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Validate() != nil || len(cfg.Endpoints) != 2 || cfg.Endpoints[1] != "http://b" ||
		cfg.FailoverAfter != 2500*time.Millisecond || cfg.FailoverAfterFailures != 5 || cfg.FailbackProbe != 30*time.Second {
		t.Fatalf("cfg %+v err %v", cfg, err)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Endpoint = "http://x" },
		func(c *Config) { c.Endpoints = []string{"http://a", "http://a/"} },
		func(c *Config) { c.Endpoints = []string{"http://a", "ftp://b"} },
		func(c *Config) { c.Endpoints = []string{"http://a", "https://b"} },
		func(c *Config) { c.FailoverAfterFailures = 0 },
	} {
		c := cfg
		bad(&c)
		if c.Validate() == nil {
			t.Fatalf("accepted %+v", c)
		}
	}
}

// region is a loopback gateway: it answers batches as its mode says (503, or 200 counting the seqs) and /readyz.
type region struct {
	srv     *httptest.Server
	down    atomic.Bool // answer 503 to batches and /readyz
	probes  atomic.Int64
	mu      sync.Mutex
	seqs    map[int64]int
	batches map[string][]any
}

func newRegion(t *testing.T) *region {
	r := &region{seqs: map[int64]int{}, batches: map[string][]any{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/readyz" {
			r.probes.Add(1)
			if r.down.Load() {
				w.WriteHeader(503)
			}
			return
		}
		raw, _ := io.ReadAll(req.Body)
		body, err := zdec.DecodeAll(raw, nil)
		var b sentBatch
		if err != nil || json.Unmarshal(body, &b) != nil {
			w.WriteHeader(400)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		evs := make([]any, len(b.Events))
		for i, e := range b.Events {
			evs[i] = e["seq"]
		}
		r.batches[b.BatchID] = evs
		if r.down.Load() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"code":"kafka_unavailable","message":"down"}`))
			return
		}
		for _, e := range b.Events {
			r.seqs[int64(e["seq"].(float64))]++
		}
		_, _ = w.Write([]byte(`{"accepted":` + itoa(len(b.Events)) + `,"rejected":[]}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func failoverClient(t *testing.T, urls []string, opts ...Option) *Client {
	t.Helper()
	base := []Option{WithEndpoints(urls...), WithLinger(5 * time.Millisecond), WithOnError(func(error) {}),
		WithRetry(5*time.Millisecond, 20*time.Millisecond, 30*time.Second), WithFailover(50*time.Millisecond, 3, time.Hour)}
	c, err := New("", "wk_test", append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestTheClientFailsOverKeepingBatchIDsAndSeqs(t *testing.T) {
	for _, mode := range []string{"refused", "503"} {
		t.Run(mode, func(t *testing.T) {
			primary, secondary := newRegion(t), newRegion(t)
			if mode == "refused" {
				primary.srv.Close()
			} else {
				primary.down.Store(true)
			}
			c := failoverClient(t, []string{primary.srv.URL, secondary.srv.URL})
			for i := 0; i < 100; i++ {
				if err := c.Track("page_view", map[string]any{"i": i}); err != nil {
					t.Fatal(err)
				}
			}
			mustFlush(t, c)
			m := c.Metrics()
			if m.Acknowledged != 100 || m.Failovers != 1 || m.Endpoint != secondary.srv.URL || m.DroppedTotal() != 0 {
				t.Fatalf("metrics %+v", m)
			}
			secondary.mu.Lock()
			defer secondary.mu.Unlock()
			for seq := int64(0); seq < 100; seq++ {
				if secondary.seqs[seq] != 1 {
					t.Fatalf("seq %d acknowledged %d times by the secondary", seq, secondary.seqs[seq])
				}
			}
			primary.mu.Lock()
			defer primary.mu.Unlock()
			for id, evs := range primary.batches { // a batch the primary refused is the same batch on the secondary
				if got, ok := secondary.batches[id]; !ok || len(got) != len(evs) || got[0] != evs[0] {
					t.Fatalf("batch %s: primary %v, secondary %v", id, evs, got)
				}
			}
			if mode == "503" && len(primary.batches) == 0 {
				t.Fatal("the primary saw no batch")
			}
		})
	}
}

func TestTheClientFailsBackAfterAReadyProbe(t *testing.T) {
	primary, secondary := newRegion(t), newRegion(t)
	primary.down.Store(true)
	c := failoverClient(t, []string{primary.srv.URL, secondary.srv.URL}, WithFailover(50*time.Millisecond, 3, 50*time.Millisecond))
	for i := 0; i < 10; i++ {
		_ = c.Track("page_view", map[string]any{})
	}
	mustFlush(t, c)
	if c.Metrics().Endpoint != secondary.srv.URL {
		t.Fatalf("metrics %+v", c.Metrics())
	}
	primary.down.Store(false)
	eventually(t, func() bool { // each flush sends a batch; a due probe moves the client back
		_ = c.Track("page_view", map[string]any{})
		mustFlush(t, c)
		return c.Metrics().Endpoint == primary.srv.URL
	}, "a failback to the primary")
	_ = c.Track("page_view", map[string]any{"last": true})
	mustFlush(t, c)
	m := c.Metrics()
	if m.Failbacks != 1 || m.Acknowledged != m.Enqueued || primary.probes.Load() == 0 {
		t.Fatalf("metrics %+v, probes %d", m, primary.probes.Load())
	}
	primary.mu.Lock()
	defer primary.mu.Unlock()
	if primary.seqs[m.Enqueued-1] != 1 {
		t.Fatalf("the last event (seq %d) did not go to the primary: %v", m.Enqueued-1, primary.seqs)
	}
}
