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
    print(f"console on http://{cfg.host}:{cfg.port}/ (gateways {', '.join(cfg.gateways)})", flush=True)
    web.run_app(make_app(cfg), host=cfg.host, port=cfg.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
