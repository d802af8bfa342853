// The adaptive in-flight limit (protocol.md §6.2) and the gate's wake-up rule (§6.1), as pure rules and in a client.
package headwater

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func grow(l *adaptiveLimit, answers int, rtt time.Duration, limited bool, now time.Time) {
	for i := 0; i < answers; i++ {
		l.succeeded(rtt, limited, now)
	}
}

func TestWindowStartsAtFourAndDoublesPerRoundTripUpToTheCeiling(t *testing.T) {
	l := newAdaptiveLimit(16)
	if l.window() != initialLimit || initialLimit != 4 {
		t.Fatalf("start %d", l.window())
	}
	grow(l, 4, 50*time.Millisecond, true, t0)
	if l.window() != 8 {
		t.Fatalf("after one round trip: %d", l.window())
	}
	grow(l, 100, 50*time.Millisecond, true, t0)
	if l.window() != 16 {
		t.Fatalf("ceiling: %d", l.window())
	}
	if newAdaptiveLimit(2).window() != 2 {
		t.Fatal("a ceiling below the start")
	}
	quiet := newAdaptiveLimit(16)
	grow(quiet, 1000, 50*time.Millisecond, false, t0) // answers that did not fill the window do not grow it
	if quiet.window() != 4 {
		t.Fatalf("not limited: %d", quiet.window())
	}
}

func TestFailureHalvesOncePerGenerationAndTheWindowDoublesBack(t *testing.T) {
	l := newAdaptiveLimit(16)
	grow(l, 12, 50*time.Millisecond, true, t0)
	sentIn := l.generation
	for i := 0; i < 16; i++ {
		l.failed(sentIn)
	}
	if l.window() != 8 {
		t.Fatalf("sixteen failures of one window halve once: %d", l.window())
	}
	for i := 0; i < 3; i++ {
		l.failed(l.generation) // the prober fails again and again
	}
	if l.window() != 1 {
		t.Fatalf("prober failures: %d", l.window())
	}
	grow(l, 1+2+4, 50*time.Millisecond, true, t0)
	if l.window() != 8 {
		t.Fatalf("slow start back to half the window before the outage: %d", l.window())
	}
	grow(l, 8, 50*time.Millisecond, true, t0)
	if l.limit < 8.9 || l.limit > 9.1 {
		t.Fatalf("then about one per round trip: %f", l.limit)
	}
}

func TestQueueingRoundTripsShrinkTheWindowAndOldMinimaAreForgotten(t *testing.T) {
	l := newAdaptiveLimit(64)
	grow(l, 50, time.Millisecond, true, t0)
	grow(l, 3000, 10*time.Millisecond, true, t0)
	if w := l.window(); w > 5 {
		t.Fatalf("ten times the minimum round trip: window %d", w)
	}
	f := newAdaptiveLimit(16)
	f.succeeded(time.Millisecond, false, t0)
	grow(f, 10, 50*time.Millisecond, false, t0.Add(15*time.Second))
	if f.minRTT() != time.Millisecond {
		t.Fatalf("within the window: %v", f.minRTT())
	}
	grow(f, 10, 50*time.Millisecond, false, t0.Add(25*time.Second))
	if f.minRTT() != 50*time.Millisecond {
		t.Fatalf("forgotten: %v", f.minRTT())
	}
}

func TestGateAnswerAndCloseWakeBackoffs(t *testing.T) {
	g := newGate(2*time.Second, func(error) {})
	ctx := context.Background()
	me := g.newID()
	since := g.failed(me, errors.New("down"))
	done := make(chan time.Time, 3)
	for i := 0; i < 3; i++ {
		go func() { _ = g.backoff(ctx, 10*time.Minute, since); done <- time.Now() }()
	}
	select {
	case <-done:
		t.Fatal("a backoff ended by itself")
	case <-time.After(200 * time.Millisecond):
	}
	woke := time.Now()
	g.answered()
	for i := 0; i < 3; i++ {
		if at := <-done; at.Sub(woke) > time.Second {
			t.Fatalf("woken after %v", at.Sub(woke))
		}
	}
	since = g.failed(me, errors.New("down again"))
	go func() { _ = g.backoff(ctx, 10*time.Minute, since); done <- time.Now() }()
	g.wake(true)
	<-done
	if g.capped(30*time.Second) != 2*time.Second {
		t.Fatal("while Close waits a backoff is at most RetryRefusedMax")
	}
}

func TestGateLetsOnlyTheProberThroughDuringAStreak(t *testing.T) {
	g := newGate(2*time.Second, func(error) {})
	prober, other := g.newID(), g.newID()
	g.failed(prober, errors.New("down"))
	if err := g.enter(context.Background(), prober); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	passed := make(chan error, 1)
	go func() { passed <- g.enter(ctx, other) }()
	select {
	case <-passed:
		t.Fatal("another delivery passed during the streak")
	case <-time.After(200 * time.Millisecond):
	}
	g.gaveUp(prober) // the prober reached its deadline: the next one probes
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	cancel()
}

