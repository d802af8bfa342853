/** The wire format of protocol.md: the JSON batch body, and parsing the gateway's answers. */

import { SDK_NAME, VERSION } from "./version.js";

export const JSON_TYPE = "application/json";
export const AVRO_TYPE = "application/vnd.headwater.batch+avro";
const SDK_JSON = JSON.stringify({ name: SDK_NAME, version: VERSION });

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

/**
 * The JSON batch body (protocol.md section 2), joining the already-encoded envelopes. `nbytes` (the events'
 * UTF-8 bytes) sizes the buffer, and each envelope is written into it once; should it be wrong, the body is
 * built by joining the strings instead.
 */
export function jsonBody(batch: Batch, sentAt: number): Buffer {
  const head = `{"batch_id":"${batch.batchId}","sent_at":${sentAt},"sdk":${SDK_JSON},"events":[`;
  const events = batch.events;
  const size = Buffer.byteLength(head) + batch.nbytes + Math.max(events.length - 1, 0) + 2;
  const buf = Buffer.allocUnsafe(size + 4); // room to see an understated nbytes without a silent truncation
  let pos = buf.write(head, 0);
  for (let i = 0; i < events.length && pos < buf.length; i++) {
    if (i > 0) buf[pos++] = 0x2c; // ,
    pos += buf.write(events[i] as string, pos);
  }
  if (pos < buf.length) pos += buf.write("]}", pos);
  if (pos === size) return buf.subarray(0, size);
  return Buffer.from(`${head}${events.join(",")}]}`);
}

/** The `rejected` list of a 200/422 body; a malformed body counts as no rejection listed. */
export function parseRejections(body: Buffer): Rejection[] {
  try {
    const doc = JSON.parse(body.toString("utf8")) as { rejected?: unknown };
    if (!Array.isArray(doc.rejected)) return [];
    return doc.rejected
      .filter((r): r is Record<string, unknown> => r !== null && typeof r === "object")
      .map((r) => ({ index: Number(r.index), code: text(r.code), message: text(r.message) }))
      .filter((r) => Number.isInteger(r.index));
  } catch {
    return [];
  }
}

function text(value: unknown): string {
  return typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value);
}

/** [code, message] of an error body `{code, message}`; `http_<status>` when the body is not that JSON. */
export function parseError(body: Buffer, status: number): [string, string] {
  try {
    const doc = JSON.parse(body.toString("utf8")) as { code?: unknown; message?: unknown };
    if (doc !== null && typeof doc === "object" && typeof doc.code === "string" && doc.code !== "") {
      return [doc.code, text(doc.message)];
    }
  } catch {
    // not the JSON error: fall through
  }
  return [`http_${status}`, body.subarray(0, 200).toString("utf8")];
}

/** Seconds to wait from a Retry-After header (delay-seconds, decimal, or HTTP-date); undefined if bad. */
export function parseRetryAfter(value: string | undefined, nowMs: number = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  const when = Date.parse(v);
  if (Number.isNaN(when) || !/[a-zA-Z]/.test(v)) return undefined;
  return Math.max(0, (when - nowMs) / 1000);
}

const SEQ = /"seq":(\d+)/;

/** The seq of an encoded envelope (the first `"seq":` of it: envelope fields come before `properties`). */
export function seqOf(event: string): number {
  return Number(SEQ.exec(event)?.[1] ?? -1);
}
