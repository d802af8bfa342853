// Micro-benchmark of the per-event CPU of @headwater/node: track() in a tight loop (as bench/producer.mjs does),
// then close() through a transport that answers every batch at once (MemoryTransport: body, compression and the
// delivery bookkeeping, no network). Compares builds side by side in one run, alternating child processes, so a
// shared host's load hits every build alike: read the ratios, not the absolute figures.
//
// Usage (after the SDK's build): node bench/track.mjs [events=60000] [rounds=5] [--base <git rev> ...] [dist dir ...]
//   --base <rev>: also measure the committed dist/ of that revision (e.g. main), extracted to a temporary folder.
//   Without dist dirs, this folder's ../dist is measured.
// Figures per build (medians over the rounds): track() µs/event (wall clock of the loop), the loop's CPU µs/event,
// and the process's CPU µs/event from the first track() until close() resolved.
import { execFileSync, execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { performance } from "node:perf_hooks";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pad = "lorem ipsum dolor sit amet ".repeat(40); // the event of bench/producer.mjs (~1.3 KB)
function properties(i) {
  return { url: `https://shop.example.com/p/${i}`, path: `/p/${i}`, title: "bench", user_id: `u-${i % 97}`,
    session_id: "s-1", locale: "en-GB", load_time_ms: 12.5, description: pad };
}

async function child(dist, n) {
  const { Headwater, MemoryTransport } = await import(pathToFileURL(join(dist, "esm", "index.js")).href);
  const transport = new MemoryTransport();
  const client = new Headwater({ endpoint: "http://127.0.0.1:9", writeKey: "wk_bench", handleExit: false, maxQueueEvents: n,
    transport });
  client.on("failure", () => {});
  const codec = await client.codec();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) client.track("page_view", properties(i), { partitionKey: `u-${i % 97}` });
  const trackMs = performance.now() - t0;
  const cpu1 = process.cpuUsage(cpu0);
  await client.close({ timeoutMs: 600_000 });
  const cpu2 = process.cpuUsage(cpu0);
  const m = client.metrics();
  if (m.acknowledged !== n) throw new Error(`${dist}: ${m.acknowledged} of ${n} acknowledged`);
  return { codec: codec.implementation, trackUs: (trackMs * 1000) / n, loopCpuUs: (cpu1.user + cpu1.system) / n,
    totalCpuUs: (cpu2.user + cpu2.system) / n, requests: transport.requests.length };
}

function run(dist, n) {
  return new Promise((ok, fail) => {
    execFile(process.execPath, [fileURLToPath(import.meta.url), "--child", dist, String(n)], { maxBuffer: 1 << 20 },
      (err, stdout, stderr) => (err ? fail(new Error(`${dist}: ${err.message}\n${stderr}`)) : ok(JSON.parse(stdout))));
  });
}

function extract(rev) {
  const root = resolve(here, "..", "..");
  const tmp = mkdtempSync(join(tmpdir(), "hw-track-"));
  execFileSync("sh", ["-c", `git -C '${root}' archive '${rev}' sdk-typescript/dist sdk-typescript/package.json | tar -x -C '${tmp}'`]);
  symlinkSync(resolve(here, "..", "node_modules"), join(tmp, "sdk-typescript", "node_modules")); // zstd-napi, as here
  return { tmp, dist: join(tmp, "sdk-typescript", "dist") };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(argv) {
  const args = [...argv];
  const bases = [];
  for (let at = args.indexOf("--base"); at >= 0; at = args.indexOf("--base")) bases.push(args.splice(at, 2)[1]);
  const [events = "60000", rounds = "5", ...dists] = args;
  const builds = dists.map((d) => ({ name: d, dist: resolve(d) }));
  if (builds.length === 0) builds.push({ name: "this dist/", dist: resolve(here, "..", "dist") });
  const tmps = [];
  for (const base of bases.reverse()) {
    const x = extract(base);
    tmps.push(x.tmp);
    builds.unshift({ name: `${base} dist/`, dist: x.dist });
  }
  const load = loadavg();
  const runs = builds.map(() => []);
  try {
    for (let r = 0; r < Number(rounds); r++) {
      for (const [i, b] of builds.entries()) runs[i].push(await run(b.dist, Number(events)));
    }
  } finally {
    for (const tmp of tmps) rmSync(tmp, { recursive: true, force: true });
  }
  const after = loadavg();
  console.log(`track() micro-benchmark: ${events} events x ${rounds} rounds per build (medians); load average before ` +
    `${load.map((x) => x.toFixed(2)).join(" ")}, after ${after.map((x) => x.toFixed(2)).join(" ")}`);
  console.log("build                          codec      track µs/event  loop CPU µs/event  total CPU µs/event  total / first's");
  const firstTotal = median(runs[0].map((x) => x.totalCpuUs));
  for (const [i, b] of builds.entries()) {
    const xs = runs[i];
    const total = median(xs.map((x) => x.totalCpuUs));
    console.log(`${b.name.slice(-30).padEnd(30)} ${xs[0].codec.padEnd(10)} ${median(xs.map((x) => x.trackUs)).toFixed(2).padStart(14)}  ` +
      `${median(xs.map((x) => x.loopCpuUs)).toFixed(2).padStart(17)}  ${total.toFixed(2).padStart(18)}  ${(total / firstTotal).toFixed(2).padStart(15)}`);
  }
}

if (process.argv[2] === "--child") {
  process.stdout.write(JSON.stringify(await child(process.argv[3], Number(process.argv[4]))));
} else {
  await main(process.argv.slice(2));
}
