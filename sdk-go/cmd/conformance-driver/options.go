// Mapping the runner's option names (the Python SDK's) onto the Go SDK's Config.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	headwater "github.com/headwater-dev/headwater/sdk-go"
)

func number(raw any) (float64, error) {
	switch v := raw.(type) {
	case json.Number:
		return v.Float64()
	case float64:
		return v, nil
	}
	return 0, errors.New("not a number")
}

func seconds(raw any) (time.Duration, error) {
	v, err := number(raw)
	return time.Duration(v * float64(time.Second)), err
}

func integer(raw any) (int, error) {
	if n, ok := raw.(json.Number); ok {
		v, err := n.Int64()
		return int(v), err
	}
	return 0, errors.New("not an integer")
}

func text(raw any) (string, error) {
	if s, ok := raw.(string); ok {
		return s, nil
	}
	return "", errors.New("not a string")
}

type setter func(c *headwater.Config, raw any) error

func durationOpt(f func(*headwater.Config) *time.Duration) setter {
	return func(c *headwater.Config, raw any) (err error) { *f(c), err = seconds(raw); return }
}

func intOpt(f func(*headwater.Config) *int) setter {
	return func(c *headwater.Config, raw any) (err error) { *f(c), err = integer(raw); return }
}

func stringOpt[T ~string](f func(*headwater.Config) *T) setter {
	return func(c *headwater.Config, raw any) error {
		v, err := text(raw)
		*f(c) = T(v)
		return err
	}
}

var optionSetters = map[string]setter{
	"node_id":              stringOpt(func(c *headwater.Config) *string { return &c.NodeID }),
	"compression":          stringOpt(func(c *headwater.Config) *headwater.Compression { return &c.Compression }),
	"queue_policy":         stringOpt(func(c *headwater.Config) *headwater.QueuePolicy { return &c.QueuePolicy }),
	"spool_overflow":       stringOpt(func(c *headwater.Config) *headwater.SpoolOverflow { return &c.SpoolOverflow }),
	"spool_fsync":          stringOpt(func(c *headwater.Config) *headwater.SpoolFsync { return &c.SpoolFsync }),
	"linger_s":             durationOpt(func(c *headwater.Config) *time.Duration { return &c.Linger }),
	"block_timeout_s":      durationOpt(func(c *headwater.Config) *time.Duration { return &c.BlockTimeout }),
	"request_timeout_s":    durationOpt(func(c *headwater.Config) *time.Duration { return &c.RequestTimeout }),
	"retry_base_s":         durationOpt(func(c *headwater.Config) *time.Duration { return &c.RetryBase }),
	"retry_max_s":          durationOpt(func(c *headwater.Config) *time.Duration { return &c.RetryMax }),
	"retry_deadline_s":     durationOpt(func(c *headwater.Config) *time.Duration { return &c.RetryDeadline }),
	"retry_refused_max_s":  durationOpt(func(c *headwater.Config) *time.Duration { return &c.RetryRefusedMax }),
	"exit_timeout_s":       durationOpt(func(c *headwater.Config) *time.Duration { return &c.ExitTimeout }),
	"connection_max_age_s": durationOpt(func(c *headwater.Config) *time.Duration { return &c.ConnectionMaxAge }),
	"max_batch_events":     intOpt(func(c *headwater.Config) *int { return &c.MaxBatchEvents }),
	"max_batch_bytes":      intOpt(func(c *headwater.Config) *int { return &c.MaxBatchBytes }),
	"max_event_bytes":      intOpt(func(c *headwater.Config) *int { return &c.MaxEventBytes }),
	"max_queue_events":     intOpt(func(c *headwater.Config) *int { return &c.MaxQueueEvents }),
	"max_pending_batches":  intOpt(func(c *headwater.Config) *int { return &c.MaxPendingBatches }),
	"max_in_flight":        intOpt(func(c *headwater.Config) *int { return &c.MaxInFlight }),
	"spool_max_bytes": func(c *headwater.Config, raw any) error {
		n, err := integer(raw)
		c.SpoolMaxBytes = int64(n)
		return err
	},
	"context": func(c *headwater.Config, raw any) error {
		m, ok := raw.(map[string]any)
		if !ok {
			return errors.New("not an object")
		}
		c.Context = make(map[string]string, len(m))
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				return errors.New("values must be strings")
			}
			c.Context[k] = s
		}
		return nil
	},
	"wire_format":             stringOpt(func(c *headwater.Config) *headwater.WireFormat { return &c.WireFormat }),
	"registry_url":            stringOpt(func(c *headwater.Config) *string { return &c.RegistryURL }),
	"ca_bundle":               stringOpt(func(c *headwater.Config) *string { return &c.CABundle }),
	"schema_refresh_s":        durationOpt(func(c *headwater.Config) *time.Duration { return &c.SchemaRefresh }),
	"failover_after_s":        durationOpt(func(c *headwater.Config) *time.Duration { return &c.FailoverAfter }),
	"failback_probe_s":        durationOpt(func(c *headwater.Config) *time.Duration { return &c.FailbackProbe }),
	"failover_after_failures": intOpt(func(c *headwater.Config) *int { return &c.FailoverAfterFailures }),
	"endpoints": func(c *headwater.Config, raw any) error {
		list, ok := raw.([]any)
		if !ok {
			return errors.New("not a list")
		}
		c.Endpoints = make([]string, len(list))
		for i, v := range list {
			s, ok := v.(string)
			if !ok {
				return errors.New("endpoints must be strings")
			}
			c.Endpoints[i] = s
		}
		return nil
	},
}

// applyOptions sets every option; an unknown option or a bad value is a config_error.
func applyOptions(cfg *headwater.Config, options map[string]any) error {
	for name, raw := range options {
		set, ok := optionSetters[name]
		if !ok {
			return &failure{"config_error", "unknown option " + name}
		}
		if err := set(cfg, raw); err != nil {
			var f *failure
			if errors.As(err, &f) {
				return f
			}
			return &failure{"config_error", fmt.Sprintf("option %s: %v", name, err)}
		}
	}
	return nil
}
