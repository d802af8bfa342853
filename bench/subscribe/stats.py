"""The benchmark's figures: commit -> arrival latency percentiles, server CPU and memory, and the report."""

from __future__ import annotations

import datetime
import json
import os
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def server_sample(pid: int) -> dict[str, float]:
    """CPU seconds (user + system, all threads) and resident memory of a process."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
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
    n_sub = sum(v for k, v in phase["counts"].items() if k in ("probe", "drain"))
    drain = phase["tallies"].get("drain", {})
    drains = phase["counts"].get("drain", 0)
    out = {
        "name": phase["name"], "subscribers": n_sub, "slow": phase["counts"].get("slow", 0),
        "stalled": phase["counts"].get("stalled", 0),
        "latency_ms": {"p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "max": _pct(lat, 1.0), "samples": len(lat)},
        "committed_in_window": in_window,
        "drain_records_per_subscriber": round(drain.get("records", 0) / drains) if drains else None,
        "server_cpu_s_per_s": round(phase["server_cpu_s_per_s"], 3), "server_rss_mb": round(phase["server_rss_mb"], 1),
        "client_failures": phase["client_failures"],
    }
    slow = phase["tallies"].get("slow")
    if slow:
        out["slow_reconnects"] = slow["reconnects"]
        out["slow_cutoffs"] = slow["cutoffs"]
    return out


def report(results: dict[str, Any]) -> None:
    phases = {p["name"]: p for p in results["phases"]}
    print()
    print(f"{'phase':<24}{'subs':>6}{'p50 ms':>9}{'p99 ms':>9}{'srv cpu/s':>11}{'srv MB':>8}{'recs/sub':>10}")
    for p in results["phases"]:
        print(f"{p['name']:<24}{p['subscribers']:>6}{p['latency_ms']['p50']!s:>9}{p['latency_ms']['p99']!s:>9}"
              f"{p['server_cpu_s_per_s']:>11}{p['server_rss_mb']:>8}{p['drain_records_per_subscriber']!s:>10}")
    one = phases.get("n1")
    per = {}
    for name in ("n100", "n1000"):
        if one and name in phases:
            n = phases[name]["subscribers"] - 1
            per[name] = {"cpu_ms_per_s": round((phases[name]["server_cpu_s_per_s"] - one["server_cpu_s_per_s"])
                                               * 1000 / n, 3),
                         "rss_kb": round((phases[name]["server_rss_mb"] - one["server_rss_mb"]) * 1024 / n, 1)}
    results["per_subscriber"] = per
    c = results["per_subscriber_consumers"]
    results["per_consumer_design"] = {"cpu_ms_per_s": round(c["cpu_s_per_s"] * 1000 / c["consumers"], 2),
                                      "rss_kb": round(c["rss_kb"] / c["consumers"], 1)}
    print(f"per subscriber (shared reader): {per}")
    print(f"per subscriber (a consumer each, measured with {c['consumers']}): {results['per_consumer_design']}")
    print(f"produced {results['produced_rate']} events/s; load average {results['loadavg_1m']}")
    line = {"bench": "subscribe", "date": datetime.date.today().isoformat(), **results}
    print(json.dumps(line, separators=(",", ":")))
