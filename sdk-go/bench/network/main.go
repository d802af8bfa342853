// Command network: the Go SDK on a real network beside analytics-go v3.3.0 and posthog-go v1.5.2 (throughput,
// connections, CPU), and delivery across an outage. Not a test: it prints figures.
//
// One local sink (this program re-run as HW_NET_ROLE=sink, its own process) answers every batch after a delay
// standing in for the round trip to a distant gateway (1, 50 and 100 ms by default; requests are delayed
// concurrently, as a network would), counts distinct events and the TCP connections it was sent on, and can
// answer 503 (no Retry-After) for a while. Each producer is a fresh process (HW_NET_ROLE=produce):
//
//  1. throughput: per latency and SDK, -events ~1 KB events are tracked, then the client is closed as its docs
//     say; the clock stops when the sink has counted every event. Figures: events/s, connections, the whole
//     producer process's CPU (user + system, start-up included) per delivered event, and the peers' CPU per event
//     over headwater's. Defaults everywhere, except that headwater's queue holds the whole run (the peers'
//     Enqueue blocks instead of dropping).
//  2. outage: -tries times, the sink goes down for -outage, headwater tracks -outage-events at once and calls
//     Close with -close; a try counts if the sink received every event and Close returned nil.
//
// Usage (from sdk-go/bench): go run ./network [-events 60000] [-latencies 1,50,100] [-tries 10]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
	"github.com/klauspost/compress/zstd"
	posthog "github.com/posthog/posthog-go"
	analytics "github.com/segmentio/analytics-go/v3"
)

func main() {
	switch os.Getenv("HW_NET_ROLE") {
	case "sink":
		serveSink()
		return
	case "produce":
		produce(os.Args[1], os.Args[2], atoi(os.Args[3]))
		return
	case "outage":
		outage(os.Args[1], atoi(os.Args[2]), atoi(os.Args[3]))
		return
	}
	events := flag.Int("events", 60_000, "events per throughput run")
	latencies := flag.String("latencies", "1,50,100", "sink delays in ms")
	sdks := flag.String("sdks", "headwater,segment,posthog", "SDKs to run")
	tries := flag.Int("tries", 10, "outage tries")
	down := flag.Duration("outage", 10*time.Second, "outage length")
	outageEvents := flag.Int("outage-events", 2_000, "events tracked during the outage")
	closeBound := flag.Duration("close", 30*time.Second, "the bound given to Close after the outage")
	flag.Parse()
	report := map[string]any{"bench": "sdk_network_go", "events": *events, "load_avg_before": loadAvg()}
	sink, url := startSink()
	defer func() { _ = sink.Process.Kill(); _ = sink.Wait() }()
	var results []map[string]any
	for _, lat := range strings.Split(*latencies, ",") {
		for _, sdk := range strings.Split(*sdks, ",") {
			get(url + "/config?delay_ms=" + lat)
			r := child("produce", sdk, url, strconv.Itoa(*events))
			if r != nil {
				r["latency_ms"] = atoi(lat)
				results = append(results, r)
			}
		}
	}
	var outages []map[string]any
	for i := 0; i < *tries; i++ {
		get(fmt.Sprintf("%s/config?delay_ms=1&down_s=%f", url, down.Seconds()))
		r := child("outage", url, strconv.Itoa(*outageEvents), strconv.Itoa(int(closeBound.Seconds())))
		if r == nil {
			r = map[string]any{"delivered": 0.0, "close_ok": false}
		}
		outages = append(outages, r)
	}
	report["load_avg_after"] = loadAvg()
	report["results"], report["outage"] = results, map[string]any{"outage_s": down.Seconds(),
		"events": *outageEvents, "close_s": closeBound.Seconds(), "tries": outages}
	printReport(report, results, outages, *outageEvents)
	out, _ := json.Marshal(report)
	fmt.Println(string(out))
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		log.Fatal(err)
	}
	return n
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// child runs this program in a role and returns the JSON object it printed last.
func child(role string, args ...string) map[string]any {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "HW_NET_ROLE="+role)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r map[string]any
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &r) != nil {
		log.Printf("%s %v failed: %v", role, args, err)
		return nil
	}
	return r
}

