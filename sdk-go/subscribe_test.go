// Tests of live subscriptions against a fake SSE server: resuming from the last position, refusals, Close.
package headwater

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type answer struct {
	status  int
	headers map[string]string
	body    string
}

func scripted(t *testing.T, answers []answer) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	seen := []string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		a := answer{503, map[string]string{"Retry-After": "1"}, "{}"}
		if len(answers) > 0 {
			a, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		for k, v := range a.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func sseRecord(i int) string {
	doc, _ := json.Marshal(map[string]any{"stream": "rule.r", "partition": 0, "offset": i, "timestamp": 1,
		"key": nil, "value": map[string]int{"n": i}})
	return fmt.Sprintf("id: t-%d\ndata: %s\n\n", i+1, doc)
}

func TestSubscribeResumesFromTheLastPosition(t *testing.T) {
	sse := map[string]string{"Content-Type": "text/event-stream"}
	srv, seen := scripted(t, []answer{
		{200, sse, "retry: 10\nid: t-0\n\n" + sseRecord(0) + sseRecord(1)},
		{503, map[string]string{"Retry-After": "0"}, `{"code":"instance_full","message":"x"}`},
		{200, sse, sseRecord(2) + "event: cutoff\nid: t-3\ndata: {\"code\":\"subscriber_too_slow\"}\n\n"},
		{200, sse, "id: t-3\n\n" + sseRecord(3) + "event: gap\ndata: {\"code\":\"retention\"}\n\n" + sseRecord(4)},
	})
	sub := Subscribe(srv.URL, "hwr_k", "rule.r")
	sub.maxBackoff = 50 * time.Millisecond
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		rec, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Offset != int64(i) || rec.ID != fmt.Sprintf("t-%d", i+1) || string(rec.Value) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
	if want := []string{"", "t-2", "t-2", "t-3"}; fmt.Sprint(*seen) != fmt.Sprint(want) {
		t.Fatalf("Last-Event-ID sent: %q, want %q", *seen, want)
	}
	if sub.Cutoffs != 1 || len(sub.Gaps) != 1 || sub.LastEventID != "t-5" {
		t.Fatalf("cutoffs %d gaps %d last %q", sub.Cutoffs, len(sub.Gaps), sub.LastEventID)
	}
}

func TestSubscribeReturnsARefusal(t *testing.T) {
	srv, _ := scripted(t, []answer{{403, nil, `{"code":"stream_not_allowed","message":"no"}`}})
	sub := Subscribe(srv.URL, "hwr_k", "event.page_view")
	defer sub.Close()
	_, err := sub.Next(context.Background())
	var refused *SubscriptionError
	if !errors.As(err, &refused) || refused.Status != 403 || refused.Code != "stream_not_allowed" {
		t.Fatalf("got %v", err)
	}
}

func TestSubscribeCloseEndsABlockedNext(t *testing.T) {
	srv, _ := scripted(t, []answer{{200, map[string]string{"Content-Type": "text/event-stream"}, ": open\n\n"}})
	sub := Subscribe(srv.URL, "hwr_k", "rule.r")
	go func() {
		time.Sleep(100 * time.Millisecond) // not synchronisation: Close must work whenever it comes
		_ = sub.Close()
	}()
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
}
