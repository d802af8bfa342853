// The SDK's error types: what Track returns and what OnError receives.
//
//	ConfigError          bad option or environment variable (New, NewFromEnv)
//	SpoolLockedError     another live client owns the spool directory (New)
//	InvalidEventError    bad arguments to Track; errors.Is(err, ErrInvalidEvent)
//	EventsDroppedError   events dropped, with a reason and a count; errors.Is(err, ErrDropped);
//	                     Track returns it for queue_full (ErrQueueFull) and client_closed (ErrClosed)
//	BatchRejectedError   the gateway refused a whole batch (a non-retryable status, or 413 for one event)
//	EventRejectedError   the gateway rejected one event of a 200/422 answer
//	TransportError       a connection error, timeout or retryable status (retried; reported at the deadline)
package headwater

import (
	"errors"
	"fmt"
)

// Sentinels to test errors with errors.Is.
var (
	ErrInvalidEvent = errors.New("headwater: invalid event")
	ErrDropped      = errors.New("headwater: events dropped")
	ErrQueueFull    = errors.New("headwater: queue full")
	ErrClosed       = errors.New("headwater: client closed")
	ErrConfig       = errors.New("headwater: bad configuration")
)

// Drop reasons (keys of Metrics.Dropped).
const (
	ReasonQueueFull        = "queue_full"
	ReasonQueueFullTimeout = "queue_full_timeout"
	ReasonQueueFullOldest  = "queue_full_oldest"
	ReasonClientClosed     = "client_closed"
	ReasonEventTooLarge    = "event_too_large"
	ReasonStoreFull        = "store_full"
	ReasonStoreFullOldest  = "store_full_oldest"
	ReasonSpoolCorrupt     = "spool_corrupt"
	ReasonRetryDeadline    = "retry_deadline"
	ReasonClosedUnsent     = "closed_unsent"
)

// ConfigError is a bad option or environment variable; the message names it.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string        { return "headwater: " + e.Msg }
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// SpoolLockedError means another live client (in this or another process) owns the spool directory.
type SpoolLockedError struct{ Dir string }

func (e *SpoolLockedError) Error() string {
	return "headwater: spool directory " + e.Dir + " is in use by another client"
}
func (e *SpoolLockedError) Is(target error) bool { return target == ErrConfig }

// InvalidEventError is returned by Track for bad arguments (a bug in the calling code).
type InvalidEventError struct{ Msg string }

func (e *InvalidEventError) Error() string        { return "headwater: invalid event: " + e.Msg }
func (e *InvalidEventError) Is(target error) bool { return target == ErrInvalidEvent }

// EventsDroppedError reports Count events dropped for Reason (one of the Reason* constants or refused_http_<status>).
type EventsDroppedError struct {
	Reason string
	Count  int
	Detail string
}

func (e *EventsDroppedError) Error() string {
	msg := fmt.Sprintf("headwater: %d event(s) dropped: %s", e.Count, e.Reason)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Is matches ErrDropped, and ErrQueueFull / ErrClosed for those reasons.
func (e *EventsDroppedError) Is(target error) bool {
	switch target {
	case ErrDropped:
		return true
	case ErrQueueFull:
		return e.Reason == ReasonQueueFull || e.Reason == ReasonQueueFullTimeout
	case ErrClosed:
		return e.Reason == ReasonClientClosed
	}
	return false
}

// BatchRejectedError means the gateway refused a whole batch with a non-retryable status; it is not resent.
type BatchRejectedError struct {
	BatchID string
	Status  int
	Code    string
	Message string
	Count   int
}

func (e *BatchRejectedError) Error() string {
	return fmt.Sprintf("headwater: batch %s (%d events) refused: HTTP %d %s: %s", e.BatchID, e.Count, e.Status, e.Code, e.Message)
}

// EventRejectedError means the gateway rejected one event of a batch (listed in "rejected"); it is not resent.
type EventRejectedError struct {
	BatchID string
	EventID string
	Seq     int64
	Code    string
	Message string
}

func (e *EventRejectedError) Error() string {
	return fmt.Sprintf("headwater: event %s (seq %d) of batch %s rejected: %s: %s", e.EventID, e.Seq, e.BatchID, e.Code, e.Message)
}

// TransportError is a connection error, timeout or retryable status (Status 0 for a connection error).
type TransportError struct {
	Status     int
	RetryAfter float64 // seconds; negative when the server gave none
	Refused    bool    // no connection could be made (nothing listens): the gateway did no work
	Msg        string
	Err        error
}

func (e *TransportError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("headwater: HTTP %d: %s", e.Status, e.Msg)
	}
	return "headwater: transport: " + e.Msg
}

func (e *TransportError) Unwrap() error { return e.Err }
