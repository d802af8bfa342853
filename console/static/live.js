// The console's live panel: one stream of the subscription server, through the console's relay (/api/live/...),
// newest record first. The stream is the page's `?live=` parameter (default: the threshold-alert rule's output).
"use strict";

const LIVE_ROWS = 25;
const live = { stream: new URLSearchParams(location.search).get("live") || "rule.slow_pages_alert",
               records: [], count: 0, status: "connecting", errors: 0 };
window.headwaterLive = live;

function liveSummary(value) {
  const text = JSON.stringify(value);
  return text && text.length > 160 ? text.slice(0, 159) + "…" : text;
}

function drawLive() {
  document.getElementById("live-status").textContent =
    `${live.stream}: ${live.status}; ${live.count} records since the page opened`;
  const body = document.querySelector("#live tbody");
  body.replaceChildren();
  live.records.forEach(r => {
    const tr = document.createElement("tr");
    [new Date(r.timestamp).toLocaleTimeString(), r.key ?? "", liveSummary(r.error ? r.error : r.value)]
      .forEach(v => { const td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
    body.appendChild(tr);
  });
}

function openLive() {
  const source = new EventSource(`/api/live/${encodeURIComponent(live.stream)}`);
  let unavailable = null; // the relay's reason on this connection (it then ends, and is retried after 10 s)
  source.onopen = () => { unavailable = null; live.status = "live"; drawLive(); };
  source.addEventListener("unavailable", (e) => {
    const why = JSON.parse(e.data);
    unavailable = `unavailable (${why.code}: ${why.message}); trying again`;
    live.status = unavailable;
    drawLive();
  });
  source.onmessage = (e) => {
    unavailable = null;
    live.status = "live";
    live.records.unshift(JSON.parse(e.data));
    live.records.length = Math.min(live.records.length, LIVE_ROWS);
    live.count += 1;
    drawLive();
  };
  source.onerror = () => {
    live.errors += 1;
    // EventSource reconnects by itself (with Last-Event-ID) unless the answer was an error status.
    live.status = unavailable || (source.readyState === EventSource.CLOSED ? "stopped (see the console's log)"
                                                                           : "reconnecting");
    drawLive();
  };
}

document.addEventListener("DOMContentLoaded", () => { drawLive(); openLive(); });
