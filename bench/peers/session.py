"""A peers run on a private stack: the broker, registry and gateway of `stack/`, the peer's topic and process, the
pinning, the interleaved rounds and the read-back of both topics."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import zstandard

from bench import cpus
from bench.gateway.procs import pin
from bench.gateway.warm import WARM_TOPIC, warm_broker
from bench.gateway.workload import EVENTS_PER_BATCH, Body, Workload
from bench.peers import readback
from bench.peers.avro_jsonschema import avro_to_json_schema
from bench.peers.bodies import SizedWorkload, mean_event_bytes
from bench.peers.config import PATH, PeerSettings, render_text
from bench.peers.procs import Peer
from bench.peers.rounds import (
    Side,
    broker_idle_cores,
    capacity,
    latency_phase,
    median,
    net_of_idle,
    ratios,
    sustained_phase,
    targets,
)
from gateway.avro_batch import decode_avro_batch
from gateway.config import Limits
from schemas.catalog import subject_for
from stack.config import StackConfig
from stack.launcher import Stack
from stack.services import services
from stack.topics import EVENTS_TOPIC, TopicSpec, ensure_topics, topic_specs

PEER_TOPIC = "bench.peer.events"
EVENT_TYPE = "page_view"


@dataclass(frozen=True)
class Options:
    seconds: int
    rounds: int
    rate: int | None
    concurrency: int
    workers: int
    pin: bool
    compression: str
    event_bytes: int = 0  # 0: the workload's own events (about 1.2 KB)
    avro: bool = True  # also measure the gateway's Avro fast path (the same events as Avro bodies)
    warm_s: float = 120.0  # longest broker warm-up before the rounds (bench/peers/warm.py)


class _Ids(msgspec.Struct):
    event_id: str


class _Batch(msgspec.Struct):
    events: list[_Ids]


_decode = msgspec.json.Decoder(_Batch)
_unzstd = zstandard.ZstdDecompressor()


def event_ids(bodies: list[Body]) -> list[str]:
    """The ids of every event of `bodies`, JSON or Avro (what the durability check expects to find)."""
    ids: list[str] = []
    for b in bodies:
        raw = _unzstd.decompress(b.data, max_output_size=1 << 26)
        if b.content_type == "application/json":
            ids.extend(e.event_id for e in _decode.decode(raw).events)
        else:
            ids.extend(env.event_id for env in decode_avro_batch(raw, Limits()).envelopes if env is not None)
    return ids


def topic_of(side: str) -> str:
    """Both gateway sides write to the gateway's topic: durability is tracked per topic."""
    return "gateway" if side.startswith("gateway") else side


