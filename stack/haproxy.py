"""HAProxy in front of several gateways and registries: config from stack/conf's template, start in master-worker
mode, graceful reload (the old worker drains), per-server counters from the stats page."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from string import Template

from stack.certs import CertificateAuthority
from stack.config import HAPROXY_CLIENT_NAME, REPO_ROOT, StackConfig
from stack.kafka import port_open
from stack.process import ManagedProcess
from stack.services import ServiceError

TEMPLATE = REPO_ROOT / "stack" / "conf" / "haproxy.cfg.tmpl"
SUBSCRIBE_TEMPLATE = REPO_ROOT / "stack" / "conf" / "haproxy-subscribe.cfg.tmpl"


def render_config(cfg: StackConfig, gateway_ports: tuple[int, ...] | None = None) -> str:
    """The haproxy.cfg of this profile; `gateway_ports` (default: all) are the gateway servers listed."""
    gateways = cfg.gateway_ports if gateway_ports is None else gateway_ports
    servers = "\n".join(f"    server gateway-{cfg.gateway_ports.index(p) + 1} 127.0.0.1:{p} check" for p in gateways)
    # One active registry, the others backups: a client reads its own writes (an instance applies a write before
    # answering it; another applies it a few ms later), and a dead active one fails over within a health check.
    registries = "\n".join(f"    server registry-{i + 1} 127.0.0.1:{p} check{' backup' if i else ''}"
                           for i, p in enumerate(cfg.registry_ports))
    tls = tls_settings(cfg)
    return Template(TEMPLATE.read_text()).substitute(
        STATS_SOCKET=str(cfg.run_dir / "haproxy.sock"), GATEWAY_PORT=cfg.gateway_port,
        REGISTRY_PORT=cfg.registry_port, STATS_PORT=cfg.stats_port,
        GATEWAY_SERVERS=servers, REGISTRY_SERVERS=registries, MAX_CONN_PER_SOURCE=cfg.haproxy_max_conn_per_source,
        MAX_REQUESTS_PER_SOURCE=cfg.haproxy_max_requests_per_source,
        SUBSCRIBE_SECTION=_subscribe_section(cfg, tls["BIND_TLS"]), **tls,
    )


def tls_settings(cfg: StackConfig) -> dict[str, str]:
    """A secure topology: TLS on both frontends (the stack's certificate for `localhost`), and to every server,
    verified against the stack's CA; to the gateways HAProxy shows its client certificate (HAPROXY_CLIENT_NAME)."""
    if not cfg.topology.secure:
        return {"BIND_TLS": "", "GATEWAY_SERVER_TLS": "", "REGISTRY_SERVER_TLS": ""}
    ca = CertificateAuthority(cfg.tls_dir)
    front = ca.combined_pem(ca.issue("haproxy"))
    client = ca.combined_pem(ca.issue(HAPROXY_CLIENT_NAME, usage="client"))
    verify = f" ssl verify required ca-file {ca.pem} sni str(localhost)"
    return {"BIND_TLS": f" ssl crt {front}", "GATEWAY_SERVER_TLS": f"{verify} crt {client}",
            "REGISTRY_SERVER_TLS": verify}


def _subscribe_section(cfg: StackConfig, bind_tls: str) -> str:
    """The subscription servers' frontend and backend (none without them): long-lived event streams, TLS at the
    frontend in a secure topology (the servers listen on loopback only)."""
    if not cfg.topology.subscribe:
        return ""
    servers = "\n".join(f"    server subscribe-{i + 1} 127.0.0.1:{p} check"
                         for i, p in enumerate(cfg.subscribe_ports[:cfg.topology.subscribe]))
    return Template(SUBSCRIBE_TEMPLATE.read_text()).substitute(SUBSCRIBE_PORT=cfg.subscribe_port,
                                                               SUBSCRIBE_SERVERS=servers, BIND_TLS=bind_tls)


class HAProxy:
    """The load balancer of one stack (one master process, its workers in the same group)."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.config_file = cfg.conf_dir / "haproxy.cfg"
        self.log_file = cfg.logs_dir / "haproxy.log"
        self.process = ManagedProcess("haproxy", cfg.run_dir / "haproxy.pid", str(self.config_file))

    @staticmethod
    def binary() -> str:
        found = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.path.exists(p)), None)
        if found is None:
            raise ServiceError("haproxy not found: run `make setup-haproxy` (several gateways or registries need it)")
        return found

    def write_config(self, gateway_ports: tuple[int, ...] | None = None) -> None:
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.cfg.run_dir.mkdir(parents=True, exist_ok=True)
        text = render_config(self.cfg, gateway_ports)
        tmp = self.config_file.with_suffix(".tmp")
        tmp.write_text(text)
        check = subprocess.run([self.binary(), "-c", "-q", "-f", str(tmp)], capture_output=True, text=True,
                               check=False, timeout=30)
        if check.returncode != 0:
            raise ServiceError(f"haproxy rejected {tmp}:\n{check.stdout}{check.stderr}")
        os.replace(tmp, self.config_file)

    def start(self) -> bool:
        """Start unless running (`-W`: master-worker, so a reload is a signal to the master); wait for the ports."""
        if self.process.pid() is not None:
            return False
        self.write_config()
        self.process.start([self.binary(), "-W", "-db", "-f", str(self.config_file)], self.log_file)
        deadline = time.monotonic() + 30
        while not (port_open(self.cfg.gateway_port) and port_open(self.cfg.registry_port)):
            if self.process.pid() is None or time.monotonic() > deadline:
                self.process.stop(5)
                raise ServiceError(f"haproxy did not start; see {self.log_file}")
            time.sleep(0.1)
        return True

    def reload(self, gateway_ports: tuple[int, ...] | None = None) -> None:
        """New config, graceful reload: the master starts new workers; old ones finish their connections."""
        self.write_config(gateway_ports)
        pid = self.process.pid()
        if pid is None:
            raise ServiceError("haproxy is not running")
        os.kill(pid, signal.SIGUSR2)

    def stop(self) -> bool:
        return self.process.stop(15)

    def running(self) -> bool:
        return self.process.pid() is not None

    def server_stats(self) -> dict[str, dict[str, str]]:
        """`backend/server` -> its row of HAProxy's CSV stats (status, stot = sessions, hrsp_5xx, ...)."""
        url = f"http://127.0.0.1:{self.cfg.stats_port}/stats;csv"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode().lstrip("# ")
        return {f"{row['pxname']}/{row['svname']}": row for row in csv.DictReader(io.StringIO(text))}

    def wait_servers_up(self, backend: str, count: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        up = 0
        while time.monotonic() < deadline:
            rows = self.server_stats()
            up = sum(1 for k, r in rows.items() if k.startswith(backend + "/") and r["status"].startswith("UP")
                     and r["svname"] not in ("FRONTEND", "BACKEND"))
            if up >= count:
                return
            time.sleep(0.3)
        raise ServiceError(f"haproxy: only {up} of {count} {backend} servers up after {timeout_s:.0f}s")

    def command(self, line: str) -> str:
        """One command on HAProxy's admin socket (the master-worker reload keeps it on the new worker)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.cfg.run_dir / "haproxy.sock"))
            sock.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def set_state(self, server: str, state: str) -> None:
        """`backend/server` to `ready`, `drain` (finish current connections, take no new ones) or `maint`."""
        answer = self.command(f"set server {server} state {state}").strip()
        if answer:
            raise ServiceError(f"haproxy: set server {server} state {state}: {answer}")

    def wait_idle(self, server: str, timeout_s: float) -> bool:
        """Wait until `backend/server` holds no connection (its clients have moved); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if int(self.server_stats()[server]["scur"] or 0) == 0:
                return True
            time.sleep(0.2)
        return False
