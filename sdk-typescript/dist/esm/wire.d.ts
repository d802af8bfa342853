/** The wire format of protocol.md: the JSON batch body, and parsing the gateway's answers. */
export declare const JSON_TYPE = "application/json";
export declare const AVRO_TYPE = "application/vnd.headwater.batch+avro";
/** A sealed batch: consecutive events of one producer, each already encoded as its JSON envelope. */
export interface Batch {
    readonly batchId: string;
    readonly producerId: string;
    readonly firstSeq: number;
    readonly lastSeq: number;
    readonly events: readonly string[];
    readonly nbytes: number;
}
/** One event the gateway rejected: its index in the batch as sent, a stable code and a message. */
export interface Rejection {
    index: number;
    code: string;
    message: string;
}
/** The JSON batch body (protocol.md section 2), joining the already-encoded envelopes. */
export declare function jsonBody(batch: Batch, sentAt: number): Buffer;
/** The `rejected` list of a 200/422 body; a malformed body counts as no rejection listed. */
export declare function parseRejections(body: Buffer): Rejection[];
/** [code, message] of an error body `{code, message}`; `http_<status>` when the body is not that JSON. */
export declare function parseError(body: Buffer, status: number): [string, string];
/** Seconds to wait from a Retry-After header (delay-seconds, decimal, or HTTP-date); undefined if bad. */
export declare function parseRetryAfter(value: string | undefined, nowMs?: number): number | undefined;
/** The seq of an encoded envelope (the first `"seq":` of it: envelope fields come before `properties`). */
export declare function seqOf(event: string): number;
