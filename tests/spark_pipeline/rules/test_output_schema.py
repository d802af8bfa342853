"""Unit tests of the Avro schema derived from a rule's result columns (no Spark session: types only)."""

from __future__ import annotations

import fastavro
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_pipeline.rules import model, output
from spark_pipeline.rules.model import RuleError

pytestmark = pytest.mark.unit

WINDOW = StructType([StructField("start", TimestampType()), StructField("end", TimestampType())])


def test_window_aggregate_schema_is_nullable_avro_with_timestamp_millis() -> None:
    struct = StructType([StructField("window", WINDOW), StructField("region", StringType()),
                         StructField("views", LongType(), False), StructField("avg_ms", DoubleType()),
                         StructField("tags", MapType(StringType(), StringType())),
                         StructField("ids", ArrayType(IntegerType(), False)),
                         StructField("amount", DecimalType(12, 2))])
    schema = output.avro_schema("top_pages", struct)
    fastavro.parse_schema(schema)  # a valid Avro schema
    assert schema["name"] == "top_pages" and schema["namespace"] == "headwater.rules"
    fields = {f["name"]: f for f in schema["fields"]}
    assert all(f["type"][0] == "null" and f["default"] is None for f in fields.values())
    window = fields["window"]["type"][1]
    assert window["type"] == "record"
    assert [f["type"][1] for f in window["fields"]] == [{"type": "long", "logicalType": "timestamp-millis"}] * 2
    assert fields["views"]["type"][1] == "long"
    assert fields["tags"]["type"][1] == {"type": "map", "values": ["null", "string"]}
    assert fields["ids"]["type"][1] == {"type": "array", "items": "int"}
    assert fields["amount"]["type"][1]["logicalType"] == "decimal"


def test_schema_json_is_deterministic() -> None:
    struct = StructType([StructField("a", StringType()), StructField("b", LongType())])
    assert output.avro_schema_json("r", struct) == output.avro_schema_json("r", struct)


@pytest.mark.parametrize("struct", [
    StructType([StructField("count(1)", LongType())]),
    StructType([StructField("a", LongType()), StructField("A", LongType())]),
    StructType([StructField("m", MapType(LongType(), StringType()))]),
    StructType([]),
])
def test_columns_without_an_avro_form_are_refused(struct: StructType) -> None:
    with pytest.raises(RuleError) as err:
        output.avro_schema("r", struct)
    assert err.value.code == model.INVALID_COLUMN


def test_too_many_columns() -> None:
    struct = StructType([StructField(f"c{i}", LongType()) for i in range(model.MAX_OUTPUT_COLUMNS + 1)])
    with pytest.raises(RuleError) as err:
        output.avro_schema("r", struct)
    assert err.value.code == model.TOO_LARGE
