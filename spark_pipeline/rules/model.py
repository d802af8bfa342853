"""The rule model: what a streaming SQL rule is, its run-time status, their JSON forms, names and limits.

A rule is a name and one SQL `SELECT` over the pipeline's views (docs/rules.md). Rules live in the compacted
topic RULES_TOPIC (key = rule name, value = `Rule.to_json()`, a tombstone deletes); the pipeline reports each
rule's state in STATUS_TOPIC the same way (value = `RuleStatus.to_json()`). Both are the single source of
truth: the CLI writes rules, the running pipeline reads them and writes statuses.

Limits (documented in docs/rules.md, "Limits"): at most MAX_RULES rules per pipeline, MAX_SQL_BYTES of SQL per
rule, MAX_KEY_COLUMNS key columns, MAX_OUTPUT_COLUMNS output columns, and a rule's aggregation or join state
bounded by MAX_STATE_ROWS rows (the runtime marks a rule whose state grows beyond it as failed).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

RULES_TOPIC = "_headwater_rules"
STATUS_TOPIC = "_headwater_rules_status"
CHECKS_TOPIC = "_headwater_rules_checks"  # `rules apply`'s requests for the running pipeline's analysis (checks.py)
CHECKED_TOPIC = "_headwater_rules_checked"  # its answers and heartbeats
OUTPUT_TOPIC_PREFIX = "headwater.rule."
# How a rule's output view is named in SQL: `rule_<name>` (no backticks needed); `rule.<name>` with backticks too.
OUTPUT_VIEW_PREFIX = "rule_"

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,62}")
MAX_RULES = 64
MAX_SQL_BYTES = 65_536
MAX_KEY_COLUMNS = 16
MAX_OUTPUT_COLUMNS = 200
MAX_STATE_ROWS = 1_000_000
MAX_STATUS_ERROR_CHARS = 4_096  # a stored status with a longer error is not read
MAX_APPLIED_BY_CHARS = 256
_MAX_EPOCH_MS = 1 << 53
_UID = re.compile(r"[0-9a-f]{0,32}")

State = Literal["starting", "running", "failed", "stopped", "quarantined"]
STATES: tuple[str, ...] = get_args(State)
OUTPUT_MODES = ("append", "update")

# The stable refusal codes of `RuleError` (docs/rules.md, "Refusals").
SYNTAX_ERROR = "syntax_error"
UNKNOWN_VIEW = "unknown_view"
UNKNOWN_COLUMN = "unknown_column"
UNKNOWN_FUNCTION = "unknown_function"
TYPE_ERROR = "type_error"
UNBOUNDED_AGGREGATION = "unbounded_aggregation"
UNBOUNDED_JOIN = "unbounded_join"
UNSUPPORTED = "unsupported_query"
NOT_A_SELECT = "not_a_select"
TOO_MANY_RULES = "too_many_rules"
TOO_LARGE = "too_large"
INCOMPATIBLE_OUTPUT = "incompatible_output"
BAD_NAME = "bad_name"
INVALID_COLUMN = "invalid_column"
RULE_CYCLE = "rule_cycle"
ANALYSIS_ERROR = "analysis_error"
# The sandbox's (allowlist.py, sandbox.py, sizes.py): what a rule may call and how much it may make.
FORBIDDEN_FUNCTION = "forbidden_function"
FORBIDDEN_RELATION = "forbidden_relation"
FORBIDDEN_SYNTAX = "forbidden_syntax"
TOO_COMPLEX = "too_complex"
NOT_STREAMING = "not_streaming"
CODES = (SYNTAX_ERROR, UNKNOWN_VIEW, UNKNOWN_COLUMN, UNKNOWN_FUNCTION, TYPE_ERROR, UNBOUNDED_AGGREGATION,
         UNBOUNDED_JOIN, UNSUPPORTED, NOT_A_SELECT, TOO_MANY_RULES, TOO_LARGE, INCOMPATIBLE_OUTPUT, BAD_NAME,
         INVALID_COLUMN, RULE_CYCLE, ANALYSIS_ERROR, FORBIDDEN_FUNCTION, FORBIDDEN_RELATION, FORBIDDEN_SYNTAX,
         TOO_COMPLEX, NOT_STREAMING)


class RuleError(ValueError):
    """A rule is refused: a stable `code` (CODES), the 1-based `line` of the SQL it concerns (None: the whole
    rule) and a message for people. `str()` is `line N: <code>: <message>`."""

    def __init__(self, code: str, line: int | None, message: str) -> None:
        self.code = code
        self.line = line
        self.message = message
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"line {self.line}" if self.line is not None else "rule"
        return f"{where}: {self.code}: {self.message}"


class ModelError(ValueError):
    """A stored rule or status is not what this version reads (bad JSON, a missing or mistyped field)."""


def check_name(name: str) -> str:
    """`name` if it is a valid rule name, else RuleError(bad_name)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise RuleError(BAD_NAME, None, f"rule name {name!r} must match ^{NAME_PATTERN.pattern}$")
    return name


