// Benchmark: @headwater/node vs @segment/analytics-node 3.1.0 vs posthog-node 5.70.0, same events, one run.
// A loopback sink counts delivered events (optionally answering after DELAY_MS); each SDK runs in its own
// process; figures: µs per track() call, and whole-process CPU µs per distinct event the sink received
// ("delivered"; "received" also counts resent copies).
// Usage: node bench/run.mjs [events=20000] [rounds=2] [delayMs=0]   (after `npm ci` in bench/)
// `headwater-spool` is the same SDK with a disk spool (every batch written and fsynced before it is sent).
import { execFile } from "node:child_process";
import { once } from "node:events";
import * as http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { decompress } from "zstd-napi";

const here = dirname(fileURLToPath(import.meta.url));
const [events = "20000", rounds = "2", delayMs = "0"] = process.argv.slice(2);
let counted = 0; // events received, duplicates included
let unique = new Set(); // distinct event ids (event_id / messageId / uuid): a resent batch counts once

const server = http.createServer({ keepAliveTimeout: 15_000 }, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body = Buffer.concat(chunks);
    const enc = req.headers["content-encoding"];
    if (enc === "zstd") body = decompress(body);
    else if (enc === "gzip" || (body[0] === 0x1f && body[1] === 0x8b)) body = gunzipSync(body);
    let n = 0;
    try {
      const doc = JSON.parse(body.toString("utf8"));
      const list = doc.events ?? doc.batch ?? [];
      n = list.length;
      for (const e of list) unique.add(e.event_id ?? e.messageId ?? e.uuid ?? `${counted}-${n}`);
    } catch {
      n = 0;
    }
    counted += n;
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ accepted: n, rejected: [], status: 1 }));
    }, Number(delayMs));
  });
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const sink = `http://127.0.0.1:${server.address().port}`;

function produce(sdk) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(here, "producer.mjs"), sdk, sink, events], { cwd: here, maxBuffer: 1 << 20 },
      (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout.trim().split("\n").pop()))));
  });
}

const rows = [];
for (let r = 0; r < Number(rounds); r++) {
  for (const sdk of ["headwater", "headwater-spool", "segment", "posthog"]) {
    counted = 0;
    unique = new Set();
    const out = await produce(sdk);
    await new Promise((res) => setTimeout(res, 200)); // late requests
    const delivered = unique.size;
    rows.push({ round: r + 1, ...out, delivered, received: counted, cpuUsPerDelivered: delivered ? out.cpuUs / delivered : Infinity });
  }
}
server.close();
console.log(`events per run: ${events}, sink delay: ${delayMs} ms`);
console.log("round  sdk             µs/track  CPU µs/delivered  delivered  received  RSS MB");
for (const row of rows) {
  console.log(`${String(row.round).padEnd(6)} ${row.sdk.padEnd(15)} ${row.usPerTrack.toFixed(2).padStart(8)}  ` +
    `${row.cpuUsPerDelivered.toFixed(1).padStart(16)}  ${String(row.delivered).padStart(9)}  ${String(row.received).padStart(8)}  ` +
    `${row.rssMb.toFixed(0).padStart(6)}`);
}
const best = (sdk, key) => Math.min(...rows.filter((r) => r.sdk === sdk).map((r) => r[key]));
const ours = best("headwater", "cpuUsPerDelivered");
const peer = Math.min(best("segment", "cpuUsPerDelivered"), best("posthog", "cpuUsPerDelivered"));
const oursTrack = best("headwater", "usPerTrack");
const peerTrack = Math.min(best("segment", "usPerTrack"), best("posthog", "usPerTrack"));
console.log(`ratio CPU per delivered event, headwater / better peer: ${(ours / peer).toFixed(3)} (goal <= 0.5)`);
console.log(`ratio µs per track(), headwater / better peer: ${(oursTrack / peerTrack).toFixed(3)}`);
console.log(JSON.stringify({ events: Number(events), delayMs: Number(delayMs), cpuRatio: ours / peer, trackRatio: oursTrack / peerTrack, rows }));
