"""The `regions` profile (docs/regions.md): two full stacks on loopback, each in its own state directory and ports,
MirrorMaker 2 between them; region `a`'s registry is the primary, `b`'s a follower reading `a._schemas`. Secure
(HEADWATER_SECURE=1): each region provisioned as a secure stack, one development CA for both, MM2 over SASL_SSL."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from common.env import env_int
from common.envfile import state_dir, write_env
from common.registry_client import RegistryClient, RegistryClientError
from stack.certs import CertificateAuthority
from stack.config import ConfigError, StackConfig, Topology
from stack.kafka import admin_settings
from stack.kafka_acls import ADMIN, MIRROR, PRINCIPALS, Grant, mirror_grants, mirrored_grants
from stack.launcher import Stack, UpReport
from stack.mirror import SCHEMAS_TOPIC, MirrorCredentials, MirrorMaker, MirrorSettings, remote_topic
from stack.process import StartWatch
from stack.secrets import kept_secret
from stack.security import provision
from stack.services import HttpService, ServiceError, subscribe_service
from stack.topics import EVENTS_TOPIC, TopicSpec, ensure_topics

NAMES = ("a", "b")  # in failover order: `a` is the primary region (its registry is the writable one)
# Each region: one broker, one registry, two gateways and one subscription server behind HAProxy; no console and
# no Spark cluster (two of everything share a 2-core host).
REGION = Topology(brokers=1, registries=1, gateways=2, haproxy=True, console=False, spark=False, secure=False,
                  subscribe=1)
PORT_STRIDE = 200  # region i's ports: HEADWATER_REGIONS_PORT_BASE + i * 200 + (1..199)


def regions_root(root: Path) -> Path:
    return root / "regions"


def ca_dir(root: Path) -> Path:
    """The development CA both secure regions share (each region's tls folder holds a copy of it)."""
    return regions_root(root) / "secrets" / "tls"


def marker_file(root: Path) -> Path:
    """Written by `up`, removed by `down`: the `regions` profile runs in this state directory."""
    return regions_root(root) / "topology"


def recorded(root: Path) -> bool:
    return marker_file(root).exists()


@dataclass(frozen=True)
class RegionsConfig:
    """Both regions' stack configurations (in NAMES order) and MirrorMaker 2's settings.

    Environment (docs/regions.md): HEADWATER_STATE_DIR (the regions live in <state>/regions/a and /b),
    HEADWATER_REGIONS_PORT_BASE (20000: region a on 20001-20199, b on 20201-20399), HEADWATER_REGIONS_KAFKA_HEAP_MB
    (384), HEADWATER_MIRROR_HEAP_MB (256), HEADWATER_MIRROR_REFRESH_S (5), HEADWATER_MIRROR_EXACTLY_ONCE (1),
    HEADWATER_REGIONS_PIPELINE (1: `up` starts each region's pipeline, /metrics on port base+8 of the region;
    0: each is started by hand), HEADWATER_SECURE (0; 1: both regions secure, docs/regions.md "Secure regions").
    """

    root: Path
    regions: tuple[StackConfig, ...]
    pipeline_ports: tuple[int, ...]  # each region's pipeline's /metrics
    pipeline: bool = False
    mirror_heap_mb: int = 256
    mirror_refresh_s: int = 5
    exactly_once: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RegionsConfig:
        env = os.environ if env is None else env
        root = state_dir(env)
        base = _int(env, "HEADWATER_REGIONS_PORT_BASE", 20000, 1024, 65535 - PORT_STRIDE * len(NAMES))
        heap = _int(env, "HEADWATER_REGIONS_KAFKA_HEAP_MB", 384, 256, 65536)
        topology = replace(REGION, secure=_int(env, "HEADWATER_SECURE", 0, 0, 1) == 1)
        configs = []
        for i, name in enumerate(NAMES):
            b = base + i * PORT_STRIDE
            region_env = {**env, "HEADWATER_STATE_DIR": str(regions_root(root) / name),
                          "HEADWATER_KAFKA_PORT": str(b + 1), "HEADWATER_KAFKA_CONTROLLER_PORT": str(b + 2),
                          "HEADWATER_KAFKA_INTERNAL_PORT": str(b + 3), "HEADWATER_REGISTRY_PORT": str(b + 4),
                          "HEADWATER_GATEWAY_PORT": str(b + 5), "HEADWATER_SUBSCRIBE_PORT": str(b + 6),
                          "HEADWATER_CONSOLE_PORT": str(b + 7), "HEADWATER_CLUSTER_PORT_BASE": str(b + 100),
                          "HEADWATER_KAFKA_HEAP_MB": str(heap)}
            configs.append(StackConfig.from_env(region_env, topology=topology))
        return cls(root=root, regions=tuple(configs),
                   pipeline_ports=tuple(base + i * PORT_STRIDE + 8 for i in range(len(NAMES))),
                   pipeline=_int(env, "HEADWATER_REGIONS_PIPELINE", 1, 0, 1) == 1,
                   mirror_heap_mb=_int(env, "HEADWATER_MIRROR_HEAP_MB", 256, 128, 8192),
                   mirror_refresh_s=_int(env, "HEADWATER_MIRROR_REFRESH_S", 5, 1, 600),
                   exactly_once=_int(env, "HEADWATER_MIRROR_EXACTLY_ONCE", 1, 0, 1) == 1)

    @classmethod
    def on_free_ports(cls, root: Path, free_port: Callable[[], int], *, events_partitions: int = 2,
                      heap_mb: int = 256, secure: bool = False) -> RegionsConfig:
        """Both regions on free ports under `root` (the tests')."""
        root = root.resolve()
        topology = replace(REGION, secure=secure)
        configs = tuple(
            replace(StackConfig.on_free_ports(regions_root(root) / name, free_port, topology,
                                              events_partitions=events_partitions, heap_mb=heap_mb),
                    gateway_workers=1)
            for name in NAMES)
        return cls(root=root, regions=configs, pipeline_ports=tuple(free_port() for _ in NAMES))

    def region(self, name: str) -> StackConfig:
        return self.regions[NAMES.index(name)]

    @property
    def primary(self) -> str:
        return NAMES[0]

    @property
    def secure(self) -> bool:
        return self.regions[0].topology.secure

    @property
    def env_file(self) -> Path:
        return self.root / "stack.env"

    def mirror_settings(self) -> MirrorSettings:
        credentials = {n: MirrorCredentials(c.tls_dir / "ca.pem", c.secrets_dir)
                       for n, c in zip(NAMES, self.regions, strict=True)} if self.secure else {}
        return MirrorSettings(clusters={n: c.bootstrap for n, c in zip(NAMES, self.regions, strict=True)},
                              state_dir=regions_root(self.root), heap_mb=self.mirror_heap_mb,
                              refresh_s=self.mirror_refresh_s, exactly_once=self.exactly_once,
                              credentials=credentials)

    def region_grants(self, name: str) -> dict[str, tuple[Grant, ...]]:
        """What a secure region grants beyond a secure stack's table: its components' reads of the mirrored copies
        (the follower's registry: the primary's `_schemas`) and MirrorMaker 2's principal `mirror`."""
        others = tuple(n for n in NAMES if n != name)
        extra = mirrored_grants(others, None if name == self.primary else self.primary)
        return extra | {MIRROR: mirror_grants(name, others, self.primary)}


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, name, default, lo, hi, error=ConfigError)


