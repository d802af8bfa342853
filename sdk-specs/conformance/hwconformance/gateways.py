"""Gateway processes for the gateway vectors: the real `python -m gateway` on the test stack's Kafka and registry,
one per configuration profile (limits, timeouts, a dead broker...), started on first use."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from common.ports import free_port
from common.write_keys import key_entry

from .tcpproxy import CuttableProxy
from .vectors import REPO

WRITE_KEY = "hw_conformance-gateway-key-0123456789abcdefghijklmnop"
REVOKED_KEY = "hw_conformance-revoked-key-0123456789abcdefghijklmnop"
# What each profile changes in the gateway's environment (gateway/config.py); `default` is the defaults.
PROFILES: dict[str, dict[str, str]] = {
    "default": {},
    "small_limits": {"HEADWATER_GATEWAY_MAX_BODY_BYTES": "65536", "HEADWATER_GATEWAY_MAX_COMPRESSED_BYTES": "65536",
                     "HEADWATER_GATEWAY_MAX_EVENT_BYTES": "4096"},
    "slow_body": {"HEADWATER_GATEWAY_BODY_TIMEOUT_S": "1"},
    # Slow refills (10 s an event, 100 s a lookup): a second request right after the first is refused even when
    # the first takes seconds on a loaded machine.
    "rate_limited": {"HEADWATER_GATEWAY_SOURCE_EVENTS_PER_S": "0.1"},
    "lookups_limited": {"HEADWATER_GATEWAY_REGISTRY_LOOKUPS_PER_S": "0.01",
                        "HEADWATER_GATEWAY_REGISTRY_LOOKUP_BURST": "1"},
    "overloaded": {"HEADWATER_GATEWAY_MAX_INFLIGHT_EVENTS": "1"},
    "kafka_down": {"KAFKA_BOOTSTRAP": "127.0.0.1:{dead_port}", "HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S": "1",
                   "HEADWATER_GATEWAY_TRANSACTION_TIMEOUT_S": "2"},
    # A worker serves only once its schemas are loaded (docs/gateway-recovery.md): this gateway reaches the
    # registry through a proxy that is cut once it is alive, so only schemas it has not cached are unreachable.
    "registry_down": {"REGISTRY_URL": "{registry_proxy}", "HEADWATER_GATEWAY_REGISTRY_TIMEOUT_S": "1"},
}
START_TIMEOUT_S = 120.0


class GatewayPool:
    """Starts one gateway per profile on demand; `stop` ends them all (SIGTERM, then SIGKILL)."""

    def __init__(self, stack_env: dict[str, str], logdir: Path) -> None:
        self.stack_env = stack_env
        self.logdir = logdir
        self.running: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        self.proxies: list[CuttableProxy] = []

    def url(self, profile: str) -> str:
        """The base URL of the profile's gateway, started if needed."""
        if profile not in self.running:
            self.running[profile] = self._await(*self._launch(profile))
        return self.running[profile][1]

    def start(self, profiles: list[str]) -> None:
        """Start the gateways of `profiles` side by side (each start is mostly waiting for Kafka and the registry),
        then wait until each is alive."""
        launched = [self._launch(p) for p in dict.fromkeys(profiles) if p not in self.running]
        for profile, proc, url, _proxy in launched:
            self.running[profile] = (proc, url)  # stopped by `stop` even if another one fails to start
        for launch in launched:
            self._await(*launch)

    def _launch(self, profile: str) -> tuple[str, subprocess.Popen[bytes], str, CuttableProxy | None]:
        port = free_port()
        keys = f"{key_entry(WRITE_KEY, 'conformance')},{key_entry(REVOKED_KEY, 'conformance_revoked', revoked=True)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
        env.update({k: v for k, v in self.stack_env.items() if k in ("KAFKA_BOOTSTRAP", "REGISTRY_URL",
                                                                       "DEADLETTER_TOPIC", "EVENTS_TOPIC")})
        env.update({"HEADWATER_GATEWAY_HOST": "127.0.0.1", "HEADWATER_GATEWAY_PORT": str(port),
                    "HEADWATER_GATEWAY_WORKERS": "1", "HEADWATER_GATEWAY_WRITE_KEYS": keys,
                    "HEADWATER_GATEWAY_LOG_LEVEL": "WARNING",
                    "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"hw-conformance-{profile}-{uuid.uuid4().hex[:8]}"})
        proxy = None
        if "{registry_proxy}" in PROFILES[profile].values():
            host, _, reg_port = self.stack_env["REGISTRY_URL"].removeprefix("http://").rstrip("/").partition(":")
            proxy = CuttableProxy(host, int(reg_port or 80))
            self.proxies.append(proxy)
        proxy_url = f"http://127.0.0.1:{proxy.port}" if proxy else ""
        env.update({k: v.format(dead_port=free_port(), registry_proxy=proxy_url) for k, v in PROFILES[profile].items()})
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self.logdir.mkdir(parents=True, exist_ok=True)
        with (self.logdir / f"gateway-{profile}.log").open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "gateway"], cwd=REPO, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        return profile, proc, f"http://127.0.0.1:{port}", proxy

    def _await(self, profile: str, proc: subprocess.Popen[bytes], url: str,
               proxy: CuttableProxy | None) -> tuple[subprocess.Popen[bytes], str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"gateway ({profile}) exited with {proc.returncode}; see "
                                   f"{self.logdir / f'gateway-{profile}.log'}")
            try:
                with urllib.request.urlopen(url + "/livez", timeout=2) as resp:
                    if resp.status == 200:
                        if proxy is not None:
                            proxy.cut()
                        return proc, url
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        proc.kill()
        raise RuntimeError(f"gateway ({profile}) not alive within {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Stop every gateway this pool started."""
        for proc, _url in self.running.values():
            if proc.poll() is None:
                proc.terminate()
        for proc, _url in self.running.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.running.clear()
        for proxy in self.proxies:
            proxy.cut()
        self.proxies.clear()
