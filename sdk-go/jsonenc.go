// A fast JSON encoder for event properties: a type switch over the common Go values, encoding/json for the rest.
//
// Keys are written in map order (JSON objects are unordered), which saves the sorting and reflection that
// encoding/json spends most of its time on. NaN and infinities are refused, invalid UTF-8 becomes U+FFFD,
// nesting deeper than maxDepth (a cycle, say) is refused; values of other types (structs, time.Time,
// json.Marshaler, named types) go through encoding/json.
package headwater

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

const maxDepth = 1000

var (
	errNotFinite = errors.New("NaN and infinite numbers are not valid JSON")
	errTooDeep   = errors.New("nesting deeper than 1000 levels (a cycle?)")
	errBadNumber = errors.New("json.Number is not a valid JSON number")
)

// appendObject appends a JSON object of m.
func appendObject(dst []byte, m map[string]any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, errTooDeep
	}
	dst = append(dst, '{')
	first := true
	var err error
	for k, v := range m {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendValue appends the JSON of v.
func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if out, ok, err := appendScalar(dst, v); ok {
		return out, err
	}
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return appendObject(dst, x, depth)
	case map[string]string:
		return appendStringMap(dst, x), nil
	case []any:
		return appendArray(dst, x, depth)
	case []string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		return append(dst, ']'), nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

func appendStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	first := true
	for k, s := range m {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(appendString(dst, k), ':')
		dst = appendString(dst, s)
	}
	return append(dst, '}')
}

// appendScalar appends v if it is null, a string, a bool or a number of a built-in type (ok true).
func appendScalar(dst []byte, v any) ([]byte, bool, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true, nil
	case string:
		return appendString(dst, x), true, nil
	case bool:
		return strconv.AppendBool(dst, x), true, nil
	case float64:
		dst, err = appendFloat(dst, x, 64)
	case float32:
		dst, err = appendFloat(dst, float64(x), 32)
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true, nil
	case int64:
		return strconv.AppendInt(dst, x, 10), true, nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), true, nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), true, nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), true, nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), true, nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), true, nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), true, nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), true, nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), true, nil
	case json.Number:
		if !validNumber(string(x)) {
			return dst, true, errBadNumber
		}
		return append(dst, x...), true, nil
	default:
		return dst, false, nil
	}
	return dst, true, err
}

func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	if depth > maxDepth {
		return dst, errTooDeep
	}
	dst = append(dst, '[')
	var err error
	for i, v := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendValue(dst, v, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// appendFloat formats like encoding/json: shortest representation, exponent only for very small or large.
func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, errNotFinite
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, bits), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i += plainASCII(s[i:]); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf { // a character to escape
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + 1
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainASCII is the length of s's prefix of bytes 0x20..0x7f other than '"' and '\\', read 8 bytes at a time
// (a word with a candidate byte is then checked byte by byte).
func plainASCII(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		quote, backslash := w^(lsb*'"'), w^(lsb*'\\')
		if (w|(w-lsb*0x20)|(quote-lsb)&^quote|(backslash-lsb)&^backslash)&msb != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// validNumber reports whether s is a JSON number (RFC 8259 grammar).
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}