class RegionStack(Stack):
    """One region's stack: its endpoints name the region and the mirrored topics it reads; a follower region leaves
    out `_schemas`, starts its registry on the primary's mirrored log and waits for the primary's schema ids
    instead of registering the catalog."""

    def __init__(self, cfg: StackConfig, name: str, primary: RegionStack | None, others: tuple[str, ...], *,
                 pipeline_port: int, gateway_env: Mapping[str, str] | None = None) -> None:
        super().__init__(cfg, gateway_env)
        self.name = name
        self.pipeline_port = pipeline_port
        self.primary = primary  # None: this region's registry is the primary
        self.others = others

    def endpoints(self) -> dict[str, str]:
        env = super().endpoints()
        env |= {"HEADWATER_TOPOLOGY": "regions", "HEADWATER_REGION": self.name,
                "HEADWATER_PIPELINE_DIR": str(self.cfg.state_dir / "pipeline"),
                "HEADWATER_PIPELINE_METRICS_PORT": str(self.pipeline_port),
                "MIRRORED_EVENTS_TOPICS": ",".join(remote_topic(o, EVENTS_TOPIC) for o in self.others),
                # Longer than a partition between the regions that the profile is meant to heal from (the chaos
                # suite's 60 s): the other region's events, mirrored late, still count in this region's streaming
                # aggregates (docs/spark-pipeline.md, "Several regions"). A region's own HEADWATER_LATENESS wins.
                "HEADWATER_LATENESS": os.environ.get("HEADWATER_LATENESS", "2 minutes")}
        if self.primary is not None:
            env |= {"SCHEMAS_TOPIC": remote_topic(self.primary.name, SCHEMAS_TOPIC),
                    "REGISTRY_PRIMARY_URL": self.primary.cfg.registry_url}
            if self.cfg.topology.secure:  # registrations forwarded over HTTPS, the primary's certificate verified
                env["REGISTRY_PRIMARY_CA"] = str(self.primary.cfg.tls_dir / "ca.pem")
        return env

    def registry_reader(self, timeout_s: float) -> RegistryClient:
        """This region's registry for reads (open to anyone; over HTTPS verified with the stack's CA when secure)."""
        ca = str(self.cfg.tls_dir / "ca.pem") if self.cfg.topology.secure else ""
        return RegistryClient(self.cfg.registry_url, timeout_s, ca_file=ca)

    def topics(self) -> list[TopicSpec]:
        specs = super().topics()
        return specs if self.primary is None else [s for s in specs if s.name != SCHEMAS_TOPIC]

    def pipeline(self) -> HttpService:
        """This region's Spark pipeline (local mode) on its stack.env, ready once it serves /metrics."""
        return HttpService(name="pipeline", module="spark_pipeline", port=self.pipeline_port, ready_path="/metrics",
                           args=("--env-file", str(self.cfg.env_file), "run"))

    def register_schemas(self) -> None:
        if self.primary is None:
            super().register_schemas()
            return
        self.wait_schema_ids(self.primary.schema_ids())

    def schema_ids(self) -> set[int]:
        """Every schema id this region's registry serves (each subject's every version)."""
        client = self.registry_reader(30.0)
        try:
            return {int(client.version(s, v)["id"]) for s in client.subjects() for v in client.versions(s)}
        except RegistryClientError as exc:
            raise ServiceError(f"region {self.name}: reading schema ids at {self.cfg.registry_url}: {exc}") from exc

    def wait_schema_ids(self, ids: set[int]) -> None:
        """Until this (follower) registry serves every id in `ids`, read from the mirrored log, as long as
        MirrorMaker 2's or the registry's log grows."""
        client = self.registry_reader(5.0)
        watch = StartWatch(self.cfg.start_timeout_s, [self.cfg.logs_dir, self.cfg.state_dir.parent / "logs"])
        missing = sorted(ids)
        while not watch.expired():
            with contextlib.suppress(RegistryClientError, OSError):  # answered at the next look
                missing = [i for i in missing if not client.exists(i)]
            if not missing:
                return
            time.sleep(0.5)
        raise ServiceError(f"region {self.name}: its registry ({self.cfg.registry_url}) does not serve schema ids "
                           f"{missing[:10]} of the primary's {len(ids)} after {self.cfg.start_timeout_s}s without "
                           f"progress; is MirrorMaker 2 running (see {self.cfg.state_dir.parent / 'logs'})?")


