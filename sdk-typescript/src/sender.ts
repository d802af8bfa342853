/** Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store. */

import type { Config } from "./config.js";
import { type Codec, codecFor } from "./compress.js";
import { BatchRejectedError, EventRejectedError, RetryableStatusError, TransportError, type DeliveryError } from "./errors.js";
import { Endpoints, healthFailure, PROBE_TIMEOUT_MS, READY_PATH, type Switch } from "./failover.js";
import { splitBatchId } from "./ids.js";
import type { Counters } from "./metrics.js";
import type { Gate } from "./gate.js";
import type { Signal, Window } from "./limit.js";
import { backoffMs, classify, RETRY_AFTER_CAP_FACTOR } from "./retry.js";
import type { HttpResponse, Transport } from "./transport.js";
import { AvroMismatch, avroBatchBody, framed } from "./avro.js";
import type { SchemaCache } from "./registry.js";
import { SDK_NAME, USER_AGENT, VERSION } from "./version.js";
import { AVRO_TYPE, type Batch, JSON_TYPE, jsonBody, parseError, parseRejections, parseRetryAfter, seqOf } from "./wire.js";

/** What the dispatcher does with the batch afterwards. */
export type Action = { kind: "ack" } | { kind: "split"; parts: [Batch, Batch] } | { kind: "release" };

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

const EVENT_ID = /"event_id":"([^"]*)"/;
const EVENT_TYPE = /"event_type":"([^"]*)"/;

/** A request body ready to send, and the events the encoder rejected before sending. */
interface Encoded {
  body: Buffer;
  contentType: string;
  sentIndex: number[]; // position in the batch of each event in the body
  localRejects: EventRejectedError[];
}

/** The two halves of a batch (protocol.md §4, splitting on 413): first floor(n/2) events, then the rest, with derived ids. */
export function split(batch: Batch): [Batch, Batch] {
  const mid = Math.floor(batch.events.length / 2);
  const half = (k: number, events: readonly string[]): Batch => ({
    batchId: splitBatchId(batch.batchId, k),
    producerId: batch.producerId,
    firstSeq: seqOf(events[0] as string),
    lastSeq: seqOf(events[events.length - 1] as string),
    events,
    nbytes: events.reduce((s, e) => s + Buffer.byteLength(e), 0),
  });
  return [half(0, batch.events.slice(0, mid)), half(1, batch.events.slice(mid))];
}

/** Sends batches to `{endpoint}/v1/batch` (the active one of `endpoints`); counts and reports what happened. */
export class Sender {
  readonly endpoints: Endpoints;
  /** The body's codec, chosen once (zstd may fall back to gzip: see compress.ts). */
  readonly codec: Promise<Codec>;
  private headers: Record<string, string> = {};
  private avroHeaders: Record<string, string> = {};
  private readonly firstSent = new Map<string, number>(); // batch id -> sent_at of its first send

  constructor(
    private readonly cfg: Config,
    private readonly transport: Transport,
    private readonly counters: Counters,
    private readonly events: SenderEvents,
    private readonly abort: AbortSignal,
    private readonly gate: Gate,
    private readonly window: Window,
    private readonly schemas: SchemaCache | undefined,
  ) {
    this.endpoints = new Endpoints(cfg.endpoints, cfg.failoverAfterFailures, cfg.failoverAfterMs, cfg.failbackProbeMs);
    this.codec = codecFor(cfg.compression).then((codec) => {
      this.headers = { "Content-Type": JSON_TYPE, "Content-Encoding": codec.encoding, Authorization: `Bearer ${cfg.writeKey}`,
        "User-Agent": USER_AGENT };
      this.avroHeaders = { ...this.headers, "Content-Type": AVRO_TYPE };
      return codec;
    });
  }

