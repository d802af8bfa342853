// Command headwater-produce tracks page_view events from several goroutines with a client configured from
// HEADWATER_* variables, then prints the client's figures as one JSON line (used by tests/sdk_go and demos).
//
//	headwater-produce -events 10000 -goroutines 8 -run run-1            track, close, print
//	headwater-produce -events 500 -hold                                  track, wait until every event is in
//	                                                                     the spool, print, then wait to be killed
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
)

func pageView(i int, run string) map[string]any {
	return map[string]any{
		"url": fmt.Sprintf("https://shop.example.com/p/%d", i), "path": fmt.Sprintf("/p/%d", i), "referrer": nil,
		"title": run, "user_agent": "headwater-go-test", "user_id": fmt.Sprintf("u-%d", i%97), "session_id": run,
		"viewport": map[string]any{"width": 1280, "height": 720, "device_pixel_ratio": 1.0}, "locale": "en-GB",
		"utm": map[string]any{}, "load_time_ms": 12.5, "experiment_ids": []string{},
	}
}

func main() {
	events := flag.Int("events", 10_000, "events to track")
	goroutines := flag.Int("goroutines", 8, "goroutines tracking concurrently")
	run := flag.String("run", "run", "a marker put in every event's title and session_id")
	hold := flag.Bool("hold", false, "after tracking, wait until every event is spooled, print, and wait to be killed")
	closeTimeout := flag.Duration("close-timeout", 5*time.Minute, "bound of the final Close")
	flag.Parse()

	var mu sync.Mutex
	errs := []string{}
	client, err := headwater.NewFromEnv(headwater.WithOnError(func(err error) {
		mu.Lock()
		if len(errs) < 5 {
			errs = append(errs, err.Error())
		}
		mu.Unlock()
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var wg sync.WaitGroup
	refused := make(chan error, *goroutines)
	for g := 0; g < *goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < *events; i += *goroutines {
				if err := client.Track("page_view", pageView(i, *run)); err != nil {
					refused <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(refused)
	for err := range refused {
		fmt.Fprintln(os.Stderr, "track refused an event:", err)
		os.Exit(3)
	}
	if *hold {
		for m := client.Metrics(); m.PendingEvents+int(m.Acknowledged) < *events; m = client.Metrics() {
			time.Sleep(20 * time.Millisecond)
		}
		report(client, nil, errs, &mu)
		select {} // wait for SIGKILL
	}
	ctx, cancel := context.WithTimeout(context.Background(), *closeTimeout)
	defer cancel()
	report(client, client.Close(ctx), errs, &mu)
}

func report(client *headwater.Client, closeErr error, errs []string, mu *sync.Mutex) {
	m := client.Metrics()
	mu.Lock()
	defer mu.Unlock()
	out := map[string]any{"producer_id": client.ProducerID(), "enqueued": m.Enqueued, "acknowledged": m.Acknowledged,
		"rejected": m.Rejected, "dropped": m.Dropped, "retries": m.Retries, "pending_events": m.PendingEvents,
		"errors": errs, "close_error": nil}
	if closeErr != nil {
		out["close_error"] = closeErr.Error()
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
