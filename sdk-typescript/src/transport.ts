/**
 * The transport seam: a small interface, and the default keep-alive `node:http(s)` transport.
 *
 * The default transport keeps up to `maxSockets` HTTP/1.1 connections alive (idle sockets are unref'd by
 * Node's Agent, so they never keep the process alive), reconnects when the gateway answers
 * `Connection: close`, caps the response body, and replaces its Agent after `connectionMaxAgeMs` minus up to
 * 20 % jitter so a load balancer can rebalance; the old Agent is destroyed once its requests are answered.
 * https endpoints are verified (chain and host name) against Node's trust store, or against the CA certificates
 * `ca` (the `caBundle` option's PEM) when given; there is no switch to turn verification off.
 */

import * as http from "node:http";
import * as https from "node:https";
import { TransportError } from "./errors.js";

/** One HTTP request. */
export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** One HTTP response; header names in lower case. */
export interface HttpResponse {
  status: number;
  headers: Record<string, string | undefined>;
  body: Buffer;
}

/** Sends one request; rejects with TransportError on a connection error or timeout. */
export interface Transport {
  send(request: HttpRequest, timeoutMs: number): Promise<HttpResponse>;
  close(): void;
}

const MAX_RESPONSE_BYTES = 1024 * 1024;

interface Pool {
  agent: http.Agent;
  active: number;
  expires: number;
  retired: boolean;
}

/** Where a URL's requests go, parsed once (Node would parse the URL string again for every request). */
interface Target {
  hostname: string;
  port: string;
  path: string;
}

const TARGETS_MAX = 64; // a client's endpoints, their /readyz and the registry's paths: a handful

/** HTTP/1.1 keep-alive through `node:http`/`node:https`, recycled after an age with jitter. */
export class HttpTransport implements Transport {
  private pool: Pool;
  private closed = false;
  private readonly targets = new Map<string, Target>();

  constructor(
    private readonly https: boolean,
    private readonly maxSockets: number,
    private readonly maxAgeMs: number,
    private readonly ca?: Buffer,
  ) {
    this.pool = this.newPool();
  }

  private newPool(): Pool {
    const options = { keepAlive: true, maxSockets: this.maxSockets, maxFreeSockets: this.maxSockets, scheduling: "lifo" as const };
    const agent = this.https ? new https.Agent({ ...options, rejectUnauthorized: true, ...(this.ca ? { ca: this.ca } : {}) })
      : new http.Agent(options);
    return { agent, active: 0, expires: Date.now() + this.maxAgeMs * (0.8 + 0.2 * Math.random()), retired: false };
  }

  private current(): Pool {
    if (Date.now() >= this.pool.expires) {
      const old = this.pool;
      old.retired = true;
      if (old.active === 0) old.agent.destroy();
      this.pool = this.newPool();
    }
    return this.pool;
  }

  send(request: HttpRequest, timeoutMs: number): Promise<HttpResponse> {
    if (this.closed) return Promise.reject(new TransportError("transport closed"));
    const pool = this.current();
    pool.active++;
    const lib = this.https ? https : http;
    return new Promise<HttpResponse>((resolvePromise, rejectPromise) => {
      let settled = false;
      const finish = (err: Error | undefined, resp?: HttpResponse): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        pool.active--;
        if (pool.retired && pool.active === 0) pool.agent.destroy();
        if (err !== undefined) rejectPromise(err);
        else resolvePromise(resp as HttpResponse);
      };
      const target = this.target(request.url);
      const req = lib.request({
        hostname: target.hostname,
        port: target.port,
        path: target.path,
        method: request.method,
        headers: { ...request.headers, "Content-Length": String(request.body.length) },
        agent: pool.agent,
      });
      const timer = setTimeout(() => {
        req.destroy(new TransportError(`${request.method} ${request.url}: no answer within ${timeoutMs} ms`, "timeout"));
      }, timeoutMs);
      timer.unref();
      req.on("error", (err: NodeJS.ErrnoException) => {
        const code = err.code === "ECONNREFUSED" ? "connection_refused" : "connection_error"; // refused: nothing listens
        finish(err instanceof TransportError ? err : new TransportError(`${request.method} ${request.url}: ${err.message}`, code));
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size <= MAX_RESPONSE_BYTES) chunks.push(chunk);
        });
        res.on("error", (err) => finish(new TransportError(`reading the answer: ${err.message}`, "connection_error")));
        res.on("end", () => {
          const headers: Record<string, string | undefined> = {};
          for (const [k, v] of Object.entries(res.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : v;
          finish(undefined, { status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
        });
      });
      req.end(request.body);
    });
  }

  private target(url: string): Target {
    let target = this.targets.get(url);
    if (target === undefined) {
      const u = new URL(url);
      const hostname = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname; // an IPv6 literal
      target = { hostname, port: u.port, path: `${u.pathname}${u.search}` };
      if (this.targets.size < TARGETS_MAX) this.targets.set(url, target);
    }
    return target;
  }

  /** Close every connection, ending requests still in flight (their batches are released, not lost). */
  close(): void {
    this.closed = true;
    this.pool.retired = true;
    this.pool.agent.destroy();
  }
}

/** A fake transport for tests of code that uses the SDK: records every request and answers with `handler`. */
export class MemoryTransport implements Transport {
  readonly requests: HttpRequest[] = [];
  closed = false;

  /** `handler` answers each request; the default answers a batch with 200, every event accepted (else 404). */
  constructor(public handler: (request: HttpRequest) => HttpResponse | Promise<HttpResponse> = acceptAll) {}

  send(request: HttpRequest, _timeoutMs: number): Promise<HttpResponse> {
    if (this.closed) return Promise.reject(new TransportError("transport closed"));
    this.requests.push(request);
    return Promise.resolve(this.handler(request));
  }

  close(): void {
    this.closed = true;
  }
}

function acceptAll(request: HttpRequest): HttpResponse {
  if (request.method === "POST" && request.url.endsWith("/v1/batch")) {
    return { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from('{"accepted":0,"rejected":[]}') };
  }
  return { status: 404, headers: {}, body: Buffer.from('{"code":"not_found","message":"not found"}') };
}
