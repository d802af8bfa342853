// Tests of the properties encoder: what it writes decodes to what encoding/json would write, and bad values fail.
package headwater

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func roundTrip(t *testing.T, v map[string]any) {
	t.Helper()
	fast, err := encodeProperties(v)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := json.Marshal(v)
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("not JSON: %s: %v", fast, err)
	}
	_ = json.Unmarshal(ref, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("fast %s\n ref %s", fast, ref)
	}
}

type point struct {
	X int `json:"x"`
}

func TestPropertiesEncodeLikeEncodingJSON(t *testing.T) {
	roundTrip(t, map[string]any{
		"s": "plain", "esc": "quote \" backslash \\ nl \n tab \t cr \r nul \x00 bell \x07 <html> & é 😀 \u2028",
		"bad_utf8": "a\xffb\xc3", "i": 42, "neg": int64(-9223372036854775808), "u": uint64(18446744073709551615),
		"f": 3.25, "tiny": 1e-9, "huge": 1e22, "f32": float32(0.1), "zero": 0.0, "t": true, "n": nil,
		"list": []any{1, "a", nil, []any{}, map[string]any{"k": false}}, "strs": []string{"x", "y"},
		"ss": map[string]string{"a": "b"}, "nested": map[string]any{"deeper": map[string]any{"x": 1.5}},
		"num": json.Number("12345678901234567890"), "struct": point{7}, "when": time.Unix(0, 0).UTC(),
		"i8": int8(-3), "u16": uint16(9), "nil_map": map[string]any(nil), "nil_list": []any(nil),
	})
}

func TestPropertiesRefuseWhatJSONCannotCarry(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for name, v := range map[string]any{
		"NaN": math.NaN(), "+Inf": math.Inf(1), "-Inf32": float32(math.Inf(-1)), "cycle": cyclic,
		"bad number": json.Number("1e"), "number words": json.Number("NaN"), "channel": make(chan int),
		"func": func() {}, "nested NaN": []any{map[string]any{"x": math.NaN()}},
	} {
		if _, err := encodeProperties(map[string]any{"v": v}); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestValidNumber(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12.5", "1e9", "1E+9", "2.5e-3", "123456789012345678901234567890"} {
		if !validNumber(s) {
			t.Errorf("%q must be valid", s)
		}
	}
	for _, s := range []string{"", "-", "01", "1.", ".5", "1e", "+1", "1e+", "0x10", "Infinity", "1 "} {
		if validNumber(s) {
			t.Errorf("%q must be invalid", s)
		}
	}
}

func BenchmarkEncodeProperties(b *testing.B) {
	props := map[string]any{"url": "https://shop.example.com/p/1", "title": strings.Repeat("boots ", 30),
		"n": 3, "price": 249.97, "ok": true, "tags": []string{"a", "b"}, "vp": map[string]any{"w": 1280, "h": 720}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := encodeProperties(props); err != nil {
			b.Fatal(err)
		}
	}
}

func encodeProperties(props map[string]any) ([]byte, error) { return appendObject(nil, props, 1) }

func TestAppendStringMatchesEncodingJSONOnRandomBytes(t *testing.T) {
	alphabet := []byte("ab \"\\\x00\x1f\x7f\xc3\xa9\xff\xe2\x80\xa8\xf0\x9f\x98\x80xyz<>&")
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		var fast, ref string
		if err := json.Unmarshal(appendString(nil, string(b)), &fast); err != nil {
			t.Fatalf("%q: not JSON: %v", b, err)
		}
		want, _ := json.Marshal(string(b))
		_ = json.Unmarshal(want, &ref)
		if fast != ref {
			t.Fatalf("%q: got %q, want %q", b, fast, ref)
		}
	}
}
