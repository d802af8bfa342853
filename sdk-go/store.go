// Pending batches between sealing and acknowledgement: the ordered store over a backing (memory or disk).
package headwater

import (
	"sync"
	"time"
)

// entry is one pending batch: its seq range and size, and the batch itself and/or the file holding it.
type entry struct {
	batchID  string
	first    int64
	last     int64
	count    int
	nbytes   int64
	batch    *Batch // nil when only on disk
	path     string // "" when only in memory
	inFlight bool
}

// backing decides where a store's batches live (memory or spool files); load and remove are called with the
// store's lock held, persist without it (from the one goroutine that seals, or from replace under the lock).
type backing interface {
	persist(b *Batch) *entry
	load(e *entry) *Batch // nil: unusable (quarantined by the backing)
	remove(e *entry)
}

// dropFunc reports events dropped by the store: (reason, count, detail).
type dropFunc func(reason string, count int, detail string)

// store keeps pending batches in seq order with bounds and an overflow policy, modelled on the OpenTelemetry
// Collector's persistent queue: batches are appended, handed to senders (in flight until acked), acked after a
// final answer, released to be sent again, or replaced by their halves after a 413.
type store struct {
	mu         sync.Mutex
	back       backing
	entries    []*entry
	maxBatches int
	maxBytes   int64
	overflow   SpoolOverflow
	report     dropFunc
	bytes      int64
	events     int
	changed    broadcast
	stopped    bool
	reports    []EventsDroppedError
}

// newStore makes a store over back; recovered (entries back found at start: a spool's files) are queued first.
func newStore(back backing, maxBatches int, maxBytes int64, overflow SpoolOverflow, report dropFunc,
	recovered []*entry) *store {
	s := &store{back: back, maxBatches: maxBatches, maxBytes: maxBytes, overflow: overflow, report: report}
	for _, e := range recovered {
		s.addLocked(e, len(s.entries))
	}
	return s
}

func (s *store) fullLocked(size int64) bool {
	return len(s.entries) > 0 && (len(s.entries) >= s.maxBatches || s.bytes+size > s.maxBytes)
}

// waitForRoom blocks (backpressure) until a batch of size bytes fits, up to timeout; false on timeout or stop.
func (s *store) waitForRoom(size int64, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.overflow != "drop_oldest" && s.fullLocked(size) && !s.stopped {
		ch := s.changed.wait()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			s.mu.Lock()
			return false
		}
		s.mu.Lock()
	}
	return !s.stopped
}

// append keeps b; when full, drop_oldest drops the oldest idle batch, else b itself is dropped (store_full).
// The batch is persisted (file write and fsync for a spool) outside the lock, so senders are not held up.
func (s *store) append(b *Batch) bool {
	size := int64(b.nbytes())
	s.mu.Lock()
	room := true
	for s.fullLocked(size) {
		victim := s.oldestIdleLocked()
		if s.overflow != "drop_oldest" || victim == nil {
			s.reports = append(s.reports, EventsDroppedError{ReasonStoreFull, len(b.Events), "batch " + b.ID + " not kept"})
			room = false
			break
		}
		s.dropLocked(victim, ReasonStoreFullOldest)
	}
	s.mu.Unlock()
	if room {
		e := s.back.persist(b)
		s.mu.Lock()
		s.addLocked(e, len(s.entries))
		s.changed.notify()
		s.mu.Unlock()
	}
	s.sendReports()
	return room
}

func (s *store) oldestIdleLocked() *entry {
	for _, e := range s.entries {
		if !e.inFlight {
			return e
		}
	}
	return nil
}

func (s *store) addLocked(e *entry, at int) {
	s.entries = append(s.entries, nil)
	copy(s.entries[at+1:], s.entries[at:])
	s.entries[at] = e
	s.bytes += e.nbytes
	s.events += e.count
}

func (s *store) indexLocked(batchID string) int {
	for i, e := range s.entries {
		if e.batchID == batchID {
			return i
		}
	}
	return -1
}

func (s *store) discardLocked(e *entry) {
	i := s.indexLocked(e.batchID)
	if i < 0 {
		return
	}
	copy(s.entries[i:], s.entries[i+1:])
	s.entries[len(s.entries)-1] = nil
	s.entries = s.entries[:len(s.entries)-1]
	s.bytes -= e.nbytes
	s.events -= e.count
	s.back.remove(e)
}

func (s *store) dropLocked(e *entry, reason string) {
	s.discardLocked(e)
	s.reports = append(s.reports, EventsDroppedError{reason, e.count, "batch " + e.batchID})
}

// sendReports passes drops to report outside the lock (a callback may call back into the client).
func (s *store) sendReports() {
	s.mu.Lock()
	reports := s.reports
	s.reports = nil
	s.mu.Unlock()
	for _, r := range reports {
		s.report(r.Reason, r.Count, r.Detail)
	}
}

// nextReady returns the oldest idle batch, now in flight; it waits until there is one or stop is closed.
func (s *store) nextReady(stop <-chan struct{}) *Batch {
	defer s.sendReports()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for e := s.oldestIdleLocked(); e != nil; e = s.oldestIdleLocked() {
			if b := s.back.load(e); b != nil {
				e.inFlight = true
				return b
			}
			s.dropLocked(e, ReasonSpoolCorrupt)
		}
		ch := s.changed.wait()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			s.mu.Lock()
			return nil
		}
		s.mu.Lock()
	}
}

// ack forgets an in-flight batch: delivered or refused for good.
func (s *store) ack(b *Batch) {
	s.mu.Lock()
	if i := s.indexLocked(b.ID); i >= 0 {
		s.discardLocked(s.entries[i])
	}
	s.changed.notify()
	s.mu.Unlock()
}

// release gives an in-flight batch back; it keeps its place in line.
func (s *store) release(b *Batch) {
	s.mu.Lock()
	if i := s.indexLocked(b.ID); i >= 0 {
		s.entries[i].inFlight = false
	}
	s.changed.notify()
	s.mu.Unlock()
}

// replace puts parts (persisted first) where the in-flight batch b was, then forgets b.
func (s *store) replace(b *Batch, parts []*Batch) {
	s.mu.Lock()
	i := s.indexLocked(b.ID)
	at := i
	if at < 0 {
		at = 0
	}
	for k, p := range parts {
		s.addLocked(s.back.persist(p), at+k)
	}
	if i >= 0 {
		s.discardLocked(s.entries[i+len(parts)])
	}
	s.changed.notify()
	s.mu.Unlock()
}

// stats returns (pending batches, pending events, bytes held).
func (s *store) stats() (int, int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries), s.events, s.bytes
}

// stop wakes every waiter for good (at close).
func (s *store) stop() {
	s.mu.Lock()
	s.stopped = true
	s.changed.notify()
	s.mu.Unlock()
}

// memoryBacking keeps batches in memory only: lost with the process.
type memoryBacking struct{}

func (memoryBacking) persist(b *Batch) *entry {
	return &entry{batchID: b.ID, first: b.FirstSeq, last: b.LastSeq, count: len(b.Events), nbytes: int64(b.nbytes()), batch: b}
}
func (memoryBacking) load(e *entry) *Batch { return e.batch }
func (memoryBacking) remove(*entry)        {}
