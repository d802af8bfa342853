"""Enrichment transforms: user agent, IP to country, the node inventory join and latency columns.

The two lookups run in Python (ua-parser with its Rust accelerator, iptocc's offline table) as Arrow
UDFs that parse each distinct value of a batch once; everything else stays in the JVM.
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from pathlib import Path

import iptocc
import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import StringType, StructField, StructType
from ua_parser import parse

from spark_pipeline import packaged
from spark_pipeline.config import is_uri

UA_TYPE = StructType([StructField("browser", StringType()), StructField("os", StringType()),
                      StructField("device", StringType())])
INVENTORY_COLUMNS = ["region", "datacenter", "service"]
INVENTORY_HEADER = ["node_id", *INVENTORY_COLUMNS]
UNKNOWN = "unknown"


class InventoryError(ValueError):
    """The node inventory file is not the CSV the pipeline reads; the message names it."""


@lru_cache(maxsize=65536)
def parse_user_agent(ua: str) -> tuple[str | None, str | None, str | None]:
    """(browser family, OS family, device family) of one User-Agent string."""
    result = parse(ua)
    browser = result.user_agent.family if result.user_agent else None
    os_name = result.os.family if result.os else None
    device = result.device.family if result.device else None
    return browser, os_name, device


def _user_agents(uas: pd.Series) -> pd.DataFrame:
    parsed = [parse_user_agent(u) if isinstance(u, str) and u else (None, None, None) for u in uas]
    return pd.DataFrame(parsed, columns=["browser", "os", "device"])


def _countries(ips: pd.Series) -> pd.Series:
    distinct = [ip for ip in ips.dropna().unique() if isinstance(ip, str)]
    codes = dict(zip(distinct, iptocc.country_code(distinct), strict=True)) if distinct else {}
    return ips.map(codes.get)


_ua_udf = pandas_udf(_user_agents, UA_TYPE)  # type: ignore[call-overload]
_country_udf = pandas_udf(_countries, StringType())  # type: ignore[call-overload]


def user_agent_parts(user_agent: Column) -> Column:
    """(browser, os, device) of a user-agent column (a pandas UDF: each distinct value of a batch parsed once)."""
    return _ua_udf(user_agent)  # type: ignore[no-any-return]


def country_of(client_ip: Column) -> Column:
    """ISO 3166-1 alpha-2 country of an IP address column (null for private or unknown addresses)."""
    return _country_udf(client_ip)  # type: ignore[no-any-return]


def with_user_agent(df: DataFrame) -> DataFrame:
    """Add `ua` (browser, os, device) from the event's user agent, else the gateway's header."""
    return df.withColumn("ua", user_agent_parts(F.coalesce(F.col("user_agent"), F.col("header_user_agent"))))


def with_country(df: DataFrame) -> DataFrame:
    """Add `country` (ISO 3166-1 alpha-2, null for private or unknown addresses) from `client_ip`."""
    return df.withColumn("country", country_of(F.col("client_ip")))


def inventory_rows(location: str | None) -> list[tuple[str | None, ...]]:
    """The rows of a local inventory CSV (None: the packaged one), read here; empty cells are null as in
    Spark's CSV reader. Raises InventoryError when the header is not INVENTORY_HEADER."""
    content = packaged.text(packaged.INVENTORY) if location is None else Path(location).read_text(encoding="utf-8")
    reader = csv.reader(io.StringIO(content))
    header = next(reader, [])
    if [h.strip() for h in header] != INVENTORY_HEADER:
        raise InventoryError(f"{location or 'packaged inventory'}: header {header} is not {INVENTORY_HEADER}")
    return [tuple((cell.strip() or None) for cell in row) for row in reader if row]


def read_inventory(spark: SparkSession, location: str | None) -> DataFrame:
    """The node inventory (CSV: node_id, region, datacenter, service) as a small frame.

    A Hadoop URI (hdfs://, s3a://, file:) is read by Spark where the executors can reach it; a local path or the
    packaged inventory (None) is read on the driver and shipped as data, so no executor needs the file. A node
    listed twice keeps one row: the first of a local file, any of a URI's.

    The local rows are one partition, deduplicated here: spread over the session's default parallelism and
    deduplicated by Spark, building the broadcast took a job of 32 tasks (local[32]) as each query joining the
    inventory started, and real-time mode's admission counts every task of a running stage as a held slot, so a
    real-time query starting beside it was refused (CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT, 0 of 32 free).
    """
    schema = "node_id string, region string, datacenter string, service string"
    if location is not None and is_uri(location):
        return spark.read.csv(location, header=True, schema=schema).dropDuplicates(["node_id"])
    first: dict[str | None, tuple[str | None, ...]] = {}
    for row in inventory_rows(location):
        first.setdefault(row[0] if row else None, row)
    return spark.createDataFrame(spark.sparkContext.parallelize(list(first.values()), 1), schema)


def with_inventory(df: DataFrame, inventory: DataFrame) -> DataFrame:
    """Left-join the inventory on node_id (broadcast: it is small); unknown nodes get region 'unknown'."""
    joined = df.join(F.broadcast(inventory), on="node_id", how="left")
    return joined.fillna(UNKNOWN, subset=INVENTORY_COLUMNS)


def with_latency(df: DataFrame) -> DataFrame:
    """Add `processed_at` and the latencies in ms: created -> received (ingest), received -> processed."""
    processed = F.current_timestamp()
    return df.withColumns({
        "processed_at": processed,
        "ingest_latency_ms": F.unix_millis("received_at") - F.unix_millis("created_at"),
        "processing_latency_ms": F.unix_millis(processed) - F.unix_millis("received_at"),
    })


def enrich(df: DataFrame, inventory: DataFrame) -> DataFrame:
    """All enrichments, in the order of the flat event row."""
    return with_latency(with_country(with_user_agent(with_inventory(df, inventory))))
