"""The alternative the server does not take, measured: one Kafka consumer per subscriber. A process follows the
events topic with N consumers (read_committed, assigned at the end, as each subscriber's own would be) and decodes
and frames every record for each, as a server with one consumer per subscriber must; its CPU and memory per
consumer are what that design would cost per subscriber."""

from __future__ import annotations

import resource
import threading
import time
import uuid
from multiprocessing.connection import Connection

from confluent_kafka import Consumer, TopicPartition

from subscribe.decode import RecordDecoder
from subscribe.reader import frame_batch
from subscribe.schemas import RegistrySchemas


def rss_kb() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def _follow(consumer: Consumer, decoder: RecordDecoder, partitions: int, stop: threading.Event,
            counts: list[int]) -> None:
    cursor = [0] * partitions
    while not stop.is_set():
        first = consumer.poll(0.2)
        if first is not None:
            msgs = [first, *consumer.consume(499, timeout=0)]
            counts.append(len(frame_batch(decoder, msgs, cursor, b"00000000", stop)))


def run(bootstrap: str, registry_url: str, topic: str, conn: Connection, *, n: int, seconds: float) -> None:
    """N consumers, each on its own thread, for `seconds`; sends CPU s/s, RSS growth and records framed."""
    schemas = RegistrySchemas(registry_url)
    rss0 = rss_kb()
    stop, counts = threading.Event(), list[int]()
    threads: list[threading.Thread] = []
    consumers: list[Consumer] = []
    for _ in range(n):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False,
                      "isolation.level": "read_committed", "enable.partition.eof": True,
                      "queued.max.messages.kbytes": 1024, "fetch.wait.max.ms": 100})
        parts = len(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, -1) for p in range(parts)])
        decoder = RecordDecoder(topic, schemas, avro=True, stream_of=lambda t: f"event.{t}")
        threads.append(threading.Thread(target=_follow, args=(c, decoder, parts, stop, counts), daemon=True))
        consumers.append(c)
    for t in threads:
        t.start()
    time.sleep(2.0)  # assigned and fetching
    t0, cpu0, rss1 = time.monotonic(), _cpu(), rss_kb()
    time.sleep(seconds)
    cpu, elapsed = _cpu() - cpu0, time.monotonic() - t0
    rss = max(rss1, rss_kb()) - rss0
    stop.set()
    for t in threads:
        t.join(5)
    for c in consumers:
        c.close()
    conn.send({"consumers": n, "records": sum(counts), "cpu_s_per_s": cpu / elapsed, "rss_kb": rss})


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime

