"""Load shapes over time (soak, ramp, spike, steps): pure functions of elapsed seconds -> (users, spawn rate).

Each locust user owns a fixed group of nodes, so the user count sets how many nodes are active and thereby the
offered load: `users` users carry all nodes, a fraction of them carries that fraction of the load. The locust
class that follows a plan is made in locustfile.py (importing locust here would monkey-patch the test session).
"""

from __future__ import annotations

import math
from collections.abc import Callable

Tick = tuple[int, float] | None
Plan = Callable[[float], Tick]


def soak(users: int, duration_s: float, spawn_rate: float) -> Plan:
    """All users (all nodes) for the whole run."""
    def tick(t: float) -> Tick:
        return (users, spawn_rate) if t < duration_s else None
    return tick


def ramp(users: int, duration_s: float, spawn_rate: float) -> Plan:
    """Linear from one user to all of them over the first half of the run, then held."""
    half = duration_s / 2

    def tick(t: float) -> Tick:
        if t >= duration_s:
            return None
        target = users if t >= half else max(1, math.ceil(users * t / half))
        return target, spawn_rate
    return tick


def spike(users: int, duration_s: float, spawn_rate: float) -> Plan:
    """A quarter of the users, all of them (started at once) for the middle fifth of the run, a quarter again."""
    base = max(1, users // 4)

    def tick(t: float) -> Tick:
        if t >= duration_s:
            return None
        if 0.4 * duration_s <= t < 0.6 * duration_s:
            return users, float(users)  # every extra user within a second
        return base, spawn_rate
    return tick


def steps(users: int, duration_s: float, spawn_rate: float, count: int = 5) -> Plan:
    """`count` equal steps of users/count more users each: the ack-latency-versus-load curve in one run."""
    length = duration_s / count

    def tick(t: float) -> Tick:
        if t >= duration_s:
            return None
        return max(1, math.ceil(users * (int(t // length) + 1) / count)), spawn_rate
    return tick


PLANS: dict[str, Callable[[int, float, float], Plan]] = {"soak": soak, "ramp": ramp, "spike": spike, "steps": steps}
