// The bounded in-memory event queue between Track and the batcher goroutine, its full-queue policies and seqs.
package headwater

import (
	"sync"
	"sync/atomic"
	"time"
)

// broadcast is a channel closed on the next notify; the owner's mutex guards it.
type broadcast struct{ ch chan struct{} }

func (b *broadcast) wait() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// putResult says what happened to an event offered to the queue.
type putResult int

const (
	putAccepted putResult = iota
	putEvicted            // accepted; the oldest queued event was dropped (drop_oldest)
	putFull               // refused: the queue is full (drop_newest, spill) or stayed full (block)
)

// eventQueue is a bounded FIFO; it assigns each accepted event its seq, gapless over accepted events.
//
// Wake-ups: an idle batcher is woken by the first queued event; a batcher with an open batch sleeps until its
// linger is due, or until the queue alone holds a full batch (two wake-ups per batch, not one per event).
//
// Policies when full: drop_newest refuses, drop_oldest evicts the oldest queued event (its seq becomes a
// counted gap), block waits up to blockTimeout for room, spill refuses so the caller moves the queue to the
// spool and offers again.
type eventQueue struct {
	mu           sync.Mutex
	items        []pending
	head         int
	max          int
	policy       QueuePolicy
	blockTimeout time.Duration
	batchEvents  int
	room         broadcast
	wake         chan struct{}
	idle         atomic.Bool // the batcher has no open batch: the first queued event must wake it
	nextSeq      int64
	reserved     int64                  // seqs below this are reserved (persisted) for handing out
	reserve      func(next int64) int64 // persists a reservation from next on; returns its end
	accepted     int64
	closed       bool
}

func newEventQueue(max int, policy QueuePolicy, blockTimeout time.Duration, batchEvents int, nextSeq int64,
	reserve func(int64) int64) *eventQueue {
	q := &eventQueue{max: max, policy: policy, blockTimeout: blockTimeout, batchEvents: batchEvents,
		wake: make(chan struct{}, 1), nextSeq: nextSeq, reserved: nextSeq, reserve: reserve}
	q.idle.Store(true)
	return q
}

func (q *eventQueue) lenLocked() int { return len(q.items) - q.head }

// put offers e; on acceptance e gets its seq (returned) before put returns.
func (q *eventQueue) put(e pending) (putResult, int64) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return putFull, -1
	}
	result := putAccepted
	if q.lenLocked() >= q.max {
		switch q.policy {
		case "drop_oldest":
			q.items[q.head] = pending{}
			q.head++
			if q.head >= q.max { // compact, so evictions never grow the slice
				n := copy(q.items, q.items[q.head:])
				clear(q.items[n:])
				q.items, q.head = q.items[:n], 0
			}
			result = putEvicted
		case "block":
			if !q.waitForRoomLocked() {
				q.mu.Unlock()
				return putFull, -1
			}
		default:
			q.mu.Unlock()
			return putFull, -1
		}
	}
	if q.nextSeq >= q.reserved {
		q.reserved = q.reserve(q.nextSeq)
	}
	e.finish(q.nextSeq)
	q.nextSeq++
	q.accepted++
	q.items = append(q.items, e)
	n := q.lenLocked()
	q.mu.Unlock()
	if n == 1 && q.idle.Load() || n == q.batchEvents {
		q.signal()
	}
	return result, e.seq
}

func (q *eventQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// waitForRoomLocked waits (lock released meanwhile) up to blockTimeout for room; false on timeout.
func (q *eventQueue) waitForRoomLocked() bool {
	timer := time.NewTimer(q.blockTimeout)
	defer timer.Stop()
	for q.lenLocked() >= q.max {
		if q.closed {
			return false
		}
		ch := q.room.wait()
		q.mu.Unlock()
		q.signal()
		select {
		case <-ch:
			q.mu.Lock()
		case <-timer.C:
			q.mu.Lock()
			return q.lenLocked() < q.max
		}
	}
	return true
}

// take removes and returns every queued event, oldest first; spare (emptied) becomes the queue's next buffer,
// so the batcher and the queue swap two slices instead of copying.
func (q *eventQueue) take(spare []pending) []pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lenLocked() == 0 {
		return spare[:0]
	}
	out := q.items[q.head:]
	q.items, q.head = spare[:0], 0
	q.room.notify()
	return out
}

// stats returns (events queued now, events ever accepted, next seq).
func (q *eventQueue) stats() (int, int64, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lenLocked(), q.accepted, q.nextSeq
}

// close refuses every later put and wakes blocked ones; returns the next seq.
func (q *eventQueue) close() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.room.notify()
	return q.nextSeq
}
