/**
 * The spool's on-disk formats (the Python SDK's, byte for byte): checksummed batch files and the state file.
 *
 * Batch file `batches/<first_seq:020>-<last_seq:020>-<batch_id>.hwb`: `HWB1`, payload length (u32 BE),
 * CRC-32 of the payload (u32 BE), payload. The payload is a length-prefixed (u32 BE) JSON header
 * `{"batch_id", "producer_id", "first_seq", "last_seq"}` followed by each event's JSON envelope, each
 * length-prefixed. State file `state.json`: `{"producer_id", "next_seq", "crc"}` (crc over `<id>:<next>`).
 */
import type { Batch } from "./wire.js";
export declare const SUFFIX = ".hwb";
/** A spool file failed its checksum or could not be parsed. */
export declare class CorruptFileError extends Error {
}
/** The file name of a batch; names sort in seq order. */
export declare function fileName(batch: Pick<Batch, "firstSeq" | "lastSeq" | "batchId">): string;
/** [firstSeq, lastSeq, batchId] of a batch file name; throws if it is not one. */
export declare function parseName(name: string): [number, number, string];
/** The bytes of a batch file. */
export declare function encodeBatch(batch: Batch): Buffer;
/** Parse a batch file; throws CorruptFileError on a bad magic, length, checksum or structure. */
export declare function decodeBatch(data: Buffer): Batch;
/** The bytes of the state file. */
export declare function encodeState(producerId: string, nextSeq: number): Buffer;
/** [producerId, nextSeq] of the state file; throws CorruptFileError if it does not check out. */
export declare function decodeState(data: Buffer): [string, number];
/** Write `path` via a temporary file and a rename, synchronously; with `fsync`, file and directory first. */
export declare function writeAtomicSync(path: string, data: Buffer, fsync: boolean, tmp?: string): void;
/** Write `tmp` with `data` (fsynced with `fsync`) off the event loop; the caller renames. */
export declare function writeTemp(tmp: string, data: Buffer, fsync: boolean): Promise<void>;
/** Write `path` atomically off the event loop (temp file, rename, directory fsync). */
export declare function writeAtomic(path: string, data: Buffer, fsync: boolean): Promise<void>;
/** fsync a directory so a rename or unlink in it is durable. */
export declare function fsyncDirSync(path: string): void;
/** fsync a directory off the event loop. */
export declare function fsyncDir(path: string): Promise<void>;
