// The Avro fast path's encoder (protocol.md section 3): registry schemas parsed, JSON values written as Avro binary.
//
// Values are what encoding/json decodes with UseNumber (nil, bool, json.Number, string, []any, map[string]any),
// mapped as protocol.md section 2 says: bytes and fixed as base64 strings, enums as symbols, a union as the
// plain value of its first branch that accepts it, record fields with a default may be omitted; an unknown
// field of a record is an error (it would be lost). Logical types are written as their underlying type.
package headwater

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// avroType is one node of a parsed schema.
type avroType struct {
	kind     string // null boolean int long float double bytes string record enum array map union fixed
	name     string
	fields   []avroField
	symbols  map[string]int
	items    *avroType // array items, map values
	branches []*avroType
	size     int
}

type avroField struct {
	name   string
	typ    *avroType
	def    any
	hasDef bool
}

var avroPrimitives = map[string]bool{"null": true, "boolean": true, "int": true, "long": true, "float": true,
	"double": true, "bytes": true, "string": true}

// parseAvroSchema parses a schema's JSON text.
func parseAvroSchema(text string) (*avroType, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	return (&avroParser{names: map[string]*avroType{}}).parse(doc, "")
}

type avroParser struct{ names map[string]*avroType }

func (p *avroParser) parse(doc any, namespace string) (*avroType, error) {
	switch d := doc.(type) {
	case string:
		if avroPrimitives[d] {
			return &avroType{kind: d}, nil
		}
		for _, name := range []string{namespace + "." + d, d} {
			if t, ok := p.names[name]; ok {
				return t, nil
			}
		}
		return nil, fmt.Errorf("unknown type %q", d)
	case []any:
		u := &avroType{kind: "union"}
		for _, b := range d {
			t, err := p.parse(b, namespace)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, t)
		}
		return u, nil
	case map[string]any:
		return p.parseComplex(d, namespace)
	}
	return nil, fmt.Errorf("bad schema node %v", doc)
}

func (p *avroParser) parseComplex(d map[string]any, namespace string) (*avroType, error) {
	kind, _ := d["type"].(string)
	if _, nested := d["type"].(string); !nested {
		return p.parse(d["type"], namespace) // {"type": {...}} or {"type": [...]}
	}
	t := &avroType{kind: kind}
	switch kind {
	case "record", "error", "enum", "fixed":
		namespace = p.register(t, d, namespace)
	}
	switch kind {
	case "record", "error":
		t.kind = "record"
		fields, _ := d["fields"].([]any)
		for _, f := range fields {
			fm, _ := f.(map[string]any)
			name, _ := fm["name"].(string)
			ft, err := p.parse(fm["type"], namespace)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			def, hasDef := fm["default"]
			t.fields = append(t.fields, avroField{name: name, typ: ft, def: def, hasDef: hasDef})
		}
	case "enum":
		syms, _ := d["symbols"].([]any)
		t.symbols = map[string]int{}
		for i, s := range syms {
			if str, ok := s.(string); ok {
				t.symbols[str] = i
			}
		}
	case "fixed":
		n, err := d["size"].(json.Number).Int64()
		if err != nil {
			return nil, errors.New("fixed without a size")
		}
		t.size = int(n)
	case "array", "map":
		key := map[string]string{"array": "items", "map": "values"}[kind]
		items, err := p.parse(d[key], namespace)
		if err != nil {
			return nil, err
		}
		t.items = items
	default:
		if !avroPrimitives[kind] {
			return nil, fmt.Errorf("unknown type %q", kind)
		}
	}
	return t, nil
}

// register names a record, enum or fixed (full and short name) and returns the namespace of its children.
func (p *avroParser) register(t *avroType, d map[string]any, namespace string) string {
	name, _ := d["name"].(string)
	if ns, ok := d["namespace"].(string); ok && !strings.Contains(name, ".") {
		namespace = ns
	}
	full := name
	if !strings.Contains(name, ".") && namespace != "" {
		full = namespace + "." + name
	} else if i := strings.LastIndex(name, "."); i >= 0 {
		namespace = name[:i]
	}
	t.name = full
	p.names[full] = t
	p.names[name] = t
	return namespace
}

func appendLong(dst []byte, n int64) []byte { return binary.AppendUvarint(dst, uint64(n<<1^(n>>63))) }

