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
import { mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { rename, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { SpoolLockedError } from "./errors.js";
import { newProducerId } from "./ids.js";
import { CorruptFileError, decodeBatch, decodeState, encodeBatch, encodeState, fileName, fsyncDir, parseName, SUFFIX, writeAtomicSync, writeTemp, } from "./spoolfile.js";
export const SEQ_RESERVATION = 4096;
const QUARANTINE_KEEP = 100;
const MEMORY_COPY_MAX = 32 * 1024 * 1024; // bytes of spooled batches also kept in memory (no re-read)
/** Pending batches as files in `directory` (a `Backing`), the producer id and the seq reservation. */
export class DiskSpool {
    fsync;
    warn;
    directory;
    producerId = "";
    /** The batch files found at start, in seq order, for the store to queue first. */
    recovered = [];
    /** The first seq this client may hand out (recovered from the state file and the batch files). */
    startSeq;
    batchesDir;
    quarantineDir;
    statePath;
    lockPath;
    reserved = 0; // seqs below this are covered by the state file
    extending = false;
    memoryBytes = 0;
    locked = true;
    persisted = new Map();
    unlinking = new Set();
    tmpCounter = 0;
    constructor(directory, fsync, warn) {
        this.fsync = fsync;
        this.warn = warn;
        this.directory = resolve(directory);
        this.batchesDir = join(this.directory, "batches");
        this.quarantineDir = join(this.directory, "quarantine");
        this.statePath = join(this.directory, "state.json");
        this.lockPath = join(this.directory, "node.lock");
        for (const d of [this.directory, this.batchesDir, this.quarantineDir])
            mkdirSync(d, { recursive: true });
        lock(this.lockPath);
        try {
            this.startSeq = this.recover();
            this.writeState(this.startSeq + SEQ_RESERVATION);
        }
        catch (err) {
            this.unlock();
            throw err;
        }
    }
    recover() {
        const state = this.readState();
        let filesNext = 0;
        for (const name of readdirSync(this.batchesDir).sort()) {
            const path = join(this.batchesDir, name);
            if (name.endsWith(".tmp")) {
                tryUnlink(path);
                continue;
            }
            try {
                const [first, last, batchId] = parseName(name);
                const size = statSync(path).size;
                filesNext = Math.max(filesNext, last + 1);
                const entry = { batchId, firstSeq: first, lastSeq: last, count: last - first + 1, nbytes: size,
                    batch: undefined, path, state: "ready" };
                this.recovered.push(entry);
            }
            catch {
                this.quarantine(path);
            }
        }
        this.producerId = state?.[0] ?? this.producerOfFiles() ?? newProducerId();
        return Math.max(state?.[1] ?? 0, filesNext);
    }
    readState() {
        try {
            return decodeState(readFileSync(this.statePath));
        }
        catch (err) {
            if (err.code === "ENOENT")
                return undefined;
            this.warn(`spool state file unusable (${err.message}); quarantined`);
            this.quarantine(this.statePath);
            return undefined;
        }
    }
    producerOfFiles() {
        for (const entry of this.recovered) {
            const batch = this.read(entry);
            if (batch !== undefined)
                return batch.producerId;
        }
        return undefined;
    }
    writeState(next) {
        writeAtomicSync(this.statePath, encodeState(this.producerId, next), this.fsync, `${this.statePath}.${this.tmpCounter++}.tmp`);
        this.reserved = Math.max(this.reserved, next);
    }
    /** Make sure `seq` is covered by the persisted reservation (called by track() before handing it out). */
    reserve(seq) {
        if (seq >= this.reserved) {
            try {
                this.writeState(seq + SEQ_RESERVATION); // rare: the early extension below did not land in time
            }
            catch (err) {
                // The disk refuses writes: carry on (track() never throws for that); a crash now could reuse seqs.
                this.warn(`cannot persist the seq reservation (${err.message})`);
                this.reserved = seq + SEQ_RESERVATION;
            }
        }
        else if (!this.extending && this.reserved - seq < SEQ_RESERVATION / 2) {
            this.extendAsync(seq + SEQ_RESERVATION);
        }
    }
    extendAsync(target) {
        this.extending = true;
        const tmp = `${this.statePath}.${this.tmpCounter++}.tmp`;
        writeTemp(tmp, encodeState(this.producerId, target), this.fsync)
            .then(() => {
            // The check and the rename run in one tick: a synchronous write in between cannot be overtaken.
            if (target > this.reserved && this.locked) {
                renameSync(tmp, this.statePath);
                this.reserved = target;
                return this.fsync ? fsyncDir(this.directory) : undefined;
            }
            tryUnlink(tmp);
            return undefined;
        })
            .catch((err) => this.warn(`cannot extend the seq reservation (${err.message})`))
            .finally(() => {
            this.extending = false;
        });
    }
    /** Write `batch` to its file off the event loop; in memory only if the write fails. */
    persist(entry, batch, kept) {
        const path = join(this.batchesDir, fileName(batch));
        const tmp = `${path}.tmp`;
        const done = writeTemp(tmp, encodeBatch(batch), this.fsync)
            .then(() => rename(tmp, path))
            .then(() => (this.fsync ? fsyncDir(this.batchesDir) : undefined))
            .then(() => {
            entry.path = path;
            if (this.memoryBytes + entry.nbytes > MEMORY_COPY_MAX) {
                entry.batch = undefined;
            }
            else {
                this.memoryBytes += entry.nbytes;
            }
        })
            .catch((err) => this.warn(`cannot write ${path} (${err.message}); batch kept in memory only`))
            .finally(() => {
            this.persisted.delete(entry);
            if (!kept() && entry.path !== undefined) {
                tryUnlink(entry.path); // acked or dropped while it was being written
            }
        });
        this.persisted.set(entry, done);
    }
    read(entry) {
        if (entry.batch !== undefined || entry.path === undefined)
            return entry.batch;
        try {
            return decodeBatch(readFileSync(entry.path));
        }
        catch (err) {
            if (!(err instanceof CorruptFileError))
                this.warn(`cannot read ${entry.path} (${err.message})`);
            else
                this.warn(`${entry.path} is unusable (${err.message}); quarantined`);
            return undefined;
        }
    }
    /** The batch of `entry`; undefined if its file is unusable (moved to quarantine). */
    load(entry) {
        const batch = this.read(entry);
        if (batch === undefined) {
            if (entry.path !== undefined)
                this.quarantine(entry.path);
            entry.path = undefined;
        }
        return batch;
    }
    /** Unlink the file of `entry`, once the entries in `after` (a split's halves) are on disk. */
    remove(entry, after) {
        if (entry.batch !== undefined && entry.path !== undefined)
            this.memoryBytes -= entry.nbytes;
        const path = entry.path;
        if (path === undefined)
            return;
        entry.path = undefined;
        // A split parent's file goes only once its halves are on disk: a crash in between resends the parent.
        const waits = after.map((e) => this.persisted.get(e)).filter((p) => p !== undefined);
        const done = Promise.all(waits).then(() => unlink(path)).catch(() => undefined);
        this.unlinking.add(done);
        void done.finally(() => this.unlinking.delete(done));
    }
    quarantine(path) {
        try {
            renameSync(path, join(this.quarantineDir, path.split("/").pop()));
            const kept = readdirSync(this.quarantineDir)
                .map((n) => join(this.quarantineDir, n))
                .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs);
            for (const old of kept.slice(0, -QUARANTINE_KEEP))
                tryUnlink(old);
        }
        catch (err) {
            this.warn(`cannot quarantine ${path} (${err.message}); deleting it`);
            tryUnlink(path);
        }
    }
    /** Persist the exact next seq (no gap after a clean close) and release the directory lock. */
    close(nextSeq) {
        if (!this.locked)
            return;
        try {
            writeAtomicSync(this.statePath, encodeState(this.producerId, nextSeq), this.fsync);
        }
        catch (err) {
            this.warn(`cannot write the state file (${err.message})`);
        }
        this.unlock();
    }
    /** Wait until every batch write and every unlink of a delivered batch started so far has finished (close). */
    async settled() {
        await Promise.all([...this.persisted.values()]);
        await Promise.all([...this.unlinking]);
    }
    unlock() {
        this.locked = false;
        tryUnlink(this.lockPath);
    }
}
function lock(path) {
    for (let attempt = 0; attempt < 2; attempt++) {
        try {
            writeFileSync(path, String(process.pid), { flag: "wx", mode: 0o600 });
            return;
        }
        catch (err) {
            if (err.code !== "EEXIST")
                throw err;
        }
        const owner = Number(readFileSafe(path));
        if (Number.isInteger(owner) && owner > 0 && (owner === process.pid || isAlive(owner))) {
            throw new SpoolLockedError(`spool directory ${path.slice(0, -"/node.lock".length)} is in use by process ${owner}`);
        }
        tryUnlink(path); // its owner died (kill -9): take the directory over
    }
    throw new SpoolLockedError(`cannot lock ${path}`);
}
function isAlive(pid) {
    try {
        process.kill(pid, 0);
        return true;
    }
    catch (err) {
        return err.code === "EPERM";
    }
}
function readFileSafe(path) {
    try {
        return readFileSync(path, "utf8").trim();
    }
    catch {
        return "";
    }
}
function tryUnlink(path) {
    try {
        unlinkSync(path);
    }
    catch {
        // already gone
    }
}
export { SUFFIX };
