// Benchmark: @headwater/node on a real network beside @segment/analytics-node 3.1.0 and posthog-node 5.70.0
// (throughput, connections, CPU), and delivery across an outage. Not a test: it prints figures.
//
// A loopback sink in this process answers every batch after a delay that stands in for the round trip to a
// distant gateway (1, 50 and 100 ms by default; requests are delayed concurrently, as a network would), counts
// distinct events (event_id / messageId / uuid) and the TCP connections it accepted, and can answer 503 (no
// Retry-After) for a while. Each producer is its own process (producer.mjs):
//  1. throughput: per latency and SDK, EVENTS ~1.3 KB events are tracked, then the client is closed as its docs
//     say; the clock stops when the sink counted every event. Figures: events/s, the steady rate (events the
//     sink counted between 25 % and 75 % of the run, per second: the producer's synchronous tracking loop, during
//     which Node sends nothing, and the tail are left out), connections, the producer process's CPU (start-up
//     included) per delivered event, and the peers' CPU per event over headwater's.
//     Defaults everywhere, except that each queue holds the whole run (posthog-node's drops the oldest otherwise).
//  2. outage: TRIES times the sink goes down for 10 s, headwater tracks 2,000 events at once and calls
//     close({ timeoutMs: 30000 }); a try counts if the sink received every event and close() resolved.
// Usage (after `npm ci` in bench/ and the SDK's build): node bench/run.mjs [events=60000] [latencies=1,50,100]
// [tries=10] [sdks=headwater,segment,posthog]
import { execFile } from "node:child_process";
import { once } from "node:events";
import * as http from "node:http";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { decompress } from "zstd-napi";

const here = dirname(fileURLToPath(import.meta.url));
const [events = "60000", latencies = "1,50,100", tries = "10", sdks = "headwater,segment,posthog"] = process.argv.slice(2);
const OUTAGE_MS = 10_000;
const OUTAGE_EVENTS = 2000;
const CLOSE_MS = 30_000;
const sink = { ids: new Set(), received: 0, conns: 0, delayMs: 0, downUntil: 0, expect: Infinity, q1: undefined, q3: undefined };

const server = http.createServer({ keepAliveTimeout: 15_000 }, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    setTimeout(() => {
      if (Date.now() < sink.downUntil) {
        res.writeHead(503, { "content-type": "application/json" });
        res.end('{"code":"overloaded","message":"down"}');
        return;
      }
      let body = Buffer.concat(chunks);
      const enc = req.headers["content-encoding"];
      if (enc === "zstd") body = decompress(body);
      else if (enc === "gzip" || (body[0] === 0x1f && body[1] === 0x8b)) body = gunzipSync(body);
      let n = 0;
      try {
        const doc = JSON.parse(body.toString("utf8"));
        const list = doc.events ?? doc.batch ?? [];
        n = list.length;
        for (const e of list) sink.ids.add(e.event_id ?? e.messageId ?? e.uuid ?? `${sink.received}-${n}`);
      } catch {
        // not JSON: counted as no event
      }
      sink.received += n;
      const size = sink.ids.size; // the steady rate: counted between 25 % and 75 % of the run's events
      if (sink.q1 === undefined && size >= sink.expect * 0.25) sink.q1 = { t: performance.now(), n: size };
      if (sink.q3 === undefined && size >= sink.expect * 0.75) sink.q3 = { t: performance.now(), n: size };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ accepted: n, rejected: [], status: 1 }));
    }, sink.delayMs);
  });
});
server.on("connection", () => { sink.conns += 1; });
server.listen(0, "127.0.0.1");
await once(server, "listening");
const url = `http://127.0.0.1:${server.address().port}`;

function reset(delayMs, downMs = 0, expect = Infinity) {
  Object.assign(sink, { ids: new Set(), received: 0, conns: 0, delayMs, downUntil: Date.now() + downMs, expect,
    q1: undefined, q3: undefined });
}

