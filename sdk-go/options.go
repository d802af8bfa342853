// Functional options for New and NewFromEnv, and the per-event options of Track.
package headwater

import "time"

// Option changes one field of the Config a client is built from.
type Option func(*Config)

// WithConfig applies an arbitrary change to the Config (for options without their own With function).
func WithConfig(f func(*Config)) Option { return Option(f) }

// WithEndpoints gives several endpoints in order, the primary first: the client fails over to the next one and back
// (protocol.md §9). New's endpoint may then be "" (or the first of urls).
func WithEndpoints(urls ...string) Option {
	return func(c *Config) { c.Endpoints = append([]string(nil), urls...) }
}

// WithFailover sets how long (after) and for how many consecutive attempts (failures) an endpoint fails before
// the next one is used, and how often earlier endpoints are probed to fail back (probe).
func WithFailover(after time.Duration, failures int, probe time.Duration) Option {
	return func(c *Config) { c.FailoverAfter, c.FailoverAfterFailures, c.FailbackProbe = after, failures, probe }
}

// WithSpoolDir keeps pending batches in a crash-safe spool directory (one client per directory).
func WithSpoolDir(dir string) Option { return func(c *Config) { c.SpoolDir = dir } }

// WithAvro sends the Avro fast path (protocol.md section 3) with schemas from the registry at registryURL.
func WithAvro(registryURL string) Option {
	return func(c *Config) { c.WireFormat, c.RegistryURL = WireAvro, registryURL }
}

// WithCompression sets the body encoding: "zstd" (default), "gzip" or "identity".
func WithCompression(enc Compression) Option { return func(c *Config) { c.Compression = enc } }

// WithBatching sets the events per batch (<= 40), the bytes per batch body and the linger time.
func WithBatching(maxEvents, maxBytes int, linger time.Duration) Option {
	return func(c *Config) { c.MaxBatchEvents, c.MaxBatchBytes, c.Linger = maxEvents, maxBytes, linger }
}

// WithLinger sets how long a non-full batch waits for more events.
func WithLinger(d time.Duration) Option { return func(c *Config) { c.Linger = d } }

// WithMaxEventBytes sets the largest encoded event Track accepts.
func WithMaxEventBytes(n int) Option { return func(c *Config) { c.MaxEventBytes = n } }

// WithQueue sets the in-memory queue's bound and its full-queue policy (drop_newest, drop_oldest, block, spill).
func WithQueue(maxEvents int, policy QueuePolicy) Option {
	return func(c *Config) { c.MaxQueueEvents, c.QueuePolicy = maxEvents, policy }
}

// WithBlockTimeout sets how long Track waits for room under the block policy.
func WithBlockTimeout(d time.Duration) Option { return func(c *Config) { c.BlockTimeout = d } }

// WithMaxPendingBatches bounds the batches kept in memory (without a spool) until acknowledged.
func WithMaxPendingBatches(n int) Option { return func(c *Config) { c.MaxPendingBatches = n } }

// WithSpoolLimits sets the spool's byte bound, its overflow policy and its fsync policy.
func WithSpoolLimits(maxBytes int64, overflow SpoolOverflow, fsync SpoolFsync) Option {
	return func(c *Config) { c.SpoolMaxBytes, c.SpoolOverflow, c.SpoolFsync = maxBytes, overflow, fsync }
}

// WithRequestTimeout bounds one HTTP request.
func WithRequestTimeout(d time.Duration) Option { return func(c *Config) { c.RequestTimeout = d } }

// WithRetry sets the backoff base and cap and the overall per-batch retry deadline.
func WithRetry(base, max, deadline time.Duration) Option {
	return func(c *Config) { c.RetryBase, c.RetryMax, c.RetryDeadline = base, max, deadline }
}

// WithConnectionMaxAge recycles connections after this age (+-10 % jitter).
func WithConnectionMaxAge(d time.Duration) Option { return func(c *Config) { c.ConnectionMaxAge = d } }

// WithExitTimeout bounds Close when its context has no deadline.
func WithExitTimeout(d time.Duration) Option { return func(c *Config) { c.ExitTimeout = d } }

// WithRetryRefusedMax caps a backoff after a refused connection, and every backoff while Close waits.
func WithRetryRefusedMax(d time.Duration) Option { return func(c *Config) { c.RetryRefusedMax = d } }

// WithMaxInFlight sets the ceiling of the adaptive in-flight limit (1..64, default 16).
func WithMaxInFlight(n int) Option { return func(c *Config) { c.MaxInFlight = n } }

// WithCABundle trusts the CA certificates of a PEM file instead of the system's (https endpoints).
func WithCABundle(path string) Option { return func(c *Config) { c.CABundle = path } }

// WithNodeID sets the node_id of every event (default: the host name).
func WithNodeID(id string) Option { return func(c *Config) { c.NodeID = id } }

// WithContext sets the context map sent with every event.
func WithContext(ctx map[string]string) Option {
	return func(c *Config) {
		c.Context = make(map[string]string, len(ctx))
		for k, v := range ctx {
			c.Context[k] = v
		}
	}
}

// WithOnDelivery sets the callback called once per batch that reached a final outcome.
func WithOnDelivery(f func(DeliveryReport)) Option { return func(c *Config) { c.OnDelivery = f } }

// WithOnError sets the callback that receives every delivery problem (default: logged with log/slog).
func WithOnError(f func(error)) Option { return func(c *Config) { c.OnError = f } }

// WithTransport replaces the HTTP transport (tests, custom TLS or proxies).
func WithTransport(t Transport) Option { return func(c *Config) { c.Transport = t } }

// TrackOption sets an optional field of one event.
type TrackOption func(*trackOptions)

type trackOptions struct {
	partitionKey *string
	eventID      string
	createdAt    int64
	hasTime      bool
}

// WithPartitionKey sets the event's Kafka key (default: node_id).
func WithPartitionKey(key string) TrackOption { return func(o *trackOptions) { o.partitionKey = &key } }

// WithEventID sets the event's id (a UUID string); default a new UUIDv7.
func WithEventID(id string) TrackOption { return func(o *trackOptions) { o.eventID = id } }

// WithTimestamp sets created_at (default: now).
func WithTimestamp(t time.Time) TrackOption {
	return func(o *trackOptions) { o.createdAt, o.hasTime = t.UnixMilli(), true }
}
