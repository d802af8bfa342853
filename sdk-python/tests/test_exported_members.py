"""The public surface is exactly `__all__`: everything else lives in private `_modules`."""

from __future__ import annotations

import pytest

import headwater

pytestmark = pytest.mark.unit

EXPECTED = {
    "AsyncClient", "BatchRejectedError", "Client", "ClientClosedError", "ClientConfig", "ClientState",
    "ConfigError", "DeliveryError", "DeliveryReport", "EventRejectedError", "EventsDroppedError", "HeadwaterError",
    "InvalidEventError", "MemoryTransport", "Metrics", "Request", "Response", "RetryableStatusError",
    "SpoolLockedError", "Transport", "TransportError", "Urllib3Transport", "__version__",
    "StreamRecord", "Subscription", "SubscriptionError", "subscribe",  # live subscriptions (_subscribe.py)
}


def test_all_is_curated() -> None:
    assert set(headwater.__all__) == EXPECTED
    assert sorted(headwater.__all__) == headwater.__all__


def test_every_public_member_is_exported_from_headwater() -> None:
    public = {name for name in dir(headwater) if not name.startswith("_")}
    assert public == EXPECTED - {"__version__"}
    for name in EXPECTED - {"__version__"}:
        assert getattr(headwater, name).__module__ == "headwater", name


def test_exception_tree() -> None:
    assert issubclass(headwater.ConfigError, ValueError)
    assert issubclass(headwater.InvalidEventError, ValueError)
    assert issubclass(headwater.SpoolLockedError, headwater.ConfigError)
    assert issubclass(headwater.RetryableStatusError, headwater.TransportError)
    assert issubclass(headwater.ClientClosedError, headwater.EventsDroppedError)
    for name in ("EventsDroppedError", "BatchRejectedError", "EventRejectedError", "TransportError"):
        assert issubclass(getattr(headwater, name), headwater.DeliveryError)
    assert issubclass(headwater.DeliveryError, headwater.HeadwaterError)

