// Test helpers: a scripted in-memory transport that decodes what the client posted.
package headwater

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

type sentBatch struct {
	BatchID string           `json:"batch_id"`
	SentAt  int64            `json:"sent_at"`
	SDK     map[string]any   `json:"sdk"`
	Events  []map[string]any `json:"events"`
	Header  http.Header      `json:"-"`
}

// fakeTransport records every request and answers with handler (default: 200, all accepted).
type fakeTransport struct {
	mu      sync.Mutex
	batches []sentBatch
	handler func(n int, b sentBatch) (*Response, error)
	closed  bool
}

var zdec, _ = zstd.NewReader(nil)

func (f *fakeTransport) Send(ctx context.Context, req *Request) (*Response, error) {
	body := req.Body
	if req.Header.Get("Content-Encoding") == "zstd" {
		var err error
		if body, err = zdec.DecodeAll(req.Body, nil); err != nil {
			return nil, err
		}
	}
	var b sentBatch
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("bad body: %w", err)
	}
	b.Header = req.Header.Clone()
	f.mu.Lock()
	f.batches = append(f.batches, b)
	n := len(f.batches)
	h := f.handler
	f.mu.Unlock()
	if h != nil {
		if resp, err := h(n, b); resp != nil || err != nil {
			return resp, err
		}
	}
	return ok(len(b.Events)), nil
}

func (f *fakeTransport) Close() { f.mu.Lock(); f.closed = true; f.mu.Unlock() }

func (f *fakeTransport) sent() []sentBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentBatch(nil), f.batches...)
}

func ok(accepted int) *Response {
	return &Response{Status: 200, Header: http.Header{}, Body: []byte(fmt.Sprintf(`{"accepted":%d,"rejected":[]}`, accepted))}
}

func status(code int, errCode string, retryAfter string) *Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &Response{Status: code, Header: h, Body: []byte(`{"code":"` + errCode + `","message":"m"}`)}
}

// newTestClient builds a fast-retrying client on a fake transport.
func newTestClient(t *testing.T, tr Transport, opts ...Option) *Client {
	t.Helper()
	base := []Option{WithTransport(tr), WithLinger(time.Hour), WithNodeID("node-1"), // batches sealed by size, Flush or Close
		WithRetry(time.Millisecond, 5*time.Millisecond, 5*time.Second), WithOnError(func(error) {})}
	c, err := New("http://gateway.test", "wk_test", append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustFlush(t *testing.T, c *Client) {
	t.Helper()
	if err := c.Flush(ctxTimeout(t, 30*time.Second)); err != nil {
		t.Fatalf("flush: %v (metrics %+v)", err, c.Metrics())
	}
}

// mustSettleWithLoss flushes a client that lost events on purpose: Flush must settle and say so (ErrDropped).
func mustSettleWithLoss(t *testing.T, c *Client) {
	t.Helper()
	if err := c.Flush(ctxTimeout(t, 30*time.Second)); !errors.Is(err, ErrDropped) {
		t.Fatalf("flush: want ErrDropped, got %v (metrics %+v)", err, c.Metrics())
	}
}

func seqsOf(batches []sentBatch) map[int64]int {
	out := map[int64]int{}
	for _, b := range batches {
		for _, e := range b.Events {
			out[int64(e["seq"].(float64))]++
		}
	}
	return out
}

// eventually waits (up to 30 s) until cond holds: the batcher goroutine moves events between counters.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
	}
}
