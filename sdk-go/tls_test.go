// TLS: certificates verified against the system store by default, a private CA trusted through CABundle, and
// keep-alive over TLS (one connection for a stream of batches sent one at a time).
package headwater

import (
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func tlsGateway(t *testing.T) (*httptest.Server, string, *int) {
	t.Helper()
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"accepted":1,"rejected":[]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca, &conns
}

func TestTLSWithAPrivateCAKeepsOneConnectionAlive(t *testing.T) {
	srv, ca, conns := tlsGateway(t)
	c, err := New(srv.URL, "wk", WithCABundle(ca), WithMaxInFlight(1), WithBatching(1, 64<<10, time.Millisecond),
		WithOnError(func(error) {}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		_ = c.Track("page_view", map[string]any{"i": i})
		if err := c.Flush(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if *conns != 1 {
		t.Fatalf("20 batches over TLS on %d connections, want 1 (keep-alive)", *conns)
	}
}

func TestTLSVerifiesAgainstTheSystemStoreByDefault(t *testing.T) {
	srv, _, _ := tlsGateway(t)
	var mu sync.Mutex
	var reported []error
	c, err := New(srv.URL, "wk", WithRetry(time.Millisecond, 5*time.Millisecond, 200*time.Millisecond),
		WithOnError(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Track("page_view", nil)
	if err := c.Close(ctxTimeout(t, 10*time.Second)); !errors.Is(err, ErrDropped) {
		t.Fatalf("an unknown CA must not deliver: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || !containsAny(reported[0].Error(), "certificate", "x509") {
		t.Fatalf("the report must name the certificate problem: %v", reported)
	}
}

func TestCABundleMustBeAReadablePEMFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "not-a-ca.pem")
	_ = os.WriteFile(bad, []byte("hello"), 0o600)
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.pem")} {
		if _, err := New("https://gw.test", "wk", WithCABundle(path)); !errors.Is(err, ErrConfig) {
			t.Fatalf("%s: want a ConfigError, got %v", path, err)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
