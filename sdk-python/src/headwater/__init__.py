"""Headwater client SDK: batched, compressed, crash-safe event delivery to a Headwater gateway.

```python
import headwater

with headwater.Client("http://gateway:8080", "my-write-key", spool_dir="/var/lib/myapp/headwater") as hw:
    hw.track("page_view", {"url": "https://example.com/"})
```

Exceptions (all in this namespace; see `headwater._exceptions` for when each happens):

```
HeadwaterError
├── ConfigError (ValueError)  └── SpoolLockedError
├── InvalidEventError (ValueError)
└── DeliveryError
    ├── EventsDroppedError  └── ClientClosedError
    ├── BatchRejectedError
    ├── EventRejectedError
    └── TransportError  └── RetryableStatusError
```
"""

from ._aio import AsyncClient
from ._batcher import Batch
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
from ._transport import MemoryTransport, Request, Response, Transport, Urllib3Transport
from ._version import __version__

__all__ = [
    "AsyncClient",
    "Batch",
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
    "Transport",
    "TransportError",
    "Urllib3Transport",
    "__version__",
]

for _name in __all__:  # show public objects as headwater.X, not headwater._module.X (as httpx does)
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and not isinstance(_obj, str):
        _obj.__module__ = "headwater"
del _name, _obj
