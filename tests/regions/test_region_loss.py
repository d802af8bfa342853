"""Region loss measured (issue 30, "Measured, not assumed"): SDK clients with endpoints [a, b] under load, every
process of region a killed with SIGKILL; RTO (until each SDK delivers through b), RPO (acknowledged by a, not yet in b)
and the mirror lag at the kill; a restarted from its disks, the SDKs fail back, and both regions hold every
acknowledged event. With HEADWATER_CHAOS_REGIONS=full (`make chaos-regions`): the three SDKs, a partition between the
regions (MirrorMaker 2 stopped for 60 s with both regions taking traffic) and MirrorMaker 2's cost per 1,000 events/s,
with both regions' pipelines running: after the failback and after the heal, each pipeline's deduplicated `events/`
output must count every acknowledged event exactly once, the same in both regions (tests/regions/pipelines.py).

Runs after tests/regions/test_mirror.py and before test_region_restart.py (files run in name order)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from stack.mirror import remote_topic
from stack.regions import NAMES, Regions
from stack.topics import EVENTS_TOPIC
from tests.regions.chaos import FULL, PIPELINES, RATE, SCALE, ProcUsage, RegionView, load_average, report, wait_holding
from tests.regions.pipelines import (
    WAIT_S,
    PipelineCount,
    aggregate_totals,
    check_once,
    events_total,
    start_pipeline,
    wait_counted,
)
from tests.regions.producers import SdkProducer, ready_sdk

pytestmark = pytest.mark.integration

SDKS = ("python", "go", "typescript") if FULL else ("python",)
RTO_GOAL_S = 30.0  # with the SDKs' default failover settings (protocol.md §9: 10 to 12 s against a dead region)
PARTITION_S = 60.0
TIMEOUT_S = 1500 if PIPELINES else 900  # the full version's (three SDKs, 30 s cost windows, the pipelines' waits)


def _until(what: str, ready: Callable[[], bool], timeout_s: float) -> float:
    t0 = time.monotonic()
    while not ready():
        assert time.monotonic() - t0 < timeout_s, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.2)
    return time.monotonic() - t0


@pytest.fixture
def launched() -> Iterator[list[SdkProducer]]:
    """The producers a test starts; any still running at its end (the test failed half-way) is killed."""
    producers: list[SdkProducer] = []
    yield producers
    for p in producers:
        if p.delivered_all is None:
            p.abort()


def _start(profile: Regions, env: dict[str, str], tmp: Path, orders: Mapping[str, tuple[str, ...]],
           launched: list[SdkProducer]) -> tuple[list[SdkProducer], dict[str, RegionView]]:
    """One producer per SDK (`orders`: SDK -> its regions in failover order), and both regions' views of them."""
    producers = launched
    for sdk, order in orders.items():
        producers.append(SdkProducer(ready_sdk(sdk), [env[f"GATEWAY_URL_{r.upper()}"] for r in order],
                                     env["HEADWATER_WRITE_KEY"], RATE * SCALE, tmp / sdk, label=sdk))
    ids = {p.producer_id for p in producers}
    views = {n: RegionView.at_end(profile, n, ids) for n in NAMES}
    for p in producers:
        p.start()
    _until("every SDK acknowledging", lambda: all(p.last().acknowledged >= RATE * SCALE for p in producers), 60)
    return producers, views


def _counted(profile: Regions, producers: list[SdkProducer]) -> list[PipelineCount]:
    """Both regions' pipelines' counts of the run's producers (none without the pipelines)."""
    ids = {p.producer_id for p in producers}
    return [PipelineCount.of(profile.stack(n), ids) for n in NAMES] if PIPELINES else []


def _check_pipelines(profile: Regions, pipelines: list[PipelineCount], acked: set[str], since: str,
                     t0: float) -> float:
    """Until both pipelines have counted every acknowledged event; each exactly once, the same ids in both regions.
    Seconds from `t0` (monotonic, the moment `since` names) until they agreed."""
    wait_counted(pipelines, acked)
    took = time.monotonic() - t0
    for p in pipelines:
        report(check_once(p, acked))
    a, b = pipelines
    report(f"pipelines agree: a counted {sum(a.counts.values())}, b {sum(b.counts.values())} events of the run, the "
           f"same ids in both; {took:.1f} s after {since}; load {load_average()}")
    assert a.counts == b.counts
    _check_aggregates(profile, pipelines, t0, since)
    return took


