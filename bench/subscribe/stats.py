"""The benchmark's figures: commit -> arrival latency percentiles, server CPU and memory, and the report."""

from __future__ import annotations

import datetime
import json
import os
import re
import urllib.request
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
BUCKET = re.compile(r'^headwater_subscribe_hold_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$', re.M)


def scrape_hold(url: str) -> dict[float, float]:
    """The server's hold-time histogram (reader got a record -> written to a subscriber): le -> cumulative count."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {float(le): float(n) for le, n in BUCKET.findall(text)}


def hold_pct(before: dict[float, float], after: dict[float, float]) -> dict[str, float | None]:
    """p50/p99 of the hold time between two scrapes, as the histogram's bucket bound (ms) they fall under."""
    delta = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        bound = next((le for le, n in delta if total and n >= q * total), None)
        out[name] = None if bound is None else (round(bound * 1000, 1) if bound != float("inf") else float("inf"))
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, all threads) of a process."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def server_sample(pid: int) -> dict[str, float]:
    """CPU seconds (user + system, all threads) and resident memory of a process."""
    cpu = cpu_seconds(pid)
    with open(f"/proc/{pid}/status") as fh:
        rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return {"cpu_s": cpu, "rss_mb": rss / 1024}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def latency_ms(phase: dict[str, Any], commits: list[tuple[int, int, float]]) -> dict[str, Any]:
    """A phase's figures: probe latencies joined with the commit times of their records."""
    committed = {}
    for first, last, at in commits:
        for seq in range(first, last + 1):
            committed[seq] = at
    t0, t1 = phase["window"]
    in_window = sum(last - first + 1 for first, last, at in commits if t0 <= at < t1)
    lat = [(arrived - committed[seq]) * 1000 for seq, arrived in phase["tallies"].get("probe", {}).get("arrivals", [])
           if seq in committed]
    n_sub = sum(v for k, v in phase["counts"].items() if k in ("probe", "drain", "follower"))
    drain = phase["tallies"].get("drain", {})
    drains = phase["counts"].get("drain", 0)
    out = {
        "name": phase["name"], "subscribers": n_sub, "slow": phase["counts"].get("slow", 0),
        "stalled": phase["counts"].get("stalled", 0),
        "latency_ms": {"p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "max": _pct(lat, 1.0), "samples": len(lat)},
        "committed_in_window": in_window,
        "drain_records_per_subscriber": round(drain.get("records", 0) / drains) if drains else None,
        "server_cpu_s_per_s": round(phase["server_cpu_s_per_s"], 3), "server_rss_mb": round(phase["server_rss_mb"], 1),
        "cpu_s_per_s": phase["cpu_s_per_s"], "server_hold_ms": phase["server_hold_ms"],
        "opened": phase["opened"], "client_failures": phase["client_failures"], "failures": phase["failures"],
    }
    followers = phase["counts"].get("follower", 0)
    if followers:
        out["follower_records_per_subscriber"] = round(phase["tallies"].get("follower", {}).get("records", 0)
                                                       / followers, 1)
    slow = phase["tallies"].get("slow")
    if slow:
        out["slow_reconnects"] = slow["reconnects"]
        out["slow_cutoffs"] = slow["cutoffs"]
    return out


def report(results: dict[str, Any]) -> None:
    phases = {p["name"]: p for p in results["phases"]}
    print()
    print(f"{'phase':<22}{'subs':>6}{'open':>6}{'p50 ms':>9}{'p99 ms':>9}{'hold p99':>10}{'recs/sub':>10}"
          f"{'cpu/s: server':>15}{'clients':>9}{'broker':>8}{'srv MB':>8}  failures")
    for p in results["phases"]:
        cpu, hold = p["cpu_s_per_s"], p["server_hold_ms"]
        print(f"{p['name']:<22}{p['subscribers']:>6}{p['opened']:>6}{p['latency_ms']['p50']!s:>9}"
              f"{p['latency_ms']['p99']!s:>9}{'<=' + str(hold['p99']):>10}{p['drain_records_per_subscriber']!s:>10}"
              f"{cpu['server']:>15}{cpu['clients']:>9}{cpu['broker']:>8}{p['server_rss_mb']:>8}  "
              f"{p['failures'] or '-'}")
    one = phases.get("n1")
    per = {}
    for name, p in phases.items():
        if one and name != "n1" and name.startswith("n") and name[1:].isdigit() and p["subscribers"] > 1:
            n = p["subscribers"] - 1
            per[name] = {"cpu_ms_per_s": round((p["server_cpu_s_per_s"] - one["server_cpu_s_per_s"]) * 1000 / n, 3),
                         "rss_kb": round((p["server_rss_mb"] - one["server_rss_mb"]) * 1024 / n, 1)}
    results["per_subscriber"] = per
    print(f"per subscriber (shared reader): {per}")
    alone = [p["latency_ms"]["p99"] for n, p in phases.items() if n.startswith("n100-alone")]
    beside = [p for n, p in phases.items() if n.startswith("n100-beside")]
    if alone and beside:
        results["slow_subscriber_cost"] = {"p99_alone_ms": alone, "p99_beside_ms": [p["latency_ms"]["p99"]
                                                                                  for p in beside],
                                           "slow": beside[0]["slow"], "stalled": beside[0]["stalled"]}
        print(f"100 subscribers beside {beside[0]['stalled']} that never read(s) and {beside[0]['slow']} slow: p99 "
              f"{results['slow_subscriber_cost']['p99_beside_ms']} ms; alone (interleaved): p99 {alone} ms")
    c = results.get("per_subscriber_consumers")
    if c:
        results["per_consumer_design"] = {"cpu_ms_per_s": round(c["cpu_s_per_s"] * 1000 / c["consumers"], 2),
                                          "rss_kb": round(c["rss_kb"] / c["consumers"], 1)}
        print(f"per subscriber (a consumer each, measured with {c['consumers']}): {results['per_consumer_design']}")
    print(f"produced {results['produced_rate']} events/s; cpus: {results.get('pinning')}; "
          f"load average {results['loadavg_1m']}")
    line = {"bench": "subscribe", "date": datetime.date.today().isoformat(), **results}
    print(json.dumps(line, separators=(",", ":")))
