"""The demo's simulated producer nodes: each its own SDK client, spool and producer id, sending at a steady rate."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import headwater

from loadtest.events import EventFactory


@dataclass
class Fleet:
    """Simulated producer nodes and their totals."""

    env: dict[str, str]
    rate: float
    spool_root: Path
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("queued", "acknowledged", "rejected",
                                                                          "dropped"), 0))

    def run_node(self, node: int) -> None:
        """Send `rate` events per second until `stop`, then close the client (which flushes)."""
        node_id = f"node-{node:04d}"  # spark_pipeline/data/nodes.csv knows node-0001..node-0200
        factory = EventFactory(seed=node)
        client = headwater.Client(self.env["GATEWAY_URL"], self.env["HEADWATER_WRITE_KEY"],
                                  spool_dir=str(self.spool_root / node_id), node_id=node_id,
                                  context={"app": "demo", "env": "dev"}, linger_s=0.2)
        next_at = time.monotonic()
        while not self.stop.is_set():
            event = factory.event(client.producer_id, node_id, 0, int(time.time() * 1000))
            client.track(str(event["event_type"]), event["properties"])
            next_at += 1.0 / self.rate
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        client.close(30)
        m = client.metrics()
        with self.lock:
            self.totals["queued"] += m.enqueued
            self.totals["acknowledged"] += m.acknowledged
            self.totals["rejected"] += m.rejected
            self.totals["dropped"] += sum(m.dropped.values())
