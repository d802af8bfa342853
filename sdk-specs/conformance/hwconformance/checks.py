"""The expectations of an SDK vector, and the invariants every SDK run must keep whatever the vector."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .patterns import Matcher, Mismatch
from .wire import decompress, unframe

if TYPE_CHECKING:
    from .sdkcase import Run

STRICT_OUTCOMES = ("event_rejected", "batch_refused")


def request_views(run: Run) -> list[dict[str, Any]]:
    """What patterns see of each recorded batch request (see sdk-specs/README.md, "Request views")."""
    schemas = {int(e["id"]): e["schema"] for e in run.mock.registry.values()}
    views: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    mocks = run.mocks.values() if run.mocks else [run.mock]
    for req in sorted((r for m in mocks for r in m.requests), key=lambda r: float(r["t"])):
        batch = req.get("decoded")
        view: dict[str, Any] = {
            "gateway": req.get("gateway", "primary"), "status": req.get("status"),
            "method": req["method"], "path": req["path"], "headers": req["headers"], "batch": batch,
            "conn": req["conn"], "new_conn": prev is None or req["conn"] != prev["conn"],
            "gap_s": 0.0 if prev is None else round(req["t"] - prev["t"], 3),
        }
        view["body_bytes"] = len(decompress(req["body"], req["headers"].get("content-encoding", "identity"))) \
            if not req.get("decode_error") else None
        if req.get("decode_error"):
            view["decode_error"] = req["decode_error"]
        events = batch.get("events", []) if isinstance(batch, dict) else []
        if "avro" in req["headers"].get("content-type", ""):
            try:
                view["framed"] = [unframe(bytes.fromhex(e), schemas) for e in events]
            except ValueError as exc:
                view["decode_error"] = f"framed event: {exc}"
            view["events"] = [f["record"] for f in view.get("framed", [])]
        else:
            view["events"] = [e for e in events if isinstance(e, dict)]
        views.append(view)
        prev = req
    return views


def check_expectations(expect: dict[str, Any], run: Run, matcher: Matcher,
                       capabilities: frozenset[str]) -> list[str]:
    """Every expectation and invariant the run breaks (empty: it passed); each part is checked on its own so
    that one failure does not hide another."""
    views = request_views(run)
    problems: list[str] = []

    def part(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Mismatch as exc:
            problems.append(str(exc))

    part(lambda: _invariants(views, run, capabilities))
    if "requests" in expect:
        part(lambda: _requests(expect, views, matcher))
    if "each_request" in expect:
        for i, view in enumerate(views):
            part(lambda i=i, view=view: matcher.check(expect["each_request"], view, f"request[{i}]"))  # type: ignore[misc]
    if "registry_calls" in expect:
        part(lambda: matcher.check(expect["registry_calls"], run.mock.registry_calls, "registry_calls"))
    if "events" in expect:
        part(lambda: _events(expect["events"], views))
    for n, rule in enumerate(expect.get("events_where", [])):
        part(lambda n=n, rule=rule: _events_where(n, rule, views, matcher))  # type: ignore[misc]
    if "outcomes" in expect:
        part(lambda: _outcomes(expect["outcomes"], run.outcomes, matcher))
    for name, rule in expect.get("gateways", {}).items():
        part(lambda name=name, rule=rule: _gateway(name, rule, views, run))  # type: ignore[misc]
    if "stats" in expect:
        stats = dict(run.stats)
        stats["dropped_total"] = sum(int(v) for v in (stats.get("dropped") or {}).values())
        part(lambda: matcher.check(expect["stats"], stats, "stats"))
    return problems


def _requests(expect: dict[str, Any], views: list[dict[str, Any]], matcher: Matcher) -> None:
    patterns = expect["requests"]
    at_least = expect.get("requests_at_least")
    if at_least is None and len(views) != len(patterns):
        raise Mismatch(f"expected {len(patterns)} request(s), the mock received {len(views)}: " + _summary(views))
    if at_least is not None and len(views) < at_least:
        raise Mismatch(f"expected at least {at_least} request(s), got {len(views)}: " + _summary(views))
    for i, (pattern, view) in enumerate(zip(patterns, views, strict=False)):
        matcher.check(pattern, view, f"request[{i}]")


def _summary(views: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for v in views:
        batch = v["batch"] if isinstance(v["batch"], dict) else {}
        parts.append(f"#{len(parts)} {v.get('gateway', 'primary')} {v.get('status')} conn {v['conn']} "
                     f"+{v['gap_s']}s {len(v['events'])} events batch_id {str(batch.get('batch_id'))[:13]}")
    return "[" + "; ".join(parts) + "]"


def _invariants(views: list[dict[str, Any]], run: Run, capabilities: frozenset[str]) -> None:
    """Every request decodes; a batch_id always carries the same events; track's seqs are never reused."""
    _identity(views, run)
    content: dict[str, list[Any]] = {}
    wire_seq: dict[str, int] = {}
    for i, view in enumerate(views):
        if "decode_error" in view:
            raise Mismatch(f"request[{i}]: the body does not decode: {view['decode_error']}")
        batch = view["batch"]
        ids = [(e.get("event_id"), e.get("seq")) for e in view["events"]]
        bid = str(batch.get("batch_id")) if isinstance(batch, dict) else ""
        if bid in content and content[bid] != ids:
            raise Mismatch(f"request[{i}]: batch_id {bid} was sent before with other events (a retry MUST resend "
                           "the same batch)")
        content[bid] = ids
        for e in view["events"]:
            wire_seq[str(e.get("event_id"))] = e.get("seq")
    if "track_seq" not in capabilities:
        return
    handed: list[int] = []
    for cmd, reply in run.replies:
        if cmd["cmd"] != "track" or not reply.get("ok"):
            continue
        seq = reply.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise Mismatch(f"track reply {reply}: capability track_seq needs an integer seq")
        if handed and seq <= max(handed):
            raise Mismatch(f"track returned seq {seq} after seq {max(handed)}: a seq is never reused (§2)")
        handed.append(seq)
        eid = reply.get("event_id")
        if eid in wire_seq and wire_seq[str(eid)] != seq:
            raise Mismatch(f"track returned seq {seq} for event {eid}, the wire carries seq {wire_seq[str(eid)]}")


