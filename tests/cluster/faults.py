"""What the cluster fault tests inspect and do: partition leaders and their traffic from the metadata, gateway
request counts from each instance's /metrics, and registry reads and writes through HAProxy or one instance."""

from __future__ import annotations

import collections
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from common.kafka_read import topic_end_offsets
from stack.topics import EVENTS_TOPIC


def leaders(bootstrap: str, topic: str = EVENTS_TOPIC) -> dict[int, int]:
    """partition -> leader node id (-1 while a partition has none)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def busiest_leader(bootstrap: str, window_s: float = 3.0) -> tuple[int, list[int]]:
    """The node leading the partitions that grew most over `window_s`, and those partitions (busiest first)."""
    before = topic_end_offsets(bootstrap, EVENTS_TOPIC, committed=False, timeout_s=15)
    time.sleep(window_s)  # the measuring window, not a wait for a condition
    after = topic_end_offsets(bootstrap, EVENTS_TOPIC, committed=False, timeout_s=15)
    growth = sorted(after, key=lambda p: after[p] - before.get(p, 0), reverse=True)
    lead = leaders(bootstrap)
    top = growth[: max(1, len(growth) // 2)]
    node = collections.Counter(lead[p] for p in top).most_common(1)[0][0]
    return node, [p for p in top if lead[p] == node]


def batch_requests(port: int) -> int:
    """POST /v1/batch answers counted by one gateway instance since it started (its Prometheus counter)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("headwater_gateway_requests_total{") and 'path="/v1/batch"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def registry(url: str, method: str, path: str, doc: Any = None) -> tuple[int, Any]:
    data = None if doc is None else json.dumps(doc).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, _json_or_text(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _json_or_text(exc.read() or b"null")


def _json_or_text(raw: bytes) -> Any:
    """The registry answers JSON; HAProxy answers its own plain-text/HTML error page (503, 504): kept as text so that
    the assertion shows what came instead of a JSONDecodeError."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:500]


def record_schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "string"}]})


def active_controller(data_dirs: list[Path]) -> int | None:
    """The node id of the KRaft quorum's leader, as the surviving nodes record it in their `quorum-state` file
    (the most recent epoch wins); None while no node names one."""
    best: tuple[int, int] | None = None
    for data_dir in data_dirs:
        try:
            state = json.loads((data_dir / "__cluster_metadata-0" / "quorum-state").read_text())
        except (OSError, ValueError):
            continue
        leader, epoch = int(state.get("leaderId", -1)), int(state.get("leaderEpoch", -1))
        if leader > 0 and (best is None or epoch > best[1]):
            best = (leader, epoch)
    return best[0] if best else None
