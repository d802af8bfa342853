"""`python -m subscribe` (`headwater-subscribe`): serve live subscriptions to Headwater's streams as Server-Sent Events.

Every setting is an environment variable (docs/subscriptions.md, "Settings"); the required ones are KAFKA_BOOTSTRAP,
REGISTRY_URL and HEADWATER_SUBSCRIBE_READ_KEYS (or _FILE). Clients: GET /v1/streams/<stream> with a read key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from subscribe.config import ConfigError, SubscribeConfig
from subscribe.logs import setup_logging


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="headwater-subscribe", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
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
