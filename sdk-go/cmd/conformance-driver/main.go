// Command conformance-driver lets the conformance runner drive the Go SDK's public API: JSON commands on
// stdin, one JSON reply per line on stdout (sdk-specs/conformance/DRIVER.md).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
)

var capabilities = []string{"json", "zstd", "gzip", "identity", "avro", "spool", "retries", "split", "track_seq",
	"event_id", "timestamp", "max_in_flight", "env_config"}

// failure is an error reply of a given DRIVER.md type.
type failure struct{ kind, msg string }

func (f *failure) Error() string { return f.msg }

type reply map[string]any

type driver struct {
	client   *headwater.Client
	mu       sync.Mutex
	reported []reply
}

func (d *driver) add(r reply) {
	d.mu.Lock()
	d.reported = append(d.reported, r)
	d.mu.Unlock()
}

func (d *driver) onDelivery(r headwater.DeliveryReport) {
	if r.Err == nil {
		d.add(reply{"kind": "delivered", "batch_id": r.BatchID, "accepted": r.Accepted})
	}
}

func (d *driver) onError(err error) {
	var rejected *headwater.EventRejectedError
	var refused *headwater.BatchRejectedError
	var dropped *headwater.EventsDroppedError
	switch {
	case errors.As(err, &rejected):
		d.add(reply{"kind": "event_rejected", "batch_id": rejected.BatchID, "event_id": rejected.EventID,
			"seq": rejected.Seq, "code": rejected.Code})
	case errors.As(err, &refused):
		d.add(reply{"kind": "batch_refused", "batch_id": refused.BatchID, "status": refused.Status,
			"code": refused.Code, "count": refused.Count})
	case errors.As(err, &dropped):
		d.add(reply{"kind": "dropped", "reason": dropped.Reason, "count": dropped.Count})
	default:
		d.add(reply{"kind": "error", "message": err.Error()})
	}
}

func (d *driver) handle(cmd map[string]any) (reply, error) {
	name, _ := cmd["cmd"].(string)
	if name != "hello" && name != "init" && d.client == nil {
		if _, known := commands[name]; known {
			return nil, &failure{"not_initialised", "init first"}
		}
	}
	f, ok := commands[name]
	if !ok {
		return nil, &failure{"protocol_error", fmt.Sprintf("unknown command %q", name)}
	}
	return f(d, cmd)
}

var commands = map[string]func(*driver, map[string]any) (reply, error){
	"hello": func(*driver, map[string]any) (reply, error) {
		return reply{"sdk": headwater.SDKName, "version": headwater.Version, "protocol": 1,
			"runtime": "go/" + strings.TrimPrefix(runtime.Version(), "go"), "capabilities": capabilities}, nil
	},
	"init":     (*driver).init,
	"track":    (*driver).track,
	"flush":    (*driver).flush,
	"close":    (*driver).close,
	"outcomes": (*driver).outcomes,
	"stats":    (*driver).stats,
}

func (d *driver) init(cmd map[string]any) (reply, error) {
	cfg, err := baseConfig(cmd)
	if err != nil {
		return nil, err
	}
	if dir, ok := cmd["spool_dir"].(string); ok {
		cfg.SpoolDir = dir
	}
	cfg.OnDelivery, cfg.OnError = d.onDelivery, d.onError
	client, err := headwater.NewFromConfig(cfg)
	if err != nil {
		return nil, &failure{"config_error", err.Error()}
	}
	d.client = client
	return reply{"producer_id": client.ProducerID()}, nil
}

// baseConfig is the configuration of an init: from its "env" map the way the SDK reads HEADWATER_* variables
// (capability env_config), else from endpoint, write_key and options.
func baseConfig(cmd map[string]any) (headwater.Config, error) {
	if raw, ok := cmd["env"].(map[string]any); ok {
		env := make(map[string]string, len(raw))
		for k, v := range raw {
			s, isString := v.(string)
			if !isString {
				return headwater.Config{}, &failure{"config_error", "env values must be strings: " + k}
			}
			env[k] = s
		}
		cfg, err := headwater.ConfigFromEnv(func(name string) string { return env[name] })
		if err != nil {
			return cfg, &failure{"config_error", err.Error()}
		}
		return cfg, nil
	}
	cfg := headwater.DefaultConfig()
	cfg.Endpoint, _ = cmd["endpoint"].(string)
	cfg.WriteKey, _ = cmd["write_key"].(string)
	options, _ := cmd["options"].(map[string]any)
	return cfg, applyOptions(&cfg, options)
}

