// Tests of the client against a fake transport: batching, envelope, seqs, retries, splits, refusals, policies.
package headwater

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBatchesCarryTheProtocolEnvelope(t *testing.T) {
	tr := &fakeTransport{}
	c := newTestClient(t, tr, WithContext(map[string]string{"app": "shop"}), WithLinger(10*time.Second))
	for i := 0; i < 45; i++ {
		if err := c.Track("page_view", map[string]any{"i": i, "url": "https://x/<a>"}, WithPartitionKey("u-1")); err != nil {
			t.Fatal(err)
		}
	}
	mustFlush(t, c)
	sent := tr.sent()
	if len(sent) == 2 && len(sent[0].Events) == 5 {
		sent[0], sent[1] = sent[1], sent[0] // two senders: either may answer first
	}
	if len(sent) != 2 || len(sent[0].Events) != 40 || len(sent[1].Events) != 5 {
		t.Fatalf("want batches of 40 and 5, got %d batches", len(sent))
	}
	b := sent[0]
	if !isUUID(b.BatchID) || b.BatchID[14] != '7' || b.SentAt <= 0 || b.SDK["name"] != "headwater-go" {
		t.Fatalf("bad batch fields: %+v", b)
	}
	if got := b.Header.Get("User-Agent"); !strings.HasPrefix(got, "headwater-go/"+Version+" (go/") {
		t.Fatalf("User-Agent %q", got)
	}
	if b.Header.Get("Authorization") != "Bearer wk_test" || b.Header.Get("Content-Encoding") != "zstd" {
		t.Fatalf("headers %v", b.Header)
	}
	e := b.Events[0]
	if e["event_type"] != "page_view" || e["producer_id"] != c.ProducerID() || e["seq"].(float64) != 0 ||
		e["node_id"] != "node-1" || e["partition_key"] != "u-1" || e["context"].(map[string]any)["app"] != "shop" ||
		e["properties"].(map[string]any)["url"] != "https://x/<a>" || !isUUID(e["event_id"].(string)) {
		t.Fatalf("bad envelope %v", e)
	}
	if m := c.Metrics(); m.Acknowledged != 45 || m.Enqueued != 45 || m.BatchesSent != 2 || len(m.Dropped) != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestSeqsAreGaplessAcrossGoroutines(t *testing.T) {
	tr := &fakeTransport{}
	c := newTestClient(t, tr, WithQueue(100_000, "drop_newest"))
	var wg sync.WaitGroup
	seen := make(chan int64, 4000)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				tracked, err := c.TrackEvent("click", map[string]any{"n": i})
				if err != nil {
					t.Error(err)
					return
				}
				seen <- tracked.Seq
			}
		}()
	}
	wg.Wait()
	close(seen)
	mustFlush(t, c)
	got := seqsOf(tr.sent())
	if len(got) != 4000 {
		t.Fatalf("want 4000 distinct seqs, got %d", len(got))
	}
	for s := range seen {
		if got[s] != 1 {
			t.Fatalf("seq %d sent %d times", s, got[s])
		}
	}
	for s := int64(0); s < 4000; s++ {
		if got[s] != 1 {
			t.Fatalf("seq %d missing", s)
		}
	}
}

func TestTrackRefusesBadArguments(t *testing.T) {
	c := newTestClient(t, &fakeTransport{}, WithMaxEventBytes(2048))
	cases := []struct {
		name  string
		typ   string
		props map[string]any
		opts  []TrackOption
	}{
		{"upper-case type", "PageView", nil, nil},
		{"empty type", "", nil, nil},
		{"long type", strings.Repeat("a", 65), nil, nil},
		{"NaN", "x", map[string]any{"v": math.NaN()}, nil},
		{"channel", "x", map[string]any{"v": make(chan int)}, nil},
		{"bad event id", "x", nil, []TrackOption{WithEventID("nope")}},
		{"too large", "x", map[string]any{"v": strings.Repeat("a", 3000)}, nil},
		{"before epoch", "x", nil, []TrackOption{WithTimestamp(time.Unix(-5, 0))}},
	}
	for _, tc := range cases {
		if err := c.Track(tc.typ, tc.props, tc.opts...); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: want ErrInvalidEvent, got %v", tc.name, err)
		}
	}
	tracked, err := c.TrackEvent("x", nil)
	if err != nil || tracked.Seq != 0 {
		t.Fatalf("a refused event must take no seq: %+v %v", tracked, err)
	}
}

