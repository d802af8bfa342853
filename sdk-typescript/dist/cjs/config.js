"use strict";
/**
 * The client's configuration: one frozen, validated object built once from options or the environment.
 *
 * Every option is also an environment variable `HEADWATER_<PYTHON OPTION NAME IN UPPER CASE>` (the names the
 * Python and Go SDKs use: `lingerMs` <- `HEADWATER_LINGER_S`, durations in seconds in the environment);
 * `GATEWAY_URL` and `REGISTRY_URL` are aliases of `HEADWATER_ENDPOINT` and `HEADWATER_REGISTRY_URL`.
 */
Object.defineProperty(exports, "__esModule", { value: true });
exports.MAX_ENDPOINTS = exports.DEFAULTS = exports.GATEWAY_MAX_EVENTS = exports.WIRE_FORMATS = exports.COMPRESSIONS = exports.FSYNC_POLICIES = exports.SPOOL_OVERFLOW_POLICIES = exports.QUEUE_POLICIES = void 0;
exports.envName = envName;
exports.optionsFromEnv = optionsFromEnv;
exports.buildConfig = buildConfig;
exports.withoutUserinfo = withoutUserinfo;
const node_os_1 = require("node:os");
const errors_js_1 = require("./errors.js");
exports.QUEUE_POLICIES = ["drop_newest", "drop_oldest"];
exports.SPOOL_OVERFLOW_POLICIES = ["backpressure", "drop_oldest"];
exports.FSYNC_POLICIES = ["always", "never"];
exports.COMPRESSIONS = ["zstd", "gzip", "identity"];
exports.WIRE_FORMATS = ["json", "avro"];
exports.GATEWAY_MAX_EVENTS = 40; // protocol.md section 5
exports.DEFAULTS = {
    spoolDir: null,
    registryUrl: null,
    schemaRefreshMs: 300_000,
    wireFormat: "json",
    compression: "zstd",
    maxBatchEvents: 40,
    maxBatchBytes: 512 * 1024,
    maxEventBytes: 64 * 1024,
    lingerMs: 50,
    maxQueueEvents: 10_000,
    queuePolicy: "drop_newest",
    maxPendingBatches: 1_000,
    spoolMaxBytes: 256 * 1024 * 1024,
    spoolOverflow: "backpressure",
    spoolFsync: "always",
    requestTimeoutMs: 10_000,
    retryDeadlineMs: 300_000,
    retryBaseMs: 500,
    retryMaxMs: 30_000,
    retryRefusedMaxMs: 2_000,
    connectionMaxAgeMs: 300_000,
    exitTimeoutMs: 5_000,
    maxInFlight: 16,
    failoverAfterMs: 10_000,
    failoverAfterFailures: 3,
    failbackProbeMs: 10_000,
    caBundle: null,
    handleExit: true,
};
/** Option name -> [environment name of the Python option, kind]; `ms` options are seconds in the env. */
const ENV = {
    endpoint: ["ENDPOINT", "str"],
    endpoints: ["ENDPOINTS", "list"],
    failoverAfterMs: ["FAILOVER_AFTER_S", "ms"],
    failoverAfterFailures: ["FAILOVER_AFTER_FAILURES", "int"],
    failbackProbeMs: ["FAILBACK_PROBE_S", "ms"],
    writeKey: ["WRITE_KEY", "str"],
    spoolDir: ["SPOOL_DIR", "str"],
    wireFormat: ["WIRE_FORMAT", "str"],
    registryUrl: ["REGISTRY_URL", "str"],
    schemaRefreshMs: ["SCHEMA_REFRESH_S", "ms"],
    compression: ["COMPRESSION", "str"],
    maxBatchEvents: ["MAX_BATCH_EVENTS", "int"],
    maxBatchBytes: ["MAX_BATCH_BYTES", "int"],
    maxEventBytes: ["MAX_EVENT_BYTES", "int"],
    lingerMs: ["LINGER_S", "ms"],
    maxQueueEvents: ["MAX_QUEUE_EVENTS", "int"],
    queuePolicy: ["QUEUE_POLICY", "str"],
    maxPendingBatches: ["MAX_PENDING_BATCHES", "int"],
    spoolMaxBytes: ["SPOOL_MAX_BYTES", "int"],
    spoolOverflow: ["SPOOL_OVERFLOW", "str"],
    spoolFsync: ["SPOOL_FSYNC", "str"],
    requestTimeoutMs: ["REQUEST_TIMEOUT_S", "ms"],
    retryDeadlineMs: ["RETRY_DEADLINE_S", "ms"],
    retryBaseMs: ["RETRY_BASE_S", "ms"],
    retryMaxMs: ["RETRY_MAX_S", "ms"],
    retryRefusedMaxMs: ["RETRY_REFUSED_MAX_S", "ms"],
    connectionMaxAgeMs: ["CONNECTION_MAX_AGE_S", "ms"],
    exitTimeoutMs: ["EXIT_TIMEOUT_S", "ms"],
    maxInFlight: ["MAX_IN_FLIGHT", "int"],
    caBundle: ["CA_BUNDLE", "str"],
    nodeId: ["NODE_ID", "str"],
};
const ALIASES = { ENDPOINT: "GATEWAY_URL", REGISTRY_URL: "REGISTRY_URL" };
/** The environment variable of an option, e.g. `lingerMs` -> `HEADWATER_LINGER_S`. */
function envName(option) {
    const entry = ENV[option];
    return entry ? `HEADWATER_${entry[0]}` : option;
}
/** Options from `HEADWATER_*` variables (`overrides` win); throws ConfigError naming a bad variable. */
function optionsFromEnv(env = process.env, overrides = {}) {
    const out = {};
    for (const [option, [name, kind]] of Object.entries(ENV)) {
        const alias = ALIASES[name];
        const vars = [`HEADWATER_${name}`, ...(alias !== undefined ? [alias] : [])];
        for (const v of vars) {
            const raw = env[v];
            if (raw === undefined || raw === "")
                continue;
            out[option] = parseEnv(v, raw, kind);
            break;
        }
    }
    Object.assign(out, overrides);
    if (out.endpoint === undefined && out.endpoints === undefined) {
        throw new errors_js_1.ConfigError(`${envName("endpoint")} or GATEWAY_URL is not set (nor ${envName("endpoints")})`);
    }
    if (out.writeKey === undefined)
        throw new errors_js_1.ConfigError(`${envName("writeKey")} is not set`);
    return out;
}
function parseEnv(name, raw, kind) {
    if (kind === "str")
        return raw;
    if (kind === "list")
        return raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
    const value = Number(raw.replace(/_/g, ""));
    if (!Number.isFinite(value) || (kind === "int" && !Number.isInteger(value))) {
        throw new errors_js_1.ConfigError(`${name}=${JSON.stringify(raw)} is not a valid ${kind === "int" ? "integer" : "number"}`);
    }
    return kind === "ms" ? value * 1000 : value;
}
/** Validate `options` and fill the defaults; throws ConfigError naming the bad option. */
function buildConfig(options) {
    if (options === null || typeof options !== "object")
        throw new errors_js_1.ConfigError("options must be an object");
    const known = new Set([...Object.keys(ENV), "context", "handleExit", "transport"]);
    for (const key of Object.keys(options)) {
        if (!known.has(key))
            throw new errors_js_1.ConfigError(`unknown option: ${key}`);
    }
    const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
    const cfg = { ...exports.DEFAULTS, nodeId: (0, node_os_1.hostname)(), context: {}, transport: undefined, ...defined,
        ...endpointsOf(options) };
    if (typeof cfg.writeKey !== "string" || cfg.writeKey === "") {
        throw new errors_js_1.ConfigError("writeKey (HEADWATER_WRITE_KEY) must be a non-empty string");
    }
    if (cfg.spoolDir !== null && (typeof cfg.spoolDir !== "string" || cfg.spoolDir === "")) {
        throw new errors_js_1.ConfigError("spoolDir (HEADWATER_SPOOL_DIR) must be a path or null");
    }
    if (cfg.caBundle !== null && (typeof cfg.caBundle !== "string" || cfg.caBundle === "")) {
        throw new errors_js_1.ConfigError("caBundle (HEADWATER_CA_BUNDLE) must be a path to a PEM file or null");
    }
    checkChoice("wireFormat", cfg.wireFormat, exports.WIRE_FORMATS);
    if (cfg.registryUrl !== null)
        checkUrl("registryUrl", cfg.registryUrl);
    if (cfg.wireFormat === "avro" && cfg.registryUrl === null) {
        throw new errors_js_1.ConfigError("wireFormat 'avro' needs registryUrl (HEADWATER_REGISTRY_URL)");
    }
    checkChoice("compression", cfg.compression, exports.COMPRESSIONS);
    checkChoice("queuePolicy", cfg.queuePolicy, exports.QUEUE_POLICIES);
    checkChoice("spoolOverflow", cfg.spoolOverflow, exports.SPOOL_OVERFLOW_POLICIES);
    checkChoice("spoolFsync", cfg.spoolFsync, exports.FSYNC_POLICIES);
    checkInt("maxBatchEvents", cfg.maxBatchEvents, 1, exports.GATEWAY_MAX_EVENTS);
    checkInt("maxBatchBytes", cfg.maxBatchBytes, 1024, 2 ** 30);
    checkInt("maxEventBytes", cfg.maxEventBytes, 64, cfg.maxBatchBytes);
    checkInt("maxQueueEvents", cfg.maxQueueEvents, 1, 2 ** 31);
    checkInt("maxPendingBatches", cfg.maxPendingBatches, 1, 2 ** 31);
    checkInt("spoolMaxBytes", cfg.spoolMaxBytes, 1024, 2 ** 50);
    checkInt("maxInFlight", cfg.maxInFlight, 1, 64);
    checkInt("failoverAfterFailures", cfg.failoverAfterFailures, 1, 1_000_000);
    checkNumber("failoverAfterMs", cfg.failoverAfterMs, 0, 86_400_000);
    checkNumber("failbackProbeMs", cfg.failbackProbeMs, 1, 86_400_000 * 365);
    for (const name of ["lingerMs", "exitTimeoutMs"])
        checkNumber(name, cfg[name], 0, 86_400_000);
    for (const name of ["requestTimeoutMs", "retryDeadlineMs", "retryBaseMs", "retryMaxMs", "retryRefusedMaxMs", "connectionMaxAgeMs", "schemaRefreshMs"]) {
        checkNumber(name, cfg[name], 1, 86_400_000 * 365);
    }
    if (typeof cfg.nodeId !== "string" || cfg.nodeId === "") {
        throw new errors_js_1.ConfigError("nodeId (HEADWATER_NODE_ID) must be a non-empty string");
    }
    const ctx = cfg.context;
    if (ctx === null || typeof ctx !== "object" || Array.isArray(ctx)) {
        throw new errors_js_1.ConfigError("context must be an object mapping strings to strings");
    }
    for (const v of Object.values(ctx)) {
        if (typeof v !== "string")
            throw new errors_js_1.ConfigError("context must map strings to strings");
    }
    if (typeof cfg.handleExit !== "boolean")
        throw new errors_js_1.ConfigError("handleExit must be a boolean");
    return Object.freeze({ ...cfg, context: Object.freeze({ ...cfg.context }) });
}
exports.MAX_ENDPOINTS = 8;
/** `endpoints` (ordered, the primary first) or `[endpoint]`, checked; `endpoint` is then the first. */
function endpointsOf(options) {
    const list = options.endpoints ?? (options.endpoint === undefined ? [] : [options.endpoint]);
    if (!Array.isArray(list) || list.length === 0) {
        throw new errors_js_1.ConfigError("endpoint (HEADWATER_ENDPOINT or GATEWAY_URL) or endpoints (HEADWATER_ENDPOINTS) is required");
    }
    const name = options.endpoints === undefined ? "endpoint" : "endpoints";
    for (const url of list)
        checkUrl(name, url);
    const urls = list;
    const distinct = new Set(urls.map((u) => u.replace(/\/+$/, "")));
    if (urls.length > exports.MAX_ENDPOINTS || distinct.size !== urls.length) {
        throw new errors_js_1.ConfigError(`endpoints must be 1 to ${exports.MAX_ENDPOINTS} distinct URLs, got ${JSON.stringify(urls)}`);
    }
    if (new Set(urls.map((u) => u.split(":")[0])).size !== 1) {
        throw new errors_js_1.ConfigError(`endpoints must all be http:// or all https://, got ${JSON.stringify(urls)}`);
    }
    if (options.endpoint !== undefined && options.endpoint !== urls[0]) {
        throw new errors_js_1.ConfigError(`endpoint ${JSON.stringify(options.endpoint)} must be the first of endpoints (or be left out)`);
    }
    return { endpoint: urls[0], endpoints: Object.freeze([...urls]) };
}
/**
 * An http(s) URL with a host and no user-info (`user:password@`): the write key is the only credential a gateway
 * or registry takes, and a password in a URL ends up in logs. No message repeats the user-info.
 */
