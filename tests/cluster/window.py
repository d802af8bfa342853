"""How long producers see no 200 when a broker dies: one small batch every `interval_s` to each gateway directly and
through HAProxy, each answer recorded, and per target the window from its first failed answer to its first 200
after it (a failed answer: any status but 200, a closed connection or a timeout)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from tests.cluster.fleet import page_view


def _batch() -> bytes:
    now = int(time.time() * 1000)
    event = {"event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": str(uuid.uuid4()), "seq": 0,
             "node_id": "window-probe", "created_at": now, "properties": page_view(0, "window-probe")}
    return json.dumps({"batch_id": str(uuid.uuid4()), "sent_at": now, "sdk": {"name": "probe", "version": "0"},
                       "events": [event]}).encode()


def _post(url: str, key: str, timeout_s: float) -> Any:
    req = urllib.request.Request(url + "/v1/batch", data=_batch(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return type(exc).__name__


class Prober:
    """Probes `targets` (name -> base URL) until stopped; `windows()` once every target answered 200 again."""

    def __init__(self, targets: dict[str, str], key: str, interval_s: float = 0.1, timeout_s: float = 15.0) -> None:
        self.key, self.interval_s, self.timeout_s = key, interval_s, timeout_s
        self.answers: dict[str, list[tuple[float, Any]]] = {name: [] for name in targets}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._probe, args=(name, url), daemon=True)
                         for name, url in targets.items()]

    def __enter__(self) -> Prober:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout_s + 5)

    def _probe(self, name: str, url: str) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            outcome = _post(url, self.key, self.timeout_s)
            self.answers[name].append((t0, outcome))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - t0)))

    def recovered(self, since: float) -> bool:
        """Every target answered 200 after its first failure since `since` (or never failed and answers 200)."""
        return all(window(list(a), since)[1] for a in self.answers.values())

    def windows(self, since: float) -> dict[str, float | None]:
        """Per target: seconds from its first failed answer after `since` to its first 200 after that (0 when it
        never failed; None while it has not answered 200 again)."""
        return {name: window(list(a), since)[0] for name, a in self.answers.items()}


def window(answers: list[tuple[float, Any]], since: float) -> tuple[float | None, bool]:
    """(the no-200 window in seconds or None, whether the target is answering 200 after it)."""
    failed = next((t for t, outcome in answers if t >= since and outcome != 200), None)
    if failed is None:
        return 0.0, any(t >= since and outcome == 200 for t, outcome in answers)
    back = next((t for t, outcome in answers if t > failed and outcome == 200), None)
    return (None, False) if back is None else (round(back - failed, 1), True)
