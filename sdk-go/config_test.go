// Tests of the configuration, the retry rule and the wire helpers (pure functions).
package headwater

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnvUsesThePythonNames(t *testing.T) {
	env := map[string]string{
		"GATEWAY_URL": "http://gw:8080", "HEADWATER_WRITE_KEY": "wk", "HEADWATER_LINGER_S": "0.25",
		"HEADWATER_MAX_BATCH_EVENTS": "20", "HEADWATER_MAX_IN_FLIGHT": "2", "HEADWATER_COMPRESSION": "gzip",
		"HEADWATER_RETRY_DEADLINE_S": "1.5", "HEADWATER_SPOOL_MAX_BYTES": "1_000_000", "HEADWATER_NODE_ID": "n",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint != "http://gw:8080" || cfg.Linger != 250*time.Millisecond || cfg.MaxBatchEvents != 20 ||
		cfg.MaxInFlight != 2 || cfg.Compression != "gzip" || cfg.RetryDeadline != 1500*time.Millisecond ||
		cfg.SpoolMaxBytes != 1_000_000 || cfg.NodeID != "n" {
		t.Fatalf("%+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	env["HEADWATER_ENDPOINT"] = "http://primary:1"
	if cfg, _ = ConfigFromEnv(func(k string) string { return env[k] }); cfg.Endpoint != "http://primary:1" {
		t.Fatal("HEADWATER_ENDPOINT must win over GATEWAY_URL")
	}
	env["HEADWATER_WIRE_FORMAT"], env["REGISTRY_URL"] = "avro", "http://registry:8081"
	if cfg, _ = ConfigFromEnv(func(k string) string { return env[k] }); cfg.WireFormat != "avro" || cfg.RegistryURL != "http://registry:8081" || cfg.Validate() != nil {
		t.Fatalf("%+v", cfg)
	}
	delete(env, "REGISTRY_URL")
	if cfg, _ = ConfigFromEnv(func(k string) string { return env[k] }); cfg.Validate() == nil {
		t.Fatal("avro without a registry must be refused")
	}
	delete(env, "HEADWATER_WIRE_FORMAT")
	env["HEADWATER_LINGER_S"] = "soon"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "HEADWATER_LINGER_S") {
		t.Fatalf("the error must name the variable: %v", err)
	}
}

func TestValidateNamesTheBadOption(t *testing.T) {
	cases := map[string]func(*Config){
		"HEADWATER_ENDPOINT":         func(c *Config) { c.Endpoint = "ftp://x" },
		"HEADWATER_WRITE_KEY":        func(c *Config) { c.WriteKey = "" },
		"HEADWATER_MAX_BATCH_EVENTS": func(c *Config) { c.MaxBatchEvents = 41 },
		"HEADWATER_QUEUE_POLICY":     func(c *Config) { c.QueuePolicy = "yolo" },
		"HEADWATER_SPOOL_DIR":        func(c *Config) { c.QueuePolicy = "spill" },
		"HEADWATER_RETRY_BASE_S":     func(c *Config) { c.RetryBase = 0 },
		"HEADWATER_MAX_IN_FLIGHT":    func(c *Config) { c.MaxInFlight = 0 },
	}
	for name, mutate := range cases {
		cfg := DefaultConfig()
		cfg.Endpoint, cfg.WriteKey = "http://gw", "wk"
		mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "wk_secret") {
			t.Error("an error must never show the write key")
		}
	}
}

func TestClassifyFollowsTheRetryRule(t *testing.T) {
	want := map[int]outcome{200: outcomeDone, 422: outcomeDone, 413: outcomeSplit, 408: outcomeRetry,
		429: outcomeRetry, 500: outcomeRetry, 502: outcomeRetry, 503: outcomeRetry, 504: outcomeRetry,
		400: outcomeRefused, 401: outcomeRefused, 403: outcomeRefused, 404: outcomeRefused, 415: outcomeRefused,
		501: outcomeRefused, 301: outcomeRefused, 201: outcomeRefused}
	for code, o := range want {
		if classify(code) != o {
			t.Errorf("status %d", code)
		}
	}
}

func TestBackoffHasFullJitterAndHonoursRetryAfter(t *testing.T) {
	for attempt := 1; attempt < 70; attempt++ {
		d := backoff(attempt, 500*time.Millisecond, 30*time.Second, -1)
		ceiling := min(30*time.Second, 500*time.Millisecond<<min(attempt-1, 20))
		if d < 0 || d > ceiling {
			t.Fatalf("attempt %d: %v over %v", attempt, d, ceiling)
		}
		if d := backoff(attempt, time.Millisecond, 2*time.Millisecond, 45); d != 45*time.Second {
			t.Fatalf("Retry-After must be a floor, got %v", d)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := map[string]float64{"": -1, "3": 3, " 1.5 ": 1.5, "-4": 0, "soon": -1,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10, now.Add(-time.Hour).Format(http.TimeFormat): 0}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestParseErrorAndAnswer(t *testing.T) {
	if code, msg := parseError([]byte(`{"code":"invalid_write_key","message":"no"}`)); code != "invalid_write_key" || msg != "no" {
		t.Fatal(code, msg)
	}
	if code, _ := parseError([]byte("<html>")); code != "" {
		t.Fatal(code)
	}
	a := parseAnswer([]byte(`{"accepted":2,"rejected":[{"index":1,"code":"c","message":"m"}]}`))
	if a.Accepted != 2 || len(a.Rejected) != 1 || a.Rejected[0].Index != 1 {
		t.Fatalf("%+v", a)
	}
}

func TestUUIDs(t *testing.T) {
	id := uuid7(1_795_313_484_990)
	if !isUUID(id) || id[14] != '7' || !strings.HasPrefix(id, "01a20105-c4be-7") || !strings.ContainsAny(id[19:20], "89ab") {
		t.Fatal(id)
	}
	if p := newProducerID(); !isUUID(p) || p[14] != '4' {
		t.Fatal(p)
	}
	if isUUID("0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a1") || isUUID("0193e0c2x6a4e-7b1d-9c8f-2f6f1d1b9a10") {
		t.Fatal("bad UUIDs accepted")
	}
}

func TestConfigNeverPrintsTheWriteKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.WriteKey = "http://gw", "wk_secret_123"
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%v %+v %s", cfg, cfg, cfg), cfg.String()} {
		if strings.Contains(s, "wk_secret_123") || !strings.Contains(s, "<redacted>") {
			t.Fatalf("the write key leaked: %s", s)
		}
	}
}

func TestURLsCarryingCredentialsAreRefusedWithoutRepeatingThem(t *testing.T) {
	cases := map[string]func(*Config){
		"HEADWATER_ENDPOINT":     func(c *Config) { c.Endpoint = "http://ops:s3cret@gw:8080" },
		"HEADWATER_ENDPOINTS":    func(c *Config) { c.Endpoint, c.Endpoints = "", []string{"https://gw-a", "https://ops:s3cret@gw-b/x"} },
		"HEADWATER_REGISTRY_URL": func(c *Config) { c.RegistryURL = "http://ops:s3cret@reg:8081" },
	}
	for name, mutate := range cases {
		cfg := DefaultConfig()
		cfg.Endpoint, cfg.WriteKey = "http://gw", "wk"
		mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "must not carry credentials") {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "***@") {
			t.Fatalf("%s: the message shows the credentials: %v", name, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.WriteKey = "ftp://me:pw@gw", "wk"
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), "pw@") {
		t.Fatalf("a bad URL's message must hide its user-info: %v", err)
	}
	for url, want := range map[string]string{
		"http://gw:1/a@b":        "http://gw:1/a@b",
		"http://u:p@gw:1/x?y=@z": "http://***@gw:1/x?y=@z",
		"https://a@b@gw":         "https://***@gw",
		"no-scheme@host":         "no-scheme@host",
	} {
		if got := withoutUserinfo(url); got != want {
			t.Errorf("withoutUserinfo(%q) = %q, want %q", url, got, want)
		}
	}
}
