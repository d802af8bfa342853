/** The schema cache of the Avro fast path: latest writer schema and id per event type, from the registry. */
import { type AvroWriter } from "./avro.js";
import type { Transport } from "./transport.js";
export declare const SUBJECT_PREFIX = "headwater.events.";
/** A registered schema: its registry id and compiled writer. */
export interface WriterSchema {
    id: number;
    version: number;
    write: (w: AvroWriter, value: unknown) => void;
}
/**
 * `GET {registry}/subjects/headwater.events.<type>/versions/latest`, cached for `refreshMs`. A missing subject
 * is cached too (as null) so unknown types do not hammer the registry; `invalidate` forgets one type.
 */
export declare class SchemaCache {
    private readonly transport;
    private readonly refreshMs;
    private readonly timeoutMs;
    private readonly cache;
    private readonly base;
    constructor(registryUrl: string, transport: Transport, refreshMs: number, timeoutMs: number);
    /** The latest schema of `eventType`, null if no such subject; rejects with TransportError if unreachable. */
    get(eventType: string): Promise<WriterSchema | null>;
    invalidate(eventType: string): void;
    private fetch;
}
