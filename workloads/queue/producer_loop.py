"""One producer instance keeping up to N sends in flight, every send recorded as its own operation.

Each in-flight slot is its own logical process (as in Jepsen: a process has at
most one operation outstanding), so producer instance `p` with N slots owns
processes `p*N .. p*N+N-1`. A slot invokes a send, hands the record to the
client, and is free again when the delivery report for it arrives; meanwhile
the other slots keep sending, so batching, `linger.ms` and
`max.in.flight.requests.per.connection` work as in an application. With N = 1
this is a synchronous producer: one record, wait for its report, the next.

The loop is paced to a share of the target rate (an infinite rate: every free
slot sends at once) and resumes the rate after a stall instead of bursting to
catch up. It records through a `SendRecorder`:
the history itself (one process) or a per-process stream (a `SendStream`).
"""
from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import KafkaException

from kchaos.core.config import ProducerConfig
from kchaos.workloads.clients import make_producer, send_outcome

# Longest a loop waits inside poll() when it has nothing to send: bounds how late it sees a stop.
IDLE_POLL_S = 0.05
# Most sends made between two polls: bounds how long delivery reports wait to be recorded.
BURST = 1000


class SendRecorder(Protocol):
    """Where a producer loop records its sends; both calls must be cheap and thread-confined."""

    def sent(self, process: int, producer: int, partition: int, value: int) -> None:
        """Record the invocation of a send of `value` to `partition`."""

    def done(self, process: int, producer: int, partition: int, value: int, type_: str,
             offset: int | None, error: str | None) -> None:
        """Record the completion (ok/fail/info) of that process's outstanding send."""


class ProducerLoop:
    """Producer instance `producer` with `in_flight` slots, sending unique values from `values`.

    `run(stop)` sends until `stop()` is true, then waits up to the delivery
    timeout for outstanding reports; sends still unanswered complete as
    `info` ("no delivery report"): they may or may not have been written.
    """

    def __init__(self, bootstrap: str, cfg: ProducerConfig, *, topic: str, partitions: int, producer: int,
                 in_flight: int, rate: float, seed: int, values: Callable[[], int], recorder: SendRecorder):
        self.cfg = cfg
        self.topic = topic
        self.partitions = partitions
        self.producer = producer
        self.base = producer * in_flight
        self.in_flight = in_flight
        self.period = 1.0 / rate
        self.rng = random.Random(f"{seed}/producer/{producer}")
        self.values = values
        self.rec = recorder
        self.free = deque(range(in_flight))
        self.outstanding: dict[int, tuple[int, int]] = {}  # value -> (slot, partition)
        self.client = make_producer(bootstrap, cfg, f"p{producer}", on_delivery=self._report)

    def run(self, stop: Callable[[], bool]) -> None:
        """Send until `stop()`; then drain outstanding reports (see the class docstring)."""
        next_at = time.monotonic()
        poll, free, send = self.client.poll, self.free, self._send
        try:
            while not stop():
                now = time.monotonic()
                if not free or now < next_at:
                    poll(min(IDLE_POLL_S, max(0.0, next_at - now)) if free else IDLE_POLL_S)
                    continue
                # After a long stall (leader failover), resume the rate instead of bursting to catch up.
                next_at = max(next_at, now - 1.0)
                # Send every record that is due and has a free slot, then serve the delivery reports once.
                for _ in range(BURST):
                    if not free or next_at > now:
                        break
                    send(free.popleft())
                    next_at += self.period
                poll(0)
        finally:
            self._finish()

    def _send(self, slot: int) -> None:
        value = self.values()
        partition = self.rng.randrange(self.partitions)
        process = self.base + slot
        self.rec.sent(process, self.producer, partition, value)
        try:
            self.client.produce(self.topic, value=str(value).encode(), partition=partition)
        except (BufferError, KafkaException) as e:
            self.rec.done(process, self.producer, partition, value, "fail", None, f"produce: {e}")
            self.free.append(slot)
            return
        self.outstanding[value] = (slot, partition)

    def _report(self, err, msg) -> None:
        value = int(msg.value())
        entry = self.outstanding.pop(value, None)
        if entry is None:  # already completed as info when the loop gave up waiting
            return
        slot, partition = entry
        if err is None:
            offset = msg.offset()
            self.rec.done(self.base + slot, self.producer, partition, value, "ok",
                          offset if offset is not None and offset >= 0 else None, None)
        else:
            self.rec.done(self.base + slot, self.producer, partition, value, send_outcome(err, self.cfg),
                          None, err.name() or str(err))
        self.free.append(slot)

    def _finish(self) -> None:
        deadline = time.monotonic() + self.cfg.delivery_timeout_ms / 1000 + 5
        while self.outstanding and time.monotonic() < deadline:
            self.client.poll(IDLE_POLL_S)
        for value, (slot, partition) in list(self.outstanding.items()):
            self.rec.done(self.base + slot, self.producer, partition, value, "info", None, "no delivery report")
        self.outstanding.clear()
        self.client.flush(0)