def _check_aggregates(profile: Regions, pipelines: list[PipelineCount], t0: float, since: str) -> None:
    """Until each region's live aggregates (each tumbling granularity, summed over its windows) count exactly the
    events its pipeline wrote (every producer's, each event once), and both regions' the same: nothing counted
    twice or lost in either region's aggregates, the issue's check; fails with the last totals seen."""
    last: dict[str, tuple[dict[str, int], tuple[int, int]]] = {}

    def agree() -> bool:
        for p in pipelines:
            last[p.name] = (aggregate_totals(profile.stack(p.name)), events_total(p.events_dir))
        rows = {rows for _, (rows, _) in last.values()}
        return len(rows) == 1 and all(set(t.values()) == {e[0]} and e[0] == e[1] for t, e in last.values())

    try:
        _until("both regions' aggregates counting every event once", agree, WAIT_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; per region (aggregate totals, (events/ rows, distinct)): {last}") from None
    totals, (rows, _) = last[pipelines[0].name]
    report(f"aggregates agree: in each region the live aggregates count {rows} events in all at every tumbling "
           f"granularity ({', '.join(f'{g} {n}' for g, n in totals.items())}), as many as its events/ output holds, "
           f"each once; {time.monotonic() - t0:.1f} s after {since}; load {load_average()}")


def _acknowledged(producers: list[SdkProducer]) -> set[str]:
    """Close every client; every event each tracked, which each SDK reports acknowledged."""
    for p in producers:
        p.stop()
    for p in producers:
        p.check_delivered()
    return {e for p in producers for e in p.event_ids}


def _cpu_cores(pid: int, window_s: float, during: Callable[[], None] = lambda: None) -> tuple[float, ProcUsage]:
    """The CPU (cores) process `pid` used over `window_s`, and its usage at the end."""
    u0 = ProcUsage.of(pid)
    during()
    time.sleep(window_s)
    u1 = ProcUsage.of(pid)
    return (u1.cpu_s - u0.cpu_s) / (u1.t - u0.t), u1


def _mirror_cost(profile: Regions, b: RegionView, idle_cores: float, window_s: float) -> None:
    """MirrorMaker 2's CPU and resident memory copying a -> b under the producers' load, against its idle CPU: the
    extra cores per 1,000 events/s mirrored."""
    pid = profile.mirror.process.pid()
    assert pid is not None, "MirrorMaker 2 is not running"

    def count() -> int:  # every producer sends to a: what b holds of them came through the mirror
        return sum(b.refresh().records.values())

    n0, t0 = count(), time.monotonic()
    cores, usage = _cpu_cores(pid, window_s)
    rate = (count() - n0) / (time.monotonic() - t0)
    assert rate > 0, f"nothing mirrored into b's {remote_topic('a', EVENTS_TOPIC)} in {window_s:.0f} s"
    report(f"MirrorMaker 2 at {rate:.0f} events/s a->b: {cores:.3f} CPU cores (idle {idle_cores:.3f}; "
           f"{(cores - idle_cores) / rate * 1000:.3f} cores per 1,000 events/s above idle), RSS {usage.rss_mb:.0f} MB "
           f"(heap -Xmx{profile.cfg.mirror_heap_mb}m), load {load_average()}")


@pytest.mark.timeout(TIMEOUT_S)  # the full version's; `make test`'s takes about 90 s
def test_region_a_lost_failover_restart_failback(regions: tuple[Regions, dict[str, str]], tmp_path: Path,
                                                 launched: list[SdkProducer]) -> None:
    profile, env = regions
    window_s = 30.0 if FULL else 5.0
    pid = profile.mirror.process.pid()
    assert pid is not None, "MirrorMaker 2 is not running"
    idle, _ = _cpu_cores(pid, window_s)
    producers, views = _start(profile, env, tmp_path, {sdk: NAMES for sdk in SDKS}, launched)
    pipelines = _counted(profile, producers)
    _mirror_cost(profile, views["b"], idle, window_s)

    # -- region a lost whole, under load ---------------------------------------------------------------------
    t_kill = time.monotonic()
    profile.kill_region("a")
    in_b = views["b"].refresh().distinct()  # b's copy at the kill (the SDKs reach b 10 s later)
    b_newest_ms = views["b"].newest_ms.get(remote_topic("a", EVENTS_TOPIC), 0)
    _until("every SDK delivering through b",
           lambda: all(p.recovery_s(t_kill) is not None for p in producers), 120)
    for p in producers:
        rto = p.recovery_s(t_kill)
        assert rto is not None
        report(f"RTO {p.label}: {rto:.1f} s from the kill to its first batch acknowledged through b "
               f"(goal <= {RTO_GOAL_S:.0f} s)")
        assert rto <= RTO_GOAL_S, f"{p.label}: RTO {rto:.1f} s"
    time.sleep(5)

    # -- a restarted from its disks; the SDKs fail back --------------------------------------------------------
    t_restart, wall_restart = time.monotonic(), time.time()
    profile.start_region("a")
    restart_s = time.monotonic() - t_restart
    if PIPELINES:  # killed with the region: it resumes from its checkpoints
        t_pipe = time.monotonic()
        start_pipeline(profile.stack("a"))
        report(f"region a's pipeline, killed with it, started again from its checkpoints in "
               f"{time.monotonic() - t_pipe:.1f} s (after the region's {restart_s:.1f} s)")
    _until("every SDK failing back to a", lambda: all(p.failed_back_after(t_restart) is not None for p in producers),
           90)
    backs = ", ".join(f"{p.label} {p.failed_back_after(t_restart):.1f} s" for p in producers)
    report(f"region a restarted in {restart_s:.1f} s; failback after the restart began: {backs}")
    resume = {p.label: p.last().acknowledged for p in producers}
    _until("every SDK acknowledged through a again",
           lambda: all(p.last().acknowledged > resume[p.label] + RATE * SCALE for p in producers), 60)
    acked = _acknowledged(producers)
    t_closed = time.monotonic()
    # RPO: what a had committed before it died (read back from its own disks), acknowledged, and not in b then;
    # the mirror lag: how far the newest of a's records b held trailed the newest a had.
    views["a"].refresh()
    written = views["a"].written_ms.get(EVENTS_TOPIC, {})
    in_a = {e for e in views["a"].written_before(EVENTS_TOPIC, wall_restart) if e in acked}
    lag_s = max(0, max((written[e] for e in in_a), default=0) - b_newest_ms) / 1000
    report(f"region a killed under {len(producers)} x {RATE * SCALE:.0f} events/s ({', '.join(SDKS)}): mirror lag at "
           f"the kill {lag_s:.2f} s (a's newest record then, less the newest b held), RPO {len(in_a - in_b)} of "
           f"{len(in_a)} events acknowledged by a not yet in b, load {load_average()}")

    # -- reconciled in both regions (own + mirrored, distinct event ids) ----------------------------------------
    for name in ("b", "a"):
        took = wait_holding(views[name], acked, 180)
        view = views[name]
        found = len(view.distinct() & acked)
        report(f"region {name}: acknowledged {len(acked)} / found {found} (own + mirrored, distinct event ids) / "
               f"duplicates {view.duplicates()} / missing {len(acked) - found}; held {took:.1f} s after the "
               f"clients closed")
        assert found == len(acked)
    if pipelines:
        _check_pipelines(profile, pipelines, acked, "the clients closed", t_closed)


@pytest.mark.timeout(TIMEOUT_S)
def test_partition_then_heal_converges(regions: tuple[Regions, dict[str, str]], tmp_path: Path,
                                       launched: list[SdkProducer]) -> None:
    if not FULL:
        pytest.skip("the partition runs in `make chaos-regions` (HEADWATER_CHAOS_REGIONS=full)")
    profile, env = regions
    orders = {"python": ("a", "b"), "go": ("b", "a"), "typescript": ("a", "b")}
    producers, views = _start(profile, env, tmp_path, orders, launched)
    pipelines = _counted(profile, producers)
    assert profile.mirror.stop(), "MirrorMaker 2 was not running"
    t_part = time.monotonic()
    time.sleep(PARTITION_S)
    a, b = views["a"].refresh().distinct(), views["b"].refresh().distinct()
    report(f"partition {time.monotonic() - t_part:.0f} s (MirrorMaker 2 stopped), both regions taking traffic: a "
           f"lacks {len(b - a)} of b's events, b lacks {len(a - b)} of a's")
    assert b - a and a - b, "the regions did not diverge: was MirrorMaker 2 really stopped?"
    if pipelines:
        pa, pb = (p.refresh().distinct() for p in pipelines)
        report(f"at the heal, the pipelines had counted a {len(pa)}, b {len(pb)} events of the run; a's lacked "
               f"{len(pb - pa)} of b's, b's {len(pa - pb)} of a's")
    t_heal = time.monotonic()
    profile.mirror.start()
    acked = _acknowledged(producers)

    def converged() -> bool:
        ids_a, ids_b = views["a"].refresh().distinct(), views["b"].refresh().distinct()
        return ids_a == ids_b and acked <= ids_a

    _until("both regions holding the same events", converged, 300)
    took = time.monotonic() - t_heal
    report(f"healed: both regions hold the same {len(views['a'].distinct())} distinct event ids "
           f"({len(acked)} acknowledged) {took:.1f} s after MirrorMaker 2 was started again; duplicates a "
           f"{views['a'].duplicates()}, b {views['b'].duplicates()}; load {load_average()}")
    if pipelines:
        _check_pipelines(profile, pipelines, acked, "MirrorMaker 2 was started again (the heal)", t_heal)
