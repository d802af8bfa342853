"""Structured logs: one JSON object per line on stdout, with the worker index and any `extra={"fields": ...}`."""

from __future__ import annotations

import json
import logging
import sys
import time


class JsonFormatter(logging.Formatter):
    def __init__(self, worker: int) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "worker": self.worker,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            doc.update(fields)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def setup_logging(level: str, worker: int) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter(worker))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Request lines come from our middleware (with batch ids); aiohttp's access log would duplicate them.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