function checkUrl(name, value) {
    const shown = typeof value === "string" ? withoutUserinfo(value) : value;
    if (typeof value !== "string" || !/^https?:\/\/[^/\s]+/.test(value)) {
        throw new errors_js_1.ConfigError(`${name} (${envName(name)}) must be an http:// or https:// URL, got ${JSON.stringify(shown)}`);
    }
    if (shown !== value) {
        throw new errors_js_1.ConfigError(`${name} (${envName(name)}) must not carry credentials (user:password@), got ${JSON.stringify(shown)}: ` +
            "the write key is the only credential (sent as Authorization: Bearer)");
    }
}
/** `url` with any user-info replaced by `***` (for messages). */
function withoutUserinfo(url) {
    const start = url.indexOf("://");
    if (start < 0)
        return url;
    const from = start + 3;
    const rest = url.slice(from);
    const end = rest.search(/[/?#]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const at = authority.lastIndexOf("@");
    return at < 0 ? url : `${url.slice(0, from)}***@${rest.slice(at + 1)}`;
}
function checkChoice(name, value, choices) {
    if (typeof value !== "string" || !choices.includes(value)) {
        throw new errors_js_1.ConfigError(`${name} (${envName(name)}) must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`);
    }
}
function checkNumber(name, value, low, high) {
    if (typeof value !== "number" || !Number.isFinite(value) || value < low || value > high) {
        throw new errors_js_1.ConfigError(`${name} (${envName(name)}) must be a number in [${low}, ${high}], got ${String(value)}`);
    }
}
function checkInt(name, value, low, high) {
    checkNumber(name, value, low, high);
    if (!Number.isInteger(value))
        throw new errors_js_1.ConfigError(`${name} (${envName(name)}) must be an integer, got ${String(value)}`);
}
