/**
 * Live subscriptions: `subscribe(endpoint, readKey, stream, options)` is an async iterable of a stream's records as
 * the subscription server pushes them (Server-Sent Events); after any disconnect it resumes exactly after the last
 * record it gave you.
 *
 * ```ts
 * const sub = subscribe("http://subscribe:8082", "hwr_...", "rule.slow_pages_alert");
 * for await (const record of sub) console.log(record.value); // record.id is its position
 * ```
 *
 * Reconnects (a dropped connection, a restart, a cut-off after falling behind, 429/5xx) wait with jittered backoff,
 * never less than the server's `retry` or `Retry-After`; any other refusal throws `SubscriptionError`.
 */

import { HeadwaterError } from "./errors.js";

export interface SubscribeOptions {
  /** Where the first connection starts: "latest" (default), "earliest", epoch ms or an ISO 8601 time. */
  start?: string | number;
  /** Equality filter: { "field.path": value | [values] } (docs/subscriptions.md). */
  filter?: Record<string, unknown>;
  /** Resume from a position kept earlier (a record's `id`). */
  lastEventId?: string;
  /** Reconnect when nothing, not even a heartbeat, arrives for this long (default 60000). */
  readTimeoutMs?: number;
  /** Longest wait between reconnects (default 30000). */
  maxBackoffMs?: number;
  /** An injectable fetch (tests). */
  fetch?: typeof fetch;
}

export interface StreamRecord {
  /** The position after this record: pass it as `lastEventId` to resume. */
  id: string;
  stream: string;
  partition: number;
  offset: number;
  timestamp: number;
  key: string | null;
  value: unknown;
  schema: { id: number; subject: string | null; version: number | null } | null;
  headers: Record<string, string>;
  /** Set when the server could not decode the record (then `value` is null). */
  error?: { code: string; message: string };
}

/** The server refused the subscription and retrying would not help (a bad key, scope, stream or filter). */
export class SubscriptionError extends HeadwaterError {
  readonly status: number;
  constructor(status: number, code: string, message: string) {
    super(code, `HTTP ${status} ${code}: ${message}`);
    this.status = status;
  }
}

const RETRIED = new Set([408, 429, 500, 502, 503, 504]);

interface SseMessage {
  event: string;
  data: string;
  id: string | undefined;
}

/** The WHATWG event-stream format: text in, messages out; an id-only message moves `lastId`. */
export class SseParser {
  lastId: string | undefined;
  retryMs: number | undefined;
  private buf = "";
  private event = "";
  private data: string[] = [];
  private id: string | undefined;
  private afterCr = false;
  constructor(private readonly maxLine = 16 * 1024 * 1024) {}

  feed(text: string): SseMessage[] {
    if (this.afterCr && text.startsWith("\n")) text = text.slice(1); // the LF of a CRLF split across chunks
    this.afterCr = false;
    this.buf += text;
    const out: SseMessage[] = [];
    const eol = /\r\n|\r|\n/g;
    let start = 0;
    for (let hit = eol.exec(this.buf); hit !== null; hit = eol.exec(this.buf)) {
      const msg = this.line(this.buf.slice(start, hit.index));
      if (msg !== undefined) out.push(msg);
      start = hit.index + hit[0].length;
      if (hit[0] === "\r" && start === this.buf.length) this.afterCr = true;
    }
    this.buf = this.buf.slice(start);
    if (this.buf.length > this.maxLine) throw new Error(`an event-stream line is longer than ${this.maxLine}`);
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.data.push(value);
    else if (name === "event") this.event = value;
    else if (name === "id" && !value.includes("\0")) this.id = value;
    else if (name === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    if (this.id !== undefined) this.lastId = this.id;
    const msg = this.data.length ? { event: this.event || "message", data: this.data.join("\n"), id: this.lastId } : undefined;
    this.event = "";
    this.data = [];
    this.id = undefined;
    return msg;
  }
}

class RetryLater extends Error {
  constructor(readonly afterMs: number | undefined) {
    super("retry later");
  }
}

function backoff(attempt: number, baseMs: number, capMs: number, minMs: number | undefined): number {
  const delay = Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.max(delay, minMs ?? 0);
}

export class Subscription implements AsyncIterable<StreamRecord> {
  lastEventId: string | undefined;
  /** Records deleted by retention before a resume could read them (`gap` messages). */
  readonly gaps: unknown[] = [];
  cutoffs = 0;
  reconnects = 0;
  private readonly url: string;
  private readonly fetchFn: typeof fetch;
  private readonly abort = new AbortController();

