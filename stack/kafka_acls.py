"""Headwater's Kafka principals and what each may do: one SCRAM user per component, and the ACLs that grant it
only its own topics, groups and transactional ids (docs/security.md prints the same table). Applied with Kafka's
Admin API (`alter_user_scram_credentials`, `create_acls`) by the stack's administrator, a super user.

Anything not granted is denied: the brokers run StandardAuthorizer with `allow.everyone.if.no.acl.found=false`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

SCRAM_ITERATIONS = 8192
ADMIN = "admin"  # the stack's own principal: creates topics, users and ACLs (a super user, like the brokers)


@dataclass(frozen=True)
class Names:
    """The topics and id prefixes the grants name (the stack's defaults)."""

    events_topic: str = "headwater.events"
    deadletter_topic: str = "headwater.deadletter"
    aggregates_topic: str = "headwater.aggregates"
    schemas_topic: str = "_schemas"
    rules_topic: str = "_headwater_rules"
    status_topic: str = "_headwater_rules_status"
    checks_topic: str = "_headwater_rules_checks"  # `rules apply` asks the running pipeline to analyse a rule
    checked_topic: str = "_headwater_rules_checked"  # the pipeline's answers and heartbeats
    rule_output_prefix: str = "headwater.rule."
    enriched_topic: str = "_headwater_enriched"  # the pipeline's decoded, deduplicated, enriched events


@dataclass(frozen=True)
class Grant:
    """Operations on one resource (`topic`, `group`, `transactional_id`), by exact name or by name prefix."""

    resource: str
    name: str
    operations: tuple[str, ...]
    prefixed: bool = False

    def describe(self) -> str:
        return f"{self.resource} {self.name}{'*' if self.prefixed else ''}: {', '.join(self.operations)}"


def _topic(name: str, *ops: str, prefixed: bool = False) -> Grant:
    return Grant("topic", name, ops, prefixed)


def _group(prefix: str) -> Grant:
    return Grant("group", prefix, ("read",), prefixed=True)


def _txn(prefix: str) -> Grant:
    return Grant("transactional_id", prefix, ("write", "describe"), prefixed=True)


def grants(n: Names = Names()) -> dict[str, tuple[Grant, ...]]:
    """Principal -> its grants. `describe` lets a client see a topic's metadata and offsets."""
    spark_groups = _group("spark-kafka-")  # Spark's Kafka source and sink pick group ids with this prefix
    reader = _group("headwater.read.")  # common/kafka_read's readers (librdkafka asks for a group's coordinator)
    return {
        "gateway": (  # writes events and dead letters, only inside its transactions
            _topic(n.events_topic, "write", "describe", prefixed=True),  # the events topic and per-type topics
            _topic(n.deadletter_topic, "write", "describe"),
            _txn("headwater-gateway"),
        ),
        "registry": (  # the only reader and writer of the schemas topic
            _topic(n.schemas_topic, "read", "write", "describe"),
            _txn(f"headwater-registry.{n.schemas_topic}"),
            _group("headwater-registry-"),
        ),
        "pipeline": (  # reads events and rules, writes aggregates, rule outputs and rule statuses
            _topic(n.events_topic, "read", "describe", prefixed=True),
            _topic(n.deadletter_topic, "read", "describe"),
            _topic(n.aggregates_topic, "write", "describe"),
            _topic(n.rules_topic, "read", "create", "describe"),  # create: whoever comes first makes both topics
            _topic(n.status_topic, "read", "write", "create", "describe"),
            _topic(n.checks_topic, "read", "create", "describe"),
            _topic(n.checked_topic, "write", "create", "describe"),
            _topic(n.rule_output_prefix, "read", "write", "create", "describe", prefixed=True),
            _topic(n.enriched_topic, "read", "write", "create", "describe"),
            _group("headwater-rules-"), spark_groups, reader,
        ),
        "rules": (  # rule administration: the only writer of the rules topic; reads what a rule is checked on
            _topic(n.rules_topic, "read", "write", "create", "describe"),
            _topic(n.status_topic, "read", "create", "describe"),
            _topic(n.checks_topic, "write", "create", "describe"),
            _topic(n.checked_topic, "read", "create", "describe"),
            _topic(n.events_topic, "read", "describe", prefixed=True),
            _topic(n.rule_output_prefix, "read", "create", "describe", prefixed=True),
            _group("headwater-rules-"), spark_groups, reader,
        ),
        "deadletter": (  # replay: reads dead letters, writes events again, exactly once, in its transactions
            _topic(n.deadletter_topic, "read", "describe"),
            _topic(n.events_topic, "write", "describe", prefixed=True),
            _txn("headwater-deadletter-replay."),
            _group("headwater.deadletter."), reader,
        ),
        "console": (  # read-only
            _topic(n.events_topic, "describe"),
            _topic(n.deadletter_topic, "read", "describe"),
            _topic(n.aggregates_topic, "read", "describe"),
            _group("headwater.console."), reader,
        ),
        "subscribe": (  # push subscriptions: reads the streams it serves, assigns partitions (never joins a group)
            _topic(n.events_topic, "read", "describe", prefixed=True),
            _topic(n.deadletter_topic, "read", "describe"),
            _topic(n.aggregates_topic, "read", "describe"),
            _topic(n.rule_output_prefix, "read", "describe", prefixed=True),
            _group("headwater-subscribe-"),
        ),
        "loadtest": (  # the load test's reconciliation reads what the gateways wrote
            _topic(n.events_topic, "read", "describe", prefixed=True),
            _group("headwater-reconcile-"), reader,
        ),
        "tail": (  # `python -m stack tail`: reads back what the stack's topics hold, never writes
            _topic(n.events_topic, "read", "describe", prefixed=True),
            _topic(n.deadletter_topic, "read", "describe"),
            _topic(n.aggregates_topic, "read", "describe"),
            _topic(n.rule_output_prefix, "read", "describe", prefixed=True),
            reader,
        ),
    }


PRINCIPALS = tuple(grants())
MIRROR = "mirror"  # MirrorMaker 2's principal: exists only in the regions of the `regions` profile
MIRROR_GROUP_PREFIXES = ("headwater", "spark-kafka-")  # the stack's consumer groups, whose offsets MM2 translates


def mirrored_grants(sources: Iterable[str], schemas_source: str | None, n: Names = Names()
                    ) -> dict[str, tuple[Grant, ...]]:
    """What a region's components may read of what MirrorMaker 2 copies in from each of `sources` (the other
    regions): every topic grant of `grants()` that reads (exact name or prefix) again on `<source>.<name>`, with
    `read` and `describe` only (a mirrored copy is never written but by MM2); `<schemas_source>._schemas` only for
    the registry of a follower region (None: this region's registry is the primary). Only the names MM2 copies
    (stack/mirror.py) are granted again."""
    copied = (n.events_topic, n.deadletter_topic, n.rule_output_prefix, n.schemas_topic)  # what MM2 mirrors
    out: dict[str, list[Grant]] = {}
    for principal, granted in grants(n).items():
        for g in granted:
            if g.resource != "topic" or "read" not in g.operations or g.name not in copied:
                continue
            from_ = [schemas_source] if g.name == n.schemas_topic else list(sources)
            out.setdefault(principal, []).extend(
                _topic(f"{s}.{g.name}", "read", "describe", prefixed=g.prefixed) for s in from_ if s)
    return {p: tuple(gs) for p, gs in out.items() if gs}


def mirror_grants(here: str, others: Iterable[str], schemas_primary: str) -> tuple[Grant, ...]:
    """MirrorMaker 2's least grants in region `here` (docs/regions.md, "Secure regions"), where it is both a source
    (for every flow here->other) and a target (for every flow other->here), with exactly-once delivery:

    - as a source: read, describe and describe_configs on the mirrored topics (`_schemas` in the primary only) and
      `heartbeats`; its offset-syncs topic `mm2-offset-syncs.<other>.internal` (create, read, write); describe on
      the stack's consumer groups (the checkpoints list them and their offsets);
    - as a target: every `<other>.` topic created, written, its partitions and configs changed (`alter`,
      `alter_configs`: topic config sync), read (the checkpoints topic it restores from; a translated group offset
      is committed on the copy, which takes `read` on it); `heartbeats` written;
      the Connect worker's internal topics `mm2-configs|offsets|status.<other>.internal`, its group `<other>-mm2`,
      its transactional ids (`<other>-mm2-<connector>-<task>` and `connect-cluster-<other>-mm2`); read on the
      stack's consumer groups (it writes their translated offsets).
    """
    mirrored = [_topic(n, "read", "describe", "describe_configs") for n in (
        "headwater.events", "headwater.deadletter")]
    mirrored.append(_topic("headwater.rule.", "read", "describe", "describe_configs", prefixed=True))
    if here == schemas_primary:
        mirrored.append(_topic("_schemas", "read", "describe", "describe_configs"))
    out = [*mirrored, _topic("heartbeats", "read", "write", "create", "describe", "describe_configs"),
           _topic("mm2-", "read", "write", "create", "describe", "describe_configs", prefixed=True),
           *(Grant("group", p, ("read", "describe"), prefixed=True) for p in MIRROR_GROUP_PREFIXES)]
    for other in others:
        out += [_topic(f"{other}.", "read", "write", "create", "describe", "describe_configs", "alter",
                       "alter_configs", prefixed=True),
                Grant("group", f"{other}-mm2", ("read", "describe")),
                Grant("transactional_id", f"{other}-mm2-", ("write", "describe"), prefixed=True),
                Grant("transactional_id", f"connect-cluster-{other}-mm2", ("write", "describe"))]
    return tuple(out)


_RESOURCES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
              "transactional_id": ResourceType.TRANSACTIONAL_ID}