// --- the sink ---------------------------------------------------------------------------------------------

type sinkState struct {
	mu        sync.Mutex
	ids       map[string]bool
	received  int
	conns     map[string]bool
	delay     time.Duration
	downUntil time.Time
}

func serveSink() {
	s := &sinkState{ids: map[string]bool{}, conns: map[string]bool{}}
	dec, _ := zstd.NewReader(nil)
	mux := http.NewServeMux()
	mux.HandleFunc("/config", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("delay_ms"))
		down, _ := strconv.ParseFloat(r.URL.Query().Get("down_s"), 64)
		s.mu.Lock()
		s.ids, s.received, s.conns = map[string]bool{}, 0, map[string]bool{}
		s.delay, s.downUntil = time.Duration(ms)*time.Millisecond, time.Now().Add(time.Duration(down*float64(time.Second)))
		s.mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]int{"events": len(s.ids), "received": s.received, "connections": len(s.conns)})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.conns[r.RemoteAddr] = true
		delay, down := s.delay, time.Now().Before(s.downUntil)
		s.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"code":"overloaded","message":"down"}`)
			return
		}
		if r.Header.Get("Content-Encoding") == "zstd" {
			body, _ = dec.DecodeAll(body, nil)
		}
		var doc struct {
			Events []map[string]any `json:"events"` // headwater
			Batch  []map[string]any `json:"batch"`  // analytics-go, posthog-go
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			http.Error(w, `{"code":"invalid_json","message":"bad body"}`, http.StatusBadRequest)
			return
		}
		items := append(doc.Events, doc.Batch...)
		s.mu.Lock()
		for _, e := range items {
			id := fmt.Sprint(e["event_id"], e["messageId"], e["uuid"])
			s.ids[id] = true
		}
		s.received += len(items)
		s.mu.Unlock()
		fmt.Fprintf(w, `{"accepted":%d,"rejected":[]}`, len(items))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	_ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

func startSink() (*exec.Cmd, string) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "HW_NET_ROLE=sink")
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		log.Fatalf("sink did not start: %q %v", line, err)
	}
	return cmd, "http://127.0.0.1:" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
}

func get(url string) map[string]any {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// waitFor polls the sink until it counted n distinct events or timeout passed; its stats.
func waitFor(url string, n int, timeout time.Duration) map[string]any {
	deadline := time.Now().Add(timeout)
	for {
		st := get(url + "/stats")
		if int(st["events"].(float64)) >= n || time.Now().After(deadline) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// --- the producers ----------------------------------------------------------------------------------------

func properties(i int) map[string]any {
	return map[string]any{
		"url":  fmt.Sprintf("https://shop.example.com/catalogue/item/%d?ref=newsletter&utm_campaign=winter", i),
		"path": fmt.Sprintf("/catalogue/item/%d", i), "referrer": "https://www.example.org/search?q=warm+boots",
		"title":      "Warm winter boots, waterproof, lined - Example Shop",
		"user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
		"user_id":    fmt.Sprintf("user-%d", i%9973), "session_id": "5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d",
		"description": strings.Repeat("Comfortable boots for cold and wet days. ", 16),
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func emit(v map[string]any) {
	out, _ := json.Marshal(v)
	fmt.Println(string(out))
}

func produce(sdk, url string, n int) {
	quiet := log.New(io.Discard, "", 0)
	var track func(i int)
	var closeIt func()
	switch sdk {
	case "headwater":
		c, err := headwater.New(url, "wk_bench", headwater.WithQueue(n, headwater.QueueDropNewest),
			headwater.WithOnError(func(error) {}))
		if err != nil {
			log.Fatal(err)
		}
		track = func(i int) { _ = c.Track("page_view", properties(i)) }
		closeIt = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			_ = c.Close(ctx)
		}
	case "segment":
		c, err := analytics.NewWithConfig("wk_bench", analytics.Config{Endpoint: url, Logger: analytics.StdLogger(quiet)})
		if err != nil {
			log.Fatal(err)
		}
		track = func(i int) {
			_ = c.Enqueue(analytics.Track{UserId: fmt.Sprintf("user-%d", i%9973), Event: "page_view", Properties: properties(i)})
		}
		closeIt = func() { _ = c.Close() }
	case "posthog":
		c, err := posthog.NewWithConfig("wk_bench", posthog.Config{Endpoint: url, Logger: posthog.StdLogger(quiet)})
		if err != nil {
			log.Fatal(err)
		}
		track = func(i int) {
			// posthog-go v1.5.2 sends no uuid unless given one; the sink counts distinct ids.
			_ = c.Enqueue(posthog.Capture{Uuid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
				DistinctId: fmt.Sprintf("user-%d", i%9973), Event: "page_view", Properties: properties(i)})
		}
		closeIt = func() { _ = c.Close() }
	default:
		log.Fatalf("unknown sdk %s", sdk)
	}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		track(i)
	}
	closeIt()
	st := waitFor(url, n, 10*time.Minute)
	wall, cpu := time.Since(t0), cpuTime()
	delivered := st["events"].(float64)
	emit(map[string]any{"sdk": sdk, "events": n, "delivered": delivered, "seconds": wall.Seconds(),
		"events_per_s": delivered / wall.Seconds(), "connections": st["connections"],
		"cpu_us_per_event": float64(cpu.Microseconds()) / max(delivered, 1)})
}

func outage(url string, n, closeS int) {
	c, err := headwater.New(url, "wk_bench", headwater.WithOnError(func(error) {}))
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < n; i++ {
		_ = c.Track("page_view", properties(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(closeS)*time.Second)
	defer cancel()
	t0 := time.Now()
	err = c.Close(ctx)
	took := time.Since(t0)
	st := waitFor(url, n, 2*time.Second)
	emit(map[string]any{"close_s": took.Seconds(), "close_ok": err == nil, "delivered": st["events"]})
}

func printReport(report map[string]any, results, outages []map[string]any, outageEvents int) {
	fmt.Printf("load average before: %s; after: %s\n", report["load_avg_before"], report["load_avg_after"])
	fmt.Printf("%8s  %-10s %10s %10s %6s %13s %20s\n", "latency", "sdk", "delivered", "events/s", "conns", "CPU µs/event", "CPU / headwater's")
	hw := map[float64]float64{}
	for _, r := range results {
		if r["sdk"] == "headwater" {
			hw[float64(r["latency_ms"].(int))] = r["cpu_us_per_event"].(float64)
		}
	}
	for _, r := range results {
		lat := r["latency_ms"].(int)
		ratio := r["cpu_us_per_event"].(float64) / hw[float64(lat)]
		fmt.Printf("%6dms  %-10s %10.0f %10.0f %6.0f %13.1f %20.2f\n", lat, r["sdk"], r["delivered"], r["events_per_s"],
			r["connections"], r["cpu_us_per_event"], ratio)
	}
	full, minS, maxS := 0, 0.0, 0.0
	var delivered []string
	for _, o := range outages {
		d, _ := o["delivered"].(float64)
		ok, _ := o["close_ok"].(bool)
		if int(d) == outageEvents && ok {
			full++
		}
		if s, isNum := o["close_s"].(float64); isNum {
			if minS == 0 || s < minS {
				minS = s
			}
			maxS = max(maxS, s)
		}
		delivered = append(delivered, strconv.Itoa(int(d)))
	}
	o := report["outage"].(map[string]any)
	fmt.Printf("outage: %d tracked in a %.0f s outage, close given %.0f s: all delivered and Close nil in %d of %d tries; "+
		"delivered per try [%s]; close took %.1f-%.1f s\n", outageEvents, o["outage_s"], o["close_s"], full, len(outages),
		strings.Join(delivered, ", "), minS, maxS)
}
