"""Benchmark: encoding a rule's output rows to Confluent-framed Avro, Spark's JVM `to_avro` vs a fastavro pandas UDF.

    .venv/bin/python -m bench.rules_encode [--rows 200000] [--runs 3]

Both encode the same rows (a window struct, strings, longs, doubles, a map) with the same schema; each run writes
to Spark's `noop` sink, so only the encoding is timed. Prints rows/s of each and their ratio (same run).
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable
from typing import Any

import fastavro
import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf

from common.avro_frame import header
from spark_pipeline.rules.output import avro_schema, encode_columns
from spark_pipeline.session import build_session


def rows(spark: SparkSession, n: int) -> DataFrame:
    t = F.timestamp_seconds(F.lit(1_790_000_000) + (F.col("id") % 600) * 60)
    return spark.range(n).select(
        F.struct(t.alias("start"), (t + F.expr("INTERVAL 1 MINUTE")).alias("end")).alias("window"),
        F.concat(F.lit("region-"), (F.col("id") % 7).cast("string")).alias("region"),
        F.concat(F.lit("/p/"), (F.col("id") % 1000).cast("string")).alias("path"),
        F.col("id").alias("views"), (F.col("id") / 3.0).alias("avg_ms"),
        F.create_map(F.lit("k"), (F.col("id") % 5).cast("string")).alias("tags"))


def fastavro_udf(schema: dict[str, Any], schema_id: int) -> Callable[..., Column]:
    parsed = fastavro.parse_schema(schema)
    head = header(schema_id)
    names = [f["name"] for f in schema["fields"]]

    def encode(frame: pd.DataFrame) -> pd.Series:
        out = []
        for record in frame.to_dict("records"):
            buf = io.BytesIO()
            buf.write(head)
            fastavro.schemaless_writer(buf, parsed, {k: record[k] for k in names})
            out.append(buf.getvalue())
        return pd.Series(out)

    return pandas_udf(encode, "binary")  # type: ignore[call-overload, no-any-return]


def timed(df: DataFrame, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - start)
    return best


def measure(spark: SparkSession, n: int, runs: int) -> dict[str, float]:
    df = rows(spark, n).cache()
    df.count()
    schema = avro_schema("bench", df.schema)
    jvm = encode_columns(df, 1, ("window", "region", "path"), json.dumps(schema))
    udf = fastavro_udf(schema, 1)
    python = df.select(udf(F.struct(*df.columns)).alias("value"))
    jvm_s, python_s = timed(jvm, runs), timed(python, runs)
    df.unpersist()
    return {"rows": n, "to_avro_rows_per_s": n / jvm_s, "fastavro_udf_rows_per_s": n / python_s,
            "to_avro_speedup": python_s / jvm_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    spark = build_session("bench-rules-encode")
    result = measure(spark, args.rows, args.runs)
    print(f"rule output encoding, {args.rows} rows, best of {args.runs}:")
    print(f"  JVM to_avro:        {result['to_avro_rows_per_s']:>12,.0f} rows/s")
    print(f"  fastavro pandas UDF: {result['fastavro_udf_rows_per_s']:>11,.0f} rows/s")
    print(f"  to_avro is {result['to_avro_speedup']:.1f}x faster")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
