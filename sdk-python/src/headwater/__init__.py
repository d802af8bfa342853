"""Headwater client SDK: batched, compressed, crash-safe event delivery to a Headwater gateway.

```python
import headwater

with headwater.Client("http://gateway:8080", "my-write-key", spool_dir="/var/lib/myapp/headwater") as hw:
    hw.track("page_view", {"url": "https://example.com/"})
```

`headwater.subscribe(endpoint, read_key, stream)` iterates a stream live (the subscription server), resuming after
disconnects. `AsyncClient` (asyncio) is imported on first use; `wire_format="avro"` needs the `avro` extra
(`pip install headwater[avro]`).

Exceptions (all in this namespace; see `headwater._exceptions` for when each happens):

```
HeadwaterError
├── ConfigError (ValueError)  └── SpoolLockedError
├── InvalidEventError (ValueError)
├── SubscriptionError              (subscribe(): a refusal that is not retried)
└── DeliveryError
    ├── EventsDroppedError  └── ClientClosedError
    ├── BatchRejectedError
    ├── EventRejectedError
    └── TransportError  └── RetryableStatusError
```
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._client import Client, ClientState
from ._config import ClientConfig
from ._exceptions import (
    BatchRejectedError,
    ClientClosedError,
    ConfigError,
    DeliveryError,
    EventRejectedError,
    EventsDroppedError,
    HeadwaterError,
    InvalidEventError,
    RetryableStatusError,
    SpoolLockedError,
    TransportError,
)
from ._metrics import Metrics
from ._sender import DeliveryReport
from ._subscribe import StreamRecord, Subscription, SubscriptionError, subscribe
from ._transport import MemoryTransport, Request, Response, Transport, Urllib3Transport
from ._version import __version__

if _TYPE_CHECKING:
    from ._aio import AsyncClient

__all__ = [
    "AsyncClient",
    "BatchRejectedError",
    "Client",
    "ClientClosedError",
    "ClientConfig",
    "ClientState",
    "ConfigError",
    "DeliveryError",
    "DeliveryReport",
    "EventRejectedError",
    "EventsDroppedError",
    "HeadwaterError",
    "InvalidEventError",
    "MemoryTransport",
    "Metrics",
    "Request",
    "Response",
    "RetryableStatusError",
    "SpoolLockedError",
    "StreamRecord",
    "Subscription",
    "SubscriptionError",
    "Transport",
    "TransportError",
    "Urllib3Transport",
    "__version__",
    "subscribe",
]

for _name in __all__:  # show public objects as headwater.X, not headwater._module.X (as httpx does)
    _obj = globals().get(_name)
    if hasattr(_obj, "__module__") and not isinstance(_obj, str):
        _obj.__module__ = "headwater"
del _name, _obj


def __getattr__(name: str) -> _Any:
    """`AsyncClient` is imported on first use, so `import headwater` does not import asyncio."""
    if name == "AsyncClient":
        from ._aio import AsyncClient  # noqa: PLC0415 - lazy on purpose

        AsyncClient.__module__ = "headwater"
        globals()["AsyncClient"] = AsyncClient
        return AsyncClient
    raise AttributeError(f"module 'headwater' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
