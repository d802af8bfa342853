/**
 * The client's configuration: one frozen, validated object built once from options or the environment.
 *
 * Every option is also an environment variable `HEADWATER_<PYTHON OPTION NAME IN UPPER CASE>` (the names the
 * Python and Go SDKs use: `lingerMs` <- `HEADWATER_LINGER_S`, durations in seconds in the environment);
 * `GATEWAY_URL` and `REGISTRY_URL` are aliases of `HEADWATER_ENDPOINT` and `HEADWATER_REGISTRY_URL`.
 */
import type { Transport } from "./transport.js";
export declare const QUEUE_POLICIES: readonly ["drop_newest", "drop_oldest"];
export declare const SPOOL_OVERFLOW_POLICIES: readonly ["backpressure", "drop_oldest"];
export declare const FSYNC_POLICIES: readonly ["always", "never"];
export declare const COMPRESSIONS: readonly ["zstd", "gzip", "identity"];
export declare const WIRE_FORMATS: readonly ["json", "avro"];
export declare const GATEWAY_MAX_EVENTS = 40;
export type QueuePolicy = (typeof QUEUE_POLICIES)[number];
export type SpoolOverflow = (typeof SPOOL_OVERFLOW_POLICIES)[number];
export type Compression = (typeof COMPRESSIONS)[number];
/** Every option of `Headwater`; see the README's table for what each one does. */
export interface HeadwaterOptions {
    /** The gateway; may be left out when `endpoints` is given (else it must be `endpoints[0]`). */
    endpoint?: string;
    /** Several gateways in order of preference, the primary first (protocol.md §9, failover); same scheme for all. */
    endpoints?: readonly string[];
    /** With several endpoints: how long the active one fails before the next is used ... */
    failoverAfterMs?: number;
    /** ... and at least this many consecutive failed attempts. */
    failoverAfterFailures?: number;
    /** How often earlier endpoints are probed (`GET /readyz`) to fail back. */
    failbackProbeMs?: number;
    writeKey: string;
    spoolDir?: string | null;
    wireFormat?: "json" | "avro";
    /** The schema registry (needed by `wireFormat: "avro"`). */
    registryUrl?: string | null;
    schemaRefreshMs?: number;
    compression?: Compression;
    maxBatchEvents?: number;
    maxBatchBytes?: number;
    maxEventBytes?: number;
    lingerMs?: number;
    maxQueueEvents?: number;
    queuePolicy?: QueuePolicy;
    maxPendingBatches?: number;
    spoolMaxBytes?: number;
    spoolOverflow?: SpoolOverflow;
    spoolFsync?: "always" | "never";
    requestTimeoutMs?: number;
    retryDeadlineMs?: number;
    retryBaseMs?: number;
    retryMaxMs?: number;
    /** Backoff cap after a refused connection and while close() waits (protocol.md §6.3). */
    retryRefusedMaxMs?: number;
    connectionMaxAgeMs?: number;
    exitTimeoutMs?: number;
    /** The ceiling of the adaptive in-flight limit (protocol.md §6.2), 1..64. */
    maxInFlight?: number;
    /** A PEM file of CA certificates trusted instead of the system's, for https endpoints (a private CA). */
    caBundle?: string | null;
    nodeId?: string;
    context?: Record<string, string>;
    /** Flush and close on `beforeExit`, SIGTERM and SIGINT (bounded by `exitTimeoutMs`). Default true. */
    handleExit?: boolean;
    /** The HTTP seam; default: keep-alive `node:http`/`node:https`. */
    transport?: Transport;
}
export type Config = Readonly<Required<Omit<HeadwaterOptions, "spoolDir" | "transport" | "registryUrl" | "caBundle">>> & {
    readonly endpoint: string;
    readonly endpoints: readonly string[];
    readonly spoolDir: string | null;
    readonly caBundle: string | null;
    readonly registryUrl: string | null;
    readonly transport: Transport | undefined;
};
export declare const DEFAULTS: {
    readonly spoolDir: null;
    readonly registryUrl: null;
    readonly schemaRefreshMs: 300000;
    readonly wireFormat: "json";
    readonly compression: "zstd";
    readonly maxBatchEvents: 40;
    readonly maxBatchBytes: number;
    readonly maxEventBytes: number;
    readonly lingerMs: 50;
    readonly maxQueueEvents: 10000;
    readonly queuePolicy: "drop_newest";
    readonly maxPendingBatches: 1000;
    readonly spoolMaxBytes: number;
    readonly spoolOverflow: "backpressure";
    readonly spoolFsync: "always";
    readonly requestTimeoutMs: 10000;
    readonly retryDeadlineMs: 300000;
    readonly retryBaseMs: 500;
    readonly retryMaxMs: 30000;
    readonly retryRefusedMaxMs: 2000;
    readonly connectionMaxAgeMs: 300000;
    readonly exitTimeoutMs: 5000;
    readonly maxInFlight: 16;
    readonly failoverAfterMs: 10000;
    readonly failoverAfterFailures: 3;
    readonly failbackProbeMs: 10000;
    readonly caBundle: null;
    readonly handleExit: true;
};
/** The environment variable of an option, e.g. `lingerMs` -> `HEADWATER_LINGER_S`. */
export declare function envName(option: string): string;
/** Options from `HEADWATER_*` variables (`overrides` win); throws ConfigError naming a bad variable. */
export declare function optionsFromEnv(env?: NodeJS.ProcessEnv, overrides?: Partial<HeadwaterOptions>): HeadwaterOptions;
/** Validate `options` and fill the defaults; throws ConfigError naming the bad option. */
export declare function buildConfig(options: HeadwaterOptions): Config;
export declare const MAX_ENDPOINTS = 8;
/** `url` with any user-info replaced by `***` (for messages). */
export declare function withoutUserinfo(url: string): string;