func TestRetriesKeepTheBatchIDAndHonourRetryAfter(t *testing.T) {
	tr := &fakeTransport{handler: func(n int, b sentBatch) (*Response, error) {
		switch n {
		case 1:
			return status(503, "kafka_unavailable", "0.2"), nil
		case 2:
			return nil, errors.New("connection reset")
		case 3:
			return status(429, "rate_limited", ""), nil
		}
		return nil, nil
	}}
	c := newTestClient(t, tr, WithRetry(time.Millisecond, 50*time.Millisecond, 5*time.Second)) // Retry-After cap 0.5 s
	start := time.Now()
	_ = c.Track("x", nil)
	mustFlush(t, c)
	sent := tr.sent()
	if len(sent) != 4 {
		t.Fatalf("want 4 attempts, got %d", len(sent))
	}
	for _, b := range sent {
		if b.BatchID != sent[0].BatchID || b.SentAt != sent[0].SentAt {
			t.Fatal("a retry changed batch_id or sent_at")
		}
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatal("Retry-After 0.2 was not honoured")
	}
	if m := c.Metrics(); m.Retries != 3 || m.Acknowledged != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestRefusedStatusesAreNotRetried(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 405, 415, 501, 302} {
		var refused []*BatchRejectedError
		var mu sync.Mutex
		tr := &fakeTransport{handler: func(int, sentBatch) (*Response, error) {
			return &Response{Status: code, Body: []byte("not json")}, nil
		}}
		c := newTestClient(t, tr, WithOnError(func(err error) {
			var br *BatchRejectedError
			if errors.As(err, &br) {
				mu.Lock()
				refused = append(refused, br)
				mu.Unlock()
			}
		}))
		_ = c.Track("x", nil)
		_ = c.Track("x", nil)
		mustSettleWithLoss(t, c)
		m := c.Metrics()
		if len(tr.sent()) != 1 || m.Dropped["refused_http_"+itoa(code)] != 2 || len(refused) != 1 ||
			refused[0].Code != "http_"+itoa(code) || refused[0].Count != 2 {
			t.Fatalf("status %d: %d sends, metrics %+v, refused %+v", code, len(tr.sent()), m, refused)
		}
		if err := c.Close(ctxTimeout(t, 5*time.Second)); !errors.Is(err, ErrDropped) {
			t.Fatalf("close after a refusal must report it, got %v", err)
		}
	}
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestSplitOn413WithDerivedIDs(t *testing.T) {
	tr := &fakeTransport{handler: func(n int, b sentBatch) (*Response, error) {
		has4 := seqsOf([]sentBatch{b})[4] > 0
		if len(b.Events) > 2 || has4 && len(b.Events) > 1 {
			return status(413, "body_too_large", ""), nil
		}
		if has4 {
			return status(413, "event_too_large", ""), nil
		}
		return nil, nil
	}}
	c := newTestClient(t, tr, WithMaxInFlight(1))
	for i := 0; i < 5; i++ {
		_ = c.Track("x", map[string]any{"i": i})
	}
	mustSettleWithLoss(t, c)
	sent := tr.sent()
	parent := sent[0].BatchID
	h0, h1 := splitBatchID(parent, 0), splitBatchID(parent, 1)
	if len(sent[1].Events) != 2 || sent[1].BatchID != h0 || sent[2].BatchID != h1 || len(sent[2].Events) != 3 {
		t.Fatalf("halves: %s(%d) %s(%d)", sent[1].BatchID, len(sent[1].Events), sent[2].BatchID, len(sent[2].Events))
	}
	if m := c.Metrics(); m.Acknowledged != 4 || m.Dropped[ReasonEventTooLarge] != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestSplitIDsMatchTheReference(t *testing.T) {
	// uuid.uuid5(UUID("6f1f0c2e-..."), "<parent>/<k>") computed with Python's uuid module
	parent := "0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a10"
	if got := splitBatchID(parent, 0); got != "24388d64-4815-5685-92b8-d320ef8241b9" {
		t.Fatal(got)
	}
	if got := splitBatchID(parent, 1); got != "b48c0513-4fff-53b1-9d04-90b5c27767b9" {
		t.Fatal(got)
	}
}

func TestPerEventRejections(t *testing.T) {
	tr := &fakeTransport{handler: func(int, sentBatch) (*Response, error) {
		return &Response{Status: 422, Body: []byte(`{"accepted":0,"rejected":[{"index":0,"code":"unknown_event_type","message":"m"},{"index":1,"code":"invalid_properties","message":"m"}]}`)}, nil
	}}
	var reports []DeliveryReport
	var mu sync.Mutex
	c := newTestClient(t, tr, WithOnDelivery(func(r DeliveryReport) { mu.Lock(); reports = append(reports, r); mu.Unlock() }))
	_ = c.Track("x", nil)
	_ = c.Track("y", nil)
	mustSettleWithLoss(t, c)
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || len(reports[0].Rejected) != 2 || reports[0].Rejected[1].Seq != 1 || reports[0].Rejected[1].Code != "invalid_properties" {
		t.Fatalf("reports %+v", reports)
	}
	if m := c.Metrics(); m.Rejected != 2 || m.Acknowledged != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

// blockingTransport holds every request until released.
type blockingTransport struct {
	fakeTransport
	gate chan struct{}
}

func (b *blockingTransport) Send(ctx context.Context, req *Request) (*Response, error) {
	select {
	case <-b.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.fakeTransport.Send(ctx, req)
}

func TestQueuePolicies(t *testing.T) {
	gate := make(chan struct{})
	tr := &blockingTransport{gate: gate}
	c := newTestClient(t, tr, WithQueue(3, "drop_newest"), WithMaxPendingBatches(1), WithMaxInFlight(1),
		WithBatching(1, 128<<10, time.Millisecond))
	var full int
	for i := 0; i < 50; i++ {
		if err := c.Track("x", nil); errors.Is(err, ErrQueueFull) {
			full++
		}
	}
	if full == 0 || c.Metrics().Dropped[ReasonQueueFull] != int64(full) {
		t.Fatalf("drop_newest: %d refused, metrics %+v", full, c.Metrics())
	}
	close(gate)
	mustFlush(t, c)
	if m := c.Metrics(); m.Acknowledged != int64(50-full) {
		t.Fatalf("metrics %+v", m)
	}
	if err := c.Close(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.Track("x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("track after close: %v", err)
	}
}

func TestCloseWithoutSpoolCountsWhatWasNotSent(t *testing.T) {
	tr := &fakeTransport{handler: func(int, sentBatch) (*Response, error) { return status(503, "overloaded", ""), nil }}
	c := newTestClient(t, tr, WithRetry(time.Millisecond, 5*time.Millisecond, time.Hour))
	for i := 0; i < 10; i++ {
		_ = c.Track("x", nil)
	}
	start := time.Now()
	err := c.Close(ctxTimeout(t, 300*time.Millisecond))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("close must give up at its deadline with an error, got %v after %v", err, time.Since(start))
	}
	if m := c.Metrics(); m.Dropped[ReasonClosedUnsent] != 10 {
		t.Fatalf("metrics %+v", m)
	}
	if err2 := c.Close(context.Background()); err2 != err {
		t.Fatal("a second Close must return the first result")
	}
}

func TestRetryDeadlineDropsWithoutSpool(t *testing.T) {
	tr := &fakeTransport{handler: func(int, sentBatch) (*Response, error) { return nil, errors.New("refused") }}
	c := newTestClient(t, tr, WithRetry(time.Millisecond, 2*time.Millisecond, 50*time.Millisecond))
	_ = c.Track("x", nil)
	mustSettleWithLoss(t, c)
	if m := c.Metrics(); m.Dropped[ReasonRetryDeadline] != 1 || m.Retries == 0 {
		t.Fatalf("metrics %+v", m)
	}
}

func TestDropOldestEvictsAndCountsTheOldestQueuedEvent(t *testing.T) {
	gate := make(chan struct{})
	tr := &blockingTransport{gate: gate}
	c := newTestClient(t, tr, WithQueue(5, "drop_oldest"), WithMaxPendingBatches(1), WithMaxInFlight(1),
		WithBatching(1, 128<<10, time.Millisecond))
	for i := 0; i < 40; i++ {
		if err := c.Track("x", map[string]any{"i": i}); err != nil {
			t.Fatalf("drop_oldest never refuses: %v", err)
		}
	}
	evicted := c.Metrics().Dropped[ReasonQueueFullOldest]
	if evicted == 0 {
		t.Fatal("nothing evicted")
	}
	close(gate)
	mustSettleWithLoss(t, c)
	m := c.Metrics()
	if m.Enqueued != 40 || m.Acknowledged+m.DroppedTotal() != 40 || m.Acknowledged != 40-evicted {
		t.Fatalf("metrics %+v", m)
	}
	got := seqsOf(tr.sent())
	if _, ok := got[39]; !ok {
		t.Fatal("the newest event must be kept")
	}
}

func TestBlockWaitsForRoomThenRefuses(t *testing.T) {
	gate := make(chan struct{})
	tr := &blockingTransport{gate: gate}
	c := newTestClient(t, tr, WithQueue(2, "block"), WithBlockTimeout(50*time.Millisecond), WithMaxPendingBatches(1),
		WithMaxInFlight(1), WithBatching(1, 128<<10, time.Millisecond))
	var timedOut int
	for i := 0; i < 20; i++ {
		if err := c.Track("x", nil); errors.Is(err, ErrQueueFull) {
			timedOut++
		}
	}
	if timedOut == 0 || c.Metrics().Dropped[ReasonQueueFullTimeout] != int64(timedOut) {
		t.Fatalf("%d refused, metrics %+v", timedOut, c.Metrics())
	}
	close(gate)
	mustFlush(t, c)
}

func TestSpillMovesTheQueueToTheSpool(t *testing.T) {
	gate := make(chan struct{})
	tr := &blockingTransport{gate: gate}
	c := newTestClient(t, tr, WithSpoolDir(t.TempDir()), WithQueue(3, "spill"), WithLinger(time.Hour))
	for i := 0; i < 50; i++ {
		if err := c.Track("x", nil); err != nil {
			t.Fatalf("spill never refuses while the spool has room: %v", err)
		}
	}
	eventually(t, func() bool { m := c.Metrics(); return m.PendingEvents+m.Queued == 50 && m.PendingEvents > 0 },
		"every event queued or in the spool")
	if m := c.Metrics(); m.DroppedTotal() != 0 {
		t.Fatalf("metrics %+v", m)
	}
	close(gate)
	mustFlush(t, c)
	if got := seqsOf(tr.sent()); len(got) != 50 {
		t.Fatalf("%d seqs delivered", len(got))
	}
}
