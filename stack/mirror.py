"""MirrorMaker 2 between the two regions of the `regions` profile: its mm2.properties, its JVM (Kafka's own
`org.apache.kafka.connect.mirror.MirrorMaker`, dedicated mode, from .headwater/jars/mirror), readiness and stop."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from stack.config import REPO_ROOT
from stack.kafka import LOG4J_CONFIG, render_properties
from stack.kafka_acls import MIRROR
from stack.process import ManagedProcess, StartWatch
from stack.secrets import StackSecrets

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
# Mirrored both ways: what the gateways write (events, dead letters) and what the pipelines' rules write.
MIRRORED_TOPICS = r"headwater\.events|headwater\.deadletter|headwater\.rule\..*"
# The primary registry's log, one way only: the follower registry of the other region reads `<primary>._schemas`.
SCHEMAS_TOPIC = "_schemas"


class MirrorError(RuntimeError):
    """MirrorMaker 2 could not be set up or did not start; the message names its log."""


@dataclass(frozen=True)
class MirrorCredentials:
    """MirrorMaker 2's principal (`mirror`) in one secure region: SASL/SCRAM-SHA-512 over TLS, its password in that
    region's secrets (made by the region's provisioning), the region's CA to verify its broker."""

    ca: Path
    secrets_dir: Path

    def password(self) -> str:
        return StackSecrets(self.secrets_dir).kafka_password_file(MIRROR).read_text().strip()

    def librdkafka(self) -> dict[str, Any]:
        """The same principal for a Python client (the readiness check)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": MIRROR,
                "sasl.password": self.password(), "ssl.ca.location": str(self.ca)}

    def properties(self, alias: str) -> dict[str, str]:
        """mm2.properties' `<alias>.*` client settings (every producer, consumer and admin client of that cluster,
        and the Connect worker whose target it is)."""
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{MIRROR}" '
                f'password="{self.password()}";')
        return {f"{alias}.security.protocol": "SASL_SSL", f"{alias}.sasl.mechanism": "SCRAM-SHA-512",
                f"{alias}.sasl.jaas.config": jaas, f"{alias}.ssl.truststore.type": "PEM",
                f"{alias}.ssl.truststore.location": str(self.ca)}


@dataclass(frozen=True)
class MirrorSettings:
    """What MirrorMaker 2 connects and how often it looks again (docs/regions.md, "MirrorMaker 2")."""

    clusters: Mapping[str, str]  # region alias -> bootstrap servers, in order (the first is the schema primary)
    state_dir: Path  # mm2.properties, its log, its pid file
    heap_mb: int = 256
    tasks: int = 2
    refresh_s: int = 5  # new topics, new groups, checkpoints and group offsets: every `refresh_s` seconds
    exactly_once: bool = True  # KIP-710: transactional writes of records and source offsets on each target
    # alias -> MM2's principal there (secure regions: SASL_SSL); empty: PLAINTEXT to every region
    credentials: Mapping[str, MirrorCredentials] = field(default_factory=dict)

    @property
    def primary(self) -> str:
        return next(iter(self.clusters))

    @property
    def props_file(self) -> Path:
        return self.state_dir / "conf" / "mm2.properties"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs" / "mirror"


def remote_topic(source: str, topic: str) -> str:
    """MM2's default replication policy: `headwater.events` of region `a` is `a.headwater.events` in the other."""
    return f"{source}.{topic}"


def mirror_properties(s: MirrorSettings) -> dict[str, str]:
    """mm2.properties: every region mirrors MIRRORED_TOPICS into every other, the primary also its `_schemas`."""
    if len(s.clusters) < 2:
        raise MirrorError(f"MirrorMaker 2 needs two regions or more, got {', '.join(s.clusters) or 'none'}")
    if s.credentials and set(s.credentials) != set(s.clusters):
        raise MirrorError(f"MirrorMaker 2 has credentials for {', '.join(sorted(s.credentials))} only, not for "
                          f"every region of {', '.join(s.clusters)}: all regions secure, or none")
    rf = "1"  # one broker per region in this profile
    interval = str(s.refresh_s)
    props = {"clusters": ", ".join(s.clusters)}
    for alias, bootstrap in s.clusters.items():
        props[f"{alias}.bootstrap.servers"] = bootstrap
        # The gateways write in transactions and abort some: only committed records are copied.
        props[f"{alias}.consumer.isolation.level"] = "read_committed"
        if s.exactly_once:
            props[f"{alias}.exactly.once.source.support"] = "enabled"
        if alias in s.credentials:
            props |= s.credentials[alias].properties(alias)
    for source in s.clusters:
        for target in s.clusters:
            if source == target:
                continue
            topics = MIRRORED_TOPICS + (f"|{SCHEMAS_TOPIC}" if source == s.primary else "")
            props |= {f"{source}->{target}.enabled": "true", f"{source}->{target}.topics": topics}
    props |= {
        "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "tasks.max": str(s.tasks),
        # Offset translation: checkpoints of the consumer groups, and their offsets written to the other region.
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": interval,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": interval,
        "emit.heartbeats.enabled": "true",
        "emit.heartbeats.interval.seconds": interval,
        "refresh.topics.interval.seconds": interval,
        "refresh.groups.interval.seconds": interval,
        "sync.topic.configs.enabled": "true",
        "sync.topic.configs.interval.seconds": "60",
        # Each region's ACLs are its own (secure regions: stack/kafka_acls.py grants the mirrored names), never
        # copied from the other region.
        "sync.topic.acls.enabled": "false",
        # Every topic MM2 creates on one broker.
        "replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "config.storage.replication.factor": rf,
        # A record's offset is synced at most every 10 records behind (default 100): finer offset translation.
        "offset.lag.max": "10",
    }
    return props


