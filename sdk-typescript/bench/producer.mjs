// One benchmark producer process: `producer.mjs <sdk> <sinkUrl> <events> [closeMs]`; prints one JSON line.
// CPU is process.cpuUsage() at the end: the whole process, start-up included, as the peers' notes measured it;
// `startMs` is how long the process took to load its SDK (subtracted from the wall clock by run.mjs).
import { performance } from "node:perf_hooks";

const [sdk, sink, count, closeMsArg = "30000"] = process.argv.slice(2);
const n = Number(count);
const pad = "lorem ipsum dolor sit amet ".repeat(40); // ~1.1 KB
function properties(i) {
  return { url: `https://shop.example.com/p/${i}`, path: `/p/${i}`, title: "bench", user_id: `u-${i % 97}`,
    session_id: "s-1", locale: "en-GB", load_time_ms: 12.5, description: pad };
}

async function run() {
  if (sdk === "headwater" || sdk === "headwater-outage") {
    const { Headwater } = await import("../dist/esm/index.js");
    const outage = sdk === "headwater-outage";
    const client = new Headwater({ endpoint: sink, writeKey: "wk_bench", handleExit: false, ...(outage ? {} : { maxQueueEvents: n }) });
    client.on("failure", () => {});
    const startMs = performance.now();
    for (let i = 0; i < n; i++) client.track("page_view", properties(i), { partitionKey: `u-${i % 97}` });
    const trackMs = performance.now() - startMs;
    const t0 = performance.now();
    const closed = await client.close({ timeoutMs: outage ? Number(closeMsArg) : 600_000 }).then(() => true, () => false);
    return { trackMs, closed, closeMs: performance.now() - t0, startMs };
  }
  if (sdk === "segment") {
    const { Analytics } = await import("@segment/analytics-node");
    const client = new Analytics({ writeKey: "wk_bench", host: sink });
    const startMs = performance.now();
    for (let i = 0; i < n; i++) client.track({ userId: `u-${i % 97}`, event: "page_view", properties: properties(i) });
    const trackMs = performance.now() - startMs;
    await client.closeAndFlush({ timeout: 600_000 });
    return { trackMs, closed: true, startMs };
  }
  if (sdk === "posthog") {
    const { PostHog } = await import("posthog-node");
    const client = new PostHog("phc_bench", { host: sink, maxQueueSize: n });
    const startMs = performance.now();
    for (let i = 0; i < n; i++) client.capture({ distinctId: `u-${i % 97}`, event: "page_view", properties: properties(i) });
    const trackMs = performance.now() - startMs;
    await client.shutdown(600_000);
    return { trackMs, closed: true, startMs };
  }
  throw new Error(`unknown sdk ${sdk}`);
}

const result = await run();
const cpu = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ sdk, events: n, usPerTrack: (result.trackMs * 1000) / n, cpuUs: cpu.user + cpu.system,
  rssMb: process.memoryUsage().rss / 2 ** 20, closed: result.closed, closeMs: result.closeMs, startMs: result.startMs })}\n`);
process.exit(0);
