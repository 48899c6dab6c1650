"""The simulation behind tests/corpora/queue.py: a queue-workload run with anomalies planted by construction.

A run has three phases, as in workloads/queue/workload.py and workloads/drain.py:

- main: sync producers send, consumers assign then poll (capped per
  partition), nemesis ops come and go; invocations and completions of
  different processes interleave. Appends happen at completion, so every
  producer's acks rise. Each planted anomaly is a *block*: a short scripted
  sequence run atomically (its processes first complete whatever they had
  outstanding), built so that it causes exactly its own key and nothing else.
- group (only when committed_unconsumed or double_consumed is planted): two
  consumer group members consume one partition and the group commits
  (tests/corpora/group.py).
- tail: consumers have stopped; a few more sends per partition, read by the
  final read only. Read-bound losses and unseen values are planted here.
- drain: one process reads every partition in batches. A partition's final
  read completes unless it is *incomplete* (all with drain_complete=False,
  else the one partition hosting read-bound and unseen plants); an incomplete
  drain reads everything but the unseen part of the tail, then ends `info`.

The group phase is tests/corpora/group.py; the tail and the drain are tests/corpora/tail.py.
"""
from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from typing import Any

from corpora.group import GROUP_PLANTS, group_phase
from corpora.tail import TAIL_PLANTS, drain_phase, tail_phase

TOPIC = "kchaos"
ANOMALIES = ("lost", "unseen", "acked_offset_mismatch", "duplicate", "inconsistent_offset",
             "unexpected", "failed_visible", "poll_skip", "nonmonotonic_poll", "nonmonotonic_send",
             *GROUP_PLANTS)
# Plant kinds: the anomalies, plus a loss seen only by the read bound (its final read not complete).
PLANTS = ANOMALIES + ("lost_read_bound",)
NEEDS_CONSUMER = ("inconsistent_offset", "poll_skip", "nonmonotonic_poll")
NEEDS_OFFSETS = ("acked_offset_mismatch", "nonmonotonic_send", "lost_read_bound")
POLL_CAP = 50        # records per partition per poll
CONSUMER_WEIGHT = 0.15  # a consumer acts this often relative to a producer
NEMESIS_RATE = 0.002
NEMESIS = "kill-leader"  # the one nemesis the simulation runs
REASSIGN_RATE = 0.01