func (d *driver) track(cmd map[string]any) (reply, error) {
	eventType, ok := cmd["event_type"].(string)
	if !ok {
		return nil, &failure{"invalid_event", "event_type must be a string"}
	}
	var props map[string]any
	if raw, present := cmd["properties"]; present && raw != nil {
		if props, ok = raw.(map[string]any); !ok {
			return nil, &failure{"invalid_event", "properties must be an object"}
		}
	}
	var opts []headwater.TrackOption
	if raw, present := cmd["partition_key"]; present && raw != nil {
		key, ok := raw.(string)
		if !ok {
			return nil, &failure{"invalid_event", "partition_key must be a string"}
		}
		opts = append(opts, headwater.WithPartitionKey(key))
	}
	if raw, present := cmd["event_id"]; present && raw != nil {
		id, ok := raw.(string)
		if !ok || id == "" {
			return nil, &failure{"invalid_event", "event_id must be a UUID string"}
		}
		opts = append(opts, headwater.WithEventID(id))
	}
	if raw, present := cmd["timestamp"]; present && raw != nil {
		secs, err := number(raw)
		if err != nil {
			return nil, &failure{"invalid_event", "timestamp must be epoch seconds"}
		}
		opts = append(opts, headwater.WithTimestamp(time.UnixMilli(int64(secs*1000))))
	}
	tracked, err := d.client.TrackEvent(eventType, props, opts...)
	switch {
	case errors.Is(err, headwater.ErrInvalidEvent):
		return nil, &failure{"invalid_event", err.Error()}
	case errors.Is(err, headwater.ErrClosed):
		return nil, &failure{"closed", err.Error()}
	case errors.Is(err, headwater.ErrQueueFull):
		return nil, &failure{"queue_full", err.Error()}
	case err != nil:
		return nil, err
	}
	return reply{"seq": tracked.Seq, "event_id": tracked.EventID}, nil
}

func timeout(cmd map[string]any) (context.Context, context.CancelFunc) {
	secs := 10.0
	if raw, ok := cmd["timeout_s"]; ok {
		if v, err := number(raw); err == nil {
			secs = v
		}
	}
	return context.WithTimeout(context.Background(), time.Duration(secs*float64(time.Second)))
}

func (d *driver) flush(cmd map[string]any) (reply, error) {
	ctx, cancel := timeout(cmd)
	defer cancel()
	err := d.client.Flush(ctx) // ErrDropped: settled, with events lost (reported as outcomes)
	return reply{"settled": err == nil || errors.Is(err, headwater.ErrDropped)}, nil
}

func (d *driver) close(cmd map[string]any) (reply, error) {
	ctx, cancel := timeout(cmd)
	defer cancel()
	return reply{"delivered_all": d.client.Close(ctx) == nil}, nil
}

func (d *driver) outcomes(map[string]any) (reply, error) {
	d.mu.Lock()
	out := d.reported
	d.reported = nil
	d.mu.Unlock()
	if out == nil {
		out = []reply{}
	}
	return reply{"outcomes": out}, nil
}

func (d *driver) stats(map[string]any) (reply, error) {
	m := d.client.Metrics()
	return reply{"enqueued": m.Enqueued, "acknowledged": m.Acknowledged, "rejected": m.Rejected, "dropped": m.Dropped,
		"failovers": m.Failovers, "failbacks": m.Failbacks}, nil
}

func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	d := &driver{}
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			writeReply(out, answer(d, line))
		}
		if err != nil { // EOF: exit at once, without closing the client (DRIVER.md "Process")
			os.Exit(0)
		}
	}
}

// answer turns one command line into its reply, recovering SDK panics as "internal".
func answer(d *driver, line []byte) (r reply) {
	defer func() {
		if p := recover(); p != nil {
			r = errorReply("internal", fmt.Sprint("panic: ", p))
		}
	}()
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber() // integers keep all 64 bits in properties
	var cmd map[string]any
	if err := dec.Decode(&cmd); err != nil {
		return errorReply("protocol_error", "not a JSON object: "+err.Error())
	}
	res, err := d.handle(cmd)
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return errorReply(f.kind, f.msg)
		}
		return errorReply("internal", err.Error())
	}
	res["ok"] = true
	return res
}

func errorReply(kind, msg string) reply {
	return reply{"ok": false, "error": map[string]string{"type": kind, "message": msg}}
}

func writeReply(out *bufio.Writer, r reply) {
	data, err := json.Marshal(r)
	if err != nil {
		data, _ = json.Marshal(errorReply("internal", "reply not encodable: "+err.Error()))
	}
	_, _ = out.Write(append(data, '\n'))
	_ = out.Flush()
}
