"""The pipeline's one frozen configuration, read once from the environment and validated."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from common.basic_auth import AuthConfigError
from common.envfile import pipeline_dir
from common.kafka_security import KafkaSecurity, KafkaSecurityError
from common.registry_access import RegistryAccess

# A Hadoop file system URI: hdfs://namenode:8020/x, s3a://bucket/x, file:/x, file:///x.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")
_DURATION = re.compile(r"(\d+) (second|minute|hour)s?")
_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000}
# Kafka's own rule for a topic name (org.apache.kafka.common.internals.Topic): these characters, 1 to 249 of them,
# neither "." nor "..".
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


class ConfigError(ValueError):
    """A variable of the environment is missing or malformed; the message names it."""


@dataclass(frozen=True)
class PipelineConfig:
    """Every setting of the pipeline. docs/spark-pipeline.md ("Settings") documents each variable once.

    `lateness` is the watermark delay: how far behind the newest event time an event may arrive and still
    be deduplicated and counted by the streaming queries (later ones are counted only by `replay`); it is
    also the dedup horizon (a retried duplicate is recognised while its first copy is within it).
    `loss_grace` is how long a seq gap stays open before the streaming loss audit reports it (processing
    time; None: the lateness).
    """

    bootstrap: str = "127.0.0.1:9092"
    registry_url: str = "http://127.0.0.1:8081"
    events_topic: str = "headwater.events"
    # Other regions' events topics as mirrored into this region's Kafka (MirrorMaker 2: `<region>.headwater.events`),
    # read with the events topic as one stream (docs/spark-pipeline.md, "Several regions").
    mirrored_topics: tuple[str, ...] = ()
    aggregates_topic: str = "headwater.aggregates"
    subject_prefix: str = "headwater.events."
    aggregate_subject: str = "headwater.aggregates.window_aggregate"
    output_dir: str = os.path.join(".headwater", "pipeline")  # from_env: HEADWATER_PIPELINE_DIR, else the state dir's
    nodes_file: str | None = None  # None: the inventory shipped in the package (`packaged.py`)
    lateness: str = "30 seconds"
    max_offsets_per_trigger: int = 200_000
    live_trigger: str = "0 seconds"
    file_trigger: str = "30 seconds"
    registry_poll_s: float = 30.0
    console: bool = False
    starting_offsets: str = "earliest"
    loss_grace: str | None = None
    enriched_topic: str = "_headwater_enriched"
    enriched_partitions: int = 1
    realtime_batch: str = "5 minutes"
    # The rules' packed real-time queries checkpoint more often: a pack restarts whenever a rule joins or leaves it
    # and then runs its batch in progress again (every member re-sends it), so its batch bounds that replay.
    rules_realtime_batch: str = "10 seconds"
    realtime_fetch_wait_ms: int = 100
    metrics_port: int = 9464  # 0: no /metrics endpoint
    # How the built-in live aggregates run: "microbatch" (over the events topic) or "realtime" (Spark's real-time
    # mode over the shared enriched stream, which then runs even with rules off).
    live_mode: str = "microbatch"
    # True: the real-time tier and the shared enriched stream (docs/rules-runtime.md); False (the default until its
    # figures are taken on a quiet host): every rule in the micro-batch tier over its own read of the events topic.
    rules_realtime: bool = False
    # How long `rules apply` waits for the running pipeline's analysis before it analyses in its own JVM (seconds).
    rules_check_wait_s: float = 30.0
    # Credentials (common/kafka_security.py, common/registry_access.py): the pipeline's own, or with the
    # component RULES, the rule administrator's (`rules` commands), each from HEADWATER_<COMPONENT>_... first.
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)

    @property
    def source_topics(self) -> tuple[str, ...]:
        """Every topic the pipeline reads events from: the events topic, then the mirrored ones."""
        return (self.events_topic, *self.mirrored_topics)

    def spark_kafka(self) -> dict[str, str]:
        """The Kafka connector's options that say where Kafka is and how to authenticate to it."""
        return {"kafka.bootstrap.servers": self.bootstrap, **self.kafka_security.spark_options()}

    @property
    def checkpoint_dir(self) -> str:
        return join(self.output_dir, "checkpoints")

    @property
    def loss_grace_ms(self) -> int:
        return duration_ms(self.loss_grace or self.lateness)

    def with_overrides(self, **changes: object) -> PipelineConfig:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, component: str = "PIPELINE") -> PipelineConfig:
        """Read HEADWATER_* / KAFKA_BOOTSTRAP / REGISTRY_URL (the names stack.env uses); defaults otherwise."""
        env = os.environ if env is None else env
        try:
            security = KafkaSecurity.from_env(env, component)
            access = RegistryAccess.from_env(env, component)
        except (KafkaSecurityError, AuthConfigError) as exc:
            raise ConfigError(str(exc)) from None
        d = cls()

        def get(name: str, default: str) -> str:
            value = env.get(name, "").strip()
            return value or default

        lateness = _duration(env, "HEADWATER_LATENESS", d.lateness)
        events_topic = get("EVENTS_TOPIC", d.events_topic)
        for name in ("HEADWATER_RULES", "HEADWATER_RULES_CHECKS", "HEADWATER_CLASS_ARCHIVE"):
            switch(env, name, True)  # read where they act (rules/runtime.py, class_archive.py); a typo fails here
        cfg = cls(
            bootstrap=get("KAFKA_BOOTSTRAP", d.bootstrap),
            registry_url=get("REGISTRY_URL", d.registry_url).rstrip("/"),
            events_topic=events_topic,
            mirrored_topics=mirrored_topics(env.get("MIRRORED_EVENTS_TOPICS", ""), events_topic),
            aggregates_topic=get("AGGREGATES_TOPIC", d.aggregates_topic),
            subject_prefix=get("HEADWATER_SUBJECT_PREFIX", d.subject_prefix),
            aggregate_subject=get("HEADWATER_AGGREGATE_SUBJECT", d.aggregate_subject),
            output_dir=storage_root(pipeline_dir(env)),
            nodes_file=_inventory(env.get("HEADWATER_NODE_INVENTORY", "")),
            lateness=lateness,
            max_offsets_per_trigger=_int(env, "HEADWATER_MAX_OFFSETS_PER_TRIGGER", d.max_offsets_per_trigger),
            live_trigger=_duration(env, "HEADWATER_LIVE_TRIGGER", d.live_trigger),
            file_trigger=_duration(env, "HEADWATER_FILE_TRIGGER", d.file_trigger),
            registry_poll_s=float(_int(env, "HEADWATER_REGISTRY_POLL_S", int(d.registry_poll_s))),
            console=switch(env, "HEADWATER_CONSOLE", False),
            starting_offsets=get("HEADWATER_STARTING_OFFSETS", d.starting_offsets),
            loss_grace=_duration(env, "HEADWATER_LOSS_GRACE", lateness),
            enriched_topic=get("HEADWATER_ENRICHED_TOPIC", d.enriched_topic),
            enriched_partitions=_int(env, "HEADWATER_ENRICHED_PARTITIONS", d.enriched_partitions),
            realtime_batch=_realtime_batch(env, "HEADWATER_REALTIME_BATCH", d.realtime_batch),
            rules_realtime_batch=_realtime_batch(env, "HEADWATER_RULES_REALTIME_BATCH", d.rules_realtime_batch),
            realtime_fetch_wait_ms=_int(env, "HEADWATER_REALTIME_FETCH_WAIT_MS", d.realtime_fetch_wait_ms),
            metrics_port=_port(env, "HEADWATER_PIPELINE_METRICS_PORT", d.metrics_port),
            live_mode=_choice(env, "HEADWATER_LIVE_MODE", d.live_mode, LIVE_MODES),
            rules_realtime=switch(env, "HEADWATER_RULES_REALTIME", False),
            rules_check_wait_s=number(env, "HEADWATER_RULES_CHECK_WAIT_S", d.rules_check_wait_s, 0.5, 600.0),
            kafka_security=security,
            registry_access=access,
        )
        return cfg


