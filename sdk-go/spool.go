// The crash-safe disk spool: every sealed batch is a checksummed file until the gateway answered it for good.
//
// A batch is written to a temporary file, fsynced (SpoolFsync "always"; "never" survives a process crash or
// kill -9 but not a power loss), renamed into batches/, and only then handed to the senders. Acknowledged or
// refused batches are unlinked. At start leftover temporary files are removed and every batch file is queued
// again in seq order; a file that fails its checksum is moved to quarantine/ (the newest 100 are kept) and its
// events are counted as dropped (spool_corrupt). The producer id and a seq reservation live in state.json:
// Track hands out seqs only below a persisted reservation, so a restarted producer never reuses a seq (the
// unused rest of a reservation after a crash shows as a gap). One live client owns a directory (flock on lock).
package headwater

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

const (
	quarantineKeep = 100
	seqReservation = 4096     // seqs reserved per state.json write
	spoolCacheMax  = 32 << 20 // bytes of spooled batches also kept in memory (saves re-reading them)
)

// diskSpool is the disk backing of a store (its files), the producer id and the seq reservation; recovered
// holds the batch files found at start, in seq order, for the store to queue first.
type diskSpool struct {
	dir, batches, quarantine, statePath string
	fsync                               bool
	lockFile                            *os.File
	producerID                          string
	nextSeq                             int64
	recovered                           []*entry
	cached                              atomic.Int64 // bytes of batches also kept in memory
	stateMu                             sync.Mutex
}

// openSpool locks dir, recovers its batch files and state.
func openSpool(dir string, fsync bool) (*diskSpool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &ConfigError{"SpoolDir " + dir + ": " + err.Error()}
	}
	sp := &diskSpool{dir: abs, batches: filepath.Join(abs, "batches"), quarantine: filepath.Join(abs, "quarantine"),
		statePath: filepath.Join(abs, "state.json"), fsync: fsync}
	for _, d := range []string{abs, sp.batches, sp.quarantine} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, &ConfigError{"SpoolDir " + dir + ": " + err.Error()}
		}
	}
	if sp.lockFile, err = lockDir(filepath.Join(abs, "lock")); err != nil {
		if errors.Is(err, errLocked) {
			return nil, &SpoolLockedError{Dir: abs}
		}
		return nil, &ConfigError{"SpoolDir " + dir + ": " + err.Error()}
	}
	if err := sp.recover(); err != nil {
		_ = sp.lockFile.Close()
		return nil, &ConfigError{"SpoolDir " + dir + ": " + err.Error()}
	}
	return sp, nil
}

func (sp *diskSpool) recover() error {
	names, err := os.ReadDir(sp.batches)
	if err != nil {
		return err
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name() < names[j].Name() })
	var filesNext int64
	for _, d := range names {
		path := filepath.Join(sp.batches, d.Name())
		if filepath.Ext(d.Name()) == ".tmp" {
			_ = os.Remove(path)
			continue
		}
		first, last, id, perr := parseBatchFileName(d.Name())
		info, serr := d.Info()
		if perr != nil || serr != nil {
			sp.moveToQuarantine(path)
			continue
		}
		filesNext = max(filesNext, last+1)
		sp.recovered = append(sp.recovered, &entry{batchID: id, first: first, last: last,
			count: int(last - first + 1), nbytes: info.Size(), path: path})
	}
	pid, next, serr := sp.readState()
	if serr != nil {
		pid = sp.producerOfFiles()
	}
	if pid == "" {
		pid = newProducerID()
	}
	sp.producerID, sp.nextSeq = pid, max(next, filesNext)
	if len(sp.recovered) > 0 {
		slog.Info("headwater spool: batches to resend", "dir", sp.dir, "producer_id", pid, "next_seq", sp.nextSeq,
			"batches", len(sp.recovered))
	}
	return writeAtomic(sp.statePath, encodeState(pid, sp.nextSeq), sp.fsync)
}

func (sp *diskSpool) readState() (string, int64, error) {
	data, err := os.ReadFile(sp.statePath)
	if err != nil {
		return "", 0, err
	}
	pid, next, err := decodeState(data)
	if err != nil {
		slog.Warn("headwater spool: state file unusable; quarantined", "error", err)
		sp.moveToQuarantine(sp.statePath)
	}
	return pid, next, err
}

func (sp *diskSpool) producerOfFiles() string {
	for _, e := range sp.recovered {
		if data, err := os.ReadFile(e.path); err == nil {
			if b, err := decodeBatchFile(data); err == nil {
				return b.ProducerID
			}
		}
	}
	return ""
}

// reserve persists a seq reservation from next on and returns its end (called under the queue's lock).
func (sp *diskSpool) reserve(next int64) int64 {
	end := next + seqReservation
	sp.stateMu.Lock()
	defer sp.stateMu.Unlock()
	if err := writeAtomic(sp.statePath, encodeState(sp.producerID, end), sp.fsync); err != nil {
		slog.Warn("headwater spool: cannot persist the seq reservation; a crash may reuse seqs", "error", err)
	}
	return end
}

func (sp *diskSpool) persist(b *Batch) *entry {
	e := memoryBacking{}.persist(b)
	path := filepath.Join(sp.batches, batchFileName(b))
	if err := writeAtomic(path, encodeBatchFile(b), sp.fsync); err != nil {
		slog.Warn("headwater spool: cannot write a batch file; batch kept in memory only", "path", path, "error", err)
		return e
	}
	e.path = path
	if sp.cached.Add(e.nbytes) > spoolCacheMax {
		sp.cached.Add(-e.nbytes)
		e.batch = nil
	}
	return e
}

func (sp *diskSpool) load(e *entry) *Batch {
	if e.batch != nil || e.path == "" {
		return e.batch
	}
	data, err := os.ReadFile(e.path)
	var b *Batch
	if err == nil {
		b, err = decodeBatchFile(data)
	}
	if err != nil {
		slog.Warn("headwater spool: batch file unusable; quarantined", "path", e.path, "error", err)
		sp.moveToQuarantine(e.path)
		e.path = ""
		return nil
	}
	return b
}

func (sp *diskSpool) remove(e *entry) {
	if e.path == "" {
		return
	}
	if e.batch != nil {
		sp.cached.Add(-e.nbytes)
	}
	if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("headwater spool: cannot delete a batch file", "path", e.path, "error", err)
	}
	e.path = ""
}

func (sp *diskSpool) moveToQuarantine(path string) {
	if err := os.Rename(path, filepath.Join(sp.quarantine, filepath.Base(path))); err != nil {
		_ = os.Remove(path)
		return
	}
	kept, err := os.ReadDir(sp.quarantine)
	if err != nil || len(kept) <= quarantineKeep {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	files := make([]aged, 0, len(kept))
	for _, d := range kept {
		if info, err := d.Info(); err == nil {
			files = append(files, aged{d.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod < files[j].mod })
	for _, f := range files[:max(0, len(files)-quarantineKeep)] {
		_ = os.Remove(filepath.Join(sp.quarantine, f.name))
	}
}

// close persists the exact next seq and releases the directory; pending files stay for the next client.
func (sp *diskSpool) close(next int64) {
	sp.stateMu.Lock()
	defer sp.stateMu.Unlock()
	if sp.lockFile == nil {
		return
	}
	if err := writeAtomic(sp.statePath, encodeState(sp.producerID, next), sp.fsync); err != nil {
		slog.Warn("headwater spool: cannot write the state file", "error", err)
	}
	_ = sp.lockFile.Close()
	sp.lockFile = nil
}
