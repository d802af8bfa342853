// Typed choices of the string options (queue, spool, compression, wire format), each with its valid values.
package headwater

// QueuePolicy says what Track does when the in-memory queue is full.
type QueuePolicy string

// The queue policies.
const (
	QueueDropNewest QueuePolicy = "drop_newest" // refuse the new event (the default)
	QueueDropOldest QueuePolicy = "drop_oldest" // evict the oldest queued event
	QueueBlock      QueuePolicy = "block"       // wait up to BlockTimeout for room, then refuse
	QueueSpill      QueuePolicy = "spill"       // move the queue to the spool on the caller's goroutine
)

// SpoolOverflow says what happens when the spool (or MaxPendingBatches) is full.
type SpoolOverflow string

// The overflow policies.
const (
	OverflowBackpressure SpoolOverflow = "backpressure" // seal the next batch only when there is room (the default)
	OverflowDropOldest   SpoolOverflow = "drop_oldest"  // delete the oldest batch not in flight
)

// SpoolFsync says when spool files are synced to disk.
type SpoolFsync string

// The fsync policies.
const (
	FsyncAlways SpoolFsync = "always" // each batch file and its directory before it is sent (the default)
	FsyncNever  SpoolFsync = "never"  // left to the OS: survives a process crash, not a power loss
)

// Compression is the request body's Content-Encoding.
type Compression string

// The compressions.
const (
	CompressionZstd     Compression = "zstd" // the default
	CompressionGzip     Compression = "gzip"
	CompressionIdentity Compression = "identity"
)

// WireFormat is the request body's format.
type WireFormat string

// The wire formats.
const (
	WireJSON WireFormat = "json" // protocol.md section 2 (the default)
	WireAvro WireFormat = "avro" // the fast path, protocol.md section 3 (needs RegistryURL)
)

var (
	queuePolicies        = []QueuePolicy{QueueDropNewest, QueueDropOldest, QueueBlock, QueueSpill}
	spoolOverflowChoices = []SpoolOverflow{OverflowBackpressure, OverflowDropOldest}
	fsyncChoices         = []SpoolFsync{FsyncAlways, FsyncNever}
	compressionChoices   = []Compression{CompressionZstd, CompressionGzip, CompressionIdentity}
	wireFormats          = []WireFormat{WireJSON, WireAvro}
)