def mirrored_topics(value: str, events_topic: str) -> tuple[str, ...]:
    """MIRRORED_EVENTS_TOPICS: comma-separated Kafka topic names (blanks around them ignored), each a valid topic
    name, none twice and none the events topic itself (which would count every event of it twice over)."""
    name = "MIRRORED_EVENTS_TOPICS"
    if not value.strip():
        return ()
    topics = [t.strip() for t in value.split(",")]
    seen: set[str] = set()
    for topic in topics:
        if not topic:
            raise ConfigError(f"{name}={value!r}: an empty topic name (a stray comma?)")
        if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
            raise ConfigError(f"{name}: {topic!r} is not a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -)")
        if topic == events_topic:
            raise ConfigError(f"{name}: {topic!r} is the events topic (EVENTS_TOPIC) itself")
        if topic in seen:
            raise ConfigError(f"{name}: {topic!r} is listed twice")
        seen.add(topic)
    return tuple(topics)


def storage_root(value: str) -> str:
    """A folder of outputs or checkpoints as Spark takes it: a Hadoop file system URI (hdfs://, s3a://, file:)
    as given, a local path made absolute. Kept a string: pathlib would turn hdfs://nn/x into hdfs:/nn/x."""
    value = value.strip()
    return value if is_uri(value) else os.path.abspath(value)