def _identity(views: list[dict[str, Any]], run: Run) -> None:
    """User-Agent `<sdk>/<version> (<runtime>/<version>)` and the body's sdk name/version, as `hello` said."""
    name, version = run.hello.get("sdk"), run.hello.get("version")
    agent = re.compile(re.escape(f"{name}/{version}") + r" \([A-Za-z0-9_.+-]+/[^ ()]+\)")
    for i, view in enumerate(views):
        ua = view["headers"].get("user-agent", "")
        if agent.fullmatch(ua) is None:
            raise Mismatch(f"request[{i}]: User-Agent {ua!r} is not '{name}/{version} (<runtime>/<version>)'")
        batch = view["batch"] if isinstance(view["batch"], dict) else {}
        sdk = batch["sdk"] if "sdk" in batch else {"name": batch.get("sdk_name"), "version": batch.get("sdk_version")}
        if sdk != {"name": name, "version": version}:
            raise Mismatch(f"request[{i}]: the batch's sdk is {sdk}, hello said {name} {version}")


def _events(expect: dict[str, Any], views: list[dict[str, Any]]) -> None:
    events = [e for v in views for e in v["events"]]
    by_key: dict[tuple[Any, Any], set[Any]] = {}
    seqs_of_id: dict[Any, set[Any]] = {}
    for e in events:
        by_key.setdefault((e.get("producer_id"), e.get("seq")), set()).add(e.get("event_id"))
        seqs_of_id.setdefault(e.get("event_id"), set()).add(e.get("seq"))
    if "seqs" in expect:
        got = sorted({e.get("seq") for e in events})
        if got != sorted(expect["seqs"]):
            raise Mismatch(f"events: the seqs on the wire are {_ranges(got)}, expected {_ranges(expect['seqs'])}")
    distinct = sorted({e.get("seq") for e in events if isinstance(e.get("seq"), int)})
    if "seqs_include" in expect and not set(expect["seqs_include"]) <= set(distinct):
        raise Mismatch(f"events: the seqs on the wire are {_ranges(distinct)}, expected them to include "
                       f"{_ranges(expect['seqs_include'])}")
    if "distinct" in expect and len(distinct) != expect["distinct"]:
        raise Mismatch(f"events: {len(distinct)} distinct seqs on the wire ({_ranges(distinct)}), "
                       f"expected {expect['distinct']}")
    if expect.get("one_producer"):
        producers = {e.get("producer_id") for e in events}
        if len(producers) != 1:
            raise Mismatch(f"events: expected one producer_id, got {sorted(map(str, producers))}")
    if expect.get("stable_ids"):
        for key, ids in by_key.items():
            if len(ids) != 1:
                raise Mismatch(f"events: (producer_id, seq) {key} was sent with several event_ids {sorted(ids)}")
        for eid, seqs in seqs_of_id.items():
            if len(seqs) != 1:
                raise Mismatch(f"events: event_id {eid} was sent with several seqs {sorted(seqs)}")