  /**
   * Send `batch` until answered; `keepOnFailure` (a spool) keeps it after the retry deadline. Every attempt
   * passes the client's gate (protocol.md §6.1) and takes a place in the in-flight window (§6.2).
   */
  async deliver(batch: Batch, keepOnFailure: boolean): Promise<Action> {
    const n = batch.events.length;
    this.counters.sent += n;
    this.counters.batchesSent += 1;
    let sentAt = this.firstSent.get(batch.batchId);
    if (sentAt === undefined) {
      sentAt = Date.now();
      this.firstSent.set(batch.batchId, sentAt);
    }
    const me = this.gate.newId();
    try {
      const deadline = Date.now() + this.cfg.retryDeadlineMs;
      let encoded: Encoded | undefined;
      for (let attempt = 1; ; attempt++) {
        if (!(await this.gate.enter(me))) return { kind: "release" };
        let failure: TransportError;
        let index: number | undefined; // the endpoint the attempt went to (none: the registry failed)
        try {
          encoded ??= await this.encode(batch, sentAt); // a registry look-up may fail: retried like a send
          await this.probe();
          index = this.endpoints.current()[0];
          const resp = await this.post(encoded, index);
          if (resp === undefined) return { kind: "release" }; // stopped while waiting for a place
          if (!healthFailure(resp.status)) this.endpoints.answered(index);
          if (classify(resp.status) !== "retry") {
            this.gate.answered();
            this.firstSent.delete(batch.batchId);
            return this.answered(batch, encoded, resp);
          }
          const [code, message] = parseError(resp.body, resp.status);
          failure = new RetryableStatusError(resp.status, parseRetryAfter(resp.headers["retry-after"]), `${code} ${message}`);
        } catch (err) {
          failure = err instanceof TransportError ? err : new TransportError(String(err));
        }
        if (this.abort.aborted) return { kind: "release" };
        const status = failure instanceof RetryableStatusError ? failure.status : 0;
        if (index !== undefined && (status === 0 || healthFailure(status)) && this.moved(this.endpoints.failed(index))) {
          this.gate.switched(); // failed over (protocol.md §9): try the new endpoint now
          this.counters.retries += 1;
          continue;
        }
        const since = this.gate.failed(me, failure);
        const retryAfterS = failure instanceof RetryableStatusError && failure.retryAfter !== undefined
          ? Math.min(failure.retryAfter, (RETRY_AFTER_CAP_FACTOR * this.cfg.retryMaxMs) / 1000) : undefined;
        if (retryAfterS !== undefined) this.gate.hold(retryAfterS * 1000);
        const short = this.endpoints.urls.length > 1 && (status === 0 || healthFailure(status)); // §9: reach the failover bound on time
        const cap = failure.code === "connection_refused" || short ? Math.min(this.cfg.retryRefusedMaxMs, this.cfg.retryMaxMs) : this.cfg.retryMaxMs;
        const wait = this.gate.capped(backoffMs(attempt, this.cfg.retryBaseMs, cap, retryAfterS));
        if (Date.now() + wait > deadline) {
          this.events.failed(failure);
          if (keepOnFailure) return { kind: "release" };
          this.firstSent.delete(batch.batchId);
          this.counters.settle(0, 0, { retry_deadline: n });
          this.events.failed(new TransportError(`batch ${batch.batchId}: ${n} event(s) dropped after the retry deadline`, "retry_deadline"));
          return { kind: "ack" };
        }
        this.counters.retries += 1;
        if (!(await this.gate.backoff(wait, since))) return { kind: "release" };
      }
    } finally {
      this.gate.gaveUp(me);
    }
  }

  /**
   * While on a later endpoint, one send at a time asks the earlier ones `GET /readyz` (when due), and the client
   * returns to the first that answers 200 (protocol.md §9). The probe carries no write key.
   */
  private async probe(): Promise<void> {
    const targets = this.endpoints.probeTargets();
    if (targets.length === 0) return;
    let ready: number | undefined;
    try {
      for (const i of targets) {
        const url = `${this.endpoints.urls[i] as string}${READY_PATH}`;
        const resp = await this.transport.send({ method: "GET", url, headers: { "User-Agent": USER_AGENT }, body: Buffer.alloc(0) },
          Math.min(PROBE_TIMEOUT_MS, this.cfg.requestTimeoutMs)).catch(() => undefined);
        if (resp?.status === 200) {
          ready = i;
          break;
        }
      }
    } finally {
      if (this.moved(this.endpoints.probed(ready))) this.gate.switched();
    }
  }

  /** Log and act on a move to another endpoint; true if there was one. */
  private moved(sw: Switch | undefined): boolean {
    if (sw === undefined) return false;
    this.window.limit.newPath();
    if (sw.failback) {
      process.emitWarning(`headwater: failing back to ${sw.new} (ready again); was sending to ${sw.old}`, { code: "HEADWATER_FAILBACK" });
    } else {
      process.emitWarning(`headwater: failing over from ${sw.old} to ${sw.new} after ${sw.failures} failed attempt(s) in ` +
        `${(sw.spentMs / 1000).toFixed(1)} s`, { code: "HEADWATER_FAILOVER" });
    }
    return true;
  }

