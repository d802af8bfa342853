"""`python -m console`: serve the operator's console (settings: console/config.py; loopback by default)."""

from __future__ import annotations

import logging
import sys

from aiohttp import web

from common.envfile import stack_settings
from console.app import make_app
from console.config import ConfigError, ConsoleConfig


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = ConsoleConfig.from_env(stack_settings())
    except ConfigError as exc:
        print(f"console: configuration: {exc}", file=sys.stderr)
        return 2
    scheme = "https" if cfg.tls else "http"
    print(f"console on {scheme}://{cfg.host}:{cfg.port}/ (gateways {', '.join(cfg.gateways)}; "
          f"{'users from ' + cfg.users_file if cfg.users_file else 'no authentication: loopback only'})", flush=True)
    web.run_app(make_app(cfg), host=cfg.host, port=cfg.port, print=None,
                ssl_context=cfg.tls.context() if cfg.tls else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
