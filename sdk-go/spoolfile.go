// The spool's on-disk formats (the same as the Python SDK's): checksummed batch files, the state file, atomic writes.
//
// Batch file batches/<first_seq:020>-<last_seq:020>-<batch_id>.hwb: "HWB1", payload length (u32 BE), CRC-32
// (IEEE) of the payload (u32 BE), payload. The payload is a length-prefixed (u32 BE) JSON header {"batch_id",
// "producer_id", "first_seq", "last_seq"} followed by each event's JSON envelope, each length-prefixed. State
// file state.json: {"producer_id", "next_seq", "crc"} with crc = CRC-32 of "<producer_id>:<next_seq>".
package headwater

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	spoolMagic  = "HWB1"
	spoolSuffix = ".hwb"
	headSize    = 12
)

var errCorrupt = errors.New("corrupt spool file")

type batchHeader struct {
	BatchID    string `json:"batch_id"`
	ProducerID string `json:"producer_id"`
	FirstSeq   int64  `json:"first_seq"`
	LastSeq    int64  `json:"last_seq"`
}

// batchFileName sorts in seq order.
func batchFileName(b *Batch) string {
	return fmt.Sprintf("%020d-%020d-%s%s", b.FirstSeq, b.LastSeq, b.ID, spoolSuffix)
}

// parseBatchFileName returns (first, last, batch id) of a batch file name.
func parseBatchFileName(name string) (int64, int64, string, error) {
	parts := strings.SplitN(strings.TrimSuffix(name, spoolSuffix), "-", 3)
	if !strings.HasSuffix(name, spoolSuffix) || len(parts) != 3 {
		return 0, 0, "", fmt.Errorf("%w: bad name %q", errCorrupt, name)
	}
	first, err1 := strconv.ParseInt(parts[0], 10, 64)
	last, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, "", fmt.Errorf("%w: bad name %q", errCorrupt, name)
	}
	return first, last, parts[2], nil
}

// encodeBatchFile is the bytes of a batch file.
func encodeBatchFile(b *Batch) []byte {
	header, _ := json.Marshal(batchHeader{b.ID, b.ProducerID, b.FirstSeq, b.LastSeq}) // plain fields always encode
	size := 4 + len(header)
	for _, e := range b.Events {
		size += 4 + len(e)
	}
	out := make([]byte, headSize, headSize+size)
	out = binary.BigEndian.AppendUint32(out, uint32(len(header)))
	out = append(out, header...)
	for _, e := range b.Events {
		out = binary.BigEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
	}
	copy(out, spoolMagic)
	binary.BigEndian.PutUint32(out[4:], uint32(len(out)-headSize))
	binary.BigEndian.PutUint32(out[8:], crc32.ChecksumIEEE(out[headSize:]))
	return out
}

// decodeBatchFile parses a batch file; errCorrupt on a bad magic, length, checksum or structure.
func decodeBatchFile(data []byte) (*Batch, error) {
	if len(data) < headSize || string(data[:4]) != spoolMagic {
		return nil, fmt.Errorf("%w: bad magic or truncated header", errCorrupt)
	}
	payload := data[headSize:]
	if int(binary.BigEndian.Uint32(data[4:])) != len(payload) || crc32.ChecksumIEEE(payload) != binary.BigEndian.Uint32(data[8:]) {
		return nil, fmt.Errorf("%w: bad length or checksum", errCorrupt)
	}
	var chunks [][]byte
	for pos := 0; pos < len(payload); {
		if pos+4 > len(payload) {
			return nil, fmt.Errorf("%w: truncated chunk length", errCorrupt)
		}
		n := int(binary.BigEndian.Uint32(payload[pos:]))
		pos += 4
		if n > len(payload)-pos {
			return nil, fmt.Errorf("%w: chunk past the end", errCorrupt)
		}
		chunks = append(chunks, payload[pos:pos+n])
		pos += n
	}
	var h batchHeader
	if len(chunks) < 2 || json.Unmarshal(chunks[0], &h) != nil || h.BatchID == "" {
		return nil, fmt.Errorf("%w: bad structure", errCorrupt)
	}
	b := &Batch{ID: h.BatchID, ProducerID: h.ProducerID, FirstSeq: h.FirstSeq, LastSeq: h.LastSeq, Events: chunks[1:]}
	b.Seqs = make([]int64, len(b.Events))
	for i, e := range b.Events {
		if _, b.Seqs[i] = envelopeIDs(e); b.Seqs[i] < 0 {
			return nil, fmt.Errorf("%w: event %d has no seq", errCorrupt, i)
		}
	}
	return b, nil
}

type stateDoc struct {
	ProducerID string `json:"producer_id"`
	NextSeq    int64  `json:"next_seq"`
	CRC        uint32 `json:"crc"`
}

func stateCRC(producerID string, next int64) uint32 {
	return crc32.ChecksumIEEE([]byte(producerID + ":" + strconv.FormatInt(next, 10)))
}

func encodeState(producerID string, next int64) []byte {
	out, _ := json.Marshal(stateDoc{producerID, next, stateCRC(producerID, next)}) // plain fields always encode
	return out
}

func decodeState(data []byte) (string, int64, error) {
	var s stateDoc
	if err := json.Unmarshal(data, &s); err != nil || s.ProducerID == "" {
		return "", 0, fmt.Errorf("%w: unreadable state file", errCorrupt)
	}
	if s.NextSeq < 0 || stateCRC(s.ProducerID, s.NextSeq) != s.CRC {
		return "", 0, fmt.Errorf("%w: state file checksum mismatch", errCorrupt)
	}
	return s.ProducerID, s.NextSeq, nil
}

// writeAtomic writes path through a temporary file and a rename; with fsync, file and directory reach the disk.
func writeAtomic(path string, data []byte, fsync bool) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if fsync {
		syncDir(filepath.Dir(path))
	}
	return nil
}

// syncDir fsyncs a directory so a rename or unlink in it is durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
