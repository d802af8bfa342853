"""`python -m gateway`: start HEADWATER_GATEWAY_WORKERS worker processes on one port and supervise them."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from gateway.config import ConfigError, GatewayConfig
from gateway.logs import setup_logging
from gateway.proxy_socket import bind_proxy_socket

log = logging.getLogger("gateway.supervisor")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway", description=__doc__)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--supervisor", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--proxy-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        cfg = GatewayConfig.from_env()
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if args.worker is not None or cfg.workers == 1:
        from gateway.server import run_worker  # noqa: PLC0415 - after PROMETHEUS_MULTIPROC_DIR is final

        worker = args.worker or 0
        # SIGHUP (reload the certificate) is handled once serving; until then it must not kill a starting worker,
        # which reads the current certificate files when it starts anyway.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        setup_logging(cfg.log_level, worker)
        run_worker(cfg, worker, supervisor=args.supervisor, proxy_fd=args.proxy_fd)
        return 0
    setup_logging(cfg.log_level, -1)
    return supervise(cfg)


def supervise(cfg: GatewayConfig) -> int:
    """Start the workers, restart any that dies, forward SIGTERM/SIGINT and wait for them within the deadline."""
    metrics_dir = tempfile.mkdtemp(prefix="headwater-gateway-metrics-")
    # The workers share committed-batch answers and a schema snapshot in this directory (docs/gateway.md).
    shared_dir = cfg.shared_dir or tempfile.mkdtemp(prefix="headwater-gateway-shared-")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir, "HEADWATER_GATEWAY_SHARED_DIR": shared_dir}
    stopping = False
    # One unix socket for every worker (they accept on the inherited descriptor): a unix path cannot be shared
    # with SO_REUSEPORT as host:port is. It outlives worker restarts; removed when the supervisor stops.
    proxy = bind_proxy_socket(cfg.proxy_socket) if cfg.proxy_socket else None
    workers: dict[int, subprocess.Popen[bytes]] = {}

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    def on_hup(signum: int, _frame: object) -> None:  # rotated certificate files: every worker reloads them
        for proc in workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGHUP)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_hup)

    def spawn(i: int) -> subprocess.Popen[bytes]:
        extra = ["--proxy-fd", str(proxy.fileno())] if proxy is not None else []
        return subprocess.Popen([sys.executable, "-m", "gateway", "--worker", str(i), "--supervisor", str(os.getpid()),
                                 *extra], env=env, pass_fds=(proxy.fileno(),) if proxy is not None else ())

    workers.update({i: spawn(i) for i in range(cfg.workers)})
    log.info("started workers", extra={"fields": {"pids": [p.pid for p in workers.values()]}})
    try:
        while not stopping:
            time.sleep(0.2)
            for i, proc in list(workers.items()):
                if proc.poll() is not None and not stopping:
                    log.warning("worker exited; restarting", extra={"fields": {"worker": i, "rc": proc.returncode}})
                    _mark_dead(proc.pid, metrics_dir)
                    time.sleep(1.0)
                    workers[i] = spawn(i)
        for proc in workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + cfg.shutdown_timeout_s + 5
        for proc in workers.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker missed the shutdown deadline; killing", extra={"fields": {"pid": proc.pid}})
                proc.kill()
                proc.wait()
    finally:
        if proxy is not None:
            proxy.close()
            os.unlink(cfg.proxy_socket)
        shutil.rmtree(metrics_dir, ignore_errors=True)
        if not cfg.shared_dir:
            shutil.rmtree(shared_dir, ignore_errors=True)
    log.info("all workers stopped")
    return 0


def _mark_dead(pid: int, metrics_dir: str) -> None:
    """Drop a dead worker's live gauges. The supervisor's own environment has no PROMETHEUS_MULTIPROC_DIR
    (only the workers get it), so the directory is passed explicitly."""
    from prometheus_client import multiprocess  # noqa: PLC0415

    multiprocess.mark_process_dead(pid, metrics_dir)  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    sys.exit(main())