  /** One attempt inside a place of the window; undefined when the client stopped while waiting for a place. */
  private async post(encoded: Encoded, index: number): Promise<HttpResponse | undefined> {
    if (encoded.sentIndex.length === 0) return { status: 200, headers: {}, body: Buffer.from("{}") };
    const slot = await this.window.acquire();
    if (slot === undefined) return undefined;
    let signal: Signal = "failure"; // no answer (connection error, timeout) unless one is read
    try {
      const resp = await this.transport.send({ method: "POST", url: `${this.endpoints.urls[index] as string}/v1/batch`,
        headers: encoded.contentType === AVRO_TYPE ? this.avroHeaders : this.headers, body: encoded.body }, this.cfg.requestTimeoutMs);
      const outcome = classify(resp.status);
      signal = outcome === "done" ? "success" : outcome === "retry" ? "failure" : "neutral";
      return resp;
    } finally {
      this.window.release(slot, signal);
    }
  }

  /** The compressed body: JSON, or the Avro fast path with each event framed with its registered schema. */
  private async encode(batch: Batch, sentAt: number): Promise<Encoded> {
    const all = batch.events.map((_e, i) => i);
    const codec = await this.codec;
    if (this.schemas === undefined) {
      return { body: codec.compress(jsonBody(batch, sentAt)), contentType: JSON_TYPE, sentIndex: all, localRejects: [] };
    }
    const events: Buffer[] = [];
    const sentIndex: number[] = [];
    const localRejects: EventRejectedError[] = [];
    for (const [i, raw] of batch.events.entries()) {
      const type = EVENT_TYPE.exec(raw)?.[1] ?? "";
      const schema = await this.schemas.get(type);
      const reject = (code: string, message: string): void => {
        localRejects.push(new EventRejectedError(batch.batchId, EVENT_ID.exec(raw)?.[1] ?? "", seqOf(raw), code, message));
      };
      if (schema === null) {
        reject("unknown_event_type", `no subject for ${type} in the registry`);
        continue;
      }
      const env = JSON.parse(raw) as Record<string, unknown>;
      const record = { event_id: env.event_id, event_type: env.event_type, producer_id: env.producer_id, seq: env.seq,
        node_id: env.node_id, created_at: env.created_at, sent_at: sentAt, received_at: null, sdk_name: SDK_NAME,
        sdk_version: VERSION, context: env.context ?? {}, properties: env.properties ?? {} };
      try {
        events.push(framed(schema.id, schema.write, record));
        sentIndex.push(i);
      } catch (err) {
        if (!(err instanceof AvroMismatch)) throw err;
        reject("schema_mismatch", err.message);
      }
    }
    const body = avroBatchBody(batch.batchId, sentAt, SDK_NAME, VERSION, events);
    return { body: codec.compress(body), contentType: AVRO_TYPE, sentIndex, localRejects };
  }

  private answered(batch: Batch, encoded: Encoded, resp: HttpResponse): Action {
    const outcome = classify(resp.status);
    const n = batch.events.length;
    if (outcome === "split" && n > 1) return { kind: "split", parts: split(batch) };
    if (outcome !== "done") {
      const [code, message] = parseError(resp.body, resp.status);
      const fallback = outcome === "split" && code === `http_${resp.status}` ? "event_too_large" : code;
      this.events.failed(new BatchRejectedError(batch.batchId, resp.status, fallback, message, n));
      this.counters.settle(0, 0, { [outcome === "split" ? "too_large" : `refused_http_${resp.status}`]: n });
      return { kind: "ack" };
    }
    const rejected: EventRejectedError[] = [...encoded.localRejects];
    const seen = new Set<number>();
    for (const r of parseRejections(resp.body)) {
      const at = encoded.sentIndex[r.index];
      const event = at === undefined ? undefined : batch.events[at];
      if (event === undefined || seen.has(r.index)) continue;
      seen.add(r.index);
      if (this.schemas !== undefined && r.code.includes("schema")) this.schemas.invalidate(EVENT_TYPE.exec(event)?.[1] ?? "");
      rejected.push(new EventRejectedError(batch.batchId, EVENT_ID.exec(event)?.[1] ?? "", seqOf(event), r.code, r.message));
    }
    const accepted = n - rejected.length;
    this.counters.settle(accepted, rejected.length);
    for (const err of rejected) this.events.failed(err);
    this.events.delivered({ batchId: batch.batchId, producerId: batch.producerId, firstSeq: batch.firstSeq,
      lastSeq: batch.lastSeq, accepted, rejected });
    return { kind: "ack" };
  }
}
