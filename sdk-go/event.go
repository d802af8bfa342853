// Events: the checks Track makes, the captured event, and its JSON envelope (protocol.md section 2).
package headwater

import (
	"encoding/json"
	"strconv"
	"sync"
)

// pending is an event accepted by Track: its JSON envelope, complete once finish has added its seq.
//
// The envelope is encoded on the caller's goroutine before the event is queued, with "seq" as its last field
// (JSON objects are unordered) and room reserved for it, so assigning the seq under the queue's lock is an
// append without allocation, and the batcher only packs finished envelopes.
type pending struct {
	seq int64
	env []byte
}

// seqTail is the largest `,"seq":<n>}`.
const seqTail = len(`,"seq":`) + 20 + 1

// finish appends the seq and closes the envelope (within the reserved capacity).
func (e *pending) finish(seq int64) {
	e.seq = seq
	e.env = strconv.AppendInt(append(e.env, `,"seq":`...), seq, 10)
	e.env = append(e.env, '}')
}

// size is an upper bound of the finished envelope's bytes.
func (e *pending) size() int { return len(e.env) + seqTail }

// shared holds the per-client envelope fields, pre-encoded.
type shared struct {
	producerID string
	nodeJSON   []byte
	ctxJSON    []byte // nil when the context is empty
}

func newShared(producerID, nodeID string, ctx map[string]string) *shared {
	s := &shared{producerID: producerID, nodeJSON: appendString(nil, nodeID)}
	if len(ctx) > 0 {
		s.ctxJSON, _ = appendValue(nil, ctx, 1) // strings always encode
	}
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

var envBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// makeEvent checks Track's arguments and encodes the event's envelope (all but its seq); it returns the event id.
func makeEvent(s *shared, eventType string, props map[string]any, opts []TrackOption) (pending, string, error) {
	if err := checkEventType(eventType); err != nil {
		return pending{}, "", err
	}
	var o trackOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.eventID != "" && !isUUID(o.eventID) {
		return pending{}, "", &InvalidEventError{"event_id must be a UUID string, got " + strconv.Quote(o.eventID)}
	}
	if o.hasTime && o.createdAt < 0 {
		return pending{}, "", &InvalidEventError{"timestamp must be at or after the Unix epoch"}
	}
	if !o.hasTime {
		o.createdAt = nowMs()
	}
	if o.eventID == "" {
		o.eventID = uuid7(o.createdAt)
	}
	buf := envBufs.Get().(*[]byte)
	out := appendHead((*buf)[:0], s, eventType, &o)
	out, err := appendObject(out, props, 1)
	var env []byte
	if err == nil {
		env = append(make([]byte, 0, len(out)+seqTail), out...)
	}
	if cap(out) <= 1<<20 { // keep a typical buffer, not the largest one ever seen
		*buf = out[:0]
		envBufs.Put(buf)
	}
	if err != nil {
		return pending{}, "", &InvalidEventError{"properties are not encodable as JSON: " + err.Error()}
	}
	return pending{env: env}, o.eventID, nil
}

// appendHead appends the envelope up to the value of "properties" (field order of protocol.md but seq).
func appendHead(dst []byte, s *shared, eventType string, o *trackOptions) []byte {
	dst = append(dst, `{"event_id":"`...)
	dst = append(dst, o.eventID...)
	dst = append(dst, `","event_type":"`...)
	dst = append(dst, eventType...)
	dst = append(dst, `","producer_id":"`...)
	dst = append(dst, s.producerID...)
	dst = append(dst, `","node_id":`...)
	dst = append(dst, s.nodeJSON...)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, o.createdAt, 10)
	if o.partitionKey != nil {
		dst = append(dst, `,"partition_key":`...)
		dst = appendString(dst, *o.partitionKey)
	}
	if s.ctxJSON != nil {
		dst = append(dst, `,"context":`...)
		dst = append(dst, s.ctxJSON...)
	}
	return append(dst, `,"properties":`...)
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