_RULE_REFERENCE = re.compile(r"\brule[_.]([a-z][a-z0-9_]{0,62})\b", re.IGNORECASE)


def referenced_rules(sql: str) -> set[str]:
    """The rule names whose output views (`rule_<name>`, `rule.<name>`) `sql` mentions."""
    return {m.group(1).lower() for m in _RULE_REFERENCE.finditer(sql)}


def check_acyclic(name: str, sql: str, rules: dict[str, Rule]) -> None:
    """RuleError(rule_cycle) when rule `name` with `sql` would read, through other rules, its own output."""
    seen: set[str] = set()
    path: list[str] = [name]

    def visit(reads: set[str]) -> None:
        for other in sorted(reads):
            if other == name:
                raise RuleError(RULE_CYCLE, None, f"rules would read their own output: {' -> '.join([*path, name])}")
            if other in seen or other not in rules:
                continue
            seen.add(other)
            path.append(other)
            visit(referenced_rules(rules[other].sql))
            path.pop()

    visit(referenced_rules(sql))


def output_topic(name: str) -> str:
    """The Kafka topic rule `name` writes to."""
    return f"{OUTPUT_TOPIC_PREFIX}{check_name(name)}"


def output_subject(name: str) -> str:
    """The registry subject of rule `name`'s output records (topic-name strategy)."""
    return f"{output_topic(name)}-value"


def output_view(name: str) -> str:
    """The view other rules read rule `name`'s output through (`rule_<name>`)."""
    return f"{OUTPUT_VIEW_PREFIX}{check_name(name)}"


