// Request bodies: a batch encoded as JSON (protocol.md section 2) or as the Avro fast path (section 3), compressed.
package headwater

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

const avroContentType = "application/vnd.headwater.batch+avro"

// encoded is a request body ready to send, and the events the Avro encoder rejected before sending.
type encoded struct {
	body        []byte // compressed
	contentType string
	sentIndex   []int // the batch index of each event in the body; nil: every event, in order
	avro        bool
	rejects     []*EventRejectedError
}

func (e *encoded) empty() bool { return e.avro && len(e.sentIndex) == 0 }
func (e *encoded) index(i int) int {
	if e.avro {
		return e.sentIndex[i]
	}
	return i
}
func (e *encoded) sent(n int) int {
	if e.avro {
		return len(e.sentIndex)
	}
	return n
}

// encode builds the body of b in raw and its compressed form in packed (pooled buffers of the sender).
func (s *sender) encode(b *Batch, raw, packed *[]byte) (*encoded, *TransportError) {
	if s.schemas == nil {
		*raw = jsonBody((*raw)[:0], b, b.sentAt)
		*packed = compress((*packed)[:0], *raw, s.cfg.Compression)
		return &encoded{body: *packed, contentType: jsonContentType}, nil
	}
	enc := &encoded{contentType: avroContentType, avro: true}
	framed := make([][]byte, 0, len(b.Events))
	for i, ev := range b.Events {
		record, eventType, err := avroRecord(ev, b.sentAt)
		var reg *registered
		if err == nil {
			if reg, err = s.schemas.get(s.ctx, eventType); err != nil {
				if terr, ok := err.(*TransportError); ok {
					return nil, terr
				}
				return nil, &TransportError{RetryAfter: -1, Msg: err.Error(), Err: err}
			}
		}
		var out []byte
		switch {
		case err != nil:
		case reg.typ == nil:
			err = fmt.Errorf("%w: no subject headwater.events.%s in the registry", errUnknownType, eventType)
		default:
			out = binary.BigEndian.AppendUint32([]byte{0}, uint32(reg.id))
			out, err = reg.typ.encode(out, record)
		}
		if err != nil {
			code := "schema_mismatch"
			if reg != nil && reg.typ == nil {
				code = "unknown_event_type"
			}
			id, seq := envelopeIDs(ev)
			enc.rejects = append(enc.rejects, &EventRejectedError{BatchID: b.ID, EventID: id, Seq: seq, Code: code, Message: err.Error()})
			continue
		}
		framed = append(framed, out)
		enc.sentIndex = append(enc.sentIndex, i)
	}
	*raw = avroBatchBody((*raw)[:0], b.ID, b.sentAt, framed)
	*packed = compress((*packed)[:0], *raw, s.cfg.Compression)
	enc.body = *packed
	return enc, nil
}

var errUnknownType = fmt.Errorf("unknown event type")

// avroRecord is the Avro event record of a JSON envelope: the envelope fields in order, then properties.
func avroRecord(envelope []byte, sentAt int64) (map[string]any, string, error) {
	dec := json.NewDecoder(bytes.NewReader(envelope))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil {
		return nil, "", err
	}
	eventType, _ := env["event_type"].(string)
	ctx, ok := env["context"]
	if !ok {
		ctx = map[string]any{}
	}
	props, ok := env["properties"]
	if !ok {
		props = map[string]any{}
	}
	return map[string]any{
		"event_id": env["event_id"], "event_type": eventType, "producer_id": env["producer_id"], "seq": env["seq"],
		"node_id": env["node_id"], "created_at": env["created_at"], "sent_at": json.Number(fmt.Sprint(sentAt)),
		"received_at": nil, "sdk_name": SDKName, "sdk_version": Version, "context": ctx, "properties": props,
	}, eventType, nil
}

// eventTypeOf reads event_type from an envelope.
func eventTypeOf(envelope []byte) string {
	var v struct {
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(envelope, &v)
	return v.EventType
}

// avroBatchBody is batch.avsc's record, schemaless: batch_id, sent_at, sdk_name, sdk_version, events.
func avroBatchBody(dst []byte, batchID string, sentAt int64, events [][]byte) []byte {
	dst = appendAvroString(dst, batchID)
	dst = appendLong(dst, sentAt)
	dst = appendAvroString(dst, SDKName)
	dst = appendAvroString(dst, Version)
	if len(events) > 0 {
		dst = appendLong(dst, int64(len(events)))
		for _, e := range events {
			dst = appendAvroBytes(dst, e)
		}
	}
	return append(dst, 0)
}
