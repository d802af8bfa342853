"""Brings one event type's decoded record to the pipeline's canonical flat row, or says why it cannot.

Every event type shares the topic and the output, so every subject's decoded struct must become the same
row type before the decoder coalesces them (Spark refuses a coalesce of different struct types, and one
odd schema would then stop the job for every type). The canonical envelope types are those of
`schemas/envelope.avsc` as Spark's Avro reader maps them (`uuid` -> string, `timestamp-millis` ->
timestamp). A schema that departs from it in a lossless way is normalised per column:

- a plain `long`/`int` where a timestamp is expected is read as epoch milliseconds (the envelope's unit);
  values beyond Spark's timestamp range fail the row's `checks` (the decoder dead-letters that record);
- a `local-timestamp-*` is cast to a timestamp; an `int` seq is widened to `long`; an integral id is cast to
  a string; a `context` map of scalar values is cast to map<string,string>;
- a missing `received_at` is null, a missing `context` empty (both have defaults in the envelope).

Anything else (a missing required field, a string timestamp, a record where a string belongs, a schema that
is not a record) raises `Unusable` with the reason; the decoder then skips the subject and dead-letters its
records with that reason. The typed columns only take `properties` fields of a type they can hold.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    NumericType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

ENVELOPE_TYPES: dict[str, DataType] = {
    "event_id": StringType(), "event_type": StringType(), "producer_id": StringType(), "seq": LongType(),
    "node_id": StringType(), "created_at": TimestampType(), "sent_at": TimestampType(),
    "received_at": TimestampType(), "sdk_name": StringType(), "sdk_version": StringType(),
    "context": MapType(StringType(), StringType()),
}
TYPED_TYPES: dict[str, DataType] = {"user_id": StringType(), "user_agent": StringType(), "metric_value": DoubleType()}
ROW_TYPES: dict[str, DataType] = {**ENVELOPE_TYPES, "properties_json": StringType(), **TYPED_TYPES}
# Epoch milliseconds whose microseconds still fit a long (Spark's timestamp); beyond, timestamp_millis throws.
MAX_EPOCH_MS = 9_223_372_036_854_775
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_SCALAR = (*_INTEGRAL, StringType, BooleanType, NumericType)


class Unusable(ValueError):
    """The decoded schema cannot be brought to the canonical row; the message says why."""


def row_type(fields: frozenset[str]) -> StructType:
    """The canonical row (the ROW_TYPES in `fields`, in their order): what every subject is normalised to."""
    return StructType([StructField(n, t) for n, t in ROW_TYPES.items() if n in fields])


def _same(got: DataType, want: DataType) -> bool:
    return got.simpleString() == want.simpleString()  # nullability aside


def _missing(name: str, want: DataType) -> Column:
    if name == "received_at":
        return F.lit(None).cast(want)
    if name == "context":
        return F.create_map().cast(want)
    raise Unusable(f"envelope field {name} is missing")


def _lossless_cast(got: DataType, want: DataType) -> bool:
    """Whether a cast of `got` to the envelope type `want` keeps the value and never fails."""
    if isinstance(want, TimestampType):
        return isinstance(got, TimestampNTZType)
    if isinstance(want, (LongType, StringType)):
        return isinstance(got, _INTEGRAL)
    return (isinstance(want, MapType) and isinstance(got, MapType) and isinstance(got.keyType, StringType)
            and isinstance(got.valueType, _SCALAR))


def envelope_column(record: Column, struct: StructType, name: str) -> tuple[Column, Column | None]:
    """Envelope column `name` of `record` (of type `struct`) in its canonical type, and the condition its value
    must meet (None: always valid)."""
    want = ENVELOPE_TYPES[name]
    if name not in struct.fieldNames():
        return _missing(name, want), None
    got = struct[name].dataType
    col = record[name]
    if _same(got, want):
        return col, None
    if isinstance(want, TimestampType) and isinstance(got, _INTEGRAL):
        in_range = col.isNull() | col.between(-MAX_EPOCH_MS, MAX_EPOCH_MS)
        return F.when(in_range, F.timestamp_millis(col.cast("long"))), in_range
    if _lossless_cast(got, want):
        return col.cast(want), None
    raise Unusable(f"envelope field {name} is {got.simpleString()}, expected {want.simpleString()}")


def _castable(got: DataType, want: DataType) -> bool:
    """Whether a cast of `got` to `want` can never fail at run time (ANSI mode raises on a bad string)."""
    if isinstance(want, StringType):
        return isinstance(got, _SCALAR)
    return isinstance(got, NumericType) and isinstance(want, NumericType)


def typed_column(record: Column, struct: StructType, sources: list[str], name: str) -> Column:
    """Typed column `name`: the first non-null of the `properties` fields `sources` that its type can hold."""
    want = TYPED_TYPES[name]
    props = struct["properties"].dataType if "properties" in struct.fieldNames() else None
    if not isinstance(props, StructType):
        return F.lit(None).cast(want)
    values = [record["properties"][s].cast(want) for s in sources
              if s in props.fieldNames() and _castable(props[s].dataType, want)]
    return F.coalesce(*values) if values else F.lit(None).cast(want)


def properties_column(record: Column, struct: StructType) -> Column:
    """The `properties` as JSON (null when the schema has none)."""
    if "properties" not in struct.fieldNames():
        return F.lit(None).cast("string")
    if not isinstance(struct["properties"].dataType, (StructType, MapType)):
        raise Unusable(f"properties is {struct['properties'].dataType.simpleString()}, expected a record")
    return F.to_json(record["properties"])


def canonical_row(record: Column, struct: DataType, typed_sources: dict[str, list[str]],
                  fields: frozenset[str]) -> tuple[Column, Column | None]:
    """The canonical row (`row_type(fields)`) of a decoded record, and the condition a record must meet to have
    one (None: every decoded record has one). Raises Unusable when the schema cannot be normalised."""
    if not isinstance(struct, StructType):
        raise Unusable(f"the schema is {struct.simpleString()}, not a record")
    columns: list[Column] = []
    checks: list[Column] = []
    for name in ROW_TYPES:
        if name not in fields:
            continue
        if name == "properties_json":
            columns.append(properties_column(record, struct).alias(name))
        elif name in TYPED_TYPES:
            columns.append(typed_column(record, struct, typed_sources.get(name, []), name).alias(name))
        else:
            value, check = envelope_column(record, struct, name)
            columns.append(value.alias(name))
            checks += [check] if check is not None else []
    valid = None
    for check in checks:
        valid = check if valid is None else valid & check
    return F.struct(*columns), valid
