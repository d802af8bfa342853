// The client's configuration: one Config struct, filled from defaults, the environment and options, validated once.
package headwater

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var urlPattern = regexp.MustCompile(`^https?://[^/\s]+`)

// GatewayMaxEvents is the gateway's limit of events per batch (protocol.md section 5).
const GatewayMaxEvents = 40

// Config holds every option of a Client; the README's option table says what each one does. Durations are
// seconds (floats) in the environment: HEADWATER_LINGER_S=0.05 is Linger 50 ms.
type Config struct {
	Endpoint              string        // HEADWATER_ENDPOINT (alias GATEWAY_URL); may be left empty when Endpoints is set
	Endpoints             []string      // HEADWATER_ENDPOINTS (comma-separated): several endpoints in order, the primary first (failover)
	FailoverAfter         time.Duration // HEADWATER_FAILOVER_AFTER_S, default 10 s: how long the active endpoint fails before the next one is used
	FailoverAfterFailures int           // HEADWATER_FAILOVER_AFTER_FAILURES, default 3: and at least this many consecutive failed attempts
	FailbackProbe         time.Duration // HEADWATER_FAILBACK_PROBE_S, default 10 s: how often earlier endpoints are probed (GET /readyz)
	WriteKey              string        // HEADWATER_WRITE_KEY
	SpoolDir              string        // HEADWATER_SPOOL_DIR; "" keeps pending batches in memory
	WireFormat            WireFormat    // HEADWATER_WIRE_FORMAT: json (default) or avro (the fast path)
	RegistryURL           string        // HEADWATER_REGISTRY_URL (alias REGISTRY_URL), needed by avro
	SchemaRefresh         time.Duration // HEADWATER_SCHEMA_REFRESH_S, default 300 s
	Compression           Compression   // HEADWATER_COMPRESSION: zstd (default), gzip, identity
	MaxBatchEvents        int           // HEADWATER_MAX_BATCH_EVENTS, 1..40, default 40
	MaxBatchBytes         int           // HEADWATER_MAX_BATCH_BYTES, default 512 KiB
	MaxEventBytes         int           // HEADWATER_MAX_EVENT_BYTES, default 64 KiB
	Linger                time.Duration // HEADWATER_LINGER_S, default 50 ms
	MaxQueueEvents        int           // HEADWATER_MAX_QUEUE_EVENTS, default 10,000
	QueuePolicy           QueuePolicy   // HEADWATER_QUEUE_POLICY: drop_newest (default), drop_oldest, block, spill
	BlockTimeout          time.Duration // HEADWATER_BLOCK_TIMEOUT_S, default 100 ms (policy block)
	MaxPendingBatches     int           // HEADWATER_MAX_PENDING_BATCHES, default 1,000 (memory store)
	SpoolMaxBytes         int64         // HEADWATER_SPOOL_MAX_BYTES, default 256 MiB
	SpoolOverflow         SpoolOverflow // HEADWATER_SPOOL_OVERFLOW: backpressure (default), drop_oldest
	SpoolFsync            SpoolFsync    // HEADWATER_SPOOL_FSYNC: always (default), never
	RequestTimeout        time.Duration // HEADWATER_REQUEST_TIMEOUT_S, default 10 s
	RetryDeadline         time.Duration // HEADWATER_RETRY_DEADLINE_S, default 300 s
	RetryBase             time.Duration // HEADWATER_RETRY_BASE_S, default 0.5 s
	RetryMax              time.Duration // HEADWATER_RETRY_MAX_S, default 30 s
	RetryRefusedMax       time.Duration // HEADWATER_RETRY_REFUSED_MAX_S, default 2 s: backoff cap after a refused connection and while Close waits
	ConnectionMaxAge      time.Duration // HEADWATER_CONNECTION_MAX_AGE_S, default 300 s (+-10 % jitter)
	ExitTimeout           time.Duration // HEADWATER_EXIT_TIMEOUT_S, default 5 s: Close's bound when ctx has no deadline
	MaxInFlight           int           // HEADWATER_MAX_IN_FLIGHT, default 16: the ceiling of the adaptive in-flight limit
	CABundle              string        // HEADWATER_CA_BUNDLE: a PEM file of CAs trusted instead of the system's (https)
	NodeID                string        // HEADWATER_NODE_ID, default the host name
	Context               map[string]string
	OnDelivery            func(DeliveryReport)
	OnError               func(error)
	Transport             Transport
}

