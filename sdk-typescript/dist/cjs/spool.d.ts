/**
 * The disk spool: the store's disk backing, every sealed batch a checksummed file until it is acknowledged.
 *
 * Write path: a batch is written to a temporary file off the event loop, fsynced (policy `always`; `never`
 * survives a process crash or kill -9 but not a power loss), renamed into `batches/`, and only then handed
 * to the sender. Acknowledged or permanently refused batches are unlinked. At start the directory is
 * scanned: leftover temporary files are removed, every batch file is queued again in seq order, and the
 * producer id and next seq come from `state.json` and the file names. Seqs are handed out by `track()` from
 * a reservation persisted ahead of use (`SEQ_RESERVATION`), so a seq is never reused after a crash; the unused
 * rest of a reservation shows as a gap after a crash, never after `close()`. A file that fails its checksum is
 * moved to `quarantine/` (the newest 100 are kept) and its events are counted as dropped. One live client
 * owns a directory at a time (`node.lock` holds its pid). The order, bounds and overflow policy are the
 * `Store`'s (store.ts), which the client builds over this backing with `recovered`.
 */
import { SUFFIX } from "./spoolfile.js";
import type { Backing, Entry } from "./store.js";
import type { Batch } from "./wire.js";
export declare const SEQ_RESERVATION = 4096;
/** Pending batches as files in `directory` (a `Backing`), the producer id and the seq reservation. */
export declare class DiskSpool implements Backing {
    private readonly fsync;
    private readonly warn;
    readonly directory: string;
    producerId: string;
    /** The batch files found at start, in seq order, for the store to queue first. */
    recovered: Entry[];
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
    constructor(directory: string, fsync: boolean, warn: (msg: string) => void);
    private recover;
    private readState;
    private producerOfFiles;
    private writeState;
    /** Make sure `seq` is covered by the persisted reservation (called by track() before handing it out). */
    reserve(seq: number): void;
    private extendAsync;
    /** Write `batch` to its file off the event loop; in memory only if the write fails. */
    persist(entry: Entry, batch: Batch, kept: () => boolean): void;
    private read;
    /** The batch of `entry`; undefined if its file is unusable (moved to quarantine). */
    load(entry: Entry): Batch | undefined;
    /** Unlink the file of `entry`, once the entries in `after` (a split's halves) are on disk. */
    remove(entry: Entry, after: readonly Entry[]): void;
    private quarantine;
    /** Persist the exact next seq (no gap after a clean close) and release the directory lock. */
    close(nextSeq: number): void;
    /** Wait until every batch write and every unlink of a delivered batch started so far has finished (close). */
    settled(): Promise<void>;
    private unlock;
}
export { SUFFIX };
