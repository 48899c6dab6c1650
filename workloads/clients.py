"""confluent-kafka client construction and error classification shared by the workloads."""
from __future__ import annotations

from collections.abc import Callable
from typing import cast

from confluent_kafka import Consumer, KafkaError, Message, Producer

from kchaos.clusters.admin import CLIENT_LOG
from kchaos.core.config import ProducerConfig

# Errors that reject a record outright, on every attempt: the write certainly did not happen.
DEFINITE_FAILURES = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD,
    KafkaError.INVALID_MSG_SIZE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
})


def send_outcome(err: KafkaError, producer: ProducerConfig) -> str:
    """"fail" when `err` proves the record was not written, else "info" (it may have been).

    NOT_ENOUGH_REPLICAS is refused before the append, so it is definite only
    when no earlier attempt could have landed: with retries disabled.
    """
    if err.code() in DEFINITE_FAILURES:
        return "fail"
    if err.code() == KafkaError.NOT_ENOUGH_REPLICAS and producer.retries == 0:
        return "fail"
    return "info"


def make_producer(bootstrap: str, cfg: ProducerConfig, client_id: str, *,
                  on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
                  extra: dict[str, object] | None = None) -> Producer:
    """A producer configured exactly as the test's producer options say; `on_delivery`, if given,
    receives every delivery report (served by `poll`); `extra` adds settings (a `transactional.id`)."""
    extra = {**({"on_delivery": on_delivery} if on_delivery else {}),
             **({"socket.timeout.ms": cfg.socket_timeout_ms} if cfg.socket_timeout_ms is not None else {}),
             **(extra or {})}
    return Producer({**extra,
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "acks": cfg.acks,
        "enable.idempotence": cfg.idempotence,
        "retries": cfg.retries,
        "linger.ms": cfg.linger_ms,
        "max.in.flight.requests.per.connection": cfg.max_in_flight,
        "delivery.timeout.ms": cfg.delivery_timeout_ms,
        "request.timeout.ms": cfg.request_timeout_ms,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 500,
        "reconnect.backoff.max.ms": 1000,
        "socket.connection.setup.timeout.ms": 3000,
        "topic.metadata.refresh.interval.ms": 2000,
        "logger": CLIENT_LOG,
    })


def _consumer_settings(bootstrap: str, client_id: str) -> dict[str, object]:
    """What every consumer of the harness shares: quick to notice a dead broker, reading from the log start."""
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 200,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
        "socket.connection.setup.timeout.ms": 3000,
        "topic.metadata.refresh.interval.ms": 2000,
        "logger": CLIENT_LOG,
    }


def make_consumer(bootstrap: str, client_id: str, isolation: str | None = None, group: str | None = None) -> Consumer:
    """A consumer for manual assignment: no group management, no offset commits of its own. `isolation` sets
    `isolation.level` (read_committed or read_uncommitted); None leaves librdkafka's, read_committed. `group`
    is the group whose committed offsets it resumes from (default `kchaos-<client_id>`)."""
    extra = {"isolation.level": isolation} if isolation else {}
    return Consumer({**extra, **_consumer_settings(bootstrap, client_id),
        "group.id": group or f"kchaos-{client_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "session.timeout.ms": 6000,
    })


# librdkafka's timeouts for a classic group member: a member that stops polling (a crashed client)
# is evicted within seconds, not the default 5 minutes.
MAX_POLL_INTERVAL_MS = 10000
AUTO_COMMIT_INTERVAL_MS = 1000


def make_group_consumer(bootstrap: str, client_id: str, group: str, *, auto_commit: bool,
                        protocol: str = "classic", isolation: str | None = None) -> Consumer:
    """A consumer for group membership (`subscribe`): group `group`, committing automatically every
    AUTO_COMMIT_INTERVAL_MS (the offsets of what poll returned) if `auto_commit`, else only when told;
    starting from the log start where the group has no committed offset. `protocol` is group.protocol:
    classic, or consumer (KIP-848), whose timeouts the broker sets. `isolation` as for make_consumer."""
    extra = {"isolation.level": isolation} if isolation else {}
    timeouts: dict[str, object] = {
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
    } if protocol == "classic" else {"max.poll.interval.ms": MAX_POLL_INTERVAL_MS}
    return Consumer({**extra, **timeouts, **_consumer_settings(bootstrap, client_id),
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": auto_commit,
        "auto.commit.interval.ms": AUTO_COMMIT_INTERVAL_MS,
        "enable.auto.offset.store": True,
    })


def keep_report(acks: dict[int, tuple[KafkaError | None, Message]], key: int
                ) -> Callable[[KafkaError | None, Message], None]:
    """An on_delivery callback that keeps its delivery report in `acks` under `key`."""
    def report(err: KafkaError | None, msg: Message) -> None:
        acks[key] = (err, msg)
    return report


UNDECODABLE = -1  # recorded for a record whose value is not one of ours; the checker calls it unexpected


def decode_value(raw: bytes | None) -> int:
    """The integer a workload wrote, or UNDECODABLE for a record no kchaos producer could have written."""
    try:
        return int(raw) if raw is not None else UNDECODABLE
    except ValueError:
        return UNDECODABLE


def to_records(msgs: list[Message], below: int | None = None) -> tuple[list[list[int]], list[str]]:
    """History records `[partition, offset, value]` of consumed messages, and the names of their errors.

    End-of-partition markers are not errors; offsets at or above `below` are left out.
    """
    records: list[list[int]] = []
    errors: list[str] = []
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                errors.append(err.name())
            continue
        # cast: librdkafka sets the partition and offset of every consumed message that is not an error
        p, o = cast(int, m.partition()), cast(int, m.offset())
        if below is None or o < below:
            records.append([p, o, decode_value(m.value())])
    return records, errors
