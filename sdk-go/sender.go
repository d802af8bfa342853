// Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store.
package headwater

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DeliveryReport is passed to OnDelivery once per batch that reached a final outcome.
type DeliveryReport struct {
	BatchID    string
	ProducerID string
	FirstSeq   int64
	LastSeq    int64
	Events     int
	Status     int                   // the HTTP status of the final answer; 0 when none came (retry deadline)
	Accepted   int                   // events the gateway accepted
	Rejected   []*EventRejectedError // events the gateway rejected (200/422)
	Err        error                 // non-nil when the whole batch failed (*BatchRejectedError, *EventsDroppedError)
}

// action is what the sender goroutine does with the batch afterwards.
type action int

const (
	actAck     action = iota // final outcome: forget it
	actSplit                 // replace it by its halves
	actRelease               // keep it pending; send it again later
)

type sender struct {
	cfg      *Config
	gate     *gate
	window   *window
	tr       Transport
	counters *counters
	report   func(error)
	eps      *endpoints
	auth     string
	ctx      context.Context // cancelled at the hard stop of Close: aborts requests and waits
	durable  bool
	schemas  *schemaCache // non-nil for the Avro wire format
	bufs     sync.Pool
}

func newSender(ctx context.Context, cfg *Config, tr Transport, c *counters, report func(error), durable bool) *sender {
	var schemas *schemaCache
	if cfg.WireFormat == WireAvro {
		schemas = newSchemaCache(cfg.RegistryURL, tr, cfg.SchemaRefresh, cfg.RequestTimeout)
	}
	return &sender{cfg: cfg, tr: tr, counters: c, report: report, ctx: ctx, durable: durable, schemas: schemas,
		gate: newGate(cfg.RetryRefusedMax, report), window: newWindow(cfg.MaxInFlight),
		eps:  newEndpoints(cfg.endpointList(), cfg.FailoverAfterFailures, cfg.FailoverAfter, cfg.FailbackProbe, time.Now),
		auth: "Bearer " + cfg.WriteKey,
		bufs: sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}}
}

// deliver sends b until it gets a final answer, the retry deadline passes, or the client stops. Every attempt
// passes the client's gate (protocol.md §6.1) and takes a place in the in-flight window (§6.2).
func (s *sender) deliver(b *Batch) (action, []*Batch) {
	s.counters.addSent(len(b.Events))
	if b.sentAt == 0 {
		b.sentAt = nowMs()
	}
	raw, packed := s.bufs.Get().(*[]byte), s.bufs.Get().(*[]byte)
	defer s.bufs.Put(raw)
	defer s.bufs.Put(packed)
	me := s.gate.newID()
	defer s.gate.gaveUp(me)
	var enc *encoded
	deadline := time.Now().Add(s.cfg.RetryDeadline)
	for attempt := 1; ; attempt++ {
		if s.gate.enter(s.ctx, me) != nil {
			return actRelease, nil
		}
		var resp *Response
		var terr *TransportError
		if enc == nil { // Avro: a registry that cannot be reached is retried like the gateway
			enc, terr = s.encode(b, raw, packed)
		}
		switched := false
		if enc != nil {
			if resp, terr, switched = s.post(enc); terr == nil {
				s.gate.answered()
				return s.answered(b, enc, resp)
			}
		}
		if s.ctx.Err() != nil {
			return actRelease, nil
		}
		if switched { // failed over (protocol.md §9): the old endpoint's streak and hold end; try the new one now
			s.gate.switched()
			s.counters.addRetry()
			continue
		}
		since := s.gate.failed(me, terr)
		retryAfter := s.retryAfter(terr)
		if retryAfter >= 0 {
			s.gate.hold(time.Duration(retryAfter * float64(time.Second)))
		}
		limit := s.cfg.RetryMax
		short := len(s.eps.urls) > 1 && (terr.Status == 0 || healthFailure(terr.Status)) // §9: reach the failover bound on time
		if terr.Refused || short {
			limit = min(s.cfg.RetryRefusedMax, s.cfg.RetryMax)
		}
		wait := s.gate.capped(backoff(attempt, s.cfg.RetryBase, limit, retryAfter))
		if time.Now().Add(wait).After(deadline) {
			return s.gaveUp(b, terr), nil
		}
		s.counters.addRetry()
		if s.gate.backoff(s.ctx, wait, since) != nil {
			return actRelease, nil
		}
	}
}