  constructor(endpoint: string, private readonly readKey: string, stream: string,
              private readonly options: SubscribeOptions = {}) {
    const query = new URLSearchParams({ from: String(options.start ?? "latest") });
    if (options.filter) query.set("filter", JSON.stringify(options.filter));
    this.url = `${endpoint.replace(/\/+$/, "")}/v1/streams/${encodeURIComponent(stream)}?${query.toString()}`;
    this.lastEventId = options.lastEventId;
    this.fetchFn = options.fetch ?? fetch;
  }

  /** Ends the iteration and closes the connection. */
  close(): void {
    this.abort.abort();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamRecord> {
    let failures = 0;
    while (!this.abort.signal.aborted) {
      const parser = new SseParser();
      let minMs: number | undefined;
      try {
        for await (const record of this.connect(parser)) {
          failures = 0;
          yield record;
        }
      } catch (err) {
        if (this.abort.signal.aborted) return;
        if (err instanceof SubscriptionError) throw err;
        if (err instanceof RetryLater) minMs = err.afterMs;
      }
      failures += 1;
      this.reconnects += 1;
      const wait = backoff(failures, parser.retryMs ?? 1000, this.options.maxBackoffMs ?? 30_000, minMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.abort.signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
      });
    }
  }

  private async *connect(parser: SseParser): AsyncGenerator<StreamRecord> {
    const idle = new AbortController();
    const onAbort = (): void => idle.abort();
    this.abort.signal.addEventListener("abort", onAbort, { once: true });
    const timeoutMs = this.options.readTimeoutMs ?? 60_000;
    let timer = setTimeout(() => idle.abort(), timeoutMs);
    try {
      const headers: Record<string, string> = { Authorization: `Bearer ${this.readKey}`, Accept: "text/event-stream" };
      if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
      const resp = await this.fetchFn(this.url, { headers, signal: idle.signal });
      if (resp.status !== 200) await this.refused(resp);
      if (!resp.body) return;
      const decoder = new TextDecoder();
      const reader = (resp.body as ReadableStream<Uint8Array>).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(), timeoutMs);
        for (const msg of parser.feed(decoder.decode(value, { stream: true }))) {
          if (msg.id !== undefined) this.lastEventId = msg.id;
          const record = this.message(msg);
          if (record) yield record;
        }
        if (parser.lastId !== undefined) this.lastEventId = parser.lastId; // id-only messages move it too
      }
    } finally {
      clearTimeout(timer);
      this.abort.signal.removeEventListener("abort", onAbort);
      idle.abort();
    }
  }

  private message(msg: SseMessage): StreamRecord | undefined {
    const doc = JSON.parse(msg.data) as Record<string, unknown>;
    if (msg.event === "message") return { ...(doc as unknown as StreamRecord), id: msg.id ?? "" };
    if (msg.event === "cutoff") this.cutoffs += 1;
    else if (msg.event === "gap") this.gaps.push(doc);
    return undefined;
  }

  private async refused(resp: Response): Promise<never> {
    let body: { code?: string; message?: string } = {};
    try {
      body = (await resp.json()) as typeof body;
    } catch {
      // not JSON: keep the status
    }
    if (RETRIED.has(resp.status)) {
      const after = Number(resp.headers.get("Retry-After"));
      throw new RetryLater(Number.isFinite(after) && after > 0 ? after * 1000 : undefined);
    }
    throw new SubscriptionError(resp.status, body.code ?? "http_error", body.message ?? "");
  }
}

/** Subscribe to `stream` (`event.<type>`, `rule.<name>`, `deadletter`, `aggregates`) with a read key. */
export function subscribe(endpoint: string, readKey: string, stream: string, options: SubscribeOptions = {}): Subscription {
  return new Subscription(endpoint, readKey, stream, options);
}