class Session:
    def __init__(self, state: Path, stack_env: dict[str, str], binary: Path, peer_port: int, opts: Options) -> None:
        self.state, self.opts, self.binary, self.peer_port = state, opts, binary, peer_port
        self.cfg = StackConfig.from_env(stack_env)
        self.stack = Stack(self.cfg)
        self.broker = self.stack.kafka.node(1).process  # the benchmark's stack has one broker
        self.sent: dict[str, set[str]] = {"gateway": set(), "peer": set()}
        self.workload: SizedWorkload | None = None
        self.acked: dict[str, int] = {"gateway": 0, "peer": 0}

    def run(self) -> dict[str, Any]:
        peer: Peer | None = None
        try:
            print("starting a private stack (Kafka, registry, gateway) ...", flush=True)
            env = self.stack.up().env
            spec = next(s for s in topic_specs(self.cfg) if s.name == EVENTS_TOPIC)
            ensure_topics(self.cfg.bootstrap, [TopicSpec(PEER_TOPIC, spec.partitions, spec.config),
                                               TopicSpec(WARM_TOPIC, spec.partitions, spec.config)])
            schema_id, avro = self._schema(env["REGISTRY_URL"])
            plan = pin(self.stack, self.cfg, self.opts.pin, "the gateway's {n} worker(s), or the peer")
            warm = warm_broker(self.cfg.bootstrap, self.broker.pid() or 0, max_seconds=self.opts.warm_s,
                               min_transactions=2000 if self.opts.warm_s else 0)
            print(f"broker warmed by {warm.transactions} transactions in {warm.seconds} s: its CPU per transaction "
                  f"{warm.first_ms_per_txn} ms at first, {warm.last_ms_per_txn} ms at the end", flush=True)
            peer = self._start_peer(avro, plan)
            started = peer
            gateway_url = env["GATEWAY_URL"] + "/v1/batch"
            sides = [Side("gateway", gateway_url, env["HEADWATER_WRITE_KEY"], self._gateway_pid)]
            if self.opts.avro:
                sides.append(Side("gateway-avro", gateway_url, env["HEADWATER_WRITE_KEY"], self._gateway_pid))
            sides.append(Side("peer", f"http://127.0.0.1:{self.peer_port}{PATH}", "unused", lambda: started.pid))
            results = self._rounds(sides, SizedWorkload(Workload(json.dumps(avro), schema_id), self.opts.event_bytes))
            results["durability"] = self._durability()
            results["pinned"] = plan is not None
            results["broker_warmup"] = warm.__dict__
            return results
        finally:
            if peer is not None:
                peer.stop()
            self.stack.down()

    def _schema(self, registry_url: str) -> tuple[int, Any]:
        subject = subject_for(EVENT_TYPE)
        with urllib.request.urlopen(f"{registry_url}/subjects/{subject}/versions/latest", timeout=10) as resp:
            doc = json.loads(resp.read())
        return int(doc["id"]), json.loads(doc["schema"])

    def _gateway_pid(self) -> int | None:
        return next((s.process(self.cfg).pid() for s in services(self.cfg) if s.name == "gateway"), None)

    def _start_peer(self, avro: Any, plan: cpus.CpuPlan | None) -> Peer:
        schema_path = self.state / f"{EVENT_TYPE}.schema.json"
        schema_path.write_text(json.dumps(avro_to_json_schema(avro)))
        config = self.state / "peer.yaml"
        config.write_text(render_text(PeerSettings(self.peer_port, self.cfg.bootstrap, PEER_TOPIC, str(schema_path),
                                                   compression=self.opts.compression)))
        peer = Peer(self.binary, config, self.peer_port, self.state / "peer.log", plan.measured if plan else None)
        peer.start()
        return peer

    def _track(self, side: str, bodies: list[Body], failed_batches: int) -> None:
        self.sent[topic_of(side)].update(event_ids(bodies))
        self.acked[topic_of(side)] += (len(bodies) - failed_batches) * EVENTS_PER_BATCH

    def _for(self, side: Side, bodies: list[Body]) -> list[Body]:
        """The bodies as `side` takes them: the Avro twins for the gateway's Avro path, else the JSON bodies."""
        assert self.workload is not None
        return self.workload.avro(bodies) if side.name == "gateway-avro" else bodies

    def _rounds(self, sides: list[Side], workload: SizedWorkload) -> dict[str, Any]:
        idle = [broker_idle_cores(self.broker.pid())]
        print(f"broker idle: {idle[0]:.3f} cores; warming up both sides ...", flush=True)
        self.workload = workload
        warm = workload.bodies(100)
        pilot = {}
        for side in sides:
            mine = self._for(side, warm)
            result = sustained_phase(side, self.broker.pid(), mine, self.opts.concurrency)
            self._track(side.name, mine, result["errors"])
            pilot[side.name] = result["events_per_s"]
        count = int(min(5000, max(200, max(pilot.values()) * self.opts.seconds / EVENTS_PER_BATCH)))
        rate = self.opts.rate
        rows: list[dict[str, Any]] = []
        ratio_rows: list[dict[str, Any]] = []
        for n in range(1, self.opts.rounds + 1):
            figures, rate = self._round(n, sides, workload, count, rate)
            idle.append(broker_idle_cores(self.broker.pid(), 3.0))
            rows.extend(figures)
        # The broker's idle CPU, before the rounds and after each: its mean is the fixed cost taken out.
        idle_mean = sum(idle) / len(idle)
        for row in rows:
            net_of_idle(row, idle_mean)
        paths = [("json", "gateway"), *([("avro", "gateway-avro")] if self.opts.avro else [])]
        for path, name in paths:
            per_round: list[dict[str, Any]] = []
            for n in range(1, self.opts.rounds + 1):
                pair = {r["side"]: r for r in rows if r["round"] == n}
                per_round.append({"round": n, "path": path, **ratios(pair[name], pair["peer"])})
            keys = [k for k in per_round[0] if k not in ("round", "path")]
            per_round.append({"round": "median", "path": path,
                              **{k: median([r[k] for r in per_round]) for k in keys}})
            ratio_rows.extend(per_round)
        return {"event_json_bytes": round(mean_event_bytes(warm)), "broker_idle_cores": [round(i, 3) for i in idle],
                "rate_events_per_s": rate, "bodies_per_phase": count,
                "runs": rows, "ratios": ratio_rows,
                "cores_per_10k_events_per_s": capacity(rows),
                "targets": targets(rows, ratio_rows)}

    def _round(self, n: int, sides: list[Side], workload: SizedWorkload, count: int,
               rate: int | None) -> tuple[list[dict[str, Any]], int]:
        """Round n: the same bodies to each side (the order alternating between rounds), then the same open-loop
        bodies at the common rate (fixed by round 1: half the lower saturation, unless given)."""
        order = sides if n % 2 else list(reversed(sides))
        print(f"round {n}: {count} bodies to each side, {' then '.join(s.name for s in order)} ...", flush=True)
        bodies = workload.bodies(count)
        figures: dict[str, dict[str, Any]] = {}
        for side in order:
            mine = self._for(side, bodies)
            figures[side.name] = sustained_phase(side, self.broker.pid(), mine, self.opts.concurrency)
            self._track(side.name, mine, figures[side.name]["errors"])
            print(f"  {side.name}: {figures[side.name]['events_per_s']:,} events/s", flush=True)
        if rate is None:
            rate = int(min(figures[s.name]["events_per_s"] for s in sides if s.name in ("gateway", "peer")) / 2)
        slow = workload.bodies(max(50, int(rate * self.opts.seconds / EVENTS_PER_BATCH)))
        for side in order:
            mine = self._for(side, slow)
            figures[side.name].update(latency_phase(side, mine, rate))
            self._track(side.name, mine, figures[side.name]["rate_errors"])
        for side in order:  # each gateway path at half its own saturation of this round
            if side.name == "peer":
                continue
            own = figures[side.name]["events_per_s"] / 2
            mine = self._for(side, workload.bodies(max(50, int(own * self.opts.seconds / EVENTS_PER_BATCH))))
            half = latency_phase(side, mine, own)
            figures[side.name].update({f"half_own_{k}": v for k, v in half.items()})
            self._track(side.name, mine, half["rate_errors"])
        return [{"round": n, "side": side.name, "order": i + 1, **figures[side.name]}
                for i, side in enumerate(order)], rate

    def _durability(self) -> dict[str, Any]:
        print("reading both topics back ...", flush=True)
        out: dict[str, Any] = {}
        for side, topic, committed, is_json in (("gateway", EVENTS_TOPIC, True, False),
                                                 ("peer", PEER_TOPIC, False, True)):
            ids = readback.read_ids(self.cfg.bootstrap, topic, committed=committed, json_values=is_json)
            result = readback.check(ids, self.sent[side], self.acked[side])
            out[side] = {**result.__dict__, "ok": result.ok, "isolation": "read_committed" if committed else
                         "read_uncommitted"}
        return out
