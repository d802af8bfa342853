// Tests of the HTTP transport against a real local server: keep-alive, recycling by age, the answer cap.
package headwater

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingServer counts the TCP connections it accepted.
func countingServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, func() int) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return conns }
}

func send(t *testing.T, tr Transport, url string) *Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr.Send(ctx, &Request{Method: http.MethodPost, URL: url, Header: http.Header{}, Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestTransportKeepsConnectionsAliveAndRecyclesThemByAge(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"accepted":1}`)) })
	var mu sync.Mutex
	clock := time.Now()
	tr := NewHTTPTransport(time.Minute, 2)
	tr.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	tr.renewLocked() // expiry from the fake clock
	defer tr.Close()
	for i := 0; i < 5; i++ {
		send(t, tr, srv.URL)
	}
	if n := conns(); n != 1 {
		t.Fatalf("5 sequential requests must share one kept-alive connection, used %d", n)
	}
	mu.Lock()
	clock = clock.Add(67 * time.Second) // past the age (+10 % jitter at most)
	mu.Unlock()
	send(t, tr, srv.URL)
	if n := conns(); n != 2 {
		t.Fatalf("a connection older than the max age must be replaced, %d connections", n)
	}
}

func TestTransportCapsTheAnswerAndReconnectsAfterConnectionClose(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(strings.Repeat("x", 3<<20)))
			return
		}
		w.Header().Set("Connection", "close")
		_, _ = w.Write([]byte(`{}`))
	})
	tr := NewHTTPTransport(time.Hour, 2)
	defer tr.Close()
	if resp := send(t, tr, srv.URL+"/big"); len(resp.Body) != maxResponseBytes {
		t.Fatalf("answer of %d bytes, want the 1 MiB cap", len(resp.Body))
	}
	before := conns()
	for i := 0; i < 3; i++ {
		if resp := send(t, tr, srv.URL+"/close"); resp.Status != 200 {
			t.Fatal(resp.Status)
		}
	}
	if conns() != before+3 {
		t.Fatalf("after each Connection: close the next request must reconnect (%d -> %d)", before, conns())
	}
}
