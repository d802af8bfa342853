/**
 * The spool's on-disk formats (the Python SDK's, byte for byte): checksummed batch files and the state file.
 *
 * Batch file `batches/<first_seq:020>-<last_seq:020>-<batch_id>.hwb`: `HWB1`, payload length (u32 BE),
 * CRC-32 of the payload (u32 BE), payload. The payload is a length-prefixed (u32 BE) JSON header
 * `{"batch_id", "producer_id", "first_seq", "last_seq"}` followed by each event's JSON envelope, each
 * length-prefixed. State file `state.json`: `{"producer_id", "next_seq", "crc"}` (crc over `<id>:<next>`).
 */
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";
import { crc32 } from "node:zlib";
const MAGIC = Buffer.from("HWB1");
export const SUFFIX = ".hwb";
/** A spool file failed its checksum or could not be parsed. */
export class CorruptFileError extends Error {
}
/** The file name of a batch; names sort in seq order. */
export function fileName(batch) {
    const pad = (n) => String(n).padStart(20, "0");
    return `${pad(batch.firstSeq)}-${pad(batch.lastSeq)}-${batch.batchId}${SUFFIX}`;
}
/** [firstSeq, lastSeq, batchId] of a batch file name; throws if it is not one. */
export function parseName(name) {
    const m = /^(\d{1,20})-(\d{1,20})-([0-9a-f-]{36})\.hwb$/.exec(name);
    if (m === null)
        throw new Error(`not a batch file: ${name}`);
    return [Number(m[1]), Number(m[2]), m[3]];
}
function u32(n) {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(n >>> 0);
    return b;
}
/** The bytes of a batch file. */
export function encodeBatch(batch) {
    const header = Buffer.from(JSON.stringify({ batch_id: batch.batchId, producer_id: batch.producerId, first_seq: batch.firstSeq, last_seq: batch.lastSeq }));
    const parts = [u32(header.length), header];
    for (const event of batch.events) {
        const b = Buffer.from(event);
        parts.push(u32(b.length), b);
    }
    const payload = Buffer.concat(parts);
    return Buffer.concat([MAGIC, u32(payload.length), u32(crc32(payload)), payload]);
}
/** Parse a batch file; throws CorruptFileError on a bad magic, length, checksum or structure. */
export function decodeBatch(data) {
    if (data.length < 12)
        throw new CorruptFileError("truncated header");
    const payload = data.subarray(12);
    if (!data.subarray(0, 4).equals(MAGIC) || data.readUInt32BE(4) !== payload.length || data.readUInt32BE(8) !== crc32(payload)) {
        throw new CorruptFileError("bad magic, length or checksum");
    }
    const chunks = [];
    for (let pos = 0; pos < payload.length;) {
        if (pos + 4 > payload.length)
            throw new CorruptFileError("truncated chunk length");
        const n = payload.readUInt32BE(pos);
        pos += 4;
        if (pos + n > payload.length)
            throw new CorruptFileError("chunk past the end");
        chunks.push(payload.subarray(pos, pos + n).toString("utf8"));
        pos += n;
    }
    try {
        const h = JSON.parse(chunks[0] ?? "");
        const events = chunks.slice(1);
        const nbytes = events.reduce((sum, e) => sum + Buffer.byteLength(e), 0);
        const batch = {
            batchId: String(h.batch_id),
            producerId: String(h.producer_id),
            firstSeq: Number(h.first_seq),
            lastSeq: Number(h.last_seq),
            events,
            nbytes,
        };
        if (!Number.isInteger(batch.firstSeq) || !Number.isInteger(batch.lastSeq) || events.length === 0) {
            throw new Error("bad header");
        }
        return batch;
    }
    catch (err) {
        throw new CorruptFileError(`bad structure: ${err.message}`);
    }
}
/** The bytes of the state file. */
export function encodeState(producerId, nextSeq) {
    const crc = crc32(`${producerId}:${nextSeq}`);
    return Buffer.from(JSON.stringify({ producer_id: producerId, next_seq: nextSeq, crc }));
}
/** [producerId, nextSeq] of the state file; throws CorruptFileError if it does not check out. */
export function decodeState(data) {
    let doc;
    try {
        doc = JSON.parse(data.toString("utf8"));
    }
    catch (err) {
        throw new CorruptFileError(`unreadable state file: ${err.message}`);
    }
    const producerId = String(doc.producer_id);
    const nextSeq = Number(doc.next_seq);
    if (!Number.isInteger(nextSeq) || nextSeq < 0 || crc32(`${producerId}:${nextSeq}`) !== Number(doc.crc)) {
        throw new CorruptFileError("state file checksum mismatch");
    }
    return [producerId, nextSeq];
}
/** Write `path` via a temporary file and a rename, synchronously; with `fsync`, file and directory first. */
export function writeAtomicSync(path, data, fsync, tmp = `${path}.tmp`) {
    const fd = openSync(tmp, "w", 0o600);
    try {
        let off = 0;
        while (off < data.length)
            off += writeSync(fd, data, off);
        if (fsync)
            fsyncSync(fd);
    }
    finally {
        closeSync(fd);
    }
    renameSync(tmp, path);
    if (fsync)
        fsyncDirSync(dirname(path));
}
/** Write `tmp` with `data` (fsynced with `fsync`) off the event loop; the caller renames. */
export async function writeTemp(tmp, data, fsync) {
    const fh = await open(tmp, "w", 0o600);
    try {
        await fh.writeFile(data);
        if (fsync)
            await fh.sync();
    }
    finally {
        await fh.close();
    }
}
/** Write `path` atomically off the event loop (temp file, rename, directory fsync). */
export async function writeAtomic(path, data, fsync) {
    const tmp = `${path}.tmp`;
    await writeTemp(tmp, data, fsync);
    await rename(tmp, path);
    if (fsync)
        await fsyncDir(dirname(path));
}
/** fsync a directory so a rename or unlink in it is durable. */
export function fsyncDirSync(path) {
    try {
        const fd = openSync(path, "r");
        try {
            fsyncSync(fd);
        }
        finally {
            closeSync(fd);
        }
    }
    catch {
        // a file system that cannot fsync directories: nothing more to do
    }
}
/** fsync a directory off the event loop. */
export async function fsyncDir(path) {
    try {
        const fh = await open(path, "r");
        try {
            await fh.sync();
        }
        finally {
            await fh.close();
        }
    }
    catch {
        // as above
    }
}
