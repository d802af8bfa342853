// Benchmark: the Go SDK against segmentio/analytics-go v3.3.0 and posthog-go v1.5.2 in one run, same events
// (~1 KB of properties), a local sink in another process: ns and allocations per Track, and the whole
// benchmark process's CPU (user + system) per event the sink received, with ratios printed at the end.
package bench

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
	posthog "github.com/posthog/posthog-go"
	analytics "github.com/segmentio/analytics-go/v3"
)

// producer is one SDK under test: track one event, then close (delivering everything tracked).
type producer interface {
	track(i int)
	close()
}

// prebuilt holds distinct events built before any timing, shared read-only by every SDK: the figures measure
// the SDKs, not the application's fmt.Sprintf (BenchmarkFloorBuildEvent reports what building one costs).
var prebuilt = func() (out [1024]struct {
	user  string
	props map[string]any
}) {
	for i := range out {
		out[i].user, out[i].props = fmt.Sprintf("user-%d", i%9973), properties(i)
	}
	return out
}()

func properties(i int) map[string]any {
	return map[string]any{
		"url":  fmt.Sprintf("https://shop.example.com/catalogue/item/%d?ref=newsletter&utm_campaign=winter", i),
		"path": fmt.Sprintf("/catalogue/item/%d", i), "referrer": "https://www.example.org/search?q=warm+boots",
		"title":      "Warm winter boots, waterproof, lined - Example Shop",
		"user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
		"user_id":    fmt.Sprintf("user-%d", i%9973), "session_id": "5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d",
		"locale": "en-GB", "load_time_ms": 123.25, "viewport_width": 1280, "viewport_height": 720,
		"device_pixel_ratio": 1.5, "experiment_ids": []string{"exp-checkout-2", "exp-search-7", "exp-banner-1"},
		"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "winter-sale-2026",
		"cart_items": 3, "cart_value": 249.97, "currency": "GBP", "logged_in": true,
		"description": strings.Repeat("Comfortable boots for cold and wet days. ", 8),
	}
}

type hwProducer struct {
	c   *headwater.Client
	dir string // a spool directory to remove after close
}

func (p hwProducer) track(i int) {
	if err := p.c.Track("page_view", prebuilt[i%len(prebuilt)].props); err != nil {
		panic(err)
	}
}
func (p hwProducer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.c.Close(ctx); err != nil {
		panic(err)
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

func newHeadwater(url string) producer { return newHeadwaterQueue(url, 10_000) }

// newHeadwaterQueue: defaults, but Track waits for room instead of refusing (the peers' Enqueue blocks on a
// full 100-slot channel); with a queue as large as the run, ns/op is the cost of Track alone.
func newHeadwaterQueue(url string, queue int) producer {
	c, err := headwater.New(url, "wk_bench", headwater.WithQueue(queue, "block"), headwater.WithBlockTimeout(time.Minute))
	if err != nil {
		panic(err)
	}
	return hwProducer{c: c}
}

type segmentProducer struct{ c analytics.Client }

func (p segmentProducer) track(i int) {
	e := &prebuilt[i%len(prebuilt)]
	_ = p.c.Enqueue(analytics.Track{UserId: e.user, Event: "page_view", Properties: e.props})
}
func (p segmentProducer) close() { _ = p.c.Close() }

func newSegment(url string) producer {
	c, err := analytics.NewWithConfig("wk_bench", analytics.Config{Endpoint: url, Logger: analytics.StdLogger(log.New(io.Discard, "", 0))})
	if err != nil {
		panic(err)
	}
	return segmentProducer{c}
}

type posthogProducer struct{ c posthog.Client }

func (p posthogProducer) track(i int) {
	e := &prebuilt[i%len(prebuilt)]
	_ = p.c.Enqueue(posthog.Capture{DistinctId: e.user, Event: "page_view", Properties: e.props})
}
func (p posthogProducer) close() { _ = p.c.Close() }

func newPosthog(url string) producer {
	c, err := posthog.NewWithConfig("wk_bench", posthog.Config{Endpoint: url, Logger: posthog.StdLogger(log.New(io.Discard, "", 0))})
	if err != nil {
		panic(err)
	}
	return posthogProducer{c}
}

var sdks = []struct {
	name string
	make func(url string) producer
}{
	{"headwater-go", newHeadwater},
	{"analytics-go-v3.3.0", newSegment},
	{"posthog-go-v1.5.2", newPosthog},
	{"headwater-go-queue-1M", func(url string) producer { return newHeadwaterQueue(url, 1<<20) }},
	{"headwater-go-spool", newHeadwaterSpool},
}

// newHeadwaterSpool: as newHeadwater, with a spool directory (every batch file fsynced before it is sent).
func newHeadwaterSpool(url string) producer {
	dir, err := os.MkdirTemp("", "hw-bench-spool-")
	if err != nil {
		panic(err)
	}
	c, err := headwater.New(url, "wk_bench", headwater.WithQueue(10_000, "block"), headwater.WithBlockTimeout(time.Minute),
		headwater.WithSpoolDir(dir))
	if err != nil {
		panic(err)
	}
	return hwProducer{c: c, dir: dir}
}

// result is one SDK's figures, kept for the ratio table printed after the run.
type result struct {
	nsPerTrack, cpuPerEvent float64 // wall ns per Track, process CPU µs per delivered event
	events, delivered       int64
}

var results = map[string]result{}

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's CPU (the goroutine is locked to its thread).
const rusageThread = 1

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTrack: ns/op (wall) and allocs/op are per Track call; cpu-µs/track is the CPU of the goroutine that
// calls Track (locked to its OS thread, so no other goroutine's work is counted); cpu-µs/event is the whole
// process's CPU from the first Track to the end of Close, divided by the events the sink received.
func BenchmarkTrack(b *testing.B) {
	s := startSink(b)
	defer s.stop()
	for _, sdk := range sdks {
		b.Run(sdk.name, func(b *testing.B) {
			before := s.count(b)
			p := sdk.make(s.url)
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0, thread0, t0 := cpuTime(syscall.RUSAGE_SELF), cpuTime(rusageThread), time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.track(i)
			}
			b.StopTimer()
			elapsed, thread := time.Since(t0), cpuTime(rusageThread)-thread0
			p.close()
			cpu := cpuTime(syscall.RUSAGE_SELF) - cpu0
			delivered := s.count(b) - before
			per := float64(cpu.Microseconds()) / float64(max(delivered, 1))
			b.ReportMetric(per, "cpu-µs/event")
			b.ReportMetric(float64(thread.Nanoseconds())/1e3/float64(b.N), "cpu-µs/track")
			b.ReportMetric(float64(delivered)/float64(b.N)*100, "delivered-%")
			results[sdk.name] = result{float64(elapsed.Nanoseconds()) / float64(b.N), per, int64(b.N), delivered}
		})
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("HW_BENCH_SINK") == "1" {
		serveSink()
		return
	}
	code := m.Run()
	if len(results) > 0 {
		printRatios()
	}
	os.Exit(code)
}

func printRatios() {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	hw := results["headwater-go"]
	fmt.Printf("\n%-22s %12s %14s %10s %22s\n", "sdk", "events", "cpu µs/event", "delivered", "headwater cpu / this")
	for _, n := range names {
		r := results[n]
		fmt.Printf("%-22s %12d %14.2f %10d %22.2f\n", n, r.events, r.cpuPerEvent, r.delivered, hw.cpuPerEvent/r.cpuPerEvent)
	}
}
