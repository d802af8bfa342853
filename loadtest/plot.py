"""Draws the measured ack-latency-versus-load curve, throughput and gateway stage times as one PNG for the README.

    python -m loadtest.plot [--results loadtest/results]   # reads curve.json, writes capacity-curve.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt

from loadtest.curve import RESULTS_DIR


def draw(curve: dict[str, Any], out: Path) -> Path:
    points: list[dict[str, Any]] = sorted(curve["points"], key=lambda p: p["offered_events_per_s"])
    offered = [p["offered_events_per_s"] for p in points]
    fig, (lat, thr, stages) = plt.subplots(1, 3, figsize=(15, 4.4))
    lat.plot(offered, [p["post_p50_ms"] for p in points], "o-", label="p50")
    lat.plot(offered, [p["post_p99_ms"] for p in points], "s-", label="p99")
    lat.axhline(100, color="grey", linestyle="--", linewidth=1, label="p99 target 100 ms")
    lat.set(xlabel="offered events/s", ylabel="POST /v1/batch -> 200 (ms)", title="Ack latency versus load")
    lat.legend()
    thr.plot(offered, offered, ":", color="grey", label="offered")
    thr.plot(offered, [p["events_per_s"] for p in points], "o-", label="acknowledged")
    for p in points:
        thr.annotate(f"{p['gateway_cores']:.2f} cores", (p["offered_events_per_s"], p["events_per_s"]),
                     textcoords="offset points", xytext=(-10, 8), fontsize=8)
    thr.set(xlabel="offered events/s", ylabel="events/s", title="Throughput (gateway CPU cores used)")
    thr.legend()
    _stages(stages, points)
    for ax in (lat, thr, stages):
        ax.grid(alpha=0.3)
    fig.suptitle(f"One gateway process, {curve.get('batch_events')}-event zstd JSON batches, "
                 f"{curve.get('step_s')} s per step, shared 2-core machine")
    fig.tight_layout()
    path = out / "capacity-curve.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _stages(ax: Any, points: list[dict[str, Any]]) -> None:
    """Where a request's time goes, from the gateway's own histograms: mean ms per request and stage."""
    labels = [f"{p['offered_events_per_s']:.0f}" for p in points]
    bottom = [0.0] * len(points)
    for stage in ("read_ms", "validate_ms", "commit_ms"):
        values = [float(p.get("gateway_ms", {}).get(stage, 0.0)) for p in points]
        ax.bar(labels, values, bottom=bottom, label=stage.removesuffix("_ms"))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set(xlabel="offered events/s", ylabel="mean ms per request", title="Gateway time per request, by stage")
    ax.legend()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.plot", description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    path = draw(json.loads((args.results / "curve.json").read_text()), args.results)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
