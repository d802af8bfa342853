// Tests of the Avro fast path: the spec's framing fixture byte for byte, and a client against a fake registry.
package headwater

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAvroFramingFixture(t *testing.T) {
	data, err := os.ReadFile("../sdk-specs/vectors/fixtures/avro-framing.json")
	if err != nil {
		t.Skip("no sdk-specs fixtures beside this module")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var fixtures []struct {
		Fixture struct {
			SchemaID  int            `json:"schema_id"`
			Schema    any            `json:"schema"`
			Record    map[string]any `json:"record"`
			FramedHex string         `json:"framed_hex"`
		} `json:"fixture"`
	}
	if err := dec.Decode(&fixtures); err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		text, _ := json.Marshal(f.Fixture.Schema)
		typ, err := parseAvroSchema(string(text))
		if err != nil {
			t.Fatal(err)
		}
		out, err := typ.encode(binary.BigEndian.AppendUint32([]byte{0}, uint32(f.Fixture.SchemaID)), f.Fixture.Record)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(out); got != f.Fixture.FramedHex {
			t.Fatalf("framed\n got %s\nwant %s", got, f.Fixture.FramedHex)
		}
	}
}

func TestAvroEncodesEveryKindAndRefusesMismatches(t *testing.T) {
	schema := `{"type":"record","name":"r","namespace":"n","fields":[
		{"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"f","type":"float"},{"name":"d","type":"double"},
		{"name":"by","type":"bytes"},{"name":"e","type":{"type":"enum","name":"color","symbols":["red","green"]}},
		{"name":"a","type":{"type":"array","items":"long"}},{"name":"m","type":{"type":"map","values":"string"}},
		{"name":"fx","type":{"type":"fixed","name":"two","size":2}},{"name":"again","type":"color"},
		{"name":"u","type":["null","string"],"default":null},{"name":"s","type":"string","default":"x"}]}`
	typ, err := parseAvroSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	value := func(doc string) map[string]any {
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var m map[string]any
		_ = dec.Decode(&m)
		return m
	}
	good := `{"b":true,"i":-1,"f":1,"d":2.5,"by":"AAE=","e":"green","a":[1,2],"m":{"k":"v"},"fx":"AAE=","again":"red"}`
	out, err := typ.encode(nil, value(good))
	want := []byte{1, 1, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 4, 0x40, 4, 0, 1, 2, 4, 2, 4, 0, 2, 2, 'k', 2, 'v', 0, 0, 1, 0, 0, 2, 'x'}
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("%v\n got %v\nwant %v", err, out, want)
	}
	for _, bad := range []string{
		strings.Replace(good, `"i":-1`, `"i":4294967296`, 1), strings.Replace(good, `"e":"green"`, `"e":"blue"`, 1),
		strings.Replace(good, `"b":true`, `"b":"yes"`, 1), strings.Replace(good, `"fx":"AAE="`, `"fx":"AA=="`, 1),
		strings.Replace(good, `"b":true`, `"zzz":1,"b":true`, 1), strings.Replace(good, `"b":true,`, ``, 1),
	} {
		if _, err := typ.encode(nil, value(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// avroGateway answers registry look-ups and records the Avro batches posted.
type avroGateway struct {
	mu       sync.Mutex
	lookups  []string
	requests []*Request
}

func (g *avroGateway) Send(_ context.Context, req *Request) (*Response, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if req.Method == http.MethodGet {
		g.lookups = append(g.lookups, req.URL)
		if !strings.HasSuffix(req.URL, "/subjects/headwater.events.ping/versions/latest") {
			return &Response{Status: 404, Body: []byte(`{"error_code":40401}`)}, nil
		}
		schema := `{"type":"record","name":"ping","namespace":"headwater.events","fields":[{"name":"event_id","type":"string"},{"name":"event_type","type":"string"},{"name":"producer_id","type":"string"},{"name":"seq","type":"long"},{"name":"node_id","type":"string"},{"name":"created_at","type":"long"},{"name":"sent_at","type":"long"},{"name":"received_at","type":["null","long"],"default":null},{"name":"sdk_name","type":"string"},{"name":"sdk_version","type":"string"},{"name":"context","type":{"type":"map","values":"string"},"default":{}},{"name":"properties","type":{"type":"record","name":"ping_properties","fields":[{"name":"note","type":"string"}]}}]}`
		body, _ := json.Marshal(map[string]any{"id": 4242, "version": 1, "schema": schema})
		return &Response{Status: 200, Body: body}, nil
	}
	g.requests = append(g.requests, req)
	return &Response{Status: 200, Body: []byte(`{"accepted":1,"rejected":[]}`)}, nil
}

func (g *avroGateway) Close() {}

func TestAvroClientFramesEventsAndRejectsLocally(t *testing.T) {
	g := &avroGateway{}
	var rejected []*EventRejectedError
	var mu sync.Mutex
	c := newTestClient(t, g, WithAvro("http://registry.test"), WithCompression("identity"), WithLinger(time.Hour),
		WithOnError(func(err error) {
			if r, ok := err.(*EventRejectedError); ok {
				mu.Lock()
				rejected = append(rejected, r)
				mu.Unlock()
			}
		}))
	_ = c.Track("ping", map[string]any{"note": "hello"})
	_ = c.Track("pong", map[string]any{"note": "unknown type"})
	_ = c.Track("ping", map[string]any{"note": 5})
	mustSettleWithLoss(t, c)
	if len(g.requests) != 1 || g.requests[0].Header.Get("Content-Type") != avroContentType {
		t.Fatalf("requests %v", g.requests)
	}
	body := g.requests[0].Body
	if !bytes.Contains(body, []byte{0, 0, 0, 0x10, 0x92}) || !bytes.Contains(body, []byte("hello")) || bytes.Contains(body, []byte("unknown type")) {
		t.Fatalf("body %q", body)
	}
	if len(rejected) != 2 || rejected[0].Code != "unknown_event_type" || rejected[0].Seq != 1 || rejected[1].Code != "schema_mismatch" {
		t.Fatalf("rejected %+v", rejected)
	}
	if m := c.Metrics(); m.Acknowledged != 1 || m.Rejected != 2 {
		t.Fatalf("metrics %+v", m)
	}
}
