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
/** HTTP/1.1 keep-alive through `node:http`/`node:https`, recycled after an age with jitter. */
export declare class HttpTransport implements Transport {
    private readonly https;
    private readonly maxSockets;
    private readonly maxAgeMs;
    private readonly ca?;
    private pool;
    private closed;
    private readonly targets;
    constructor(https: boolean, maxSockets: number, maxAgeMs: number, ca?: Buffer | undefined);
    private newPool;
    private current;
    send(request: HttpRequest, timeoutMs: number): Promise<HttpResponse>;
    private target;
    /** Close every connection, ending requests still in flight (their batches are released, not lost). */
    close(): void;
}
/** A fake transport for tests of code that uses the SDK: records every request and answers with `handler`. */
export declare class MemoryTransport implements Transport {
    handler: (request: HttpRequest) => HttpResponse | Promise<HttpResponse>;
    readonly requests: HttpRequest[];
    closed: boolean;
    /** `handler` answers each request; the default answers a batch with 200, every event accepted (else 404). */
    constructor(handler?: (request: HttpRequest) => HttpResponse | Promise<HttpResponse>);
    send(request: HttpRequest, _timeoutMs: number): Promise<HttpResponse>;
    close(): void;
}