// DefaultConfig is the configuration with every default and no endpoint or key.
func DefaultConfig() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return Config{
		WireFormat: "json", SchemaRefresh: 300 * time.Second, Compression: "zstd", MaxBatchEvents: 40, MaxBatchBytes: 512 * 1024, MaxEventBytes: 64 * 1024,
		Linger: 50 * time.Millisecond, MaxQueueEvents: 10_000, QueuePolicy: "drop_newest",
		BlockTimeout: 100 * time.Millisecond, MaxPendingBatches: 1_000, SpoolMaxBytes: 256 << 20,
		SpoolOverflow: "backpressure", SpoolFsync: "always", RequestTimeout: 10 * time.Second,
		RetryDeadline: 300 * time.Second, RetryBase: 500 * time.Millisecond, RetryMax: 30 * time.Second,
		RetryRefusedMax: 2 * time.Second, ConnectionMaxAge: 300 * time.Second, ExitTimeout: 5 * time.Second,
		MaxInFlight: 16, NodeID: host, FailoverAfter: 10 * time.Second, FailoverAfterFailures: 3,
		FailbackProbe: 10 * time.Second,
	}
}

// envField binds one environment variable (and its aliases) to a Config field.
type envField struct {
	names []string
	set   func(c *Config, raw, name string) error
}

func intVar(f func(*Config) *int) func(*Config, string, string) error {
	return func(c *Config, raw, name string) error {
		v, err := strconv.Atoi(strings.ReplaceAll(raw, "_", ""))
		if err != nil {
			return &ConfigError{fmt.Sprintf("%s=%q is not a valid int", name, raw)}
		}
		*f(c) = v
		return nil
	}
}

func durVar(f func(*Config) *time.Duration) func(*Config, string, string) error {
	return func(c *Config, raw, name string) error {
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || v != v || v < 0 || v > 1e9 {
			return &ConfigError{fmt.Sprintf("%s=%q is not a valid number of seconds", name, raw)}
		}
		*f(c) = time.Duration(v * float64(time.Second))
		return nil
	}
}

func strVar[T ~string](f func(*Config) *T) func(*Config, string, string) error {
	return func(c *Config, raw, _ string) error { *f(c) = T(raw); return nil }
}