class MirrorMaker:
    """The one MirrorMaker 2 process of a `regions` profile: started, waited for, stopped, killed."""

    def __init__(self, settings: MirrorSettings) -> None:
        self.s = settings
        self.process = ManagedProcess("mirror", settings.state_dir / "run" / "mirror.pid", str(settings.props_file))

    @property
    def jars(self) -> Path:
        return REPO_ROOT / ".headwater" / "jars" / "mirror"

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise MirrorError("java not found on PATH: run `make setup` (it installs OpenJDK 17)")
        if not any(self.jars.glob("connect-mirror-*.jar")):
            raise MirrorError(f"no MirrorMaker 2 jars in {self.jars}: run `make setup` (stack/maven/mirror/pom.xml)")
        heap = self.s.heap_mb
        return [java, f"-Xms{min(128, heap)}m", f"-Xmx{heap}m", "-XX:+UseG1GC", "-XX:ParallelGCThreads=1",
                "-XX:CICompilerCount=2", "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
                f"-Dkafka.logs.dir={self.s.log_dir}", "-cp", f"{self.jars}/*", MAIN_CLASS, str(self.s.props_file)]

    def write_config(self) -> None:
        """mm2.properties, mode 0600 from its creation (a secure profile's holds MM2's passwords), atomically."""
        path = self.s.props_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(render_properties(mirror_properties(self.s)))
        os.replace(tmp, path)

    def start(self, quiet_s: float = 90.0) -> bool:
        """Start unless running, then wait until every remote topic exists. True if started now."""
        started = False
        if self.process.pid() is None:
            self.write_config()
            self.process.start(self.command(), self.s.log_dir / "stdout.log")
            started = True
        try:
            self.wait_ready(quiet_s)
        except MirrorError:
            if started:
                self.process.stop(10)
            raise
        return started

    def expected_topics(self) -> dict[str, list[str]]:
        """Per target region, the remote topics MM2 creates once it replicates (the events' and, in the
        followers, the primary's `_schemas`)."""
        out: dict[str, list[str]] = {}
        for target in self.s.clusters:
            sources = [a for a in self.s.clusters if a != target]
            out[target] = [remote_topic(a, "headwater.events") for a in sources]
            if target != self.s.primary:
                out[target].append(remote_topic(self.s.primary, SCHEMAS_TOPIC))
        return out

    def wait_ready(self, quiet_s: float) -> None:
        """Until every expected remote topic exists, as long as MM2's log grows (`quiet_s` of silence fails)."""
        watch = StartWatch(quiet_s, [self.s.log_dir])
        admins = {a: AdminClient({"bootstrap.servers": b, "socket.connection.setup.timeout.ms": 1000,
                                  **(self.s.credentials[a].librdkafka() if a in self.s.credentials else {})})
                  for a, b in self.s.clusters.items()}
        missing: list[str] = []
        while not watch.expired():
            if self.process.pid() is None:
                raise MirrorError(f"MirrorMaker 2 exited during start-up; see {self.s.log_dir}")
            missing = []
            for target, topics in self.expected_topics().items():
                missing += [f"{t} in {target}" for t in _absent(admins[target], topics)]
            if not missing:
                return
            time.sleep(0.5)
        raise MirrorError(f"MirrorMaker 2 created no {', '.join(missing)}, and logged nothing for {quiet_s:.0f}s; "
                          f"see {self.s.log_dir}")

    def stop(self, timeout_s: float = 30.0) -> bool:
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        """kill -9 (fault injection)."""
        self.process.kill()

    def running(self) -> bool:
        return self.process.pid() is not None


def _absent(admin: AdminClient, topics: Sequence[str]) -> list[str]:
    try:
        existing = set(admin.list_topics(timeout=2).topics)
    except KafkaException:
        return list(topics)
    return [t for t in topics if t not in existing]
