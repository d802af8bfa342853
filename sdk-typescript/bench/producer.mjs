// One benchmark producer process: `producer.mjs <sdk> <sinkUrl> <events>`; prints one JSON line with its figures.
// CPU is process.cpuUsage() at the end: the whole process, start-up included, as the peers' notes measured it.
import { performance } from "node:perf_hooks";

const [sdk, sink, count] = process.argv.slice(2);
const n = Number(count);
const pad = "lorem ipsum dolor sit amet ".repeat(40); // ~1.1 KB
function properties(i) {
  return { url: `https://shop.example.com/p/${i}`, path: `/p/${i}`, title: "bench", user_id: `u-${i % 97}`,
    session_id: "s-1", locale: "en-GB", load_time_ms: 12.5, description: pad };
}

async function run() {
  if (sdk === "headwater" || sdk === "headwater-spool") {
    const { Headwater } = await import("../dist/esm/index.js");
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const spoolDir = sdk === "headwater-spool" ? mkdtempSync(`${tmpdir()}/hw-bench-`) : null;
    const client = new Headwater({ endpoint: sink, writeKey: "wk_bench", handleExit: false, maxQueueEvents: n, spoolDir });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) client.track("page_view", properties(i), { partitionKey: `u-${i % 97}` });
    const trackMs = performance.now() - t0;
    const closed = await client.closeQuietly(120_000);
    if (spoolDir !== null) rmSync(spoolDir, { recursive: true, force: true });
    return { trackMs, closed };
  }
  if (sdk === "segment") {
    const { Analytics } = await import("@segment/analytics-node");
    const client = new Analytics({ writeKey: "wk_bench", host: sink });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) client.track({ userId: `u-${i % 97}`, event: "page_view", properties: properties(i) });
    const trackMs = performance.now() - t0;
    await client.closeAndFlush({ timeout: 120_000 });
    return { trackMs, closed: true };
  }
  if (sdk === "posthog") {
    const { PostHog } = await import("posthog-node");
    const client = new PostHog("phc_bench", { host: sink });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) client.capture({ distinctId: `u-${i % 97}`, event: "page_view", properties: properties(i) });
    const trackMs = performance.now() - t0;
    await client.shutdown(120_000);
    return { trackMs, closed: true };
  }
  throw new Error(`unknown sdk ${sdk}`);
}

const result = await run();
const cpu = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ sdk, events: n, usPerTrack: (result.trackMs * 1000) / n,
  cpuUs: cpu.user + cpu.system, rssMb: process.memoryUsage().rss / 2 ** 20, closed: result.closed })}\n`);
process.exit(0);
