// Command headwater-tail prints a stream's records as JSON lines, resuming after disconnects (Subscribe).
//
//	headwater-tail <endpoint> <read key> <stream> [count] [filter JSON]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: headwater-tail <endpoint> <read key> <stream> [count] [filter JSON]")
		os.Exit(2)
	}
	count := -1
	if len(os.Args) > 4 {
		count, _ = strconv.Atoi(os.Args[4])
	}
	opts := []headwater.SubscribeOption{headwater.WithMaxBackoff(2 * time.Second)}
	if len(os.Args) > 5 {
		var filter map[string]any
		if err := json.Unmarshal([]byte(os.Args[5]), &filter); err != nil {
			fmt.Fprintln(os.Stderr, "headwater-tail: filter:", err)
			os.Exit(2)
		}
		opts = append(opts, headwater.WithFilter(filter))
	}
	sub := headwater.Subscribe(os.Args[1], os.Args[2], os.Args[3], opts...)
	defer sub.Close()
	out := json.NewEncoder(os.Stdout)
	for n := 0; count < 0 || n < count; n++ {
		rec, err := sub.Next(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "headwater-tail:", err)
			os.Exit(1)
		}
		_ = out.Encode(map[string]any{"id": rec.ID, "partition": rec.Partition, "offset": rec.Offset,
			"event_id": rec.Headers["event_id"], "reconnects": sub.Reconnects, "value": rec.Value})
	}
}
