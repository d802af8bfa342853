// Tests of the disk spool: recovery after close, same ids on resend, quarantine, the lock, the file formats.
package headwater

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func failing() *fakeTransport {
	return &fakeTransport{handler: func(int, sentBatch) (*Response, error) { return nil, errors.New("connection refused") }}
}

func TestSpoolKeepsUndeliveredBatchesForTheNextClient(t *testing.T) {
	dir := t.TempDir()
	down := failing()
	c1 := newTestClient(t, down, WithSpoolDir(dir), WithRetry(time.Millisecond, 2*time.Millisecond, 20*time.Millisecond))
	producer := c1.ProducerID()
	for i := 0; i < 100; i++ {
		if err := c1.Track("x", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c1.Close(ctxTimeout(t, 300*time.Millisecond)); err == nil {
		t.Fatal("close must report undelivered events")
	}
	if m := c1.Metrics(); m.DroppedTotal() != 0 || m.PendingEvents != 100 {
		t.Fatalf("a spool must keep every event: %+v", m)
	}
	firstIDs := map[string]bool{} // the batches c1 left in the spool (only one was probing the failing gateway)
	files, _ := os.ReadDir(filepath.Join(dir, "batches"))
	for _, f := range files {
		name := strings.TrimSuffix(f.Name(), ".hwb")
		firstIDs[name[len(name)-36:]] = true
	}
	up := &fakeTransport{}
	c2 := newTestClient(t, up, WithSpoolDir(dir))
	if c2.ProducerID() != producer {
		t.Fatal("the producer id must survive a restart")
	}
	tracked, err := c2.TrackEvent("x", nil)
	if err != nil || tracked.Seq != 100 {
		t.Fatalf("the next seq must continue the sequence: %+v %v", tracked, err)
	}
	mustFlush(t, c2)
	got := seqsOf(up.sent())
	for s := int64(0); s <= 100; s++ {
		if got[s] != 1 {
			t.Fatalf("seq %d delivered %d times", s, got[s])
		}
	}
	for _, b := range up.sent() {
		if seqsOf([]sentBatch{b})[100] == 0 && !firstIDs[b.BatchID] {
			t.Fatalf("a resent batch must keep its batch_id, %s is new", b.BatchID)
		}
	}
	if err := c2.Close(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, "batches")); len(names) != 0 {
		t.Fatalf("acknowledged batch files must be deleted, %d left", len(names))
	}
}

func TestCorruptBatchFileIsQuarantinedAndCounted(t *testing.T) {
	dir := t.TempDir()
	c1 := newTestClient(t, failing(), WithSpoolDir(dir), WithRetry(time.Millisecond, 2*time.Millisecond, 10*time.Millisecond),
		WithBatching(5, 64<<10, time.Hour))
	for i := 0; i < 10; i++ {
		_ = c1.Track("x", nil)
	}
	_ = c1.Close(ctxTimeout(t, 200*time.Millisecond))
	names, _ := os.ReadDir(filepath.Join(dir, "batches"))
	if len(names) != 2 {
		t.Fatalf("want 2 batch files, got %d", len(names))
	}
	victim := filepath.Join(dir, "batches", names[0].Name())
	data, _ := os.ReadFile(victim)
	data[len(data)-3] ^= 0xff
	if err := os.WriteFile(victim, data, 0o600); err != nil {
		t.Fatal(err)
	}
	up := &fakeTransport{}
	c2 := newTestClient(t, up, WithSpoolDir(dir))
	mustSettleWithLoss(t, c2)
	m := c2.Metrics()
	if m.Dropped[ReasonSpoolCorrupt] != 5 || m.Acknowledged != 5 {
		t.Fatalf("metrics %+v", m)
	}
	if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) != 1 {
		t.Fatalf("want the file in quarantine, got %d", len(q))
	}
}

func TestSpoolDirectoryHasOneOwner(t *testing.T) {
	dir := t.TempDir()
	newTestClient(t, &fakeTransport{}, WithSpoolDir(dir))
	_, err := New("http://gateway.test", "wk", WithSpoolDir(dir), WithTransport(&fakeTransport{}))
	var locked *SpoolLockedError
	if !errors.As(err, &locked) {
		t.Fatalf("want SpoolLockedError, got %v", err)
	}
}

