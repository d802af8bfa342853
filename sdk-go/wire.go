// The wire format of protocol.md: the JSON batch body, compression, and parsing the gateway's answers.
package headwater

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

const jsonContentType = "application/json"

var sdkJSON = `{"name":"` + SDKName + `","version":"` + Version + `"}`

// jsonBody is the batch body (protocol.md section 2), joining the already-encoded envelopes.
func jsonBody(dst []byte, b *Batch, sentAt int64) []byte {
	dst = append(dst, `{"batch_id":"`...)
	dst = append(dst, b.ID...)
	dst = append(dst, `","sent_at":`...)
	dst = strconv.AppendInt(dst, sentAt, 10)
	dst = append(dst, `,"sdk":`...)
	dst = append(dst, sdkJSON...)
	dst = append(dst, `,"events":[`...)
	for i, e := range b.Events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, "]}"...)
}

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	gzipPool = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, 6); return w }}
)

// sharedZstd is one long-lived encoder: EncodeAll is safe for concurrent use.
func sharedZstd() *zstd.Encoder {
	zstdOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false)) // constant options: cannot fail
	})
	return zstdEnc
}

// compress encodes body with encoding (zstd, gzip or identity), appending to dst.
func compress(dst, body []byte, encoding Compression) []byte {
	switch encoding {
	case "zstd":
		return sharedZstd().EncodeAll(body, dst)
	case "gzip":
		buf := bytes.NewBuffer(dst)
		w := gzipPool.Get().(*gzip.Writer)
		w.Reset(buf)
		_, _ = w.Write(body) // writes to a bytes.Buffer cannot fail
		_ = w.Close()
		gzipPool.Put(w)
		return buf.Bytes()
	}
	return append(dst, body...)
}

// rejection is one entry of a 200/422 answer's "rejected" list.
type rejection struct {
	Index   int    `json:"index"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// batchAnswer is a 200/422 body.
type batchAnswer struct {
	Accepted int         `json:"accepted"`
	Rejected []rejection `json:"rejected"`
}

// parseAnswer parses a 200/422 body; a malformed one counts as every event accepted, none rejected.
func parseAnswer(body []byte) batchAnswer {
	var a batchAnswer
	if json.Unmarshal(body, &a) != nil {
		return batchAnswer{}
	}
	return a
}

// parseError returns (code, message) of an error body {code, message}; code is "" for other bodies.
func parseError(body []byte) (string, string) {
	var e struct {
		Code    any `json:"code"`
		Message any `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", strings.ToValidUTF8(string(body[:min(len(body), 200)]), "?")
	}
	code, _ := e.Code.(string)
	msg, _ := e.Message.(string)
	return code, msg
}

// parseRetryAfter returns the seconds of a Retry-After header (delay-seconds, decimal, or HTTP-date), or -1.
func parseRetryAfter(value string, now time.Time) float64 {
	value = strings.TrimSpace(value)
	if value == "" {
		return -1
	}
	if s, err := strconv.ParseFloat(value, 64); err == nil {
		if s != s || s < 0 {
			return 0
		}
		return s
	}
	if t, err := http.ParseTime(value); err == nil {
		return max(0, t.Sub(now).Seconds())
	}
	return -1
}