func appendAvroBytes(dst []byte, b []byte) []byte {
	return append(appendLong(dst, int64(len(b))), b...)
}

func appendAvroString(dst []byte, s string) []byte {
	return append(appendLong(dst, int64(len(s))), s...)
}

// encode appends v written with t.
func (t *avroType) encode(dst []byte, v any) ([]byte, error) {
	switch t.kind {
	case "null", "boolean", "int", "long", "float", "double":
		return t.encodeScalar(dst, v)
	case "string":
		s, ok := v.(string)
		if !ok {
			return dst, fmt.Errorf("want a string, got %T", v)
		}
		return appendAvroString(dst, s), nil
	case "bytes", "fixed":
		s, ok := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || err != nil || t.kind == "fixed" && len(b) != t.size {
			return dst, fmt.Errorf("want base64 %s, got %v", t.kind, v)
		}
		if t.kind == "fixed" {
			return append(dst, b...), nil
		}
		return appendAvroBytes(dst, b), nil
	case "enum":
		s, _ := v.(string)
		i, ok := t.symbols[s]
		if !ok {
			return dst, fmt.Errorf("%v is not a symbol of %s", v, t.name)
		}
		return appendLong(dst, int64(i)), nil
	}
	return t.encodeComplex(dst, v)
}

// encodeScalar writes null, boolean and numbers.
func (t *avroType) encodeScalar(dst []byte, v any) ([]byte, error) {
	switch t.kind {
	case "null":
		if v != nil {
			return dst, fmt.Errorf("want null, got %T", v)
		}
		return dst, nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return dst, fmt.Errorf("want a boolean, got %T", v)
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case "int", "long":
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || t.kind == "int" && (i < math.MinInt32 || i > math.MaxInt32) {
			return dst, fmt.Errorf("want an %s, got %v", t.kind, v)
		}
		return appendLong(dst, i), nil
	case "float", "double":
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.IsInf(f, 0) {
			return dst, fmt.Errorf("want a %s, got %v", t.kind, v)
		}
		if t.kind == "float" {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	}
	return dst, fmt.Errorf("cannot write type %s", t.kind)
}

func (t *avroType) encodeComplex(dst []byte, v any) ([]byte, error) {
	var err error
	switch t.kind {
	case "array":
		a, ok := v.([]any)
		if !ok {
			return dst, fmt.Errorf("want an array, got %T", v)
		}
		if len(a) > 0 {
			dst = appendLong(dst, int64(len(a)))
			for _, item := range a {
				if dst, err = t.items.encode(dst, item); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			return dst, fmt.Errorf("want an object, got %T", v)
		}
		if len(m) > 0 {
			dst = appendLong(dst, int64(len(m)))
			for k, item := range m {
				if dst, err = t.items.encode(appendAvroString(dst, k), item); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	case "union":
		for i, b := range t.branches {
			if out, err := b.encode(appendLong(dst, int64(i)), v); err == nil {
				return out, nil
			}
		}
		return dst, fmt.Errorf("%v matches no branch of a union", v)
	case "record":
		return t.encodeRecord(dst, v)
	}
	return dst, fmt.Errorf("cannot write type %s", t.kind)
}

func (t *avroType) encodeRecord(dst []byte, v any) ([]byte, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return dst, fmt.Errorf("want an object for %s, got %T", t.name, v)
	}
	var err error
	for _, f := range t.fields {
		value, present := m[f.name]
		typ := f.typ
		if !present {
			if !f.hasDef {
				return dst, fmt.Errorf("%s: missing field %s", t.name, f.name)
			}
			value = f.def
			if typ.kind == "union" { // a union's default is a value of its first branch
				dst, typ = appendLong(dst, 0), typ.branches[0]
			}
		}
		if dst, err = typ.encode(dst, value); err != nil {
			return dst, fmt.Errorf("%s.%s: %w", t.name, f.name, err)
		}
	}
	if len(m) > len(t.fields) || !t.hasAll(m) {
		return dst, fmt.Errorf("%s: unknown field", t.name)
	}
	return dst, nil
}

func (t *avroType) hasAll(m map[string]any) bool {
	for k := range m {
		found := false
		for _, f := range t.fields {
			if f.name == k {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
