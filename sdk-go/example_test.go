// A runnable example of the public API against a local stand-in for the gateway.
package headwater_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
)

func Example() {
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // a real gateway decompresses, validates and commits to Kafka
		_, _ = w.Write([]byte(`{"accepted":3,"rejected":[]}`))
	}))
	defer gateway.Close()

	client, err := headwater.New(gateway.URL, "my-write-key", headwater.WithNodeID("web-17"),
		headwater.WithOnError(func(err error) { fmt.Println("problem:", err) }))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		tracked, err := client.TrackEvent("page_view", map[string]any{"url": fmt.Sprintf("/p/%d", i)},
			headwater.WithPartitionKey("user-123"))
		if err != nil {
			panic(err)
		}
		fmt.Println("seq", tracked.Seq)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("acknowledged", client.Metrics().Acknowledged)
	// Output:
	// seq 0
	// seq 1
	// seq 2
	// acknowledged 3
}

// ExampleMemoryTransport: in your own tests, a fake transport records what the client would send.
func ExampleMemoryTransport() {
	fake := &headwater.MemoryTransport{} // answers 200, every event accepted
	client, err := headwater.New("http://gateway.test", "test-key", headwater.WithTransport(fake))
	if err != nil {
		panic(err)
	}
	_ = client.Track("server_metric", map[string]any{"host": "h", "service": "s", "metric": "m",
		"kind": "counter", "value": 1.0, "unit": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println(len(fake.Requests()), fake.Requests()[0].URL)
	// Output: 1 http://gateway.test/v1/batch
}