func TestAnAnswerToAnotherBatchWakesABatchInALongBackoff(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	var times []time.Time
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(4)
	tr := &fakeTransport{handler: func(n int, b sentBatch) (*Response, error) {
		mu.Lock()
		calls, times = append(calls, b.BatchID), append(times, time.Now())
		mu.Unlock()
		if n <= 4 {
			arrived.Done()
			arrived.Wait() // four requests in flight at once
		}
		if n == 1 {
			return status(503, "overloaded", ""), nil
		}
		<-release
		return nil, nil
	}}
	c := newTestClient(t, tr, WithBatching(1, 64<<10, time.Millisecond), WithRetry(time.Minute, time.Minute, 5*time.Minute))
	for i := 0; i < 4; i++ {
		if err := c.Track("page_view", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, func() bool { return c.Metrics().Retries >= 1 }, "the first batch in its backoff")
	woke := time.Now()
	close(release)
	mustFlush(t, c)
	mu.Lock()
	defer mu.Unlock()
	for i := 4; i < len(calls); i++ {
		if calls[i] == calls[0] && times[i].Sub(woke) > time.Second {
			t.Fatalf("retried %v after the other answers", times[i].Sub(woke))
		}
	}
	if len(calls) != 5 {
		t.Fatalf("requests: %d", len(calls))
	}
}

func TestCloseDeliversWhatWaitedInALongBackoff(t *testing.T) {
	var n atomic.Int32
	tr := &fakeTransport{handler: func(int, sentBatch) (*Response, error) {
		if n.Add(1) == 1 {
			return status(503, "overloaded", ""), nil
		}
		return nil, nil
	}}
	c := newTestClient(t, tr, WithRetry(3*time.Minute, 3*time.Minute, 5*time.Minute))
	if err := c.Track("page_view", nil); err != nil {
		t.Fatal(err)
	}
	_ = c.Flush(ctxTimeout(t, 50*time.Millisecond)) // seals the batch; its first attempt fails
	eventually(t, func() bool { return c.Metrics().Retries >= 1 }, "in a backoff of up to 3 minutes")
	start := time.Now()
	if err := c.Close(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("close took %v", d)
	}
}

func TestWindowCountsPlacesAndRecordsThePeak(t *testing.T) {
	w := newWindow(16)
	var slots []slot
	for i := 0; i < 4; i++ {
		s, ok := w.acquire(context.Background())
		if !ok {
			t.Fatal("acquire")
		}
		slots = append(slots, s)
	}
	if !slots[3].limited || slots[2].limited {
		t.Fatalf("only the request that fills the window is limited: %+v", slots)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, ok := w.acquire(ctx); ok {
		t.Fatal("a fifth place in a window of four")
	}
	w.release(slots[0], signalNeutral)
	if _, ok := w.acquire(context.Background()); !ok {
		t.Fatal("a freed place")
	}
	if size, peak := w.size(); size != 4 || peak != 4 {
		t.Fatalf("size %d peak %d", size, peak)
	}
}

func TestFlushSaysWhetherEverythingFlushedWasAccepted(t *testing.T) {
	tr := &fakeTransport{handler: func(n int, b sentBatch) (*Response, error) {
		if n == 1 {
			return &Response{Status: 200, Body: []byte(`{"accepted":1,"rejected":[{"index":1,"code":"invalid_properties","message":"m"}]}`)}, nil
		}
		return nil, nil
	}}
	c := newTestClient(t, tr)
	_ = c.Track("page_view", nil)
	_ = c.Track("page_view", nil)
	if err := c.Flush(ctxTimeout(t, 10*time.Second)); !errors.Is(err, ErrDropped) {
		t.Fatalf("a flush that saw a rejection: %v", err)
	}
	_ = c.Track("page_view", nil)
	if err := c.Flush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("nothing lost since the previous flush: %v", err)
	}
}

func TestDefaultReportingLogsEveryCodeWithCounts(t *testing.T) {
	var lines []string
	now := t0
	r := newReporter()
	r.now = func() time.Time { return now }
	r.log = func(msg string, args ...any) { lines = append(lines, fmt.Sprint(append([]any{msg}, args...)...)) }
	for i := 0; i < 5; i++ {
		r.report(&EventRejectedError{Code: "invalid_properties"})
	}
	r.report(&BatchRejectedError{Code: "invalid_write_key", Status: 401, Count: 40}) // a second code is seen at once
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	now = now.Add(11 * time.Second)
	r.report(&EventRejectedError{Code: "invalid_properties"})
	if len(lines) != 3 || !strings.Contains(lines[2], "since_last_line4") {
		t.Fatalf("the count since the previous line: %q", lines)
	}
	r.report(&BatchRejectedError{Code: "invalid_write_key", Status: 401, Count: 40})
	r.report(&BatchRejectedError{Code: "invalid_write_key", Status: 401, Count: 40})
	r.close()
	if last := lines[len(lines)-1]; !strings.Contains(last, "events40") {
		t.Fatalf("close logs what was not logged: %q", lines)
	}
}