def _gateway(name: str, rule: dict[str, Any], views: list[dict[str, Any]], run: Run) -> None:
    """What one gateway of a two-gateway vector saw: request counts, the seqs it acknowledged (each exactly
    once), the batches of another gateway it was sent again (same `batch_id`), its `/readyz` probes."""
    mine = [v for v in views if v["gateway"] == name]
    where = f"gateways.{name}"
    if len(mine) < int(rule.get("requests_min", 0)):
        raise Mismatch(f"{where}: {len(mine)} request(s), expected at least {rule['requests_min']}: {_summary(mine)}")
    if "requests_max" in rule and len(mine) > int(rule["requests_max"]):
        raise Mismatch(f"{where}: {len(mine)} request(s), expected at most {rule['requests_max']}: {_summary(mine)}")
    if "acknowledged_seqs" in rule:
        first, last = rule["acknowledged_seqs"]
        got = sorted(e.get("seq") for v in mine if v["status"] in (200, 422) for e in v["events"])
        if got != list(range(first, last + 1)):
            raise Mismatch(f"{where}: acknowledged the seqs {_ranges(got)} ({len(got)} events), expected "
                           f"{first}-{last} each exactly once")
    if "resends_batches_of" in rule:
        other = rule["resends_batches_of"]
        theirs = {str(v["batch"].get("batch_id")) for v in views
                  if v["gateway"] == other and isinstance(v["batch"], dict)}
        ours = {str(v["batch"].get("batch_id")) for v in mine if isinstance(v["batch"], dict)}
        if not theirs:
            raise Mismatch(f"{where}: the {other} received no batch, so none could be sent again here")
        if theirs - ours:
            raise Mismatch(f"{where}: batch_ids sent to the {other} never came here with the same id: "
                           f"{sorted(theirs - ours)}")
    probes = run.mocks[name].probes if name in run.mocks else 0
    if probes < int(rule.get("probes_min", 0)):
        raise Mismatch(f"{where}: {probes} GET /readyz probe(s), expected at least {rule['probes_min']}")


def _events_where(n: int, rule: dict[str, Any], views: list[dict[str, Any]], matcher: Matcher) -> None:
    """Every event on the wire that matches `rule["match"]` also matches `rule["each"]`; at least `min_count`."""
    chosen = [e for v in views for e in v["events"] if Matcher().matches(rule["match"], e)]
    if len(chosen) < int(rule.get("min_count", 1)):
        raise Mismatch(f"events_where[{n}]: {len(chosen)} event(s) match {rule['match']}, expected at least "
                       f"{rule.get('min_count', 1)}")
    for i, event in enumerate(chosen):
        matcher.check(rule["each"], event, f"events_where[{n}] event {i}")


def _outcomes(patterns: list[Any], outcomes: list[dict[str, Any]], matcher: Matcher) -> None:
    left = list(outcomes)
    for pattern in patterns:
        for i, outcome in enumerate(left):
            if matcher.matches(pattern, outcome):
                del left[i]
                break
        else:
            raise Mismatch(f"outcomes: nothing matches {pattern}; the SDK reported "
                           f"{[o for o in outcomes if o.get('kind') != 'error']}")
    extra = [o for o in left if o.get("kind") in STRICT_OUTCOMES]
    if extra:
        raise Mismatch(f"outcomes: unexpected {extra}")


def _ranges(seqs: list[Any]) -> str:
    if not seqs or not all(isinstance(s, int) for s in seqs):
        return str(seqs)
    out: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ",".join(out)
