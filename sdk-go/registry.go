// The schema cache of the Avro fast path: the latest schema and id per event type, from a Confluent registry.
package headwater

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// registered is one event type's latest schema (nil typ: the registry has no such subject).
type registered struct {
	id      int
	typ     *avroType
	fetched time.Time
}

// schemaCache looks up GET {registry}/subjects/headwater.events.<type>/versions/latest (protocol.md §3), caching
// each answer for refresh; invalidate forgets a type after the gateway said its schema is unknown.
type schemaCache struct {
	base    string
	tr      Transport
	refresh time.Duration
	timeout time.Duration
	mu      sync.Mutex
	entries map[string]*registered
}

func newSchemaCache(base string, tr Transport, refresh, timeout time.Duration) *schemaCache {
	return &schemaCache{base: strings.TrimRight(base, "/"), tr: tr, refresh: refresh, timeout: timeout,
		entries: map[string]*registered{}}
}

// get returns the schema of eventType (typ nil if unknown); a *TransportError when the registry is away.
func (c *schemaCache) get(ctx context.Context, eventType string) (*registered, error) {
	c.mu.Lock()
	r, ok := c.entries[eventType]
	c.mu.Unlock()
	if ok && time.Since(r.fetched) < c.refresh {
		return r, nil
	}
	r, err := c.fetch(ctx, eventType)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.entries[eventType] = r
	c.mu.Unlock()
	return r, nil
}

func (c *schemaCache) fetch(ctx context.Context, eventType string) (*registered, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.base + "/subjects/" + url.PathEscape("headwater.events."+eventType) + "/versions/latest"
	resp, err := c.tr.Send(ctx, &Request{Method: http.MethodGet, URL: u,
		Header: http.Header{"Accept": {"application/vnd.schemaregistry.v1+json"}, "User-Agent": {UserAgent}}})
	if err != nil {
		return nil, err
	}
	if resp.Status == http.StatusNotFound {
		return &registered{fetched: time.Now()}, nil
	}
	if resp.Status != http.StatusOK {
		return nil, &TransportError{Status: resp.Status, RetryAfter: -1, Msg: "registry answered for " + eventType}
	}
	var doc struct {
		ID     int    `json:"id"`
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return nil, &TransportError{RetryAfter: -1, Msg: "registry answer unusable: " + err.Error(), Err: err}
	}
	typ, err := parseAvroSchema(doc.Schema)
	if err != nil {
		return nil, &TransportError{RetryAfter: -1, Msg: fmt.Sprintf("registry schema of %s unusable: %v", eventType, err), Err: err}
	}
	return &registered{id: doc.ID, typ: typ, fetched: time.Now()}, nil
}

func (c *schemaCache) invalidate(eventType string) {
	c.mu.Lock()
	delete(c.entries, eventType)
	c.mu.Unlock()
}
