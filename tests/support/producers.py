"""The SDKs' test producer processes (Go's headwater-produce, TypeScript's produce.js): their environment."""

from __future__ import annotations

import os
from pathlib import Path

# Variables of the test process that would point a producer elsewhere than the endpoint a test gives it.
_FOREIGN = ("GATEWAY_URL", "REGISTRY_URL", "SSL_CERT_FILE")


def producer_env(endpoint: str, write_key: str, spool: Path, **settings: str) -> dict[str, str]:
    """The environment of one SDK producer process: this process's variables without any HEADWATER_* one (nor a
    gateway, registry or CA file of the test stack), then the endpoint, key, spool folder, a 10 ms linger, a
    20,000-event queue, and `settings` (more HEADWATER_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_") and k not in _FOREIGN}
    return {**env, "HEADWATER_ENDPOINT": endpoint, "HEADWATER_WRITE_KEY": write_key, "HEADWATER_SPOOL_DIR": str(spool),
            "HEADWATER_LINGER_S": "0.01", "HEADWATER_MAX_QUEUE_EVENTS": "20000", **settings}