_OPERATIONS = {"read": AclOperation.READ, "write": AclOperation.WRITE, "create": AclOperation.CREATE,
               "describe": AclOperation.DESCRIBE, "describe_configs": AclOperation.DESCRIBE_CONFIGS,
               "alter": AclOperation.ALTER, "alter_configs": AclOperation.ALTER_CONFIGS}


def bindings(table: Mapping[str, Iterable[Grant]]) -> list[AclBinding]:
    """Kafka's ACL bindings for the table: ALLOW, from any host."""
    return [AclBinding(_RESOURCES[g.resource], g.name,
                       ResourcePatternType.PREFIXED if g.prefixed else ResourcePatternType.LITERAL,
                       f"User:{principal}", "*", _OPERATIONS[op], AclPermissionType.ALLOW)
            for principal, granted in table.items() for g in granted for op in g.operations]


def set_passwords(admin: AdminClient, passwords: Mapping[str, str], timeout_s: float = 60.0) -> None:
    """Create or replace each user's SCRAM-SHA-512 credential (a rotation is the same call with a new password)."""
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode()) for user, password in passwords.items()],
        request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout_s)


def apply_acls(admin: AdminClient, table: Mapping[str, Iterable[Grant]], timeout_s: float = 60.0) -> int:
    """Create the table's ACLs (creating an existing one is a no-op); how many bindings."""
    wanted = bindings(table)
    for future in admin.create_acls(wanted, request_timeout=timeout_s).values():
        future.result(timeout_s)
    return len(wanted)