func TestSeqReservationSurvivesACrash(t *testing.T) {
	dir := t.TempDir()
	sp, err := openSpool(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if end := sp.reserve(0); end != seqReservation {
		t.Fatal(end)
	}
	_ = sp.lockFile.Close() // a crash: no close(next)
	sp2, err := openSpool(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sp2.close(sp2.nextSeq)
	if sp2.nextSeq != seqReservation || sp2.producerID != sp.producerID {
		t.Fatalf("after a crash the next seq must pass the reservation: %d", sp2.nextSeq)
	}
}

func TestSpoolFormatsRoundTrip(t *testing.T) {
	b := &Batch{ID: "0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a10", ProducerID: "p", FirstSeq: 7, LastSeq: 9,
		Events: [][]byte{[]byte(`{"event_id":"a","seq":7}`), []byte(`{"event_id":"b","seq":9}`)}}
	got, err := decodeBatchFile(encodeBatchFile(b))
	if err != nil || got.ID != b.ID || len(got.Events) != 2 || got.Seqs[1] != 9 {
		t.Fatalf("%+v %v", got, err)
	}
	if name := batchFileName(b); name != "00000000000000000007-00000000000000000009-"+b.ID+".hwb" {
		t.Fatal(name)
	}
	if first, last, id, err := parseBatchFileName(batchFileName(b)); err != nil || first != 7 || last != 9 || id != b.ID {
		t.Fatal(first, last, id, err)
	}
	if stateCRC("abc", 5) != 3402955083 { // zlib.crc32(b"abc:5") in Python
		t.Fatal("state checksum differs from the Python SDK's")
	}
	// a state file as the Python SDK writes it (json.dumps with spaces)
	pid, next, err := decodeState([]byte(`{"producer_id": "abc", "next_seq": 5, "crc": 3402955083}`))
	if err != nil || pid != "abc" || next != 5 {
		t.Fatal(pid, next, err)
	}
	for _, bad := range [][]byte{nil, []byte("HWB1"), append([]byte("XXXX"), encodeBatchFile(b)[4:]...)} {
		if _, err := decodeBatchFile(bad); !errors.Is(err, errCorrupt) {
			t.Fatalf("want errCorrupt for %q", bad)
		}
	}
}

func TestCloseFlushesQueuedEventsIntoTheSpool(t *testing.T) {
	dir := t.TempDir()
	c := newTestClient(t, failing(), WithSpoolDir(dir), WithLinger(time.Hour), WithRetry(time.Millisecond, time.Millisecond, time.Hour))
	for i := 0; i < 7; i++ {
		_ = c.Track("x", nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = c.Close(ctx)
	names, _ := os.ReadDir(filepath.Join(dir, "batches"))
	if len(names) != 1 || c.Metrics().DroppedTotal() != 0 {
		t.Fatalf("queued events must be sealed into the spool at close: %d files, %+v", len(names), c.Metrics())
	}
}

// copyDir copies a fixture directory (files only, one level of subdirectories).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestResendsASpoolWrittenByThePythonSDK(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, "testdata/python-spool", dir) // written by sdk-python's _spoolfile.encode_batch / encode_state
	up := &fakeTransport{}
	c := newTestClient(t, up, WithSpoolDir(dir), WithMaxInFlight(1)) // one sender: the recovered batch goes first
	if c.ProducerID() != "5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d" {
		t.Fatal(c.ProducerID())
	}
	tracked, _ := c.TrackEvent("x", nil)
	mustFlush(t, c)
	sent := up.sent()
	if tracked.Seq != 43 || len(sent) != 2 || sent[0].BatchID != "0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a10" ||
		len(sent[0].Events) != 3 || sent[0].Events[2]["seq"].(float64) != 42 {
		t.Fatalf("tracked %+v, sent %+v", tracked, sent)
	}
}
