"""A rule's output records: the Avro schema derived from its result columns, its registration, and the encoding.

Every column becomes a nullable field (`["null", T]`, default null: Spark's `to_avro` refuses a nullable column
for a non-null type, and a later version may then drop or add columns BACKWARD-compatibly). Types: string,
long, int (int/short/byte), double, float, boolean, bytes, `timestamp-millis` (timestamps, so a window is a
record of start/end timestamp-millis), `local-timestamp-millis`, `date`, `decimal` (bytes), arrays, maps with
string keys, and nested records. A column name must be an Avro name (`[A-Za-z_][A-Za-z0-9_]*`: give an
expression a name with `AS`).

The schema is registered under `headwater.rule.<name>-value` with the subject's compatibility set to BACKWARD
on first registration; a changed rule whose schema the registry finds incompatible is refused
(`incompatible_output`) with the registry's reasons, unless it is applied under a new name.

`encode_columns` writes each row as Kafka (key, value): the value in Confluent framing (magic byte 0, the 4-byte
schema id, Avro binary) made by Spark's JVM `to_avro` (measured against a fastavro pandas UDF by
`bench/rules_encode.py`: the JVM path is faster, docs/rules.md "Outputs"); the key the JSON of the key columns
(window and group keys), so every update of one window and group has the same key.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import to_avro
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from common.registry_client import RegistryClient, RegistryClientError
from spark_pipeline.load import confluent_frame
from spark_pipeline.rules.model import (
    INCOMPATIBLE_OUTPUT,
    INVALID_COLUMN,
    MAX_OUTPUT_COLUMNS,
    TOO_LARGE,
    RuleError,
    check_name,
    output_subject,
)

AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAMESPACE = "headwater.rules"
_SIMPLE: list[tuple[type[DataType], Any]] = [
    (StringType, "string"), (LongType, "long"), (IntegerType, "int"), (ShortType, "int"), (ByteType, "int"),
    (DoubleType, "double"), (FloatType, "float"), (BooleanType, "boolean"), (BinaryType, "bytes"),
    (TimestampType, {"type": "long", "logicalType": "timestamp-millis"}),
    (TimestampNTZType, {"type": "long", "logicalType": "local-timestamp-millis"}),
    (DateType, {"type": "int", "logicalType": "date"}),
]


def _nullable(t: Any) -> list[Any]:
    return ["null", t]


def avro_type(dtype: DataType, path: str) -> Any:
    """The (non-null) Avro type of a Spark type; nested records are named after their column path."""
    for spark_type, avro in _SIMPLE:
        if isinstance(dtype, spark_type):
            return avro
    if isinstance(dtype, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
    if isinstance(dtype, ArrayType):
        items = avro_type(dtype.elementType, f"{path}_item")
        return {"type": "array", "items": _nullable(items) if dtype.containsNull else items}
    if isinstance(dtype, MapType):
        if not isinstance(dtype.keyType, StringType):
            raise RuleError(INVALID_COLUMN, None, f"column {path}: map keys must be strings in a rule output, "
                                                  f"not {dtype.keyType.simpleString()}")
        values = avro_type(dtype.valueType, f"{path}_value")
        return {"type": "map", "values": _nullable(values) if dtype.valueContainsNull else values}
    if isinstance(dtype, StructType):
        return {"type": "record", "name": path, "fields": _fields(dtype, path)}
    raise RuleError(INVALID_COLUMN, None, f"column {path}: type {dtype.simpleString()} has no Avro form here")


def _fields(struct: StructType, path: str) -> list[dict[str, Any]]:
    seen: set[str] = set()
    fields = []
    for f in struct.fields:
        if not AVRO_NAME.fullmatch(f.name):
            raise RuleError(INVALID_COLUMN, None, f"output column {f.name!r} is not a valid name: "
                                                  "give the expression a name with AS (letters, digits, _)")
        if f.name.lower() in seen:
            raise RuleError(INVALID_COLUMN, None, f"output column {f.name!r} appears twice: rename one with AS")
        seen.add(f.name.lower())
        fields.append({"name": f.name, "type": _nullable(avro_type(f.dataType, f"{path}_{f.name}")),
                       "default": None})
    return fields


def avro_schema(name: str, struct: StructType) -> dict[str, Any]:
    """The Avro record schema of rule `name`'s output rows of type `struct`."""
    check_name(name)
    if len(struct.fields) > MAX_OUTPUT_COLUMNS:
        raise RuleError(TOO_LARGE, None, f"{len(struct.fields)} output columns, over {MAX_OUTPUT_COLUMNS}")
    if not struct.fields:
        raise RuleError(INVALID_COLUMN, None, "the rule selects no column")
    return {"type": "record", "name": name, "namespace": NAMESPACE,
            "doc": f"Output of the Headwater rule {name}.", "fields": _fields(struct, name)}


def avro_schema_json(name: str, struct: StructType) -> str:
    return json.dumps(avro_schema(name, struct), sort_keys=True)


def register_output(registry: RegistryClient, name: str, struct: StructType, *, dry_run: bool = False) -> int | None:
    """Register rule `name`'s output schema (BACKWARD compatible with its previous versions) and return its id;
    with `dry_run`, only check compatibility and return the id if the schema is already registered, else None.
    Raises RuleError(incompatible_output) with the registry's reasons."""
    subject = output_subject(name)
    schema = avro_schema_json(name, struct)
    try:
        existing = registry.versions(subject)
    except RegistryClientError as exc:
        if not exc.not_found:
            raise
        existing = []
    if existing:
        ok, reasons = registry.check(subject, schema)
        if not ok:
            why = "; ".join(reasons[:3]) or "not backward compatible"
            raise RuleError(INCOMPATIBLE_OUTPUT, None, f"the new output schema of {name} is not backward compatible "
                                                       f"with {subject} ({why}); apply it under a new name")
    if dry_run:
        try:
            return int(registry.lookup(subject, schema)["id"])
        except RegistryClientError as exc:
            if exc.not_found:
                return None
            raise
    if not existing:
        registry.set_compatibility(subject, "BACKWARD")
    try:
        return registry.register(subject, schema)
    except RegistryClientError as exc:
        if exc.status == 409:
            raise RuleError(INCOMPATIBLE_OUTPUT, None, f"{subject}: {exc.message}") from None
        raise


def encode_columns(df: DataFrame, schema_id: int, key_columns: tuple[str, ...] | list[str],
                   schema_json: str | None = None) -> DataFrame:
    """Rows as Kafka (key, value): value = Confluent-framed Avro of every column (schema `schema_json`, default
    the one `avro_schema` derives from `df`'s columns, which must be the registered one of `schema_id`), key =
    the JSON of `key_columns` (null without key columns)."""
    schema = schema_json or avro_schema_json("rule", df.schema)
    value = confluent_frame(to_avro(F.struct(*[F.col(f"`{c}`") for c in df.columns]), schema), schema_id)
    if key_columns:
        key = F.to_json(F.struct(*[F.col(f"`{c}`") for c in key_columns])).cast("binary")
    else:
        key = F.lit(None).cast("binary")
    return df.select(key.alias("key"), value.alias("value"))
