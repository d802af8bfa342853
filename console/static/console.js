// The console page: polls /api/snapshot and redraws every chart. Read-only.
"use strict";

const POLL_MS = 2000;
const state = { draws: 0, snapshot: null, drawn: {} };
window.headwaterConsole = state;

function seriesOf(points, pick) {
  return points.map(p => [p.t, pick(p) ?? null]);
}

function keysOf(points, field) {
  const keys = new Set();
  points.forEach(p => Object.keys(p[field] || {}).forEach(k => keys.add(k)));
  return [...keys].sort();
}

// Every time on the page is UTC, as the aggregates' windows are.
function utcTime(date) {
  return date.toISOString().slice(11, 19) + " UTC";
}

function drawHealth(health) {
  const ul = document.getElementById("health");
  ul.replaceChildren();
  const add = (name, status) => {
    const li = document.createElement("li");
    li.className = status === "ok" ? "ok" : status.startsWith("idle") ? "idle" : "bad";
    li.textContent = name + (status === "ok" ? "" : `: ${status}`);
    li.title = status;
    ul.appendChild(li);
  };
  Object.entries(health.gateways || {}).forEach(([url, s]) => add(`gateway ${url.replace(/^https?:\/\//, "")}`, s));
  ["registry", "kafka", "pipeline"].forEach(k => { if (health[k]) add(k, health[k]); });
}

function drawAudit(audit) {
  const total = document.getElementById("audit-total");
  total.textContent = audit.error ? `loss audit unreadable: ${audit.error}`
    : `${audit.still_missing} events still missing over ${audit.producers.filter(p => p.still_missing > 0).length} producers (${audit.rows} audit rows)`;
  const body = document.querySelector("#audit tbody");
  body.replaceChildren();
  audit.producers.slice(0, 20).forEach(p => {
    const tr = document.createElement("tr");
    [p.producer_id, p.reported, p.arrived_late, p.still_missing, p.gaps.map(g => `${g[0]}–${g[1]}`).join(", ")]
      .forEach(v => { const td = document.createElement("td"); td.textContent = String(v); tr.appendChild(td); });
    body.appendChild(tr);
  });
}

function draw(snap) {
  const C = window.HeadwaterCharts;
  const pts = snap.series;
  const codes = keysOf(pts, "rejected");
  state.drawn.events = C.lineChart(document.getElementById("events"), [
    { name: "accepted", points: seriesOf(pts, p => p.accepted) },
    ...codes.map(c => ({ name: `rejected ${c}`, points: seriesOf(pts, p => (p.rejected || {})[c]) })),
  ], "/s");
  state.drawn.latency = C.lineChart(document.getElementById("latency"), ["p50", "p95", "p99"].map(q => ({
    name: q, points: seriesOf(pts, p => (p.latency_ms || {})[q]) })), " ms");
  state.drawn.pressure = C.lineChart(document.getElementById("pressure"), [
    { name: "in flight", points: seriesOf(pts, p => p.inflight_events) },
    { name: "overloaded/s", points: seriesOf(pts, p => (p.overload || {}).overloaded) },
    { name: "rate limited/s", points: seriesOf(pts, p => (p.overload || {}).rate_limited) },
    { name: "unavailable/s", points: seriesOf(pts, p => p.unavailable) },
  ]);
  state.drawn.lag = C.lineChart(document.getElementById("lag"), [
    { name: "lag", points: seriesOf(pts, p => p.lag) }]);
  const win = snap.windows["1m"];
  state.drawn.windows = C.barChart(document.getElementById("windows"),
    win.rows.map(r => ({ label: `${r.event_type} ${r.region}`, value: r.events })));
  document.getElementById("windows-note").textContent = win.window_start
    ? `window from ${new Date(win.window_start).toISOString().slice(0, 19).replace("T", " ")} UTC (aggregates topic)` : "no aggregates yet: is the pipeline running?";
  state.drawn.deadletters = C.barChart(document.getElementById("deadletters"),
    Object.entries(snap.deadletters.by_reason).map(([label, value]) => ({ label, value })));
  document.getElementById("deadletters-note").textContent =
    `${snap.deadletters.total} in the dead-letter topic; python -m deadletter summary shows them`;
  drawAudit(snap.loss_audit);
  drawHealth(snap.health);
  document.getElementById("updated").textContent = `updated ${utcTime(new Date())} · ${snap.samples} samples`;
  state.draws += 1;
}

async function refresh() {
  try {
    const resp = await fetch("/api/snapshot", { cache: "no-store" });
    if (resp.ok) {
      state.snapshot = await resp.json();
      draw(state.snapshot);
    } else {
      document.getElementById("updated").textContent = `console answered ${resp.status}`;
    }
  } catch (err) {
    document.getElementById("updated").textContent = `console unreachable (${err})`;
  }
  setTimeout(refresh, POLL_MS);
}

refresh();
