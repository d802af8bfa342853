/**
 * The disk spool: every sealed batch is a checksummed file until the gateway acknowledged it.
 *
 * Write path: a batch is written to a temporary file off the event loop, fsynced (policy `always`; `never`
 * survives a process crash or kill -9 but not a power loss), renamed into `batches/`, and only then handed
 * to the sender. Acknowledged or permanently refused batches are unlinked. At start the directory is
 * scanned: leftover temporary files are removed, every batch file is queued again in seq order, and the
 * producer id and next seq come from `state.json` and the file names. Seqs are handed out by `track()` from
 * a reservation persisted ahead of use (`SEQ_RESERVATION`), so a seq is never reused after a crash; the unused
 * rest of a reservation shows as a gap after a crash, never after `close()`. A file that fails its checksum is
 * moved to `quarantine/` (the newest 100 are kept) and its events are counted as dropped. One live client
 * owns a directory at a time (`node.lock` holds its pid).
 */
import { SUFFIX } from "./spoolfile.js";
import { type DropReporter, type Entry, MemoryStore } from "./store.js";
import type { Batch } from "./wire.js";
export declare const SEQ_RESERVATION = 4096;
/** Pending batches as files in `directory`, bounded by `maxBytes` with an overflow policy. */
export declare class DiskSpool extends MemoryStore {
    private readonly fsync;
    private readonly warn;
    readonly directory: string;
    /** The first seq this client may hand out (recovered from the state file and the batch files). */
    readonly startSeq: number;
    private readonly batchesDir;
    private readonly quarantineDir;
    private readonly statePath;
    private readonly lockPath;
    private reserved;
    private extending;
    private memoryBytes;
    private locked;
    private readonly persisted;
    private readonly unlinking;
    private tmpCounter;
    constructor(directory: string, maxBytes: number, overflow: "backpressure" | "drop_oldest", fsync: boolean, report: DropReporter, warn: (msg: string) => void);
    private recover;
    private readState;
    private producerOfFiles;
    private writeState;
    /** Make sure `seq` is covered by the persisted reservation (called by track() before handing it out). */
    reserve(seq: number): void;
    private extendAsync;
    protected persist(entry: Entry, batch: Batch): void;
    private read;
    protected load(entry: Entry): Batch | undefined;
    protected remove(entry: Entry, after: Entry[]): void;
    private quarantine;
    /** Persist the exact next seq (no gap after a clean close) and release the directory lock. */
    close(nextSeq: number): void;
    /** Wait until every batch write and every unlink of a delivered batch started so far has finished (close). */
    settled(): Promise<void>;
    private unlock;
}
export { SUFFIX };
