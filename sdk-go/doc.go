// Package headwater sends events to a Headwater gateway: batched, zstd-compressed, retried, optionally
// spooled to disk, from any number of goroutines.
//
//	client, err := headwater.New("https://ingest.example.com", writeKey, headwater.WithSpoolDir("/var/lib/app/hw"))
//	if err != nil { ... }
//	defer client.Close(context.Background()) // flushes for at most ExitTimeout (5 s) unless ctx says otherwise
//	err = client.Track("page_view", map[string]any{"url": "https://example.com/"})
//
// Track never waits for the network: it checks the event, gives it its sequence number and queues it. Batches
// are sealed by count, bytes or linger time, stored (in memory or in a crash-safe spool directory) and sent by
// MaxInFlight goroutines with retries, full jitter and Retry-After under a per-batch deadline. Counters are in
// Metrics; per-batch outcomes go to the OnDelivery callback, problems to OnError. See README.md.
package headwater
