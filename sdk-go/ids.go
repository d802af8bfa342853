// Identifiers: UUIDv7 event and batch ids, UUIDv4 producer ids, and the UUIDv5 ids of split batches.
package headwater

import (
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 9562 name-based UUIDv5 is defined with SHA-1
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"time"
)

// splitNamespace is the UUIDv5 namespace of split batch ids (protocol.md §4, splitting on 413).
var splitNamespace = [16]byte{0x6f, 0x1f, 0x0c, 0x2e, 0x9a, 0x10, 0x4b, 0x59, 0x8d, 0x55, 0x2f, 0x6f, 0x1d, 0x1b, 0x9a, 0x10}

// uuid7 is an RFC 9562 UUIDv7: 48-bit millisecond time, version 7, variant 10, 74 random bits.
// The random bits come from math/rand/v2's per-goroutine ChaCha8 source: uniqueness, not secrecy, is needed.
func uuid7(unixMs int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(unixMs)<<16|uint64(mrand.Uint32()&0xffff))
	binary.BigEndian.PutUint64(b[8:16], mrand.Uint64())
	b[6] = 0x70 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return formatUUID(b)
}

func nowMs() int64 { return time.Now().UnixMilli() }

// newProducerID is a random UUIDv4 from crypto/rand.
func newProducerID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		binary.BigEndian.PutUint64(b[0:8], mrand.Uint64())
		binary.BigEndian.PutUint64(b[8:16], mrand.Uint64())
	}
	b[6] = 0x40 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return formatUUID(b)
}

// splitBatchID is the id of half k (0 or 1) of a split batch: UUIDv5(namespace, "<parent>/<k>").
func splitBatchID(parent string, half int) string {
	h := sha1.New() //nolint:gosec // see import
	h.Write(splitNamespace[:])
	h.Write([]byte(parent + "/" + string(rune('0'+half))))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = 0x50 | b[6]&0x0f
	b[8] = 0x80 | b[8]&0x3f
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// isUUID reports whether s is a UUID in the canonical 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
