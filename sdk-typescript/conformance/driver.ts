/** The TypeScript SDK's conformance driver: JSON-lines commands on stdin drive `Headwater` (DRIVER.md). */

import { createInterface } from "node:readline";
import {
  BatchRejectedError,
  ConfigError,
  type DeliveryError,
  EventRejectedError,
  EventsDroppedError,
  Headwater,
  type HeadwaterOptions,
  InvalidEventError,
  SDK_NAME,
  VERSION,
} from "../src/index.js";

const CAPABILITIES = ["json", "zstd", "gzip", "identity", "avro", "spool", "retries", "split", "track_seq", "event_id", "timestamp", "max_in_flight", "env_config"];
type Json = Record<string, unknown>;

/** Python option name -> [TypeScript option, seconds to milliseconds]. */
const OPTIONS: Record<string, [keyof HeadwaterOptions, boolean]> = {
  node_id: ["nodeId", false], context: ["context", false], linger_s: ["lingerMs", true],
  max_batch_events: ["maxBatchEvents", false], max_batch_bytes: ["maxBatchBytes", false],
  max_event_bytes: ["maxEventBytes", false], max_queue_events: ["maxQueueEvents", false],
  queue_policy: ["queuePolicy", false], compression: ["compression", false], wire_format: ["wireFormat", false],
  registry_url: ["registryUrl", false], schema_refresh_s: ["schemaRefreshMs", true],
  request_timeout_s: ["requestTimeoutMs", true], retry_base_s: ["retryBaseMs", true], retry_max_s: ["retryMaxMs", true],
  retry_refused_max_s: ["retryRefusedMaxMs", true], ca_bundle: ["caBundle", false],
  retry_deadline_s: ["retryDeadlineMs", true], max_in_flight: ["maxInFlight", false], exit_timeout_s: ["exitTimeoutMs", true],
  connection_max_age_s: ["connectionMaxAgeMs", true], max_pending_batches: ["maxPendingBatches", false],
  spool_max_bytes: ["spoolMaxBytes", false], endpoints: ["endpoints", false],
  failover_after_s: ["failoverAfterMs", true], failover_after_failures: ["failoverAfterFailures", false],
  failback_probe_s: ["failbackProbeMs", true], spool_overflow: ["spoolOverflow", false], spool_fsync: ["spoolFsync", false],
};

class Failure extends Error {
  constructor(readonly type: string, message: string) {
    super(message);
  }
}

let client: Headwater | undefined;
let reported: Json[] = [];

function current(): Headwater {
  if (client === undefined) throw new Failure("not_initialised", "init first");
  return client;
}

function report(err: DeliveryError): void {
  if (err instanceof EventRejectedError) {
    reported.push({ kind: "event_rejected", batch_id: err.batchId, event_id: err.eventId, seq: err.seq, code: err.code });
  } else if (err instanceof BatchRejectedError) {
    reported.push({ kind: "batch_refused", batch_id: err.batchId, status: err.status, code: err.code, count: err.count });
  } else if (err instanceof EventsDroppedError) {
    reported.push({ kind: "dropped", reason: err.reason, count: err.count });
  } else {
    reported.push({ kind: "error", message: err.message });
  }
}

function init(cmd: Json): Json {
  if (cmd.env !== undefined && cmd.env !== null) {
    // Configuration from exactly these variables, the way the SDK reads its environment.
    const spool = typeof cmd.spool_dir === "string" ? { spoolDir: cmd.spool_dir } : {};
    client = Headwater.fromEnv({ handleExit: false, ...spool }, cmd.env as NodeJS.ProcessEnv);
  } else {
    const opts: Record<string, unknown> = { endpoint: cmd.endpoint, writeKey: cmd.write_key, spoolDir: cmd.spool_dir ?? null, handleExit: false };
    for (const [name, value] of Object.entries((cmd.options as Json | undefined) ?? {})) {
      const entry = OPTIONS[name];
      if (entry === undefined) throw new Failure("config_error", `unknown option: ${name}`);
      opts[entry[0]] = entry[1] && typeof value === "number" ? value * 1000 : value;
    }
    client = new Headwater(opts as unknown as HeadwaterOptions);
  }
  reported = [];
  client.on("delivery", (r) => reported.push({ kind: "delivered", batch_id: r.batchId, accepted: r.accepted }));
  client.on("failure", report);
  return { producer_id: client.producerId };
}

function track(cmd: Json): Json {
  const ts = cmd.timestamp;
  const r = current().track(cmd.event_type as string, cmd.properties as Json | undefined, {
    partitionKey: cmd.partition_key as string | null | undefined,
    eventId: cmd.event_id as string | null | undefined,
    timestamp: typeof ts === "number" ? ts * 1000 : (ts as null | undefined),
  });
  if (!r.ok) throw new Failure(r.reason === "client_closed" ? "closed" : "queue_full", r.reason);
  return { seq: r.seq, event_id: r.eventId };
}

async function handle(cmd: Json): Promise<Json> {
  const timeoutMs = Number(cmd.timeout_s ?? 10) * 1000;
  switch (cmd.cmd) {
    case "hello":
      return { sdk: SDK_NAME, version: VERSION, protocol: 1, runtime: `node/${process.versions.node}`, capabilities: CAPABILITIES };
    case "init":
      return init(cmd);
    case "track":
      return track(cmd);
    case "flush": { // false also when events were lost: settled then means nothing is left waiting
      const all = await current().flush({ timeoutMs });
      const m = current().metrics();
      return { settled: all || (m.queued === 0 && m.pendingEvents === 0) };
    }
    case "close":
      return { delivered_all: await current().closeQuietly({ timeoutMs }) };
    case "outcomes": {
      current();
      const out = reported;
      reported = [];
      return { outcomes: out };
    }
    case "stats": {
      const m = current().metrics();
      return { enqueued: m.enqueued, acknowledged: m.acknowledged, rejected: m.rejected, dropped: m.dropped,
        failovers: m.failovers, failbacks: m.failbacks };
    }
    default:
      throw new Failure("protocol_error", `unknown command: ${String(cmd.cmd)}`);
  }
}

async function reply(line: string): Promise<Json> {
  try {
    let cmd: unknown;
    try {
      cmd = JSON.parse(line);
    } catch (err) {
      throw new Failure("protocol_error", `not JSON: ${(err as Error).message}`);
    }
    if (cmd === null || typeof cmd !== "object" || Array.isArray(cmd)) throw new Failure("protocol_error", "not an object");
    return { ok: true, ...(await handle(cmd as Json)) };
  } catch (err) {
    const type = err instanceof Failure ? err.type : err instanceof ConfigError ? "config_error"
      : err instanceof InvalidEventError ? "invalid_event" : "internal";
    return { ok: false, error: { type, message: `${(err as Error).name}: ${(err as Error).message}` } };
  }
}

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    process.stdout.write(`${JSON.stringify(await reply(line))}\n`);
  }
  process.exit(0); // EOF: exit now, without the SDK's exit-time flush (DRIVER.md "Process")
}

void main();
