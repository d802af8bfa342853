// The transport seam: a small interface, and the keep-alive net/http transport recycled by age with jitter.
package headwater

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// maxResponseBytes caps how much of an answer is read (the gateway's answers are small).
const maxResponseBytes = 1 << 20

// Request is one HTTP request.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// Response is one HTTP response (body read in full, capped at 1 MiB).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Transport sends one request; an error means no answer (connection error or timeout) and is retried.
type Transport interface {
	Send(ctx context.Context, req *Request) (*Response, error)
	Close()
}

// HTTPTransport keeps HTTP/1.1 connections alive and replaces its connection pool after maxAge (+-10 %), so a
// load balancer can rebalance; Go reconnects by itself after the gateway's "Connection: close". https endpoints are
// verified against the system's trust store, or against the CA certificates given to NewHTTPTransportWithCAs.
type HTTPTransport struct {
	maxAge   time.Duration
	maxConns int
	roots    *x509.CertPool // nil: the system's trust store
	mu       sync.Mutex
	current  *http.Transport
	client   *http.Client
	expires  time.Time
	closed   bool
	now      func() time.Time // the clock (a fake in tests)
}

// NewHTTPTransport is the default transport: maxConns kept-alive connections, recycled after maxAge.
func NewHTTPTransport(maxAge time.Duration, maxConns int) *HTTPTransport {
	return NewHTTPTransportWithCAs(maxAge, maxConns, nil)
}

// NewHTTPTransportWithCAs is NewHTTPTransport trusting roots (nil: the system's trust store) for https.
func NewHTTPTransportWithCAs(maxAge time.Duration, maxConns int, roots *x509.CertPool) *HTTPTransport {
	t := &HTTPTransport{maxAge: maxAge, maxConns: maxConns, roots: roots, now: time.Now}
	t.renewLocked()
	return t
}

// LoadCABundle reads a PEM file of CA certificates (the CABundle option).
func LoadCABundle(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{fmt.Sprintf("CABundle (HEADWATER_CA_BUNDLE) %q is not readable: %v", path, err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &ConfigError{fmt.Sprintf("CABundle (HEADWATER_CA_BUNDLE) %q holds no PEM certificate", path)}
	}
	return pool, nil
}

func (t *HTTPTransport) renewLocked() {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t.current = &http.Transport{
		Proxy: http.ProxyFromEnvironment, DialContext: dialer.DialContext, ForceAttemptHTTP2: false,
		MaxIdleConns: t.maxConns * 2, MaxIdleConnsPerHost: t.maxConns, IdleConnTimeout: 10 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, DisableCompression: true,
		TLSClientConfig: &tls.Config{RootCAs: t.roots, MinVersion: tls.VersionTLS12},
	}
	t.client = &http.Client{Transport: t.current,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	jitter := 0.9 + 0.2*rand.Float64()
	t.expires = t.now().Add(time.Duration(float64(t.maxAge) * jitter))
}

func (t *HTTPTransport) clientNow() *http.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.now().After(t.expires) && !t.closed {
		old := t.current
		t.renewLocked()
		old.CloseIdleConnections()
		// requests still running on the old pool return their connections to it: close those afterwards
		time.AfterFunc(time.Minute, old.CloseIdleConnections)
	}
	return t.client
}

// Send posts req; any error (dial, reset, timeout, body read) is a TransportError.
func (t *HTTPTransport) Send(ctx context.Context, req *Request) (*Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, &TransportError{Msg: "bad request: " + err.Error(), RetryAfter: -1, Err: err}
	}
	hreq.Header = req.Header
	hreq.ContentLength = int64(len(req.Body))
	resp, err := t.clientNow().Do(hreq)
	if err != nil {
		var op *net.OpError
		refused := errors.As(err, &op) && op.Op == "dial"
		return nil, &TransportError{Msg: fmt.Sprintf("%s %s: %v", req.Method, req.URL, err), RetryAfter: -1,
			Refused: refused, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, &TransportError{Msg: "reading the answer: " + err.Error(), RetryAfter: -1, Err: err}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes)) // drain, so the connection is reused
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// Close closes every idle connection.
func (t *HTTPTransport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.current.CloseIdleConnections()
}

// MemoryTransport is a fake Transport for tests of code that uses the SDK: it records every request and answers
// with Handler (nil: 200 with every event accepted for a batch, 404 for anything else, such as a registry
// look-up). Safe for concurrent use.
type MemoryTransport struct {
	Handler  func(req *Request) (*Response, error)
	mu       sync.Mutex
	requests []*Request
	closed   bool
}

// Send records req and returns Handler's answer.
func (m *MemoryTransport) Send(_ context.Context, req *Request) (*Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	handler := m.Handler
	m.mu.Unlock()
	if handler != nil {
		return handler(req)
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL, "/v1/batch") {
		return &Response{Status: 200, Header: http.Header{}, Body: []byte(`{"accepted":0,"rejected":[]}`)}, nil
	}
	return &Response{Status: 404, Header: http.Header{}, Body: []byte(`{"code":"not_found","message":"not found"}`)}, nil
}

// Requests returns the requests sent so far, in order.
func (m *MemoryTransport) Requests() []*Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Request(nil), m.requests...)
}

// Close marks the transport closed.
func (m *MemoryTransport) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// Closed says whether Close was called.
func (m *MemoryTransport) Closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
