/** Identifiers: time-ordered UUIDv7 event and batch ids, random producer ids, derived ids of split batches. */
/** A UUIDv7 string (RFC 9562): 48-bit millisecond timestamp, version 7, variant 10, 74 random bits. */
export declare function uuid7(unixMs?: number): string;
/** A random producer id (UUIDv4). */
export declare function newProducerId(): string;
/** The RFC 9562 name-based SHA-1 UUID (version 5) of `name` in `namespace` (16 bytes). */
export declare function uuid5(namespace: Buffer, name: string): string;
/** The batch id of half `half` (0 or 1) of a split batch: derived, so a crash during a split reuses it. */
export declare function splitBatchId(batchId: string, half: number): string;
/** True if `value` is a UUID string (any version, dashes required). */
export declare function isUuid(value: unknown): value is string;
