"""The transactional Kafka producer behind a small Protocol, so group commit can be tested with a fake."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from gateway.records import KafkaRecord

log = logging.getLogger("gateway.kafka")
client_log = logging.getLogger("gateway.librdkafka")  # librdkafka's own log lines, as JSON like every other


class TxProducer(Protocol):
    """What group commit needs from a transactional producer (confluent-kafka's `Producer` has it all)."""

    def init_transactions(self, timeout: float) -> None: ...
    def begin_transaction(self) -> None: ...
    def produce(self, topic: str, *, value: Any = ..., key: Any = ..., headers: Any = ...) -> None: ...
    def commit_transaction(self, timeout: float) -> None: ...
    def abort_transaction(self, timeout: float) -> None: ...
    def poll(self, timeout: float) -> int: ...
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...
    def __len__(self) -> int: ...


ProducerFactory = Callable[[], TxProducer]


def kafka_config(bootstrap: str, transactional_id: str, delivery_timeout_s: float, transaction_timeout_s: float, *,
                 compression: str = "none", linger_ms: float = 100.0) -> dict[str, Any]:
    """librdkafka settings: idempotent, acks=all, timeouts in seconds rather than the 300 s default."""
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": int(delivery_timeout_s * 1000),
        "transaction.timeout.ms": int(transaction_timeout_s * 1000),
        "socket.timeout.ms": int(min(delivery_timeout_s, 10.0) * 1000),
        "linger.ms": linger_ms,
        "compression.type": compression,
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "message.max.bytes": 1024 * 1024 + 1024,
        "reconnect.backoff.max.ms": 1000,
        # Success is learnt from commit_transaction; a delivery report per record would take the GIL once per
        # record inside the commit (measured: 13 % of a worker's CPU under load). Failures are still reported.
        "delivery.report.only.error": True,
        "error_cb": _log_error,
        "logger": client_log,  # forwarded on poll(); without it librdkafka writes raw `%3|...` lines to stderr
    }


def _log_error(err: KafkaError) -> None:
    log.warning("kafka client: %s", err)


def confluent_factory(config: dict[str, Any]) -> ProducerFactory:
    def make() -> TxProducer:
        producer: TxProducer = Producer(config)
        return producer
    return make


def needs_new_producer(exc: BaseException) -> bool:
    """True when the producer cannot be used again (fatal or fenced): build a new one with the same id."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return bool(err.fatal()) or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                  KafkaError.INVALID_PRODUCER_EPOCH)
    return not isinstance(exc, (KafkaException, BufferError))


def commit_in_doubt(exc: BaseException) -> bool:
    """True when commit_transaction timed out or may still be running: its outcome is unknown and an abort
    fails with _CONFLICT, so the producer is replaced instead (which aborts the transaction if still open)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return err.code() in (KafkaError._TIMED_OUT, KafkaError._CONFLICT) or bool(err.retriable())
    return False


def produce_record(producer: TxProducer, record: KafkaRecord) -> None:
    producer.produce(record.topic, value=record.value, key=record.key, headers=record.headers)
