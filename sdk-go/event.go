// Events: the checks Track makes, the captured event, and its JSON envelope (protocol.md section 2).
package headwater

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
)

// pending is an event accepted by Track: its seq is assigned, its properties already encoded as JSON.
type pending struct {
	seq       int64
	eventID   string
	eventType string
	createdAt int64
	pkJSON    []byte // the JSON string of partition_key, nil when absent
	props     []byte // the JSON object of properties
}

// shared holds the per-client envelope fields, pre-encoded.
type shared struct {
	producerID string
	nodeJSON   []byte
	ctxJSON    []byte // nil when the context is empty
	baseSize   int    // envelope bytes without event type, partition key and properties, with 20-digit numbers
}

func newShared(producerID, nodeID string, ctx map[string]string) *shared {
	s := &shared{producerID: producerID, nodeJSON: appendJSONString(nil, nodeID)}
	if len(ctx) > 0 {
		s.ctxJSON, _ = json.Marshal(ctx) // a map[string]string always encodes
	}
	probe := pending{seq: math.MaxInt64, eventID: "00000000-0000-0000-0000-000000000000", createdAt: math.MaxInt64}
	s.baseSize = len(appendEnvelope(nil, &probe, s))
	return s
}

// checkEventType enforces [a-z][a-z0-9_]{0,63}.
func checkEventType(t string) error {
	if len(t) == 0 || len(t) > 64 || t[0] < 'a' || t[0] > 'z' {
		return &InvalidEventError{"event_type must match [a-z][a-z0-9_]{0,63}, got " + strconv.Quote(t)}
	}
	for i := 1; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return &InvalidEventError{"event_type must match [a-z][a-z0-9_]{0,63}, got " + strconv.Quote(t)}
		}
	}
	return nil
}

// encodeProperties is the JSON object of properties; NaN, infinities and unencodable values are an error.
func encodeProperties(props map[string]any) ([]byte, error) {
	if len(props) == 0 {
		return []byte("{}"), nil
	}
	buf := propsBufs.Get().(*[]byte)
	out, err := appendObject((*buf)[:0], props, 1)
	var encoded []byte
	if err == nil {
		encoded = append(make([]byte, 0, len(out)), out...)
	}
	if cap(out) <= 1<<20 { // keep a typical buffer, not the largest one ever seen
		*buf = out[:0]
		propsBufs.Put(buf)
	}
	if err != nil {
		return nil, &InvalidEventError{"properties are not encodable as JSON: " + err.Error()}
	}
	return encoded, nil
}

var propsBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// makeEvent checks Track's arguments and captures the event (without its seq).
func makeEvent(eventType string, props map[string]any, opts []TrackOption) (pending, error) {
	if err := checkEventType(eventType); err != nil {
		return pending{}, err
	}
	var o trackOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.eventID != "" && !isUUID(o.eventID) {
		return pending{}, &InvalidEventError{"event_id must be a UUID string, got " + strconv.Quote(o.eventID)}
	}
	if o.hasTime && o.createdAt < 0 {
		return pending{}, &InvalidEventError{"timestamp must be at or after the Unix epoch"}
	}
	encoded, err := encodeProperties(props)
	if err != nil {
		return pending{}, err
	}
	e := pending{eventID: o.eventID, eventType: eventType, createdAt: o.createdAt, props: encoded}
	if !o.hasTime {
		e.createdAt = nowMs()
	}
	if e.eventID == "" {
		e.eventID = uuid7(e.createdAt)
	}
	if o.partitionKey != nil {
		e.pkJSON = appendJSONString(nil, *o.partitionKey)
	}
	return e, nil
}

// size is an upper bound of the event's envelope bytes (exact but for the digits of seq and created_at).
func (e *pending) size(s *shared) int {
	n := s.baseSize + len(e.eventType) + len(e.props) - 2
	if e.pkJSON != nil {
		n += len(`,"partition_key":`) + len(e.pkJSON)
	}
	return n
}

// appendEnvelope appends the event's JSON envelope, field order as protocol.md shows it.
func appendEnvelope(dst []byte, e *pending, s *shared) []byte {
	dst = append(dst, `{"event_id":"`...)
	dst = append(dst, e.eventID...)
	dst = append(dst, `","event_type":"`...)
	dst = append(dst, e.eventType...)
	dst = append(dst, `","producer_id":"`...)
	dst = append(dst, s.producerID...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendInt(dst, e.seq, 10)
	dst = append(dst, `,"node_id":`...)
	dst = append(dst, s.nodeJSON...)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, e.createdAt, 10)
	if e.pkJSON != nil {
		dst = append(dst, `,"partition_key":`...)
		dst = append(dst, e.pkJSON...)
	}
	if s.ctxJSON != nil {
		dst = append(dst, `,"context":`...)
		dst = append(dst, s.ctxJSON...)
	}
	dst = append(dst, `,"properties":`...)
	if e.props == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, e.props...)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string (invalid UTF-8 becomes U+FFFD, as encoding/json does).
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}

// envelopeIDs reads event_id and seq back from an encoded envelope (rare paths: rejections, spool recovery).
func envelopeIDs(raw []byte) (string, int64) {
	var v struct {
		EventID string `json:"event_id"`
		Seq     int64  `json:"seq"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", -1
	}
	return v.EventID, v.Seq
}