var envFields = []envField{
	{[]string{"HEADWATER_ENDPOINT", "GATEWAY_URL"}, strVar(func(c *Config) *string { return &c.Endpoint })},
	{[]string{"HEADWATER_ENDPOINTS"}, func(c *Config, raw, _ string) error {
		c.Endpoints = nil
		for _, part := range strings.Split(raw, ",") {
			if part = strings.TrimSpace(part); part != "" {
				c.Endpoints = append(c.Endpoints, part)
			}
		}
		return nil
	}},
	{[]string{"HEADWATER_FAILOVER_AFTER_S"}, durVar(func(c *Config) *time.Duration { return &c.FailoverAfter })},
	{[]string{"HEADWATER_FAILOVER_AFTER_FAILURES"}, intVar(func(c *Config) *int { return &c.FailoverAfterFailures })},
	{[]string{"HEADWATER_FAILBACK_PROBE_S"}, durVar(func(c *Config) *time.Duration { return &c.FailbackProbe })},
	{[]string{"HEADWATER_WRITE_KEY"}, strVar(func(c *Config) *string { return &c.WriteKey })},
	{[]string{"HEADWATER_SPOOL_DIR"}, strVar(func(c *Config) *string { return &c.SpoolDir })},
	{[]string{"HEADWATER_WIRE_FORMAT"}, strVar(func(c *Config) *WireFormat { return &c.WireFormat })},
	{[]string{"HEADWATER_REGISTRY_URL", "REGISTRY_URL"}, strVar(func(c *Config) *string { return &c.RegistryURL })},
	{[]string{"HEADWATER_SCHEMA_REFRESH_S"}, durVar(func(c *Config) *time.Duration { return &c.SchemaRefresh })},
	{[]string{"HEADWATER_COMPRESSION"}, strVar(func(c *Config) *Compression { return &c.Compression })},
	{[]string{"HEADWATER_MAX_BATCH_EVENTS"}, intVar(func(c *Config) *int { return &c.MaxBatchEvents })},
	{[]string{"HEADWATER_MAX_BATCH_BYTES"}, intVar(func(c *Config) *int { return &c.MaxBatchBytes })},
	{[]string{"HEADWATER_MAX_EVENT_BYTES"}, intVar(func(c *Config) *int { return &c.MaxEventBytes })},
	{[]string{"HEADWATER_LINGER_S"}, durVar(func(c *Config) *time.Duration { return &c.Linger })},
	{[]string{"HEADWATER_MAX_QUEUE_EVENTS"}, intVar(func(c *Config) *int { return &c.MaxQueueEvents })},
	{[]string{"HEADWATER_QUEUE_POLICY"}, strVar(func(c *Config) *QueuePolicy { return &c.QueuePolicy })},
	{[]string{"HEADWATER_BLOCK_TIMEOUT_S"}, durVar(func(c *Config) *time.Duration { return &c.BlockTimeout })},
	{[]string{"HEADWATER_MAX_PENDING_BATCHES"}, intVar(func(c *Config) *int { return &c.MaxPendingBatches })},
	{[]string{"HEADWATER_SPOOL_MAX_BYTES"}, func(c *Config, raw, name string) error {
		v, err := strconv.ParseInt(strings.ReplaceAll(raw, "_", ""), 10, 64)
		if err != nil {
			return &ConfigError{fmt.Sprintf("%s=%q is not a valid int", name, raw)}
		}
		c.SpoolMaxBytes = v
		return nil
	}},
	{[]string{"HEADWATER_SPOOL_OVERFLOW"}, strVar(func(c *Config) *SpoolOverflow { return &c.SpoolOverflow })},
	{[]string{"HEADWATER_SPOOL_FSYNC"}, strVar(func(c *Config) *SpoolFsync { return &c.SpoolFsync })},
	{[]string{"HEADWATER_REQUEST_TIMEOUT_S"}, durVar(func(c *Config) *time.Duration { return &c.RequestTimeout })},
	{[]string{"HEADWATER_RETRY_DEADLINE_S"}, durVar(func(c *Config) *time.Duration { return &c.RetryDeadline })},
	{[]string{"HEADWATER_RETRY_BASE_S"}, durVar(func(c *Config) *time.Duration { return &c.RetryBase })},
	{[]string{"HEADWATER_RETRY_MAX_S"}, durVar(func(c *Config) *time.Duration { return &c.RetryMax })},
	{[]string{"HEADWATER_RETRY_REFUSED_MAX_S"}, durVar(func(c *Config) *time.Duration { return &c.RetryRefusedMax })},
	{[]string{"HEADWATER_CA_BUNDLE"}, strVar(func(c *Config) *string { return &c.CABundle })},
	{[]string{"HEADWATER_CONNECTION_MAX_AGE_S"}, durVar(func(c *Config) *time.Duration { return &c.ConnectionMaxAge })},
	{[]string{"HEADWATER_EXIT_TIMEOUT_S"}, durVar(func(c *Config) *time.Duration { return &c.ExitTimeout })},
	{[]string{"HEADWATER_MAX_IN_FLIGHT"}, intVar(func(c *Config) *int { return &c.MaxInFlight })},
	{[]string{"HEADWATER_NODE_ID"}, strVar(func(c *Config) *string { return &c.NodeID })},
}

// ConfigFromEnv fills a default Config from HEADWATER_* variables looked up with getenv (nil: os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := DefaultConfig()
	for _, f := range envFields {
		for _, name := range f.names {
			if raw := getenv(name); raw != "" {
				if err := f.set(&cfg, raw, name); err != nil {
					return cfg, err
				}
				break
			}
		}
	}
	return cfg, nil
}