def is_uri(value: str) -> bool:
    """Whether `value` names a Hadoop file system URI (read by the executors) rather than a local path."""
    return bool(_URI.match(value.strip()))


def _inventory(value: str) -> str | None:
    """HEADWATER_NODE_INVENTORY: empty for the packaged one; a Hadoop URI (hdfs://, s3a://, file:) as given,
    checked when Spark reads it; a local path made absolute and checked now."""
    value = value.strip()
    if not value:
        return None
    if is_uri(value):
        return value
    if not os.path.isfile(value):
        raise ConfigError(f"HEADWATER_NODE_INVENTORY: no such file {value}")
    return os.path.abspath(value)


def join(root: str, *parts: str) -> str:
    """`parts` under `root` (a `storage_root`)."""
    return "/".join([root.rstrip("/"), *parts])


def _duration(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip() or default
    if not _DURATION.fullmatch(value):
        raise ConfigError(f"{name}={value!r}: expected '<n> seconds|minutes|hours'")
    return value


def _realtime_batch(env: Mapping[str, str], name: str, default: str) -> str:
    """A real-time batch duration: Spark's real-time mode takes none under 5 seconds."""
    value = _duration(env, name, default)
    if duration_ms(value) < 5_000:
        raise ConfigError(f"{name}={value!r}: a real-time batch is at least 5 seconds")
    return value


def duration_ms(value: str) -> int:
    """Milliseconds of a duration in the settings' form, '<n> seconds|minutes|hours' (singular too)."""
    match = _DURATION.fullmatch(value.strip())
    if not match:
        raise ConfigError(f"{value!r}: expected '<n> seconds|minutes|hours'")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


LIVE_MODES = ("microbatch", "realtime")
_SWITCH = ("1", "0", "true", "false", "yes", "no", "on", "off")


def switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off setting: 1/true/yes/on or 0/false/no/off (any case), `default` when unset or empty;
    ConfigError for anything else (a typo never silently leaves a feature on or off)."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in _SWITCH:
        raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(_SWITCH)}")
    return raw in ("1", "true", "yes", "on")


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip().lower() or default
    if raw not in choices:
        raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return raw


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if raw == "0":
        return 0
    value = _int(env, name, default)
    if value > 65535:
        raise ConfigError(f"{name}={raw!r}: not a port")
    return value


def number(env: Mapping[str, str], name: str, default: float, low: float, high: float, *, what: str = "seconds"
           ) -> float:
    """A numeric setting from `low` to `high` (NaN and infinity refused), `default` when unset; ConfigError else."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # NaN fails here too
        raise ConfigError(f"{name}={raw!r}: {what} from {low:g} to {high:g}")
    return value


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected an integer") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r}: must be positive")
    return value
