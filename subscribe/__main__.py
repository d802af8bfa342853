"""`python -m subscribe` (`headwater-subscribe`): serve subscriptions (settings: subscribe/config.py)."""

from __future__ import annotations

import asyncio
import sys

from subscribe.config import ConfigError, SubscribeConfig
from subscribe.logs import setup_logging


def main() -> int:
    try:
        cfg = SubscribeConfig.from_env()
    except ConfigError as exc:
        print(f"subscribe: configuration: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level)
    from subscribe.server import serve  # noqa: PLC0415 - after logging is set up

    try:
        import uvloop  # noqa: PLC0415
    except ImportError:
        asyncio.run(serve(cfg))
    else:
        uvloop.run(serve(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