// Validate checks every option; the error names the bad one and its environment variable.
func (c *Config) Validate() error {
	if err := c.validateEndpoints(); err != nil {
		return err
	}
	if c.WriteKey == "" {
		return &ConfigError{"WriteKey (HEADWATER_WRITE_KEY) must be a non-empty string"}
	}
	checks := []error{
		choice("Compression", "HEADWATER_COMPRESSION", c.Compression, compressionChoices),
		choice("WireFormat", "HEADWATER_WIRE_FORMAT", c.WireFormat, wireFormats),
		durBetween("SchemaRefresh", "HEADWATER_SCHEMA_REFRESH_S", c.SchemaRefresh, time.Millisecond),
		choice("QueuePolicy", "HEADWATER_QUEUE_POLICY", c.QueuePolicy, queuePolicies),
		choice("SpoolOverflow", "HEADWATER_SPOOL_OVERFLOW", c.SpoolOverflow, spoolOverflowChoices),
		choice("SpoolFsync", "HEADWATER_SPOOL_FSYNC", c.SpoolFsync, fsyncChoices),
		between("MaxBatchEvents", "HEADWATER_MAX_BATCH_EVENTS", int64(c.MaxBatchEvents), 1, GatewayMaxEvents),
		between("MaxBatchBytes", "HEADWATER_MAX_BATCH_BYTES", int64(c.MaxBatchBytes), 1024, 1<<30),
		between("MaxEventBytes", "HEADWATER_MAX_EVENT_BYTES", int64(c.MaxEventBytes), 64, int64(c.MaxBatchBytes)),
		between("MaxQueueEvents", "HEADWATER_MAX_QUEUE_EVENTS", int64(c.MaxQueueEvents), 1, 1<<31),
		between("MaxPendingBatches", "HEADWATER_MAX_PENDING_BATCHES", int64(c.MaxPendingBatches), 1, 1<<31),
		between("SpoolMaxBytes", "HEADWATER_SPOOL_MAX_BYTES", c.SpoolMaxBytes, 1024, 1<<50),
		between("MaxInFlight", "HEADWATER_MAX_IN_FLIGHT", int64(c.MaxInFlight), 1, 64),
		durBetween("Linger", "HEADWATER_LINGER_S", c.Linger, 0),
		durBetween("BlockTimeout", "HEADWATER_BLOCK_TIMEOUT_S", c.BlockTimeout, 0),
		durBetween("ExitTimeout", "HEADWATER_EXIT_TIMEOUT_S", c.ExitTimeout, 0),
		durBetween("RequestTimeout", "HEADWATER_REQUEST_TIMEOUT_S", c.RequestTimeout, time.Millisecond),
		durBetween("RetryDeadline", "HEADWATER_RETRY_DEADLINE_S", c.RetryDeadline, time.Millisecond),
		durBetween("RetryBase", "HEADWATER_RETRY_BASE_S", c.RetryBase, time.Millisecond),
		durBetween("RetryMax", "HEADWATER_RETRY_MAX_S", c.RetryMax, time.Millisecond),
		durBetween("RetryRefusedMax", "HEADWATER_RETRY_REFUSED_MAX_S", c.RetryRefusedMax, time.Millisecond),
		between("FailoverAfterFailures", "HEADWATER_FAILOVER_AFTER_FAILURES", int64(c.FailoverAfterFailures), 1, 1_000_000),
		durBetween("FailoverAfter", "HEADWATER_FAILOVER_AFTER_S", c.FailoverAfter, 0),
		durBetween("FailbackProbe", "HEADWATER_FAILBACK_PROBE_S", c.FailbackProbe, time.Millisecond),
		durBetween("ConnectionMaxAge", "HEADWATER_CONNECTION_MAX_AGE_S", c.ConnectionMaxAge, time.Millisecond),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if c.RegistryURL != "" {
		if err := checkURL("RegistryURL (HEADWATER_REGISTRY_URL)", c.RegistryURL); err != nil {
			return err
		}
	}
	if c.WireFormat == "avro" && c.RegistryURL == "" {
		return &ConfigError{"WireFormat avro needs RegistryURL (HEADWATER_REGISTRY_URL)"}
	}
	if c.QueuePolicy == "spill" && c.SpoolDir == "" {
		return &ConfigError{"QueuePolicy spill needs SpoolDir (HEADWATER_SPOOL_DIR)"}
	}
	if c.NodeID == "" {
		return &ConfigError{"NodeID (HEADWATER_NODE_ID) must be a non-empty string"}
	}
	return nil
}

// maxEndpoints is the most endpoints a client takes.
const maxEndpoints = 8

// endpointList is the endpoints in order: Endpoints, or the one Endpoint.
func (c *Config) endpointList() []string {
	if len(c.Endpoints) > 0 {
		return c.Endpoints
	}
	return []string{c.Endpoint}
}

func (c *Config) validateEndpoints() error {
	if len(c.Endpoints) == 0 {
		return checkURL("Endpoint (HEADWATER_ENDPOINT or GATEWAY_URL)", c.Endpoint)
	}
	seen := map[string]bool{}
	for _, u := range c.Endpoints {
		if err := checkURL("Endpoints (HEADWATER_ENDPOINTS)", u); err != nil {
			return err
		}
		if strings.HasPrefix(u, "https:") != strings.HasPrefix(c.Endpoints[0], "https:") {
			return &ConfigError{fmt.Sprintf("Endpoints (HEADWATER_ENDPOINTS) must all be http:// or all https://, got %q", c.Endpoints)}
		}
		seen[strings.TrimRight(u, "/")] = true
	}
	if len(c.Endpoints) > maxEndpoints || len(seen) != len(c.Endpoints) {
		return &ConfigError{fmt.Sprintf("Endpoints (HEADWATER_ENDPOINTS) must be 1 to %d distinct URLs, got %q", maxEndpoints, c.Endpoints)}
	}
	if c.Endpoint != "" && c.Endpoint != c.Endpoints[0] {
		return &ConfigError{fmt.Sprintf("Endpoint %q must be the first of Endpoints %q (or be left empty)", c.Endpoint, c.Endpoints)}
	}
	return nil
}

// checkURL refuses a URL that is not http(s) with a host, or that carries user-info (user:password@): the write
// key is the only credential a gateway or registry takes, and a password in a URL ends up in logs. No message
// repeats the user-info.
func checkURL(option, url string) error {
	if !urlPattern.MatchString(url) {
		return &ConfigError{fmt.Sprintf("%s must be an http:// or https:// URL, got %q", option, withoutUserinfo(url))}
	}
	if hasUserinfo(url) {
		return &ConfigError{fmt.Sprintf("%s must not carry credentials (user:password@), got %q: the write key is the only credential (sent as Authorization: Bearer)", option, withoutUserinfo(url))}
	}
	return nil
}

// authority is the host part of url (after the scheme, up to the path, query or fragment); ok false without a scheme.
func authority(url string) (start, end int, ok bool) {
	i := strings.Index(url, "://")
	if i < 0 {
		return 0, 0, false
	}
	start = i + 3
	end = len(url)
	if j := strings.IndexAny(url[start:], "/?#"); j >= 0 {
		end = start + j
	}
	return start, end, true
}

func hasUserinfo(url string) bool {
	start, end, ok := authority(url)
	return ok && strings.Contains(url[start:end], "@")
}

// withoutUserinfo is url with any user-info replaced by "***" (for messages).
func withoutUserinfo(url string) string {
	start, end, ok := authority(url)
	if !ok {
		return url
	}
	at := strings.LastIndex(url[start:end], "@")
	if at < 0 {
		return url
	}
	return url[:start] + "***@" + url[start+at+1:]
}

func choice[T ~string](name, env string, value T, choices []T) error {
	names := make([]string, len(choices))
	for i, c := range choices {
		if value == c {
			return nil
		}
		names[i] = string(c)
	}
	return &ConfigError{fmt.Sprintf("%s (%s) must be one of %s, got %q", name, env, strings.Join(names, ", "), value)}
}

func between(name, env string, value, low, high int64) error {
	if value < low || value > high {
		return &ConfigError{fmt.Sprintf("%s (%s) must be in [%d, %d], got %d", name, env, low, high, value)}
	}
	return nil
}

func durBetween(name, env string, value, low time.Duration) error {
	if value < low || value > 365*24*time.Hour {
		return &ConfigError{fmt.Sprintf("%s (%s) must be between %v and 365 days, got %v", name, env, low, value)}
	}
	return nil
}

// String describes the configuration with the write key redacted (so a logged Config leaks no secret).
func (c Config) String() string {
	redacted := c
	if redacted.WriteKey != "" {
		redacted.WriteKey = "<redacted>"
	}
	type plain Config // without this method: no recursion
	return fmt.Sprintf("%+v", plain(redacted))
}
