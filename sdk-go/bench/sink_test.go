// The local sink of the benchmark: a separate process (this test binary re-run with HW_BENCH_SINK=1) that
// answers every batch 200 and counts the events it received, so the benchmark process's CPU excludes it.
package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// serveSink runs the sink on a free port, prints "listening <port>" and serves until killed.
func serveSink() {
	var count atomic.Int64
	dec, _ := zstd.NewReader(nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, count.Load()) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Encoding") == "zstd" {
			body, _ = dec.DecodeAll(body, nil)
		}
		var doc struct {
			Events []json.RawMessage `json:"events"` // headwater
			Batch  []json.RawMessage `json:"batch"`  // analytics-go, posthog-go
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			http.Error(w, `{"code":"invalid_json","message":"bad body"}`, http.StatusBadRequest)
			return
		}
		n := len(doc.Events) + len(doc.Batch)
		count.Add(int64(n))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"accepted":%d,"rejected":[]}`, n)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	_ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// sink is a running sink process.
type sink struct {
	cmd *exec.Cmd
	url string
}

func startSink(tb testing.TB) *sink {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HW_BENCH_SINK=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		tb.Fatalf("sink did not start: %q %v", line, err)
	}
	return &sink{cmd: cmd, url: "http://127.0.0.1:" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))}
}

func (s *sink) count(tb testing.TB) int64 {
	resp, err := http.Get(s.url + "/count")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var n int64
	_, _ = fmt.Fscan(resp.Body, &n)
	return n
}

func (s *sink) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