class Simulation:
    """One seeded run; iterate `ops()` once, then read `labels` (kind -> set of keys)."""

    def __init__(self, seed: int, *, sends: int, partitions: int, producers: int, consumers: int,
                 plant: dict[str, int], acks: str, empty_partitions: int, info_rate: float,
                 fail_rate: float, drain_complete: bool, in_flight: int = 1):
        unknown = set(plant) - set(PLANTS)
        if unknown:
            raise ValueError(f"unknown plant kinds {sorted(unknown)}; known: {PLANTS}")
        wanted = {k for k, n in plant.items() if n}
        if partitions < 1 or producers < 1 or consumers < 0 or empty_partitions < 0 or sends < 0 or in_flight < 1:
            raise ValueError("need partitions, producers, in_flight >= 1; consumers, empty_partitions, sends >= 0")
        if consumers == 0 and wanted & set(NEEDS_CONSUMER):
            raise ValueError(f"{sorted(wanted & set(NEEDS_CONSUMER))} need a consumer")
        if acks == "0" and wanted & set(NEEDS_OFFSETS):
            raise ValueError(f"{sorted(wanted & set(NEEDS_OFFSETS))} need acked offsets (acks=0 has none)")
        self.rng = rng = random.Random(seed)
        self.active, self.total = partitions, partitions + empty_partitions
        # Producer processes: in_flight slots (processes) per producer instance, instance = process // in_flight.
        self.in_flight = in_flight
        self.producers, self.consumers = producers * in_flight, consumers
        self.sends, self.plant = sends, {k: plant.get(k, 0) for k in PLANTS}
        self.offsets, self.info_rate, self.fail_rate = acks != "0", info_rate, fail_rate
        if not drain_complete:
            self.incomplete = set(range(self.total))
        elif wanted & set(TAIL_PLANTS):
            self.incomplete = {rng.randrange(partitions)}
        else:
            self.incomplete = set()
        self.complete_active = [p for p in range(partitions) if p not in self.incomplete]
        if "lost" in wanted and not self.complete_active:
            raise ValueError("lost plants need a partition whose final read completes "
                             "(drain_complete=True and, with tail plants, partitions >= 2)")
        self.labels: dict[str, set[Any]] = {k: set() for k in ANOMALIES}
        self.logs = [array("q") for _ in range(self.total)]
        self.pos = [[0] * self.total for _ in range(consumers)]
        self.assigned = [False] * consumers
        self.pending: dict[int, tuple[Any, ...]] = {}
        self.omit: set[tuple[int, int]] = set()
        self.drain_end: dict[int, int] = {}
        self.out: list[dict[str, Any]] = []
        self.index = self.time = self.value = self.stray = 0

    # --- recording ---------------------------------------------------------------------
    def _emit(self, process: int | str, type_: str, f: str, **fields: Any) -> None:
        self.time += 1000 + int(self.rng.random() * 2_000_000)
        self.out.append({"index": self.index, "time": self.time, "process": process,
                         "type": type_, "f": f, **fields})
        self.index += 1

    def _flush(self) -> list[dict[str, Any]]:
        out, self.out = self.out, []
        return out

    def _new_value(self) -> int:
        self.value += 1
        return self.value

    def _append(self, p: int, v: int) -> int:
        self.logs[p].append(v)
        return len(self.logs[p]) - 1

    def _acked_at(self, o: int | None) -> int | None:
        return o if self.offsets else None

    def _via(self, proc: int) -> dict[str, int]:
        """A send's `producer` field: its instance, when instances have several slots."""
        return {"producer": proc // self.in_flight} if self.in_flight > 1 else {}

    def _slots(self, proc: int) -> range:
        first = proc - proc % self.in_flight
        return range(first, first + self.in_flight)

    # --- the whole run -----------------------------------------------------------------
    def ops(self) -> Iterator[dict[str, Any]]:
        """Every op of the run, in history order."""
        rng = self.rng
        plan = sorted((rng.randint(0, self.sends), kind) for kind in PLANTS
                      if kind not in TAIL_PLANTS + GROUP_PLANTS for _ in range(self.plant[kind]))
        sent, weight = 0, self.producers + CONSUMER_WEIGHT * self.consumers
        while sent < self.sends or plan:
            if plan and plan[0][0] <= sent:
                getattr(self, "_plant_" + plan.pop(0)[1])()
            elif rng.random() < NEMESIS_RATE:
                self._nemesis()
            else:
                r = rng.random() * weight
                if r < self.producers:
                    sent += self._producer_step(int(r), sent < self.sends)
                else:
                    c = min(self.consumers - 1, int((r - self.producers) / CONSUMER_WEIGHT))
                    self._consumer_step(self.producers + c)
            yield from self._flush()
        self._settle(*self.pending)
        yield from self._flush()
        if any(self.plant[k] for k in GROUP_PLANTS):
            group_phase(self)
            yield from self._flush()
        yield from tail_phase(self)
        yield from drain_phase(self, TOPIC)

    def _settle(self, *procs: int) -> None:
        """Complete whatever `procs` have outstanding."""
        for proc in procs:
            if proc in self.pending:
                if proc < self.producers:
                    self._complete_send(proc)
                else:
                    self._complete_consumer(proc)

    def _nemesis(self) -> None:
        self._emit("nemesis", "invoke", "kill", nemesis=NEMESIS, target="leader",
                  partition=self.rng.randrange(self.total), pick=self.rng.getrandbits(31))
        self._emit("nemesis", "ok", "kill", nemesis=NEMESIS, targets=["n1"], nodes=["n1"],
                  value="n1", partition={"n1": ["n2"]}, skipped=[])

    # --- producers ---------------------------------------------------------------------
    def _producer_step(self, proc: int, may_send: bool) -> int:
        """Complete `proc`'s send, or invoke a new one if allowed; return the sends invoked."""
        if proc in self.pending:
            self._complete_send(proc)
            return 0
        if not may_send:
            return 0
        self._invoke_send(proc, self.rng.randrange(self.active))
        return 1

    def _invoke_send(self, proc: int, p: int) -> int:
        """Invoke a send of a new value to `p`, its outcome drawn from the rates; return the value."""
        r = self.rng.random()
        outcome = "fail" if r < self.fail_rate else "info" if r < self.fail_rate + self.info_rate else "ok"
        v = self._new_value()
        self._emit(proc, "invoke", "send", topic=TOPIC, partition=p, value=v, **self._via(proc))
        self.pending[proc] = (p, v, outcome, self.index)
        return v

    def _complete_send(self, proc: int) -> None:
        p, v, outcome, invoked = self.pending[proc]
        # Idempotence keeps an instance's sends to a partition in invocation order: its
        # slots' earlier sends to p are written (and answered) first.
        for _, other in sorted((self.pending[q][3], q) for q in self._slots(proc) if q != proc
                               and q in self.pending and self.pending[q][0] == p and self.pending[q][3] < invoked):
            self._complete_send(other)
        del self.pending[proc]
        via = self._via(proc)
        if outcome == "ok":
            self._emit(proc, "ok", "send", topic=TOPIC, partition=p, value=v,
                      offset=self._acked_at(self._append(p, v)), **via)
        elif outcome == "info":
            if self.rng.random() < 0.5:
                self._append(p, v)
            self._emit(proc, "info", "send", topic=TOPIC, partition=p, value=v,
                      error="KafkaError{code=_MSG_TIMED_OUT}", **via)
        else:
            self._emit(proc, "fail", "send", topic=TOPIC, partition=p, value=v,
                      error="KafkaError{code=MSG_SIZE_TOO_LARGE}", **via)

    def _send_now(self, proc: int, p: int, outcome: str = "ok", *, offset: int | None = None,
                 value: int | None = None) -> int:
        """A whole send of a new value (or `value`) by idle `proc`; the caller appends it."""
        v = self._new_value() if value is None else value
        self._emit(proc, "invoke", "send", topic=TOPIC, partition=p, value=v, **self._via(proc))
        extra = {"offset": self._acked_at(offset)} if outcome == "ok" else {"error": "boom"}
        self._emit(proc, outcome, "send", topic=TOPIC, partition=p, value=v, **extra, **self._via(proc))
        return v

    def _send_appended(self, proc: int, p: int, outcome: str = "ok") -> int:
        """A whole send of a new value by idle `proc`, appended to `p` and acked where it is."""
        v = self._new_value()
        self._send_now(proc, p, outcome, offset=len(self.logs[p]), value=v)
        self._append(p, v)
        return v

    # --- consumers ---------------------------------------------------------------------
    def _consumer_step(self, proc: int) -> None:
        c = proc - self.producers
        if proc in self.pending:
            self._complete_consumer(proc)
        elif not self.assigned[c] or self.rng.random() < REASSIGN_RATE:
            self._emit(proc, "invoke", "assign", topic=TOPIC, partitions=list(range(self.total)))
            self.pending[proc] = ("assign",)
        else:
            self._emit(proc, "invoke", "poll", topic=TOPIC)
            self.pending[proc] = ("poll", self.rng.random() < self.info_rate)

    def _complete_consumer(self, proc: int) -> None:
        c, (what, *info) = proc - self.producers, self.pending.pop(proc)
        if what == "assign":
            # A reassignment restarts a little before where the consumer was.
            pos = self.pos[c]
            for p in range(self.total):
                pos[p] = max(0, pos[p] - self.rng.randint(0, 3)) if self.assigned[c] else 0
            self.assigned[c] = True
            self._emit(proc, "ok", "assign", topic=TOPIC, partitions=list(range(self.total)))
        elif info[0]:
            self._emit(proc, "info", "poll", topic=TOPIC, error="consumer closed")
        else:
            order = list(range(self.total))
            self.rng.shuffle(order)
            records: list[list[int]] = []
            for p in order:
                start = self.pos[c][p]
                end = min(len(self.logs[p]), start + POLL_CAP)
                records += self._read(c, p, start, end)
            self._emit(proc, "ok", "poll", topic=TOPIC, records=records)

    def _read(self, c: int, p: int, start: int, end: int) -> list[list[int]]:
        log = self.logs[p]
        self.pos[c][p] = end
        return [[p, o, log[o]] for o in range(start, end)]

    def _ready_consumer(self) -> int:
        """An idle, assigned consumer process."""
        proc = self.producers + self.rng.randrange(self.consumers)
        self._settle(proc)
        if not self.assigned[proc - self.producers]:
            self._consumer_step(proc)
            self._complete_consumer(proc)
        return proc

    def _poll_now(self, proc: int, p: int, start: int) -> tuple[int, int]:
        """An ok poll by idle `proc` of partition `p` from `start` to its end; (first, last) offset."""
        end = len(self.logs[p])
        self._emit(proc, "invoke", "poll", topic=TOPIC)
        self._emit(proc, "ok", "poll", topic=TOPIC, records=self._read(proc - self.producers, p, start, end))
        return start, end - 1

    def _ready_producer(self) -> int:
        """An idle producer process whose instance has nothing outstanding either."""
        proc = self.rng.randrange(self.producers)
        self._settle(*self._slots(proc))
        return proc

    # --- plants in the main phase (one block each, exactly one key) -----------------------
    def _plant_lost(self) -> None:
        # Acked, polled if there is a consumer, then missing from its partition's complete final read.
        x, p = self._ready_producer(), self.rng.choice(self.complete_active)
        o = len(self.logs[p])
        v = self._send_appended(x, p)
        if self.consumers:
            c = self._ready_consumer()
            self._poll_now(c, p, self.pos[c - self.producers][p])
        self.omit.add((p, o))
        self.labels["lost"].add(v)

    def _plant_acked_offset_mismatch(self) -> None:
        # w (info) lands at o, v right after it, but v's ack says o.
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        o = len(self.logs[p])
        self._send_appended(x, p, "info")
        v = self._send_now(x, p, offset=o)
        self._append(p, v)
        self.labels["acked_offset_mismatch"].add(v)

    def _plant_duplicate(self) -> None:
        # A retried send written twice; the ack names the second copy.
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        v = self._send_now(x, p, offset=len(self.logs[p]) + 1)
        self._append(p, v)
        self._append(p, v)
        self.labels["duplicate"].add(v)

    def _plant_inconsistent_offset(self) -> None:
        # A consumer reads info-sent w1 at o; later readers find info-sent w2 there instead.
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        o = len(self.logs[p])
        self._send_appended(x, p, "info")
        c = self._ready_consumer()
        self._poll_now(c, p, self.pos[c - self.producers][p])
        self.logs[p][o] = self._send_now(x, p, "info")
        self.labels["inconsistent_offset"].add((p, o))

    def _plant_unexpected(self) -> None:
        self.stray += 1
        self._append(self.rng.randrange(self.active), -self.stray)
        self.labels["unexpected"].add(-self.stray)

    def _plant_failed_visible(self) -> None:
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        self.labels["failed_visible"].add(self._send_appended(x, p, "fail"))

    def _plant_poll_skip(self) -> None:
        # The consumer's next poll starts k acked offsets past where its last one ended.
        x, p, k = self._ready_producer(), self.rng.randrange(self.active), self.rng.randint(1, 3)
        self._send_appended(x, p)
        c = self._ready_consumer()
        _, e = self._poll_now(c, p, self.pos[c - self.producers][p])
        for _ in range(k + 1):
            self._send_appended(x, p)
        s, _ = self._poll_now(c, p, e + 1 + k)
        self.labels["poll_skip"].add((c, p, e, s))

    def _plant_nonmonotonic_poll(self) -> None:
        # The consumer's next poll goes back k offsets.
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        self._send_appended(x, p)
        c = self._ready_consumer()
        _, e = self._poll_now(c, p, self.pos[c - self.producers][p])
        s, _ = self._poll_now(c, p, e + 1 - self.rng.randint(1, min(3, e + 1)))
        self.labels["nonmonotonic_poll"].add((c, p, e, s))

    def _plant_nonmonotonic_send(self) -> None:
        # v1 is acked at L+1 and v2, invoked after it through the same producer, at L. With
        # several slots per instance, v1 and v2 go through different slots and overlap.
        x, p = self._ready_producer(), self.rng.randrange(self.active)
        end = len(self.logs[p])
        if self.in_flight == 1:
            v1 = self._send_now(x, p, offset=end + 1)
            v2 = self._send_now(x, p, offset=end)
        else:
            y = self._slots(x)[(x + 1) % self.in_flight]
            v1, v2 = self._new_value(), self._new_value()
            self._emit(x, "invoke", "send", topic=TOPIC, partition=p, value=v1, **self._via(x))
            self._emit(y, "invoke", "send", topic=TOPIC, partition=p, value=v2, **self._via(y))
            self._emit(y, "ok", "send", topic=TOPIC, partition=p, value=v2, offset=end, **self._via(y))
            self._emit(x, "ok", "send", topic=TOPIC, partition=p, value=v1, offset=end + 1, **self._via(x))
        self._append(p, v2)
        self._append(p, v1)
        self.labels["nonmonotonic_send"].add(v2)