def _load(raw: bytes | str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ModelError(f"{what}: not JSON: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ModelError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _get(d: dict[str, Any], key: str, types: type | tuple[type, ...], what: str, optional: bool = False) -> Any:
    if key not in d or d[key] is None:
        if optional:
            return None
        raise ModelError(f"{what}: missing field {key}")
    value = d[key]
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ModelError(f"{what}: field {key} has type bool")
    if not isinstance(value, types):
        raise ModelError(f"{what}: field {key} has type {type(value).__name__}")
    return value


@dataclass(frozen=True)
class Rule:
    """One applied rule. `version` grows by one each time the rule is applied with a changed SQL; `applied_at`
    is epoch ms; `output_schema_id` is the registry id of its output schema (None: the rule emits nothing);
    `key_columns` are the output columns its Kafka records are keyed by (window and grouping keys of an
    aggregation, `event_id` of a filter); `aggregation` says whether it is a (windowed) aggregation;
    `output_mode` is the streaming output mode the analysis chose (OUTPUT_MODES: `update` for an aggregation
    Spark can update, `append` otherwise)."""

    name: str
    sql: str
    version: int
    applied_at: int
    applied_by: str
    output_schema_id: int | None
    key_columns: tuple[str, ...] = field(default_factory=tuple)
    aggregation: bool = False
    output_mode: str = "append"
    uid: str = ""

    def __post_init__(self) -> None:
        check_name(self.name)
        if not _UID.fullmatch(self.uid):
            raise ModelError(f"rule {self.name}: uid {self.uid[:40]!r} is not up to 32 hex digits")
        if len(self.applied_by) > MAX_APPLIED_BY_CHARS:
            raise ModelError(f"rule {self.name}: applied_by is over {MAX_APPLIED_BY_CHARS} characters")
        if self.output_mode not in OUTPUT_MODES:
            raise ModelError(f"rule {self.name}: output mode {self.output_mode!r} is not one of {OUTPUT_MODES}")
        if self.version < 1:
            raise ModelError(f"rule {self.name}: version {self.version} < 1")
        if len(self.sql.encode()) > MAX_SQL_BYTES:
            raise RuleError(TOO_LARGE, None, f"the SQL is over {MAX_SQL_BYTES} bytes")
        if len(self.key_columns) > MAX_KEY_COLUMNS:
            raise RuleError(TOO_LARGE, None, f"over {MAX_KEY_COLUMNS} key columns")

    @property
    def checkpoint_id(self) -> str:
        """The folder of this rule version's checkpoint, unique per apply (`v<version>-<uid>`; `v<version>` for a
        rule stored before uids existed, so its checkpoint still resumes)."""
        return f"v{self.version}-{self.uid}" if self.uid else f"v{self.version}"

    @property
    def topic(self) -> str:
        return output_topic(self.name)

    @property
    def subject(self) -> str:
        return output_subject(self.name)

    @property
    def view(self) -> str:
        return output_view(self.name)

    def to_json(self) -> bytes:
        d = asdict(self)
        d["key_columns"] = list(self.key_columns)
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Rule:
        what = "rule"
        d = _load(raw, what)
        what = f"rule {d.get('name')!r}"
        keys = _get(d, "key_columns", list, what, optional=True) or []
        if not all(isinstance(k, str) for k in keys):
            raise ModelError(f"{what}: key_columns must be strings")
        try:
            return cls(
                name=_get(d, "name", str, what), sql=_get(d, "sql", str, what), version=_get(d, "version", int, what),
                applied_at=_get(d, "applied_at", int, what), applied_by=_get(d, "applied_by", str, what),
                output_schema_id=_get(d, "output_schema_id", int, what, optional=True), key_columns=tuple(keys),
                aggregation=bool(_get(d, "aggregation", bool, what, optional=True)),
                output_mode=_get(d, "output_mode", str, what, optional=True) or "append",
                uid=_get(d, "uid", str, what, optional=True) or "")
        except RuleError as exc:
            raise ModelError(f"{what}: {exc.message}") from None


def _check_epoch(value: int | None, what: str) -> None:
    if value is not None and not 0 <= value < _MAX_EPOCH_MS:
        raise ModelError(f"{what}: {value} is not a time in epoch ms")


@dataclass(frozen=True)
class RuleStatus:
    """What the running pipeline reports about one rule: its `state` (STATES), the `error` of a failed rule,
    throughput, the time of its last micro-batch (epoch ms), how many Kafka offsets its input lags behind,
    whether a replaced rule started with a fresh checkpoint, when a failed rule is retried (epoch ms) and when
    this status was written (epoch ms)."""

    name: str
    version: int
    state: State
    error: str | None = None
    rows_per_s: float = 0.0
    last_batch_at: int | None = None
    lag: int | None = None
    fresh_start: bool = False
    retry_at: int | None = None
    updated_at: int = 0
    tier: str | None = None  # where the rule runs (realtime, microbatch) and why
    tier_reason: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        what = f"status of {self.name}"
        for text in (self.tier, self.tier_reason):
            if text is not None and len(text) > MAX_STATUS_ERROR_CHARS:
                raise ModelError(f"{what}: a tier or reason of over {MAX_STATUS_ERROR_CHARS} characters")
        if self.state not in STATES:
            raise ModelError(f"{what}: state {self.state!r} is not one of {STATES}")
        if self.version < 1 or (self.lag is not None and self.lag < 0):
            raise ModelError(f"{what}: a version under 1 or a negative lag")
        if not (math.isfinite(self.rows_per_s) and self.rows_per_s >= 0):
            raise ModelError(f"{what}: rows_per_s {self.rows_per_s} is not a finite rate")
        if self.error is not None and len(self.error) > MAX_STATUS_ERROR_CHARS:
            raise ModelError(f"{what}: an error of over {MAX_STATUS_ERROR_CHARS} characters")
        for field_name in ("last_batch_at", "retry_at", "updated_at"):
            _check_epoch(getattr(self, field_name), f"{what}: {field_name}")

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> RuleStatus:
        d = _load(raw, "status")
        what = f"status {d.get('name')!r}"
        rate = _get(d, "rows_per_s", (int, float), what, optional=True)
        try:
            return cls(
                name=_get(d, "name", str, what), version=_get(d, "version", int, what),
                state=_get(d, "state", str, what), error=_get(d, "error", str, what, optional=True),
                rows_per_s=float(rate or 0.0), last_batch_at=_get(d, "last_batch_at", int, what, optional=True),
                lag=_get(d, "lag", int, what, optional=True),
                fresh_start=bool(_get(d, "fresh_start", bool, what, optional=True)),
                retry_at=_get(d, "retry_at", int, what, optional=True),
                updated_at=_get(d, "updated_at", int, what, optional=True) or 0,
                tier=_get(d, "tier", str, what, optional=True),
                tier_reason=_get(d, "tier_reason", str, what, optional=True))
        except RuleError as exc:
            raise ModelError(f"{what}: {exc.message}") from None
