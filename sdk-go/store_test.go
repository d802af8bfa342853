// Tests of the ordered store over a fake backing: order, in flight, splits, bounds, batches it cannot load.
package headwater

import (
	"fmt"
	"reflect"
	"testing"
)

// fakeBacking records what the store asks of it; unusable batch ids load as nil (as a corrupt spool file does).
type fakeBacking struct {
	persisted, removed []string
	unusable           map[string]bool
}

func (f *fakeBacking) persist(b *Batch) *entry {
	f.persisted = append(f.persisted, b.ID)
	return memoryBacking{}.persist(b)
}

func (f *fakeBacking) load(e *entry) *Batch {
	if f.unusable[e.batchID] {
		return nil
	}
	return e.batch
}

func (f *fakeBacking) remove(e *entry) { f.removed = append(f.removed, e.batchID) }

type drops []string

func (d *drops) add(reason string, count int, _ string) {
	*d = append(*d, fmt.Sprintf("%s:%d", reason, count))
}

func testBatch(id string, first int64, n int) *Batch {
	b := &Batch{ID: id, ProducerID: "p", FirstSeq: first, LastSeq: first + int64(n) - 1}
	for s := first; s < first+int64(n); s++ {
		b.Events = append(b.Events, []byte(fmt.Sprintf(`{"seq":%d}`, s)))
		b.Seqs = append(b.Seqs, s)
	}
	return b
}

// ready returns the next ready batch's id, "" when none is ready now.
func ready(s *store) string {
	stop := make(chan struct{})
	close(stop)
	if b := s.nextReady(stop); b != nil {
		return b.ID
	}
	return ""
}

func TestStoreHandsOutOldestFirstAndReleaseKeepsThePlace(t *testing.T) {
	back, d := &fakeBacking{}, &drops{}
	s := newStore(back, 100, 1<<30, OverflowBackpressure, d.add, nil)
	a, b := testBatch("a", 0, 2), testBatch("b", 2, 2)
	s.append(a)
	s.append(b)
	if got := []string{ready(s), ready(s), ready(s)}; !reflect.DeepEqual(got, []string{"a", "b", ""}) {
		t.Fatalf("order %v", got)
	}
	s.release(a)
	if got := ready(s); got != "a" {
		t.Fatalf("a released batch goes first again, got %q", got)
	}
	s.ack(a)
	if n, ev, _ := s.stats(); n != 1 || ev != 2 || !reflect.DeepEqual(back.removed, []string{"a"}) {
		t.Fatalf("after ack: %d batches, %d events, removed %v", n, ev, back.removed)
	}
}

func TestStoreSplitTakesTheParentsPlace(t *testing.T) {
	back, d := &fakeBacking{}, &drops{}
	s := newStore(back, 100, 1<<30, OverflowBackpressure, d.add, nil)
	parent := testBatch("a", 0, 4)
	s.append(parent)
	s.append(testBatch("b", 4, 2))
	ready(s)
	s.replace(parent, []*Batch{testBatch("a0", 0, 2), testBatch("a1", 2, 2)})
	if got := []string{ready(s), ready(s), ready(s)}; !reflect.DeepEqual(got, []string{"a0", "a1", "b"}) {
		t.Fatalf("order %v", got)
	}
	if !reflect.DeepEqual(back.removed, []string{"a"}) {
		t.Fatalf("removed %v", back.removed)
	}
}

func TestStoreDropsWhatTheBackingCannotLoad(t *testing.T) {
	back, d := &fakeBacking{unusable: map[string]bool{"a": true}}, &drops{}
	s := newStore(back, 100, 1<<30, OverflowBackpressure, d.add, nil)
	s.append(testBatch("a", 0, 3))
	s.append(testBatch("b", 3, 2))
	if got := ready(s); got != "b" || !reflect.DeepEqual(*d, drops{ReasonSpoolCorrupt + ":3"}) {
		t.Fatalf("got %q, drops %v", got, *d)
	}
}

func TestStoreDropOldestMakesRoomFromTheOldestIdleBatch(t *testing.T) {
	back, d := &fakeBacking{}, &drops{}
	s := newStore(back, 2, 1<<30, OverflowDropOldest, d.add, nil)
	for i, id := range []string{"a", "b", "c"} {
		s.append(testBatch(id, int64(2*i), 2))
	}
	if !reflect.DeepEqual(*d, drops{ReasonStoreFullOldest + ":2"}) || !reflect.DeepEqual(back.removed, []string{"a"}) {
		t.Fatalf("drops %v, removed %v", *d, back.removed)
	}
	if got := ready(s); got != "b" {
		t.Fatalf("got %q", got)
	}
}

func TestStoreQueuesRecoveredEntriesFirst(t *testing.T) {
	back, d := &fakeBacking{}, &drops{}
	old := memoryBacking{}.persist(testBatch("old", 0, 2))
	s := newStore(back, 100, 1<<30, OverflowBackpressure, d.add, []*entry{old})
	s.append(testBatch("new", 2, 2))
	if got := ready(s); got != "old" || !reflect.DeepEqual(back.persisted, []string{"new"}) {
		t.Fatalf("got %q, persisted %v", got, back.persisted)
	}
}