function steadyRate() {
  const { q1, q3 } = sink;
  return q1 && q3 && q3.t > q1.t ? (q3.n - q1.n) / ((q3.t - q1.t) / 1000) : null;
}

function child(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(here, "producer.mjs"), ...args], { cwd: here, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) {
        console.error(`${args.join(" ")} failed: ${err.message}\n${stderr.slice(-2000)}`);
        resolve(undefined);
        return;
      }
      resolve(JSON.parse(stdout.trim().split("\n").pop()));
    });
  });
}

async function waitFor(n, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (sink.ids.size < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

const loadBefore = loadavg();
const results = [];
for (const latency of latencies.split(",").map(Number)) {
  for (const sdk of sdks.split(",")) {
    reset(latency, 0, Number(events));
    const t0 = performance.now();
    const out = await child([sdk, url, events]);
    await waitFor(Number(events), 600_000);
    const seconds = (performance.now() - t0 - (out?.startMs ?? 0)) / 1000;
    if (out === undefined) continue;
    const delivered = sink.ids.size;
    results.push({ latency_ms: latency, sdk, events: Number(events), delivered, seconds, events_per_s: delivered / seconds,
      steady_per_s: steadyRate(), connections: sink.conns, cpu_us_per_event: delivered ? out.cpuUs / delivered : Infinity, us_per_track: out.usPerTrack });
  }
}
const outages = [];
for (let i = 0; i < Number(tries); i++) {
  reset(1, OUTAGE_MS);
  const out = await child(["headwater-outage", url, String(OUTAGE_EVENTS), String(CLOSE_MS)]);
  await waitFor(OUTAGE_EVENTS, 2000);
  outages.push({ close_s: out?.closeMs / 1000, close_ok: out?.closed === true, delivered: sink.ids.size });
}
server.close();
server.closeAllConnections();

const report = { bench: "sdk_network_node", events: Number(events), load_avg_before: loadBefore, load_avg_after: loadavg(),
  results, outage: { outage_s: OUTAGE_MS / 1000, events: OUTAGE_EVENTS, close_s: CLOSE_MS / 1000, tries: outages } };
const fmt = (xs) => xs.map((x) => x.toFixed(2)).join(" ");
console.log(`load average before: ${fmt(report.load_avg_before)}; after: ${fmt(report.load_avg_after)}`);
console.log("latency  sdk         delivered  events/s  steady/s  conns  CPU µs/event  CPU / headwater's");
for (const r of results) {
  const hw = results.find((x) => x.latency_ms === r.latency_ms && x.sdk === "headwater");
  console.log(`${String(r.latency_ms).padStart(5)}ms  ${r.sdk.padEnd(10)} ${String(r.delivered).padStart(9)}  ` +
    `${r.events_per_s.toFixed(0).padStart(8)}  ${(r.steady_per_s ?? 0).toFixed(0).padStart(8)}  ${String(r.connections).padStart(5)}  ${r.cpu_us_per_event.toFixed(1).padStart(12)}  ` +
    `${hw ? (r.cpu_us_per_event / hw.cpu_us_per_event).toFixed(2).padStart(17) : ""}`);
}
const full = outages.filter((o) => o.delivered === OUTAGE_EVENTS && o.close_ok).length;
const closes = outages.map((o) => o.close_s).filter((s) => typeof s === "number").sort((a, b) => a - b);
console.log(`outage: ${OUTAGE_EVENTS} tracked in a ${OUTAGE_MS / 1000} s outage, close given ${CLOSE_MS / 1000} s: all delivered ` +
  `and close() resolved in ${full} of ${outages.length} tries; delivered per try [${outages.map((o) => o.delivered).join(", ")}]; ` +
  `close took ${(closes[0] ?? 0).toFixed(1)}-${(closes[closes.length - 1] ?? 0).toFixed(1)} s`);
console.log(JSON.stringify(report));
