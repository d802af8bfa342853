"""How long producers see no 200 when a broker dies: one small batch every `interval_s` to each gateway directly and
through HAProxy, each answer recorded with when it was sent and when it came, and per target two figures:
- the window from its first failed answer to its first 200 after it (a failed answer: any status but 200, a closed
  connection or a timeout), by when the answers came;
- the stall: the longest time after the fault with no 200 coming at all, which also counts requests held without an
  answer (with the gateway's default timeouts a request can wait out the election and then succeed, so no answer
  fails, yet the producer waited)."""

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
        self.answers: dict[str, list[tuple[float, Any, float]]] = {name: [] for name in targets}  # sent, outcome, came
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
            self.answers[name].append((t0, outcome, time.monotonic()))
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - t0)))

    def recovered(self, since: float) -> bool:
        """Every target answered 200 after its first failure since `since` (or never failed and answers 200)."""
        return all(window(list(a), since)[1] for a in self.answers.values())

    def windows(self, since: float) -> dict[str, float | None]:
        """Per target: seconds from its first failed answer after `since` to its first 200 after that (0 when it
        never failed; None while it has not answered 200 again)."""
        return {name: window(list(a), since)[0] for name, a in self.answers.items()}

    def stalls(self, since: float) -> dict[str, float | None]:
        """Per target: the longest time after `since` with no 200 coming (None while none has come since)."""
        return {name: stall(list(a), since) for name, a in self.answers.items()}


def window(answers: list[tuple[float, Any, float]], since: float) -> tuple[float | None, bool]:
    """(the no-200 window in seconds or None, whether the target is answering 200 after it); answers sent after
    `since`, timed by when they came."""
    after = [(came, outcome) for sent, outcome, came in answers if sent >= since]
    failed = next((came for came, outcome in after if outcome != 200), None)
    if failed is None:
        return 0.0, any(outcome == 200 for _, outcome in after)
    back = next((came for came, outcome in after if came > failed and outcome == 200), None)
    return (None, False) if back is None else (round(back - failed, 1), True)


def stall(answers: list[tuple[float, Any, float]], since: float) -> float | None:
    """The longest gap between `since` and the 200s that came after it, in seconds (None if none came)."""
    oks = sorted(came for _, outcome, came in answers if outcome == 200 and came >= since)
    if not oks:
        return None
    return round(max(b - a for a, b in zip([since, *oks], oks, strict=False)), 1)