@dataclass
class RegionsReport:
    env: dict[str, str]
    started: list[str]
    seconds: float


class Regions:
    """Both regions and MirrorMaker 2: up, down, status, and each region's own start and stop."""

    def __init__(self, cfg: RegionsConfig, gateway_env: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        stacks: list[RegionStack] = []
        for name, region, port in zip(NAMES, cfg.regions, cfg.pipeline_ports, strict=True):
            others = tuple(n for n in NAMES if n != name)
            stacks.append(RegionStack(region, name, stacks[0] if stacks else None, others, pipeline_port=port,
                                      gateway_env=gateway_env))
        self.stacks = tuple(stacks)
        self.mirror = MirrorMaker(cfg.mirror_settings())

    def stack(self, name: str) -> RegionStack:
        return self.stacks[NAMES.index(name)]

    def up(self) -> RegionsReport:
        """Both brokers and their topics, then the primary region while MirrorMaker 2 starts, then the followers
        (their registries need the mirrored `_schemas`)."""
        t0 = time.monotonic()
        marker_file(self.cfg.root).parent.mkdir(parents=True, exist_ok=True)
        marker_file(self.cfg.root).write_text(",".join(NAMES) + "\n")
        self._share_keys()
        if self.cfg.secure:
            self._share_ca()
            self._share_registry_credentials()
        with concurrent.futures.ThreadPoolExecutor(len(self.stacks)) as pool:
            list(pool.map(lambda s: s.kafka.start(), self.stacks))
        if self.cfg.secure:  # before MirrorMaker 2 connects as `mirror` and the followers read mirrored names
            for s in self.stacks:
                provision(s.cfg.bootstrap, s.secrets, s.cfg.tls_dir / "ca.pem", extra=self.cfg.region_grants(s.name))
        for s in self.stacks:  # before MirrorMaker 2 looks for them
            ensure_topics(s.cfg.bootstrap, s.topics(), timeout_s=60, client=admin_settings(s.cfg))
        started: list[str] = []
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            primary = pool.submit(self.start_region, NAMES[0])
            mirror = pool.submit(self.mirror.start, float(self.cfg.regions[0].start_timeout_s))
            reports = {NAMES[0]: primary.result()}
            if mirror.result():
                started.append("mirror")
        for name in NAMES[1:]:
            reports[name] = self.start_region(name)
        for name, report in reports.items():
            started += [f"{name}/{s}" for s in report.started]
        if self.cfg.pipeline:  # one after the other: each Spark start takes the host's CPU for a while
            started += [f"{s.name}/pipeline" for s in self.stacks if s.pipeline().start(s.cfg, reports[s.name].env)]
        env = self.endpoints(reports)
        write_env(self.cfg.env_file, env)
        return RegionsReport(env, started, time.monotonic() - t0)

    def start_region(self, name: str) -> UpReport:
        """Every process of region `name` (its follower registry waits for the primary's ids through the mirror)."""
        return self.stack(name).up()

    def stop_region(self, name: str) -> list[str]:
        """Stop every process of region `name`, its pipeline first (SIGTERM, then SIGKILL after each one's
        timeout)."""
        region = self.stack(name)
        stopped = ["pipeline"] if region.pipeline().process(region.cfg).stop(60) else []
        return stopped + region.down()

    def kill_region(self, name: str) -> None:
        """kill -9 every process of region `name` at once (a region lost whole: fault injection); its data stays,
        and `start_region` brings it back."""
        region = self.stack(name)
        t = region.cfg.topology
        processes = [region.pipeline().process(region.cfg),
                     *(region.gateway_process(i) for i in range(1, t.gateways + 1)),
                     *(subscribe_service(region.cfg, i).process(region.cfg) for i in range(1, t.subscribe + 1)),
                     region.haproxy.process, *(region.registry_process(i) for i in range(1, t.registries + 1))]
        for process in processes:
            process.kill()
        region.kafka.kill()

    def endpoints(self, reports: Mapping[str, UpReport]) -> dict[str, str]:
        """The root stack.env: the primary region's endpoints under the usual names (the tools' default), and
        every region's under <NAME>_<REGION> names, HEADWATER_ENDPOINTS listing the gateways in failover order."""
        primary = reports[NAMES[0]].env
        env = {**primary, "HEADWATER_TOPOLOGY": "regions", "HEADWATER_REGIONS": ",".join(NAMES),
               "HEADWATER_ENDPOINTS": ",".join(reports[n].env["GATEWAY_URL"] for n in NAMES)}
        for name in NAMES:
            region = reports[name].env
            suffix = name.upper()
            for key in ("GATEWAY_URL", "REGISTRY_URL", "KAFKA_BOOTSTRAP", "SUBSCRIBE_URL", "MIRRORED_EVENTS_TOPICS",
                        "SCHEMAS_TOPIC"):
                if key in region:
                    env[f"{key}_{suffix}"] = region[key]
            env[f"STACK_ENV_{suffix}"] = str(self.cfg.region(name).env_file)
        return env

    def _share_keys(self) -> None:
        """One development write key and one read key for both regions (an SDK fails over with the same key):
        the state directory's own, copied into each region's."""
        write = kept_secret(self.cfg.root / "gateway" / "dev-write-key", "hw_" + secrets.token_urlsafe(32))
        read = kept_secret(self.cfg.root / "subscribe" / "dev-read-key", "hwr_" + secrets.token_urlsafe(32))
        for region in self.cfg.regions:
            for path, key in ((region.state_dir / "gateway" / "dev-write-key", write),
                              (region.state_dir / "subscribe" / "dev-read-key", read)):
                if kept_secret(path, key) != key:
                    raise ConfigError(f"{path} holds another key than {self.cfg.root}'s: delete it (`make clean`)")

    def _share_registry_credentials(self) -> None:
        """The same registry user and password for each principal in both regions (Kafka's SCRAM users stay each
        region's own): a follower registry checks a write's credentials, then forwards them unchanged to the primary,
        which checks them again, so a registration through `b` needs a user both registries know."""
        shared_dir = regions_root(self.cfg.root) / "secrets" / "registry"
        for principal in (ADMIN, *PRINCIPALS):
            name = f"{principal}.credentials"
            shared = kept_secret(shared_dir / name, f"{principal}:{secrets.token_urlsafe(32)}")
            for region in self.cfg.regions:
                path = region.secrets_dir / "registry" / name
                if kept_secret(path, shared) != shared:
                    raise ConfigError(f"{path} holds another registry password than {shared_dir}'s: delete the "
                                      "regions' state (`make clean TOPOLOGY=regions`)")

    def _share_ca(self) -> None:
        """One development CA for both regions (made once under <state>/regions/secrets/tls, renewed like any
        stack's): copied into each region's tls folder, whose leaves of another CA are removed (they are reissued
        by the new one at the region's start), so that a client trusting one CA bundle reaches both regions."""
        shared = CertificateAuthority(ca_dir(self.cfg.root))
        for region in self.cfg.regions:
            folder = region.tls_dir
            if (folder / "ca.pem").exists() and (folder / "ca.pem").read_bytes() == shared.pem.read_bytes():
                continue
            if folder.exists():
                for stale in folder.iterdir():
                    if stale.is_file():
                        stale.unlink()
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o700)
            folder.parent.chmod(0o700)
            for name in ("ca.key", "ca.pem"):
                shutil.copyfile(ca_dir(self.cfg.root) / name, folder / name)
            (folder / "ca.key").chmod(0o600)

    def down(self) -> list[str]:
        """MirrorMaker 2 first (nothing half-copied is left in flight to a region going away), then the followers,
        then the primary."""
        stopped = ["mirror"] if self.mirror.stop() else []
        for name in reversed(NAMES):
            stopped += [f"{name}/{s}" for s in self.stop_region(name)]
        marker_file(self.cfg.root).unlink(missing_ok=True)
        self.cfg.env_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, bool]:
        """`mirror`, then `<region>/<process>` for every process of each region: running or not."""
        status = {"mirror": self.mirror.running()}
        for name in NAMES:
            region = self.stack(name)
            status |= {f"{name}/{k}": v for k, v in region.status().items()}
            running = region.pipeline().process(region.cfg).pid() is not None
            if self.cfg.pipeline or running:
                status[f"{name}/pipeline"] = running
        return status
