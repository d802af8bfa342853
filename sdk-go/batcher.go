// Batch assembly: packing envelopes into batches of at most N events and a byte cap, and the sealed Batch.
package headwater

// bodyOverhead is the bytes of a JSON batch body around its events.
const bodyOverhead = 256

// Batch is a sealed batch: its id (reused on every retry), producer, seqs and encoded event envelopes.
type Batch struct {
	ID         string
	ProducerID string
	FirstSeq   int64
	LastSeq    int64
	Events     [][]byte // each event's JSON envelope
	Seqs       []int64  // the seq of each event (ascending; gaps where events were dropped after acceptance)
	sentAt     int64    // epoch ms of the first send, kept for retries in this process
}

// nbytes is the size of the encoded events.
func (b *Batch) nbytes() int {
	n := 0
	for _, e := range b.Events {
		n += len(e)
	}
	return n
}

// batcher packs envelopes in order into batches bounded by maxEvents and maxBytes (events + overhead).
type batcher struct {
	maxEvents int
	maxBytes  int
	events    [][]byte
	seqs      []int64
	bytes     int
}

func newBatcher(maxEvents, maxBytes int) *batcher {
	return &batcher{maxEvents: maxEvents, maxBytes: maxBytes, bytes: bodyOverhead}
}

// fitsAlone reports whether an event of size bytes fits in an empty batch.
func (b *batcher) fitsAlone(size int) bool { return bodyOverhead+size+1 <= b.maxBytes }

// add appends one envelope and returns the batches that became full (0, 1 or 2).
func (b *batcher) add(seq int64, env []byte, sealed []packed) []packed {
	if len(b.events) > 0 && b.bytes+len(env)+1 > b.maxBytes {
		sealed = append(sealed, b.drain())
	}
	b.events = append(b.events, env)
	b.seqs = append(b.seqs, seq)
	b.bytes += len(env) + 1
	if len(b.events) >= b.maxEvents {
		sealed = append(sealed, b.drain())
	}
	return sealed
}

// packed is the content of one sealed batch.
type packed struct {
	events [][]byte
	seqs   []int64
}

// drain seals the open batch.
func (b *batcher) drain() packed {
	out := packed{b.events, b.seqs}
	b.events, b.seqs, b.bytes = nil, nil, bodyOverhead
	return out
}

func (b *batcher) len() int { return len(b.events) }
