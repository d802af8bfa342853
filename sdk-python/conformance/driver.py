"""The Python SDK's conformance driver: JSON-lines commands on stdin drive `headwater.Client` (DRIVER.md)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import platform
import sys
import threading
import typing
from typing import Any

import headwater

CAPABILITIES = ["json", "zstd", "gzip", "identity", "avro", "spool", "retries", "split", "event_id", "timestamp",
                "env_config"]


class Driver:
    """One client and the outcomes its callbacks reported since the last `outcomes` command."""

    def __init__(self) -> None:
        self.client: headwater.Client | None = None
        self.lock = threading.Lock()
        self.reported: list[dict[str, Any]] = []
        self.track_seq = _returns_something(headwater.Client.track)

    def hello(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        caps = list(CAPABILITIES)
        if self.track_seq:
            caps.append("track_seq")
        if "max_in_flight" in {f.name for f in dataclasses.fields(headwater.ClientConfig)}:
            caps.append("max_in_flight")
        runtime = f"{platform.python_implementation().lower()}/{platform.python_version()}"
        return {"sdk": "headwater-python", "version": headwater.__version__, "protocol": 1, "runtime": runtime,
                "capabilities": caps}

    def init(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if "env" in cmd:  # capability env_config: exactly these variables, not the process environment
            env = {str(k): str(v) for k, v in cmd["env"].items()}
            spool = {"spool_dir": cmd["spool_dir"]} if cmd.get("spool_dir") else {}
            self.client = headwater.Client.from_env(env, on_delivery=self._delivered, on_error=self._error, **spool)
            return {"producer_id": self.client.producer_id}
        options = dict(cmd.get("options") or {})
        fields = {f.name for f in dataclasses.fields(headwater.ClientConfig)}
        if "max_in_flight" not in fields and options.pop("max_in_flight", 1) != 1:  # one batch at a time
            raise Unsupported("max_in_flight > 1")
        self.client = headwater.Client(cmd["endpoint"], cmd["write_key"], spool_dir=cmd.get("spool_dir"),
                                       on_delivery=self._delivered, on_error=self._error, **options)
        return {"producer_id": self.client.producer_id}

    def track(self, cmd: dict[str, Any]) -> dict[str, Any]:
        client = self._client()
        closed = client.state is not headwater.ClientState.OPEN
        full_before = client.metrics().dropped.get("queue_full", 0)
        track: Any = client.track  # returns None today; the seq (or an object with .seq) once the SDK returns it
        result = track(cmd["event_type"], cmd.get("properties"), partition_key=cmd.get("partition_key"),
                       event_id=cmd.get("event_id"), timestamp=cmd.get("timestamp"))
        if closed:
            return _error("closed", "track() after close()")
        if client.metrics().dropped.get("queue_full", 0) > full_before:
            return _error("queue_full", "the queue is full")
        seq = getattr(result, "seq", result if isinstance(result, int) else None)
        if seq is None and self.track_seq:  # None from an SDK that returns seqs: the event was dropped
            return _error("dropped", "track() returned None: the event was dropped")
        return {"seq": seq, "event_id": getattr(result, "event_id", None)}

    def flush(self, cmd: dict[str, Any]) -> dict[str, Any]:
        client = self._client()
        every = client.flush(float(cmd.get("timeout_s", 10)))  # False also when events were lost
        m = client.metrics()
        return {"settled": every or (m.queued == 0 and m.pending_events == 0)}

    def close(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {"delivered_all": self._client().close(float(cmd.get("timeout_s", 10)))}

    def outcomes(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        self._client()
        with self.lock:
            out, self.reported = self.reported, []
        return {"outcomes": out}

    def stats(self, _cmd: dict[str, Any]) -> dict[str, Any]:
        m = self._client().metrics()
        return {"enqueued": m.enqueued, "acknowledged": m.acknowledged, "rejected": m.rejected,
                "dropped": dict(m.dropped), "failovers": m.failovers, "failbacks": m.failbacks}

    def _client(self) -> headwater.Client:
        if self.client is None:
            raise NotInitialised("init first")
        return self.client

    def _delivered(self, report: headwater.DeliveryReport) -> None:
        self._add({"kind": "delivered", "batch_id": report.batch_id, "accepted": report.accepted})

    def _error(self, err: headwater.HeadwaterError) -> None:
        if isinstance(err, headwater.EventRejectedError):
            self._add({"kind": "event_rejected", "batch_id": err.batch_id, "event_id": err.event_id,
                       "seq": err.seq, "code": err.code})
        elif isinstance(err, headwater.BatchRejectedError):
            self._add({"kind": "batch_refused", "batch_id": err.batch_id, "status": err.status, "code": err.code,
                       "count": err.count})
        elif isinstance(err, headwater.EventsDroppedError):
            self._add({"kind": "dropped", "reason": err.reason, "count": err.count})
        else:
            self._add({"kind": "error", "message": str(err)})

    def _add(self, outcome: dict[str, Any]) -> None:
        with self.lock:
            self.reported.append(outcome)


def _returns_something(fn: Any) -> bool:
    """True if `fn` is annotated to return a value (then `track` returns the seq)."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:  # an annotation that does not resolve at run time: read it as text
        hint = inspect.signature(fn).return_annotation
    return hint not in (None, type(None), "None", inspect.Signature.empty)


class Unsupported(Exception):
    """A command or option this SDK does not implement."""


class NotInitialised(Exception):
    """A command before `init`."""


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"type": kind, "message": message}}


def handle(driver: Driver, line: str) -> dict[str, Any]:
    """The reply to one command line."""
    try:
        cmd = json.loads(line)
        method = getattr(driver, str(cmd.get("cmd")), None) if isinstance(cmd, dict) else None
        if method is None or str(cmd.get("cmd")).startswith("_"):
            return _error("protocol_error", f"unknown command: {line.strip()[:200]}")
        reply: dict[str, Any] = method(cmd)
    except json.JSONDecodeError as exc:
        return _error("protocol_error", f"not JSON: {exc}")
    except headwater.ConfigError as exc:
        return _error("config_error", str(exc))
    except headwater.InvalidEventError as exc:
        return _error("invalid_event", str(exc))
    except Unsupported as exc:
        return _error("unsupported", str(exc))
    except NotInitialised as exc:
        return _error("not_initialised", str(exc))
    except Exception as exc:  # a bug in the SDK or here: reported, the loop goes on
        return _error("internal", f"{type(exc).__name__}: {exc}")
    return reply if "ok" in reply else {"ok": True, **reply}


def main() -> None:
    """Answer commands until stdin closes."""
    driver = Driver()
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(handle(driver, line)) + "\n")
            sys.stdout.flush()
    os._exit(0)  # EOF: exit now, without the SDK's exit-time flush (DRIVER.md "Process")


if __name__ == "__main__":
    main()
