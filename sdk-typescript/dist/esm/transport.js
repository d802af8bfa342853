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
const MAX_RESPONSE_BYTES = 1024 * 1024;
const TARGETS_MAX = 64; // a client's endpoints, their /readyz and the registry's paths: a handful
/** HTTP/1.1 keep-alive through `node:http`/`node:https`, recycled after an age with jitter. */
export class HttpTransport {
    https;
    maxSockets;
    maxAgeMs;
    ca;
    pool;
    closed = false;
    targets = new Map();
    constructor(https, maxSockets, maxAgeMs, ca) {
        this.https = https;
        this.maxSockets = maxSockets;
        this.maxAgeMs = maxAgeMs;
        this.ca = ca;
        this.pool = this.newPool();
    }
    newPool() {
        const options = { keepAlive: true, maxSockets: this.maxSockets, maxFreeSockets: this.maxSockets, scheduling: "lifo" };
        const agent = this.https ? new https.Agent({ ...options, rejectUnauthorized: true, ...(this.ca ? { ca: this.ca } : {}) })
            : new http.Agent(options);
        return { agent, active: 0, expires: Date.now() + this.maxAgeMs * (0.8 + 0.2 * Math.random()), retired: false };
    }
    current() {
        if (Date.now() >= this.pool.expires) {
            const old = this.pool;
            old.retired = true;
            if (old.active === 0)
                old.agent.destroy();
            this.pool = this.newPool();
        }
        return this.pool;
    }
    send(request, timeoutMs) {
        if (this.closed)
            return Promise.reject(new TransportError("transport closed"));
        const pool = this.current();
        pool.active++;
        const lib = this.https ? https : http;
        return new Promise((resolvePromise, rejectPromise) => {
            let settled = false;
            const finish = (err, resp) => {
                if (settled)
                    return;
                settled = true;
                clearTimeout(timer);
                pool.active--;
                if (pool.retired && pool.active === 0)
                    pool.agent.destroy();
                if (err !== undefined)
                    rejectPromise(err);
                else
                    resolvePromise(resp);
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
            req.on("error", (err) => {
                const code = err.code === "ECONNREFUSED" ? "connection_refused" : "connection_error"; // refused: nothing listens
                finish(err instanceof TransportError ? err : new TransportError(`${request.method} ${request.url}: ${err.message}`, code));
            });
            req.on("response", (res) => {
                const chunks = [];
                let size = 0;
                res.on("data", (chunk) => {
                    size += chunk.length;
                    if (size <= MAX_RESPONSE_BYTES)
                        chunks.push(chunk);
                });
                res.on("error", (err) => finish(new TransportError(`reading the answer: ${err.message}`, "connection_error")));
                res.on("end", () => {
                    const headers = {};
                    for (const [k, v] of Object.entries(res.headers))
                        headers[k] = Array.isArray(v) ? v.join(", ") : v;
                    finish(undefined, { status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
                });
            });
            req.end(request.body);
        });
    }
    target(url) {
        let target = this.targets.get(url);
        if (target === undefined) {
            const u = new URL(url);
            const hostname = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname; // an IPv6 literal
            target = { hostname, port: u.port, path: `${u.pathname}${u.search}` };
            if (this.targets.size < TARGETS_MAX)
                this.targets.set(url, target);
        }
        return target;
    }
    /** Close every connection, ending requests still in flight (their batches are released, not lost). */
    close() {
        this.closed = true;
        this.pool.retired = true;
        this.pool.agent.destroy();
    }
}
/** A fake transport for tests of code that uses the SDK: records every request and answers with `handler`. */
export class MemoryTransport {
    handler;
    requests = [];
    closed = false;
    /** `handler` answers each request; the default answers a batch with 200, every event accepted (else 404). */
    constructor(handler = acceptAll) {
        this.handler = handler;
    }
    send(request, _timeoutMs) {
        if (this.closed)
            return Promise.reject(new TransportError("transport closed"));
        this.requests.push(request);
        return Promise.resolve(this.handler(request));
    }
    close() {
        this.closed = true;
    }
}
function acceptAll(request) {
    if (request.method === "POST" && request.url.endsWith("/v1/batch")) {
        return { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from('{"accepted":0,"rejected":[]}') };
    }
    return { status: 404, headers: {}, body: Buffer.from('{"code":"not_found","message":"not found"}') };
}
