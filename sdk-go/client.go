// The public Client: construction from options or the environment, Track, Flush, Close and Metrics.
package headwater

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Client sends events to a Headwater gateway; every method is safe for concurrent use.
type Client struct {
	cfg      Config
	p        *pipeline
	closed   atomic.Bool
	once     sync.Once
	result   error
	reporter *reporter // the default OnError; nil when the application set one
}

// Tracked is what Track assigned to an accepted event.
type Tracked struct {
	Seq     int64
	EventID string
}

// New builds a client for endpoint and writeKey with the defaults changed by opts (the environment is not read).
func New(endpoint, writeKey string, opts ...Option) (*Client, error) {
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.WriteKey = endpoint, writeKey
	for _, opt := range opts {
		opt(&cfg)
	}
	return NewFromConfig(cfg)
}

// NewFromEnv builds a client from HEADWATER_* variables (see the README), then opts.
func NewFromEnv(opts ...Option) (*Client, error) {
	cfg, err := ConfigFromEnv(nil)
	if err != nil {
		return nil, err
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	return NewFromConfig(cfg)
}

// NewFromConfig builds a client from a complete Config (start from DefaultConfig or ConfigFromEnv).
func NewFromConfig(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Context) > 0 {
		cfg.Context = copyMap(cfg.Context)
	}
	c := &Client{}
	if cfg.OnError == nil {
		c.reporter = newReporter()
		cfg.OnError = c.reporter.report
	}
	if onDelivery := cfg.OnDelivery; onDelivery != nil {
		cfg.OnDelivery = func(r DeliveryReport) { callSafely(func() { onDelivery(r) }) }
	}
	c.cfg = cfg
	p, err := newPipeline(&c.cfg)
	if err != nil {
		return nil, err
	}
	c.p = p
	return c, nil
}

// ProducerID is this producer's id: persisted in the spool directory, else new for each client.
func (c *Client) ProducerID() string { return c.p.shared.producerID }

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// Track queues one event and returns at once (under QueuePolicy "block" it may wait up to BlockTimeout).
//
// It returns an *InvalidEventError for bad arguments, and an *EventsDroppedError when the event is refused:
// errors.Is(err, ErrQueueFull) for a full queue, errors.Is(err, ErrClosed) after Close. Network problems are
// never returned: they are retried, counted in Metrics and reported to OnError.
func (c *Client) Track(eventType string, properties map[string]any, opts ...TrackOption) error {
	_, err := c.TrackEvent(eventType, properties, opts...)
	return err
}

// TrackEvent is Track that also returns the seq and event id the event was given.
func (c *Client) TrackEvent(eventType string, properties map[string]any, opts ...TrackOption) (Tracked, error) {
	p := c.p
	e, eventID, err := makeEvent(p.shared, eventType, properties, opts)
	if err != nil {
		return Tracked{}, err
	}
	if size := e.size(); size > c.cfg.MaxEventBytes || !p.batcher.fitsAlone(size) {
		p.counters.settle(0, 0, ReasonEventTooLarge, 1, false)
		return Tracked{}, &InvalidEventError{fmt.Sprintf("event of %d bytes is over MaxEventBytes (%d)", size, c.cfg.MaxEventBytes)}
	}
	if c.closed.Load() {
		return Tracked{}, p.dropUnqueued(ReasonClientClosed)
	}
	result, seq := p.queue.put(e)
	if result == putFull && c.cfg.QueuePolicy == "spill" && !c.closed.Load() {
		p.spill()
		result, seq = p.queue.put(e)
	}
	switch {
	case result == putEvicted:
		p.report(&EventsDroppedError{Reason: ReasonQueueFullOldest, Count: 1})
		p.counters.settle(0, 0, ReasonQueueFullOldest, 1, true)
	case result == putFull && c.closed.Load():
		return Tracked{}, p.dropUnqueued(ReasonClientClosed)
	case result == putFull && c.cfg.QueuePolicy == "block":
		return Tracked{}, p.dropUnqueued(ReasonQueueFullTimeout)
	case result == putFull:
		return Tracked{}, p.dropUnqueued(ReasonQueueFull)
	}
	return Tracked{Seq: seq, EventID: eventID}, nil
}

// Flush sends everything accepted so far and waits until each event is acknowledged, rejected or dropped. It
// returns an error wrapping ctx.Err() when ctx ends first, and an error wrapping ErrDropped when an accepted event
// was rejected or dropped since the previous Flush (or since the start): nil means everything flushed was
// accepted by the gateway.
func (c *Client) Flush(ctx context.Context) error {
	settled := c.p.flush(ctx)
	lost := c.p.counters.lossSinceLastCheck()
	switch {
	case !settled:
		return fmt.Errorf("headwater: flush: events still pending: %w", ctx.Err())
	case lost > 0:
		return fmt.Errorf("headwater: flush: %d event(s) rejected or dropped since the previous flush: %w", lost, ErrDropped)
	}
	return nil
}

// Close flushes within ctx's deadline (ExitTimeout when ctx has none), then stops; later calls return the
// first result. It returns nil only if every accepted event was acknowledged. With a spool, what was not
// delivered stays on disk for the next client on the directory; without one it is counted as closed_unsent.
func (c *Client) Close(ctx context.Context) error {
	c.once.Do(func() {
		c.closed.Store(true)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.cfg.ExitTimeout)
			defer cancel()
		}
		settled := c.p.shutdown(ctx)
		if c.reporter != nil {
			c.reporter.close()
		}
		_, accepted, _ := c.p.queue.stats() // after shutdown: includes a Track that raced with Close
		m := c.p.counters.snapshot()
		switch target := accepted + c.p.recovered; {
		case !settled:
			c.result = fmt.Errorf("headwater: close: not every event was delivered in time: %w", ctx.Err())
		case m.Acknowledged < target:
			c.result = fmt.Errorf("headwater: close: %d of %d events not acknowledged (rejected or dropped): %w",
				target-m.Acknowledged, target, ErrDropped)
		}
	})
	return c.result
}

// Metrics returns a snapshot of the delivery counters.
func (c *Client) Metrics() Metrics { return c.p.metrics() }

func callSafely(f func()) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("headwater: a callback panicked", "panic", r)
		}
	}()
	f()
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
