"""Prints a peers run for people (per round and side, the ratios and their median, the durability check) and
records its JSON line in docs/benchmarks/runs/peers.jsonl, regenerating the dated pages (bench/report.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import report as pages

RUNS = pages.DOCS / "runs" / "peers.jsonl"
_COLUMNS = (("events_per_s", "events/s"), ("events_per_server_cpu_s", "ev/server-CPU-s"),
            ("events_per_system_cpu_s", "ev/(server+broker)-CPU-s"), ("broker_ms_per_1k_events", "broker ms/1k ev"),
            ("broker_net_ms_per_1k_events", "net of idle"),
            ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"))
_OWN = (("half_own_rate_events_per_s", "half own saturation ev/s"), ("half_own_p50_ms", "p50 ms"),
        ("half_own_p99_ms", "p99 ms"), ("transactions_per_s", "txn/s at saturation"),
        ("batches_per_transaction", "batches/txn"))


def _width(title: str) -> int:
    return max(10, len(title) + 1)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def print_report(line: dict[str, Any]) -> bool:
    """The tables; True when both sides passed the durability check."""
    print()
    print(f"common open-loop rate: {line['rate_events_per_s']:,} events/s; {line['bodies_per_phase']} bodies of 40 "
          f"events per closed-loop phase; {line['concurrency']} connections; pinned: {line['pinned']}")
    head = " ".join(f"{title:>{_width(title)}}" for _, title in _COLUMNS)
    print(f"{'round':>5} {'side':12} {head} {'errors':>7}")
    for row in line["runs"]:
        cells = " ".join(f"{_cell(row.get(k)):>{_width(t)}}" for k, t in _COLUMNS)
        print(f"{row['round']:>5} {row['side']:12} {cells} {row['errors'] + row['rate_errors']:>7}")
    own = " ".join(f"{title:>{_width(title)}}" for _, title in _OWN)
    print(f"\neach gateway path at half its own saturation of the round\n{'round':>5} {'side':12} {own}")
    for row in line["runs"]:
        if "half_own_p99_ms" in row:
            print(f"{row['round']:>5} {row['side']:12} "
                  + " ".join(f"{_cell(row.get(k)):>{_width(t)}}" for k, t in _OWN))
    print("\ngateway ÷ peer (path: the gateway's JSON or Avro path; the peer takes JSON)")
    print(f"{'round':>6} {'path':5} {head}")
    for row in line["ratios"]:
        print(f"{row['round']!s:>6} {row.get('path', 'json'):5} "
              + " ".join(f"{_cell(row.get(k)):>{_width(t)}}" for k, t in _COLUMNS))
    print(f"broker idle CPU, before the rounds and after each (cores): {line['broker_idle_cores']}")
    cores = line["cores_per_10k_events_per_s"]
    print("cores per 10 k events/s (median): " + "; ".join(
        f"{side} {cores[f'{side}_server_cores']} + broker {cores[f'{side}_broker_cores']}"
        for side in ("gateway", "gateway_avro", "peer") if f"{side}_server_cores" in cores))
    if "broker_warmup" in line:
        w = line["broker_warmup"]
        print(f"broker warm-up: {w['transactions']} transactions in {w['seconds']} s, its CPU per transaction "
              f"{w['first_ms_per_txn']} -> {w['last_ms_per_txn']} ms")
    print("targets: " + ", ".join(f"{k} {'MET' if v else 'not met'}" for k, v in line["targets"].items()))
    ok = True
    for side, d in line["durability"].items():
        ok = ok and bool(d["ok"])
        print(f"durability {side} ({d['isolation']}): {'OK' if d['ok'] else 'FAILED'}: {d['found']:,} of {d['sent']:,} "
              f"sent events found once ({d['acknowledged']:,} acknowledged), {d['duplicates']} duplicates, "
              f"{d['missing']} acknowledged missing, {d['foreign']} unknown records")
    return ok


def record(line: dict[str, Any], runs: Path = RUNS) -> Path:
    """Append the line and regenerate docs/benchmarks/; returns the run file."""
    runs.parent.mkdir(parents=True, exist_ok=True)
    with runs.open("a") as out:
        out.write(json.dumps(line) + "\n")
    pages.generate(runs.parent.parent)
    return runs
