"""The cluster's Python services: two registry instances and N gateway instances, each its own process group,
ports, log, transactional-id prefix and batch-cache directory."""

from __future__ import annotations

import hashlib
import os
import socket

from stack.cluster.config import HAPROXY_SOURCE, ClusterConfig
from stack.services import HttpService, dev_write_key


def registry_instance(cfg: ClusterConfig, index: int) -> HttpService:
    """Registry `index` (1-based). Every instance shares the `_schemas` topic and its transactional id, so writes
    through either are serialised by the log (a write fences the other instance's writer, which re-acquires it
    on its next write) and each instance serves reads from its own replay of the topic."""
    port = cfg.registry_ports[index - 1]
    return HttpService(
        name=f"cluster-registry-{index}", module="registry", port=port, ready_path="/ready",
        endpoints={}, env={"REGISTRY_HOST": "127.0.0.1", "REGISTRY_PORT": str(port)},
    )


def gateway_env(cfg: ClusterConfig, index: int) -> dict[str, str]:
    """Instance `index`'s settings: what differs between instances, and HAProxy as its only trusted proxy."""
    digest = hashlib.sha256(dev_write_key(cfg.stack).encode()).hexdigest()
    return {
        "HEADWATER_GATEWAY_HOST": "127.0.0.1",
        "HEADWATER_GATEWAY_PORT": str(cfg.gateway_ports[index - 1]),
        "HEADWATER_GATEWAY_WRITE_KEYS": f"dev:{digest}",
        "HEADWATER_GATEWAY_WORKERS": str(cfg.gateway_workers),
        # Transactional ids must differ between instances, or one instance's producers fence another's.
        "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"headwater-gateway-{socket.gethostname()}-g{index}",
        # A committed-batch cache per instance, as on separate hosts (a retry HAProxy sends to another instance
        # is written again and removed downstream by event_id).
        "HEADWATER_GATEWAY_SHARED_DIR": str(cfg.state_dir / "gateway" / f"cluster-{index}"),
        "HEADWATER_GATEWAY_TRUSTED_PROXIES": HAPROXY_SOURCE,
    }


def gateway_instance(cfg: ClusterConfig, index: int, extra_env: dict[str, str] | None = None) -> HttpService:
    """Gateway `index` (1-based) on its own port behind HAProxy; `extra_env` overrides (the tests' timeouts)."""
    env = {**gateway_env(cfg, index), **(extra_env or {})}
    os.makedirs(env["HEADWATER_GATEWAY_SHARED_DIR"], exist_ok=True)
    return HttpService(name=f"cluster-gateway-{index}", module="gateway", port=cfg.gateway_ports[index - 1],
                       ready_path="/readyz", endpoints={}, env=env)


def registries(cfg: ClusterConfig) -> list[HttpService]:
    return [registry_instance(cfg, i + 1) for i in range(len(cfg.registry_ports))]


def gateways(cfg: ClusterConfig, extra_env: dict[str, str] | None = None) -> list[HttpService]:
    return [gateway_instance(cfg, i + 1, extra_env) for i in range(len(cfg.gateway_ports))]
