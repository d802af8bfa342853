/** Events: the checks of `track()` and the JSON envelope of one event (protocol.md section 2), as a string. */
/** The optional arguments of `track()`. */
export interface TrackOptions {
    /** Kafka record key; default the client's `nodeId`. */
    partitionKey?: string | null;
    /** A caller-chosen event id (a UUID string); default a new UUIDv7. */
    eventId?: string | null;
    /** When the event happened: a Date or epoch milliseconds; default now. */
    timestamp?: Date | number | null;
}
/** The per-client envelope fields, pre-encoded once. */
export interface EnvelopeParts {
    producerId: string;
    nodeIdJson: string;
    contextJson: string | null;
}
/** An event checked and encoded by `track()`: its envelope JSON, seq and id. */
export interface EncodedEvent {
    json: string;
    bytes: number;
    eventId: string;
}
/** Check `eventType` (cached) and throw InvalidEventError if it is not `[a-z][a-z0-9_]{0,63}`. */
export declare function checkEventType(eventType: unknown): asserts eventType is string;
/** The JSON of `properties`; throws InvalidEventError for non-objects, NaN/Infinity, BigInt, cycles. */
export declare function encodeProperties(properties: unknown): string;
/** Epoch milliseconds of a `timestamp` option (a Date or epoch milliseconds). */
export declare function toEpochMs(timestamp: Date | number | null | undefined): number;
/** Check the options of `track()`; returns [partitionKey JSON or null, eventId, createdAt]. */
export declare function checkOptions(options: TrackOptions | undefined): [string | null, string, number];
/** The envelope JSON of one event; `eventId` "" means a new UUIDv7 from `createdAt`. */
export declare function encodeEvent(eventType: string, propertiesJson: string, partitionKeyJson: string | null, eventId: string, createdAt: number, seq: number, parts: EnvelopeParts): EncodedEvent;
