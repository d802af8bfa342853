/** Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store. */
import type { Config } from "./config.js";
import { type Codec } from "./compress.js";
import { EventRejectedError, type DeliveryError } from "./errors.js";
import { Endpoints } from "./failover.js";
import type { Counters } from "./metrics.js";
import type { Gate } from "./gate.js";
import type { Window } from "./limit.js";
import type { Transport } from "./transport.js";
import type { SchemaCache } from "./registry.js";
import { type Batch } from "./wire.js";
/** What the dispatcher does with the batch afterwards. */
export type Action = {
    kind: "ack";
} | {
    kind: "split";
    parts: [Batch, Batch];
} | {
    kind: "release";
};
/** Reported for every batch the gateway answered with 200 or 422. */
export interface DeliveryReport {
    batchId: string;
    producerId: string;
    firstSeq: number;
    lastSeq: number;
    accepted: number;
    rejected: EventRejectedError[];
}
/** Where the sender reports what happened. */
export interface SenderEvents {
    delivered(report: DeliveryReport): void;
    failed(error: DeliveryError): void;
}
/** The two halves of a batch (protocol.md §4, splitting on 413): first floor(n/2) events, then the rest, with derived ids. */
export declare function split(batch: Batch): [Batch, Batch];
/** Sends batches to `{endpoint}/v1/batch` (the active one of `endpoints`); counts and reports what happened. */
export declare class Sender {
    private readonly cfg;
    private readonly transport;
    private readonly counters;
    private readonly events;
    private readonly abort;
    private readonly gate;
    private readonly window;
    private readonly schemas;
    readonly endpoints: Endpoints;
    /** The body's codec, chosen once (zstd may fall back to gzip: see compress.ts). */
    readonly codec: Promise<Codec>;
    private headers;
    private avroHeaders;
    private readonly firstSent;
    constructor(cfg: Config, transport: Transport, counters: Counters, events: SenderEvents, abort: AbortSignal, gate: Gate, window: Window, schemas: SchemaCache | undefined);
    /**
     * Send `batch` until answered; `keepOnFailure` (a spool) keeps it after the retry deadline. Every attempt
     * passes the client's gate (protocol.md §6.1) and takes a place in the in-flight window (§6.2).
     */
    deliver(batch: Batch, keepOnFailure: boolean): Promise<Action>;
    /**
     * While on a later endpoint, one send at a time asks the earlier ones `GET /readyz` (when due), and the client
     * returns to the first that answers 200 (protocol.md §9). The probe carries no write key.
     */
    private probe;
    /** Log and act on a move to another endpoint; true if there was one. */
    private moved;
    /** One attempt inside a place of the window; undefined when the client stopped while waiting for a place. */
    private post;
    /** The compressed body: JSON, or the Avro fast path with each event framed with its registered schema. */
    private encode;
    private answered;
}
