// One client's delivery machinery: queue -> batcher goroutine -> store (memory or spool) -> sender goroutines.
package headwater

import (
	"context"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"time"
)

// pipeline owns the goroutines: one batcher drains the queue into sealed batches (woken through a channel,
// never polling) and stores them, so events reach the spool even while every sender is retrying; MaxInFlight
// senders each take the oldest idle pending batch and deliver it, each request inside the adaptive in-flight
// window (limit.go) and the client's gate (gate.go).
type pipeline struct {
	cfg       *Config
	counters  *counters
	queue     *eventQueue
	store     *store
	spool     *diskSpool // nil without a spool directory
	shared    *shared
	tr        Transport
	sender    *sender
	recovered int64

	asmMu     sync.Mutex
	spare     []pending // the batcher's half of the queue's double buffer
	batcher   *batcher
	openSince time.Time // zero when no batch is open

	flushReq    atomic.Bool
	stopping    chan struct{} // closed at Close: the batcher seals everything and exits
	batcherDone chan struct{}
	ctx         context.Context // cancelled at the hard stop: senders abort
	cancel      context.CancelFunc
	senders     sync.WaitGroup
}

func newPipeline(cfg *Config) (*pipeline, error) {
	var roots *x509.CertPool // the CABundle's CAs; nil: the system's trust store
	if cfg.CABundle != "" && cfg.Transport == nil {
		var err error
		if roots, err = LoadCABundle(cfg.CABundle); err != nil {
			return nil, err
		}
	}
	p := &pipeline{cfg: cfg, counters: newCounters(), stopping: make(chan struct{}), batcherDone: make(chan struct{}),
		batcher: newBatcher(cfg.MaxBatchEvents, cfg.MaxBatchBytes)}
	producerID, nextSeq := newProducerID(), int64(0)
	reserve := func(int64) int64 { return 1<<63 - 1 }
	var back backing = memoryBacking{}
	maxBatches, maxBytes := cfg.MaxPendingBatches, int64(1)<<62
	if cfg.SpoolDir != "" {
		sp, err := openSpool(cfg.SpoolDir, cfg.SpoolFsync == "always")
		if err != nil {
			return nil, err
		}
		p.spool, back, reserve = sp, sp, sp.reserve
		producerID, nextSeq = sp.producerID, sp.nextSeq
		maxBatches, maxBytes = 1<<31, cfg.SpoolMaxBytes
	}
	var recovered []*entry
	if p.spool != nil {
		recovered, p.spool.recovered = p.spool.recovered, nil
	}
	p.store = newStore(back, maxBatches, maxBytes, cfg.SpoolOverflow, p.storeDropped, recovered)
	_, events, _ := p.store.stats()
	p.recovered = int64(events)
	p.shared = newShared(producerID, cfg.NodeID, cfg.Context)
	p.queue = newEventQueue(cfg.MaxQueueEvents, cfg.QueuePolicy, cfg.BlockTimeout, cfg.MaxBatchEvents, nextSeq, reserve)
	p.tr = cfg.Transport
	if p.tr == nil {
		p.tr = NewHTTPTransportWithCAs(cfg.ConnectionMaxAge, cfg.MaxInFlight, roots)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.sender = newSender(p.ctx, cfg, p.tr, p.counters, p.report, p.spool != nil)
	go p.batchLoop()
	for i := 0; i < cfg.MaxInFlight; i++ {
		p.senders.Add(1)
		go p.sendLoop()
	}
	return p, nil
}

// report passes err to OnError (default: a log line); a panicking callback is recovered and logged.
func (p *pipeline) report(err error) { callSafely(func() { p.cfg.OnError(err) }) }

func (p *pipeline) storeDropped(reason string, n int, detail string) {
	p.report(&EventsDroppedError{reason, n, detail})
	p.counters.settle(0, 0, reason, n, true)
}

// dropUnqueued counts an event refused by Track (it never had a seq) and returns the error.
func (p *pipeline) dropUnqueued(reason string) error {
	err := &EventsDroppedError{Reason: reason, Count: 1}
	p.report(err)
	p.counters.settle(0, 0, reason, 1, false)
	return err
}

// assemble encodes events and packs them; it returns the batches that filled up (and the open one if sealOpen).
func (p *pipeline) assemble(events []pending, sealOpen bool) []packed {
	p.asmMu.Lock()
	defer p.asmMu.Unlock()
	var sealed []packed
	for i := range events {
		e := &events[i]
		sealed = p.batcher.add(e.seq, e.env, sealed)
	}
	if sealOpen && p.batcher.len() > 0 {
		sealed = append(sealed, p.batcher.drain())
	}
	if p.batcher.len() == 0 {
		p.openSince = time.Time{}
	} else if p.openSince.IsZero() {
		p.openSince = time.Now()
	}
	return sealed
}

// seal stores packed batches; with wait (the batcher), a full store under backpressure makes it wait for room,
// so events stay in the queue and its policy applies, until Close.
func (p *pipeline) seal(packs []packed, wait bool) {
	for _, s := range packs {
		b := &Batch{ID: uuid7(nowMs()), ProducerID: p.shared.producerID, FirstSeq: s.seqs[0],
			LastSeq: s.seqs[len(s.seqs)-1], Events: s.events, Seqs: s.seqs}
		for wait && !p.store.waitForRoom(int64(b.nbytes()), time.Second) && !isClosed(p.stopping) {
		}
		p.store.append(b)
	}
}

func (p *pipeline) openDeadline() (time.Time, int) {
	p.asmMu.Lock()
	defer p.asmMu.Unlock()
	if p.openSince.IsZero() {
		return time.Time{}, p.batcher.len()
	}
	return p.openSince.Add(p.cfg.Linger), p.batcher.len()
}

// spill moves the whole queue into sealed batches in the spool, on the caller's goroutine (policy spill).
func (p *pipeline) spill() {
	p.asmMu.Lock()
	events := p.queue.take(nil)
	p.asmMu.Unlock()
	p.seal(p.assemble(events, true), false)
}

func (p *pipeline) batchLoop() {
	defer close(p.batcherDone)
	for {
		var timer *time.Timer
		var lingerC <-chan time.Time
		if due, _ := p.openDeadline(); !due.IsZero() {
			timer = time.NewTimer(time.Until(due))
			lingerC = timer.C
		}
		stopping := false
		select {
		case <-p.queue.wake:
		case <-lingerC:
		case <-p.stopping:
			stopping = true
		}
		if timer != nil {
			timer.Stop()
		}
		flush := p.flushReq.Swap(false) || stopping
		due, _ := p.openDeadline()
		expired := !due.IsZero() && !time.Now().Before(due)
		events := p.queue.take(p.spare)
		p.seal(p.assemble(events, flush || expired), true)
		clear(events) // drop references to the encoded properties
		p.spare = events[:0]
		if stopping {
			return
		}
		p.markIdle()
	}
}

// markIdle tells Track whether the batcher needs a wake-up for the next event. After declaring itself idle it
// looks at the queue again: a Track that read the flag just before it changed has not signalled.
func (p *pipeline) markIdle() {
	if _, open := p.openDeadline(); open > 0 {
		p.queue.idle.Store(false)
		return
	}
	p.queue.idle.Store(true)
	if queued, _, _ := p.queue.stats(); queued > 0 {
		p.queue.signal()
	}
}

func (p *pipeline) sendLoop() {
	defer p.senders.Done()
	for {
		b := p.store.nextReady(p.ctx.Done())
		if b == nil {
			return
		}
		act, parts := p.sender.deliver(b)
		switch act {
		case actAck:
			p.store.ack(b)
		case actSplit:
			p.store.replace(b, parts)
		case actRelease: // stopped, or past its deadline with a spool: the gate paces the next attempt
			p.store.release(b)
			if p.ctx.Err() != nil {
				return
			}
		}
	}
}

// flush asks for the open batch to be sealed and waits until every accepted event is settled.
func (p *pipeline) flush(ctx context.Context) bool {
	_, accepted, _ := p.queue.stats()
	p.flushReq.Store(true)
	p.queue.signal()
	return p.counters.waitSettled(ctx, accepted+p.recovered)
}

// shutdown flushes within ctx, then stops every goroutine; true if every accepted event was settled.
func (p *pipeline) shutdown(ctx context.Context) bool {
	p.sender.gate.wake(true) // every batch waiting in backoff is sent again now (protocol.md §6.3)
	settled := p.flush(ctx)
	next := p.queue.close()
	close(p.stopping)
	<-p.batcherDone
	p.cancel()
	p.store.stop()
	p.senders.Wait()
	queued, _, _ := p.queue.stats()
	leftover := queued + p.batcher.len()
	if p.spool == nil {
		_, pending, _ := p.store.stats()
		leftover += pending
	}
	if leftover > 0 {
		p.report(&EventsDroppedError{ReasonClosedUnsent, leftover, "client closed before delivery"})
		p.counters.settle(0, 0, ReasonClosedUnsent, leftover, true)
	}
	if p.spool != nil {
		p.spool.close(next)
	}
	p.tr.Close()
	return settled
}

func (p *pipeline) metrics() Metrics {
	m := p.counters.snapshot()
	queued, accepted, _ := p.queue.stats()
	_, open := p.openDeadline()
	m.Queued, m.Enqueued = queued+open, accepted
	m.PendingBatches, m.PendingEvents, m.SpoolBytes = p.store.stats()
	m.InFlightLimit, _ = p.sender.window.size()
	m.Endpoint, m.Failovers, m.Failbacks = p.sender.eps.stats()
	return m
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
