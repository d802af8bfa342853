/** Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store. */

import type { Config } from "./config.js";
import { compress } from "./compress.js";
import { BatchRejectedError, EventRejectedError, RetryableStatusError, TransportError, type DeliveryError } from "./errors.js";
import { splitBatchId } from "./ids.js";
import type { Counters } from "./metrics.js";
import { backoffMs, classify, sleep } from "./retry.js";
import type { HttpResponse, Transport } from "./transport.js";
import { USER_AGENT } from "./version.js";
import { type Batch, JSON_TYPE, jsonBody, parseError, parseRejections, parseRetryAfter, seqOf } from "./wire.js";

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

/** The two halves of a batch (DECISIONS 2): first floor(n/2) events, then the rest, with derived ids. */
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

/** Sends batches to `{endpoint}/v1/batch`; counts and reports what happened. */
export class Sender {
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly firstSent = new Map<string, number>(); // batch id -> sent_at of its first send

  constructor(
    private readonly cfg: Config,
    private readonly transport: Transport,
    private readonly counters: Counters,
    private readonly events: SenderEvents,
    private readonly abort: AbortSignal,
  ) {
    this.url = `${cfg.endpoint.replace(/\/+$/, "")}/v1/batch`;
    this.headers = {
      "Content-Type": JSON_TYPE,
      "Content-Encoding": cfg.compression,
      Authorization: `Bearer ${cfg.writeKey}`,
      "User-Agent": USER_AGENT,
    };
  }

  /** Send `batch` until answered; `keepOnFailure` (a spool) keeps it after the retry deadline. */
  async deliver(batch: Batch, keepOnFailure: boolean): Promise<Action> {
    const n = batch.events.length;
    this.counters.sent += n;
    this.counters.batchesSent += 1;
    let sentAt = this.firstSent.get(batch.batchId);
    if (sentAt === undefined) {
      sentAt = Date.now();
      this.firstSent.set(batch.batchId, sentAt);
    }
    const body = compress(jsonBody(batch, sentAt), this.cfg.compression);
    const deadline = Date.now() + this.cfg.retryDeadlineMs;
    for (let attempt = 1; ; attempt++) {
      let failure: TransportError;
      try {
        const resp = await this.transport.send({ method: "POST", url: this.url, headers: this.headers, body }, this.cfg.requestTimeoutMs);
        if (classify(resp.status) !== "retry") {
          this.firstSent.delete(batch.batchId);
          return this.answered(batch, resp);
        }
        const [code, message] = parseError(resp.body, resp.status);
        failure = new RetryableStatusError(resp.status, parseRetryAfter(resp.headers["retry-after"]), `${code} ${message}`);
      } catch (err) {
        failure = err instanceof TransportError ? err : new TransportError(String(err));
      }
      const wait = backoffMs(attempt, this.cfg.retryBaseMs, this.cfg.retryMaxMs,
        failure instanceof RetryableStatusError ? failure.retryAfter : undefined);
      if (this.abort.aborted) return { kind: "release" };
      if (Date.now() + wait > deadline) {
        this.events.failed(failure);
        if (keepOnFailure) return { kind: "release" };
        this.firstSent.delete(batch.batchId);
        this.counters.settle(0, 0, { retry_deadline: n });
        this.events.failed(new TransportError(`batch ${batch.batchId}: ${n} event(s) dropped after the retry deadline`, "retry_deadline"));
        return { kind: "ack" };
      }
      this.counters.retries += 1;
      this.events.failed(failure);
      if (!(await sleep(wait, this.abort))) return { kind: "release" };
    }
  }

  private answered(batch: Batch, resp: HttpResponse): Action {
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
    const rejected: EventRejectedError[] = [];
    const seen = new Set<number>();
    for (const r of parseRejections(resp.body)) {
      const event = batch.events[r.index];
      if (event === undefined || seen.has(r.index)) continue;
      seen.add(r.index);
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
