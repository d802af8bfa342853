"""A deliberately small SDK and its conformance driver in one file, to test the runner: `--break <behaviour>`
breaks one MUST of the protocol, and the vectors for that MUST have to fail (tests/conformance/test_runner.py).

It sends synchronously on `flush`/`close` (no background thread, no spool): enough for the response vectors.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import re
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import zstandard

BREAKS = ("ignore_retry_after", "new_batch_id_on_retry", "resend_rejected", "split_reuses_parent_id",
          "retry_refused", "uncapped_retry_after", "none")
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})
SPLIT_NS = uuid.UUID("6f1f0c2e-9a10-4b59-8d55-2f6f1d1b9a10")
NAME, VERSION = "headwater-fake", "0.0.1"


class FakeSdk:
    """The SDK and the driver's command handlers."""

    def __init__(self, broken: str) -> None:
        self.broken = broken
        self.opts: dict[str, Any] = {}
        self.queue: list[dict[str, Any]] = []
        self.reported: list[dict[str, Any]] = []
        self.counters: dict[str, Any] = {"enqueued": 0, "acknowledged": 0, "rejected": 0, "dropped": {}}
        self.seq = 0
        self.closed = False
        self.producer_id = str(uuid.uuid4())

    def hello(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        return {"sdk": NAME, "version": VERSION, "protocol": 1,
                "capabilities": ["json", "zstd", "retries", "split", "track_seq", "event_id"]}

    def init(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.opts = {"endpoint": cmd["endpoint"], "write_key": cmd["write_key"], "max_batch_events": 40,
                     "retry_base_s": 0.5, "retry_max_s": 30.0, "retry_deadline_s": 300.0, "request_timeout_s": 10.0,
                     "node_id": "fake-node", "context": {}, **cmd.get("options", {})}
        return {"producer_id": self.producer_id}

    def track(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if self.closed:
            return {"ok": False, "error": {"type": "closed", "message": "closed"}}
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", str(cmd.get("event_type"))):
            return {"ok": False, "error": {"type": "invalid_event", "message": "bad event_type"}}
        event = {"event_id": cmd.get("event_id") or str(uuid.uuid4()), "event_type": cmd["event_type"],
                 "producer_id": self.producer_id, "seq": self.seq, "node_id": self.opts["node_id"],
                 "created_at": int(time.time() * 1000), "properties": cmd.get("properties") or {}}
        if self.opts["context"]:
            event["context"] = self.opts["context"]
        if cmd.get("partition_key"):
            event["partition_key"] = cmd["partition_key"]
        self.seq += 1
        self.counters["enqueued"] += 1
        self.queue.append(event)
        return {"seq": event["seq"], "event_id": event["event_id"]}

    def flush(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        size = int(self.opts["max_batch_events"])
        while self.queue:
            part, self.queue = self.queue[:size], self.queue[size:]
            self._deliver(str(uuid.uuid4()), part)
        return {"settled": True}

    def close(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if not self.closed:
            self.flush(cmd)
            self.closed = True
        return {"delivered_all": self.counters["acknowledged"] == self.counters["enqueued"]}

    def outcomes(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        out, self.reported = self.reported, []
        return {"outcomes": out}

    def stats(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        return dict(self.counters)

    def _deliver(self, batch_id: str, events: list[dict[str, Any]]) -> None:
        deadline = time.monotonic() + float(self.opts["retry_deadline_s"])
        sent_at = int(time.time() * 1000)
        attempt = 0
        while True:
            bid = str(uuid.uuid4()) if self.broken == "new_batch_id_on_retry" and attempt else batch_id
            status, headers, body = self._post(bid, sent_at, events)
            if status in (200, 422):
                return self._answered(bid, events, body)
            if status == 413 and len(events) > 1:
                mid = len(events) // 2
                for k, half in enumerate((events[:mid], events[mid:])):
                    self._deliver(bid if self.broken == "split_reuses_parent_id" else
                                  str(uuid.uuid5(SPLIT_NS, f"{bid}/{k}")), half)
                return None
            retry = status is None or status in RETRYABLE or (self.broken == "retry_refused" and status == 401)
            if not retry or time.monotonic() > deadline:
                return self._refused(bid, events, status, body)
            attempt += 1
            cap = min(float(self.opts["retry_max_s"]), float(self.opts["retry_base_s"]) * 2 ** attempt)
            wait = random.uniform(0, cap)
            after = _retry_after(headers.get("retry-after"))
            if after is not None and self.broken != "uncapped_retry_after":
                after = min(after, 10 * float(self.opts["retry_max_s"]))  # protocol.md §6: the cap
            if after is not None and self.broken != "ignore_retry_after":
                wait = max(wait, after)
            time.sleep(wait)

    def _post(self, batch_id: str, sent_at: int,
              events: list[dict[str, Any]]) -> tuple[int | None, dict[str, str], Any]:
        url = urlsplit(self.opts["endpoint"])
        body = json.dumps({"batch_id": batch_id, "sent_at": sent_at, "sdk": {"name": NAME, "version": VERSION},
                           "events": events}).encode()
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=float(self.opts["request_timeout_s"]))
        try:
            conn.request("POST", "/v1/batch", zstandard.ZstdCompressor().compress(body), {
                "Authorization": f"Bearer {self.opts['write_key']}", "Content-Type": "application/json",
                "Content-Encoding": "zstd", "User-Agent": f"{NAME}/{VERSION} (python/3)"})
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            return None, {}, None
        finally:
            conn.close()
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed

    def _answered(self, batch_id: str, events: list[dict[str, Any]], body: Any) -> None:
        rejected = body.get("rejected", []) if isinstance(body, dict) else []
        bad = [events[r["index"]] for r in rejected if 0 <= r["index"] < len(events)]
        for r, event in zip(rejected, bad, strict=False):
            self.reported.append({"kind": "event_rejected", "batch_id": batch_id, "event_id": event["event_id"],
                                  "seq": event["seq"], "code": r["code"]})
        self.counters["rejected"] += len(bad)
        self.counters["acknowledged"] += len(events) - len(bad)
        self.reported.append({"kind": "delivered", "batch_id": batch_id, "accepted": len(events) - len(bad)})
        if bad and self.broken == "resend_rejected":
            self._post(str(uuid.uuid4()), int(time.time() * 1000), bad)

    def _refused(self, batch_id: str, events: list[dict[str, Any]], status: int | None, body: Any) -> None:
        if status is None:
            self.counters["dropped"]["retry_deadline"] = self.counters["dropped"].get("retry_deadline", 0) + len(events)
            return
        code = body.get("code") if isinstance(body, dict) and "code" in body else f"http_{status}"
        self.reported.append({"kind": "batch_refused", "batch_id": batch_id, "status": status, "code": code,
                              "count": len(events)})
        dropped = self.counters["dropped"]
        dropped[f"refused_{status}"] = dropped.get(f"refused_{status}", 0) + len(events)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def main() -> None:
    """The driver loop (sdk-specs/conformance/DRIVER.md)."""
    sdk = FakeSdk(sys.argv[1] if len(sys.argv) > 1 else "none")
    for line in sys.stdin:
        cmd = json.loads(line)
        handler = getattr(sdk, str(cmd.get("cmd")), None)
        reply = handler(cmd) if handler is not None and not str(cmd.get("cmd")).startswith("_") else \
            {"ok": False, "error": {"type": "protocol_error", "message": "unknown command"}}
        sys.stdout.write(json.dumps(reply if "ok" in reply else {"ok": True, **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
