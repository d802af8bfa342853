// Live subscriptions: Subscribe opens a stream of the subscription server (Server-Sent Events); Next returns its
// records one by one and, after any disconnect, resumes exactly after the last record it returned.
//
//	sub := headwater.Subscribe("http://subscribe:8082", "hwr_...", "rule.slow_pages_alert")
//	defer sub.Close()
//	for {
//		rec, err := sub.Next(ctx) // blocks; reconnects by itself
//		if err != nil { return err } // a *SubscriptionError (refused), or ctx's error
//		fmt.Println(string(rec.Value), rec.ID)
//	}
//
// Reconnects (a dropped connection, a restart, a cut-off after falling behind, 429/5xx) wait with jittered backoff,
// never less than the server's retry or Retry-After; any other refusal is returned as *SubscriptionError.
package headwater

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// StreamRecord is one record of a stream. ID is the position after it: pass it to WithLastEventID to resume.
type StreamRecord struct {
	ID        string            `json:"-"`
	Stream    string            `json:"stream"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     json.RawMessage   `json:"value"`
	Schema    *StreamSchema     `json:"schema"`
	Headers   map[string]string `json:"headers"`
	Error     *RecordError      `json:"error,omitempty"` // the server could not decode the record (Value is null)
}

// StreamSchema is the registered writer schema of an Avro record.
type StreamSchema struct {
	ID      int     `json:"id"`
	Subject *string `json:"subject"`
	Version *int    `json:"version"`
}

// RecordError says why a record could not be decoded.
type RecordError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SubscriptionError is a refusal that retrying would not fix (a bad key, scope, stream or filter).
type SubscriptionError struct {
	Status  int
	Code    string
	Message string
}

func (e *SubscriptionError) Error() string {
	return fmt.Sprintf("headwater: subscription refused: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*Subscription)

// WithStart sets where the first connection starts: "latest" (default), "earliest", epoch ms or an ISO 8601 time.
func WithStart(from string) SubscribeOption { return func(s *Subscription) { s.start = from } }

// WithFilter sets an equality filter, {"field.path": value or [values]} (docs/subscriptions.md).
func WithFilter(filter map[string]any) SubscribeOption {
	return func(s *Subscription) { s.filter = filter }
}

// WithLastEventID resumes from a position kept earlier.
func WithLastEventID(id string) SubscribeOption { return func(s *Subscription) { s.LastEventID = id } }

// WithReadTimeout reconnects when nothing, not even a heartbeat, arrives for d (default 60 s).
func WithReadTimeout(d time.Duration) SubscribeOption {
	return func(s *Subscription) { s.readTimeout = d }
}

// WithMaxBackoff caps the wait between reconnects (default 30 s).
func WithMaxBackoff(d time.Duration) SubscribeOption {
	return func(s *Subscription) { s.maxBackoff = d }
}

// WithSubscribeHTTPClient uses client (default: a client without overall timeout; streams are long).
func WithSubscribeHTTPClient(c *http.Client) SubscribeOption {
	return func(s *Subscription) { s.client = c }
}

// Subscription is a live stream. Next is not safe for concurrent use; Close may be called from anywhere.
type Subscription struct {
	LastEventID string
	Cutoffs     int
	Reconnects  int
	Gaps        []json.RawMessage // records deleted by retention before a resume could read them

	endpoint, key, stream, start string
	filter                       map[string]any
	readTimeout, maxBackoff      time.Duration
	client                       *http.Client
	body                         io.ReadCloser
	lines                        *bufio.Reader
	cancel                       context.CancelFunc
	idle                         *time.Timer
	retryMs                      int
	failures                     int
	life                         context.Context // done once Close is called
	end                          context.CancelFunc
	event, id                    string
	data                         []string
	hasID                        bool
}

// Subscribe returns a subscription to stream (event.<type>, rule.<name>, deadletter, aggregates); it connects on
// the first Next.
func Subscribe(endpoint, readKey, stream string, opts ...SubscribeOption) *Subscription {
	s := &Subscription{endpoint: strings.TrimRight(endpoint, "/"), key: readKey, stream: stream, start: "latest",
		readTimeout: 60 * time.Second, maxBackoff: 30 * time.Second, client: &http.Client{}}
	s.life, s.end = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	return s
}

// Close ends the subscription (from any goroutine): a blocked Next returns ErrClosed, and so do later ones.
func (s *Subscription) Close() error {
	s.end()
	return nil
}

// Next returns the next record, reconnecting as often as needed; an error is a *SubscriptionError, ErrClosed or
// ctx's error.
func (s *Subscription) Next(ctx context.Context) (StreamRecord, error) {
	for {
		select {
		case <-s.life.Done():
			s.drop()
			return StreamRecord{}, ErrClosed
		case <-ctx.Done():
			s.drop()
			return StreamRecord{}, ctx.Err()
		default:
		}
		if s.body == nil {
			retryAfter, err := s.connect(ctx)
			if err != nil {
				var refused *SubscriptionError
				if errors.As(err, &refused) {
					return StreamRecord{}, err
				}
				if werr := s.wait(ctx, retryAfter); werr != nil {
					return StreamRecord{}, werr
				}
				continue
			}
		}
		rec, ok, err := s.read()
		if err != nil {
			s.drop()
			if s.life.Err() != nil {
				return StreamRecord{}, ErrClosed
			}
			if werr := s.wait(ctx, -1); werr != nil {
				return StreamRecord{}, werr
			}
			continue
		}
		if ok {
			s.failures = 0
			return rec, nil
		}
	}
}

func (s *Subscription) connect(ctx context.Context) (float64, error) {
	q := url.Values{"from": {s.start}}
	if s.filter != nil {
		f, err := json.Marshal(s.filter)
		if err != nil {
			return -1, &SubscriptionError{Status: 0, Code: "invalid_filter", Message: err.Error()}
		}
		q.Set("filter", string(f))
	}
	rctx, cancelReq := context.WithCancel(ctx)
	stopWatch := context.AfterFunc(s.life, cancelReq) // Close aborts the request, and a blocked read with it
	cancel := func() {
		stopWatch()
		cancelReq()
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet,
		s.endpoint+"/v1/streams/"+url.PathEscape(s.stream)+"?"+q.Encode(), nil)
	if err != nil {
		cancel()
		return -1, &SubscriptionError{Status: 0, Code: "invalid_endpoint", Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Accept", "text/event-stream")
	if s.LastEventID != "" {
		req.Header.Set("Last-Event-ID", s.LastEventID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		return -1, err
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		var body struct{ Code, Message string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 65536)).Decode(&body)
		switch resp.StatusCode {
		case 408, 429, 500, 502, 503, 504:
			after, perr := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
			if perr != nil {
				after = -1
			}
			return after, fmt.Errorf("headwater: subscription: HTTP %d %s", resp.StatusCode, body.Code)
		}
		return -1, &SubscriptionError{Status: resp.StatusCode, Code: body.Code, Message: body.Message}
	}
	s.body, s.cancel = resp.Body, cancel
	s.lines = bufio.NewReaderSize(resp.Body, 64*1024)
	s.idle = time.AfterFunc(s.readTimeout, cancel)
	s.event, s.id, s.data, s.hasID = "", "", nil, false
	return -1, nil
}

// read parses lines until a record (ok), a control message or a line-less end (err).
func (s *Subscription) read() (StreamRecord, bool, error) {
	for {
		line, err := s.lines.ReadString('\n')
		if err != nil {
			return StreamRecord{}, false, err
		}
		s.idle.Reset(s.readTimeout)
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line != "" {
			s.field(line)
			continue
		}
		if s.hasID {
			s.LastEventID = s.id
		}
		event, data := s.event, strings.Join(s.data, "\n")
		hadData := len(s.data) > 0
		s.event, s.data, s.hasID = "", nil, false
		if !hadData {
			continue
		}
		switch event {
		case "", "message":
			var rec StreamRecord
			if err := json.Unmarshal([]byte(data), &rec); err != nil {
				return StreamRecord{}, false, err
			}
			rec.ID = s.LastEventID
			return rec, true, nil
		case "cutoff":
			s.Cutoffs++
		case "gap":
			s.Gaps = append(s.Gaps, json.RawMessage(data))
		}
	}
}

func (s *Subscription) field(line string) {
	if strings.HasPrefix(line, ":") {
		return
	}
	name, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch name {
	case "data":
		s.data = append(s.data, value)
	case "event":
		s.event = value
	case "id":
		if !strings.Contains(value, "\x00") {
			s.id, s.hasID = value, true
		}
	case "retry":
		if ms, err := strconv.Atoi(value); err == nil {
			s.retryMs = ms
		}
	}
}

func (s *Subscription) drop() {
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.body != nil {
		_ = s.body.Close()
	}
	s.body, s.cancel, s.idle = nil, nil, nil
}

func (s *Subscription) wait(ctx context.Context, retryAfter float64) error {
	s.failures++
	s.Reconnects++
	base := time.Second
	if s.retryMs > 0 {
		base = time.Duration(s.retryMs) * time.Millisecond
	}
	t := time.NewTimer(backoff(s.failures, base, s.maxBackoff, retryAfter))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.life.Done():
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}
