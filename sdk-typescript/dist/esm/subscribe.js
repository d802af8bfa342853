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
/** The server refused the subscription and retrying would not help (a bad key, scope, stream or filter). */
export class SubscriptionError extends HeadwaterError {
    status;
    constructor(status, code, message) {
        super(code, `HTTP ${status} ${code}: ${message}`);
        this.status = status;
    }
}
const RETRIED = new Set([408, 429, 500, 502, 503, 504]);
/** The WHATWG event-stream format: text in, messages out; an id-only message moves `lastId`. */
export class SseParser {
    maxLine;
    lastId;
    retryMs;
    buf = "";
    event = "";
    data = [];
    id;
    afterCr = false;
    constructor(maxLine = 16 * 1024 * 1024) {
        this.maxLine = maxLine;
    }
    feed(text) {
        if (this.afterCr && text.startsWith("\n"))
            text = text.slice(1); // the LF of a CRLF split across chunks
        this.afterCr = false;
        this.buf += text;
        const out = [];
        const eol = /\r\n|\r|\n/g;
        let start = 0;
        for (let hit = eol.exec(this.buf); hit !== null; hit = eol.exec(this.buf)) {
            const msg = this.line(this.buf.slice(start, hit.index));
            if (msg !== undefined)
                out.push(msg);
            start = hit.index + hit[0].length;
            if (hit[0] === "\r" && start === this.buf.length)
                this.afterCr = true;
        }
        this.buf = this.buf.slice(start);
        if (this.buf.length > this.maxLine)
            throw new Error(`an event-stream line is longer than ${this.maxLine}`);
        return out;
    }
    line(line) {
        if (line === "")
            return this.dispatch();
        if (line.startsWith(":"))
            return undefined;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" "))
            value = value.slice(1);
        if (name === "data")
            this.data.push(value);
        else if (name === "event")
            this.event = value;
        else if (name === "id" && !value.includes("\0"))
            this.id = value;
        else if (name === "retry" && /^\d+$/.test(value))
            this.retryMs = Number(value);
        return undefined;
    }
    dispatch() {
        if (this.id !== undefined)
            this.lastId = this.id;
        const msg = this.data.length ? { event: this.event || "message", data: this.data.join("\n"), id: this.lastId } : undefined;
        this.event = "";
        this.data = [];
        this.id = undefined;
        return msg;
    }
}
class RetryLater extends Error {
    afterMs;
    constructor(afterMs) {
        super("retry later");
        this.afterMs = afterMs;
    }
}
function backoff(attempt, baseMs, capMs, minMs) {
    const delay = Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 30));
    return Math.max(delay, minMs ?? 0);
}
export class Subscription {
    readKey;
    options;
    lastEventId;
    /** Records deleted by retention before a resume could read them (`gap` messages). */
    gaps = [];
    cutoffs = 0;
    reconnects = 0;
    url;
    fetchFn;
    abort = new AbortController();
    constructor(endpoint, readKey, stream, options = {}) {
        this.readKey = readKey;
        this.options = options;
        const query = new URLSearchParams({ from: String(options.start ?? "latest") });
        if (options.filter)
            query.set("filter", JSON.stringify(options.filter));
        this.url = `${endpoint.replace(/\/+$/, "")}/v1/streams/${encodeURIComponent(stream)}?${query.toString()}`;
        this.lastEventId = options.lastEventId;
        this.fetchFn = options.fetch ?? fetch;
    }
    /** Ends the iteration and closes the connection. */
    close() {
        this.abort.abort();
    }
    async *[Symbol.asyncIterator]() {
        let failures = 0;
        while (!this.abort.signal.aborted) {
            const parser = new SseParser();
            let minMs;
            try {
                for await (const record of this.connect(parser)) {
                    failures = 0;
                    yield record;
                }
            }
            catch (err) {
                if (this.abort.signal.aborted)
                    return;
                if (err instanceof SubscriptionError)
                    throw err;
                if (err instanceof RetryLater)
                    minMs = err.afterMs;
            }
            failures += 1;
            this.reconnects += 1;
            const wait = backoff(failures, parser.retryMs ?? 1000, this.options.maxBackoffMs ?? 30_000, minMs);
            await new Promise((resolve) => {
                const timer = setTimeout(resolve, wait);
                this.abort.signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
            });
        }
    }
    async *connect(parser) {
        const idle = new AbortController();
        const onAbort = () => idle.abort();
        this.abort.signal.addEventListener("abort", onAbort, { once: true });
        const timeoutMs = this.options.readTimeoutMs ?? 60_000;
        let timer = setTimeout(() => idle.abort(), timeoutMs);
        try {
            const headers = { Authorization: `Bearer ${this.readKey}`, Accept: "text/event-stream" };
            if (this.lastEventId)
                headers["Last-Event-ID"] = this.lastEventId;
            const resp = await this.fetchFn(this.url, { headers, signal: idle.signal });
            if (resp.status !== 200)
                await this.refused(resp);
            if (!resp.body)
                return;
            const decoder = new TextDecoder();
            const reader = resp.body.getReader();
            for (;;) {
                const { done, value } = await reader.read();
                if (done)
                    return;
                clearTimeout(timer);
                timer = setTimeout(() => idle.abort(), timeoutMs);
                for (const msg of parser.feed(decoder.decode(value, { stream: true }))) {
                    if (msg.id !== undefined)
                        this.lastEventId = msg.id;
                    const record = this.message(msg);
                    if (record)
                        yield record;
                }
                if (parser.lastId !== undefined)
                    this.lastEventId = parser.lastId; // id-only messages move it too
            }
        }
        finally {
            clearTimeout(timer);
            this.abort.signal.removeEventListener("abort", onAbort);
            idle.abort();
        }
    }
    message(msg) {
        const doc = JSON.parse(msg.data);
        if (msg.event === "message")
            return { ...doc, id: msg.id ?? "" };
        if (msg.event === "cutoff")
            this.cutoffs += 1;
        else if (msg.event === "gap")
            this.gaps.push(doc);
        return undefined;
    }
    async refused(resp) {
        let body = {};
        try {
            body = (await resp.json());
        }
        catch {
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
export function subscribe(endpoint, readKey, stream, options = {}) {
    return new Subscription(endpoint, readKey, stream, options);
}