// retryAfter is the server's Retry-After in seconds, capped at retryAfterCapFactor x RetryMax; -1 without one.
func (s *sender) retryAfter(terr *TransportError) float64 {
	if terr.RetryAfter < 0 {
		return -1
	}
	return min(terr.RetryAfter, retryAfterCapFactor*s.cfg.RetryMax.Seconds())
}

// post sends one attempt to the active endpoint inside a place of the window; a retryable status or no answer is
// a *TransportError, and switched says that this failure moved the client to another endpoint.
func (s *sender) post(enc *encoded) (*Response, *TransportError, bool) {
	if enc.empty() { // every event was rejected by the Avro encoder: nothing to send
		return &Response{Status: 200, Body: []byte(`{"accepted":0,"rejected":[]}`)}, nil, false
	}
	resp, terr, index := s.attempt(enc)
	if s.ctx.Err() != nil { // the client stopped: no news about the endpoint
		return resp, terr, false
	}
	if terr != nil && (terr.Status == 0 || healthFailure(terr.Status)) {
		return nil, terr, s.moved(s.eps.failed(index))
	}
	s.eps.answered(index)
	return resp, terr, false
}

// attempt sends one request (see post) and says which endpoint it went to.
func (s *sender) attempt(enc *encoded) (*Response, *TransportError, int) {
	s.probe()
	index, base := s.eps.current()
	header := http.Header{
		"Content-Type": {enc.contentType}, "Content-Encoding": {string(s.cfg.Compression)},
		"Authorization": {s.auth}, "User-Agent": {UserAgent},
	}
	place, ok := s.window.acquire(s.ctx)
	if !ok {
		return nil, &TransportError{Msg: "client stopped", RetryAfter: -1, Err: s.ctx.Err()}, index
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.tr.Send(ctx, &Request{Method: http.MethodPost, URL: base + "/v1/batch", Header: header, Body: enc.body})
	if err != nil {
		s.window.release(place, signalFailure)
		var terr *TransportError
		if errors.As(err, &terr) {
			return nil, terr, index
		}
		return nil, &TransportError{Msg: err.Error(), RetryAfter: -1, Err: err}, index
	}
	switch classify(resp.Status) {
	case outcomeRetry:
		s.window.release(place, signalFailure)
		code, msg := parseError(resp.Body)
		ra := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return nil, &TransportError{Status: resp.Status, RetryAfter: ra, Msg: strings.TrimSpace(code + " " + msg)}, index
	case outcomeDone:
		s.window.release(place, signalSuccess)
	default:
		s.window.release(place, signalNeutral)
	}
	return resp, nil, index
}

// probe: while on a later endpoint, one sender at a time asks the earlier ones GET /readyz (when due), and the
// client returns to the first that answers 200 (protocol.md §9). The probe carries no write key.
func (s *sender) probe() {
	targets := s.eps.probeTargets()
	if len(targets) == 0 {
		return
	}
	ready := -1
	for _, i := range targets {
		ctx, cancel := context.WithTimeout(s.ctx, min(probeTimeout, s.cfg.RequestTimeout))
		resp, err := s.tr.Send(ctx, &Request{Method: http.MethodGet, URL: s.eps.urls[i] + readyPath,
			Header: http.Header{"User-Agent": {UserAgent}}})
		cancel()
		if err == nil && resp.Status == 200 {
			ready = i
			break
		}
	}
	s.moved(s.eps.probed(ready))
}

// moved logs and acts on a move to another endpoint; true if there was one.
func (s *sender) moved(sw *endpointSwitch) bool {
	if sw == nil {
		return false
	}
	s.window.newPath()
	if sw.failback {
		slog.Warn("headwater: failing back (ready again)", "to", sw.new, "from", sw.old)
		s.gate.switched()
	} else {
		slog.Warn("headwater: failing over", "from", sw.old, "to", sw.new, "failed_attempts", sw.failures,
			"after", sw.spent.Round(time.Millisecond))
	}
	return true
}

func (s *sender) gaveUp(b *Batch, terr *TransportError) action {
	s.report(terr)
	if s.durable {
		return actRelease
	}
	err := &EventsDroppedError{ReasonRetryDeadline, len(b.Events), "batch " + b.ID + ": " + terr.Error()}
	s.report(err)
	s.delivered(b, 0, 0, nil, err)
	s.counters.settle(0, 0, ReasonRetryDeadline, len(b.Events), true) // after the callbacks: Flush implies them
	return actAck
}

func (s *sender) answered(b *Batch, enc *encoded, resp *Response) (action, []*Batch) {
	n := len(b.Events)
	switch classify(resp.Status) {
	case outcomeSplit:
		if n > 1 {
			return actSplit, split(b)
		}
		code, msg := parseError(resp.Body)
		if code == "" {
			code = ReasonEventTooLarge
		}
		s.refuse(b, resp.Status, code, msg, ReasonEventTooLarge)
		return actAck, nil
	case outcomeRefused:
		code, msg := parseError(resp.Body)
		if code == "" {
			code = "http_" + strconv.Itoa(resp.Status)
		}
		s.refuse(b, resp.Status, code, msg, "refused_http_"+strconv.Itoa(resp.Status))
		return actAck, nil
	}
	answer := parseAnswer(resp.Body)
	rejected := enc.rejects
	seen := make(map[int]bool, len(answer.Rejected))
	for _, r := range answer.Rejected {
		if r.Index < 0 || r.Index >= enc.sent(n) || seen[r.Index] {
			continue
		}
		seen[r.Index] = true
		i := enc.index(r.Index)
		id, seq := envelopeIDs(b.Events[i])
		rejected = append(rejected, &EventRejectedError{BatchID: b.ID, EventID: id, Seq: seq, Code: r.Code, Message: r.Message})
		if s.schemas != nil && strings.Contains(strings.ToLower(r.Code), "schema") {
			s.schemas.invalidate(eventTypeOf(b.Events[i]))
		}
	}
	for _, r := range rejected {
		s.report(r)
	}
	s.delivered(b, resp.Status, n-len(rejected), rejected, nil)
	s.counters.settle(n-len(rejected), len(rejected), "", 0, true)
	return actAck, nil
}

func (s *sender) refuse(b *Batch, status int, code, msg, reason string) {
	err := &BatchRejectedError{BatchID: b.ID, Status: status, Code: code, Message: msg, Count: len(b.Events)}
	s.report(err)
	s.delivered(b, status, 0, nil, err)
	s.counters.settle(0, 0, reason, len(b.Events), true)
}

func (s *sender) delivered(b *Batch, status, accepted int, rejected []*EventRejectedError, err error) {
	if s.cfg.OnDelivery == nil {
		return
	}
	s.cfg.OnDelivery(DeliveryReport{BatchID: b.ID, ProducerID: b.ProducerID, FirstSeq: b.FirstSeq, LastSeq: b.LastSeq,
		Events: len(b.Events), Status: status, Accepted: accepted, Rejected: rejected, Err: err})
}

// split returns the two halves of b (protocol.md §4, splitting on 413): floor(n/2) events first, with derived batch ids.
func split(b *Batch) []*Batch {
	mid := len(b.Events) / 2
	halves := make([]*Batch, 2)
	for k, r := range [][2]int{{0, mid}, {mid, len(b.Events)}} {
		seqs := b.Seqs[r[0]:r[1]]
		halves[k] = &Batch{ID: splitBatchID(b.ID, k), ProducerID: b.ProducerID, FirstSeq: seqs[0],
			LastSeq: seqs[len(seqs)-1], Events: b.Events[r[0]:r[1]], Seqs: seqs}
	}
	return halves
}
